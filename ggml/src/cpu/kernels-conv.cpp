// Convolution, pooling, resampling and padding kernels: plain loops, sums in double. Every
// op is written in 2-D image terms ([W, H, C, N]); a 1-D op sees its tensors through a view
// with H = 1. Each task computes whole rows of dst (split_rows), reading sources through
// their strides, so any layout works.
#include "kernels.h"

#include <cmath>
#include <limits>

namespace {

// A tensor as 4 dims with byte strides, F32 or F16 elements.
struct view4 {
    char * data;
    ggml_type type;
    int64_t ne[4];
    size_t nb[4];
    float get(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
        const char * p = data + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
        return type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(*(const ggml_fp16_t *) p) : *(const float *) p;
    }
    void set(int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) const {
        char * p = data + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
        if (type == GGML_TYPE_F16) *(ggml_fp16_t *) p = ggml_fp32_to_fp16(v);
        else *(float *) p = v;
    }
    int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
};

view4 view_of(const ggml_tensor * t) {
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16) {
        GGML_ABORT("%s: '%s' must be F32 or F16, is %s", ggml_op_name(t->op), t->name, ggml_type_name(t->type));
    }
    return {(char *) t->data, t->type, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, {t->nb[0], t->nb[1], t->nb[2], t->nb[3]}};
}
// [ne0, ne1, ne2] seen as [ne0, 1, ne1, ne2] (a 1-D signal as an image of height 1)
view4 view_1d_as_2d(const ggml_tensor * t) {
    GGML_ASSERT(t->ne[3] == 1);
    view4 v = view_of(t);
    v.ne[3] = t->ne[2]; v.nb[3] = t->nb[2];
    v.ne[2] = t->ne[1]; v.nb[2] = t->nb[1];
    v.ne[1] = 1;        v.nb[1] = 0;
    return v;
}

// Stride, padding and dilation of each of the two spatial dims.
struct geom {
    int64_t s[2], p[2], d[2];
};
geom conv_geom(const ggml_tensor * dst) {
    geom g;
    for (int i = 0; i < 2; ++i) {
        g.s[i] = ggml_get_op_params_i32(dst, i);
        g.p[i] = ggml_get_op_params_i32(dst, 2 + i);
        g.d[i] = ggml_get_op_params_i32(dst, 4 + i);
    }
    return g;
}

// Calls f(i1, i2, i3) for the rows of dst that task ith owns.
template <typename F> void for_my_rows(const ggml_compute_params * params, const view4 & dst, F f) {
    const task_range rows = split_rows(dst.nrows(), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) f(r % dst.ne[1], (r / dst.ne[1]) % dst.ne[2], r / (dst.ne[1] * dst.ne[2]));
}

// dst [IC*KH*KW, OW, OH, N] from b [W, H, IC, N]
void im2col(const ggml_compute_params * params, const view4 & dst, const view4 & b, int64_t KW, int64_t KH, const geom & g) {
    for_my_rows(params, dst, [&](int64_t ow, int64_t oh, int64_t n) {
        for (int64_t j = 0; j < dst.ne[0]; ++j) {
            const int64_t ic = j / (KH * KW), kh = (j / KW) % KH, kw = j % KW;
            const int64_t x = ow * g.s[0] + kw * g.d[0] - g.p[0], y = oh * g.s[1] + kh * g.d[1] - g.p[1];
            const bool inside = x >= 0 && x < b.ne[0] && y >= 0 && y < b.ne[1];
            dst.set(j, ow, oh, n, inside ? b.get(x, y, ic, n) : 0.0f);
        }
    });
}

// dst [OW, OH, OC, N] from kernel a [KW, KH, IC, OC] (depthwise: [KW, KH, 1, C]) and b [W, H, IC, N]
void conv_direct(const ggml_compute_params * params, const view4 & dst, const view4 & a, const view4 & b, const geom & g, bool depthwise) {
    for_my_rows(params, dst, [&](int64_t oh, int64_t oc, int64_t n) {
        const int64_t ic0 = depthwise ? oc : 0, ic1 = depthwise ? oc + 1 : b.ne[2];
        for (int64_t ow = 0; ow < dst.ne[0]; ++ow) {
            double sum = 0.0;
            for (int64_t ic = ic0; ic < ic1; ++ic) {
                for (int64_t kh = 0; kh < a.ne[1]; ++kh) {
                    const int64_t y = oh * g.s[1] + kh * g.d[1] - g.p[1];
                    if (y < 0 || y >= b.ne[1]) continue;
                    for (int64_t kw = 0; kw < a.ne[0]; ++kw) {
                        const int64_t x = ow * g.s[0] + kw * g.d[0] - g.p[0];
                        if (x < 0 || x >= b.ne[0]) continue;
                        sum += (double) a.get(kw, kh, depthwise ? 0 : ic, oc) * b.get(x, y, ic, n);
                    }
                }
            }
            dst.set(ow, oh, oc, n, (float) sum);
        }
    });
}

// Input index i with i*s + k*d - p = o, or -1.
int64_t transposed_source(int64_t o, int64_t k, int64_t s, int64_t p, int64_t d, int64_t n) {
    const int64_t t = o + p - k * d;
    if (t < 0 || t % s != 0 || t / s >= n) return -1;
    return t / s;
}

// dst [OW, OH, OC, N] from kernel a [KW, KH, OC, IC] and b [W, H, IC, N], each input element
// spreading a kernel patch; computed as a gather so that rows of dst are independent.
void conv_transposed(const ggml_compute_params * params, const view4 & dst, const view4 & a, const view4 & b, const geom & g) {
    for_my_rows(params, dst, [&](int64_t oh, int64_t oc, int64_t n) {
        for (int64_t ow = 0; ow < dst.ne[0]; ++ow) {
            double sum = 0.0;
            for (int64_t kh = 0; kh < a.ne[1]; ++kh) {
                const int64_t y = transposed_source(oh, kh, g.s[1], g.p[1], g.d[1], b.ne[1]);
                if (y < 0) continue;
                for (int64_t kw = 0; kw < a.ne[0]; ++kw) {
                    const int64_t x = transposed_source(ow, kw, g.s[0], g.p[0], g.d[0], b.ne[0]);
                    if (x < 0) continue;
                    for (int64_t ic = 0; ic < b.ne[2]; ++ic) sum += (double) a.get(kw, kh, oc, ic) * b.get(x, y, ic, n);
                }
            }
            dst.set(ow, oh, oc, n, (float) sum);
        }
    });
}

struct pool_params {
    int op;
    int64_t k[2], s[2], p[2];
};

// dst [OW, OH, C, N] from a [W, H, C, N]; padded positions are skipped, AVG divides by k0*k1
void pool(const ggml_compute_params * params, const view4 & dst, const view4 & a, const pool_params & pp) {
    for_my_rows(params, dst, [&](int64_t oh, int64_t c, int64_t n) {
        for (int64_t ow = 0; ow < dst.ne[0]; ++ow) {
            double sum = 0.0, mx = -std::numeric_limits<double>::infinity();
            for (int64_t ky = 0; ky < pp.k[1]; ++ky) {
                const int64_t y = oh * pp.s[1] - pp.p[1] + ky;
                if (y < 0 || y >= a.ne[1]) continue;
                for (int64_t kx = 0; kx < pp.k[0]; ++kx) {
                    const int64_t x = ow * pp.s[0] - pp.p[0] + kx;
                    if (x < 0 || x >= a.ne[0]) continue;
                    const double v = a.get(x, y, c, n);
                    sum += v;
                    mx = std::max(mx, v);
                }
            }
            dst.set(ow, oh, c, n, (float) (pp.op == GGML_OP_POOL_MAX ? mx : sum / (double) (pp.k[0] * pp.k[1])));
        }
    });
}

} // namespace

void ggml_compute_forward_im2col(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const bool is_2D = ggml_get_op_params_i32(dst, 6) != 0;
    if (is_2D) {
        im2col(params, view_of(dst), view_of(dst->src[1]), a->ne[0], a->ne[1], conv_geom(dst));
        return;
    }
    // 1-D: dst [IC*K, OW, N] as [IC*K, OW, 1, N]
    view4 d = view_of(dst);
    d.ne[3] = dst->ne[2]; d.nb[3] = dst->nb[2];
    d.ne[2] = 1;          d.nb[2] = 0;
    im2col(params, d, view_1d_as_2d(dst->src[1]), a->ne[0], 1, conv_geom(dst));
}

void ggml_compute_forward_conv_2d(const ggml_compute_params * params, ggml_tensor * dst) {
    conv_direct(params, view_of(dst), view_of(dst->src[0]), view_of(dst->src[1]), conv_geom(dst), dst->op == GGML_OP_CONV_2D_DW);
}

void ggml_compute_forward_conv_transpose(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (dst->op == GGML_OP_CONV_TRANSPOSE_2D) {
        const int64_t s = ggml_get_op_params_i32(dst, 0);
        conv_transposed(params, view_of(dst), view_of(a), view_of(b), {{s, s}, {0, 0}, {1, 1}});
        return;
    }
    const geom g = {{ggml_get_op_params_i32(dst, 0), 1}, {ggml_get_op_params_i32(dst, 1), 0}, {ggml_get_op_params_i32(dst, 2), 1}};
    conv_transposed(params, view_1d_as_2d(dst), view_1d_as_2d(a), view_1d_as_2d(b), g);
}

void ggml_compute_forward_pool(const ggml_compute_params * params, ggml_tensor * dst) {
    pool_params pp;
    pp.op = ggml_get_op_params_i32(dst, 0);
    if (dst->op == GGML_OP_POOL_1D) { // a 2-D pool with a window of height 1
        pp.k[0] = ggml_get_op_params_i32(dst, 1); pp.k[1] = 1;
        pp.s[0] = ggml_get_op_params_i32(dst, 2); pp.s[1] = 1;
        pp.p[0] = ggml_get_op_params_i32(dst, 3); pp.p[1] = 0;
    } else {
        for (int i = 0; i < 2; ++i) {
            pp.k[i] = ggml_get_op_params_i32(dst, 1 + i);
            pp.s[i] = ggml_get_op_params_i32(dst, 3 + i);
            pp.p[i] = ggml_get_op_params_i32(dst, 5 + i);
        }
    }
    pool(params, view_of(dst), view_of(dst->src[0]), pp);
}

namespace {

// Source coordinate of output index i along a dim of n_in -> n_out elements (bilinear).
double bilinear_coord(int64_t i, int64_t n_in, int64_t n_out, bool align_corners) {
    if (align_corners) return n_out > 1 ? (double) i * (n_in - 1) / (n_out - 1) : 0.0;
    const double x = ((double) i + 0.5) * n_in / n_out - 0.5;
    return std::min(std::max(x, 0.0), (double) (n_in - 1));
}
// Nearest source index, as ggml computes it (float scale factor).
int64_t nearest_index(int64_t i, int64_t n_in, int64_t n_out) {
    const float sf = (float) n_out / (float) n_in;
    return std::min<int64_t>((int64_t) ((float) i / sf), n_in - 1);
}

} // namespace

void ggml_compute_forward_upscale(const ggml_compute_params * params, ggml_tensor * dst) {
    const view4 a = view_of(dst->src[0]), d = view_of(dst);
    const uint32_t mode = (uint32_t) ggml_get_op_params_i32(dst, 0);
    const bool bilinear = (mode & 0xff) == GGML_SCALE_MODE_BILINEAR;
    const bool align = (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) != 0;
    for_my_rows(params, d, [&](int64_t i1, int64_t i2, int64_t i3) {
        const int64_t j2 = nearest_index(i2, a.ne[2], d.ne[2]), j3 = nearest_index(i3, a.ne[3], d.ne[3]);
        for (int64_t i0 = 0; i0 < d.ne[0]; ++i0) {
            if (!bilinear) {
                d.set(i0, i1, i2, i3, a.get(nearest_index(i0, a.ne[0], d.ne[0]), nearest_index(i1, a.ne[1], d.ne[1]), j2, j3));
                continue;
            }
            const double x = bilinear_coord(i0, a.ne[0], d.ne[0], align), y = bilinear_coord(i1, a.ne[1], d.ne[1], align);
            const int64_t x0 = (int64_t) x, y0 = (int64_t) y;
            const int64_t x1 = std::min(x0 + 1, a.ne[0] - 1), y1 = std::min(y0 + 1, a.ne[1] - 1);
            const double fx = x - x0, fy = y - y0;
            const double top = a.get(x0, y0, j2, j3) * (1 - fx) + a.get(x1, y0, j2, j3) * fx;
            const double bottom = a.get(x0, y1, j2, j3) * (1 - fx) + a.get(x1, y1, j2, j3) * fx;
            d.set(i0, i1, i2, i3, (float) (top * (1 - fy) + bottom * fy));
        }
    });
}

void ggml_compute_forward_pad(const ggml_compute_params * params, ggml_tensor * dst) {
    const view4 a = view_of(dst->src[0]), d = view_of(dst);
    int64_t lp[4];
    for (int i = 0; i < 4; ++i) lp[i] = ggml_get_op_params_i32(dst, 2 * i);
    for_my_rows(params, d, [&](int64_t i1, int64_t i2, int64_t i3) {
        const int64_t j1 = i1 - lp[1], j2 = i2 - lp[2], j3 = i3 - lp[3];
        const bool row_inside = j1 >= 0 && j1 < a.ne[1] && j2 >= 0 && j2 < a.ne[2] && j3 >= 0 && j3 < a.ne[3];
        for (int64_t i0 = 0; i0 < d.ne[0]; ++i0) {
            const int64_t j0 = i0 - lp[0];
            d.set(i0, i1, i2, i3, row_inside && j0 >= 0 && j0 < a.ne[0] ? a.get(j0, j1, j2, j3) : 0.0f);
        }
    });
}
