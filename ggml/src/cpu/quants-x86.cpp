// AVX2 and AVX-512 matmul tiles for the block types after q4_0, in integers.
//
// Every weight type is read as runs of 32 values in element order: a run32() gives the 32
// quants of values 32j .. 32j+31 as unsigned bytes (iq4_nl: signed table values), and the
// block's scales say what they are worth:
//   k-quants (256 values):  value = d * sc[s] * q - dmin * mn[s], s = the 16-value sub-block
//   iq4_xs (256 values):    value = d * sc[s] * q, q a signed table value (s: 32 values)
//   32-value blocks:        value = d * q + off
// so one tile loop serves each family: maddubs(q, x) pairs, madd with the sub-block scales,
// an int32 sum per super-block, and the minimums through the activations' sums (q8_K's
// bsums; for q8_0, the sum of the block's quants). Offsets such as q6_K's -32 or q5_0's
// -16 are minimums too. Sums stay inside int16/int32: q < 64 (or |q| <= 127 for the
// signed table), |x| <= 127, |sc| <= 127.
#include "simd.h"
#include "types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

#include <cstring>
#include <type_traits>

namespace {

using namespace kvg;
using namespace kvg::avx2;

KVG_INLINE __m256i bits2(__m256i v, int shift) { return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(3)); }
KVG_INLINE __m256i low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
KVG_INLINE __m256i high4(__m256i v) { return low4(_mm256_srli_epi16(v, 4)); }
// `value` in each byte whose `mask` bits are all set in v, else 0
KVG_INLINE __m256i if_bits(__m256i v, __m256i mask, char value) {
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, mask), mask), _mm256_set1_epi8(value));
}
// 16 nibble bytes as 32 values: element j in the low nibble of byte j, j+16 in the high one
KVG_INLINE __m256i nibbles32(const uint8_t * p) {
    const __m128i q = _mm_loadu_si128((const __m128i *) p);
    return low4(_mm256_set_m128i(_mm_srli_epi16(q, 4), q));
}
// bit j of a little-endian 32-bit mask as byte j: 16 where set
KVG_INLINE __m256i fifth_bits(const uint8_t * p) {
    uint32_t m;
    std::memcpy(&m, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int) m),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    return if_bits(spread, bit, 16);
}

// ---- k-quants: prepare(b, s) and run32(b, j) ----------------------------------------------------
// A super-block's scales as the tile wants them: int16 vectors, so that scale(j) is one
// shuffle giving run j's scales (first 16 values in the low 128-bit lane, next 16 in the
// high one: the lanes of maddubs' pairs), and the minimums per 16 values for the bsums.
struct kscales {
    __m256i lo, hi; // sub-block scales 0..7 and 8..15 (per-32 types: lo holds the 8 scales), each in both lanes
    __m256i all;    // the 16 (per-16 types) or 8 (per-32 types) scales in order, for the AVX-512 tiles
    __m256i mins;   // 16 int16 minimums, one per 16 values
    float d, dmin;
};
KVG_INLINE uint32_t u32_at(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
KVG_INLINE __m256i both_lanes(__m128i v) { return _mm256_broadcastsi128_si256(v); }
// 16 int16 scales (one per 16 values) into lo/hi
KVG_INLINE void per16(__m256i sc16, kscales & s) {
    s.all = sc16;
    s.lo = _mm256_permute2x128_si256(sc16, sc16, 0x00);
    s.hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);
}
// run j of a per-16 type: scales 2j (low lane) and 2j + 1 (high lane)
KVG_INLINE __m256i scale16(const kscales & s, int j) {
    const int k = j & 3; // int16 index within the 8 of lo or hi
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16((short) ((4 * k + 2) | (4 * k + 3) << 8)),
                                          _mm_set1_epi16((short) ((4 * k) | (4 * k + 1) << 8)));
    return _mm256_shuffle_epi8(j < 4 ? s.lo : s.hi, pick);
}
// run j of a per-32 type: scale j in every lane
KVG_INLINE __m256i scale32(const kscales & s, int j) {
    return _mm256_shuffle_epi8(s.lo, _mm256_set1_epi16((short) ((2 * j) | (2 * j + 1) << 8)));
}

struct q2_k {
    static constexpr size_t BYTES = 84;
    static constexpr bool PER32 = false;
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) {
        const __m128i v = _mm_loadu_si128((const __m128i *) b); // scale in the low nibble, minimum in the high one
        per16(_mm256_cvtepu8_epi16(_mm_and_si128(v, _mm_set1_epi8(0x0F))), s);
        s.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
        s.d = half_at(b + 80);
        s.dmin = half_at(b + 82);
    }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale16(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) { return bits2(load32(b + 16 + 32 * (j >> 2)), 2 * (j & 3)); }
};

struct q3_k {
    static constexpr size_t BYTES = 110;
    static constexpr bool PER32 = false;
    // 16 6-bit scales: low nibbles from bytes 0..7, top 2 bits from bytes 8..11; minus 32
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) {
        const uint32_t a = u32_at(b + 96), c = u32_at(b + 100), h = u32_at(b + 104);
        const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
        const __m128i sc = _mm_setr_epi32((int) ((a & m4) | (h & m2) << 4), (int) ((c & m4) | (h >> 2 & m2) << 4),
                                          (int) ((a >> 4 & m4) | (h >> 4 & m2) << 4), (int) ((c >> 4 & m4) | (h >> 6 & m2) << 4));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(sc, _mm_set1_epi8(32)));
        per16(sc16, s);
        s.mins = _mm256_slli_epi16(sc16, 2); // quants stored as q + 4
        s.d = s.dmin = half_at(b + 108);
    }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale16(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) {
        const __m256i low = bits2(load32(b + 32 + 32 * (j >> 2)), 2 * (j & 3));
        return _mm256_or_si256(low, if_bits(load32(b), _mm256_set1_epi8((char) (1 << j)), 4));
    }
};

// q4_K / q5_K: 8 6-bit scales and mins per 32 values in 12 bytes; the minimums are given to
// both 16-value halves
KVG_INLINE void k4_prepare(const uint8_t * b, kscales & s) {
    const uint32_t a = u32_at(b + 4), c = u32_at(b + 8), h = u32_at(b + 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const __m128i sm = _mm_setr_epi32((int) (a & m6), (int) ((h & m4) | (a >> 6 & m2) << 4), (int) (c & m6),
                                      (int) ((h >> 4 & m4) | (c >> 6 & m2) << 4));
    const __m128i sc = _mm_cvtepu8_epi16(sm), mn = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
    s.lo = both_lanes(sc);
    s.all = _mm256_castsi128_si256(sc);
    s.mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
    s.d = half_at(b);
    s.dmin = half_at(b + 2);
}

struct q4_k {
    static constexpr size_t BYTES = 144;
    static constexpr bool PER32 = true;
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) { k4_prepare(b, s); }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale32(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) {
        const __m256i q = load32(b + 16 + 32 * (j >> 1));
        return (j & 1) ? high4(q) : low4(q);
    }
};

struct q5_k {
    static constexpr size_t BYTES = 176;
    static constexpr bool PER32 = true;
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) { k4_prepare(b, s); }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale32(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) {
        const __m256i q = load32(b + 48 + 32 * (j >> 1));
        const __m256i lo = (j & 1) ? high4(q) : low4(q);
        return _mm256_or_si256(lo, if_bits(load32(b + 16), _mm256_set1_epi8((char) (1 << j)), 16));
    }
};

struct q6_k {
    static constexpr size_t BYTES = 210;
    static constexpr bool PER32 = false;
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (b + 192)));
        per16(sc16, s);
        s.mins = _mm256_slli_epi16(sc16, 5); // quants stored as q + 32
        s.d = s.dmin = half_at(b + 208);
    }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale16(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) {
        const int h = j >> 2, t = j & 3;
        const __m256i l = load32(b + 64 * h + 32 * (t & 1));
        const __m256i lo = t >= 2 ? high4(l) : low4(l);
        return _mm256_or_si256(lo, _mm256_slli_epi16(bits2(load32(b + 128 + 32 * h), 2 * t), 4));
    }
};

// iq4_xs: 8 signed 6-bit scales (ls - 32), one per 32 values, and iq4_nl's table values as
// signed quants: no minimums (signed_runs)
struct iq4_xs {
    static constexpr size_t BYTES = 136;
    static constexpr bool PER32 = true;
    static KVG_INLINE void prepare(const uint8_t * b, kscales & s) {
        uint16_t h;
        std::memcpy(&h, b + 2, 2);
        // scale j: nibble j of the 4 bytes at b + 4, bits 2j..2j+1 of h above it
        const __m256i lo = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32((int) u32_at(b + 4)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
            _mm256_set1_epi32(0x0F));
        const __m256i hi =
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                             _mm256_set1_epi32(3));
        const __m256i sc32 = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(sc32, sc32), 0x88); // 8 int16 in order, low lane
        const __m128i sc = _mm256_castsi256_si128(p);
        s.lo = both_lanes(sc);
        s.all = _mm256_castsi128_si256(sc);
        s.mins = _mm256_setzero_si256();
        s.d = half_at(b);
        s.dmin = 0.0f;
    }
    static KVG_INLINE __m256i scale(const kscales & s, int j) { return scale32(s, j); }
    static KVG_INLINE __m256i run32(const uint8_t * b, int j) {
        const __m256i levels = both_lanes(_mm_loadu_si128((const __m128i *) kvg::iq4nl_levels));
        return _mm256_shuffle_epi8(levels, nibbles32(b + 8 + 16 * j));
    }
    // runs j and j + 1 (j even) from one load: their low nibbles side by side, then the high ones
    static KVG_INLINE void run_pair(const uint8_t * b, int j, __m256i * q) {
        const __m256i levels = both_lanes(_mm_loadu_si128((const __m128i *) kvg::iq4nl_levels));
        const __m256i v = load32(b + 8 + 16 * j);
        const __m256i lo = _mm256_shuffle_epi8(levels, low4(v)), hi = _mm256_shuffle_epi8(levels, high4(v));
        q[0] = _mm256_permute2x128_si256(lo, hi, 0x20);
        q[1] = _mm256_permute2x128_si256(lo, hi, 0x31);
    }
};
// Types whose runs are signed bytes (table values) without minimums: maddubs takes |q| and
// x with q's sign (pair sums within int16: 2 * 127 * 127)
template <typename T> constexpr bool signed_runs = std::is_same_v<T, iq4_xs>;
// runs j and j + 1 of a super-block (iq4_xs: one load for both; 1 thread, 2048 x 5632 times one
// row: 30.0 -> 40.1 GFLOP/s, iq4_nl 36.0 / 35.1 and q4_K 51.1 / 51.2 beside it)
template <typename T> KVG_INLINE void run_pair(const uint8_t * b, int j, __m256i * q) {
    if constexpr (signed_runs<T>) {
        T::run_pair(b, j, q);
    } else {
        q[0] = T::run32(b, j);
        q[1] = T::run32(b, j + 1);
    }
}

// o += the super-block's dot: d * dx * (sum of scaled quant dots) - dmin * dx * (minimums . bsums)
template <bool MINS = true>
KVG_INLINE void add_superblock(__m256 & o, __m256i isum, const kscales & s, const block_q8_K & x) {
    o = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(s.d * x.d), o);
    if (!MINS) return;
    const __m256i m = _mm256_madd_epi16(s.mins, _mm256_loadu_si256((const __m256i *) x.bsums));
    o = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(-s.dmin * x.d), o);
}

// k-quant weights x q8_K activations, one super-block of 256 values per step
template <typename T, int R, int C>
KVG_INLINE void tile_k(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) prefetch_block<T::BYTES>((const char *) w + (R == 1 ? PF_DIST : R * a.w_stride));
            kscales s;
            T::prepare(w, s);
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            __m256i pair[2];
            for (int j = 0; j < 8; ++j) {
                if (j % 2 == 0) run_pair<T>(w, j, pair);
                const __m256i q = pair[j % 2], scale = T::scale(s, j);
                const __m256i uq = signed_runs<T> ? _mm256_sign_epi8(q, q) : q;
                for (int c = 0; c < C; ++c) {
                    __m256i xq = load32((const uint8_t *) x[c]->qs + 32 * j);
                    if (signed_runs<T>) xq = _mm256_sign_epi8(xq, q);
                    const __m256i p = _mm256_maddubs_epi16(uq, xq);
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, scale));
                }
            }
            for (int c = 0; c < C; ++c) add_superblock<!signed_runs<T>>(acc[r * C + c], isum[c], s, *x[c]);
        }
    }
    finish_tile<R, C>(a, acc);
}

// ---- 32-value blocks: value = d * q + off --------------------------------------------------------
struct q4_1 {
    static constexpr size_t BYTES = 20;
    static constexpr bool SIGNED = false;
    static KVG_INLINE __m256i quants(const uint8_t * b, float & d, float & off) {
        d = half_at(b);
        off = half_at(b + 2);
        return nibbles32(b + 4);
    }
};
// q5_0's offset is -16 quants: signed quants q - 16 make the dot exact in integers and need no
// activation sums (which the 1 x 8 prompt tiles would compute per activation row)
struct q5_0 {
    static constexpr size_t BYTES = 22;
    static constexpr bool SIGNED = true;
    static KVG_INLINE __m256i quants(const uint8_t * b, float & d, float & off) {
        d = half_at(b);
        off = 0.0f;
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b + 6), fifth_bits(b + 2)), _mm256_set1_epi8(16));
    }
};
struct q5_1 {
    static constexpr size_t BYTES = 24;
    static constexpr bool SIGNED = false;
    static KVG_INLINE __m256i quants(const uint8_t * b, float & d, float & off) {
        d = half_at(b);
        off = half_at(b + 2);
        return _mm256_or_si256(nibbles32(b + 8), fifth_bits(b + 4));
    }
};
struct iq4_nl {
    static constexpr size_t BYTES = 18;
    static constexpr bool SIGNED = true;
    static KVG_INLINE __m256i quants(const uint8_t * b, float & d, float & off) {
        const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) kvg::iq4nl_levels));
        d = half_at(b);
        off = 0.0f;
        return _mm256_shuffle_epi8(levels, nibbles32(b + 2));
    }
};

template <typename T, int R, int C>
KVG_INLINE void tile_32(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    const __m256i ones16 = _mm256_set1_epi16(1), ones8 = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < a.k / QK8_0; ++b) {
        __m256i xq[C];
        __m256 xsum[C];
        float xd[C];
        for (int c = 0; c < C; ++c) {
            const block_q8_0 & xb = ((const block_q8_0 *) (a.x + c * a.x_stride))[b];
            xq[c] = load32((const uint8_t *) xb.qs);
            xd[c] = _cvtsh_ss(xb.d);
            if (!T::SIGNED) xsum[c] = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xq[c]), ones16));
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) _mm_prefetch((const char *) w + (R == 1 ? 1024 : R * a.w_stride), _MM_HINT_T0);
            float d, off;
            const __m256i q = T::quants(w, d, off);
            const __m256i qabs = T::SIGNED ? _mm256_sign_epi8(q, q) : q; // maddubs: unsigned x signed
            for (int c = 0; c < C; ++c) {
                const __m256i p16 = _mm256_maddubs_epi16(qabs, T::SIGNED ? _mm256_sign_epi8(xq[c], q) : xq[c]);
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
                acc[r * C + c] = _mm256_fmadd_ps(p, _mm256_set1_ps(d * xd[c]), acc[r * C + c]);
                if (!T::SIGNED) acc[r * C + c] = _mm256_fmadd_ps(xsum[c], _mm256_set1_ps(off * xd[c]), acc[r * C + c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct t_q2_k { static KVG_TARGET void run(const mm_tile_args & a) { tile_k<q2_k, R, C>(a); } };
template <int R, int C> struct t_q3_k { static KVG_TARGET void run(const mm_tile_args & a) { tile_k<q3_k, R, C>(a); } };
template <int R, int C> struct t_q4_k { static KVG_TARGET void run(const mm_tile_args & a) { tile_k<q4_k, R, C>(a); } };
template <int R, int C> struct t_q5_k { static KVG_TARGET void run(const mm_tile_args & a) { tile_k<q5_k, R, C>(a); } };
template <int R, int C> struct t_q6_k { static KVG_TARGET void run(const mm_tile_args & a) { tile_k<q6_k, R, C>(a); } };
template <int R, int C> struct t_iq4_xs {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_k<iq4_xs, R, C>(a); }
};
template <int R, int C> struct t_q4_1 { static KVG_TARGET void run(const mm_tile_args & a) { tile_32<q4_1, R, C>(a); } };
template <int R, int C> struct t_q5_0 { static KVG_TARGET void run(const mm_tile_args & a) { tile_32<q5_0, R, C>(a); } };
template <int R, int C> struct t_q5_1 { static KVG_TARGET void run(const mm_tile_args & a) { tile_32<q5_1, R, C>(a); } };
template <int R, int C> struct t_iq4_nl { static KVG_TARGET void run(const mm_tile_args & a) { tile_32<iq4_nl, R, C>(a); } };

// q8_K activations: the scale from the largest magnitude, then round to nearest (as the
// reference quantizer; bit-identical results)
KVG_TARGET void quantize_q8_K(const float * x, void * vy, int64_t k) {
    block_q8_K * y = (block_q8_K *) vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        __m256 vmax = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        alignas(32) float m8[8];
        _mm256_store_ps(m8, vmax);
        float amax = 0.0f;
        for (float v : m8) amax = amax > v ? amax : v;
        const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        y[i].d = d;
        const __m256 vid = _mm256_set1_ps(id);
        for (int j = 0; j < QK_K; j += 16) {
            const __m256i a = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            const __m256i b = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            const __m256i s16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8); // 16 int16 in order
            const __m128i s8 = _mm_packs_epi16(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
            _mm_storeu_si128((__m128i *) (y[i].qs + j), s8);
            __m256i t = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4E));
            t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xB1));
            y[i].bsums[j / 16] = (int16_t) _mm_cvtsi128_si32(t4);
        }
    }
}

} // namespace

void kvg::add_block_quant_kernels_avx2(cpu_kernels & k) {
    mm_fill<t_q4_1, 4, 2>(k.mm[MM_Q4_1]);
    mm_fill<t_q5_1, 4, 2>(k.mm[MM_Q5_1]);
    // signed quants need no activation sums: one weight row against up to 8 activation rows
    // shares their decoding in prompts, and matrix-vector products keep 4 rows per activation block
    mm_fill<t_q5_0, 1, 8>(k.mm[MM_Q5_0]);
    mm_fill_matvec<t_q5_0, 4>(k.mm[MM_Q5_0]);
    mm_fill<t_iq4_nl, 1, 8>(k.mm[MM_IQ4_NL]);
    mm_fill_matvec<t_iq4_nl, 4>(k.mm[MM_IQ4_NL]);
    mm_fill<t_q2_k, 1, 8>(k.mm[MM_Q2_K]);
    mm_fill<t_q3_k, 1, 8>(k.mm[MM_Q3_K]);
    mm_fill<t_q4_k, 1, 8>(k.mm[MM_Q4_K]);
    mm_fill<t_q5_k, 1, 8>(k.mm[MM_Q5_K]);
    mm_fill<t_q6_k, 1, 8>(k.mm[MM_Q6_K]);
    mm_fill<t_iq4_xs, 1, 8>(k.mm[MM_IQ4_XS]);
    // k-quants and iq4_xs: one weight row against up to 8 activation rows (the unpacking of a super-block
    // is the cost to share); one row streams best for matrix-vector products. The 32-value
    // types keep 4 rows there: one activation block (and its sum) serves 4 weight rows, and
    // q5_0/q4_1 are compute-bound with one (Qwen2.5-0.5B Q4_K_M, mostly q5_0: tg 1 thread +20-30%).
    for (int t = MM_Q2_K; t < MM_TYPE_COUNT; ++t) k.mm[t].mv_rows = 1;
    add_ternary_kernels_avx2(k); // (after: it may set its own mv_rows)
    add_iq2_kernels_avx2(k);
    add_iq3_kernels_avx2(k);
    k.quantize_q8_K = quantize_q8_K;
}

namespace {

// ---- AVX-512: two runs (64 values) per vector ---------------------------------------------------
// The k-quant tile again with 512-bit vectors: runs 2m and 2m+1 side by side (the 64
// activation bytes at 64m), their scales placed per 128-bit lane with one vpermw. q4_K,
// q5_K and q6_K unpack 64 values at once; the others pair their AVX2 runs.
#define KVG_TARGET512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KVG_INLINE512 KVG_TARGET512 inline __attribute__((always_inline))

KVG_INLINE512 __m512i pair256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
KVG_INLINE512 __m512i low4_512(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }

template <typename T> KVG_INLINE512 __m512i run64(const uint8_t * b, int m) {
    if constexpr (std::is_same_v<T, q4_k> || std::is_same_v<T, q5_k>) {
        constexpr size_t QS = std::is_same_v<T, q4_k> ? 16 : 48;
        const __m256i q = load32(b + QS + 32 * m); // low nibbles: run 2m, high: run 2m + 1
        __m512i v = low4_512(pair256(q, _mm256_srli_epi16(q, 4)));
        if constexpr (std::is_same_v<T, q5_k>) {
            const __m256i h = load32(b + 16); // bit j of byte l: the 5th bit of value l of run j
            const __m512i hb = pair256(h, _mm256_srli_epi16(h, 1));
            const __m512i bit = _mm512_and_si512(_mm512_srli_epi16(hb, 2 * m), _mm512_set1_epi8(1));
            v = _mm512_or_si512(v, _mm512_slli_epi16(bit, 4));
        }
        return v;
    } else if constexpr (std::is_same_v<T, q6_k>) {
        const int h = m >> 1, p = m & 1; // runs 4h + 2p and 4h + 2p + 1
        const __m512i l = _mm512_loadu_si512((const void *) (b + 64 * h));
        const __m512i lo = low4_512(p ? _mm512_srli_epi16(l, 4) : l);
        const __m256i qh = load32(b + 128 + 32 * h);
        const __m512i hq = pair256(qh, _mm256_srli_epi16(qh, 2)); // bits 4p and 4p + 2 of each byte
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(hq, 4 * p), _mm512_set1_epi8(3));
        return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    } else {
        return pair256(T::run32(b, 2 * m), T::run32(b, 2 * m + 1));
    }
}

// lane L of runs 2m, 2m+1 holds values 32m + 16L ..: sub-block 4m + L (per-16 scales) or
// 2m + L/2 (per-32)
template <typename T> KVG_INLINE512 __m512i scale64(const kscales & s, int m) {
    const __m512i idx = T::PER32 ? _mm512_inserti64x4(_mm512_set1_epi16((short) (2 * m)), _mm256_set1_epi16((short) (2 * m + 1)), 1)
                                 : _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short) (4 * m + 1)), _mm_set1_epi16((short) (4 * m)))),
                                                      _mm256_set_m128i(_mm_set1_epi16((short) (4 * m + 3)), _mm_set1_epi16((short) (4 * m + 2))), 1);
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(s.all));
}

template <typename T, int R, int C>
KVG_INLINE512 void tile_k512(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) prefetch_block<T::BYTES>((const char *) w + (R == 1 ? PF_DIST : R * a.w_stride));
            kscales s;
            T::prepare(w, s);
            __m512i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
            for (int m = 0; m < 4; ++m) {
                const __m512i q = run64<T>(w, m), scale = scale64<T>(s, m);
                // signed runs (no vpsignb here): |q|, and x negated where q < 0
                const __m512i uq = signed_runs<T> ? _mm512_abs_epi8(q) : q;
                const __mmask64 neg = signed_runs<T> ? _mm512_movepi8_mask(q) : 0;
                for (int c = 0; c < C; ++c) {
                    __m512i xq = _mm512_loadu_si512((const void *) (x[c]->qs + 64 * m));
                    if (signed_runs<T>) xq = _mm512_mask_sub_epi8(xq, neg, _mm512_setzero_si512(), xq);
                    const __m512i p = _mm512_maddubs_epi16(uq, xq);
                    isum[c] = _mm512_add_epi32(isum[c], _mm512_madd_epi16(p, scale));
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(isum[c]), _mm512_extracti64x4_epi64(isum[c], 1));
                add_superblock<!signed_runs<T>>(acc[r * C + c], i8, s, *x[c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct z_q2_k { static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<q2_k, R, C>(a); } };
template <int R, int C> struct z_q3_k { static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<q3_k, R, C>(a); } };
template <int R, int C> struct z_q4_k { static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<q4_k, R, C>(a); } };
template <int R, int C> struct z_q5_k { static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<q5_k, R, C>(a); } };
template <int R, int C> struct z_q6_k { static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<q6_k, R, C>(a); } };
template <int R, int C> struct z_iq4_xs {
    static KVG_TARGET512 void run(const mm_tile_args & a) { tile_k512<iq4_xs, R, C>(a); }
};

} // namespace

void kvg::add_block_quant_kernels_avx512(cpu_kernels & k) {
    add_block_quant_kernels_avx2(k); // the 32-value block types and q8_K activations
    mm_fill<z_q2_k, 1, 8>(k.mm[MM_Q2_K]);
    mm_fill<z_q3_k, 1, 8>(k.mm[MM_Q3_K]);
    mm_fill<z_q4_k, 1, 8>(k.mm[MM_Q4_K]);
    mm_fill<z_q5_k, 1, 8>(k.mm[MM_Q5_K]);
    mm_fill<z_q6_k, 1, 8>(k.mm[MM_Q6_K]);
    mm_fill<z_iq4_xs, 1, 8>(k.mm[MM_IQ4_XS]);
    for (int t = MM_Q2_K; t < MM_TYPE_COUNT; ++t) k.mm[t].mv_rows = 1;
    add_ternary_kernels_avx512(k); // (after: it may set its own mv_rows)
    add_iq2_kernels_avx512(k);
    add_iq3_kernels_avx512(k);
}

#else
void kvg::add_block_quant_kernels_avx2(cpu_kernels &) {}
void kvg::add_block_quant_kernels_avx512(cpu_kernels &) {}
#endif
