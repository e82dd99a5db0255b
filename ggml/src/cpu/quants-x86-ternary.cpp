// AVX2 and AVX-512 matmul tiles of the ternary types tq1_0 and tq2_0 against q8_K activations.
//
// A super-block's 256 codes t (0..2; tq2_0 may hold 3) are decoded to 8 runs of 32 unsigned
// bytes in element order, and value = d * (t - 1), so
//   dot = d * dx * (sum of t * x - sum of x)
// with the activations' sum from q8_K's bsums. maddubs pairs of t * x stay within 2 * 3 * 128,
// so the 8 runs add up in int16 (<= 6144) and one madd ends the super-block: no scales to apply.
#include "simd.h"
#include "types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

#include <cstring>
#include <type_traits>

namespace {

using namespace kvg;
using namespace kvg::avx2;

// tq2_0: run j is bits 2 (j % 4) of the 32 bytes at 32 (j / 4)
struct tq2 {
    static constexpr size_t BYTES = 66, D_AT = 64;
    static KVG_INLINE void runs(const uint8_t * b, __m256i * q) {
        const __m256i m3 = _mm256_set1_epi8(3);
        for (int g = 0; g < 2; ++g) {
            const __m256i v = load32(b + 32 * g);
            q[4 * g] = _mm256_and_si256(v, m3);
            q[4 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
            q[4 * g + 2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
            q[4 * g + 3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
        }
    }
};

// tq1_0: the bytes of v split into 16-bit lanes with the byte in the high half (even bytes:
// e, odd bytes: o). Times 3^n, mullo keeps (byte * 3^n) mod 256 in the high half; mulhi by 3
// then leaves the trit ((that * 3) >> 8) in the low half. pow: 3^n per 16-bit lane.
struct split_bytes {
    __m256i e, o;
};
KVG_INLINE split_bytes split(__m256i v) {
    return {_mm256_slli_epi16(v, 8), _mm256_and_si256(v, _mm256_set1_epi16((short) 0xFF00))};
}
KVG_INLINE __m256i trits(const split_bytes & s, __m256i pow) {
    const __m256i three = _mm256_set1_epi16(3);
    const __m256i te = _mm256_mulhi_epu16(_mm256_mullo_epi16(s.e, pow), three);
    const __m256i to = _mm256_mulhi_epu16(_mm256_mullo_epi16(s.o, pow), three);
    return _mm256_or_si256(te, _mm256_slli_epi16(to, 8));
}

// runs 0..4: trit n of bytes 0..31; run 5: trits 0 and 1 of bytes 32..47 (low, high 128-bit
// lane), run 6: trits 2 and 3; run 7: trit 4 of bytes 32..47, then value 240 + 4 n + j = trit n
// of qh[j], i.e. qh's 4 bytes repeated with 3^n for byte pair (2 w, 2 w + 1), n = w / 2
struct tq1 {
    static constexpr size_t BYTES = 54, D_AT = 52;
    static KVG_INLINE void runs(const uint8_t * b, __m256i * q) {
        const split_bytes s0 = split(load32(b));
        for (int n = 0; n < 5; ++n) {
            constexpr short pow3[5] = {1, 3, 9, 27, 81};
            q[n] = trits(s0, _mm256_set1_epi16(pow3[n]));
        }
        const __m128i mid = _mm_loadu_si128((const __m128i *) (b + 32));
        uint32_t qh;
        std::memcpy(&qh, b + 48, 4);
        const split_bytes s1 = split(_mm256_broadcastsi128_si256(mid));
        q[5] = trits(s1, _mm256_setr_epi16(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3));
        q[6] = trits(s1, _mm256_setr_epi16(9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27));
        const split_bytes s2 = split(_mm256_set_m128i(_mm_set1_epi32((int) qh), mid));
        q[7] = trits(s2, _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27));
    }
};

// What the AVX2 and AVX-512 tiles share: super-block b's activation blocks, weight row r's
// block (requesting PF_DIST bytes ahead for matrix-vector products: the same row's later
// blocks, or the next rows'), and the end of a block
template <int C> KVG_INLINE void act_blocks(const mm_tile_args & a, int64_t b, const block_q8_K ** x) {
    for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
}
template <typename T, int R, int C> KVG_INLINE const uint8_t * weight_block(const mm_tile_args & a, int r, int64_t b) {
    const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
    if (C == 1) prefetch_block<T::BYTES>((const char *) w + PF_DIST);
    return w;
}
// o += d * dx * (sum of t * x - sum of x); tx: 8 int32 partial sums of t * x
KVG_INLINE void add_block(__m256 & o, __m256i tx, float d, const block_q8_K & x) {
    const __m256i xsum = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) x.bsums), _mm256_set1_epi16(1));
    o = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(tx, xsum)), _mm256_set1_ps(d * x.d), o);
}

template <typename T, int R, int C> KVG_INLINE void tile_t(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        act_blocks<C>(a, b, x);
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = weight_block<T, R, C>(a, r, b);
            __m256i q[8];
            T::runs(w, q);
            for (int c = 0; c < C; ++c) {
                const uint8_t * xq = (const uint8_t *) x[c]->qs;
                __m256i s = _mm256_maddubs_epi16(q[0], load32(xq));
                for (int j = 1; j < 8; ++j) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(q[j], load32(xq + 32 * j)));
                add_block(acc[r * C + c], _mm256_madd_epi16(s, ones), half_at(w + T::D_AT), *x[c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct t_tq1_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_t<tq1, R, C>(a); }
};
template <int R, int C> struct t_tq2_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_t<tq2, R, C>(a); }
};

} // namespace

void kvg::add_ternary_kernels_avx2(cpu_kernels & k) {
    // one weight row against up to 8 activation rows (the decoding is the cost to share); one
    // row for matrix-vector products too (2 or 4 rows sharing the activations: no faster for
    // tq2_0 at 2048 x 5632 or 4096 x 14336, 1 thread, Zen 3 under load)
    mm_fill<t_tq1_0, 1, 8>(k.mm[MM_TQ1_0]);
    mm_fill<t_tq2_0, 1, 8>(k.mm[MM_TQ2_0]);
}

namespace {

// ---- AVX-512: two runs (64 values) per vector, as the k-quant tiles (quants-x86.cpp) --------------
#define KVG_TARGET512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KVG_INLINE512 KVG_TARGET512 inline __attribute__((always_inline))

KVG_INLINE512 __m512i pair256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// runs 2m and 2m + 1 side by side (the activation bytes at 64 m)
template <typename T> KVG_INLINE512 void runs64(const uint8_t * b, __m512i * q) {
    if constexpr (std::is_same_v<T, tq2>) {
        const __m512i m3 = _mm512_set1_epi8(3);
        for (int g = 0; g < 2; ++g) {
            const __m256i v = load32(b + 32 * g);
            const __m512i v2 = pair256(v, _mm256_srli_epi16(v, 2)); // runs 4g, 4g + 1
            q[2 * g] = _mm512_and_si512(v2, m3);
            q[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(v2, 4), m3);
        }
    } else {
        __m256i r[8];
        T::runs(b, r);
        for (int m = 0; m < 4; ++m) q[m] = pair256(r[2 * m], r[2 * m + 1]);
    }
}

template <typename T, int R, int C> KVG_INLINE512 void tile_t512(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    const __m512i ones = _mm512_set1_epi16(1);
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        act_blocks<C>(a, b, x);
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = weight_block<T, R, C>(a, r, b);
            __m512i q[4];
            runs64<T>(w, q);
            for (int c = 0; c < C; ++c) {
                const int8_t * xq = x[c]->qs;
                __m512i s = _mm512_maddubs_epi16(q[0], _mm512_loadu_si512((const void *) xq));
                for (int m = 1; m < 4; ++m) {
                    s = _mm512_add_epi16(s,
                                         _mm512_maddubs_epi16(q[m], _mm512_loadu_si512((const void *) (xq + 64 * m))));
                }
                const __m512i s32 = _mm512_madd_epi16(s, ones);
                const __m256i tx = _mm256_add_epi32(_mm512_castsi512_si256(s32), _mm512_extracti64x4_epi64(s32, 1));
                add_block(acc[r * C + c], tx, half_at(w + T::D_AT), *x[c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct z_tq1_0 {
    static KVG_TARGET512 void run(const mm_tile_args & a) { tile_t512<tq1, R, C>(a); }
};
template <int R, int C> struct z_tq2_0 {
    static KVG_TARGET512 void run(const mm_tile_args & a) { tile_t512<tq2, R, C>(a); }
};

} // namespace

void kvg::add_ternary_kernels_avx512(cpu_kernels & k) {
    mm_fill<z_tq1_0, 1, 8>(k.mm[MM_TQ1_0]);
    mm_fill<z_tq2_0, 1, 8>(k.mm[MM_TQ2_0]);
}

#else
void kvg::add_ternary_kernels_avx2(cpu_kernels &) {}
void kvg::add_ternary_kernels_avx512(cpu_kernels &) {}
#endif
