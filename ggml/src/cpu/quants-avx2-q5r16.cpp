// AVX2 matrix-vector kernel of q5_0_r16 weights (q5_0 rows interleaved by 16, types.h) over up
// to 8 packed activation rows. As the q4_0_r16 kernel (simd-avx2.cpp): one 32-bit lane per
// weight row, so a block ends in 8 rows' exact integer dots in one vector and its float steps
// serve 8 rows. The plain q5_0 tiles spend a shuffle, a compare and sign fixes per block and
// row (Zen 3, 1 thread: ~9 GB/s against a ~14 GB/s stream); here the quants stay unsigned
// (q in [0, 31], the -16 applied through 16 * the activations' sum) and the 5th bits of 8 rows
// come from one load, placed (types.h) so that a shift and a mask give those of 4 values.
#include "simd.h"
#include "types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

constexpr size_t W_BLOCK = R16_ROWS * sizeof(block_q5_0); // d[16], qh[16][4], qs[4][16][4]
constexpr size_t W_QH = 32, W_QS = 96;                    // offsets in a block
constexpr int COLS = 8;                                   // packed rows per call (mv_cols)
constexpr int64_t STEP = 16; // blocks per pass over both halves of the group: they stay in L1
constexpr int PF_AHEAD = 4096;

KVG_TARGET void pack_mv_q5_r16(const void * q8_row, void * out, int64_t k) { pack_mv_r16<16>(q8_row, out, k); }

// Quant words j < 4 of 8 rows (values 4j.. and 16 + 4j..) as 5-bit bytes: lo gets bit 4 + j of
// each byte of qh, hi bit j.
template <int J> KVG_INLINE void quants(const char * g, int h, __m256i qh, __m256i * lo, __m256i * hi) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i q = _mm256_loadu_si256((const __m256i *) (g + W_QS + 64 * J + 32 * h));
    lo[J] = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi32(qh, J), bit4));
    hi[J] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                            _mm256_and_si256(_mm256_slli_epi32(qh, 4 - J), bit4));
}

// 16-bit sums of quant words j and j + 1 times the packed row's bytes: 4 products of at most
// 2 * 31 * 127 per lane, no overflow
KVG_INLINE __m256i pair_dot(const __m256i * lo, const __m256i * hi, int j, const char * x) {
    const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(lo[j], bcast32(x + 4 * j)),
                                       _mm256_maddubs_epi16(hi[j], bcast32(x + 16 + 4 * j)));
    const __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(lo[j + 1], bcast32(x + 4 * j + 4)),
                                       _mm256_maddubs_epi16(hi[j + 1], bcast32(x + 20 + 4 * j)));
    return _mm256_add_epi16(a, b);
}

// Blocks [b0, b1) of rows 8h..8h+7 of the group at a.w, added to acc[c] for C packed rows.
template <int C> KVG_INLINE void half_rows(const mm_tile_args & a, int h, int64_t b0, int64_t b1, __m256 * acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = b0; b < b1; ++b) {
        const char * g = a.w + b * W_BLOCK;
        for (int l = 0; l < 3; ++l) _mm_prefetch(g + PF_AHEAD + 64 * (2 * l + h), _MM_HINT_T0); // 6 lines of the block
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g + 16 * h)));
        const __m256i qh = _mm256_loadu_si256((const __m256i *) (g + W_QH + 32 * h));
        __m256i lo[4], hi[4];
        quants<0>(g, h, qh, lo, hi);
        quants<1>(g, h, qh, lo, hi);
        quants<2>(g, h, qh, lo, hi);
        quants<3>(g, h, qh, lo, hi);
        for (int c = 0; c < C; ++c) {
            const char * x = a.x + c * a.x_stride + b * R16_X_BLOCK;
            const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(pair_dot(lo, hi, 0, x), ones),
                                                 _mm256_madd_epi16(pair_dot(lo, hi, 2, x), ones));
            const __m256i dot = _mm256_sub_epi32(sum, bcast32(x + 32));
            const __m256 scale = _mm256_mul_ps(wd, _mm256_castsi256_ps(bcast32(x + 36)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[c]);
        }
    }
}

KVG_TARGET void mv_q5_r16(const mm_tile_args & a) {
    switch (a.n_x) {
        case 1: r16_group_rows<1, STEP, half_rows<1>>(a); break;
        case 2: r16_group_rows<2, STEP, half_rows<2>>(a); break;
        case 3: r16_group_rows<3, STEP, half_rows<3>>(a); break;
        case 4: r16_group_rows<4, STEP, half_rows<4>>(a); break;
        case 5: r16_group_rows<5, STEP, half_rows<5>>(a); break;
        case 6: r16_group_rows<6, STEP, half_rows<6>>(a); break;
        case 7: r16_group_rows<7, STEP, half_rows<7>>(a); break;
        default: r16_group_rows<COLS, STEP, half_rows<COLS>>(a); break;
    }
}

// Products of any number of activation rows take the kernel, 8 at a time: prompts too, where it
// decodes a block of 8 rows once per 8 activation rows and spends ~20 vector operations per
// row and block against the plain 1 x 8 tiles' ~60 per 8 rows (Zen 3, 1 thread, under load,
// 896 x 4864 x 128: 25 -> 49-60 GFLOP/s; 4864 x 896 x 128: 23-31 -> 48-59).
constexpr int MV_MAX = 1 << 30;

} // namespace

void kvg::add_q5_0_r16_kernels_avx2(cpu_kernels & k) {
    mm_kernel & r = k.mm[MM_Q5_0_R16];
    r.mv = mv_q5_r16;
    r.pack_mv = pack_mv_q5_r16;
    r.mv_group_bytes = (MM_MV_GROUP / QK8_0) * R16_X_BLOCK;
    r.mv_rows = (int) R16_ROWS;
    r.mv_cols = COLS;
    r.mv_max = MV_MAX;
}

#else
void kvg::add_q5_0_r16_kernels_avx2(cpu_kernels &) {}
#endif
