// AVX-512 VNNI matrix-vector kernels for k-quant weights (one activation row, weights
// streamed from memory), added to the VNNI table by simd-avx512-vnni.cpp.
//
// The q8_K activation row is packed once (pack_mv) so its bytes line up with the weights'
// nibbles as they lie in memory: a super-block's quants need only a mask or shift before
// vpdpbusd (unsigned weight quants x signed activations). Each vpdpbusd lane sums 4
// products of one sub-block and fits in int16, so two such vectors are merged into word
// pairs and vpdpwssd applies both sub-block scales at once.
//
// Bit-identical to the AVX-512 tiles (quants-x86.cpp): every int32 lane l of a super-block
// holds the same exact integer (values with (v mod 32) / 4 == l, times their scales), and
// the float steps per super-block and the final reduction are the tiles' own.
#include "simd.h"
#include "types.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-vnni-target.h"
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using kvg::avx512::q4k_scales_mins;

// Packed super-block: 256 activation bytes in the weight type's order, the 16 bsums, the
// scale and its negation (f32), padding to whole cache lines.
constexpr size_t PSB_BYTES = 320, PSB_BSUMS = 256, PSB_D = 288;
static_assert(PSB_BYTES % 64 == 0 && QK_K == 2 * MM_MV_GROUP, "packed super-blocks stay aligned");

// Software prefetch of the weight stream (bytes ahead, into L1), for short rows only. Zen 4,
// share of the streaming read (median of 3-4 interleaved runs, weights from DRAM): rows up to
// ~2.5 KiB gain (q4_K K=2048: 77-83% -> 88-93%, q6_K: 76-84% -> 89-93%), longer ones lose (q4_K
// K=5632: 95-100% -> 87-94%, q6_K K=4096: 92-95% -> 82-88%), where the hardware prefetcher
// alone keeps up; prefetcht1 at 4-8 KiB halved q4_K's rate.
constexpr int PF_AHEAD = 4096;
constexpr int64_t PF_MAX_ROW = 2560;
// Rows per call, one after the other (one sequential stream): the per-call setup was ~8% of
// a K = 2048 row (kvg-bench-matmul, weights in L2: q4_K K = 2048 ran at 81 GFLOP/s, K = 5632
// at 87).
constexpr int MV_ROWS = 4;

// The row scale as (dx, -dx): one multiply gives a super-block's two float factors.
void pack_d(int8_t * o, float dx) {
    const float d2[2] = {dx, -dx};
    std::memcpy(o + PSB_D, d2, sizeof(d2));
    std::memset(o + PSB_D + 8, 0, PSB_BYTES - PSB_D - 8);
}

// q4_K and q5_K: qs byte i holds value 64 (i / 32) + i % 32 (low nibble) and that + 32 (high); a
// 64-byte load's low nibbles pair with lo[t] = x[64 (2j + t / 32) + t % 32], its high ones
// with the same + 32.
void pack_q4_k(const void * row, void * out, int64_t k) {
    const block_q8_K * x = (const block_q8_K *) row;
    for (int64_t b = 0; b < k / QK_K; ++b) {
        int8_t * o = (int8_t *) out + b * PSB_BYTES;
        for (int j = 0; j < 2; ++j) {
            for (int t = 0; t < 64; ++t) {
                const int v = 64 * (2 * j + t / 32) + t % 32;
                o[128 * j + t] = x[b].qs[v];
                o[128 * j + 64 + t] = x[b].qs[v + 32];
            }
        }
        std::memcpy(o + PSB_BSUMS, x[b].bsums, sizeof(x[b].bsums));
        pack_d(o, x[b].d);
    }
}

// q6_K unpacks values in element order: the activations as they are.
void pack_q6_k(const void * row, void * out, int64_t k) {
    const block_q8_K * x = (const block_q8_K *) row;
    for (int64_t b = 0; b < k / QK_K; ++b) {
        int8_t * o = (int8_t *) out + b * PSB_BYTES;
        std::memcpy(o, x[b].qs, QK_K);
        std::memcpy(o + PSB_BSUMS, x[b].bsums, sizeof(x[b].bsums));
        pack_d(o, x[b].d);
    }
}

KVG_INLINE uint32_t u32_at(const char * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Dot of 4 (lo, hi) vpdpbusd pairs, merged as word pairs (lo low, hi << SH high; SH = 12 when
// hi holds 16 x the sums) and scaled by the word pairs of s0 / s1: 16 exact int32 lanes, folded
// to the tiles' 8.
template <int SH>
KVG_INLINE __m256i scaled_sum(__m512i lo0, __m512i hi0, __m512i lo1, __m512i hi1, __m512i s0, __m512i s1) {
    const __mmask32 odd = 0xAAAAAAAA;
    const __m512i p0 = _mm512_mask_blend_epi16(odd, lo0, _mm512_slli_epi32(hi0, SH));
    const __m512i p1 = _mm512_mask_blend_epi16(odd, lo1, _mm512_slli_epi32(hi1, SH));
    const __m512i s = _mm512_dpwssd_epi32(_mm512_madd_epi16(p0, s0), p1, s1);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// o += d * dx * isum - dmin * dx * (mins . bsums), the tiles' add_superblock; dm holds the
// f16 pair (d, dmin), times the packed (dx, -dx) in one multiply (same products as the tiles').
KVG_INLINE void add_superblock(__m256 & o, __m256i isum, __m256i mins, const char * x, uint32_t dm) {
    const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int) dm)), _mm_load_ps((const float *) (x + PSB_D)));
    const __m256i m = _mm256_madd_epi16(mins, _mm256_load_si256((const __m256i *) (x + PSB_BSUMS)));
    o = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcastss_ps(f), o);
    o = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_permutexvar_ps(_mm256_set1_epi32(1), _mm256_castps128_ps256(f)), o);
}

// The lane sum, paired as the AVX2 reduce1 the tiles finish with.
KVG_INLINE void store1(const mm_tile_args & a, float * out, __m256 v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    const float s = _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
    *out = a.accumulate ? *out + s : s;
}

// word shift counts: l in the low 256 bits, h in the high ones
KVG_INLINE __m512i halves(int l, int h) { return _mm512_inserti64x4(_mm512_set1_epi16((short) l), _mm256_set1_epi16((short) h), 1); }

KVG_INLINE __m512i dot4(__m512i w, const char * x) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_load_si512((const void *) x));
}

// q5_K: q4_K's nibbles (at byte 48) plus qh (at 16), whose byte l holds the fifth bit of
// value 32 s + l in bit s: moved to bit 4 by a per-half variable shift. q4_K keeps its high
// nibbles in place (16 x the value, exact in int32), saving a shift per load.
template <bool Q5>
KVG_INLINE void mv_q45_k_row(const mm_tile_args & a, const char * w, float * out) {
    constexpr size_t BYTES = Q5 ? 176 : 144, QS = Q5 ? 48 : 16;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8((char) 0xF0);
    // word pairs (scale 4j + 2h, 4j + 2h + 1) for lanes 8h..8h+7 of load j
    const __m512i idx0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i idx1 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    // min j for bsums 2j and 2j + 1
    const __m256i midx = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    // n = lo0, hi0, lo1, hi1 hold sub-blocks (0, 2), (1, 3), (4, 6), (5, 7) in their low and
    // high 256 bits; q5_K's qh bit s moves to bit 4 by these shifts (left, left, right, right)
    const __m512i sh[4] = {halves(4, 2), halves(3, 1), halves(0, 2), halves(1, 3)};
    __m256 acc = _mm256_setzero_ps();
    const char * x = a.x;
    const bool pf = a.k / QK_K * (int64_t) BYTES <= PF_MAX_ROW;
#pragma GCC unroll 2
    for (int64_t b = 0; b < a.k / QK_K; ++b, w += BYTES, x += PSB_BYTES) {
        for (int l = 0; pf && l < (Q5 ? 3 : 2); ++l) _mm_prefetch(w + PF_AHEAD + 64 * l, _MM_HINT_T0);
        const __m256i sm = q4k_scales_mins(w);
        const __m512i sc = _mm512_castsi256_si512(sm);
        const __m512i q0 = _mm512_loadu_si512((const void *) (w + QS)), q1 = _mm512_loadu_si512((const void *) (w + QS + 64));
        __m256i isum;
        if constexpr (Q5) {
            __m512i n[4] = {_mm512_and_si512(q0, m4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), _mm512_and_si512(q1, m4),
                            _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4)};
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (w + 16))), b4 = _mm512_set1_epi8(0x10);
            n[0] = _mm512_or_si512(n[0], _mm512_and_si512(_mm512_sllv_epi16(qh, sh[0]), b4));
            n[1] = _mm512_or_si512(n[1], _mm512_and_si512(_mm512_sllv_epi16(qh, sh[1]), b4));
            n[2] = _mm512_or_si512(n[2], _mm512_and_si512(_mm512_srlv_epi16(qh, sh[2]), b4));
            n[3] = _mm512_or_si512(n[3], _mm512_and_si512(_mm512_srlv_epi16(qh, sh[3]), b4));
            isum = scaled_sum<16>(dot4(n[0], x), dot4(n[1], x + 64), dot4(n[2], x + 128), dot4(n[3], x + 192),
                                  _mm512_permutexvar_epi32(idx0, sc), _mm512_permutexvar_epi32(idx1, sc));
        } else {
            isum = scaled_sum<12>(dot4(_mm512_and_si512(q0, m4), x), dot4(_mm512_and_si512(q0, m4h), x + 64),
                                  dot4(_mm512_and_si512(q1, m4), x + 128), dot4(_mm512_and_si512(q1, m4h), x + 192),
                                  _mm512_permutexvar_epi32(idx0, sc), _mm512_permutexvar_epi32(idx1, sc));
        }
        add_superblock(acc, isum, _mm256_permutexvar_epi16(midx, sm), x, u32_at(w));
    }
    store1(a, out, acc);
}

KVG_TARGET void mv_q4_k(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) mv_q45_k_row<false>(a, a.w + r * a.w_stride, a.out + r);
}
KVG_TARGET void mv_q5_k(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) mv_q45_k_row<true>(a, a.w + r * a.w_stride, a.out + r);
}

// q6_K, half h (128 values): ql[64h + t] low nibble = value 128h + t, high = + 64; qh byte
// 32h + t % 32 has their top bits at 2 (t / 32) and 4 + 2 (t / 32).
KVG_INLINE void mv_q6_k_row(const mm_tile_args & a, const char * w, float * out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i up_lo = halves(4, 2), dn_hi = halves(0, 2); // bits 0-1 / 2-3 up to 4-5; bits 4-5 / 6-7 down to 4-5
    // lane L of half h: scales 8h + L / 4 (low nibbles) and 8h + 4 + L / 4 (high) as a word pair
    alignas(64) static const int16_t sidx[2][32] = {
        {0, 4, 0, 4, 0, 4, 0, 4, 1, 5, 1, 5, 1, 5, 1, 5, 2, 6, 2, 6, 2, 6, 2, 6, 3, 7, 3, 7, 3, 7, 3, 7},
        {8, 12, 8, 12, 8, 12, 8, 12, 9, 13, 9, 13, 9, 13, 9, 13, 10, 14, 10, 14, 10, 14, 10, 14, 11, 15, 11, 15, 11, 15, 11, 15}};
    const __m512i idx0 = _mm512_load_si512(sidx[0]), idx1 = _mm512_load_si512(sidx[1]);
    __m256 acc = _mm256_setzero_ps();
    const char * x = a.x;
    const bool pf = a.k / QK_K * 210 <= PF_MAX_ROW;
#pragma GCC unroll 2
    for (int64_t b = 0; b < a.k / QK_K; ++b, w += 210, x += PSB_BYTES) {
        for (int l = 0; pf && l < 3; ++l) _mm_prefetch(w + PF_AHEAD + 64 * l, _MM_HINT_T0);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (w + 192)));
        __m512i d[4];
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512((const void *) (w + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (w + 128 + 32 * h)));
            // (ql bits 0-3) | (the top bits, masked to 4-5): one vpternlog
            const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, up_lo), m30));
            const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(qh, dn_hi), m30));
            d[2 * h] = dot4(lo, x + 128 * h);
            d[2 * h + 1] = dot4(hi, x + 128 * h + 64);
        }
        const __m512i sc = _mm512_castsi256_si512(sc16);
        const __m256i isum = scaled_sum<16>(d[0], d[1], d[2], d[3], _mm512_permutexvar_epi16(idx0, sc), _mm512_permutexvar_epi16(idx1, sc));
        const uint32_t dw = (uint32_t) (uint8_t) w[208] | (uint32_t) (uint8_t) w[209] << 8;
        add_superblock(acc, isum, _mm256_slli_epi16(sc16, 5), x, dw * 0x10001u); // quants stored as q + 32
    }
    store1(a, out, acc);
}
KVG_TARGET void mv_q6_k(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) mv_q6_k_row(a, a.w + r * a.w_stride, a.out + r);
}

// q4_K with rows interleaved by 16 (GGML_TYPE_Q4_K_R16, types.h) times one row: each lane
// holds one row's exact integer sums, as in simd-avx512-vnni.cpp's mv_r16; per sub-block one
// vpmulld applies the 16 rows' scales and one vpdpwssd adds their mins times its activation
// sum. The packed row, per super-block: its 256 quants in element order, the 8 sub-block
// sums (int32, each within int16: 32 x 127), the f32 scale.
constexpr size_t K4R_BSUMS = 256, K4R_D = 288;

void pack_q4_k_r16(const void * row, void * out, int64_t k) {
    const block_q8_K * x = (const block_q8_K *) row;
    for (int64_t b = 0; b < k / QK_K; ++b) {
        char * o = (char *) out + b * PSB_BYTES;
        std::memcpy(o, x[b].qs, QK_K);
        int32_t bs[8];
        for (int j = 0; j < 8; ++j) bs[j] = x[b].bsums[2 * j] + x[b].bsums[2 * j + 1];
        std::memcpy(o + K4R_BSUMS, bs, sizeof(bs));
        std::memcpy(o + K4R_D, &x[b].d, sizeof(float));
        std::memset(o + K4R_D + 4, 0, PSB_BYTES - K4R_D - 4);
    }
}

KVG_INLINE __m512i bytes_to_lanes(const char * p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) p)); }

KVG_TARGET void mv_q4_k_r16(const mm_tile_args & a) {
    constexpr size_t GROUP = R16_ROWS * sizeof(block_q4_K), SC = 64, QS = 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi32(63);
    __m512 acc = _mm512_setzero_ps();
    const char * w = a.w, * x = a.x;
    for (int64_t b = 0; b < a.k / QK_K; ++b, w += GROUP, x += PSB_BYTES) {
        __m512i isum = _mm512_setzero_si512(), msum = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) { // sub-blocks 2c (low nibbles) and 2c + 1 (high)
            __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            for (int t = 0; t < 8; ++t) {
                const __m512i q = _mm512_loadu_si512((const void *) (w + QS + 64 * (8 * c + t)));
                s[0] = _mm512_dpbusd_epi32(s[0], _mm512_and_si512(q, m4), _mm512_set1_epi32((int) u32_at(x + 64 * c + 4 * t)));
                s[1] = _mm512_dpbusd_epi32(s[1], _mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
                                           _mm512_set1_epi32((int) u32_at(x + 64 * c + 32 + 4 * t)));
            }
            const __m512i mhi = bytes_to_lanes(w + SC + 16 * (8 + c)); // top 4 bits of both mins
            for (int h = 0; h < 2; ++h) {
                const __m512i sm = bytes_to_lanes(w + SC + 16 * (2 * c + h));
                const __m512i mn = _mm512_or_si512(_mm512_srli_epi32(sm, 6),
                                                   _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(mhi, 4 * h), _mm512_set1_epi32(15)), 2));
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[h], _mm512_and_si512(sm, m6)));
                msum = _mm512_dpwssd_epi32(msum, mn, _mm512_set1_epi32((int) u32_at(x + K4R_BSUMS + 4 * (2 * c + h))));
            }
        }
        float xd;
        std::memcpy(&xd, x + K4R_D, 4);
        const __m512 fd = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) w)), _mm512_set1_ps(xd));
        const __m512 fm = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (w + 32))), _mm512_set1_ps(xd));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), fd, acc);
        acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), fm, acc);
    }
    if (a.accumulate) acc = _mm512_add_ps(acc, _mm512_loadu_ps(a.out));
    _mm512_storeu_ps(a.out, acc);
}

// q6_K with rows interleaved by 16 (GGML_TYPE_Q6_K_R16, types.h) times one row, the same way:
// per 16 values one vpmulld applies the 16 rows' scales to dots started at -32 x the
// activations' sum (q6_K's offset). The packed row, per super-block: its 256 quants in element
// order, -32 x each 16-value sum (int32), the f32 scale, padding to whole cache lines.
constexpr size_t Q6R_BYTES = 384, Q6R_CORR = 256, Q6R_D = 320;

void pack_q6_k_r16(const void * row, void * out, int64_t k) {
    const block_q8_K * x = (const block_q8_K *) row;
    for (int64_t b = 0; b < k / QK_K; ++b) {
        char * o = (char *) out + b * Q6R_BYTES;
        std::memcpy(o, x[b].qs, QK_K);
        int32_t corr[16];
        for (int i = 0; i < 16; ++i) corr[i] = -32 * x[b].bsums[i];
        std::memcpy(o + Q6R_CORR, corr, sizeof(corr));
        std::memcpy(o + Q6R_D, &x[b].d, sizeof(float));
        std::memset(o + Q6R_D + 4, 0, Q6R_BYTES - Q6R_D - 4);
    }
}

// Bits 2s, 2s + 1 of each byte moved to bits 4-5 (the top of a 6-bit quant).
KVG_INLINE __m512i q6_top(__m512i qh, int s) {
    const __m512i v = s == 0 ? _mm512_slli_epi16(qh, 4) : s == 1 ? _mm512_slli_epi16(qh, 2) : s == 2 ? qh : _mm512_srli_epi16(qh, 2);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x30));
}

KVG_TARGET void mv_q6_k_r16(const mm_tile_args & a) {
    // q6_K half h, values 128 h + 32 s + 4 k (k < 8): ql word 16 h + 8 (s % 2) + k (low nibbles
    // for s < 2), qh word 8 h + k, bits 2 s; scale 8 h + 2 s + k / 4. The group holds the qh
    // word then the two ql words for each (h, k) (types.h).
    constexpr size_t GROUP = R16_ROWS * sizeof(block_q6_K), SC = 32, Q = 288;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    const char * w = a.w, * x = a.x;
    for (int64_t b = 0; b < a.k / QK_K; ++b, w += GROUP, x += Q6R_BYTES) {
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
            __m512i d[4][2]; // [s][k / 4]
            for (int s = 0; s < 4; ++s)
                for (int i = 0; i < 2; ++i) d[s][i] = _mm512_set1_epi32((int) u32_at(x + Q6R_CORR + 4 * (8 * h + 2 * s + i)));
            // unrolled, so d stays in registers (GCC kept it on the stack: 8-10 GB/s instead of ~30)
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                const char * q = w + Q + 64 * (24 * h + 3 * k);
                const __m512i qh = _mm512_loadu_si512((const void *) q);
#pragma GCC unroll 2
                for (int sp = 0; sp < 2; ++sp) {
                    const __m512i ql = _mm512_loadu_si512((const void *) (q + 64 * (1 + sp)));
                    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, m4), q6_top(qh, sp));
                    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), q6_top(qh, sp + 2));
                    d[sp][k / 4] = _mm512_dpbusd_epi32(d[sp][k / 4], lo, _mm512_set1_epi32((int) u32_at(x + 128 * h + 32 * sp + 4 * k)));
                    d[sp + 2][k / 4] = _mm512_dpbusd_epi32(d[sp + 2][k / 4], hi, _mm512_set1_epi32((int) u32_at(x + 128 * h + 32 * (sp + 2) + 4 * k)));
                }
            }
            for (int s = 0; s < 4; ++s)
                for (int i = 0; i < 2; ++i) {
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (w + SC + 16 * (8 * h + 2 * s + i))));
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(d[s][i], sc));
                }
        }
        float xd;
        std::memcpy(&xd, x + Q6R_D, 4);
        const __m512 fd = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) w)), _mm512_set1_ps(xd));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), fd, acc);
    }
    if (a.accumulate) acc = _mm512_add_ps(acc, _mm512_loadu_ps(a.out));
    _mm512_storeu_ps(a.out, acc);
}

} // namespace

void kvg::add_matvec_kernels_vnni(cpu_kernels & k) {
    // (iq4_nl's is q4_0's kernel with table values, in simd-avx512-vnni.cpp; an earlier 4-row
    // kernel was slower from DRAM, its interleaved short streams 11.2 -> 7.4 GB/s)
    k.mm[MM_Q4_K].mv = mv_q4_k;
    k.mm[MM_Q4_K].pack_mv = pack_q4_k;
    k.mm[MM_Q5_K].mv = mv_q5_k;
    k.mm[MM_Q5_K].pack_mv = pack_q4_k; // same nibble order
    k.mm[MM_Q6_K].mv = mv_q6_k;
    k.mm[MM_Q6_K].pack_mv = pack_q6_k;
    k.mm[MM_Q4_K_R16].mv = mv_q4_k_r16;
    k.mm[MM_Q4_K_R16].pack_mv = pack_q4_k_r16;
    for (int t : {MM_Q4_K, MM_Q5_K, MM_Q6_K, MM_Q4_K_R16}) k.mm[t].mv_group_bytes = PSB_BYTES / 2;
    for (int t : {MM_Q4_K, MM_Q5_K, MM_Q6_K}) k.mm[t].mv_rows = MV_ROWS;
    k.mm[MM_Q6_K_R16].mv = mv_q6_k_r16;
    k.mm[MM_Q6_K_R16].pack_mv = pack_q6_k_r16;
    k.mm[MM_Q6_K_R16].mv_group_bytes = Q6R_BYTES / 2;
    for (int t : {MM_Q4_K_R16, MM_Q6_K_R16}) k.mm[t].mv_rows = (int) R16_ROWS;
}

#else
void kvg::add_matvec_kernels_vnni(cpu_kernels &) {}
#endif
