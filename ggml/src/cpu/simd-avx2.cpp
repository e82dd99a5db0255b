// AVX2 + FMA + F16C kernels. Every function that uses the instructions carries the target
// attribute itself (no file-wide flags), and the table is built by plain code, so the
// library still runs on older x86-64 CPUs: traits.cpp only calls these after checking
// CPUID.
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

// Matrix-vector prefetch distance for one-row tiles (see simd-avx512.cpp).
constexpr int PF_AHEAD = 4096;

// ---- float weights · f32 activations -------------------------------------------------------------
// load(p, i): 8 elements from i; load_tail: the n < 8 left, zero padded.
struct ld_f32 {
    static constexpr int ES = 4;
    static KVG_INLINE __m256 load(const char * p, int64_t i) { return _mm256_loadu_ps((const float *) p + i); }
    static KVG_INLINE __m256 load_tail(const char * p, int64_t i, int64_t n) {
        float t[8] = {};
        std::memcpy(t, (const float *) p + i, n * sizeof(float));
        return _mm256_loadu_ps(t);
    }
};
struct ld_f16 {
    static constexpr int ES = 2;
    static KVG_INLINE __m256 load(const char * p, int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) p + i)));
    }
    static KVG_INLINE __m256 load_tail(const char * p, int64_t i, int64_t n) {
        uint16_t t[8] = {};
        std::memcpy(t, (const uint16_t *) p + i, n * sizeof(uint16_t));
        return load((const char *) t, 0);
    }
};
// q8_0 blocks: element i of a row of blocks, as dequantize_q8_0 computes it (the quant times the
// block's scale, rounded once); i a multiple of 8.
struct ld_q8_0 {
    static KVG_INLINE __m256 load(const char * p, int64_t i) {
        const block_q8_0 & b = ((const block_q8_0 *) p)[i / QK8_0];
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + i % QK8_0)));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(_cvtsh_ss(b.d)));
    }
    static KVG_INLINE __m256 load_tail(const char * p, int64_t i, int64_t n) {
        const block_q8_0 * b = (const block_q8_0 *) p;
        float t[8] = {};
        for (int64_t e = i; e < i + n; ++e) t[e - i] = b[e / QK8_0].qs[e % QK8_0] * _cvtsh_ss(b[e / QK8_0].d);
        return _mm256_loadu_ps(t);
    }
};
struct ld_bf16 {
    static constexpr int ES = 2;
    static KVG_INLINE __m256 load(const char * p, int64_t i) {
        const __m128i h = _mm_loadu_si128((const __m128i *) ((const uint16_t *) p + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static KVG_INLINE __m256 load_tail(const char * p, int64_t i, int64_t n) {
        uint16_t t[8] = {};
        std::memcpy(t, (const uint16_t *) p + i, n * sizeof(uint16_t));
        return load((const char *) t, 0);
    }
};

template <typename L, int R, int C>
KVG_INLINE void tile_float(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int j = 0; j < R * C; ++j) acc[j] = _mm256_setzero_ps();
    const char * w[R];
    const char * x[C];
    for (int r = 0; r < R; ++r) w[r] = a.w + r * a.w_stride;
    for (int c = 0; c < C; ++c) x[c] = a.x + c * a.x_stride;
    int64_t i = 0;
    if (R * C == 1) {
        // one row: four FMA chains instead of one latency-bound chain (see simd-avx512.cpp)
        __m256 part[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (; i + 32 <= a.k; i += 32) {
            _mm_prefetch(w[0] + i * L::ES + PF_AHEAD, _MM_HINT_T0);
            acc[0] = _mm256_fmadd_ps(L::load(w[0], i), ld_f32::load(x[0], i), acc[0]);
            for (int u = 0; u < 3; ++u) {
                part[u] = _mm256_fmadd_ps(L::load(w[0], i + 8 * (u + 1)), ld_f32::load(x[0], i + 8 * (u + 1)), part[u]);
            }
        }
        acc[0] = _mm256_add_ps(_mm256_add_ps(acc[0], part[0]), _mm256_add_ps(part[1], part[2]));
    }
    for (; i + 8 <= a.k; i += 8) {
        __m256 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = ld_f32::load(x[c], i);
        for (int r = 0; r < R; ++r) {
            if (C == 1) _mm_prefetch(R == 1 ? w[r] + i * L::ES + PF_AHEAD : w[r] + R * a.w_stride + i * L::ES, _MM_HINT_T0);
            const __m256 wv = L::load(w[r], i);
            for (int c = 0; c < C; ++c) acc[r * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[r * C + c]);
        }
    }
    if (i < a.k) {
        __m256 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = ld_f32::load_tail(x[c], i, a.k - i);
        for (int r = 0; r < R; ++r) {
            const __m256 wv = L::load_tail(w[r], i, a.k - i);
            for (int c = 0; c < C; ++c) acc[r * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[r * C + c]);
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct tile_f32 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_f32, R, C>(a); }
};
template <int R, int C> struct tile_f16 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_f16, R, C>(a); }
};
template <int R, int C> struct tile_bf16 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_bf16, R, C>(a); }
};

// ---- quantized weights · q8_0 activations, one 32-block per vector --------------------------------
// q4_0 block as 32 bytes in element order: low nibbles (elements 0..15), then high nibbles.
KVG_INLINE __m256i load_q4(const block_q4_0 & b) {
    const __m128i q = _mm_loadu_si128((const __m128i *) b.qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

// q4_0 x q8_0, two blocks per step, block k in 128-bit lane k: low nibbles (elements
// 0..15) in one vector, high ones (16..31) in another, activations split the same way.
KVG_INLINE __m256 scales2(ggml_fp16_t d0, ggml_fp16_t d1) {
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int) ((uint32_t) d0 | (uint32_t) d1 << 16)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(f), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}
KVG_INLINE __m256i load2x16(const uint8_t * p, size_t stride) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) p)),
                                   _mm_loadu_si128((const __m128i *) (p + stride)), 1);
}

template <int R, int C>
KVG_INLINE void q4_step2(const mm_tile_args & a, int64_t b, __m256 * acc) {
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
    __m256i xlo[C], xhi[C], x8[C];
    __m256 xd[C];
    for (int c = 0; c < C; ++c) {
        const block_q8_0 * xb = (const block_q8_0 *) (a.x + c * a.x_stride) + b;
        xlo[c] = load2x16((const uint8_t *) xb[0].qs, sizeof(block_q8_0));
        xhi[c] = load2x16((const uint8_t *) xb[0].qs + 16, sizeof(block_q8_0));
        // dot(q - 8, x) = dot(q, x) - 8 * sum(x), the second term shared by all rows
        x8[c] = _mm256_add_epi16(_mm256_maddubs_epi16(eight, xlo[c]), _mm256_maddubs_epi16(eight, xhi[c]));
        xd[c] = scales2(xb[0].d, xb[1].d);
    }
    for (int r = 0; r < R; ++r) {
        const block_q4_0 * wb = (const block_q4_0 *) (a.w + r * a.w_stride) + b;
        if (C == 1) _mm_prefetch((const char *) wb + (R == 1 ? PF_AHEAD : R * a.w_stride), _MM_HINT_T0);
        const __m256i q = load2x16(wb[0].qs, sizeof(block_q4_0));
        const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        const __m256 wd = scales2(wb[0].d, wb[1].d);
        for (int c = 0; c < C; ++c) {
            const __m256i p16 = _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo[c]), _mm256_maddubs_epi16(hi, xhi[c])), x8[c]);
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
            acc[r * C + c] = _mm256_fmadd_ps(p, _mm256_mul_ps(wd, xd[c]), acc[r * C + c]);
        }
    }
}

template <bool Q4, int R, int C>
KVG_INLINE void tile_quant(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int j = 0; j < R * C; ++j) acc[j] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t nb = a.k / QK8_0;
    int64_t b0 = 0;
    if (Q4) {
        for (; b0 + 2 <= nb; b0 += 2) q4_step2<R, C>(a, b0, acc);
    }
    for (int64_t b = b0; b < nb; ++b) {
        __m256i xq[C], x8[C];
        float xd[C];
        for (int c = 0; c < C; ++c) {
            const block_q8_0 & xb = ((const block_q8_0 *) (a.x + c * a.x_stride))[b];
            xq[c] = _mm256_loadu_si256((const __m256i *) xb.qs);
            xd[c] = _cvtsh_ss(xb.d);
            // q4: dot(q - 8, x) = dot(q, x) - 8 * sum(x), the second term shared by all rows
            if (Q4) x8[c] = _mm256_maddubs_epi16(_mm256_set1_epi8(8), xq[c]);
        }
        for (int r = 0; r < R; ++r) {
            __m256i wq, ws = _mm256_setzero_si256();
            float wd;
            if (C == 1) _mm_prefetch(a.w + (R == 1 ? PF_AHEAD : (r + R) * a.w_stride) + b * (Q4 ? sizeof(block_q4_0) : sizeof(block_q8_0)), _MM_HINT_T0);
            if (Q4) {
                const block_q4_0 & wb = ((const block_q4_0 *) (a.w + r * a.w_stride))[b];
                wq = load_q4(wb);
                wd = _cvtsh_ss(wb.d);
            } else {
                const block_q8_0 & wb = ((const block_q8_0 *) (a.w + r * a.w_stride))[b];
                ws = _mm256_loadu_si256((const __m256i *) wb.qs);
                wq = _mm256_sign_epi8(ws, ws); // |w| * (x with w's sign) = w * x, in maddubs' u8 x s8 form
                wd = _cvtsh_ss(wb.d);
            }
            for (int c = 0; c < C; ++c) {
                __m256i p16;
                if (Q4) p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(wq, xq[c]), x8[c]);
                else p16 = _mm256_maddubs_epi16(wq, _mm256_sign_epi8(xq[c], ws));
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[r * C + c] = _mm256_fmadd_ps(p, _mm256_set1_ps(wd * xd[c]), acc[r * C + c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct tile_q8_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_quant<false, R, C>(a); }
};
template <int R, int C> struct tile_q4_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_quant<true, R, C>(a); }
};

// ---- q4_0 / q8_0 weights · several packed activation rows (mm_kernel::mv) ------------------------
// A batch of a few sequences: each weight row is loaded and unpacked once for up to MV_COLS
// activation rows, which come packed so that each takes loads only (no shuffles): q4_0, per
// pair of blocks, what q4_step2 builds (low and high halves, -8 * sums, scales); q8_0, per
// block, the quants and the scale in 8 lanes. Every output is summed as by tile[r][c].
constexpr int MV_COLS = 8;
constexpr size_t MV_Q4_PAIR = 128, MV_Q8_BLOCK = 64; // packed bytes per 64 / 32 values

KVG_TARGET void pack_mv_q4(const void * q8_row, void * out, int64_t k) {
    const block_q8_0 * xb = (const block_q8_0 *) q8_row;
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t p = 0; p < k / 64; ++p, xb += 2) {
        char * o = (char *) out + p * MV_Q4_PAIR;
        const __m256i lo = load2x16((const uint8_t *) xb[0].qs, sizeof(block_q8_0));
        const __m256i hi = load2x16((const uint8_t *) xb[0].qs + 16, sizeof(block_q8_0));
        _mm256_storeu_si256((__m256i *) o, lo);
        _mm256_storeu_si256((__m256i *) (o + 32), hi);
        _mm256_storeu_si256((__m256i *) (o + 64),
                            _mm256_add_epi16(_mm256_maddubs_epi16(eight, lo), _mm256_maddubs_epi16(eight, hi)));
        _mm256_storeu_ps((float *) (o + 96), scales2(xb[0].d, xb[1].d));
    }
}

KVG_TARGET void pack_mv_q8(const void * q8_row, void * out, int64_t k) {
    const block_q8_0 * xb = (const block_q8_0 *) q8_row;
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        char * o = (char *) out + b * MV_Q8_BLOCK;
        std::memcpy(o, xb[b].qs, 32);
        _mm256_storeu_ps((float *) (o + 32), _mm256_set1_ps(_cvtsh_ss(xb[b].d)));
    }
}

// a.n_cols weight rows, one after another, times a.n_x = C packed rows (k: whole pairs of blocks)
template <int C> KVG_INLINE void mv_q4_rows(const mm_tile_args & a) {
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < a.n_cols; ++r) {
        const block_q4_0 * wb = (const block_q4_0 *) (a.w + r * a.w_stride);
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t p = 0; p < a.k / 64; ++p, wb += 2) {
            _mm_prefetch((const char *) wb + PF_AHEAD, _MM_HINT_T0);
            const __m256i q = load2x16(wb[0].qs, sizeof(block_q4_0));
            const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            const __m256 wd = scales2(wb[0].d, wb[1].d);
            for (int c = 0; c < C; ++c) {
                const char * x = a.x + c * a.x_stride + p * MV_Q4_PAIR;
                const __m256i p16 = _mm256_sub_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *) x)),
                                     _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *) (x + 32)))),
                    _mm256_loadu_si256((const __m256i *) (x + 64)));
                const __m256 s = _mm256_mul_ps(wd, _mm256_loadu_ps((const float *) (x + 96)));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones)), s, acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            float * o = a.out + c * a.out_stride + r;
            *o = a.accumulate ? *o + reduce1(acc[c]) : reduce1(acc[c]);
        }
    }
}

template <int C> KVG_INLINE void mv_q8_rows(const mm_tile_args & a) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < a.n_cols; ++r) {
        const block_q8_0 * wb = (const block_q8_0 *) (a.w + r * a.w_stride);
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t b = 0; b < a.k / QK8_0; ++b) {
            _mm_prefetch((const char *) (wb + b) + PF_AHEAD, _MM_HINT_T0);
            const __m256i ws = _mm256_loadu_si256((const __m256i *) wb[b].qs), wq = _mm256_sign_epi8(ws, ws);
            const __m256 wd = _mm256_set1_ps(_cvtsh_ss(wb[b].d));
            for (int c = 0; c < C; ++c) {
                const char * x = a.x + c * a.x_stride + b * MV_Q8_BLOCK;
                const __m256i p16 =
                    _mm256_maddubs_epi16(wq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *) x), ws));
                const __m256 s = _mm256_mul_ps(wd, _mm256_loadu_ps((const float *) (x + 32)));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones)), s, acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            float * o = a.out + c * a.out_stride + r;
            *o = a.accumulate ? *o + reduce1(acc[c]) : reduce1(acc[c]);
        }
    }
}

// the call for a.n_x activation rows
template <template <int> class K> KVG_TARGET void mv_by_cols(const mm_tile_args & a) {
    switch (a.n_x) {
        case 1: K<1>::run(a); break;
        case 2: K<2>::run(a); break;
        case 3: K<3>::run(a); break;
        case 4: K<4>::run(a); break;
        case 5: K<5>::run(a); break;
        case 6: K<6>::run(a); break;
        case 7: K<7>::run(a); break;
        default: K<MV_COLS>::run(a); break;
    }
}
template <int C> struct mv_q4 {
    static KVG_INLINE void run(const mm_tile_args & a) { mv_q4_rows<C>(a); }
};
template <int C> struct mv_q8 {
    static KVG_INLINE void run(const mm_tile_args & a) { mv_q8_rows<C>(a); }
};

// ---- q4_0_r16 weights (rows interleaved by 16, types.h) · several packed rows (mm_kernel::mv) -----
// One 32-bit lane per weight row: a vector holds 4 bytes of 8 rows, so a block ends in 8 exact
// integer dots of 8 rows in one vector and its float steps (convert, scale, FMA) serve 8 rows
// where the q4_0 kernel spends them on one. The packed row: pack_mv_r16 (simd-avx2.h) with
// 8 * the sums (the -8 of q4_0's nibbles), so a step only broadcasts.
constexpr size_t R16_Q4_BLOCK = R16_ROWS * sizeof(block_q4_0); // (r16_block_bytes)
constexpr int R16_COLS = 4;
constexpr int64_t R16_STEP = 16; // blocks per pass over both halves of the group: they stay in L1

KVG_TARGET void pack_mv_q4_r16(const void * q8_row, void * out, int64_t k) { pack_mv_r16<8>(q8_row, out, k); }

// Blocks [b0, b1) of rows 8h..8h+7 of the group at w, added to acc[c] for C packed rows.
template <int C> KVG_INLINE void r16_half(const mm_tile_args & a, int h, int64_t b0, int64_t b1, __m256 * acc) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (int64_t b = b0; b < b1; ++b) {
        const char * g = a.w + b * R16_Q4_BLOCK; // d[16] (f16), then qs[4][16][4]
        _mm_prefetch(g + PF_AHEAD, _MM_HINT_T0);
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g + 16 * h)));
        __m256i lo[4], hi[4];
        for (int j = 0; j < 4; ++j) {
            const __m256i q = _mm256_loadu_si256((const __m256i *) (g + 32 + 64 * j + 32 * h));
            lo[j] = _mm256_and_si256(q, low4);
            hi[j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        }
        for (int c = 0; c < C; ++c) {
            const char * x = a.x + c * a.x_stride + b * R16_X_BLOCK;
            // 8 products of at most 2 * 15 * 127 per 16-bit lane: no overflow
            __m256i s =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], bcast32(x)), _mm256_maddubs_epi16(hi[0], bcast32(x + 16)));
            for (int j = 1; j < 4; ++j) {
                s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_maddubs_epi16(lo[j], bcast32(x + 4 * j)),
                                                         _mm256_maddubs_epi16(hi[j], bcast32(x + 16 + 4 * j))));
            }
            const __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(s, ones), bcast32(x + 32));
            const __m256 scale = _mm256_mul_ps(wd, _mm256_castsi256_ps(bcast32(x + 36)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[c]);
        }
    }
}

// The 16 rows of the group at a.w (a.n_cols = 16) times a.n_x = C packed rows.
template <int C> KVG_INLINE void mv_q4_r16_rows(const mm_tile_args & a) { r16_group_rows<C, R16_STEP, r16_half<C>>(a); }

// The same product for C <= 2 with both halves in one pass over the blocks: each broadcast
// activation quad feeds the products of both halves, where r16_half broadcasts it once per
// half (the broadcasts cost vector-ALU slots, which bound these kernels). Each half's sums
// run in r16_half's order: the same bits. (C = 3, 4 would need more than 16 registers.)
// Measured (Zen 3, one group, K = 1024 in L1, TSC ticks per row and half-block): C = 1
// 15.2 -> 12.2, C = 2 12.7 -> 11.0; C = 4 10.4 -> 11.0, so 3 and 4 keep r16_half.
template <int C> KVG_INLINE void mv_q4_r16_both(const mm_tile_args & a) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[2][C];
    for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < C; ++c) acc[h][c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < a.k / QK8_0; ++b) {
        const char * g = a.w + b * R16_Q4_BLOCK; // d[16] (f16), then qs[4][16][4]
        _mm_prefetch(g + PF_AHEAD, _MM_HINT_T0);
        const char * xb = a.x + b * R16_X_BLOCK;
        __m256i s[2][C]; // 8 products of at most 2 * 15 * 127 per 16-bit lane: no overflow
        for (int j = 0; j < 4; ++j) {
            const __m256i q0 = _mm256_loadu_si256((const __m256i *) (g + 32 + 64 * j));
            const __m256i q1 = _mm256_loadu_si256((const __m256i *) (g + 64 + 64 * j));
            const __m256i lo0 = _mm256_and_si256(q0, low4), hi0 = _mm256_and_si256(_mm256_srli_epi16(q0, 4), low4);
            const __m256i lo1 = _mm256_and_si256(q1, low4), hi1 = _mm256_and_si256(_mm256_srli_epi16(q1, 4), low4);
            for (int c = 0; c < C; ++c) {
                const char * x = xb + c * a.x_stride;
                const __m256i xl = bcast32(x + 4 * j), xh = bcast32(x + 16 + 4 * j);
                const __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, xl), _mm256_maddubs_epi16(hi0, xh));
                const __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, xl), _mm256_maddubs_epi16(hi1, xh));
                s[0][c] = j == 0 ? t0 : _mm256_add_epi16(s[0][c], t0);
                s[1][c] = j == 0 ? t1 : _mm256_add_epi16(s[1][c], t1);
            }
        }
        for (int h = 0; h < 2; ++h) {
            const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g + 16 * h)));
            for (int c = 0; c < C; ++c) {
                const char * x = xb + c * a.x_stride;
                const __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(s[h][c], ones), bcast32(x + 32));
                const __m256 scale = _mm256_mul_ps(wd, _mm256_castsi256_ps(bcast32(x + 36)));
                acc[h][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[h][c]);
            }
        }
    }
    for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < C; ++c) {
            float * o = a.out + c * a.out_stride + 8 * h;
            _mm256_storeu_ps(o, a.accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[h][c]) : acc[h][c]);
        }
    }
}

template <int C> struct mv_r16 { // (n_x <= R16_COLS, the kernel's mv_cols)
    static KVG_INLINE void run(const mm_tile_args & a) {
        if constexpr (C <= 2) mv_q4_r16_both<C>(a);
        else mv_q4_r16_rows<std::min(C, R16_COLS)>(a);
    }
};

// Products of up to MV_MAX rows take these kernels (measured: Zen 3, 2 threads, 1.1B q4_0).
constexpr int MV_MAX = 16;
// Whether q4_0 matrices are interleaved (repacked at load) for the q4_0_r16 kernel.
constexpr bool USE_R16 = true;

void add_multirow_mv(cpu_kernels & k) {
    k.mm[MM_Q4_0].mv = mv_by_cols<mv_q4>;
    k.mm[MM_Q4_0].pack_mv = pack_mv_q4;
    k.mm[MM_Q4_0].mv_group_bytes = 2 * MV_Q4_PAIR;
    k.mm[MM_Q8_0].mv = mv_by_cols<mv_q8>;
    k.mm[MM_Q8_0].pack_mv = pack_mv_q8;
    k.mm[MM_Q8_0].mv_group_bytes = 4 * MV_Q8_BLOCK;
    for (int t : {MM_Q4_0, MM_Q8_0}) {
        k.mm[t].mv_cols = MV_COLS;
        k.mm[t].mv_max = MV_MAX;
    }
    if (!USE_R16) return;
    mm_kernel & r = k.mm[MM_Q4_0_R16];
    r.mv = mv_by_cols<mv_r16>;
    r.pack_mv = pack_mv_q4_r16;
    r.mv_group_bytes = (MM_MV_GROUP / QK8_0) * R16_X_BLOCK;
    r.mv_rows = (int) R16_ROWS;
    r.mv_cols = R16_COLS;
    r.mv_max = MV_MAX;
}

// ---- activations, attention helpers -------------------------------------------------------------
// Rounds half away from zero like the reference quantizer's lround (r - trunc(r) is exact).
KVG_INLINE __m256i round_away(__m256 r) {
    const __m256 t = _mm256_round_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(r, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(r, sign)); // +-1 with r's sign
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

KVG_TARGET void quantize_q8_0(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
            v[j] = _mm256_loadu_ps(x + b * QK8_0 + 8 * j);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float d = _mm_cvtss_f32(h) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = (ggml_fp16_t) _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m256 s = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; ++j) q[j] = round_away(_mm256_mul_ps(v[j], s));
        // packs work per 128-bit lane; the permute restores element order
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *) y[b].qs, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

// Accumulators stay in registers over a run of V rows, 8 columns at a time.
template <typename L, int C>
KVG_INLINE void accum_t(int64_t n, const float * p, int64_t ps, const uint8_t * active, const char * rows, size_t rs, int64_t dv,
                        float * acc, int64_t as) {
    int64_t d = 0;
    for (; d + 8 <= dv; d += 8) {
        __m256 a[C];
        for (int c = 0; c < C; ++c) a[c] = _mm256_loadu_ps(acc + c * as + d);
        for (int64_t j = 0; j < n; ++j) {
            if (!active[j]) continue;
            const __m256 v = L::load(rows + j * rs, d);
            for (int c = 0; c < C; ++c) a[c] = _mm256_fmadd_ps(_mm256_set1_ps(p[c * ps + j]), v, a[c]);
        }
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + c * as + d, a[c]);
    }
    if (d < dv) {
        float t[C][8];
        for (int c = 0; c < C; ++c) {
            std::memset(t[c], 0, sizeof(t[c]));
            std::memcpy(t[c], acc + c * as + d, (dv - d) * sizeof(float));
        }
        __m256 a[C];
        for (int c = 0; c < C; ++c) a[c] = _mm256_loadu_ps(t[c]);
        for (int64_t j = 0; j < n; ++j) {
            if (!active[j]) continue;
            const __m256 v = L::load_tail(rows + j * rs, d, dv - d);
            for (int c = 0; c < C; ++c) a[c] = _mm256_fmadd_ps(_mm256_set1_ps(p[c * ps + j]), v, a[c]);
        }
        for (int c = 0; c < C; ++c) {
            _mm256_storeu_ps(t[c], a[c]);
            std::memcpy(acc + c * as + d, t[c], (dv - d) * sizeof(float));
        }
    }
}

// Calls K::run<C>(a...) with C = cols (1..8) as a constant: register tiles of C queries.
template <typename K, typename... A> KVG_INLINE void by_cols(int cols, A... a) {
    switch (cols) {
        case 1: K::template run<1>(a...); break;
        case 2: K::template run<2>(a...); break;
        case 3: K::template run<3>(a...); break;
        case 4: K::template run<4>(a...); break;
        case 5: K::template run<5>(a...); break;
        case 6: K::template run<6>(a...); break;
        case 7: K::template run<7>(a...); break;
        default: K::template run<8>(a...); break;
    }
}

template <typename L> struct accum_k {
    template <int C, typename... A> static KVG_INLINE void run(A... a) { accum_t<L, C>(a...); }
};

template <typename L>
KVG_TARGET void accum(int C, int64_t n, const float * p, int64_t ps, const uint8_t * active, const char * rows, size_t rs,
                      int64_t dv, float * acc, int64_t as) {
    // up to 8 accumulators per V load (8 queries: a GQA group of one token reads V once)
    for (int c0 = 0; c0 < C; c0 += 8)
        by_cols<accum_k<L>>(std::min(8, C - c0), n, p + c0 * ps, ps, active, rows, rs, dv, acc + c0 * as, as);
}

// ---- attention of a few queries (decode): K and V read in the cache's own type --------------------
// out[c * os + j] = dot(x + c * xs, row j) over k (a multiple of 8) for the rows with active[j],
// c < C: one FMA chain per query and reduce8, so the bits of the tiles (finish_tile).
template <typename L, int C>
KVG_INLINE void dec_dots_rows_t(int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k,
                                const uint8_t * active, float * out, int64_t os) {
    for (int64_t j = 0; j < n; ++j) {
        if (!active[j]) continue;
        const char * w = rows + j * rs;
        __m256 acc[8];
        for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < k; i += 8) {
            const __m256 wv = L::load(w, i);
            for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + c * xs + i), acc[c]);
        }
        float sums[8];
        reduce8(acc, sums);
        for (int c = 0; c < C; ++c) out[c * os + j] = sums[c];
    }
}

// out[c * os + t] = sum over d < k of x[c * xs + d] * row_d[t], t < n (<= GGML_KV_GROUP): keys
// stored by channel (row_d: the group's values of channel d at rows + d * rs), 8 positions per
// vector against the broadcast query element; no horizontal sums.
template <typename L, int C>
KVG_INLINE void dec_dots_channels_t(int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k,
                                    float * out, int64_t os) {
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t d = 0; d < k; ++d) {
            const __m256 kv = L::load(rows + d * rs, t0);
            for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(kv, _mm256_broadcast_ss(x + c * xs + d), acc[c]);
        }
        for (int c = 0; c < C; ++c) {
            alignas(32) float t[8];
            _mm256_store_ps(t, acc[c]);
            std::memcpy(out + c * os + t0, t, std::min<int64_t>(8, n - t0) * sizeof(float));
        }
    }
}

template <typename L> struct dots_rows_k {
    template <int C, typename... A> static KVG_INLINE void run(A... a) { dec_dots_rows_t<L, C>(a...); }
};
template <typename L> struct dots_channels_k {
    template <int C, typename... A> static KVG_INLINE void run(A... a) { dec_dots_channels_t<L, C>(a...); }
};

template <typename L>
KVG_TARGET void dec_dots_rows(int C, int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k,
                              const uint8_t * active, float * out, int64_t os) {
    by_cols<dots_rows_k<L>>(C, n, x, xs, rows, rs, k, active, out, os);
}

template <typename L>
KVG_TARGET void dec_dots_channels(int C, int64_t n, const float * x, int64_t xs, const char * rows, size_t rs,
                                  int64_t k, float * out, int64_t os) {
    by_cols<dots_channels_k<L>>(C, n, x, xs, rows, rs, k, out, os);
}

template <typename L> fa_dec_type dec_type() { return {dec_dots_rows<L>, dec_dots_channels<L>, accum<L>}; }

KVG_TARGET void scale_f32(int64_t n, float a, float * y) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] *= a;
}

// silu(x) as the AVX-512 path computes it (the same bits)
KVG_INLINE __m256 silu8(__m256 x) {
    const __m256 t = exp_nonpositive(_mm256_min_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), x)));
    const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_div_ps(_mm256_blendv_ps(x, _mm256_mul_ps(x, t), neg), _mm256_add_ps(t, _mm256_set1_ps(1.0f)));
}
KVG_TARGET void silu_f32(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int) (n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + i, m, silu8(_mm256_maskload_ps(x + i, m)));
    }
}

KVG_TARGET float softmax_weights(int64_t n, float * s, float max, uint8_t * active) {
    const __m256 mv = _mm256_set1_ps(max), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int) std::min<int64_t>(n - j, 8)), lane);
        const __m256 v = _mm256_maskload_ps(s + j, in);
        const __m256 live = _mm256_and_ps(_mm256_castsi256_ps(in), _mm256_cmp_ps(v, ninf, _CMP_NEQ_OQ));
        const __m256 w = _mm256_and_ps(live, exp_nonpositive(_mm256_sub_ps(v, mv)));
        _mm256_maskstore_ps(s + j, in, w);
        for (int bits = _mm256_movemask_ps(live); bits; bits &= bits - 1) active[j + __builtin_ctz(bits)] = 1;
        sum = _mm256_add_ps(sum, w);
    }
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

KVG_TARGET void f16_to_f32(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (x + i))));
    for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

KVG_TARGET void dequantize_q8_0(const void * vx, float * y, int64_t n) {
    const block_q8_0 * x = (const block_q8_0 *) vx;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
        for (int j = 0; j < QK8_0; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) (x[b].qs + j)));
            _mm256_storeu_ps(y + b * QK8_0 + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

// ---- f16/bf16 weights · one activation row of their own type (mm_kernel::mv) -----------------
// The row is rounded once to the weights' type (ggml's vec_dot_type), half the bytes of an f32
// row beside the weight stream in L1 (see simd-avx512.cpp); each weight row streams alone,
// both operands widened, four chains over each 32 values joined (0 + 1) + (2 + 3).
KVG_TARGET void pack_mv_f16(const void * f32_row, void * out, int64_t k) {
    const float * x = (const float *) f32_row;
    for (int64_t i = 0; i < k; i += 8) {
        _mm_storeu_si128((__m128i *) ((uint16_t *) out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

// bit for bit ggml_fp32_to_bf16: integer nearest even, NaN made quiet
KVG_TARGET void pack_mv_bf16(const void * f32_row, void * out, int64_t k) {
    const float * x = (const float *) f32_row;
    for (int64_t i = 0; i < k; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *) (x + i));
        const __m256i hi = _mm256_srli_epi32(u, 16);
        const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
        const __m256i r = _mm256_blendv_epi8(_mm256_srli_epi32(_mm256_add_epi32(u, bias), 16), _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
        _mm_storeu_si128((__m128i *) ((uint16_t *) out + i), _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
    }
}

template <typename L>
KVG_TARGET void mv_same(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) {
        const char * w = a.w + r * a.w_stride;
        __m256 acc[4];
        for (int u = 0; u < 4; ++u) acc[u] = _mm256_setzero_ps();
        for (int64_t i = 0; i < a.k; i += 32) {
            for (int u = 0; u < 4; ++u) acc[u] = _mm256_fmadd_ps(L::load(w, i + 8 * u), L::load(a.x, i + 8 * u), acc[u]);
        }
        const float s = reduce1(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
        a.out[r] = a.accumulate ? a.out[r] + s : s;
    }
}

// What build_kernel_table takes from this file (only addresses: no AVX2 code of its own).
struct isa {
    static constexpr const char * name = "avx2";
    static constexpr int float_cols = 3, quant_cols = 2;
    static constexpr bool one_row_matvec = true;
    static constexpr auto add_block_quant_kernels = add_block_quant_kernels_avx2;
    static constexpr auto quantize_q8_0 = ::quantize_q8_0;
    static constexpr auto accum_f32 = accum<ld_f32>, accum_f16 = accum<ld_f16>;
    static constexpr auto scale_f32 = ::scale_f32;
    static constexpr auto softmax_weights = ::softmax_weights;
    static constexpr auto silu_f32 = ::silu_f32;
    static constexpr auto f16_to_f32 = ::f16_to_f32;
    static constexpr auto dequantize_q8_0 = ::dequantize_q8_0;
    static constexpr auto mv_f16 = mv_same<ld_f16>, mv_bf16 = mv_same<ld_bf16>;
    static constexpr auto pack_mv_f16 = ::pack_mv_f16, pack_mv_bf16 = ::pack_mv_bf16;
};

} // namespace

const kvg::cpu_kernels * kvg::kernels_avx2() {
    static const cpu_kernels k = [] {
        cpu_kernels t = build_kernel_table<isa, tile_f32, tile_f16, tile_bf16, tile_q8_0, tile_q4_0>();
        add_multirow_mv(t);
        add_q5_0_r16_kernels_avx2(t);
        return t;
    }();
    return &k;
}

const kvg::fa_dec_kernels * kvg::fa_dec_kernels_avx2() {
    static const fa_dec_kernels k = {dec_type<ld_f32>(), dec_type<ld_f16>(), dec_type<ld_q8_0>()};
    return &k;
}

#else
const kvg::cpu_kernels * kvg::kernels_avx2() { return nullptr; }
const kvg::fa_dec_kernels * kvg::fa_dec_kernels_avx2() { return nullptr; }
#endif
