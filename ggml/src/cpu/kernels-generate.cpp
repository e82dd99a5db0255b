// Generators and rearrangements: arange, timestep_embedding, pad_reflect_1d, roll, repeat. Each
// task writes whole rows of dst (split_rows), reading its source through strides.
#include "kernels.h"

#include <cmath>
#include <cstring>

namespace {

float src_at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *(const float *) ((const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}
// repeat copies any type's elements as bytes
size_t elem_size(const ggml_tensor * t) { return ggml_type_size(t->type); }
void check_f32(const ggml_tensor * dst) {
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) GGML_ABORT("%s: dst must be F32 with dense rows", ggml_op_name(dst->op));
    for (int i = 0; i < GGML_MAX_SRC && dst->src[i]; ++i) {
        if (dst->src[i]->type != GGML_TYPE_F32) GGML_ABORT("%s: '%s' must be F32", ggml_op_name(dst->op), dst->src[i]->name);
    }
}

} // namespace

void ggml_compute_forward_arange(const ggml_compute_params * params, ggml_tensor * dst) {
    check_f32(dst);
    if (params->ith != 0) return;
    const float start = ggml_get_op_params_f32(dst, 0), step = ggml_get_op_params_f32(dst, 2);
    float * y = (float *) dst->data;
    for (int64_t i = 0; i < dst->ne[0]; ++i) y[i] = start + step * (float) i;
}

void ggml_compute_forward_timestep_embedding(const ggml_compute_params * params, ggml_tensor * dst) {
    check_f32(dst);
    const ggml_tensor * ts = dst->src[0];
    const int dim = ggml_get_op_params_i32(dst, 0), half = dim / 2;
    const double log_period = std::log((double) ggml_get_op_params_i32(dst, 1));
    const task_range rows = split_rows(dst->ne[1], params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const float t = src_at(ts, r, 0, 0, 0);
        float * y = (float *) nth_row(dst, r);
        for (int j = 0; j < half; ++j) {
            const float arg = t * (float) std::exp(-log_period * j / half);
            y[j] = std::cos(arg);
            y[half + j] = std::sin(arg);
        }
        if (dim % 2) y[dim - 1] = 0.0f;
    }
}

void ggml_compute_forward_pad_reflect_1d(const ggml_compute_params * params, ggml_tensor * dst) {
    check_f32(dst);
    const ggml_tensor * a = dst->src[0];
    const int64_t p0 = ggml_get_op_params_i32(dst, 0), n = a->ne[0];
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        float * y = (float *) nth_row(dst, r);
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            int64_t k = i - p0;                  // position in a, mirrored at both ends
            if (k < 0) k = -k;
            else if (k >= n) k = 2 * (n - 1) - k;
            y[i] = src_at(a, k, i1, i2, i3);
        }
    }
}

void ggml_compute_forward_roll(const ggml_compute_params * params, ggml_tensor * dst) {
    check_f32(dst);
    const ggml_tensor * a = dst->src[0];
    int64_t s[4];
    for (int d = 0; d < 4; ++d) s[d] = ggml_get_op_params_i32(dst, d);
    auto from = [&](int64_t i, int d) { return ((i - s[d]) % a->ne[d] + a->ne[d]) % a->ne[d]; };
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        float * y = (float *) nth_row(dst, r);
        const int64_t j1 = from(i1, 1), j2 = from(i2, 2), j3 = from(i3, 3);
        for (int64_t i = 0; i < dst->ne[0]; ++i) y[i] = src_at(a, from(i, 0), j1, j2, j3);
    }
}

void ggml_compute_forward_repeat(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (a->type != dst->type || ggml_blck_size(a->type) != 1) GGML_ABORT("repeat: '%s' must be a non-block type like dst", a->name);
    const size_t es = elem_size(a);
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        char * y = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        const char * x = (const char *) a->data + (i1 % a->ne[1]) * a->nb[1] + (i2 % a->ne[2]) * a->nb[2] + (i3 % a->ne[3]) * a->nb[3];
        for (int64_t i = 0; i < dst->ne[0]; ++i) std::memcpy(y + i * dst->nb[0], x + (i % a->ne[0]) * a->nb[0], es);
    }
}
