// AVX-512 BF16 kernels: the VNNI table plus panel tiles for bf16 weights whose inner
// product is vdpbf16ps (two bf16 multiply-adds per f32 lane, twice the f32 FMA rate).
// Activations are rounded to bf16 as ggml does for bf16 weights (its vec_dot_type is BF16,
// ggml_fp32_to_bf16's nearest even), so products of bf16 values are exact and only the f32
// sums round. Compiled with per-function target attributes; features.cpp only calls these
// after CPUID says AVX512_BF16.
//
// A panel tile holds one weight row per register, its 16 lanes the 16 activation rows of a
// BF16 panel (simd.h): per pair of elements it broadcasts the weight row's two bf16 values
// against the panel's pair of every row. Each output is the sum, in element-pair order, of
// its pairs' products, whatever the tile shape.
// f16 weights could take the same tiles after conversion to bf16, but that would round their
// values (10 mantissa bits to 7) unless asked (kvg_model_params.f16_as_bf16); they keep the F32 panels.
#include "simd.h"
#include "types.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVG_TARGET_EXTRA ",avx512bf16"
#include "simd-vnni-target.h"
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using namespace kvg::avx512;

static_assert(MM_PANEL_BF16_PAIR == 64, "one vector per pair of elements");

// BF16 panel [pair][c] from f32 rows: rows[c] for c < n, zero rows after, a last odd element
// paired with zero. 32 elements of 16 rows at a time: rounded, pairs of words joined into
// ints, transposed (one pass, instead of rounding rows and interleaving them one int at a time).
KVG_TARGET void pack_panel_bf16(const void * const * rows, int n, void * panel, int64_t k) {
    char * o = (char *) panel;
    // word t of the joined pair vector: word 2t of (lo, hi) rounded ints
    alignas(64) static const uint16_t even_words[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
                                                         32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
    const __m512i idx = _mm512_load_si512(even_words);
    for (int64_t i0 = 0; i0 < k; i0 += 32) {
        const int64_t m = k - i0 < 32 ? k - i0 : 32;
        const __mmask16 m0 = (__mmask16) (m >= 16 ? 0xFFFF : (1u << m) - 1);
        const __mmask16 m1 = (__mmask16) (m >= 32 ? 0xFFFF : m > 16 ? (1u << (m - 16)) - 1 : 0);
        __m512i v[16];
        for (int c = 0; c < MM_PANEL_COLS; ++c) {
            if (c >= n) {
                v[c] = _mm512_setzero_si512();
                continue;
            }
            const float * x = (const float *) rows[c] + i0;
            const __m512i lo = round_bf16(_mm512_maskz_loadu_epi32(m0, x)), hi = round_bf16(_mm512_maskz_loadu_epi32(m1, x + 16));
            v[c] = _mm512_permutex2var_epi16(lo, idx, hi);
        }
        transpose16(v);
        for (int j = 0; j < (m + 1) / 2; ++j) _mm512_storeu_si512((void *) (o + (i0 / 2 + j) * MM_PANEL_BF16_PAIR), v[j]);
    }
}

// acc[r][p] += pair i of weight row r (wp[r], two bf16 in one int) times pair i of panel p.
template <int R, int P>
KVG_INLINE void pair_step(const mm_tile_args & a, int64_t i, const int32_t (&wp)[R], __m512 (&acc)[R][P]) {
    __m512bh xv[P];
    for (int p = 0; p < P; ++p) {
        xv[p] = (__m512bh) _mm512_load_si512((const void *) (a.x + p * a.x_stride + i * MM_PANEL_BF16_PAIR));
    }
    for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh) _mm512_set1_epi32(wp[r]);
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], wv, xv[p]);
    }
}

// R weight rows x P panels (x_stride bytes apart); n_cols counts the rows of all P panels.
template <int R, int P>
KVG_INLINE void panel_tile(const mm_tile_args & a) {
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    const char * w[R];
    for (int r = 0; r < R; ++r) w[r] = a.w + r * a.w_stride;
    int32_t wp[R];
    const int64_t full = a.k / 2;
    for (int64_t i = 0; i < full; ++i) {
        for (int r = 0; r < R; ++r) std::memcpy(&wp[r], w[r] + 4 * i, 4);
        pair_step<R, P>(a, i, wp, acc);
    }
    if (a.k & 1) { // the last element, paired with zero (no read past the row)
        for (int r = 0; r < R; ++r) wp[r] = *(const uint16_t *) (w[r] + 4 * full);
        pair_step<R, P>(a, full, wp, acc);
    }
    store_panel<R, P>(a, acc);
}

template <int R> struct panel_bf16 {
    static KVG_TARGET void run(const mm_tile_args & a) {
        if (a.n_cols > MM_PANEL_COLS) panel_tile<R, 2>(a);
        else panel_tile<R, 1>(a);
    }
};

// ---- matrix-vector products ----------------------------------------------------------------
// One activation row is rounded to bf16 once (as the panels round it; ggml's vec_dot_type), then
// each weight row streams alone: one vdpbf16ps per 32 values, two chains. On Zen 4 (1 GiB of
// weights, 1 thread) this loop reads 25-27 GB/s where the f32 tiles (widened weights, f32
// activations, two rows and four chains each) read 21-22, and four chains here read 22.

// a.n_cols weight rows, one after the other, times the packed row; per row the chains over
// values [64j, 64j + 32) and [64j + 32, 64j + 64), then their sum
KVG_TARGET void mv_bf16(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) {
        const char * w = a.w + r * a.w_stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int64_t i = 0; i < 2 * a.k; i += 128) {
            acc0 = _mm512_dpbf16_ps(acc0, (__m512bh) _mm512_loadu_si512((const void *) (w + i)),
                                    (__m512bh) _mm512_loadu_si512((const void *) (a.x + i)));
            acc1 = _mm512_dpbf16_ps(acc1, (__m512bh) _mm512_loadu_si512((const void *) (w + i + 64)),
                                    (__m512bh) _mm512_loadu_si512((const void *) (a.x + i + 64)));
        }
        const float s = reduce1(_mm512_add_ps(acc0, acc1));
        a.out[r] = a.accumulate ? a.out[r] + s : s;
    }
}

constexpr int PANEL_ROWS = 8;
static_assert(PANEL_ROWS <= MM_MAX_ROWS, "panel rows fit the table");

cpu_kernels build() {
    cpu_kernels k = *kernels_avx512_vnni();
    k.name = "avx512bf16";
    // from 7 rows, where panels beat the f32 tiles despite zero rows (Zen 4, K = N = 2048: 96
    // against 90 GFLOP/s at 7 rows, 83 against 87 at 6; 218 against 95 from 16)
    mm_set_panels<panel_bf16, PANEL_ROWS>(k.mm[MM_BF16], 7, MM_PANEL_BF16);
    k.pack_panel_bf16 = pack_panel_bf16;
    k.mm[MM_BF16].mv = mv_bf16; // vdpbf16ps; the packer and mv_rows: the AVX-512 table's
    return k;
}

} // namespace

const kvg::cpu_kernels * kvg::kernels_avx512_bf16() {
    static const cpu_kernels k = build();
    return &k;
}

#else
const kvg::cpu_kernels * kvg::kernels_avx512_bf16() { return nullptr; }
#endif
