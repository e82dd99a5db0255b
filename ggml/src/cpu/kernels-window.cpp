// SAM's windowed attention: win_part, win_unpart, get_rel_pos (element copies of any
// non-block type, through strides) and add_rel_pos (F32). Each task writes whole rows of
// dst (split_rows).
#include "kernels.h"

#include <cstring>

namespace {

char * elem(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// Copies ne0 elements of row (i1, i2, i3) of src (nullptr: zeros) into row r of dst.
void copy_row(ggml_tensor * dst, int64_t r, const ggml_tensor * src, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t d1 = r % dst->ne[1], d2 = (r / dst->ne[1]) % dst->ne[2], d3 = r / (dst->ne[1] * dst->ne[2]);
    const size_t es = ggml_type_size(dst->type);
    for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
        char * y = elem(dst, i0, d1, d2, d3);
        if (src) std::memcpy(y, elem(src, i0, i1, i2, i3), es);
        else std::memset(y, 0, es);
    }
}

void check_same_type(const ggml_tensor * dst) {
    if (dst->src[0]->type != dst->type) {
        GGML_ABORT("%s: '%s' is %s but dst is %s", ggml_op_name(dst->op), dst->src[0]->name, ggml_type_name(dst->src[0]->type),
                   ggml_type_name(dst->type));
    }
}

} // namespace

// dst [C, w, w, npx*npy]: window p = py*npx + px holds a's positions (px*w + i1, py*w + i2),
// zeros past a's edge.
void ggml_compute_forward_win_part(const ggml_compute_params * params, ggml_tensor * dst) {
    check_same_type(dst);
    const ggml_tensor * a = dst->src[0];
    const int64_t npx = ggml_get_op_params_i32(dst, 0), w = ggml_get_op_params_i32(dst, 2);
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % w, i2 = (r / w) % w, p = r / (w * w);
        const int64_t x = (p % npx) * w + i1, y = (p / npx) * w + i2;
        copy_row(dst, r, x < a->ne[1] && y < a->ne[2] ? a : nullptr, x, y, 0);
    }
}

// dst [C, w0, h0]: position (x, y) comes from window (y/w)*npx + x/w at (x%w, y%w).
void ggml_compute_forward_win_unpart(const ggml_compute_params * params, ggml_tensor * dst) {
    check_same_type(dst);
    const ggml_tensor * a = dst->src[0];
    const int64_t w = ggml_get_op_params_i32(dst, 0), npx = (dst->ne[1] + w - 1) / w;
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t x = r % dst->ne[1], y = r / dst->ne[1];
        copy_row(dst, r, a, x % w, y % w, (y / w) * npx + x / w);
    }
}

// dst [C, k, k]: row (i1, i2) is row (k - 1) + i2 - i1 of a [C, 2k - 1].
void ggml_compute_forward_get_rel_pos(const ggml_compute_params * params, ggml_tensor * dst) {
    check_same_type(dst);
    const ggml_tensor * a = dst->src[0];
    const int64_t k = dst->ne[1];
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % k, i2 = r / k;
        copy_row(dst, r, a, k - 1 + i2 - i1, 0, 0);
    }
}

// dst [k*k, qw*qh, B]: element (kw, kh) of row (qw, qh, b) is a's + ph[kh] + pw[kw] of row
// (qw, qh, b) of ph and pw [k, qw, qh, B]; summed in ggml's order (the index that is
// smaller first, ph first on the diagonal), so results are bit-identical to ggml's.
void ggml_compute_forward_add_rel_pos(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * pw = dst->src[1], * ph = dst->src[2];
    if (dst->type != GGML_TYPE_F32 || a->type != GGML_TYPE_F32) GGML_ABORT("add_rel_pos: F32 only");
    const int64_t k = pw->ne[0], qw = pw->ne[1];
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % dst->ne[1], b = r / dst->ne[1];
        const int64_t j1 = i1 % qw, j2 = i1 / qw;
        for (int64_t kh = 0; kh < k; ++kh) {
            const float h = *(const float *) elem(ph, kh, j1, j2, b);
            for (int64_t kw = 0; kw < k; ++kw) {
                const float v = *(const float *) elem(pw, kw, j1, j2, b);
                const float x = *(const float *) elem(a, kh * k + kw, i1, b, 0);
                *(float *) elem(dst, kh * k + kw, i1, b, 0) = kw < kh ? (x + v) + h : (x + h) + v;
            }
        }
    }
}
