// AVX-512 helpers shared by simd-avx512.cpp, simd-avx512-vnni.cpp and simd-avx512-bf16.cpp.
// Include inside their x86 section, after defining KVG_TARGET / KVG_INLINE (each file's own
// target attribute).
#pragma once

#include "simd.h"
#include "types.h"

#include <immintrin.h>

// Internal linkage: the two files compile these for different targets.
namespace kvg::avx512 {
namespace {

// q4_K's 6-bit scales and mins (dwords s0, s1, s2 at w + 4) as 16 words, scales 0-7 then
// mins 0-7, in a few vector ops (the scalar decode cost as much as the dot products). Scale /
// min j < 4: byte j of s0 / s1, low 6 bits; j + 4: byte j of s2, low / high nibble, and
// bits 6-7 of byte j of s0 / s1 as bits 4-5.
KVG_INLINE __m256i q4k_scales_mins(const char * w) {
    const __m128i v = _mm_loadu_si128((const __m128i *) w); // dwords: d and dmin, s0, s1, s2
    const __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i hi = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2);
    const __m128i m_lo = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i m_hi = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
    return _mm256_cvtepu8_epi16(_mm_ternarylogic_epi32(_mm_and_si128(lo, m_lo), hi, m_hi, 0xF8)); // a | (b & c)
}

// x rounded to bf16 bit for bit as ggml_fp32_to_bf16, in the low half of each lane (integer
// nearest even: keeps the subnormals vcvtneps2bf16 would flush; NaN made quiet).
KVG_INLINE __m512i round_bf16(__m512i u) {
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(64));
}

// mm_kernel::pack_mv of bf16 weights: K (a multiple of 16) f32 values -> K bf16 (inline: not
// every including file uses it)
KVG_TARGET inline void pack_mv_bf16(const void * f32_row, void * out, int64_t k) {
    const float * x = (const float *) f32_row;
    for (int64_t i = 0; i < k; i += 16) {
        const __m512i r = round_bf16(_mm512_loadu_si512((const void *) (x + i)));
        _mm256_storeu_si256((__m256i *) ((uint16_t *) out + i), _mm512_cvtepi32_epi16(r));
    }
}

// One vector's sum with the same pairing as reduce16 (so the bits agree).
KVG_INLINE float reduce1(__m512 v) {
    const __m256 p = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

// Block scales of a pair as [d0 x 8 lanes, d1 x 8 lanes] (d1 = 0 for a lone last block).
KVG_INLINE __m512 scale_pair(ggml_fp16_t d0, ggml_fp16_t d1) {
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short) d0)), _mm_set1_epi16((short) d1), 1);
    return _mm512_cvtph_ps(h);
}

// Blocks are 34 (q8_0) or 18 (q4_0) bytes: their quants and scales sit at even offsets, so
// one vpermt2w over two 64-byte loads gathers the quants of several blocks into a vector,
// and one vpermw their scales, instead of a load and insert per block and scalar scales
// (q4_0's four-block steps: 6% faster on Zen 4; q8_0 pairs were 13% slower, so they load as before).
struct word_index {
    alignas(64) uint16_t w[32];
};
// Target word t comes from byte src(t) of [p, p + 64) or [p + off1, p + off1 + 64).
template <class F>
constexpr word_index make_index(int off1, F src) {
    word_index r{};
    for (int t = 0; t < 32; ++t) {
        const int b = src(t);
        r.w[t] = (uint16_t) (b + 2 <= 64 ? b / 2 : 32 + (b - off1) / 2);
    }
    return r;
}
KVG_INLINE __m512i gather_words(const void * p, int off1, const word_index & idx) {
    return _mm512_permutex2var_epi16(_mm512_loadu_si512(p), _mm512_load_si512(idx.w),
                                     _mm512_loadu_si512((const char *) p + off1));
}
// f16 words picked from the 64 bytes at p (indices below 32), widened: lane i from word idx[i].
// A two-source 256-bit permute: only 16 words come out, and on Zen 4 a 512-bit one costs twice.
KVG_INLINE __m512 gather_scales(const void * p, const word_index & idx) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *) p), hi = _mm256_loadu_si256((const __m256i *) ((const char *) p + 32));
    return _mm512_cvtph_ps(_mm256_permutex2var_epi16(lo, _mm256_load_si256((const __m256i *) idx.w), hi));
}
// four q4_0 blocks (72 bytes): block k's 16 bytes in 128-bit lane k, scales 4 lanes each
constexpr word_index Q4X4_QS = make_index(8, [](int t) { return 18 * (t / 8) + 2 + 2 * (t % 8); });
constexpr word_index Q4X4_D = make_index(8, [](int t) { return 18 * ((t % 16) / 4); });
// four q8_0 blocks (136 bytes): the first (lo) and second (hi, from p + 8) 16 quants of block
// k in lane k, and the scales
constexpr word_index Q8X4_LO = make_index(64, [](int t) { return 34 * (t / 8) + 2 + 2 * (t % 8); });
constexpr word_index Q8X4_HI = make_index(64, [](int t) { return 34 * (t / 8) + 10 + 2 * (t % 8); });
constexpr word_index Q8X4_D = make_index(64, [](int t) { return 34 * ((t % 16) / 4); });

// Weights of the tiles over q8_0 activations: q8_0, q4_0, and iq4_nl (q4_0's block layout,
// whose nibbles pick one of 16 signed values).
enum wquant { W_Q8, W_Q4, W_IQ4 };
static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0), "iq4_nl has q4_0's block layout");
constexpr size_t wblock_bytes(wquant w) { return w == W_Q8 ? sizeof(block_q8_0) : sizeof(block_q4_0); }
// iq4_nl's values (ggml's table) plus BIAS in every 128-bit lane, for vpshufb (BIAS 128:
// unsigned bytes for vpdpbusd)
template <int BIAS = 0> KVG_INLINE __m512i iq4nl_table() {
    const int8_t * v = kvg::iq4nl_levels;
    return _mm512_broadcast_i32x4(_mm_setr_epi8(
        (char) (v[0] + BIAS), (char) (v[1] + BIAS), (char) (v[2] + BIAS), (char) (v[3] + BIAS), (char) (v[4] + BIAS),
        (char) (v[5] + BIAS), (char) (v[6] + BIAS), (char) (v[7] + BIAS), (char) (v[8] + BIAS), (char) (v[9] + BIAS),
        (char) (v[10] + BIAS), (char) (v[11] + BIAS), (char) (v[12] + BIAS), (char) (v[13] + BIAS), (char) (v[14] + BIAS),
        (char) (v[15] + BIAS)));
}

// v[c] (16 ints of row c) -> v[j] (int j of every row).
KVG_INLINE void transpose16(__m512i (&v)[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    // u[4q + j], 128-bit lane L: rows 4q..4q+3 of column 4L + j
    __m512i u[16];
    for (int q = 0; q < 4; ++q) {
        u[4 * q] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
        const __m512i s2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44), s3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
        v[j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
        v[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
        v[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
        v[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
    }
}

// Writes the R x P accumulators of a panel tile (lane c of acc[r][p]: weight row r, activation
// row 16p + c) to the tile's n_cols activation rows. A 16 x 16 transpose per panel gives each
// activation row its R sums as one vector: one masked add and store per row instead of R
// scalar ones (1.5% of a K = 2048 bf16 tile on Zen 4).
template <int R, int P>
KVG_INLINE void store_panel(const mm_tile_args & a, const __m512 (&acc)[R][P]) {
    const __mmask16 rows = (__mmask16) ((1u << R) - 1);
    for (int p = 0; p < P; ++p) {
        __m512i v[16];
        for (int r = 0; r < 16; ++r) v[r] = r < R ? _mm512_castps_si512(acc[r][p]) : _mm512_setzero_si512();
        transpose16(v);
        const int nc = a.n_cols - p * MM_PANEL_COLS < MM_PANEL_COLS ? a.n_cols - p * MM_PANEL_COLS : MM_PANEL_COLS;
        for (int c = 0; c < nc; ++c) {
            float * o = a.out + (p * MM_PANEL_COLS + c) * a.out_stride;
            __m512 sum = _mm512_castsi512_ps(v[c]);
            if (a.accumulate) sum = _mm512_add_ps(_mm512_maskz_loadu_ps(rows, o), sum);
            _mm512_mask_storeu_ps(o, rows, sum);
        }
    }
}

} // namespace
} // namespace kvg::avx512
