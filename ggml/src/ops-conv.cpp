// Op constructors of convolution, pooling, resampling and padding: shape rules, op params.
// The composite convolutions (conv_1d, conv_2d, their depthwise forms) are im2col + mul_mat
// + views, as in ggml; im2col is taken in F32 there because kvgraph's mul_mat reads F32
// activations (the F16 kernel is the weight side), which also keeps the data unrounded.
#include "ggml-impl.h"

#include <initializer_list>

// Wires op and sources into r and hands it to the hazard rules.
static ggml_tensor * finish_op(ggml_context * ctx, ggml_tensor * r, enum ggml_op op, ggml_tensor * a, ggml_tensor * b = nullptr) {
    return ggml_finish_op(ctx, r, op, a, b);
}

static void set_i32_params(ggml_tensor * r, std::initializer_list<int32_t> v) {
    uint32_t i = 0;
    for (int32_t x : v) ggml_set_op_params_i32(r, i++, x);
}

// Output length of a convolution: input n, kernel k, stride s, padding p, dilation d.
static int64_t conv_out_size(int64_t n, int64_t k, int s, int p, int d) {
    return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void check_kernel_type(const ggml_tensor * a) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16);
}

// ---- im2col ------------------------------------------------------------------------------
ggml_tensor * ggml_im2col(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1,
                          bool is_2D, enum ggml_type dst_type) {
    GGML_ASSERT(dst_type == GGML_TYPE_F32 || dst_type == GGML_TYPE_F16);
    GGML_ASSERT(b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16);
    GGML_ASSERT(s0 > 0 && d0 > 0 && p0 >= 0 && (!is_2D || (s1 > 0 && d1 > 0 && p1 >= 0)));
    int64_t ne[4];
    if (is_2D) {
        GGML_ASSERT(a->ne[2] == b->ne[2]);
        ne[0] = a->ne[2] * a->ne[1] * a->ne[0];
        ne[1] = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        ne[2] = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
        ne[3] = b->ne[3];
    } else {
        GGML_ASSERT(a->ne[1] == b->ne[1] && b->ne[3] == 1);
        ne[0] = a->ne[1] * a->ne[0];
        ne[1] = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        ne[2] = b->ne[2];
        ne[3] = b->ne[3];
    }
    GGML_ASSERT(ne[1] > 0 && ne[2] > 0);
    ggml_tensor * r = ggml_new_tensor(ctx, dst_type, 4, ne);
    set_i32_params(r, {s0, is_2D ? s1 : 1, p0, is_2D ? p1 : 0, d0, is_2D ? d1 : 1, is_2D ? 1 : 0});
    return finish_op(ctx, r, GGML_OP_IM2COL, a, b); // a: only its shape is used
}

// ---- composite convolutions ------------------------------------------------------------
// kernel rows [n_in, OC] (weights) times im2col rows [n_in, positions...] -> [OC, positions...]
static ggml_tensor * kernel_times_cols(ggml_context * ctx, ggml_tensor * a, ggml_tensor * cols) {
    check_kernel_type(a);
    return ggml_mul_mat(ctx, ggml_reshape_2d(ctx, a, cols->ne[0], ggml_nelements(a) / cols->ne[0]), cols);
}

ggml_tensor * ggml_conv_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    ggml_tensor * cols = ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F32); // [IC*K, OL, N]
    ggml_tensor * r = kernel_times_cols(ctx, a, cols);                                      // [OC, OL, N]
    return ggml_cont(ctx, ggml_permute(ctx, r, 1, 0, 2, 3));                                // [OL, OC, N]
}
ggml_tensor * ggml_conv_1d_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s, int d) {
    return ggml_conv_1d(ctx, a, b, s, (int) (a->ne[0] / 2), d);
}

ggml_tensor * ggml_conv_1d_dw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    check_kernel_type(a);
    GGML_ASSERT(a->ne[1] == 1 && a->ne[2] == b->ne[1]);
    const int64_t K = a->ne[0], C = b->ne[1], N = b->ne[2];
    // one input channel per im2col slice: [K, OL, C*N] -> [K, OL, C, N], dotted with kernel c of [K, 1, C, 1]
    ggml_tensor * cols = ggml_im2col(ctx, a, ggml_reshape_3d(ctx, b, b->ne[0], 1, C * N), s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F32);
    const int64_t OL = cols->ne[1];
    cols = ggml_reshape_4d(ctx, cols, K, OL, C, N);
    ggml_tensor * r = ggml_mul_mat(ctx, ggml_reshape_4d(ctx, a, K, 1, C, 1), cols); // [1, OL, C, N]
    return ggml_reshape_3d(ctx, r, OL, C, N);
}
ggml_tensor * ggml_conv_1d_dw_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int d0) {
    return ggml_conv_1d_dw(ctx, a, b, s0, (int) (a->ne[0] / 2), d0);
}

ggml_tensor * ggml_conv_2d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1) {
    ggml_tensor * cols = ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, GGML_TYPE_F32); // [IC*KH*KW, OW, OH, N]
    ggml_tensor * r = kernel_times_cols(ctx, a, cols);                                         // [OC, OW, OH, N]
    return ggml_cont(ctx, ggml_permute(ctx, r, 2, 0, 1, 3));                                   // [OW, OH, OC, N]
}
ggml_tensor * ggml_conv_2d_sk_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, (int) a->ne[0], (int) a->ne[1], 0, 0, 1, 1);
}
ggml_tensor * ggml_conv_2d_s1_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, 1, 1, (int) (a->ne[0] / 2), (int) (a->ne[1] / 2), 1, 1);
}

ggml_tensor * ggml_conv_2d_dw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1) {
    check_kernel_type(a);
    GGML_ASSERT(a->ne[2] == 1 && a->ne[3] == b->ne[2]);
    const int64_t C = b->ne[2], N = b->ne[3], KK = a->ne[0] * a->ne[1];
    ggml_tensor * planes = ggml_reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, C * N);
    ggml_tensor * cols = ggml_im2col(ctx, a, planes, s0, s1, p0, p1, d0, d1, true, GGML_TYPE_F32); // [KK, OW, OH, C*N]
    const int64_t OW = cols->ne[1], OH = cols->ne[2];
    cols = ggml_reshape_4d(ctx, cols, KK, OW * OH, C, N);
    ggml_tensor * r = ggml_mul_mat(ctx, ggml_reshape_4d(ctx, a, KK, 1, C, 1), cols); // [1, OW*OH, C, N]
    return ggml_reshape_4d(ctx, r, OW, OH, C, N);
}

// ---- direct convolutions -----------------------------------------------------------------
static ggml_tensor * conv_2d_direct_impl(ggml_context * ctx, enum ggml_op op, ggml_tensor * a, ggml_tensor * b, int64_t OC,
                                         int s0, int s1, int p0, int p1, int d0, int d1) {
    check_kernel_type(a);
    GGML_ASSERT(b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16);
    GGML_ASSERT(s0 > 0 && s1 > 0 && d0 > 0 && d1 > 0 && p0 >= 0 && p1 >= 0);
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0), OH = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    GGML_ASSERT(OW > 0 && OH > 0);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, OW, OH, OC, b->ne[3]);
    set_i32_params(r, {s0, s1, p0, p1, d0, d1});
    return finish_op(ctx, r, op, a, b);
}
ggml_tensor * ggml_conv_2d_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1) {
    GGML_ASSERT(a->ne[2] == b->ne[2]);
    return conv_2d_direct_impl(ctx, GGML_OP_CONV_2D, a, b, a->ne[3], s0, s1, p0, p1, d0, d1);
}
ggml_tensor * ggml_conv_2d_dw_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride0, int stride1, int pad0, int pad1,
                                     int dilation0, int dilation1) {
    GGML_ASSERT(a->ne[2] == 1 && a->ne[3] == b->ne[2]);
    return conv_2d_direct_impl(ctx, GGML_OP_CONV_2D_DW, a, b, b->ne[2], stride0, stride1, pad0, pad1, dilation0, dilation1);
}

// ---- transposed convolutions -------------------------------------------------------------
ggml_tensor * ggml_conv_transpose_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    check_kernel_type(a);
    GGML_ASSERT(b->type == GGML_TYPE_F32 && a->ne[2] == b->ne[1] && a->ne[3] == 1 && b->ne[3] == 1);
    GGML_ASSERT(s0 > 0 && d0 > 0 && p0 >= 0);
    const int64_t OL = (b->ne[0] - 1) * s0 - 2 * p0 + d0 * (a->ne[0] - 1) + 1;
    GGML_ASSERT(OL > 0);
    ggml_tensor * r = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, OL, a->ne[1], b->ne[2]);
    set_i32_params(r, {s0, p0, d0});
    return finish_op(ctx, r, GGML_OP_CONV_TRANSPOSE_1D, a, b);
}

ggml_tensor * ggml_conv_transpose_2d_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride) {
    check_kernel_type(a);
    GGML_ASSERT(b->type == GGML_TYPE_F32 && a->ne[3] == b->ne[2] && stride > 0);
    const int64_t OW = (b->ne[0] - 1) * stride + a->ne[0], OH = (b->ne[1] - 1) * stride + a->ne[1];
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, OW, OH, a->ne[2], b->ne[3]);
    set_i32_params(r, {stride});
    return finish_op(ctx, r, GGML_OP_CONV_TRANSPOSE_2D, a, b);
}

// ---- pooling --------------------------------------------------------------------------------
// Output size as ggml computes it: in float, truncated.
static int64_t pool_out_size(int64_t n, int k, int s, float p) {
    return (int64_t) ((n + 2 * p - k) / s + 1);
}

ggml_tensor * ggml_pool_1d(ggml_context * ctx, ggml_tensor * a, enum ggml_op_pool op, int k0, int s0, int p0) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16);
    GGML_ASSERT(op >= 0 && op < GGML_OP_POOL_COUNT && k0 > 0 && s0 > 0 && p0 >= 0);
    const int64_t OL = pool_out_size(a->ne[0], k0, s0, (float) p0);
    GGML_ASSERT(OL > 0);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, OL, a->ne[1], a->ne[2], a->ne[3]);
    set_i32_params(r, {op, k0, s0, p0});
    return finish_op(ctx, r, GGML_OP_POOL_1D, a);
}

ggml_tensor * ggml_pool_2d(ggml_context * ctx, ggml_tensor * a, enum ggml_op_pool op, int k0, int k1, int s0, int s1, float p0, float p1) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16);
    GGML_ASSERT(op >= 0 && op < GGML_OP_POOL_COUNT && k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0 && p1 >= 0);
    const int64_t OW = pool_out_size(a->ne[0], k0, s0, p0), OH = pool_out_size(a->ne[1], k1, s1, p1);
    GGML_ASSERT(OW > 0 && OH > 0);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, OW, OH, a->ne[2], a->ne[3]);
    set_i32_params(r, {op, k0, k1, s0, s1, (int32_t) p0, (int32_t) p1}); // ggml's layout: paddings truncated
    return finish_op(ctx, r, GGML_OP_POOL_2D, a);
}

// ---- resampling and padding ---------------------------------------------------------------------
ggml_tensor * ggml_interpolate(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode) {
    // every mode and flag builds the node; the CPU computes nearest and bilinear with or
    // without align-corners, f32 only (cpu/supports.cpp)
    GGML_ASSERT(ne0 > 0 && ne1 > 0 && ne2 > 0 && ne3 > 0);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    set_i32_params(r, {(int32_t) mode});
    return finish_op(ctx, r, GGML_OP_UPSCALE, a);
}
ggml_tensor * ggml_upscale(ggml_context * ctx, ggml_tensor * a, int scale_factor, enum ggml_scale_mode mode) {
    GGML_ASSERT(scale_factor > 0);
    return ggml_interpolate(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3], mode);
}
ggml_tensor * ggml_upscale_ext(ggml_context * ctx, ggml_tensor * a, int ne0, int ne1, int ne2, int ne3, enum ggml_scale_mode mode) {
    return ggml_interpolate(ctx, a, ne0, ne1, ne2, ne3, mode);
}

ggml_tensor * ggml_pad_ext(ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16);
    const int32_t p[8] = {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3};
    int64_t ne[4];
    for (int d = 0; d < 4; ++d) {
        GGML_ASSERT(p[2 * d] >= 0 && p[2 * d + 1] >= 0);
        ne[d] = a->ne[d] + p[2 * d] + p[2 * d + 1];
    }
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, 4, ne);
    for (int i = 0; i < 8; ++i) ggml_set_op_params_i32(r, i, p[i]);
    return finish_op(ctx, r, GGML_OP_PAD, a);
}
ggml_tensor * ggml_pad(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3) {
    return ggml_pad_ext(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}
