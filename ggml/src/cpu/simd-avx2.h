// AVX2 helpers shared by the AVX2 kernel files (simd-avx2.cpp, quants-x86.cpp,
// quants-x86-ternary.cpp): the target attribute, loads, and the horizontal sums that end a
// register tile. Include inside #if KVG_X86_SIMD only.
#pragma once

#include "simd.h"
#include "types.h"

#include <cstring>

#include <immintrin.h>

#include <cstring>

// GCC 12 reports its own _mm256_undefined_* placeholders (inside intrinsics) as
// uninitialized when they are inlined into target-attributed functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define KVG_TARGET __attribute__((target("avx2,fma,f16c")))
#define KVG_INLINE KVG_TARGET inline __attribute__((always_inline))

namespace kvg::avx2 {

// the f16 at p as a float; 32 bytes at p
KVG_INLINE float half_at(const uint8_t * p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
KVG_INLINE __m256i load32(const uint8_t * p) { return _mm256_loadu_si256((const __m256i *) p); }

// Matrix-vector products stream the weights once: every cache line of the block PF_DIST
// bytes ahead is requested (a super-block spans 1-4 lines).
constexpr int PF_DIST = 4096;
template <size_t BYTES> KVG_INLINE void prefetch_block(const char * p) {
    for (size_t off = 0; off < BYTES; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// Horizontal sums of 8 vectors at once: out[j] = sum of the lanes of v[j], lanes paired
// (i, i+4), (i, i+2), (i, i+1) for every vector whatever shares the call.
KVG_INLINE void reduce8(const __m256 * v, float * out) {
    __m256 s[4], u[2];
    for (int p = 0; p < 4; ++p) {
        s[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20), _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
    }
    for (int q = 0; q < 2; ++q) {
        u[q] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * q], s[2 * q + 1], 0x44), _mm256_shuffle_ps(s[2 * q], s[2 * q + 1], 0xEE));
    }
    const __m256 z = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x88), _mm256_shuffle_ps(u[0], u[1], 0xDD));
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, z);
    for (int j = 0; j < 8; ++j) out[j] = tmp[4 * (j % 2) + j / 2]; // z[4l + m] holds v[2m + l]
}

// One vector's sum, paired as in reduce8 (so the bits agree).
KVG_INLINE float reduce1(__m256 v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

// Stores tile (r, c) = the lane sum of acc[r * C + c]: groups of 8, then single vectors
// (the same pairing either way, so an output's bits do not depend on the tile shape).
template <int R, int C>
KVG_INLINE void finish_tile(const mm_tile_args & a, __m256 * acc) {
    constexpr int N = R * C, N8 = N / 8 * 8;
    float sums[N];
    for (int g = 0; g < N8; g += 8) reduce8(acc + g, sums + g);
    for (int g = N8; g < N; ++g) sums[g] = reduce1(acc[g]);
    for (int c = 0; c < C; ++c) {
        float * o = a.out + c * a.out_stride;
        for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + sums[r * C + c] : sums[r * C + c];
    }
}

// A q8_0 row (k values) packed for the r16 matrix-vector kernels: per block its 32 quants,
// OFFSET times their sum (int32: the weights' quant offset, subtracted from dots of unsigned
// quants) and its scale (f32), R16_X_BLOCK bytes, so a kernel step only broadcasts.
constexpr size_t R16_X_BLOCK = 40;
template <int OFFSET> KVG_INLINE void pack_mv_r16(const void * q8_row, void * out, int64_t k) {
    const block_q8_0 * xb = (const block_q8_0 *) q8_row;
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        char * o = (char *) out + b * R16_X_BLOCK;
        int32_t sum = 0;
        for (int i = 0; i < QK8_0; ++i) sum += xb[b].qs[i];
        const int32_t corr = OFFSET * sum;
        const float d = _cvtsh_ss(xb[b].d);
        std::memcpy(o, xb[b].qs, 32);
        std::memcpy(o + 32, &corr, 4);
        std::memcpy(o + 36, &d, 4);
    }
}

// the 32-bit word at p in every lane
KVG_INLINE __m256i bcast32(const char * p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// A matrix-vector call over the 16 rows of an r16 group (a.n_cols = 16) and C packed rows:
// HALF(a, h, b0, b1, acc) adds blocks [b0, b1) of rows 8h..8h+7 to acc[c]; STEP blocks of both
// halves at a time, so that they stay in L1.
template <int C, int64_t STEP, void (*HALF)(const mm_tile_args &, int, int64_t, int64_t, __m256 *)>
KVG_INLINE void r16_group_rows(const mm_tile_args & a) {
    __m256 acc[2][C];
    for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < C; ++c) acc[h][c] = _mm256_setzero_ps();
    }
    const int64_t nb = a.k / QK8_0;
    for (int64_t b0 = 0; b0 < nb; b0 += STEP) {
        for (int h = 0; h < 2; ++h) HALF(a, h, b0, b0 + STEP < nb ? b0 + STEP : nb, acc[h]);
    }
    for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < C; ++c) {
            float * o = a.out + c * a.out_stride + 8 * h;
            _mm256_storeu_ps(o, a.accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[h][c]) : acc[h][c]);
        }
    }
}

// exp(x) for x <= 0 as simd.h's EXP_POLY describes (the AVX-512 path's bits).
KVG_INLINE __m256 exp_nonpositive(__m256 x) {
    const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_MIN_ARG), _CMP_LT_OQ);
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_POLY[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[i]));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n through the exponent field; n >= -127 here, so 2^n >= 2^-127 is still a (denormal-free) scale for p
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.0f))), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

} // namespace kvg::avx2
