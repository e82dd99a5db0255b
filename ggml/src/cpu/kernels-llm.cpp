// Kernels of the LLM ops (ops-llm.cpp): set/acc, gated linear units, argsort/top_k and the
// mixture-of-experts matmul. set/acc and mul_mat_id reuse the copy, add and matmul kernels.
#include "kernels.h"
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

using namespace kvg;

namespace {

// ---- set / acc ----------------------------------------------------------------------------
// The region as a tensor of its own (a stack copy of dst with b's shape and the region's
// strides): the copy and add kernels then do the work, with their type conversions and
// their split of rows over tasks.
ggml_tensor region_of(ggml_tensor * dst, const ggml_set_region & g) {
    ggml_tensor r = *dst;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        r.ne[i] = g.ne[i];
        r.nb[i] = g.nb[i];
    }
    r.data = (char *) dst->data + g.offset;
    std::memset(r.src, 0, sizeof(r.src));
    return r;
}

} // namespace

int ggml_set_n_phases(const ggml_tensor * dst) { return ggml_get_set_region(dst).inplace ? 1 : 2; }

// Not in place: phase 0 copies a into dst. Last phase: b into (set) or onto (acc) the region.
void ggml_compute_forward_set(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_set_region g = ggml_get_set_region(dst);
    if (!g.inplace && params->phase == 0) {
        ggml_tensor copy = *dst;
        copy.op = GGML_OP_DUP;
        copy.src[1] = nullptr;
        ggml_compute_forward_dup(params, &copy);
        return;
    }
    if (g.nbytes == 0) return;
    ggml_tensor region = region_of(dst, g);
    if (dst->op == GGML_OP_SET) {
        region.op = GGML_OP_CPY;
        region.src[0] = dst->src[1];
        ggml_compute_forward_dup(params, &region);
        return;
    }
    ggml_tensor current = region; // acc: region = region + b, row by row in place
    region.op = GGML_OP_ADD;
    region.src[0] = &current;
    region.src[1] = dst->src[1];
    ggml_compute_forward_binary(params, &region);
}

// ---- gated linear units ---------------------------------------------------------------------
void ggml_compute_forward_glu(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const ggml_glu_op op = ggml_get_glu_op(dst);
    const bool swapped = ggml_get_op_params_i32(dst, 1) != 0;
    const float alpha = ggml_get_op_params_f32(dst, 2), limit = ggml_get_op_params_f32(dst, 3);
    static const ggml_unary_op act_of[GGML_GLU_OP_COUNT] = {GGML_UNARY_OP_RELU, GGML_UNARY_OP_GELU, GGML_UNARY_OP_SILU,
                                                           GGML_UNARY_OP_SILU, GGML_UNARY_OP_GELU_ERF, GGML_UNARY_OP_GELU_QUICK};
    GGML_ASSERT(op >= 0 && op < GGML_GLU_OP_SWIGLU_CLAMP); // the executor refuses the others (supports.cpp)
    float (*act)(float) = ggml_cpu_unary_scalar(act_of[op]);
    const int64_t nc = dst->ne[0];
    GGML_ASSERT(ggml_nrows(dst) == ggml_nrows(a) && nc <= (b ? a->ne[0] : a->ne[0] / 2));
    std::vector<float> x(nc), gate(nc);
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const char * xr = nth_row(a, r);
        const char * gr = b ? nth_row(b, r) : xr;
        if (!b) (swapped ? xr : gr) += nc * a->nb[0]; // the second half of a's row
        ggml_cpu_load_row(a, xr, nc, x.data());
        ggml_cpu_load_row(b ? b : a, gr, nc, gate.data());
        for (int64_t i = 0; i < nc; ++i) {
            if (op == GGML_GLU_OP_SWIGLU_OAI) { // gpt-oss: clamped, and the gate shifted by one
                const float xi = std::min(x[i], limit), gi = std::min(std::max(gate[i], -limit), limit);
                x[i] = xi / (1.0f + std::exp(-alpha * xi)) * (gi + 1.0f);
            } else {
                x[i] = act(x[i]) * gate[i];
            }
        }
        ggml_cpu_store_row(dst, nth_row(dst, r), nc, x.data());
    }
}

// ---- argsort / top_k --------------------------------------------------------------------------
// Row by row: indices ordered by value (ASC or DESC), NaNs last, ties by index. The tie
// rule makes the order total, so top_k's partial sort equals the head of the full sort.
void ggml_compute_forward_argsort(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(dst->type == GGML_TYPE_I32 && dst->nb[0] == sizeof(int32_t) && ggml_nrows(dst) == ggml_nrows(a));
    const bool desc = dst->op == GGML_OP_TOP_K || ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const int64_t n = a->ne[0], k = dst->ne[0];
    GGML_ASSERT(k <= n);
    std::vector<float> v(n);
    std::vector<int32_t> idx(n);
    auto before = [&](int32_t i, int32_t j) {
        const float x = v[i], y = v[j];
        if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? i < j : !std::isnan(x);
        if (x != y) return desc ? x > y : x < y;
        return i < j;
    };
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        ggml_cpu_load_row(a, nth_row(a, r), n, v.data());
        std::iota(idx.begin(), idx.end(), 0);
        if (k < n) std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
        else std::sort(idx.begin(), idx.end(), before);
        std::memcpy(nth_row(dst, r), idx.data(), (size_t) k * sizeof(int32_t));
    }
}

// ---- mul_mat_id ----------------------------------------------------------------------------------
// dst[:, e, t] = as[:, :, ids[e, t]] x b[:, e % ne11, t]. Phase 0 (when needed) converts the
// rows of b into the weights' vec_dot_type, as mul_mat does; phase 1 runs one-column
// matmul tiles of kvgraph's matmul kernels over blocks of expert rows.
namespace {

constexpr size_t MMID_ALIGN = 64;
constexpr int64_t MMID_BLOCK = 64; // expert rows per work item

struct mmid_info {
    const ggml_tensor * as, * b, * ids;
    ggml_type vdt;
    bool convert;    // b's rows go through wdata
    size_t x_stride; // bytes between converted rows
    int64_t K, N, n_used, n_tok;
};

mmid_info mmid_inspect(const ggml_tensor * dst) {
    mmid_info m;
    m.as = dst->src[0];
    m.b = dst->src[1];
    m.ids = dst->src[2];
    mm_type_of(m.as->type); // aborts for weight types without a matmul kernel
    if (is_r16(m.as->type)) GGML_ABORT("mul_mat_id: %s weights are for ggml_mul_mat only", ggml_type_name(m.as->type));
    GGML_ASSERT(m.b->type == GGML_TYPE_F32 && m.ids->type == GGML_TYPE_I32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(m.as->nb[0] == ggml_type_size(m.as->type) && dst->nb[0] == sizeof(float));
    m.K = m.as->ne[0];
    m.N = m.as->ne[1];
    m.n_used = m.ids->ne[0];
    m.n_tok = m.ids->ne[1];
    GGML_ASSERT(m.K % ggml_blck_size(m.as->type) == 0);
    GGML_ASSERT(dst->ne[0] == m.N && dst->ne[1] == m.n_used && dst->ne[2] == m.n_tok && m.b->ne[2] == m.n_tok);
    m.vdt = mm_vec_dot_type(m.as->type);
    m.convert = m.vdt != GGML_TYPE_F32 || !ggml_is_contiguous_rows(m.b);
    m.x_stride = GGML_PAD(ggml_row_size(m.vdt, m.K), MMID_ALIGN);
    return m;
}

char * mmid_conv(void * wdata) { return (char *) (((uintptr_t) wdata + MMID_ALIGN - 1) & ~(uintptr_t) (MMID_ALIGN - 1)); }

void mmid_convert(const ggml_compute_params * params, const mmid_info & m) {
    const ggml_tensor * b = m.b;
    const ggml_from_float_t from_float = ggml_get_type_traits_cpu(m.vdt)->from_float;
    std::vector<float> tmp(m.K);
    const task_range rows = split_rows(b->ne[1] * b->ne[2], params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const char * src = row_at(b, r % b->ne[1], r / b->ne[1], 0);
        for (int64_t i = 0; i < m.K; ++i) std::memcpy(&tmp[i], src + i * b->nb[0], sizeof(float));
        from_float(tmp.data(), mmid_conv(params->wdata) + r * m.x_stride, m.K);
    }
}

} // namespace

int ggml_mul_mat_id_n_phases(const ggml_tensor * dst) { return mmid_inspect(dst).convert ? 2 : 1; }

size_t ggml_mul_mat_id_work_size(const ggml_tensor * dst, int n_tasks) {
    GGML_UNUSED(n_tasks);
    const mmid_info m = mmid_inspect(dst);
    return m.convert ? MMID_ALIGN + m.x_stride * (size_t) (m.b->ne[1] * m.b->ne[2]) : 0;
}

void ggml_compute_forward_mul_mat_id(const ggml_compute_params * params, ggml_tensor * dst) {
    const mmid_info m = mmid_inspect(dst);
    if (m.convert) {
        GGML_ASSERT(params->wdata && params->wsize >= ggml_mul_mat_id_work_size(dst, params->nth));
        if (params->phase == 0) {
            mmid_convert(params, m);
            return;
        }
    }
    const mm_kernel & mk = cpu_active_kernels().mm[mm_type_of(m.as->type)];
    const int64_t n_blk = (m.N + MMID_BLOCK - 1) / MMID_BLOCK, ne11 = m.b->ne[1];
    const task_range items = split_rows(m.n_tok * m.n_used * n_blk, params->ith, params->nth);
    for (int64_t u = items.begin; u < items.end; ++u) {
        const int64_t blk = u % n_blk, e = (u / n_blk) % m.n_used, t = u / (n_blk * m.n_used);
        int32_t expert;
        std::memcpy(&expert, (const char *) m.ids->data + e * m.ids->nb[0] + t * m.ids->nb[1], sizeof(expert));
        if (expert < 0 || expert >= m.as->ne[2]) GGML_ABORT("mul_mat_id: expert id %d outside [0, %lld)", expert, (long long) m.as->ne[2]);
        const int64_t i11 = e % ne11;
        const char * x = m.convert ? mmid_conv(params->wdata) + (t * ne11 + i11) * m.x_stride : row_at(m.b, i11, t, 0);
        const char * w = (const char *) m.as->data + expert * m.as->nb[2];
        float * out = (float *) ((char *) dst->data + e * dst->nb[1] + t * dst->nb[2]);
        const int64_t n1 = std::min(m.N, (blk + 1) * MMID_BLOCK);
        const int rows = mk.mv_float ? mk.mv_rows : mm_one_row_height(mk); // tile[rows][1] exists
        for (int64_t i = blk * MMID_BLOCK; i < n1; i += rows) {
            const int rn = (int) std::min<int64_t>(rows, n1 - i);
            const mm_tile_args args = {m.K, w + i * m.as->nb[1], m.as->nb[1], x, 0, out + i, 1, false, rn};
            if (mk.mv_float) mk.mv_float(args); // f32 rows: float weights only
            else mk.tile[rn][1](args);
        }
    }
}
