// AVX2 and AVX-512 matmul tiles of iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m against q8_K
// activations.
//
// Every value of these types is d / 8 * (2 s + 1) * w with w an integer, |w| <= 43 (iq2: a grid
// byte with its sign; iq1: 8 (g + delta) = 8 g +- 1), s the scale of its 16 or 32 values
// (quants-iq2.h). A sub-block of 32 values is decoded to |w| as unsigned bytes and a vector whose
// bytes carry w's sign (never 0), which sign_epi8 puts on the activations; maddubs then pairs
// |w| * +-x (<= 2 * 43 * 127, no int16 overflow), madd applies 2 s + 1 per 16 values and one
// int32 sum per super-block (<= 8 * 2 * 10922 * 31) takes d * dx / 8 at its end.
#include "simd.h"
#include "types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "../quants-iq2.h"
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

// A decoded sub-block: magnitudes, signs (+-1 or any byte of w's sign) and 2 s + 1 per int16
// lane (lanes 0..7: values 0..15, 8..15: values 16..31, as maddubs leaves them).
struct sub32 {
    __m256i q, sign, scale;
};

// 4 sign bytes (group l's in byte l) to 32 bytes of -1 (bit set) or +1 in value order
KVG_INLINE __m256i expand_signs(uint32_t s) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int) s), spread);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}
KVG_INLINE __m256i points(const uint64_t * grid, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long) grid[i3], (long long) grid[i2], (long long) grid[i1], (long long) grid[i0]);
}
KVG_INLINE __m256i scales(unsigned lo, unsigned hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short) (2 * hi + 1)), _mm_set1_epi16((short) (2 * lo + 1)));
}
KVG_INLINE uint32_t u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
KVG_INLINE uint16_t u16(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// What a super-block's decoding computes once for its 8 sub-blocks (iq2 types): group i's grid
// index, its sign byte (sub-block j's 4 at 4 j), and 2 s + 1 per 16 values as int16 in the order
// (sub-block 0 values 0..15, 16..31, sub-block 1 ...), sub-blocks 0..3 in both 128-bit lanes of
// sc[0], 4..7 of sc[1].
struct iq2_prep {
    alignas(32) uint16_t idx[32];
    alignas(32) uint8_t sign[32];
    __m256i sc[2];
};
// 16 4-bit scales (8 bytes, low nibble first) to 2 s + 1 in sc
KVG_INLINE void nibble_scales(iq2_prep & p, const uint8_t * b) {
    const __m128i v = _mm_loadl_epi64((const __m128i *) b), m = _mm_set1_epi8(15);
    const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m));
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1)));
    p.sc[0] = _mm256_permute2x128_si256(s16, s16, 0x00);
    p.sc[1] = _mm256_permute2x128_si256(s16, s16, 0x11);
}
// sub-block j's scales from sc: lanes 0..7 its first 16 values', 8..15 its last 16 values'
KVG_INLINE __m256i sub_scales(const iq2_prep & p, int j) {
    const char k = (char) (4 * (j % 4));
    const __m256i pick = _mm256_setr_epi8(k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k, k + 1, k,
                                          k + 1, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3, k + 2, k + 3,
                                          k + 2, k + 3, k + 2, k + 3, k + 2, k + 3);
    return _mm256_shuffle_epi8(p.sc[j / 4], pick);
}
// iq2_xs: 7-bit sign codes in 16-bit lanes with the parity bit that makes them 8 signs
KVG_INLINE __m256i with_parity(__m256i c) {
    __m256i t = _mm256_xor_si256(c, _mm256_srli_epi16(c, 4));
    t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 2));
    t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 1));
    return _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(t, _mm256_set1_epi16(1)), 7));
}
KVG_INLINE sub32 iq2_sub(const iq2_prep & p, int j, const uint64_t * g) {
    const uint16_t * i = p.idx + 4 * j;
    return {points(g, i[0], i[1], i[2], i[3]), expand_signs(u32(p.sign + 4 * j)), sub_scales(p, j)};
}

// iq2_xxs: the 8 sign bits of each 7-bit sign code (a table: its per-sub-block decoding beat a
// vectorized prepare step at 1 and 4 activation rows)
struct sign_codes {
    uint8_t v[128];
    constexpr sign_codes() : v() {
        for (int c = 0; c < 128; ++c) {
            int odd = 0;
            for (int b = 0; b < 7; ++b) odd ^= (c >> b) & 1;
            v[c] = (uint8_t) (c | odd << 7);
        }
    }
};
constexpr sign_codes SIGNS7;

// the iq1 types and iq2_xxs decode each sub-block on its own: nothing to prepare
struct no_prep {};

struct iq2_xxs {
    static constexpr size_t BYTES = sizeof(block_iq2_xxs);
    using prep = no_prep;
    static KVG_INLINE void prepare(const uint8_t *, prep &) {}
    static const uint64_t * grid() { return iq2xxs_grid(); }
    static KVG_INLINE float d(const uint8_t * b) { return half_at(b); }
    // sub-block j: 4 index bytes, then its aux word (4 x 7 sign bits, s in bits 28..31)
    static KVG_INLINE sub32 sub(const uint8_t * b, const prep &, int j, const uint64_t * g) {
        const uint8_t * q = b + 2 + 8 * j;
        const uint32_t aux = u32(q + 4);
        const uint32_t s = SIGNS7.v[aux & 127] | SIGNS7.v[(aux >> 7) & 127] << 8 | SIGNS7.v[(aux >> 14) & 127] << 16 |
                           (uint32_t) SIGNS7.v[(aux >> 21) & 127] << 24;
        return {points(g, q[0], q[1], q[2], q[3]), expand_signs(s), _mm256_set1_epi16((short) (2 * (aux >> 28) + 1))};
    }
};

struct iq2_xs {
    static constexpr size_t BYTES = sizeof(block_iq2_xs);
    using prep = iq2_prep;
    static const uint64_t * grid() { return iq2xs_grid(); }
    static KVG_INLINE float d(const uint8_t * b) { return half_at(b); }
    static KVG_INLINE void prepare(const uint8_t * b, prep & p) {
        const __m256i q0 = load32(b + 2), q1 = load32(b + 34), m9 = _mm256_set1_epi16(511);
        _mm256_store_si256((__m256i *) p.idx, _mm256_and_si256(q0, m9));
        _mm256_store_si256((__m256i *) p.idx + 1, _mm256_and_si256(q1, m9));
        const __m256i s0 = with_parity(_mm256_srli_epi16(q0, 9)), s1 = with_parity(_mm256_srli_epi16(q1, 9));
        _mm256_store_si256((__m256i *) p.sign, _mm256_permute4x64_epi64(_mm256_packus_epi16(s0, s1), 0xD8));
        nibble_scales(p, b + 66);
    }
    static KVG_INLINE sub32 sub(const uint8_t *, const prep & p, int j, const uint64_t * g) { return iq2_sub(p, j, g); }
};

struct iq2_s {
    static constexpr size_t BYTES = sizeof(block_iq2_s);
    using prep = iq2_prep;
    static const uint64_t * grid() { return iq2s_grid(); }
    static KVG_INLINE float d(const uint8_t * b) { return half_at(b); }
    // index bits 8, 9 of group l of sub-block j: (qh[j] << (8 - 2 l)) & 0x300, by mullo per 16-bit lane
    static KVG_INLINE void prepare(const uint8_t * b, prep & p) {
        const __m128i qh = _mm_loadl_epi64((const __m128i *) (b + 66));
        const __m256i mul = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
        const __m256i m = _mm256_set1_epi16(0x300);
        for (int h = 0; h < 2; ++h) {
            const __m128i rep = _mm_shuffle_epi8(
                qh, _mm_setr_epi8((char) (4 * h), (char) (4 * h), (char) (4 * h), (char) (4 * h), (char) (4 * h + 1),
                                  (char) (4 * h + 1), (char) (4 * h + 1), (char) (4 * h + 1), (char) (4 * h + 2),
                                  (char) (4 * h + 2), (char) (4 * h + 2), (char) (4 * h + 2), (char) (4 * h + 3),
                                  (char) (4 * h + 3), (char) (4 * h + 3), (char) (4 * h + 3)));
            const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(rep), mul), m);
            const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (b + 2 + 16 * h)));
            _mm256_store_si256((__m256i *) p.idx + h, _mm256_or_si256(lo, hi));
        }
        std::memcpy(p.sign, b + 34, 32);
        nibble_scales(p, b + 74);
    }
    static KVG_INLINE sub32 sub(const uint8_t *, const prep & p, int j, const uint64_t * g) { return iq2_sub(p, j, g); }
};

// iq1: w = 8 g + delta bytes (delta +-1 per group), |w| and w as the sign
KVG_INLINE sub32 iq1_sub(__m256i g8, __m256i delta, __m256i scale) {
    const __m256i w = _mm256_add_epi8(g8, delta);
    return {_mm256_abs_epi8(w), w, scale};
}
KVG_INLINE long long iq1_delta(bool negative) { return negative ? -1LL : 0x0101010101010101LL; }

struct iq1_s {
    static constexpr size_t BYTES = sizeof(block_iq1_s);
    using prep = no_prep;
    static KVG_INLINE void prepare(const uint8_t *, prep &) {}
    static const uint64_t * grid() { return iq1s_grid8(); }
    static KVG_INLINE float d(const uint8_t * b) { return half_at(b); }
    static KVG_INLINE sub32 sub(const uint8_t * b, const prep &, int j, const uint64_t * g) {
        const uint8_t * q = b + 2 + 4 * j;
        const unsigned h = u16(b + 34 + 2 * j);
        const __m256i p =
            points(g, q[0] | (h & 7) << 8, q[1] | (h & 0x38) << 5, q[2] | (h & 0x1C0) << 2, q[3] | (h & 0xE00) >> 1);
        return iq1_sub(p, _mm256_set1_epi64x(iq1_delta(h & 0x8000)),
                       _mm256_set1_epi16((short) (2 * ((h >> 12) & 7) + 1)));
    }
};

// iq1_m: the 4 groups' deltas (-1 where bit 3 of their qh nibble is set, else +1) from the 16-bit
// qh of a sub-block (groups 0, 1 in byte 0, 2, 3 in byte 1), in vector ops
KVG_INLINE __m256i deltas(unsigned qh16) {
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
                                          1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m256i bit = _mm256_setr_epi8(8, 8, 8, 8, 8, 8, 8, 8, -128, -128, -128, -128, -128, -128, -128, -128, //
                                         8, 8, 8, 8, 8, 8, 8, 8, -128, -128, -128, -128, -128, -128, -128, -128);
    const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi16((short) qh16), pick);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(1));
}

struct iq1_m {
    static constexpr size_t BYTES = sizeof(block_iq1_m);
    using prep = no_prep;
    static KVG_INLINE void prepare(const uint8_t *, prep &) {}
    static const uint64_t * grid() { return iq1s_grid8(); }
    static KVG_INLINE float d(const uint8_t * b) { return _cvtsh_ss(iq1m_d(*(const block_iq1_m *) b)); }
    static KVG_INLINE sub32 sub(const uint8_t * b, const prep &, int j, const uint64_t * g) {
        const uint8_t * q = b + 4 * j;
        const unsigned h0 = b[32 + 2 * j], h1 = b[33 + 2 * j];
        const unsigned sc = u16(b + 48 + 2 * (j / 2)) >> (6 * (j % 2));
        const __m256i p =
            points(g, q[0] | (h0 & 7) << 8, q[1] | (h0 & 0x70) << 4, q[2] | (h1 & 7) << 8, q[3] | (h1 & 0x70) << 4);
        return iq1_sub(p, deltas(h0 | h1 << 8), scales(sc & 7, (sc >> 3) & 7));
    }
};

// One weight row at a time against C activation rows: each sub-block is decoded once and
// dotted with every row's 32 activations (prefetching PF_DIST ahead for matrix-vector products).
template <typename T, int R, int C> KVG_INLINE void tile_iq(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    const uint64_t * g = T::grid();
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) prefetch_block<T::BYTES>((const char *) w + PF_DIST);
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            typename T::prep p;
            T::prepare(w, p);
            for (int j = 0; j < 8; ++j) {
                const sub32 s = T::sub(w, p, j, g);
                for (int c = 0; c < C; ++c) {
                    const __m256i xs = _mm256_sign_epi8(load32((const uint8_t *) x[c]->qs + 32 * j), s.sign);
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(s.q, xs), s.scale));
                }
            }
            const float d8 = T::d(w) * 0.125f;
            for (int c = 0; c < C; ++c) {
                acc[r * C + c] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d8 * x[c]->d), acc[r * C + c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <typename T> struct avx2_tiles {
    template <int R, int C> struct tile {
        static KVG_TARGET void run(const mm_tile_args & a) { tile_iq<T, R, C>(a); }
    };
};

// AVX-512 tables: the same tiles compiled for AVX-512 (EVEX encodings, 32 vector registers)
#define KVG_TARGET512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
template <typename T> struct avx512_tiles {
    template <int R, int C> struct tile {
        static KVG_TARGET512 void run(const mm_tile_args & a) { tile_iq<T, R, C>(a); }
    };
};

// one weight row against up to 8 activation rows (the decoding is the cost to share), one row
// for matrix-vector products too
template <template <typename> class Tiles> void add_tiles(cpu_kernels & k) {
    mm_fill<Tiles<iq2_xxs>::template tile, 1, 8>(k.mm[MM_IQ2_XXS]);
    mm_fill<Tiles<iq2_xs>::template tile, 1, 8>(k.mm[MM_IQ2_XS]);
    mm_fill<Tiles<iq2_s>::template tile, 1, 8>(k.mm[MM_IQ2_S]);
    mm_fill<Tiles<iq1_s>::template tile, 1, 8>(k.mm[MM_IQ1_S]);
    mm_fill<Tiles<iq1_m>::template tile, 1, 8>(k.mm[MM_IQ1_M]);
}

} // namespace

void kvg::add_iq2_kernels_avx2(cpu_kernels & k) { add_tiles<avx2_tiles>(k); }
void kvg::add_iq2_kernels_avx512(cpu_kernels & k) { add_tiles<avx512_tiles>(k); }

#else
void kvg::add_iq2_kernels_avx2(cpu_kernels &) {}
void kvg::add_iq2_kernels_avx512(cpu_kernels &) {}
#endif
