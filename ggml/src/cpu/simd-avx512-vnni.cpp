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
#include "simd-vnni-target.h"
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using namespace kvg::avx512;

static_assert(MM_PANEL_BLOCK % 64 == 0, "panel blocks stay 64-byte aligned");

void pack_panel(const void * const * rows, int n, void * panel, int64_t k) {
    char * o = (char *) panel;
    for (int64_t b = 0; b < k / QK8_0; ++b, o += MM_PANEL_BLOCK) {
        int32_t * qs = (int32_t *) o; // [g][c]: elements 4g..4g+3 of row c
        float * d = (float *) (o + MM_PANEL_D);
        int32_t * c8 = (int32_t *) (o + MM_PANEL_C8), * c128 = (int32_t *) (o + MM_PANEL_C128);
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

// Weight layouts of the panel tiles: q8_0 and q4_0 rows, and their groups of 16 interleaved
// rows (types.h; the tile's a.w is its group at the K offset, a.w_row0 its first row in it).
enum panel_w { PW_Q8, PW_Q4, PW_Q4_R16, PW_Q8_R16 };
constexpr bool pw_r16(panel_w w) { return w == PW_Q4_R16 || w == PW_Q8_R16; }
constexpr bool pw_q8(panel_w w) { return w == PW_Q8 || w == PW_Q8_R16; }
// Where block b of tile row r keeps its f16 scale and its 4-byte quant groups (group h at
// q + h * q_step).
template <panel_w W> struct wblock {
    const char * d, * q;
    size_t q_step;
    KVG_INLINE wblock(const mm_tile_args & a, int r, int64_t b) {
        if (pw_r16(W)) {
            const char * g = a.w + b * (int64_t) R16_ROWS * (pw_q8(W) ? sizeof(block_q8_0) : sizeof(block_q4_0));
            d = g + 2 * (a.w_row0 + r);
            q = g + 32 + 4 * (a.w_row0 + r);
            q_step = 64;
        } else {
            d = a.w + r * a.w_stride + b * (W == PW_Q8 ? sizeof(block_q8_0) : sizeof(block_q4_0));
            q = d + sizeof(ggml_fp16_t);
            q_step = 4;
        }
    }
};

// Exact integer dots of one weight block with the 16 rows of each of P panels (xv: each
// panel's 8 quant vectors of the block), into s.
template <panel_w W, int P>
KVG_INLINE void block_dots(const wblock<W> & wb, const __m512i (*xv)[8], const __m512i * corr, __m512i * s) {
    for (int p = 0; p < P; ++p) s[p] = corr[p];
    if (!pw_q8(W)) {
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 4; ++h) {
            int32_t v;
            std::memcpy(&v, wb.q + h * wb.q_step, 4);
            // byte j holds element j (low nibble) and j + 16 (high): groups h and 4 + h
            const __m512i t = _mm512_set1_epi32(v);
            const __m512i lo = _mm512_and_si512(t, low4), hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), low4);
            for (int p = 0; p < P; ++p) s[p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s[p], lo, xv[p][h]), hi, xv[p][4 + h]);
        }
    } else {
        const __m512i bias = _mm512_set1_epi8((char) 0x80);
        for (int g = 0; g < 8; ++g) {
            int32_t v;
            std::memcpy(&v, wb.q + g * wb.q_step, 4);
            const __m512i u = _mm512_xor_si512(_mm512_set1_epi32(v), bias);
            for (int p = 0; p < P; ++p) s[p] = _mm512_dpbusd_epi32(s[p], u, xv[p][g]);
        }
    }
}

// Tile row r's products with the P panels for block b, added to acc.
template <panel_w W, int P>
KVG_INLINE void panel_row(const mm_tile_args & a, int r, int64_t b, const __m512i (*xv)[8], const __m512i * corr,
                          const __m512 * xd, __m512 * acc) {
    const wblock<W> wb(a, r, b);
    __m512i s[P];
    block_dots<W, P>(wb, xv, corr, s);
    const __m512 wd = _mm512_set1_ps(_cvtsh_ss(*(const uint16_t *) wb.d));
    for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[p]), _mm512_mul_ps(wd, xd[p]), acc[p]);
}

// R weight rows x P panels (x_stride bytes apart); n_cols counts the rows of all P panels.
template <panel_w W, int R, int P>
KVG_INLINE void panel_tile(const mm_tile_args & a) {
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    const int64_t nb = a.k / QK8_0;
    for (int64_t b = 0; b < nb; ++b) {
        __m512i xv[P][8], corr[P];
        __m512 xd[P];
        for (int p = 0; p < P; ++p) {
            const char * xp = a.x + p * a.x_stride + b * MM_PANEL_BLOCK;
            for (int g = 0; g < 8; ++g) xv[p][g] = _mm512_load_si512((const void *) (xp + 64 * g));
            xd[p] = _mm512_load_ps((const float *) (xp + MM_PANEL_D));
            corr[p] = _mm512_load_si512((const void *) (xp + (pw_q8(W) ? MM_PANEL_C128 : MM_PANEL_C8)));
        }
        if constexpr (pw_r16(W)) {
            // unrolled, so acc stays in registers (GCC left this loop rolled, acc on the stack;
            // Zen 4, M = 128, K = 5632: 291-294 -> 297-306 GFLOP/s); q8_0 lost 2-4% unrolled
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) panel_row<W, P>(a, r, b, xv, corr, xd, acc[r]);
        } else {
            for (int r = 0; r < R; ++r) panel_row<W, P>(a, r, b, xv, corr, xd, acc[r]);
        }
    }
    store_panel<R, P>(a, acc);
}

template <panel_w W> struct panel_of {
    template <int R> struct tile {
        static KVG_TARGET void run(const mm_tile_args & a) {
            if (a.n_cols > MM_PANEL_COLS) panel_tile<W, R, 2>(a);
            else panel_tile<W, R, 1>(a);
        }
    };
};
template <int R> using panel_q8_0 = panel_of<PW_Q8>::tile<R>;
template <int R> using panel_q4_0 = panel_of<PW_Q4>::tile<R>;
template <int R> using panel_q4_0_r16 = panel_of<PW_Q4_R16>::tile<R>;
template <int R> using panel_q8_0_r16 = panel_of<PW_Q8_R16>::tile<R>;

// ---- matrix-vector products over a packed activation row ---------------------------------------
// The AVX-512 tiles' lanes exactly (so the sums are the same bits), with the activation side
// prepared once per row instead of once per weight row. Per 128 values: q4_0: the first and
// the last 16 quants of block k in 128-bit lane k (two vectors), the scales (4 lanes each),
// -8 * the sum of each lane's 8 quants; q8_0, per pair of blocks: the quants and the f16
// scales (8 lanes each). q8_0 keeps its row small (a +128 correction and f32 scales made it
// 3x the q8_0 row, and K = 5632 then ran from L2: 17 GB/s instead of 29 on Zen 4), and
// multiplies |w| by x with w's sign like the AVX-512 tile.
constexpr size_t MV_Q4_BYTES = 4 * 64, MV_Q8_BYTES = 2 * 96;
constexpr int PF_AHEAD = 4096; // one-row tiles' software prefetch, as in simd-avx512.cpp
// q4_0 prefetches further, into L2 only: its kernel spends more time per weight byte than
// q8_0's, and on Zen 4 (1 thread, weights from DRAM, 2048 x 32000 and 4096 x 14336) 8 KiB ahead
// with prefetcht1 ran 5-20% faster than 4 KiB with prefetcht0 in quiet runs, 2x under load;
// q8_0 lost with it (21 -> 12 GB/s), as did 2 or 4 interleaved rows per call (9-13 GB/s).
constexpr int PF_Q4_AHEAD = 8192;

// q4_0's packed row; iq4_nl's the same with its correction for values biased by 128
template <int BIAS>
void pack_mv_nibbles(const void * row, void * out, int64_t k) {
    const block_q8_0 * x = (const block_q8_0 *) row;
    for (int64_t g = 0; g < k / MM_MV_GROUP; ++g, x += 4) {
        int8_t * lo = (int8_t *) out + g * MV_Q4_BYTES, * hi = lo + 64;
        float * d = (float *) (lo + 128);
        int32_t * corr = (int32_t *) (lo + 192);
        for (int b = 0; b < 4; ++b) {
            std::memcpy(lo + 16 * b, x[b].qs, 16);
            std::memcpy(hi + 16 * b, x[b].qs + 16, 16);
            for (int l = 0; l < 4; ++l) {
                d[4 * b + l] = ggml_fp16_to_fp32(x[b].d);
                int32_t sum = 0;
                for (int m = 0; m < 4; ++m) sum += lo[16 * b + 4 * l + m] + hi[16 * b + 4 * l + m];
                corr[4 * b + l] = -BIAS * sum;
            }
        }
    }
}

void pack_mv_q8(const void * row, void * out, int64_t k) {
    const block_q8_0 * x = (const block_q8_0 *) row;
    for (int64_t p = 0; p < k / 64; ++p, x += 2) {
        int8_t * q = (int8_t *) out + p * (MV_Q8_BYTES / 2);
        ggml_fp16_t * d = (ggml_fp16_t *) (q + 64);
        std::memcpy(q, x[0].qs, 32);
        std::memcpy(q + 32, x[1].qs, 32);
        for (int l = 0; l < 16; ++l) d[l] = x[l / 8].d;
    }
}

KVG_INLINE void store1(const mm_tile_args & a, float * out, __m512 acc) {
    const float s = reduce1(acc);
    *out = a.accumulate ? *out + s : s;
}

// q4_0 (W_Q4: the nibbles, corrected by -8 * sum) or iq4_nl (W_IQ4: their table values + 128,
// corrected by -128 * sum): the same exact integers per lane as q4_step4's
template <wquant W>
KVG_INLINE void mv_nibbles_row(const mm_tile_args & a, const char * w, float * out) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    const char * x = a.x;
    for (int64_t g = 0; g < a.k / MM_MV_GROUP; ++g, w += 4 * sizeof(block_q4_0), x += MV_Q4_BYTES) {
        _mm_prefetch(w + PF_Q4_AHEAD, _MM_HINT_T1);
        _mm_prefetch(w + 64 + PF_Q4_AHEAD, _MM_HINT_T1);
        const __m512i q = gather_words(w, 8, Q4X4_QS);
        __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        if (W == W_IQ4) lo = _mm512_shuffle_epi8(iq4nl_table<128>(), lo), hi = _mm512_shuffle_epi8(iq4nl_table<128>(), hi);
        __m512i s = _mm512_load_si512((const void *) (x + 192));
        s = _mm512_dpbusd_epi32(s, lo, _mm512_load_si512((const void *) x));
        s = _mm512_dpbusd_epi32(s, hi, _mm512_load_si512((const void *) (x + 64)));
        const __m512 scale = _mm512_mul_ps(gather_scales(w, Q4X4_D), _mm512_load_ps((const float *) (x + 128)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc);
    }
    store1(a, out, acc);
}
// Up to MV_NIBBLE_ROWS consecutive rows per call, one after the other (one sequential stream,
// as with one row per call, without the per-call setup: kvg-bench-matmul, 1 thread, weights
// in L2, K = 2048 and 5632: 71-76 -> 74-80 GFLOP/s).
constexpr int MV_NIBBLE_ROWS = 4;
template <wquant W>
KVG_INLINE void mv_nibbles(const mm_tile_args & a) {
    for (int r = 0; r < a.n_cols; ++r) mv_nibbles_row<W>(a, a.w + r * a.w_stride, a.out + r);
}
KVG_TARGET void mv_q4(const mm_tile_args & a) { mv_nibbles<W_Q4>(a); }
KVG_TARGET void mv_iq4_nl(const mm_tile_args & a) { mv_nibbles<W_IQ4>(a); }

KVG_TARGET void mv_q8(const mm_tile_args & a) {
    __m512 acc = _mm512_setzero_ps();
    const block_q8_0 * w = (const block_q8_0 *) a.w;
    const char * x = a.x;
    for (int64_t p = 0; p < a.k / 64; ++p, w += 2, x += MV_Q8_BYTES / 2) {
        _mm_prefetch((const char *) w + PF_AHEAD, _MM_HINT_T0);
        const __m256i q0 = _mm256_loadu_si256((const __m256i *) w[0].qs), q1 = _mm256_loadu_si256((const __m256i *) w[1].qs);
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        // |w| times x with w's sign: vpdpbusd's unsigned x signed form
        const __m512i xq = _mm512_loadu_si512((const void *) x);
        const __m512i xs = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(q), _mm512_setzero_si512(), xq);
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), xs);
        const __m512 xd = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *) (x + 64)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(scale_pair(w[0].d, w[1].d), xd), acc);
    }
    store1(a, a.out, acc);
}

// Interleaved weights (types.h) times one row: per block, 16 rows' integer dots in the 16
// lanes (vpdpbusd with the row's 4-byte groups broadcast), then one scale and FMA for all 16
// rows. q8_0's weights are made unsigned by +128, as in the panel tiles. The packed row, per
// block: its 32 q8_0 quants, f32 scale, -BIAS * the sum of its quants (int32).
constexpr size_t MV_R16_BLOCK = 40, MV_R16_BYTES = 4 * MV_R16_BLOCK;

template <int BIAS>
void pack_mv_r16(const void * row, void * out, int64_t k) {
    const block_q8_0 * x = (const block_q8_0 *) row;
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        char * o = (char *) out + b * MV_R16_BLOCK;
        std::memcpy(o, x[b].qs, 32);
        const float d = ggml_fp16_to_fp32(x[b].d);
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += x[b].qs[j];
        sum *= -BIAS;
        std::memcpy(o + 32, &d, 4);
        std::memcpy(o + 36, &sum, 4);
    }
}

// No software prefetch: a group's blocks are one sequential stream, which the hardware
// prefetchers follow (Zen 4, 1 thread: 34.8 GB/s without, 23-24 with prefetcht1 4-32 KiB ahead).
// W: q4_0's nibbles, q8_0's bytes, or iq4_nl's nibbles looked up as its levels + 128.
template <wquant W>
KVG_INLINE void mv_r16(const mm_tile_args & a) {
    constexpr bool Q8 = W == W_Q8;
    constexpr size_t BLOCK = R16_ROWS * wblock_bytes(W);
    const __m512i low4 = _mm512_set1_epi8(0x0F), bias = _mm512_set1_epi8((char) 0x80);
    __m512 acc = _mm512_setzero_ps();
    const char * w = a.w, * x = a.x;
    for (int64_t b = 0; b < a.k / QK8_0; ++b, w += BLOCK, x += MV_R16_BLOCK) {
        int32_t xq[10];
        std::memcpy(xq, x, sizeof(xq));
        __m512i s0 = _mm512_set1_epi32(xq[9]), s1 = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            if (Q8) {
                const __m512i q0 = _mm512_loadu_si512((const void *) (w + 32 + 64 * j));
                const __m512i q1 = _mm512_loadu_si512((const void *) (w + 32 + 64 * (4 + j)));
                s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(q0, bias), _mm512_set1_epi32(xq[j]));
                s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(q1, bias), _mm512_set1_epi32(xq[4 + j]));
            } else {
                const __m512i q = _mm512_loadu_si512((const void *) (w + 32 + 64 * j));
                __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
                if (W == W_IQ4) lo = _mm512_shuffle_epi8(iq4nl_table<128>(), lo), hi = _mm512_shuffle_epi8(iq4nl_table<128>(), hi);
                s0 = _mm512_dpbusd_epi32(s0, lo, _mm512_set1_epi32(xq[j]));
                s1 = _mm512_dpbusd_epi32(s1, hi, _mm512_set1_epi32(xq[4 + j]));
            }
        }
        float xd;
        std::memcpy(&xd, x + 32, 4);
        const __m512 scale = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) w)), _mm512_set1_ps(xd));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc);
    }
    if (a.accumulate) acc = _mm512_add_ps(acc, _mm512_loadu_ps(a.out));
    _mm512_storeu_ps(a.out, acc);
}
KVG_TARGET void mv_q4_r16(const mm_tile_args & a) { mv_r16<W_Q4>(a); }
KVG_TARGET void mv_q8_r16(const mm_tile_args & a) { mv_r16<W_Q8>(a); }
KVG_TARGET void mv_iq4_nl_r16(const mm_tile_args & a) { mv_r16<W_IQ4>(a); }

constexpr int PANEL_ROWS = 8;
static_assert(PANEL_ROWS <= MM_MAX_ROWS, "panel rows fit the table");

cpu_kernels build() {
    cpu_kernels k = *kernels_avx512();
    k.name = "avx512vnni";
    // from where panels beat the tiles despite zero rows (Zen 4: q8_0 from 6 rows, 1.6x at 6;
    // q4_0 from 8, 1.2x at 8)
    mm_set_panels<panel_q8_0, PANEL_ROWS>(k.mm[MM_Q8_0], 6, MM_PANEL_Q8_0);
    mm_set_panels<panel_q4_0, PANEL_ROWS>(k.mm[MM_Q4_0], 8, MM_PANEL_Q8_0);
    mm_set_panels<panel_q4_0_r16, PANEL_ROWS>(k.mm[MM_Q4_0_R16], 8, MM_PANEL_Q8_0); // rows within a group of 16
    mm_set_panels<panel_q8_0_r16, PANEL_ROWS>(k.mm[MM_Q8_0_R16], 6, MM_PANEL_Q8_0);
    static_assert(R16_ROWS % PANEL_ROWS == 0, "panel tiles stay within a group of interleaved rows");
    k.pack_panel = pack_panel;
    k.mm[MM_Q4_0].mv = mv_q4;
    k.mm[MM_Q4_0].pack_mv = pack_mv_nibbles<8>;
    k.mm[MM_Q4_0].mv_group_bytes = MV_Q4_BYTES;
    k.mm[MM_Q8_0].mv = mv_q8;
    k.mm[MM_Q8_0].pack_mv = pack_mv_q8;
    k.mm[MM_Q8_0].mv_group_bytes = MV_Q8_BYTES;
    k.mm[MM_IQ4_NL].mv = mv_iq4_nl;
    k.mm[MM_IQ4_NL].pack_mv = pack_mv_nibbles<128>;
    k.mm[MM_IQ4_NL].mv_group_bytes = MV_Q4_BYTES;
    k.mm[MM_Q4_0].mv_rows = k.mm[MM_IQ4_NL].mv_rows = MV_NIBBLE_ROWS;
    k.mm[MM_Q4_0_R16].mv = mv_q4_r16;
    k.mm[MM_Q4_0_R16].pack_mv = pack_mv_r16<8>;
    k.mm[MM_Q8_0_R16].mv = mv_q8_r16;
    k.mm[MM_Q8_0_R16].pack_mv = pack_mv_r16<128>;
    k.mm[MM_IQ4_NL_R16].mv = mv_iq4_nl_r16;
    k.mm[MM_IQ4_NL_R16].pack_mv = pack_mv_r16<128>; // levels + 128: corrected by -128 * sum
    for (int t : {MM_Q4_0_R16, MM_Q8_0_R16, MM_IQ4_NL_R16}) {
        k.mm[t].mv_group_bytes = MV_R16_BYTES;
        k.mm[t].mv_rows = (int) R16_ROWS;
    }
    add_panel_kernels_vnni(k);
    add_matvec_kernels_vnni(k);
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
