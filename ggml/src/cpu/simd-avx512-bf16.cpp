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
// values (10 mantissa bits to 7); they keep the f32 tiles.
#include "simd.h"
#include "types.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVG_TARGET_EXTRA ",avx512bf16"
#include "simd-vnni-target.h"
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using kvg::avx512::store_panel;

static_assert(MM_PANEL_BF16_PAIR == 64, "one vector per pair of elements");

// y = x rounded to bf16 bit for bit as ggml_fp32_to_bf16 (integer nearest even: keeps the
// subnormals vcvtneps2bf16 would flush; NaN made quiet).
KVG_TARGET void fp32_to_bf16(const float * x, void * y, int64_t k) {
    uint16_t * o = (uint16_t *) y;
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(64);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int64_t i = 0; i < k; i += 16) {
        const __mmask16 m = k - i >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (k - i)) - 1);
        const __m512i u = _mm512_maskz_loadu_epi32(m, x + i);
        const __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_mask_storeu_epi16(o + i, m, _mm512_cvtepi32_epi16(r));
    }
}

// Panel [pair][c] from bf16 rows: rows[c] for c < n, zero rows after, a last odd element
// paired with zero.
void pack_panel_bf16(const void * const * rows, int n, void * panel, int64_t k) {
    uint32_t * o = (uint32_t *) panel;
    const int64_t full = k / 2, pairs = (k + 1) / 2;
    for (int c = 0; c < MM_PANEL_COLS; ++c) {
        const uint16_t * x = c < n ? (const uint16_t *) rows[c] : nullptr;
        for (int64_t i = 0; i < pairs; ++i) {
            uint32_t v = 0;
            if (x && i < full) std::memcpy(&v, x + 2 * i, 4);
            else if (x) v = x[2 * i];
            o[i * MM_PANEL_COLS + c] = v;
        }
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

constexpr int PANEL_ROWS = 8;
static_assert(PANEL_ROWS <= MM_MAX_ROWS, "panel rows fit the table");

cpu_kernels build() {
    cpu_kernels k = *kernels_avx512_vnni();
    k.name = "avx512bf16";
    mm_kernel & m = k.mm[MM_BF16];
    mm_fill_panel<panel_bf16, PANEL_ROWS>(m);
    m.panel_rows = PANEL_ROWS;
    m.panel_cols = 2 * MM_PANEL_COLS;
    // where panels beat the f32 tiles despite zero rows (Zen 4, K = N = 2048: 96 against 90
    // GFLOP/s at 7 rows, 83 against 87 at 6; 218 against 95 from 16)
    m.panel_min = 7;
    m.panel_bf16 = true;
    k.pack_panel_bf16 = pack_panel_bf16;
    k.fp32_to_bf16 = fp32_to_bf16;
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
