// Portable kernels: the reference every SIMD path is tested against, and the path used
// on CPUs without one. Every dot product sums in element order into one float, so a
// result does not depend on the tile shape it was computed in.
#include "simd.h"

#include "types.h"

#include <cmath>
#include <cstring>

namespace {

using namespace kvg;

template <int R, int C>
inline void store_tile(const mm_tile_args & a, const float (&acc)[R][C]) {
    for (int c = 0; c < C; ++c) {
        float * o = a.out + c * a.out_stride;
        for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + acc[r][c] : acc[r][c];
    }
}

// Float weights: Load(row, i) returns element i of a weight row as float.
template <typename W, float (*Load)(const W *, int64_t), int R, int C>
inline void tile_float(const mm_tile_args & a) {
    const W * w[R];
    const float * x[C];
    for (int r = 0; r < R; ++r) w[r] = (const W *) (a.w + r * a.w_stride);
    for (int c = 0; c < C; ++c) x[c] = (const float *) (a.x + c * a.x_stride);
    float acc[R][C] = {};
    for (int64_t i = 0; i < a.k; ++i) {
        float wv[R];
        for (int r = 0; r < R; ++r) wv[r] = Load(w[r], i);
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) acc[r][c] += wv[r] * x[c][i];
        }
    }
    store_tile<R, C>(a, acc);
}

inline float load_f32(const float * p, int64_t i) { return p[i]; }
inline float load_f16(const ggml_fp16_t * p, int64_t i) { return ggml_fp16_to_fp32(p[i]); }
inline float load_bf16(const ggml_bf16_t * p, int64_t i) { return ggml_bf16_to_fp32(p[i]); }

template <int R, int C> struct tile_f32 {
    static void run(const mm_tile_args & a) { tile_float<float, load_f32, R, C>(a); }
};
template <int R, int C> struct tile_f16 {
    static void run(const mm_tile_args & a) { tile_float<ggml_fp16_t, load_f16, R, C>(a); }
};
template <int R, int C> struct tile_bf16 {
    static void run(const mm_tile_args & a) { tile_float<ggml_bf16_t, load_bf16, R, C>(a); }
};

// Quantized weights against q8_0 activations: integer dot per 32-block, then
// acc += isum * (d_w * d_x). Unpack(block, q) writes the block's 32 weights as ints.
template <typename B, void (*Unpack)(const B &, int *), int R, int C>
inline void tile_quant(const mm_tile_args & a) {
    const int64_t nb = a.k / QK8_0;
    float acc[R][C] = {};
    for (int64_t b = 0; b < nb; ++b) {
        int wq[R][QK8_0];
        float wd[R];
        for (int r = 0; r < R; ++r) {
            const B & blk = ((const B *) (a.w + r * a.w_stride))[b];
            Unpack(blk, wq[r]);
            wd[r] = ggml_fp16_to_fp32(blk.d);
        }
        for (int c = 0; c < C; ++c) {
            const block_q8_0 & xb = ((const block_q8_0 *) (a.x + c * a.x_stride))[b];
            const float xd = ggml_fp16_to_fp32(xb.d);
            for (int r = 0; r < R; ++r) {
                int sum = 0;
                for (int j = 0; j < QK8_0; ++j) sum += wq[r][j] * xb.qs[j];
                acc[r][c] += (float) sum * (wd[r] * xd);
            }
        }
    }
    store_tile<R, C>(a, acc);
}

inline void unpack_q8_0(const block_q8_0 & b, int * q) {
    for (int j = 0; j < QK8_0; ++j) q[j] = b.qs[j];
}
inline void unpack_q4_0(const block_q4_0 & b, int * q) {
    for (int j = 0; j < QK4_0 / 2; ++j) {
        q[j] = (b.qs[j] & 0x0f) - 8;
        q[j + QK4_0 / 2] = (b.qs[j] >> 4) - 8;
    }
}

template <int R, int C> struct tile_q8_0 {
    static void run(const mm_tile_args & a) { tile_quant<block_q8_0, unpack_q8_0, R, C>(a); }
};
template <int R, int C> struct tile_q4_0 {
    static void run(const mm_tile_args & a) { tile_quant<block_q4_0, unpack_q4_0, R, C>(a); }
};

void quantize_q8_0(const float * x, void * y, int64_t k) { quantize_row_q8_0_ref(x, (block_q8_0 *) y, k); }

template <typename V, float (*Load)(const V *, int64_t)>
void accum(int C, int64_t n, const float * p, int64_t ps, const uint8_t * active, const char * rows, size_t rs, int64_t dv,
           float * acc, int64_t as) {
    for (int64_t j = 0; j < n; ++j) {
        if (!active[j]) continue;
        const V * row = (const V *) (rows + j * rs);
        for (int c = 0; c < C; ++c) {
            const float w = p[c * ps + j];
            float * a = acc + c * as;
            for (int64_t i = 0; i < dv; ++i) a[i] += w * Load(row, i);
        }
    }
}
void scale_f32(int64_t n, float a, float * y) {
    for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

float softmax_weights(int64_t n, float * s, float max, uint8_t * active) {
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        if (s[j] == -INFINITY) {
            s[j] = 0.0f;
            continue;
        }
        s[j] = std::exp(s[j] - max);
        sum += s[j];
        active[j] = 1;
    }
    return sum;
}

void dequantize_q8_0(const void * x, float * y, int64_t n) { dequantize_row_q8_0((const block_q8_0 *) x, y, n); }

void silu_f32(int64_t n, const float * x, float * y) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

// What build_kernel_table takes from this file.
struct isa {
    static constexpr const char * name = "scalar";
    static constexpr int float_cols = 4, quant_cols = 4;
    static constexpr bool one_row_matvec = false;
    static constexpr auto add_block_quant_kernels = add_block_quant_kernels_scalar;
    static constexpr auto quantize_q8_0 = ::quantize_q8_0;
    static constexpr auto accum_f32 = accum<float, load_f32>, accum_f16 = accum<ggml_fp16_t, load_f16>;
    static constexpr auto scale_f32 = ::scale_f32;
    static constexpr auto softmax_weights = ::softmax_weights;
    static constexpr auto silu_f32 = ::silu_f32;
    static constexpr auto f16_to_f32 = ggml_fp16_to_fp32_row;
    static constexpr auto dequantize_q8_0 = ::dequantize_q8_0;
    static constexpr mm_tile_fn mv_f16 = nullptr, mv_bf16 = nullptr; // f16/bf16 keep f32 activations
    static constexpr void (*pack_mv_f16)(const void *, void *, int64_t) = nullptr, (*pack_mv_bf16)(const void *, void *, int64_t) = nullptr;
};

} // namespace

const kvg::cpu_kernels & kvg::kernels_scalar() {
    static const cpu_kernels k = build_kernel_table<isa, tile_f32, tile_f16, tile_bf16, tile_q8_0, tile_q4_0>();
    return k;
}
