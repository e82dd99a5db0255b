// AVX2 matmul tiles of iq3_xxs and iq3_s against q8_K activations (quants-iq3.h).
//
// Per sub-block of 32 values: the 8 groups' grid entries, looked up, are 32 unsigned magnitude
// bytes in element order; the 32 signs become +1/-1 bytes that sign the activations (q8_K's
// quants lie in -127..127, so negating never overflows). maddubs of magnitude (<= 62) times
// activation pairs stays within 2 * 62 * 127, one madd by the sub-block's 2 l + 1 (<= 31) makes
// int32, and the super-block ends with d (iq3_xxs: d / 4) * dx. AVX-512 does two sub-blocks
// per vector and negates activations under the sign bits as a byte mask.
#include "quants-iq3.h"
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

// the 8 grid entries at idx[0..7] (scalar loads: Zen 3's gather was slower for iq3_xxs, no faster for iq3_s)
KVG_INLINE __m256i grid8(const uint32_t * grid, const int * i) {
    return _mm256_setr_epi32((int) grid[i[0]], (int) grid[i[1]], (int) grid[i[2]], (int) grid[i[3]], (int) grid[i[4]],
                             (int) grid[i[5]], (int) grid[i[6]], (int) grid[i[7]]);
}

// 32 sign bits (value n: bit n % 8 of byte n / 8) as bytes +1 / -1
KVG_INLINE __m256i sign_bytes(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                                2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

// sub-block j of a block: its 8 grid indices, 32 sign bits (value n: bit n), 2 l + 1
struct sub_codes {
    alignas(32) int idx[8];
    uint32_t signs;
    int scale;
};

struct xxs {
    static constexpr size_t BYTES = sizeof(block_iq3_xxs);
    static constexpr float D_MUL = 0.25f;
    static constexpr const uint32_t * GRID = iq3xxs_grid;
    static KVG_INLINE void codes(const uint8_t * w, int j, sub_codes & s) {
        const block_iq3_xxs & b = *(const block_iq3_xxs *) w;
        for (int q = 0; q < 8; ++q) s.idx[q] = b.qs[8 * j + q];
        uint32_t sas;
        std::memcpy(&sas, b.sas + 4 * j, 4);
        s.signs = 0;
        for (int q = 0; q < 4; ++q) s.signs |= (uint32_t) iq3_signs.v[(sas >> (7 * q)) & 127] << (8 * q);
        s.scale = (int) (2 * (sas >> 28) + 1);
    }
};

struct s3 {
    static constexpr size_t BYTES = sizeof(block_iq3_s);
    static constexpr float D_MUL = 1.0f;
    static constexpr const uint32_t * GRID = iq3s_grid;
    static KVG_INLINE void codes(const uint8_t * w, int j, sub_codes & s) {
        const block_iq3_s & b = *(const block_iq3_s *) w;
        // lane q: bit q of qh[j] moved to bit 8 (in vectors: the scalar bit picking cost more than the lookups)
        const __m256i high =
            _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(b.qh[j]), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                             _mm256_set1_epi32(256));
        const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * j)));
        _mm256_store_si256((__m256i *) s.idx, _mm256_or_si256(low, high));
        std::memcpy(&s.signs, b.signs + 4 * j, 4);
        s.scale = 1 + 2 * ((b.scales[j / 2] >> (4 * (j % 2))) & 15);
    }
};

template <typename T, int R, int C> KVG_INLINE void tile_iq3(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) prefetch_block<T::BYTES>((const char *) w + PF_DIST);
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                sub_codes s;
                T::codes(w, j, s);
                const __m256i mag = grid8(T::GRID, s.idx), sign = sign_bytes(s.signs);
                const __m256i scale = _mm256_set1_epi16((short) s.scale);
                for (int c = 0; c < C; ++c) {
                    const __m256i xs = _mm256_sign_epi8(load32((const uint8_t *) x[c]->qs + 32 * j), sign);
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), scale));
                }
            }
            const float d = half_at(w) * T::D_MUL;
            for (int c = 0; c < C; ++c) {
                acc[r * C + c] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d * x[c]->d), acc[r * C + c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct t_iq3_xxs {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_iq3<xxs, R, C>(a); }
};
template <int R, int C> struct t_iq3_s {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_iq3<s3, R, C>(a); }
};

} // namespace

void kvg::add_iq3_kernels_avx2(cpu_kernels & k) {
    // one weight row against up to 8 activation rows: the lookups are the cost to share
    mm_fill<t_iq3_xxs, 1, 8>(k.mm[MM_IQ3_XXS]);
    mm_fill<t_iq3_s, 1, 8>(k.mm[MM_IQ3_S]);
}
namespace {

// ---- AVX-512: two sub-blocks (64 values) per vector; the sign bits are a byte mask ----------------
#define KVG_TARGET512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KVG_INLINE512 KVG_TARGET512 inline __attribute__((always_inline))

KVG_INLINE512 __m512i pair(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

template <typename T, int R, int C> KVG_INLINE512 void tile_iq3_512(const mm_tile_args & a) {
    __m256 acc[R * C];
    for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.k / QK_K; ++b) {
        const block_q8_K * x[C];
        for (int c = 0; c < C; ++c) x[c] = (const block_q8_K *) (a.x + c * a.x_stride) + b;
        for (int r = 0; r < R; ++r) {
            const uint8_t * w = (const uint8_t *) a.w + r * a.w_stride + b * T::BYTES;
            if (C == 1) prefetch_block<T::BYTES>((const char *) w + PF_DIST);
            __m512i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
            for (int j = 0; j < 8; j += 2) {
                sub_codes s0, s1;
                T::codes(w, j, s0);
                T::codes(w, j + 1, s1);
                const __m512i mag = pair(grid8(T::GRID, s0.idx), grid8(T::GRID, s1.idx));
                const __mmask64 neg = (__mmask64) s0.signs | (__mmask64) s1.signs << 32;
                const __m512i scale = pair(_mm256_set1_epi16((short) s0.scale), _mm256_set1_epi16((short) s1.scale));
                for (int c = 0; c < C; ++c) {
                    const __m512i xv = _mm512_loadu_si512((const void *) (x[c]->qs + 32 * j));
                    const __m512i xs = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
                    isum[c] = _mm512_add_epi32(isum[c], _mm512_madd_epi16(_mm512_maddubs_epi16(mag, xs), scale));
                }
            }
            const float d = half_at(w) * T::D_MUL;
            for (int c = 0; c < C; ++c) {
                const __m256i s =
                    _mm256_add_epi32(_mm512_castsi512_si256(isum[c]), _mm512_extracti64x4_epi64(isum[c], 1));
                acc[r * C + c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * x[c]->d), acc[r * C + c]);
            }
        }
    }
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct z_iq3_xxs {
    static KVG_TARGET512 void run(const mm_tile_args & a) { tile_iq3_512<xxs, R, C>(a); }
};
template <int R, int C> struct z_iq3_s {
    static KVG_TARGET512 void run(const mm_tile_args & a) { tile_iq3_512<s3, R, C>(a); }
};

} // namespace

void kvg::add_iq3_kernels_avx512(cpu_kernels & k) {
    mm_fill<z_iq3_xxs, 1, 8>(k.mm[MM_IQ3_XXS]);
    mm_fill<z_iq3_s, 1, 8>(k.mm[MM_IQ3_S]);
}

#else
void kvg::add_iq3_kernels_avx2(cpu_kernels &) {}
void kvg::add_iq3_kernels_avx512(cpu_kernels &) {}
#endif
