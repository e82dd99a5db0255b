// AVX-512 (F, BW, VL) kernels. Every function that uses the instructions carries the
// target attribute itself (no file-wide flags), and the table is built by plain code, so
// the library still runs on CPUs without AVX-512: traits.cpp only calls these after
// checking CPUID.
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders (inside intrinsics) as
// uninitialized when they are inlined into target-attributed functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define KVG_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KVG_INLINE KVG_TARGET inline __attribute__((always_inline))
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using namespace kvg::avx512;

// Matrix-vector tiles (one activation row) stream their weight rows from memory, and rows
// of quantized or f16 weights are too short for the hardware prefetchers to train on.
// One-row tiles (mv_rows = 1: consecutive rows form one sequential stream) of quantized
// weights prefetch PF_AHEAD bytes ahead; taller tiles prefetch the next tile's rows at the
// offset they read. Float weights times one row (mv_float) stream one row at a time,
// prefetched PF_AHEAD into L2, or for long rows two-row tiles that prefetch the next two rows
// into L2; an L1 prefetch a page ahead halved f16's rate on Zen 4, and f32 generation of a
// 110M-shaped model ran 33-36 t/s on 1 thread with four-row tiles prefetching into L1, 47-48
// with two-row tiles into L2 (61-65 -> 69-71 on 2 threads).
constexpr int PF_AHEAD = 4096;

// Horizontal sums of 16 vectors at once: lane j = sum of the lanes of v[j]. Lanes are
// paired (i, i+8), (i, i+4), (i, i+2), (i, i+1) for every vector, so a sum does not
// depend on which other vectors share the call (zero padding included).
KVG_INLINE __m512 reduce16(const __m512 * v) {
    __m512 s[8], t[4], u[2];
    for (int p = 0; p < 8; ++p) {
        s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44), _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
    }
    for (int q = 0; q < 4; ++q) {
        t[q] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * q], s[2 * q + 1], 0x88), _mm512_shuffle_f32x4(s[2 * q], s[2 * q + 1], 0xDD));
    }
    for (int w = 0; w < 2; ++w) {
        u[w] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * w], t[2 * w + 1], 0x44), _mm512_shuffle_ps(t[2 * w], t[2 * w + 1], 0xEE));
    }
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
    // z[4l + m] holds v[4m + l]
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), z);
}

// Sums of 4 vectors: out[j] = sum of the lanes of v[j], paired as in reduce16.
KVG_INLINE __m128 reduce4(const __m512 * v) {
    const __m512 s0 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xEE));
    const __m512 s1 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xEE));
    // 128-bit lane j holds v[j]'s four sums of lanes (i, i+8, i+4, i+12)
    const __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(s0, s1, 0x88), _mm512_shuffle_f32x4(s0, s1, 0xDD));
    const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(t, t, 0x44), _mm512_shuffle_ps(t, t, 0xEE));
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(u, u, 0x88), _mm512_shuffle_ps(u, u, 0xDD));
    // element 0 of 128-bit lane j is v[j]'s sum
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), z));
}

// Reduces the N = R*C accumulators of a tile (index r*C + c) and writes them out. Groups of
// 16, then of 4, then single vectors: every sum is paired the same way, so the bits of an
// output do not depend on the tile shape.
template <int R, int C>
KVG_INLINE void finish_tile(const mm_tile_args & a, __m512 * acc) {
    constexpr int N = R * C, N16 = N / 16 * 16, N4 = N16 + (N - N16) / 4 * 4;
    alignas(16) float sums[N + 3];
    for (int g = 0; g < N16; g += 16) _mm512_storeu_ps(sums + g, reduce16(acc + g));
    for (int g = N16; g < N4; g += 4) _mm_storeu_ps(sums + g, reduce4(acc + g));
    for (int g = N4; g < N; ++g) sums[g] = reduce1(acc[g]);
    for (int c = 0; c < C; ++c) {
        float * o = a.out + c * a.out_stride;
        for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + sums[r * C + c] : sums[r * C + c];
    }
}

// ---- float weights · f32 activations -----------------------------------------------------------
struct ld_f32 {
    static constexpr int ES = 4;
    static KVG_INLINE __m512 load(const char * p, int64_t i) { return _mm512_loadu_ps((const float *) p + i); }
    static KVG_INLINE __m512 load(const char * p, int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float *) p + i); }
};
struct ld_f16 {
    static constexpr int ES = 2;
    static KVG_INLINE __m512 load(const char * p, int64_t i) {
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((const uint16_t *) p + i)));
    }
    static KVG_INLINE __m512 load(const char * p, int64_t i, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *) p + i));
    }
};
struct ld_bf16 {
    static constexpr int ES = 2;
    static KVG_INLINE __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static KVG_INLINE __m512 load(const char * p, int64_t i) { return widen(_mm256_loadu_si256((const __m256i *) ((const uint16_t *) p + i))); }
    static KVG_INLINE __m512 load(const char * p, int64_t i, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, (const uint16_t *) p + i)); }
};

// Dots of R weight rows with x (a.x), rows summed the same way whatever R: two FMA chains
// over each 32 values, joined, then one 16-value step and the masked tail on that sum. Two
// chains, not four: one f32 row from DRAM (Zen 4, 1 thread, K = 2048) streams at 25-28 GB/s
// with two and 22-24 with four (a plain read: 26-27).
// PF_TILE: prefetch a later tile's R rows (the next one, or further for short rows) at the
// offset being read, into L2, one line at a time. Zen 4, f16 K = 5632 / K = 2048 one thread:
// 16 / 25 GB/s with one row and no prefetch, 26 / 28 with 2 rows and this (streaming read:
// 28 / 31); 4 rows read as four page streams and reach 19 / 23; an L1 (T0) prefetch halved
// the rate. Short rows: whole tiles ahead, at least 8 KiB (110M-shaped f16 model, K = 768,
// 3 KiB tiles, tg 1 thread: 83-86 -> 103-108 t/s; 16 KiB: 95; K = 2048's 8 KiB tiles unchanged).
// PF_STREAM: rows read one after the other as one sequential stream, prefetched PF_AHEAD
// bytes ahead into L2 (past a row's end: into the next rows).
enum dot_prefetch { PF_NONE, PF_TILE, PF_STREAM };
constexpr size_t PF_MIN_AHEAD = 8192;
template <typename L, int R, dot_prefetch PF>
KVG_INLINE void dot_rows(const mm_tile_args & a) {
    __m512 acc[R][2], s[R];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const float * x = (const float *) a.x;
    const size_t tile_bytes = R * a.w_stride; // 0 for a lone row (vec_dot)
    const size_t pf_ahead = PF == PF_STREAM                  ? PF_AHEAD
                          : PF == PF_TILE && tile_bytes > 0 ? tile_bytes * std::max<size_t>(1, PF_MIN_AHEAD / tile_bytes)
                                                            : 0;
    int64_t i = 0;
    for (; i + 32 <= a.k; i += 32) {
        for (int u = 0; u < 2; ++u) {
            const __m512 xv = _mm512_loadu_ps(x + i + 16 * u);
            for (int r = 0; r < R; ++r) {
                const char * w = a.w + r * a.w_stride;
                if (PF != PF_NONE && (16 * u * L::ES) % 64 == 0) _mm_prefetch(w + pf_ahead + (i + 16 * u) * L::ES, _MM_HINT_T1);
                acc[r][u] = _mm512_fmadd_ps(L::load(w, i + 16 * u), xv, acc[r][u]);
            }
        }
    }
    for (int r = 0; r < R; ++r) s[r] = _mm512_add_ps(acc[r][0], acc[r][1]);
    if (i + 16 <= a.k) {
        const __m512 xv = _mm512_loadu_ps(x + i);
        for (int r = 0; r < R; ++r) s[r] = _mm512_fmadd_ps(L::load(a.w + r * a.w_stride, i), xv, s[r]);
        i += 16;
    }
    if (i < a.k) {
        const __mmask16 m = (__mmask16) ((1u << (a.k - i)) - 1);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        for (int r = 0; r < R; ++r) s[r] = _mm512_fmadd_ps(L::load(a.w + r * a.w_stride, i, m), xv, s[r]);
    }
    for (int r = 0; r < R; ++r) a.out[r] = a.accumulate ? a.out[r] + reduce1(s[r]) : reduce1(s[r]);
}

template <typename L, int R, int C>
KVG_INLINE void tile_float(const mm_tile_args & a) {
    if constexpr (R * C == 1) {
        dot_rows<L, 1, PF_NONE>(a);
        return;
    }
    __m512 acc[R * C];
    for (int j = 0; j < R * C; ++j) acc[j] = _mm512_setzero_ps();
    const char * w[R];
    const float * x[C];
    for (int r = 0; r < R; ++r) w[r] = a.w + r * a.w_stride;
    for (int c = 0; c < C; ++c) x[c] = (const float *) (a.x + c * a.x_stride);
    int64_t i = 0;
    for (; i + 16 <= a.k; i += 16) {
        __m512 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(x[c] + i);
        for (int r = 0; r < R; ++r) {
            if (C == 1 && R > 1) _mm_prefetch(w[r] + R * a.w_stride + i * L::ES, _MM_HINT_T0);
            const __m512 wv = L::load(w[r], i);
            for (int c = 0; c < C; ++c) acc[r * C + c] = _mm512_fmadd_ps(wv, xv[c], acc[r * C + c]);
        }
    }
    if (i < a.k) {
        const __mmask16 m = (__mmask16) ((1u << (a.k - i)) - 1);
        __m512 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(m, x[c] + i);
        for (int r = 0; r < R; ++r) {
            const __m512 wv = L::load(w[r], i, m);
            for (int c = 0; c < C; ++c) acc[r * C + c] = _mm512_fmadd_ps(wv, xv[c], acc[r * C + c]);
        }
    }
    finish_tile<R, C>(a, acc);
}

// Matrix-vector tile of float weights (mm_kernel::mv_float): a.n_cols rows, each with the
// bits of tile_float<L, 1, 1>. Rows stream one after the other while the f32 activation row
// fills at most half of L1 (f32 weights, Zen 4, 1 thread: 25-29 GB/s at K = 768-4096 against
// 19-24 for two rows with the prefetch), prefetched PF_AHEAD into L2 (110M-shaped f32 model,
// tg, 6 alternated pairs per thread count: 65-68% -> 68-85% of the streaming read on 1
// thread, 53-75% -> 73-86% on 2; 2 or 8 KiB ahead: the same, an L1 prefetch: no gain); longer
// activation rows are evicted by a lone stream (K = 5632: 20.5 GB/s), so pairs of rows
// (MV_FLOAT_ROWS) and the prefetch (23.5).
constexpr int MV_FLOAT_ROWS = 2;
constexpr int64_t MV_ONE_ROW_MAX_K = 4096;
template <typename L>
KVG_TARGET void mv_float(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols;) {
        mm_tile_args rows = a;
        rows.w = a.w + r * a.w_stride;
        rows.out = a.out + r;
        if (a.k > MV_ONE_ROW_MAX_K && r + MV_FLOAT_ROWS <= a.n_cols) {
            dot_rows<L, MV_FLOAT_ROWS, PF_TILE>(rows);
            r += MV_FLOAT_ROWS;
        } else {
            dot_rows<L, 1, PF_STREAM>(rows);
            ++r;
        }
    }
}

// Rows per call of the float matrix-vector kernels (mv_float, and mv for f16/bf16): a whole
// block of the product (16 rows for one activation row), so its loop's costs come once per
// block. 110M-shaped f16 model, tg, 1 thread: ggml_compute_forward_mul_mat's own samples
// went from 3.7-4.4% to 1.7% of the kernel's with 16 rows instead of 2 (rows of 1.5-4 KiB).
constexpr int MV_CALL_ROWS = 16;

// Matrix-vector products of f16 and bf16 weights (mm_kernel::mv): the activation row rounded
// once to the weights' type (ggml's vec_dot_type, nearest even), then each weight row streams
// alone, both operands widened, four chains over each 64 values joined (0 + 1) + (2 + 3). On
// Zen 4 (1 GiB of f16 weights, 1 thread) this reads 26-27 GB/s where mv_float (f32
// activations) reads 19-23: the activation row is half the bytes, so it stays in L1 beside
// the stream (K = 5632: 27 against 19). Weights in cache pay for the second widening: 33
// GFLOP/s against mv_float's 50.
KVG_TARGET void pack_mv_f16(const void * f32_row, void * out, int64_t k) {
    const float * x = (const float *) f32_row;
    for (int64_t i = 0; i < k; i += 16) {
        const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *) ((uint16_t *) out + i), h);
    }
}

template <typename L>
KVG_TARGET void mv_same(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) {
        const char * w = a.w + r * a.w_stride;
        __m512 acc[4];
        for (int u = 0; u < 4; ++u) acc[u] = _mm512_setzero_ps();
        for (int64_t i = 0; i < a.k; i += 64) {
            for (int u = 0; u < 4; ++u) acc[u] = _mm512_fmadd_ps(L::load(w, i + 16 * u), L::load(a.x, i + 16 * u), acc[u]);
        }
        const float s = reduce1(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
        a.out[r] = a.accumulate ? a.out[r] + s : s;
    }
}

template <int R, int C> struct tile_f32 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_f32, R, C>(a); }
};
template <int R, int C> struct tile_f16 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_f16, R, C>(a); }
};
template <int R, int C> struct tile_bf16 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_float<ld_bf16, R, C>(a); }
};

// ---- f32 and f16 weights · F32 activation panels (simd.h) ---------------------------------------
// The dot tiles above read their activation rows again for every few weight rows (from L2 once
// a block's rows outgrow L1) and end each K chunk in one reduction per output. A panel tile is
// an outer product instead: one register per weight row and panel, its 16 lanes the panel's 16
// activation rows; per element it broadcasts each weight row's value against the panel's
// vector of that element. Each output is one chain in element order, whatever the tile shape.
// Zen 4, 1 thread, M = 128, GFLOP/s of a 118 FMA peak (kvg-bench-matmul): K = 768 82 -> 105-107,
// K = 2048 92 -> 109-111, K = 64 45 -> 80; from 12 rows (panel_min) they match or beat the
// tiles (M = 14, K = 2048: 55-63 -> 83-88; M = 10: 68-92 against 66-70).
KVG_TARGET void pack_panel_f32(const void * const * rows, int n, void * panel, int64_t k) {
    char * o = (char *) panel;
    for (int64_t i0 = 0; i0 < k; i0 += 16) {
        const int64_t m = k - i0 < 16 ? k - i0 : 16;
        const __mmask16 mask = (__mmask16) (m == 16 ? 0xFFFF : (1u << m) - 1);
        __m512i v[16];
        for (int c = 0; c < MM_PANEL_COLS; ++c) {
            v[c] = c < n ? _mm512_maskz_loadu_epi32(mask, (const float *) rows[c] + i0) : _mm512_setzero_si512();
        }
        transpose16(v);
        for (int j = 0; j < m; ++j) _mm512_storeu_si512((void *) (o + (i0 + j) * MM_PANEL_F32_ELEM), v[j]);
    }
}

// acc[r][p] += weight w[r] times element i of panel p, for elements [i, i + n).
template <int R, int P>
KVG_INLINE void panel_steps(const mm_tile_args & a, const float * const (&w)[R], int64_t i, int64_t n, __m512 (&acc)[R][P]) {
    for (int64_t e = i; e < i + n; ++e) {
        __m512 xv[P];
        for (int p = 0; p < P; ++p) xv[p] = _mm512_load_ps((const float *) (a.x + p * a.x_stride + e * MM_PANEL_F32_ELEM));
        for (int r = 0; r < R; ++r) {
            const __m512 wv = _mm512_set1_ps(w[r][e - i]);
            for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wv, xv[p], acc[r][p]);
        }
    }
}

// R weight rows x P panels (x_stride bytes apart); n_cols counts the rows of all P panels.
// f32 weights are broadcast from the rows; f16 ones are widened 64 at a time into a small
// buffer first (per tile: 4R conversions per 64 x R x P FMAs). Zen 4, 1 thread, M = 128,
// K = 768: 91-100 GFLOP/s where the f16 tiles ran 82-87 (widening 16 at a time: 93-95);
// K = 2048 a tie (95-105); 110M-shaped f16 model, pp128: 510-546 -> 494-577 t/s.
template <typename L, int R, int P>
KVG_INLINE void panel_tile_float(const mm_tile_args & a) {
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    if constexpr (L::ES == 4) {
        const float * w[R];
        for (int r = 0; r < R; ++r) w[r] = (const float *) (a.w + r * a.w_stride);
        panel_steps<R, P>(a, w, 0, a.k, acc);
    } else {
        alignas(64) float buf[R][64];
        const float * w[R];
        for (int r = 0; r < R; ++r) w[r] = buf[r];
        int64_t i = 0;
        for (; i + 64 <= a.k; i += 64) {
            for (int r = 0; r < R; ++r) {
                for (int u = 0; u < 4; ++u) _mm512_store_ps(buf[r] + 16 * u, L::load(a.w + r * a.w_stride, i + 16 * u));
            }
            panel_steps<R, P>(a, w, i, 64, acc);
        }
        for (; i + 16 <= a.k; i += 16) {
            for (int r = 0; r < R; ++r) _mm512_store_ps(buf[r], L::load(a.w + r * a.w_stride, i));
            panel_steps<R, P>(a, w, i, 16, acc);
        }
        if (i < a.k) {
            const __mmask16 m = (__mmask16) ((1u << (a.k - i)) - 1);
            for (int r = 0; r < R; ++r) _mm512_store_ps(buf[r], L::load(a.w + r * a.w_stride, i, m));
            panel_steps<R, P>(a, w, i, a.k - i, acc);
        }
    }
    store_panel<R, P>(a, acc);
}

template <typename L> struct panel_float {
    template <int R> struct tile {
        static KVG_TARGET void run(const mm_tile_args & a) {
            if (a.n_cols > MM_PANEL_COLS) panel_tile_float<L, R, 2>(a);
            else panel_tile_float<L, R, 1>(a);
        }
    };
};
constexpr int PANEL_ROWS = 8;

// ---- many dots of short f32 rows (simd.h's dots_f32) ---------------------------------------------
// Lane p: dot(row p, x) for rows p < np at w + p * ws, each summed like a tile_float chain
// and reduced by reduce16, so the bits are those of tile_f32<R, C> for R * C > 1.
template <bool FULL>
KVG_INLINE __m512 dots16(const char * w, size_t ws, const float * x, int64_t k, int np) {
    // four rows at a time share each x load; unrolled so acc stays in registers
    const int64_t k16 = k / 16 * 16;
    const __mmask16 m = (__mmask16) ((1u << (k - k16)) - 1);
    __m512 acc[16];
#pragma GCC unroll 4
    for (int p0 = 0; p0 < 16; p0 += 4) {
        for (int q = 0; q < 4; ++q) acc[p0 + q] = _mm512_setzero_ps();
        if (!FULL && p0 >= np) continue;
        const float * r0 = (const float *) (w + p0 * ws);
        const int nq = FULL ? 4 : std::min(4, np - p0);
        for (int64_t i = 0; i < k16; i += 16) {
            const __m512 xv = _mm512_loadu_ps(x + i);
            for (int q = 0; q < 4; ++q) {
                if (FULL || q < nq) acc[p0 + q] = _mm512_fmadd_ps(_mm512_loadu_ps((const float *) ((const char *) r0 + q * ws) + i), xv, acc[p0 + q]);
            }
        }
        if (k16 < k) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + k16);
            for (int q = 0; q < 4; ++q) {
                if (FULL || q < nq) acc[p0 + q] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, (const float *) ((const char *) r0 + q * ws) + k16), xv, acc[p0 + q]);
            }
        }
    }
    return reduce16(acc);
}

// dots16 for k <= 8: rows p and p + 8 share vector p, so the 8 products need half the
// reduction. Products are fma(row, x, +0) and pairs (i, i+4), (i, i+2), (i, i+1) as in
// tile_float and reduce16 (their (i, i+8) step only adds +0 there): same bits.
template <bool FULL>
KVG_INLINE __m512 dots16_short(const char * w, size_t ws, const float * x, int64_t k, int np) {
    const __mmask8 m = (__mmask8) ((1u << k) - 1);
    const __m256 xh = _mm256_maskz_loadu_ps(m, x);
    const __m512 xv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(xh)), _mm256_castps_pd(xh), 1));
    const __m512 zero = _mm512_setzero_ps();
    __m512 pr[8];
    for (int p = 0; p < 8; ++p) {
        const __m256 lo = FULL || p < np ? _mm256_maskz_loadu_ps(m, (const float *) (w + p * ws)) : _mm256_setzero_ps();
        const __m256 hi = FULL || p + 8 < np ? _mm256_maskz_loadu_ps(m, (const float *) (w + (p + 8) * ws)) : _mm256_setzero_ps();
        const __m512 kv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
        pr[p] = _mm512_fmadd_ps(kv, xv, zero);
    }
    __m512 a[4], b[2];
    for (int q = 0; q < 4; ++q) { // 128-bit lanes: row 2q, row 2q + 8, row 2q + 1, row 2q + 9
        a[q] = _mm512_add_ps(_mm512_shuffle_f32x4(pr[2 * q], pr[2 * q + 1], 0x88), _mm512_shuffle_f32x4(pr[2 * q], pr[2 * q + 1], 0xDD));
    }
    for (int q = 0; q < 2; ++q) {
        b[q] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * q], a[2 * q + 1], 0x44), _mm512_shuffle_ps(a[2 * q], a[2 * q + 1], 0xEE));
    }
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(b[0], b[1], 0x88), _mm512_shuffle_ps(b[0], b[1], 0xDD));
    // z lanes 0-3: rows 0, 2, 4, 6; 4-7: rows 8 .. 14; 8-11: rows 1 .. 7; 12-15: rows 9 .. 15
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0), z);
}

template <bool FULL>
KVG_INLINE __m512 dots16_any(const char * w, size_t ws, const float * x, int64_t k, int np) {
    return k <= 8 ? dots16_short<FULL>(w, ws, x, k, np) : dots16<FULL>(w, ws, x, k, np);
}

KVG_TARGET void dots_f32(int C, int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k, float * out,
                         int64_t os) {
    for (int c = 0; c < C; ++c) {
        for (int64_t j = 0; j < n; j += 16) {
            const int np = (int) std::min<int64_t>(16, n - j);
            float * o = out + c * os + j;
            if (np == 16) _mm512_storeu_ps(o, dots16_any<true>(rows + j * rs, rs, x + c * xs, k, 16));
            else _mm512_mask_storeu_ps(o, (__mmask16) ((1u << np) - 1), dots16_any<false>(rows + j * rs, rs, x + c * xs, k, np));
        }
    }
}

// ---- quantized weights · q8_0 activations, two 32-blocks per vector ----------------------------

template <bool TWO>
KVG_INLINE __m512i load_q8(const block_q8_0 * b) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *) b[0].qs);
    if (!TWO) return _mm512_zextsi256_si512(lo);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *) b[1].qs), 1);
}

// q4_0 pair as 64 bytes in element order: [lo nibbles b0, hi nibbles b0, lo b1, hi b1].
template <bool TWO>
KVG_INLINE __m512i load_q4(const block_q4_0 * b) {
    const __m128i b0 = _mm_loadu_si128((const __m128i *) b[0].qs);
    const __m256i y = TWO ? _mm256_inserti128_si256(_mm256_castsi128_si256(b0), _mm_loadu_si128((const __m128i *) b[1].qs), 1)
                          : _mm256_zextsi128_si256(b0);
    // each 128-bit half twice, the second copy shifted down a nibble; the mask keeps one nibble per byte
    const __m512i t = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(y));
    return _mm512_and_si512(_mm512_srlv_epi64(t, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0F));
}

// One step (a pair of blocks, or the lone last one) of a quantized tile. W_IQ4: iq4_nl, q4_0's
// layout with table values for the nibbles, multiplied as signed bytes like q8_0.
template <wquant W, bool TWO, int R, int C>
KVG_INLINE void quant_step(const mm_tile_args & a, int64_t b, __m512 * acc) {
    constexpr bool Q4 = W == W_Q4;
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i xq[C], x8[C];
    __m512 xd[C];
    for (int c = 0; c < C; ++c) {
        const block_q8_0 * xb = (const block_q8_0 *) (a.x + c * a.x_stride) + b;
        xq[c] = load_q8<TWO>(xb);
        xd[c] = scale_pair(xb[0].d, TWO ? xb[1].d : 0);
        // q4: dot(q - 8, x) = dot(q, x) - 8 * sum(x); the 8 * x pair sums are shared by all rows
        if (Q4) x8[c] = _mm512_maddubs_epi16(_mm512_set1_epi8(8), xq[c]);
    }
    for (int r = 0; r < R; ++r) {
        __m512i wq;
        __m512 wd;
        __mmask64 neg = 0;
        if (C == 1) _mm_prefetch(a.w + (R == 1 ? PF_AHEAD : (r + R) * a.w_stride) + b * wblock_bytes(W), _MM_HINT_T0);
        if (W == W_Q8) {
            const block_q8_0 * wb = (const block_q8_0 *) (a.w + r * a.w_stride) + b;
            wq = load_q8<TWO>(wb);
            wd = scale_pair(wb[0].d, TWO ? wb[1].d : 0);
        } else {
            const block_q4_0 * wb = (const block_q4_0 *) (a.w + r * a.w_stride) + b;
            wq = load_q4<TWO>(wb);
            if (W == W_IQ4) wq = _mm512_shuffle_epi8(iq4nl_table(), wq);
            wd = scale_pair(wb[0].d, TWO ? wb[1].d : 0);
        }
        if (!Q4) { // signed weights: |w| * (x with w's sign) = w * x, in maddubs' u8 x s8 form
            neg = _mm512_movepi8_mask(wq);
            wq = _mm512_abs_epi8(wq);
        }
        for (int c = 0; c < C; ++c) {
            __m512i p16;
            if (Q4) p16 = _mm512_sub_epi16(_mm512_maddubs_epi16(wq, xq[c]), x8[c]);
            else p16 = _mm512_maddubs_epi16(wq, _mm512_mask_sub_epi8(xq[c], neg, _mm512_setzero_si512(), xq[c]));
            const __m512 p = _mm512_cvtepi32_ps(_mm512_madd_epi16(p16, ones));
            acc[r * C + c] = _mm512_fmadd_ps(p, _mm512_mul_ps(wd, xd[c]), acc[r * C + c]);
        }
    }
}

// q4_0 (or iq4_nl) x q8_0, four blocks per step, block k in 128-bit lane k: the low nibbles
// (elements 0..15 of each block) in one vector, the high ones (16..31) in another, the
// activations split the same way. iq4_nl's signed values: |w| times x with w's sign, the low
// and high halves widened to int32 apart (their pair sums, up to 2 * 127 * 127 each, would
// overflow int16 together); lane m of block k sums elements 4m..4m+3 and 16+4m..16+4m+3.
template <wquant W, int R, int C>
KVG_INLINE void q4_step4(const mm_tile_args & a, int64_t b, __m512 * acc) {
    const __m512i ones = _mm512_set1_epi16(1), low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    __m512i xlo[C], xhi[C], x8[C];
    __m512 xd[C];
    for (int c = 0; c < C; ++c) {
        const block_q8_0 * xb = (const block_q8_0 *) (a.x + c * a.x_stride) + b;
        xlo[c] = gather_words(xb, 64, Q8X4_LO);
        xhi[c] = gather_words((const char *) xb + 8, 64, Q8X4_HI);
        // dot(q - 8, x) = dot(q, x) - 8 * sum(x), the second term shared by all rows
        if (W == W_Q4) x8[c] = _mm512_add_epi16(_mm512_maddubs_epi16(eight, xlo[c]), _mm512_maddubs_epi16(eight, xhi[c]));
        xd[c] = _mm512_cvtph_ps(_mm512_castsi512_si256(gather_words(xb, 64, Q8X4_D)));
    }
    for (int r = 0; r < R; ++r) {
        const block_q4_0 * wb = (const block_q4_0 *) (a.w + r * a.w_stride) + b;
        if (C == 1) _mm_prefetch((const char *) wb + (R == 1 ? PF_AHEAD : R * a.w_stride), _MM_HINT_T0);
        if (C == 1) _mm_prefetch((const char *) wb + 64 + (R == 1 ? PF_AHEAD : R * a.w_stride), _MM_HINT_T0);
        const __m512i q = gather_words(wb, 8, Q4X4_QS);
        const __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        const __m512 wd = gather_scales(wb, Q4X4_D);
        if (W == W_IQ4) {
            const __m512i vlo = _mm512_shuffle_epi8(iq4nl_table(), lo), vhi = _mm512_shuffle_epi8(iq4nl_table(), hi);
            const __mmask64 nlo = _mm512_movepi8_mask(vlo), nhi = _mm512_movepi8_mask(vhi);
            const __m512i alo = _mm512_abs_epi8(vlo), ahi = _mm512_abs_epi8(vhi);
            for (int c = 0; c < C; ++c) {
                const __m512i plo = _mm512_maddubs_epi16(alo, _mm512_mask_sub_epi8(xlo[c], nlo, _mm512_setzero_si512(), xlo[c]));
                const __m512i phi = _mm512_maddubs_epi16(ahi, _mm512_mask_sub_epi8(xhi[c], nhi, _mm512_setzero_si512(), xhi[c]));
                const __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_madd_epi16(plo, ones), _mm512_madd_epi16(phi, ones)));
                acc[r * C + c] = _mm512_fmadd_ps(p, _mm512_mul_ps(wd, xd[c]), acc[r * C + c]);
            }
            continue;
        }
        for (int c = 0; c < C; ++c) {
            const __m512i p16 = _mm512_sub_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(lo, xlo[c]), _mm512_maddubs_epi16(hi, xhi[c])), x8[c]);
            const __m512 p = _mm512_cvtepi32_ps(_mm512_madd_epi16(p16, ones));
            acc[r * C + c] = _mm512_fmadd_ps(p, _mm512_mul_ps(wd, xd[c]), acc[r * C + c]);
        }
    }
}

template <wquant W, int R, int C>
KVG_INLINE void tile_quant(const mm_tile_args & a) {
    __m512 acc[R * C];
    for (int j = 0; j < R * C; ++j) acc[j] = _mm512_setzero_ps();
    const int64_t nb = a.k / QK8_0;
    int64_t b = 0;
    if (W != W_Q8) {
        for (; b + 4 <= nb; b += 4) q4_step4<W, R, C>(a, b, acc);
    }
    for (; b + 2 <= nb; b += 2) quant_step<W, true, R, C>(a, b, acc);
    if (b < nb) quant_step<W, false, R, C>(a, b, acc);
    finish_tile<R, C>(a, acc);
}

template <int R, int C> struct tile_q8_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_quant<W_Q8, R, C>(a); }
};
template <int R, int C> struct tile_q4_0 {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_quant<W_Q4, R, C>(a); }
};
template <int R, int C> struct tile_iq4_nl {
    static KVG_TARGET void run(const mm_tile_args & a) { tile_quant<W_IQ4, R, C>(a); }
};

// ---- activations, attention helpers ----------------------------------------------------------
// Rounds half away from zero like the reference quantizer's lround (r - trunc(r) is exact).
KVG_INLINE __m512i round_away(__m512 r) {
    const __m512 t = _mm512_roundscale_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(r, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __mmask16 neg = _mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 away = _mm512_mask_sub_ps(_mm512_add_ps(t, one), neg, t, one); // t +- 1 with r's sign
    return _mm512_cvttps_epi32(_mm512_mask_blend_ps(up, t, away));
}

KVG_TARGET void quantize_q8_0(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        const __m512 v0 = _mm512_loadu_ps(x + b * QK8_0), v1 = _mm512_loadu_ps(x + b * QK8_0 + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = (ggml_fp16_t) _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m512 s = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *) y[b].qs, _mm512_cvtsepi32_epi8(round_away(_mm512_mul_ps(v0, s))));
        _mm_storeu_si128((__m128i *) (y[b].qs + 16), _mm512_cvtsepi32_epi8(round_away(_mm512_mul_ps(v1, s))));
    }
}

// One V row (position j) into the C accumulators of one chain.
template <typename L, int C>
KVG_INLINE void accum_row(__m512 (&a)[C], const float * p, int64_t ps, int64_t j, const char * rows, size_t rs, int64_t d,
                          __mmask16 m) {
    const __m512 v = L::load(rows + j * rs, d, m);
    for (int c = 0; c < C; ++c) a[c] = _mm512_fmadd_ps(_mm512_set1_ps(p[c * ps + j]), v, a[c]);
}

// Accumulators stay in registers over a run of V rows, 16 columns at a time, in four chains
// (positions j mod 4) joined as (0 + 1) + (2 + 3) at the end: one chain per query waited on
// the FMA latency at every row (one query: 4.8% of a tiny model's step). The chains follow
// positions, so a query's sums do not depend on C.
template <typename L, int C>
KVG_INLINE void accum_t(int64_t n, const float * p, int64_t ps, const uint8_t * active, const char * rows, size_t rs, int64_t dv,
                        float * acc, int64_t as) {
    for (int64_t d = 0; d < dv; d += 16) {
        const __mmask16 m = dv - d >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (dv - d)) - 1);
        // four named chains (an indexed array of them was kept on the stack)
        __m512 a0[C], a1[C], a2[C], a3[C];
        for (int c = 0; c < C; ++c) {
            a0[c] = _mm512_maskz_loadu_ps(m, acc + c * as + d);
            a1[c] = a2[c] = a3[c] = _mm512_setzero_ps();
        }
        int64_t j = 0;
        for (; j + 4 <= n; j += 4) {
            if (active[j]) accum_row<L, C>(a0, p, ps, j, rows, rs, d, m);
            if (active[j + 1]) accum_row<L, C>(a1, p, ps, j + 1, rows, rs, d, m);
            if (active[j + 2]) accum_row<L, C>(a2, p, ps, j + 2, rows, rs, d, m);
            if (active[j + 3]) accum_row<L, C>(a3, p, ps, j + 3, rows, rs, d, m);
        }
        if (j < n && active[j]) accum_row<L, C>(a0, p, ps, j, rows, rs, d, m);
        if (j + 1 < n && active[j + 1]) accum_row<L, C>(a1, p, ps, j + 1, rows, rs, d, m);
        if (j + 2 < n && active[j + 2]) accum_row<L, C>(a2, p, ps, j + 2, rows, rs, d, m);
        for (int c = 0; c < C; ++c) {
            const __m512 sum = _mm512_add_ps(_mm512_add_ps(a0[c], a1[c]), _mm512_add_ps(a2[c], a3[c]));
            _mm512_mask_storeu_ps(acc + c * as + d, m, sum);
        }
    }
}

template <typename L>
KVG_TARGET void accum(int C, int64_t n, const float * p, int64_t ps, const uint8_t * active, const char * rows, size_t rs,
                      int64_t dv, float * acc, int64_t as) {
    for (int c0 = 0; c0 < C; c0 += 4) {
        const float * pc = p + c0 * ps;
        float * ac = acc + c0 * as;
        switch (C - c0) {
            case 1: accum_t<L, 1>(n, pc, ps, active, rows, rs, dv, ac, as); break;
            case 2: accum_t<L, 2>(n, pc, ps, active, rows, rs, dv, ac, as); break;
            case 3: accum_t<L, 3>(n, pc, ps, active, rows, rs, dv, ac, as); break;
            default: accum_t<L, 4>(n, pc, ps, active, rows, rs, dv, ac, as); break;
        }
    }
}

KVG_TARGET void scale_f32(int64_t n, float a, float * y) {
    const __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(av, _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

// exp(x) for x <= 0 as simd.h's EXP_POLY describes; vscalefps applies 2^n.
KVG_INLINE __m512 exp_nonpositive(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_MIN_ARG), _CMP_LT_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_POLY[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[i]));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps((__mmask16) ~tiny, p, n);
}

// silu(x) with t = exp(-|x|) <= 1: x / (1 + t) for x >= 0, x t / (1 + t) below (no overflow)
KVG_INLINE __m512 silu16(__m512 x) {
    const __m512 t = exp_nonpositive(_mm512_min_ps(x, _mm512_sub_ps(_mm512_setzero_ps(), x)));
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_div_ps(_mm512_mask_mul_ps(x, neg, x, t), _mm512_add_ps(t, _mm512_set1_ps(1.0f)));
}
KVG_TARGET void silu_f32(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, silu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

// 16 floats, or the lanes of `in` (zeros elsewhere): a plain load when all are in, since a
// masked load cannot take its data from a store still in flight (scores just written).
KVG_INLINE __m512 load_part(const float * p, __mmask16 in) {
    return in == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(in, p);
}

KVG_TARGET float softmax_weights(int64_t n, float * s, float max, uint8_t * active) {
    const __m512 mv = _mm512_set1_ps(max), ninf = _mm512_set1_ps(-INFINITY);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 in = n - j >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - j)) - 1);
        const __m512 v = load_part(s + j, in);
        const __mmask16 live = _mm512_mask_cmp_ps_mask(in, v, ninf, _CMP_NEQ_OQ);
        const __m512 w = _mm512_maskz_mov_ps(live, exp_nonpositive(_mm512_sub_ps(v, mv)));
        _mm512_mask_storeu_ps(s + j, in, w);
        _mm_mask_storeu_epi8(active + j, live, _mm_set1_epi8(1));
        sum = _mm512_add_ps(sum, w);
    }
    return reduce1(sum);
}

KVG_TARGET float add_scores(int64_t n, const float * m, const float * dots, float scale, float * s) {
    const __m512 sv = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 in = n - j >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - j)) - 1);
        __m512 v = load_part(m + j, in);
        const __mmask16 live = _mm512_mask_cmp_ps_mask(in, v, ninf, _CMP_NEQ_UQ);
        v = _mm512_mask_add_ps(v, live, v, _mm512_mul_ps(load_part(dots + j, in), sv)); // no FMA: scalar bits
        _mm512_mask_storeu_ps(s + j, in, v);
        mx = _mm512_mask_max_ps(mx, in, v, mx); // a NaN score leaves the maximum alone
    }
    return _mm512_reduce_max_ps(mx);
}

KVG_TARGET void f16_to_f32(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (x + i))));
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

KVG_TARGET void dequantize_q8_0(const void * vx, float * y, int64_t n) {
    const block_q8_0 * x = (const block_q8_0 *) vx;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d));
        for (int j = 0; j < QK8_0; j += 16) {
            const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (x[b].qs + j)));
            _mm512_storeu_ps(y + b * QK8_0 + j, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
        }
    }
}

// What build_kernel_table takes from this file (only addresses: no AVX-512 code of its own).
struct isa {
    static constexpr const char * name = "avx512";
    static constexpr int float_cols = 4, quant_cols = 4;
    static constexpr bool one_row_matvec = true;
    static constexpr auto add_block_quant_kernels = add_block_quant_kernels_avx512;
    static constexpr auto quantize_q8_0 = ::quantize_q8_0;
    static constexpr auto accum_f32 = accum<ld_f32>, accum_f16 = accum<ld_f16>;
    static constexpr auto scale_f32 = ::scale_f32;
    static constexpr auto softmax_weights = ::softmax_weights;
    static constexpr auto silu_f32 = ::silu_f32;
    static constexpr auto f16_to_f32 = ::f16_to_f32;
    static constexpr auto dequantize_q8_0 = ::dequantize_q8_0;
    static constexpr auto mv_f16 = mv_same<ld_f16>, mv_bf16 = mv_same<ld_bf16>;
    static constexpr auto pack_mv_f16 = ::pack_mv_f16, pack_mv_bf16 = avx512::pack_mv_bf16;
};

} // namespace

const kvg::cpu_kernels * kvg::kernels_avx512() {
    static const cpu_kernels k = [] {
        cpu_kernels t = build_kernel_table<isa, tile_f32, tile_f16, tile_bf16, tile_q8_0, tile_q4_0>();
        t.dots_f32 = dots_f32;
        t.add_scores = add_scores;
        // iq4_nl: q4_0's tiles with table values (replacing the AVX2 tile of add_block_quant_kernels)
        mm_fill<tile_iq4_nl, 4, isa::quant_cols>(t.mm[MM_IQ4_NL]);
        t.mm[MM_IQ4_NL].mv_rows = 1;
        t.mm[MM_F32].mv_float = mv_float<ld_f32>;
        t.mm[MM_F16].mv_float = mv_float<ld_f16>;
        t.mm[MM_BF16].mv_float = mv_float<ld_bf16>;
        t.mm[MM_F32].mv_rows = t.mm[MM_F16].mv_rows = t.mm[MM_BF16].mv_rows = MV_CALL_ROWS;
        mm_set_panels<panel_float<ld_f32>::tile, PANEL_ROWS>(t.mm[MM_F32], 12, MM_PANEL_F32);
        mm_set_panels<panel_float<ld_f16>::tile, PANEL_ROWS>(t.mm[MM_F16], 12, MM_PANEL_F32);
        t.pack_panel_f32 = pack_panel_f32;
        return t;
    }();
    return &k;
}

#else
const kvg::cpu_kernels * kvg::kernels_avx512() { return nullptr; }
#endif
