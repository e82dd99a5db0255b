// ggml's image and vision ops: convolution, pooling, resampling, padding, and the windowed
// attention with relative positions of SAM's image encoder. Part of ggml.h (which includes this
// file at its end); a ggml program includes ggml.h as always.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- convolution, pooling, resampling, padding ----
// Images are [W, H, C, N] (width innermost), 1-D signals [L, C, N]; kernels are
// [KW, KH, IC, OC] and [K, IC, OC]. With stride s, padding p (zeros on both sides) and
// dilation d, an output length is OW = (W + 2p - d(KW - 1) - 1) / s + 1. Kernels may be F32
// or F16 (F32 data); results are F32 unless noted. Every op writes a fresh tensor.
// kvgraph: data are not rounded to F16 when the kernel is F16 (ggml's CPU paths round them).

// Each output position's receptive field as one row: a [KW, KH, IC, OC] (only its shape
// is used), b [W, H, IC, N] -> dst_type (F32/F16) [IC*KH*KW, OW, OH, N], element
// ic*KH*KW + kh*KW + kw of row (ow, oh, n) = b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n]
// (0 outside b). !is_2D: a [KW, IC, OC], b [W, IC, N] -> [IC*KW, OW, N] (s1, p1, d1
// unused; b->ne[3] must be 1). b may have any strides.
GGML_API struct ggml_tensor * ggml_im2col(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,        // kernel (shape only)
        struct ggml_tensor  * b,        // data
        int                   s0,       // stride, dim 0
        int                   s1,       // stride, dim 1
        int                   p0,       // padding, dim 0
        int                   p1,       // padding, dim 1
        int                   d0,       // dilation, dim 0
        int                   d1,       // dilation, dim 1
        bool                  is_2D,
        enum ggml_type        dst_type);

// a [K, IC, OC], b [L, IC, N] -> [OL, OC, N]: out[o, oc, n] = sum over ic, k of
// a[k, ic, oc] * b[o*s0 + k*d0 - p0, ic, n]. Built from im2col (F32) and mul_mat; a and b
// contiguous. _ph: p0 = K / 2.
GGML_API struct ggml_tensor * ggml_conv_1d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // kernel
        struct ggml_tensor  * b,   // data
        int                   s0,  // stride
        int                   p0,  // padding
        int                   d0); // dilation
GGML_API struct ggml_tensor * ggml_conv_1d_ph(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   s,   // stride
        int                   d);  // dilation
// depthwise: a [K, 1, C], b [L, C, N] -> [OL, C, N]: channel c convolved with a[:, 0, c] only
GGML_API struct ggml_tensor * ggml_conv_1d_dw(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   s0,
        int                   p0,
        int                   d0);
GGML_API struct ggml_tensor * ggml_conv_1d_dw_ph(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   s0,
        int                   d0);

// a [KW, KH, IC, OC], b [W, H, IC, N] -> [OW, OH, OC, N] (im2col + mul_mat; a, b contiguous).
// sk_p0: stride = kernel size, no padding (patch embedding); s1_ph: stride 1, padding K/2.
GGML_API struct ggml_tensor * ggml_conv_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // kernel
        struct ggml_tensor  * b,   // data
        int                   s0,  // stride, dim 0
        int                   s1,  // stride, dim 1
        int                   p0,  // padding, dim 0
        int                   p1,  // padding, dim 1
        int                   d0,  // dilation, dim 0
        int                   d1); // dilation, dim 1
GGML_API struct ggml_tensor * ggml_conv_2d_sk_p0(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_conv_2d_s1_ph(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
// The same convolution in one op (GGML_OP_CONV_2D), no im2col buffer; a and b any strides.
GGML_API struct ggml_tensor * ggml_conv_2d_direct(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   s0,
        int                   s1,
        int                   p0,
        int                   p1,
        int                   d0,
        int                   d1);
// depthwise: a [KW, KH, 1, C], b [W, H, C, N] -> [OW, OH, C, N]. _dw goes through im2col and
// mul_mat (a, b contiguous); _dw_direct is one op (GGML_OP_CONV_2D_DW) reading a and b
// through their strides (e.g. a channels-innermost permuted view); its result is contiguous.
GGML_API struct ggml_tensor * ggml_conv_2d_dw(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   s0,
        int                   s1,
        int                   p0,
        int                   p1,
        int                   d0,
        int                   d1);
GGML_API struct ggml_tensor * ggml_conv_2d_dw_direct(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   stride0,
        int                   stride1,
        int                   pad0,
        int                   pad1,
        int                   dilation0,
        int                   dilation1);

// Transposed convolution (each input element spreads a kernel-sized patch over the output):
// a [K, OC, IC], b [L, IC, N] -> [OL, OC, N], OL = (L - 1)*s0 - 2*p0 + d0*(K - 1) + 1,
// out[o, oc, n] = sum of a[k, oc, ic] * b[l, ic, n] over l*s0 + k*d0 - p0 = o.
// (ggml: N = 1, p0 = 0, d0 = 1 only; kvgraph takes any.) a and b may have any strides.
GGML_API struct ggml_tensor * ggml_conv_transpose_1d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // kernel
        struct ggml_tensor  * b,   // data
        int                   s0,  // stride
        int                   p0,  // padding
        int                   d0); // dilation
// a [KW, KH, OC, IC], b [W, H, IC, N] -> [(W - 1)*stride + KW, (H - 1)*stride + KH, OC, N]
// (no padding, no dilation)
GGML_API struct ggml_tensor * ggml_conv_transpose_2d_p0(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   stride);

// Pooling over windows of each row (1d) or each [W, H] plane (2d); a F32 or F16, result
// F32. Output size (n + 2p - k) / s + 1 (truncated), window at o*s - p; padded positions are
// skipped: MAX of the elements inside, AVG = their sum / (window size, padding included).
enum ggml_op_pool {
    GGML_OP_POOL_MAX,
    GGML_OP_POOL_AVG,
    GGML_OP_POOL_COUNT,
};
// a [L, ne1, ne2, ne3] -> [OL, ne1, ne2, ne3]
GGML_API struct ggml_tensor * ggml_pool_1d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_op_pool     op,
        int                   k0,  // window
        int                   s0,  // stride
        int                   p0); // padding
// a [W, H, ne2, ne3] -> [OW, OH, ne2, ne3]; the paddings are floats as in ggml (the
// window offset uses their integer part)
GGML_API struct ggml_tensor * ggml_pool_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_op_pool     op,
        int                   k0,
        int                   k1,
        int                   s0,
        int                   s1,
        float                 p0,
        float                 p1);

// Resampling (GGML_OP_UPSCALE): a F32 [ne0, ne1, ne2, ne3] -> F32 of the given sizes.
// NEAREST: source index floor(i / (n_out / n_in)) in every dim (in float, as ggml).
// BILINEAR: dims 0 and 1 interpolated from source coordinate (i + 0.5) * n_in / n_out - 0.5
// (clamped to the edges), dims 2 and 3 nearest; with GGML_SCALE_FLAG_ALIGN_CORNERS the
// coordinate is i * (n_in - 1) / (n_out - 1) instead. BICUBIC and ANTIALIAS are not
// implemented (abort).
enum ggml_scale_mode {
    GGML_SCALE_MODE_NEAREST  = 0,
    GGML_SCALE_MODE_BILINEAR = 1,
    GGML_SCALE_MODE_BICUBIC  = 2,
    GGML_SCALE_MODE_COUNT
};
enum ggml_scale_flag {
    GGML_SCALE_FLAG_ALIGN_CORNERS = (1 << 8),
    GGML_SCALE_FLAG_ANTIALIAS     = (1 << 9),
};
GGML_API struct ggml_tensor * ggml_interpolate(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3,
        uint32_t              mode); // a ggml_scale_mode, or'ed with ggml_scale_flag bits
// dims 0 and 1 multiplied by scale_factor
GGML_API struct ggml_tensor * ggml_upscale(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   scale_factor,
        enum ggml_scale_mode  mode);
// ggml_interpolate with a plain mode (deprecated in ggml)
GGML_API struct ggml_tensor * ggml_upscale_ext(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   ne0,
        int                   ne1,
        int                   ne2,
        int                   ne3,
        enum ggml_scale_mode  mode);

// Zero padding (GGML_OP_PAD), a F32 or F16, result of a's type: dim i gains lp_i zeros in
// front and rp_i behind. ggml_pad pads behind only.
GGML_API struct ggml_tensor * ggml_pad(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   p0,
        int                   p1,
        int                   p2,
        int                   p3);
GGML_API struct ggml_tensor * ggml_pad_ext(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   lp0,
        int                   rp0,
        int                   lp1,
        int                   rp1,
        int                   lp2,
        int                   rp2,
        int                   lp3,
        int                   rp3);

// ---- windowed attention with relative positions (SAM's image encoder) ----
// win_part, win_unpart and get_rel_pos copy elements of any non-block type (F32, F16,
// BF16, I32, ...; the result has a's type); add_rel_pos is F32.
// Partition into non-overlapping w x w windows, zero-padded past a's edge:
// a [C, W, H, 1] -> [C, w, w, npx*npy], npx = ceil(W/w), npy = ceil(H/w); window
// py*npx + px holds a's positions (px*w + i, py*w + j) at (i, j).
// Example: a [768, 64, 64, 1], w 14 -> [768, 14, 14, 25].
GGML_API struct ggml_tensor * ggml_win_part(struct ggml_context * ctx, struct ggml_tensor * a, int w);
// The reverse of ggml_win_part (the padding dropped): a [C, w, w, >= npx*npy] -> [C, w0, h0],
// npx = ceil(w0/w), npy = ceil(h0/w); position (x, y) is a's (x%w, y%w) of window
// (y/w)*npx + x/w.
GGML_API struct ggml_tensor * ggml_win_unpart(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   w0,  // width of the result
        int                   h0,  // height of the result
        int                   w);  // window size
// Relative-position embeddings gathered per (query, key) pair: a [C, 2k - 1] (one row per
// offset, offset k - 1 at distance 0), qh == kh == k -> [C, k, k], row (i, j) (key i,
// query j) = a's row (k - 1) + j - i. As ggml, query and key sizes must be equal.
GGML_API struct ggml_tensor * ggml_get_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, int qh, int kh);
// Decomposed relative-position bias added to attention scores: a [k*k, qw*qh, B, 1] (row
// (qw, qh, b): the scores of one query against k x k keys, kw fastest), pw and ph
// [k, qw, qh, B] (same shape; all F32): element kh*k + kw of a's row (qw, qh, b) gets
// ph[kh, qw, qh, b] + pw[kw, qw, qh, b]. The sum is formed in ggml's order (bit-identical
// results). Result a's shape; _inplace writes a's bytes and returns a view of a.
GGML_API struct ggml_tensor * ggml_add_rel_pos(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * pw,
        struct ggml_tensor  * ph);
GGML_API struct ggml_tensor * ggml_add_rel_pos_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * pw,
        struct ggml_tensor  * ph);

// Normalization of each row (along ne[0]):
//   a:      [ne0, ne1, ne2, ne3]   F32, any strides
//   result: a's shape, F32
// norm:     (x - mean) / sqrt(variance + eps)   (mean 0, variance 1)
// rms_norm: x / sqrt(mean(x^2) + eps)           (mean square 1)
GGML_API struct ggml_tensor * ggml_norm(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        float                 eps);
GGML_API struct ggml_tensor * ggml_norm_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        float                 eps);
GGML_API struct ggml_tensor * ggml_rms_norm(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        float                 eps);
GGML_API struct ggml_tensor * ggml_rms_norm_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        float                 eps);

// Matrix product: every row of b dotted with every row of a.
//   a:      [K, N, ne02, ne03]   F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0,
//                                Q2_K..Q6_K, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S or IQ1_M;
//                                dense rows, not transposed
//   b:      [K, M, ne12, ne13]   F32, any strides; ne12 % ne02 == 0 and ne13 % ne03 == 0
//   result: [N, M, ne12, ne13]   F32, i.e. [a->ne[1], b->ne[1], b->ne[2], b->ne[3]]
// result[n, m, i2, i3] = sum over k of a[k, n, i2 / r2, i3 / r3] * b[k, m, i2, i3], with
// r2 = ne12 / ne02 and r3 = ne13 / ne03: a is broadcast over b's dims 2 and 3 in blocks
// (matrix j of a serves r2 consecutive matrices of b, as grouped-query attention needs),
// not cyclically as in the elementwise ops.
GGML_API struct ggml_tensor * ggml_mul_mat(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);

// Copy a into b: the elements of a in logical order (ne[0] fastest, strides honoured) are
// stored in b's logical order; the element counts must be equal, the shapes need not be.
// Converts between F32, F16, BF16, I8, I16 and I32, quantizes into a type kvgraph encodes
// and dequantizes from a type it reads (quantized tensors need dense rows). Returns a view
// of b (the op writes b's bytes).
GGML_API struct ggml_tensor * ggml_cpy(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
// A contiguous copy of a (a's type) in a's logical element order; cont_Nd gives it the shape
// [ne0, ...] (same element count as a).
GGML_API struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_cont_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1);
GGML_API struct ggml_tensor * ggml_cont_3d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2);
GGML_API struct ggml_tensor * ggml_cont_4d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3);

#ifdef __cplusplus
}
#endif
