// Kernels that move data: dup/cpy/cont (with type conversion), get_rows, set_rows, concat.
//
// Copies follow ggml's semantics: elements are taken in the logical row-major order of
// the source (ne[0] fastest) and stored in the logical row-major order of the
// destination, whatever the two shapes and strides are. Quantized tensors are seen as
// sequences of blocks ("units"); their rows must be dense.
#include "ggml-cpu.h"
#include "kernels.h"
#include "types.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

// ---- element access for the non-quantized types -------------------------------------------

bool has_scalar_access(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: return true;
        default: return false;
    }
}

inline float load_f32(ggml_type t, const char * p) {
    switch (t) {
        case GGML_TYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
        case GGML_TYPE_F16: { ggml_fp16_t v; std::memcpy(&v, p, 2); return ggml_fp16_to_fp32(v); }
        case GGML_TYPE_BF16: { ggml_bf16_t v; std::memcpy(&v, p, 2); return ggml_bf16_to_fp32(v); }
        case GGML_TYPE_I8: return (float) *(const int8_t *) p;
        case GGML_TYPE_I16: { int16_t v; std::memcpy(&v, p, 2); return (float) v; }
        case GGML_TYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return (float) v; }
        default: GGML_ABORT("copy: cannot read elements of type %s", ggml_type_name(t));
    }
}

inline void store_f32(ggml_type t, char * p, float v) {
    switch (t) {
        case GGML_TYPE_F32: std::memcpy(p, &v, 4); break;
        case GGML_TYPE_F16: { const ggml_fp16_t h = ggml_fp32_to_fp16(v); std::memcpy(p, &h, 2); break; }
        case GGML_TYPE_BF16: { const ggml_bf16_t h = ggml_fp32_to_bf16(v); std::memcpy(p, &h, 2); break; }
        case GGML_TYPE_I8: *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_I16: { const int16_t i = (int16_t) v; std::memcpy(p, &i, 2); break; }
        case GGML_TYPE_I32: { const int32_t i = (int32_t) v; std::memcpy(p, &i, 4); break; }
        default: GGML_ABORT("copy: cannot write elements of type %s", ggml_type_name(t));
    }
}

void check_convertible(const ggml_tensor * t, const char * op) {
    if (ggml_is_quantized(t->type)) {
        if (!kvg::row_decoder(t->type)) { // interleaved (r16) types: rows spread over groups, for ggml_mul_mat only
            GGML_ABORT("%s: tensor '%s' is %s, which has no row conversion", op, t->name, ggml_type_name(t->type));
        }
        if (!row_is_dense(t)) {
            GGML_ABORT("%s: quantized tensor '%s' (%s) must have dense rows", op, t->name, ggml_type_name(t->type));
        }
        return;
    }
    if (!has_scalar_access(t->type)) {
        GGML_ABORT("%s: type %s of tensor '%s' is not supported", op, ggml_type_name(t->type), t->name);
    }
}

// n elements of a row (elements nb0 apart) -> floats. Quantized rows: whole blocks.
void row_to_f32(const ggml_tensor * t, const char * row, int64_t n, float * out) {
    const ggml_to_float_t to_float = kvg::row_decoder(t->type);
    if (to_float && row_is_dense(t)) {
        to_float(row, out, n);
        return;
    }
    const size_t nb0 = t->nb[0];
    for (int64_t i = 0; i < n; ++i) out[i] = load_f32(t->type, row + i * nb0);
}

// floats -> n elements of a row; quantizes whole rows (row must be dense then) with the
// CPU's vector quantizer where there is one (bit-identical to the reference)
void row_from_f32(const ggml_tensor * t, char * row, int64_t n, const float * in) {
    const ggml_type_traits * tr = ggml_get_type_traits(t->type);
    if (tr->from_float_ref && row_is_dense(t)) {
        const ggml_from_float_t from_float = ggml_get_type_traits_cpu(t->type)->from_float;
        if ((const void *) in != (const void *) row) (from_float ? from_float : tr->from_float_ref)(in, row, n);
        return;
    }
    const size_t nb0 = t->nb[0];
    for (int64_t i = 0; i < n; ++i) store_f32(t->type, row + i * nb0, in[i]);
}

// n units of usize bytes, strides ds / ss
void copy_units(char * d, size_t ds, const char * s, size_t ss, int64_t n, size_t usize) {
    if (d == s && ds == ss) return; // copying onto itself (dup_inplace)
    if (ds == usize && ss == usize) {
        std::memmove(d, s, n * usize);
        return;
    }
    switch (usize) {
        case 2:
            for (int64_t i = 0; i < n; ++i) { uint16_t v; std::memcpy(&v, s + i * ss, 2); std::memcpy(d + i * ds, &v, 2); }
            break;
        case 4:
            for (int64_t i = 0; i < n; ++i) { uint32_t v; std::memcpy(&v, s + i * ss, 4); std::memcpy(d + i * ds, &v, 4); }
            break;
        case 8:
            for (int64_t i = 0; i < n; ++i) { uint64_t v; std::memcpy(&v, s + i * ss, 8); std::memcpy(d + i * ds, &v, 8); }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds, s + i * ss, usize);
            break;
    }
}

// A tensor as a 4-d array of units: elements, or blocks for quantized types.
struct unit_layout {
    int64_t ne[4];
    size_t nb[4];
    size_t usize;
    const char * data;
};

unit_layout units_of(const ggml_tensor * t) {
    unit_layout u;
    const int64_t bs = ggml_blck_size(t->type);
    for (int i = 0; i < 4; ++i) { u.ne[i] = t->ne[i]; u.nb[i] = t->nb[i]; }
    u.ne[0] /= bs;
    u.usize = ggml_type_size(t->type);
    u.data = (const char *) t->data;
    return u;
}

// Walks n units of u in logical order from linear unit index `start`, calling
// fn(row, i0, len) for each piece: units [i0, i0+len) of the row starting at `row`.
template <class F>
void walk_units(const unit_layout & u, int64_t start, int64_t n, F && fn) {
    int64_t i0 = start % u.ne[0];
    int64_t r = start / u.ne[0];
    int64_t i1 = r % u.ne[1];
    r /= u.ne[1];
    int64_t i2 = r % u.ne[2];
    int64_t i3 = r / u.ne[2];
    while (n > 0) {
        const int64_t len = std::min(n, u.ne[0] - i0);
        fn(u.data + i1 * u.nb[1] + i2 * u.nb[2] + i3 * u.nb[3], i0, len);
        n -= len;
        i0 = 0;
        if (++i1 == u.ne[1]) {
            i1 = 0;
            if (++i2 == u.ne[2]) { i2 = 0; ++i3; }
        }
    }
}

// Same type: units are copied bit for bit (no rounding, NaN payloads kept).
void dup_same_type(const ggml_compute_params * params, ggml_tensor * dst, const ggml_tensor * src) {
    const unit_layout su = units_of(src);
    const unit_layout du = units_of(dst);
    const int64_t dne0 = du.ne[0];
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        char * drow = nth_row(dst, r);
        int64_t j = 0;
        walk_units(su, r * dne0, dne0, [&](const char * srow, int64_t i0, int64_t len) {
            copy_units(drow + j * du.nb[0], du.nb[0], srow + i0 * su.nb[0], su.nb[0], len, su.usize);
            j += len;
        });
    }
}

// Different types: each destination row is gathered as floats, then converted/quantized.
void dup_convert(const ggml_compute_params * params, ggml_tensor * dst, const ggml_tensor * src) {
    check_convertible(src, "cpy");
    check_convertible(dst, "cpy");
    const bool src_q = ggml_is_quantized(src->type);
    // walk the source in elements; quantized rows are dequantized whole and cached
    unit_layout se = units_of(src);
    se.ne[0] = src->ne[0];
    const int64_t dne0 = dst->ne[0];
    const bool dst_f32_dense = dst->type == GGML_TYPE_F32 && row_is_dense(dst);
    const bool src_f32_dense = src->type == GGML_TYPE_F32 && row_is_dense(src);

    std::vector<float> buf(dst_f32_dense ? 0 : dne0);
    std::vector<float> srow_cache(src_q ? src->ne[0] : 0);
    const char * cached = nullptr;

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        char * drow = nth_row(dst, r);
        float * out = dst_f32_dense ? (float *) drow : buf.data();
        const float * vals = out;
        int64_t j = 0;
        walk_units(se, r * dne0, dne0, [&](const char * srow, int64_t i0, int64_t len) {
            if (src_q) {
                if (srow != cached) {
                    ggml_get_type_traits(src->type)->to_float(srow, srow_cache.data(), src->ne[0]);
                    cached = srow;
                }
                std::memcpy(out + j, srow_cache.data() + i0, len * sizeof(float));
            } else if (src_f32_dense && len == dne0 && !dst_f32_dense) {
                vals = (const float *) (srow + i0 * sizeof(float)); // whole row readable in place
            } else {
                row_to_f32(src, srow + i0 * src->nb[0], len, out + j);
            }
            j += len;
        });
        if (!dst_f32_dense) row_from_f32(dst, drow, dne0, vals);
    }
}

} // namespace

void ggml_compute_forward_dup(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_nelements(src) != ggml_nelements(dst)) {
        GGML_ABORT("%s: '%s' has %lld elements but '%s' has %lld", ggml_op_name(dst->op), src->name,
                   (long long) ggml_nelements(src), dst->name, (long long) ggml_nelements(dst));
    }
    if (ggml_is_empty(dst)) return;
    if (ggml_is_quantized(dst->type) && !row_is_dense(dst)) {
        GGML_ABORT("%s: quantized destination '%s' must have dense rows", ggml_op_name(dst->op), dst->name);
    }
    if (src->type == dst->type) {
        if (ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
            // one dense byte range on both sides: split it into unit-aligned chunks
            const size_t usize = ggml_type_size(dst->type);
            const size_t n_units = ggml_nbytes(dst) / usize;
            const task_range part = split_rows((int64_t) n_units, params->ith, params->nth);
            if (part.end > part.begin && src->data != dst->data) {
                std::memmove((char *) dst->data + part.begin * usize, (const char *) src->data + part.begin * usize,
                             (part.end - part.begin) * usize);
            }
            return;
        }
        if (ggml_is_quantized(src->type) && !row_is_dense(src)) {
            GGML_ABORT("%s: quantized source '%s' must have dense rows", ggml_op_name(dst->op), src->name);
        }
        dup_same_type(params, dst, src);
        return;
    }
    dup_convert(params, dst, src);
}

// ---- get_rows: dst[:, i10, i11, i12] = src0[:, rows[i10, i11, i12], i11, i12] ---------------------

void ggml_compute_forward_get_rows(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src1->type == GGML_TYPE_I32);
    GGML_ASSERT(dst->ne[0] == src0->ne[0] && dst->ne[1] == src1->ne[0] && dst->ne[2] == src1->ne[1] && dst->ne[3] == src1->ne[2]);
    GGML_ASSERT(src0->ne[2] == src1->ne[1] && src0->ne[3] == src1->ne[2]);
    const bool same = src0->type == dst->type;
    if (!same) {
        check_convertible(src0, "get_rows");
        check_convertible(dst, "get_rows");
    }
    const int64_t ne00 = src0->ne[0];
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1];
    const bool dst_f32_dense = dst->type == GGML_TYPE_F32 && row_is_dense(dst);
    std::vector<float> buf(same || dst_f32_dense ? 0 : ne00);

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i10 = r % ne10;
        const int64_t i11 = (r / ne10) % ne11;
        const int64_t i12 = r / (ne10 * ne11);
        int32_t idx;
        std::memcpy(&idx, (const char *) src1->data + i10 * src1->nb[0] + i11 * src1->nb[1] + i12 * src1->nb[2], 4);
        if (idx < 0 || idx >= src0->ne[1]) {
            GGML_ABORT("get_rows: index %d at [%lld, %lld, %lld] of '%s' is out of range [0, %lld) of '%s'", idx,
                       (long long) i10, (long long) i11, (long long) i12, src1->name, (long long) src0->ne[1], src0->name);
        }
        const char * srow = (const char *) src0->data + idx * src0->nb[1] + i11 * src0->nb[2] + i12 * src0->nb[3];
        char * drow = (char *) dst->data + i10 * dst->nb[1] + i11 * dst->nb[2] + i12 * dst->nb[3];
        if (same) {
            const unit_layout u = units_of(src0);
            copy_units(drow, dst->nb[0], srow, src0->nb[0], u.ne[0], u.usize);
        } else if (dst_f32_dense) {
            row_to_f32(src0, srow, ne00, (float *) drow);
        } else {
            row_to_f32(src0, srow, ne00, buf.data());
            row_from_f32(dst, drow, ne00, buf.data());
        }
    }
}

// ---- set_rows: dst[:, idx[i01, i02 % ne11, i03 % ne12], i02, i03] = src0[:, i01, i02, i03] ---------

void ggml_compute_forward_set_rows(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src1->type == GGML_TYPE_I32 || src1->type == GGML_TYPE_I64);
    GGML_ASSERT(dst->ne[0] == src0->ne[0] && src0->ne[1] == src1->ne[0]);
    GGML_ASSERT(dst->ne[2] == src0->ne[2] && dst->ne[3] == src0->ne[3]);
    GGML_ASSERT(src0->ne[2] % src1->ne[1] == 0 && src0->ne[3] % src1->ne[2] == 0);
    check_convertible(src0, "set_rows");
    check_convertible(dst, "set_rows");
    const int64_t ne00 = src0->ne[0], ne01 = src0->ne[1], ne02 = src0->ne[2];
    const int64_t ne11 = src1->ne[1], ne12 = src1->ne[2];
    const bool src_f32_dense = src0->type == GGML_TYPE_F32 && row_is_dense(src0);
    std::vector<float> buf(src_f32_dense ? 0 : ne00);

    // split over source rows (the destination rows are only known at run time)
    const task_range rows = split_rows(ggml_nrows(src0), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i01 = r % ne01;
        const int64_t i02 = (r / ne01) % ne02;
        const int64_t i03 = r / (ne01 * ne02);
        const char * ip = (const char *) src1->data + i01 * src1->nb[0] + (i02 % ne11) * src1->nb[1] + (i03 % ne12) * src1->nb[2];
        int64_t idx;
        if (src1->type == GGML_TYPE_I32) {
            int32_t v;
            std::memcpy(&v, ip, 4);
            idx = v;
        } else {
            std::memcpy(&idx, ip, 8);
        }
        if (idx < 0 || idx >= dst->ne[1]) {
            GGML_ABORT("set_rows: index %lld for row %lld of '%s' is out of range [0, %lld) of destination '%s'",
                       (long long) idx, (long long) i01, src0->name, (long long) dst->ne[1], dst->name);
        }
        const char * srow = (const char *) src0->data + i01 * src0->nb[1] + i02 * src0->nb[2] + i03 * src0->nb[3];
        char * drow = (char *) dst->data + idx * dst->nb[1] + i02 * dst->nb[2] + i03 * dst->nb[3];
        const float * vals = (const float *) srow;
        if (!src_f32_dense) {
            row_to_f32(src0, srow, ne00, buf.data());
            vals = buf.data();
        }
        row_from_f32(dst, drow, ne00, vals);
    }
}

// ---- concat -------------------------------------------------------------------------------------

void ggml_compute_forward_concat(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int dim = ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS);
    GGML_ASSERT(a->type == dst->type && b->type == dst->type);
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        GGML_ASSERT(dst->ne[d] == (d == dim ? a->ne[d] + b->ne[d] : a->ne[d]) && (d == dim || b->ne[d] == a->ne[d]));
    }
    if (ggml_is_quantized(dst->type)) {
        GGML_ASSERT(row_is_dense(a) && row_is_dense(b) && row_is_dense(dst));
    }
    const unit_layout ua = units_of(a), ub = units_of(b), ud = units_of(dst);
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        int64_t i[4] = {0, r % dst->ne[1], (r / dst->ne[1]) % dst->ne[2], r / (dst->ne[1] * dst->ne[2])};
        char * drow = (char *) dst->data + i[1] * ud.nb[1] + i[2] * ud.nb[2] + i[3] * ud.nb[3];
        if (dim == 0) {
            const char * ra = ua.data + i[1] * ua.nb[1] + i[2] * ua.nb[2] + i[3] * ua.nb[3];
            const char * rb = ub.data + i[1] * ub.nb[1] + i[2] * ub.nb[2] + i[3] * ub.nb[3];
            copy_units(drow, ud.nb[0], ra, ua.nb[0], ua.ne[0], ud.usize);
            copy_units(drow + ua.ne[0] * ud.nb[0], ud.nb[0], rb, ub.nb[0], ub.ne[0], ud.usize);
            continue;
        }
        const unit_layout * s = &ua;
        if (i[dim] >= a->ne[dim]) {
            i[dim] -= a->ne[dim];
            s = &ub;
        }
        const char * srow = s->data + i[1] * s->nb[1] + i[2] * s->nb[2] + i[3] * s->nb[3];
        copy_units(drow, ud.nb[0], srow, s->nb[0], ud.ne[0], ud.usize);
    }
}
