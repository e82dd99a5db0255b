// AVX2 matmul tiles of iq3_xxs and iq3_s against q8_K activations (quants-iq3.h).
//
// Per sub-block of 32 values: the 8 groups' grid entries, looked up, are 32 unsigned magnitude
// bytes in element order; the 32 signs become +1/-1 bytes that sign the activations (q8_K's
// quants lie in -127..127, so negating never overflows). maddubs of magnitude (<= 62) times
// activation pairs stays within 2 * 62 * 127, one madd by the sub-block's 2 l + 1 (<= 31) makes
// int32, and the super-block ends with d (iq3_xxs: d / 4) * dx. The AVX-512 table takes the
// same tiles: the grid lookups, not the vector width, bound them.
#include "quants-iq3.h"
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

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

// sub-block j of a block: magnitudes, signs, scale 2 l + 1
struct sub_block {
    __m256i mag, sign;
    int scale;
};

struct xxs {
    static constexpr size_t BYTES = sizeof(block_iq3_xxs);
    static constexpr float D_MUL = 0.25f;
    static KVG_INLINE sub_block sub(const uint8_t * w, int j) {
        const block_iq3_xxs & b = *(const block_iq3_xxs *) w;
        int idx[8];
        for (int q = 0; q < 8; ++q) idx[q] = b.qs[8 * j + q];
        uint32_t sas;
        std::memcpy(&sas, b.sas + 4 * j, 4);
        uint32_t bits = 0;
        for (int q = 0; q < 4; ++q) bits |= (uint32_t) iq3_signs.v[(sas >> (7 * q)) & 127] << (8 * q);
        return {grid8(iq3xxs_grid, idx), sign_bytes(bits), (int) (2 * (sas >> 28) + 1)};
    }
};

struct s3 {
    static constexpr size_t BYTES = sizeof(block_iq3_s);
    static constexpr float D_MUL = 1.0f;
    static KVG_INLINE sub_block sub(const uint8_t * w, int j) {
        const block_iq3_s & b = *(const block_iq3_s *) w;
        int idx[8];
        for (int q = 0; q < 8; ++q) idx[q] = b.qs[8 * j + q] | ((b.qh[j] >> q) & 1) << 8;
        uint32_t bits;
        std::memcpy(&bits, b.signs + 4 * j, 4);
        return {grid8(iq3s_grid, idx), sign_bytes(bits), 1 + 2 * ((b.scales[j / 2] >> (4 * (j % 2))) & 15)};
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
            for (int j = 0; j < 8; ++j) {
                const sub_block s = T::sub(w, j);
                const __m256i scale = _mm256_set1_epi16((short) s.scale);
                for (int c = 0; c < C; ++c) {
                    const __m256i xs = _mm256_sign_epi8(load32((const uint8_t *) x[c]->qs + 32 * j), s.sign);
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(s.mag, xs), scale));
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
void kvg::add_iq3_kernels_avx512(cpu_kernels & k) { add_iq3_kernels_avx2(k); }

#else
void kvg::add_iq3_kernels_avx2(cpu_kernels &) {}
void kvg::add_iq3_kernels_avx512(cpu_kernels &) {}
#endif
