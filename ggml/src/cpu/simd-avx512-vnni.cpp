// AVX-512 VNNI kernels: the AVX-512 table plus panel tiles for q8_0 and q4_0 weights, whose
// inner product is vpdpbusd (64 byte products per instruction). Compiled with per-function
// target attributes like simd-avx512.cpp; features.cpp only calls these after CPUID says
// AVX512_VNNI.
//
// A panel tile holds one weight row per register, its 16 lanes the 16 activation rows of a
// panel (simd.h). Per 32-value block it broadcasts 4 weight bytes at a time against the
// panel's 4 bytes of every row, so after 8 vpdpbusd each lane holds the exact integer dot
// of its row's block; the float work (convert, scale, add) is then one instruction each per
// 16 outputs and block instead of per output and pair of blocks. vpdpbusd multiplies
// unsigned by signed bytes: q4_0's nibbles are unsigned already (the -8 offset is the
// panel's -8 * sum correction), q8_0 weights are made unsigned by adding 128 (xor 0x80;
// corrected by -128 * sum).
//
// Each output is the sum over blocks, in block order, of float(dot) * (weight scale *
// activation scale), one fused multiply-add per block: the same for every panel tile shape.
#include "simd.h"
#include "types.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define KVG_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define KVG_INLINE KVG_TARGET inline __attribute__((always_inline))

namespace {

using namespace kvg;

constexpr size_t PANEL_QS = MM_PANEL_COLS * 32;                 // interleaved quants of a block
constexpr size_t PANEL_D = PANEL_QS;                            // f32 scales
constexpr size_t PANEL_C8 = PANEL_D + MM_PANEL_COLS * 4;        // -8 * sum
constexpr size_t PANEL_C128 = PANEL_C8 + MM_PANEL_COLS * 4;     // -128 * sum
static_assert(PANEL_C128 + MM_PANEL_COLS * 4 == MM_PANEL_BLOCK, "panel block layout");
static_assert(MM_PANEL_BLOCK % 64 == 0, "panel blocks stay 64-byte aligned");

void pack_panel(const void * const * rows, int n, void * panel, int64_t k) {
    char * o = (char *) panel;
    for (int64_t b = 0; b < k / QK8_0; ++b, o += MM_PANEL_BLOCK) {
        int32_t * qs = (int32_t *) o; // [g][c]: elements 4g..4g+3 of row c
        float * d = (float *) (o + PANEL_D);
        int32_t * c8 = (int32_t *) (o + PANEL_C8), * c128 = (int32_t *) (o + PANEL_C128);
        for (int c = 0; c < MM_PANEL_COLS; ++c) {
            if (c >= n) {
                for (int g = 0; g < 8; ++g) qs[g * MM_PANEL_COLS + c] = 0;
                d[c] = 0.0f;
                c8[c] = c128[c] = 0;
                continue;
            }
            const block_q8_0 * x = (const block_q8_0 *) rows[c] + b;
            int32_t sum = 0;
            for (int j = 0; j < QK8_0; ++j) sum += x->qs[j];
            for (int g = 0; g < 8; ++g) std::memcpy(&qs[g * MM_PANEL_COLS + c], x->qs + 4 * g, 4);
            d[c] = ggml_fp16_to_fp32(x->d);
            c8[c] = -8 * sum;
            c128[c] = -128 * sum;
        }
    }
}

// Exact integer dots of one weight block with the 16 rows of each of P panels (xv: each
// panel's 8 quant vectors of the block), into s.
template <bool Q4, int P>
KVG_INLINE void block_dots(const char * wb, const __m512i (*xv)[8], const __m512i * corr, __m512i * s) {
    for (int p = 0; p < P; ++p) s[p] = corr[p];
    if (Q4) {
        const uint8_t * q = ((const block_q4_0 *) wb)->qs;
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 4; ++h) {
            int32_t v;
            std::memcpy(&v, q + 4 * h, 4);
            // byte j holds element j (low nibble) and j + 16 (high): groups h and 4 + h
            const __m512i t = _mm512_set1_epi32(v);
            const __m512i lo = _mm512_and_si512(t, low4), hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), low4);
            for (int p = 0; p < P; ++p) s[p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s[p], lo, xv[p][h]), hi, xv[p][4 + h]);
        }
    } else {
        const int8_t * q = ((const block_q8_0 *) wb)->qs;
        const __m512i bias = _mm512_set1_epi8((char) 0x80);
        for (int g = 0; g < 8; ++g) {
            int32_t v;
            std::memcpy(&v, q + 4 * g, 4);
            const __m512i u = _mm512_xor_si512(_mm512_set1_epi32(v), bias);
            for (int p = 0; p < P; ++p) s[p] = _mm512_dpbusd_epi32(s[p], u, xv[p][g]);
        }
    }
}

// R weight rows x P panels (x_stride bytes apart); n_cols counts the rows of all P panels.
template <bool Q4, int R, int P>
KVG_INLINE void panel_tile(const mm_tile_args & a) {
    constexpr size_t WB = Q4 ? sizeof(block_q4_0) : sizeof(block_q8_0);
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    const int64_t nb = a.k / QK8_0;
    for (int64_t b = 0; b < nb; ++b) {
        __m512i xv[P][8], corr[P];
        __m512 xd[P];
        for (int p = 0; p < P; ++p) {
            const char * xp = a.x + p * a.x_stride + b * MM_PANEL_BLOCK;
            for (int g = 0; g < 8; ++g) xv[p][g] = _mm512_load_si512((const void *) (xp + 64 * g));
            xd[p] = _mm512_load_ps((const float *) (xp + PANEL_D));
            corr[p] = _mm512_load_si512((const void *) (xp + (Q4 ? PANEL_C8 : PANEL_C128)));
        }
        for (int r = 0; r < R; ++r) {
            const char * wb = a.w + r * a.w_stride + b * WB;
            __m512i s[P];
            block_dots<Q4, P>(wb, xv, corr, s);
            const __m512 wd = _mm512_set1_ps(_cvtsh_ss(*(const uint16_t *) wb));
            for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[p]), _mm512_mul_ps(wd, xd[p]), acc[r][p]);
        }
    }
    alignas(64) float t[R][P * MM_PANEL_COLS];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) _mm512_store_ps(t[r] + p * MM_PANEL_COLS, acc[r][p]);
    for (int c = 0; c < a.n_cols; ++c) {
        float * o = a.out + c * a.out_stride;
        for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + t[r][c] : t[r][c];
    }
}

template <int R> struct panel_q8_0 {
    static KVG_TARGET void run(const mm_tile_args & a) {
        if (a.n_cols > MM_PANEL_COLS) panel_tile<false, R, 2>(a);
        else panel_tile<false, R, 1>(a);
    }
};
template <int R> struct panel_q4_0 {
    static KVG_TARGET void run(const mm_tile_args & a) {
        if (a.n_cols > MM_PANEL_COLS) panel_tile<true, R, 2>(a);
        else panel_tile<true, R, 1>(a);
    }
};

template <template <int> class P, int R>
void fill_panel(mm_kernel & k) {
    k.panel[R] = &P<R>::run;
    if constexpr (R > 1) fill_panel<P, R - 1>(k);
    else k.panel[0] = nullptr;
}

constexpr int PANEL_ROWS = 8;
static_assert(PANEL_ROWS <= MM_MAX_ROWS, "panel rows fit the table");

cpu_kernels build() {
    cpu_kernels k = *kernels_avx512();
    k.name = "avx512vnni";
    fill_panel<panel_q8_0, PANEL_ROWS>(k.mm[MM_Q8_0]);
    fill_panel<panel_q4_0, PANEL_ROWS>(k.mm[MM_Q4_0]);
    k.mm[MM_Q8_0].panel_rows = k.mm[MM_Q4_0].panel_rows = PANEL_ROWS;
    k.mm[MM_Q8_0].panel_cols = k.mm[MM_Q4_0].panel_cols = 2 * MM_PANEL_COLS;
    k.pack_panel = pack_panel;
    return k;
}

} // namespace

const kvg::cpu_kernels * kvg::kernels_avx512_vnni() {
    static const cpu_kernels k = build();
    return &k;
}

#else
const kvg::cpu_kernels * kvg::kernels_avx512_vnni() { return nullptr; }
#endif
