// Row normalizations: norm, rms_norm, soft_max (mask, ALiBi), diag_mask_inf. All F32.
// Each row is read completely before it is written, so dst may alias src0 (inplace).
#include "kernels.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

void check_f32(const ggml_tensor * t, const ggml_tensor * dst) {
    if (t->type != GGML_TYPE_F32) {
        GGML_ABORT("%s: tensor '%s' has type %s; only f32 is supported", ggml_op_name(dst->op), t->name, ggml_type_name(t->type));
    }
}

void gather(const char * row, size_t nb0, int64_t n, float * out) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(&out[i], row + i * nb0, sizeof(float));
}
void scatter(char * row, size_t nb0, int64_t n, const float * in) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(row + i * nb0, &in[i], sizeof(float));
}

double sum_sq_f32(const float * x, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += x[i + j] * x[i + j];
    }
    double s = 0.0;
    for (int j = 0; j < 8; ++j) s += acc[j];
    for (; i < n; ++i) s += (double) x[i] * x[i];
    return s;
}


// y = (x - mean) / sqrt(var + eps); y may alias x
void norm_row(const float * x, float * y, int64_t n, float eps) {
    const float mean = (float) (sum_f32(x, n) / n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
    const float var = (float) (sum_sq_f32(y, n) / n);
    const float scale = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) y[i] *= scale;
}

// y = x / sqrt(mean(x^2) + eps); y may alias x
void rms_norm_row(const float * x, float * y, int64_t n, float eps) {
    const float mean = (float) (sum_sq_f32(x, n) / n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

} // namespace

void ggml_compute_forward_norm(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    check_f32(src0, dst);
    check_f32(dst, dst);
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    const float eps = ggml_get_op_params_f32(dst, 0);
    GGML_ASSERT(eps >= 0.0f);
    const bool rms = dst->op == GGML_OP_RMS_NORM;
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const bool in_place = row_is_dense(src0) && row_is_dense(dst);
    std::vector<float> buf(in_place ? 0 : ne0);

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * a = row_at(src0, i1, i2, i3);
        char * d = row_at(dst, i1, i2, i3);
        if (in_place) {
            if (rms) rms_norm_row((const float *) a, (float *) d, ne0, eps);
            else norm_row((const float *) a, (float *) d, ne0, eps);
        } else {
            gather(a, src0->nb[0], ne0, buf.data());
            if (rms) rms_norm_row(buf.data(), buf.data(), ne0, eps);
            else norm_row(buf.data(), buf.data(), ne0, eps);
            scatter(d, dst->nb[0], ne0, buf.data());
        }
    }
}

// y = softmax(x*scale + slope*mask) along rows. A row that is entirely -inf has no
// defined softmax; it becomes all zeros instead of NaN.
void ggml_compute_forward_soft_max(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    check_f32(src0, dst);
    check_f32(dst, dst);
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    if (!row_is_dense(src0) || !row_is_dense(dst)) {
        GGML_ABORT("soft_max: rows of '%s' and '%s' must be contiguous", src0->name, dst->name);
    }
    const float scale = ggml_get_op_params_f32(dst, 0);
    const float max_bias = ggml_get_op_params_f32(dst, 1);
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    if (mask) {
        if (mask->type != GGML_TYPE_F32 && mask->type != GGML_TYPE_F16) {
            GGML_ABORT("soft_max: mask '%s' must be f32 or f16, not %s", mask->name, ggml_type_name(mask->type));
        }
        GGML_ASSERT(mask->ne[0] == ne0 && mask->ne[1] >= ne1);
        GGML_ASSERT(ne2 % mask->ne[2] == 0 && dst->ne[3] % mask->ne[3] == 0);
    }

    // ALiBi: head h = i2 gets slope m0^(h+1) for the first n_head_log2 heads, then odd powers of m1
    const uint32_t n_head = (uint32_t) ne2;
    const uint32_t n_head_log2 = n_head > 0 ? 1u << (uint32_t) std::floor(std::log2((double) n_head)) : 1u;
    const float m0 = std::pow(2.0f, -max_bias / n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_head_log2);

    const bool mask_f32_dense = mask && mask->type == GGML_TYPE_F32 && row_is_dense(mask);
    std::vector<float> mbuf(mask && !mask_f32_dense ? ne0 : 0);
    std::vector<uint8_t> active(ne0); // softmax_weights marks the unmasked positions; unused here
    const kvg::cpu_kernels & kern = kvg::cpu_active_kernels();

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float * x = (const float *) row_at(src0, i1, i2, i3);
        float * y = (float *) row_at(dst, i1, i2, i3);

        float slope = 1.0f;
        if (max_bias > 0.0f) {
            const uint32_t h = (uint32_t) i2;
            slope = h < n_head_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_head_log2) + 1));
        }

        if (mask) {
            const char * mrow = row_at(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            const float * m = (const float *) mrow;
            if (!mask_f32_dense) {
                if (mask->type == GGML_TYPE_F16 && row_is_dense(mask)) {
                    ggml_fp16_to_fp32_row((const ggml_fp16_t *) mrow, mbuf.data(), ne0);
                } else {
                    for (int64_t i = 0; i < ne0; ++i) {
                        const char * p = mrow + i * mask->nb[0];
                        if (mask->type == GGML_TYPE_F16) {
                            ggml_fp16_t h;
                            std::memcpy(&h, p, sizeof(h));
                            mbuf[i] = ggml_fp16_to_fp32(h);
                        } else {
                            std::memcpy(&mbuf[i], p, sizeof(float));
                        }
                    }
                }
                m = mbuf.data();
            }
            for (int64_t i = 0; i < ne0; ++i) y[i] = x[i] * scale + slope * m[i];
        } else {
            for (int64_t i = 0; i < ne0; ++i) y[i] = x[i] * scale;
        }

        const float vmax = max_f32(y, ne0);
        if (vmax == -INFINITY) {
            std::fill(y, y + ne0, 0.0f);
            continue;
        }
        kern.softmax_weights(ne0, y, vmax, active.data()); // the sum below is taken in double
        const float inv = (float) (1.0 / sum_f32(y, ne0));
        for (int64_t i = 0; i < ne0; ++i) y[i] *= inv;
    }
}

// element (i0, i1) of every matrix becomes -INF when i0 > n_past + i1; the rest is copied
void ggml_compute_forward_diag_mask_inf(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    check_f32(src0, dst);
    check_f32(dst, dst);
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    const int64_t n_past = ggml_get_op_params_i32(dst, 0);
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const size_t snb0 = src0->nb[0], dnb0 = dst->nb[0];
    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * a = row_at(src0, i1, i2, i3);
        char * d = row_at(dst, i1, i2, i3);
        // first masked column of this row
        const int64_t keep = std::min(ne0, std::max<int64_t>(0, n_past + i1 + 1));
        if (a != d || snb0 != dnb0) {
            if (snb0 == sizeof(float) && dnb0 == sizeof(float)) {
                std::memmove(d, a, keep * sizeof(float));
            } else {
                for (int64_t i = 0; i < keep; ++i) std::memcpy(d + i * dnb0, a + i * snb0, sizeof(float));
            }
        }
        const float ninf = -INFINITY;
        for (int64_t i = keep; i < ne0; ++i) std::memcpy(d + i * dnb0, &ninf, sizeof(float));
    }
}
