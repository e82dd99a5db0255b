// Inner loops of the CPU kernels (register tiles of dot products, attention helpers), one table per
// instruction-set path. Tables for x86 SIMD are compiled with per-function target
// attributes and picked at run time, so one binary runs on any x86-64.
#pragma once

#include "cpu-impl.h"

#include <algorithm>
#include <cstring>

namespace kvg {

// Instruction-set paths, ordered: a path may be capped to any lower one.
enum cpu_path { PATH_SCALAR = 0, PATH_AVX2 = 1, PATH_AVX512 = 2, PATH_AVX512_VNNI = 3, PATH_AVX512_BF16 = 4, PATH_COUNT = 5 };

// Largest register tile any path uses (weight rows x activation rows).
constexpr int MM_MAX_ROWS = 8;
constexpr int MM_MAX_COLS = 8;

// One register tile of a matmul over one K chunk:
// out[c * out_stride + r] (+)= dot(weight row r, activation row c), r < R, c < C.
struct mm_tile_args {
    int64_t k;           // elements (multiple of 32 for quantized weights)
    const char * w;      // first weight row (weight type)
    size_t w_stride;     // bytes between weight rows
    const char * x;      // first activation row (the weight type's vec_dot_type)
    size_t x_stride;     // bytes between activation rows
    float * out;
    int64_t out_stride;  // floats between output rows (one per activation row)
    bool accumulate;     // add to out instead of overwriting it
    int n_cols = 0;      // panel tiles: activation rows to write (1..panel_cols); mv: weight rows (1..mv_rows)
    int w_row0 = 0;      // interleaved (r16) panel tiles: w is the group (at the K offset), this its first row in it
    int n_x = 1;         // mv: packed activation rows (1..mv_cols), x_stride apart
};
typedef void (*mm_tile_fn)(const mm_tile_args & a);

// Weight types with a matmul kernel. The activations are the weight type's vec_dot_type:
// F32 for float weights, Q8_K for the k-quants, iq4_xs and the ternary types, Q8_0 for the other
// block types.
// clang-format off
enum mm_type {
    MM_F32 = 0, MM_F16, MM_BF16, MM_Q8_0, MM_Q4_0,
    MM_Q4_1, MM_Q5_0, MM_Q5_1, MM_IQ4_NL,              // 32-value blocks, q8_0 activations
    MM_Q2_K, MM_Q3_K, MM_Q4_K, MM_Q5_K, MM_Q6_K,      // 256-value super-blocks, q8_K activations
    MM_IQ4_XS,                                        // (iq4_xs: iq4_nl's levels, a scale per 32 values)
    MM_TQ1_0, MM_TQ2_0,                               // ternary: d * (t - 1), no sub-block scales
    MM_IQ2_XXS, MM_IQ2_XS, MM_IQ2_S, MM_IQ1_S, MM_IQ1_M, // grid points (quants-iq2.h)
    MM_IQ3_XXS, MM_IQ3_S,                             // grids of 4 magnitudes, signs, a scale per 32 values
    MM_Q4_0_R16, MM_Q8_0_R16, MM_Q4_K_R16, MM_Q6_K_R16, MM_IQ4_NL_R16, // rows interleaved by 16 (types.h): matrix-vector
                              // (and for the first two panel) kernels only, where a path has them;
                              // other products unpack the rows to the plain type for its kernels
    MM_Q5_0_R16,
    MM_TYPE_COUNT
};
// clang-format on

// Activation panels (paths with panel tiles, q8_0 activations): MM_PANEL_COLS activation rows
// quantized to q8_0 and interleaved, so a tile can multiply 4 bytes of one weight row with the
// same 4 bytes of all 16 rows in one instruction and end each block with 16 exact integer dots.
// Per 32-value block: qs[g][c][4] (elements 4g..4g+3 of row c, g < 8), then the rows' scales
// as f32, then -8 * sum(qs) and -128 * sum(qs) of each row as int32 (the corrections for
// q4_0's unsigned nibbles and for q8_0 weights made unsigned by +128). Missing rows are zero.
constexpr int MM_PANEL_COLS = 16;
constexpr size_t MM_PANEL_BLOCK = MM_PANEL_COLS * 32 + 3 * MM_PANEL_COLS * 4;
// Byte offsets of a panel block's fields after its interleaved quants.
constexpr size_t MM_PANEL_D = MM_PANEL_COLS * 32;                  // f32 scales
constexpr size_t MM_PANEL_C8 = MM_PANEL_D + MM_PANEL_COLS * 4;     // -8 * sum, int32
constexpr size_t MM_PANEL_C128 = MM_PANEL_C8 + MM_PANEL_COLS * 4;  // -128 * sum, int32
static_assert(MM_PANEL_C128 + MM_PANEL_COLS * 4 == MM_PANEL_BLOCK, "panel block layout");
// BF16 activation panels (bf16 weights on the AVX-512 BF16 path): MM_PANEL_COLS rows rounded
// to bf16 and interleaved by pairs of elements, [K/2][c][2] (a last odd element paired with
// zero), so one vdpbf16ps multiplies two bf16 weights with the same two values of 16 rows.
constexpr size_t MM_PANEL_BF16_PAIR = MM_PANEL_COLS * 4; // bytes per pair of elements
// F32 activation panels (f32 and f16 weights on the AVX-512 paths): MM_PANEL_COLS f32 rows interleaved
// by element, [K][c], so one vector holds element k of all 16 rows against a broadcast weight.
constexpr size_t MM_PANEL_F32_ELEM = MM_PANEL_COLS * 4; // bytes per element
// What a kernel's activation panels hold (zero: q8_0, the first kind).
enum mm_panel_kind { MM_PANEL_Q8_0 = 0, MM_PANEL_BF16, MM_PANEL_F32 };

struct mm_kernel {
    int rows, cols; // full register tile; tile[r][c] exists for 1 <= r <= rows, 1 <= c <= cols
    int mv_rows;    // rows per call of mv / mv_float (matrix-vector products; memory streaming, measured);
                    // other tiles for one activation row take mm_one_row_height rows
    mm_tile_fn tile[MM_MAX_ROWS + 1][MM_MAX_COLS + 1];
    // panel tiles (0 rows: none): panel[r] multiplies r weight rows with panel_cols activation
    // rows (x: the first panel's block at the tile's K offset, the next ones x_stride apart;
    // n_cols rows written); used for products of at least panel_min activation rows
    int panel_rows, panel_cols, panel_min; // panel_cols: a multiple of MM_PANEL_COLS
    mm_panel_kind panel_kind;
    mm_tile_fn panel[MM_MAX_ROWS + 1];
    // matrix-vector products (one activation row, K a multiple of MM_MV_GROUP) over the row
    // packed by pack_mv from its q8_0 (q8_K for the k-quants) form, mv_group_bytes per MM_MV_GROUP values: mv is a
    // tile of up to mv_rows weight rows (n_cols of them) and one activation row whose x is
    // the packed row at the tile's K offset, bit-identical to tile[r][1] (nullptr: none).
    // f16 and bf16 weights (the SIMD paths): packed from the f32 row, rounded to the weights'
    // type (ggml's vec_dot_type), so not tile[r][1]'s bits (its x stays f32); each row's
    // bits do not depend on n_cols
    mm_tile_fn mv;
    // mv over several activation rows: a call takes up to mv_cols of them (0 or 1: one), each
    // weight row read once for all; products of up to mv_max activation rows take mv (0 or 1:
    // one row only), so a batch of a few sequences reads each weight once per step. Outputs
    // have the bits of tile[r][c] over the same K chunk.
    int mv_cols, mv_max;
    // matrix-vector tile of float weights (f32 activations, nothing packed): n_cols weight
    // rows (1..mv_rows) times one activation row, each row with the bits of tile[1][1]
    // (nullptr: tile[rows][1])
    mm_tile_fn mv_float;
    void (*pack_mv)(const void * q8_row, void * out, int64_t k);
    size_t mv_group_bytes;
};
constexpr int64_t MM_MV_GROUP = 128;

struct cpu_kernels {
    const char * name;
    mm_kernel mm[MM_TYPE_COUNT];
    // activations for q8_0/q4_0 weights (k multiple of 32)
    void (*quantize_q8_0)(const float * x, void * y, int64_t k);
    // activations for k-quant weights (k multiple of 256)
    void (*quantize_q8_K)(const float * x, void * y, int64_t k);
    // acc[c * acc_stride + i] += sum over j < n with active[j] of p[c * p_stride + j] * row_j[i],
    // for c < C (<= MM_MAX_COLS), i < dv; row_j at rows + j * row_stride (F32 or F16)
    void (*accum_f32)(int C, int64_t n, const float * p, int64_t p_stride, const uint8_t * active, const char * rows,
                      size_t row_stride, int64_t dv, float * acc, int64_t acc_stride);
    void (*accum_f16)(int C, int64_t n, const float * p, int64_t p_stride, const uint8_t * active, const char * rows,
                      size_t row_stride, int64_t dv, float * acc, int64_t acc_stride);
    // y *= a
    void (*scale_f32)(int64_t n, float a, float * y);
    // Softmax weights of one chunk of scores: s[j] = exp(s[j] - max) and active[j] = 1 where
    // s[j] > -inf, s[j] = 0 elsewhere (active[j] untouched); returns the sum of the weights.
    // max is finite and >= every s[j]. Vector paths use a polynomial exp (within 2 ulp of expf).
    float (*softmax_weights)(int64_t n, float * s, float max, uint8_t * active);
    // y[i] = silu(x[i]) = x[i] / (1 + exp(-x[i])); y may be x. Vector paths use the polynomial
    // exp of softmax_weights on -|x| (within a few ulp of the scalar path's expf).
    void (*silu_f32)(int64_t n, const float * x, float * y);
    // y = float(x)
    void (*f16_to_f32)(const ggml_fp16_t * x, float * y, int64_t n);
    // y = q8_0 blocks x as floats (k multiple of 32; bit-identical to dequantize_row_q8_0)
    void (*dequantize_q8_0)(const void * x, float * y, int64_t k);
    // out[c * out_stride + j] = dot(x + c * x_stride, row j) over k floats for c < C, j < n; F32
    // rows at rows + j * row_stride. Bit-identical to tile[r][c] for r * c > 1; nullptr on paths
    // without it. Cheaper than the tiles for short rows (tiny matvecs, small attention heads).
    void (*dots_f32)(int C, int64_t n, const float * x, int64_t x_stride, const char * rows, size_t row_stride, int64_t k,
                     float * out, int64_t out_stride);
    // s[j] = m[j] + dots[j] * scale (rounded twice, no FMA) where m[j] > -inf, else m[j], for
    // j < n (m may be s); returns the maximum of the new s (NaNs ignored, -inf when all are).
    // nullptr on paths without it.
    float (*add_scores)(int64_t n, const float * m, const float * dots, float scale, float * s);
    // activation panel from q8_0 rows (k multiple of 32): rows[c] for c < n, zero rows after
    // (only paths with panel tiles)
    void (*pack_panel)(const void * const * rows, int n, void * panel, int64_t k);
    // the same for a BF16 panel from f32 rows (any k; each value rounded to bf16 bit for bit
    // as ggml_fp32_to_bf16 does; only the AVX-512 BF16 path)
    void (*pack_panel_bf16)(const void * const * rows, int n, void * panel, int64_t k);
    // the same for an F32 panel from f32 rows (any k; the AVX-512 paths)
    void (*pack_panel_f32)(const void * const * rows, int n, void * panel, int64_t k);
};

// exp(x) for x <= 0 on the vector paths (softmax_weights): 2^n * exp(r), n = round(x log2 e),
// r = x - n ln 2 with ln 2 in two parts so r is exact, exp(r) = 1 + r + r^2 * EXP_POLY(r)
// (Cephes' expf coefficients, highest power first); 0 below EXP_MIN_ARG (under FLT_MIN).
constexpr float EXP_LOG2E = 1.44269504f, EXP_LN2_HI = 0.693359375f, EXP_LN2_LO = -2.12194440e-4f, EXP_MIN_ARG = -87.3f;
constexpr float EXP_POLY[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
                               5.0000001201e-1f};

// Fills tile[1..R][1..C] of a kernel from Tile<r, c>::run (Tile must have internal
// linkage: each path's file compiles it for its own instruction set). static: GCC gives
// these instantiations weak external symbols even for an anonymous-namespace Tile, so
// unoptimized builds merged the three paths' fillers and every table got one path's tiles.
template <template <int, int> class Tile, int R, int C>
static void mm_fill_row(mm_kernel & k) {
    k.tile[R][C] = &Tile<R, C>::run;
    if constexpr (C > 1) mm_fill_row<Tile, R, C - 1>(k);
}
template <template <int, int> class Tile, int R, int C>
static void mm_fill(mm_kernel & k) {
    mm_fill_row<Tile, R, C>(k);
    if constexpr (R > 1) mm_fill<Tile, R - 1, C>(k);
    k.rows = R;
    k.cols = C;
    k.mv_rows = R;
}

// Fills the one-column tiles tile[1..R][1] (R may exceed the tiles' height `rows`) and makes
// R the rows of a tile for one activation row: for weights whose decoding costs more than the
// products, wide tiles (1 x 8) share it in prompts while matrix-vector products still share
// each activation block between R rows.
template <template <int, int> class Tile, int R> static void mm_fill_matvec(mm_kernel & k) {
    k.tile[R][1] = &Tile<R, 1>::run;
    if constexpr (R > 1) mm_fill_matvec<Tile, R - 1>(k);
    k.mv_rows = R;
}

// Weight rows per tile of a product of one activation row that takes neither mv nor
// mv_float: mv_rows where those one-column tiles exist (mm_fill_matvec), else at most the
// tiles' height.
inline int mm_one_row_height(const mm_kernel & k) {
    return k.mv_rows <= MM_MAX_ROWS && k.tile[k.mv_rows][1] ? k.mv_rows : std::min(k.mv_rows, k.rows);
}

// Fills panel[1..R] of a kernel from P<r>::run (internal linkage, as for mm_fill); panel[0] stays empty.
template <template <int> class P, int R>
static void mm_fill_panel(mm_kernel & k) {
    k.panel[R] = &P<R>::run;
    if constexpr (R > 1) mm_fill_panel<P, R - 1>(k);
    else k.panel[0] = nullptr;
}

// Panel tiles P<1..R> of a kernel over pairs of panels (panel_cols 2 * MM_PANEL_COLS) of this
// kind, for products of at least min activation rows.
template <template <int> class P, int R>
static void mm_set_panels(mm_kernel & k, int min, mm_panel_kind kind) {
    mm_fill_panel<P, R>(k);
    k.panel_rows = R;
    k.panel_cols = 2 * MM_PANEL_COLS;
    k.panel_min = min;
    k.panel_kind = kind;
}

// The kernel table of one instruction set, built the same way for every ISA from what its
// file provides (its tile templates, and Isa: name, tile widths, helpers): matmul tiles of
// 4 rows x float_cols for f32/f16/bf16 and 4 x quant_cols for q8_0/q4_0, one-row matrix-vector products where one_row_matvec (interleaved short rows
// defeat the prefetchers of wide vectors), the block-type kernels and the vector helpers.
// static, like mm_fill: each ISA's file instantiates it with its own tiles.
template <class Isa, template <int, int> class F32, template <int, int> class F16, template <int, int> class BF16,
          template <int, int> class Q8_0, template <int, int> class Q4_0>
static cpu_kernels build_kernel_table() {
    cpu_kernels k;
    std::memset(&k, 0, sizeof(k));
    k.name = Isa::name;
    mm_fill<F32, 4, Isa::float_cols>(k.mm[MM_F32]);
    mm_fill<F16, 4, Isa::float_cols>(k.mm[MM_F16]);
    mm_fill<BF16, 4, Isa::float_cols>(k.mm[MM_BF16]);
    mm_fill<Q8_0, 4, Isa::quant_cols>(k.mm[MM_Q8_0]);
    mm_fill<Q4_0, 4, Isa::quant_cols>(k.mm[MM_Q4_0]);
    for (int t : {MM_F16, MM_BF16, MM_Q8_0, MM_Q4_0}) {
        if (Isa::one_row_matvec) k.mm[t].mv_rows = 1;
    }
    // f16/bf16 weights times one activation row rounded to their type (nullptr: none)
    k.mm[MM_F16].mv = Isa::mv_f16;
    k.mm[MM_F16].pack_mv = Isa::pack_mv_f16;
    k.mm[MM_BF16].mv = Isa::mv_bf16;
    k.mm[MM_BF16].pack_mv = Isa::pack_mv_bf16;
    k.mm[MM_F16].mv_group_bytes = k.mm[MM_BF16].mv_group_bytes = 2 * MM_MV_GROUP;
    Isa::add_block_quant_kernels(k);
    k.quantize_q8_0 = Isa::quantize_q8_0;
    k.accum_f32 = Isa::accum_f32;
    k.accum_f16 = Isa::accum_f16;
    k.scale_f32 = Isa::scale_f32;
    k.softmax_weights = Isa::softmax_weights;
    k.silu_f32 = Isa::silu_f32;
    k.f16_to_f32 = Isa::f16_to_f32;
    k.dequantize_q8_0 = Isa::dequantize_q8_0;
    return k;
}

// Attention of a few queries at a time (flash_attn_ext's decode path, C <= MM_MAX_COLS queries
// sharing one KV head), reading K and V in the cache's type (F32, F16, Q8_0; element offsets and
// k, dv multiples of 8, of 32 for Q8_0):
//   dots_rows:     out[c * os + j] = dot(x + c * xs, row j) for j < n with active[j], rows at
//                  rows + j * rs (the bits of the matmul tiles: one chain per query, reduce8)
//   dots_channels: out[c * os + t] = sum over d < k of x[c * xs + d] * (row d)[t] for t < n
//                  (<= 32): keys stored by channel, row d at rows + d * rs
//   accum:         cpu_kernels::accum_f32's contract, rows of this type
struct fa_dec_type {
    void (*dots_rows)(int C, int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k,
                      const uint8_t * active, float * out, int64_t os);
    void (*dots_channels)(int C, int64_t n, const float * x, int64_t xs, const char * rows, size_t rs, int64_t k,
                          float * out, int64_t os);
    void (*accum)(int C, int64_t n, const float * p, int64_t p_stride, const uint8_t * active, const char * rows,
                  size_t row_stride, int64_t dv, float * acc, int64_t acc_stride);
};
struct fa_dec_kernels {
    fa_dec_type f32, f16, q8_0;
};
// AVX2 (also run by the AVX-512 paths); nullptr when not built for x86-64.
const fa_dec_kernels * fa_dec_kernels_avx2();

// Attention of many query rows (flash_attn_ext's prompt path): a tile of FA_TILE_KV cache
// positions against a block of FA_TILE_Q query rows in f32, K and V converted once per tile and
// shared by the block's rows (register tiles of broadcast x vector FMAs, no horizontal sums):
//   scores:  s[t * FA_TILE_Q + r] = sum over d < D of kf[t * ts + d * ds] * qt[d * FA_TILE_Q + r]
//            for t < FA_TILE_KV, r < FA_TILE_Q (K as rows: ts = row stride, ds = 1; by channel: ts = 1)
//   softmax: per row r the online update: mx = max(m[r], max over t of s), s = exp(s - mx) (0 where
//            s is -inf), alpha[r] = exp(m[r] - mx), l[r] = l[r] * alpha[r] + sum, m[r] = mx; a row
//            whose maximum stays -inf keeps zero weights
//   values:  o[r * os + i] = o[r * os + i] * alpha[r] + sum over t < n of s[t * FA_TILE_Q + r] *
//            vf[t * vs + i], for r < nr (rounded up to 3), i < dv (a multiple of 32)
constexpr int FA_TILE_Q = 96, FA_TILE_KV = 32;
struct fa_tile_kernels {
    void (*scores)(int64_t D, const float * kf, int64_t ts, int64_t ds, const float * qt, float * s);
    void (*softmax)(float * s, float * m, float * l, float * alpha);
    void (*values)(int64_t n, int nr, const float * s, const float * vf, int64_t vs, int64_t dv, const float * alpha,
                   float * o, int64_t os);
};
// AVX2 (also run by the AVX-512 paths); nullptr when not built for x86-64.
const fa_tile_kernels * fa_tile_kernels_avx2();

const cpu_kernels & kernels_scalar();
const cpu_kernels * kernels_avx2();   // nullptr when not built for x86-64
const cpu_kernels * kernels_avx512(); // nullptr when not built for x86-64
const cpu_kernels * kernels_avx512_vnni(); // nullptr when not built for x86-64
const cpu_kernels * kernels_avx512_bf16(); // nullptr when not built for x86-64

// Best path the CPU supports, and the table in use (capped by KVG_CPU_FEATURES or
// ggml_cpu_set_features_limit).
cpu_path cpu_best_path();
cpu_path cpu_active_path();
const cpu_kernels & cpu_active_kernels();
const cpu_kernels * cpu_path_kernels(cpu_path p); // a path's table; nullptr when not built (never for scalar)

mm_type mm_type_of(enum ggml_type type); // aborts for types without a kernel
bool has_mm_kernel(enum ggml_type type);
enum ggml_type mm_vec_dot_type(enum ggml_type type); // the activation type a weight type is dotted with
// What mul_mat converts M activation rows of K values to for weights of `type` on the active
// path: q8_0 (as panels; bf16 / f32 for BF16 / F32 panels) where the path has panel tiles for the type and
// M >= their panel_min; the weights' own type for one row times f16/bf16 weights with a
// matrix-vector kernel (K a multiple of MM_MV_GROUP); else mm_vec_dot_type.
enum ggml_type mm_activation_type(enum ggml_type type, int64_t M, int64_t K);

// The kernels of the block types after q4_0 (quants-scalar.cpp, quants-x86.cpp), added to
// a path's table; the AVX-512 table has its own k-quant tiles and the AVX2 ones of the rest
// (iq4_nl's AVX-512 tiles are q4_0's, simd-avx512.cpp, which replaces them).
void add_block_quant_kernels_scalar(cpu_kernels & k);
void add_block_quant_kernels_avx2(cpu_kernels & k);   // no-op when not built for x86-64
void add_block_quant_kernels_avx512(cpu_kernels & k); // no-op when not built for x86-64
// The ternary types' tiles (quants-x86-ternary.cpp), added by add_block_quant_kernels_avx2 / _avx512.
void add_ternary_kernels_avx2(cpu_kernels & k);   // no-op when not built for x86-64
void add_ternary_kernels_avx512(cpu_kernels & k); // no-op when not built for x86-64
// The iq2 / iq1 types' tiles (quants-x86-iq2.cpp), added by add_block_quant_kernels_avx2 / _avx512.
void add_iq2_kernels_avx2(cpu_kernels & k);   // no-op when not built for x86-64
void add_iq2_kernels_avx512(cpu_kernels & k); // no-op when not built for x86-64
// The iq3 types' tiles (quants-x86-iq3.cpp), added by add_block_quant_kernels_avx2 / _avx512.
void add_iq3_kernels_avx2(cpu_kernels & k);   // no-op when not built for x86-64
void add_iq3_kernels_avx512(cpu_kernels & k); // no-op when not built for x86-64
// VNNI panel tiles of the k-quants and iq4_nl (quants-vnni.cpp), added to the VNNI table.
void add_panel_kernels_vnni(cpu_kernels & k);         // no-op when not built for x86-64
// q5_0_r16's matrix-vector kernel for the AVX2 table (quants-avx2-q5r16.cpp)
void add_q5_0_r16_kernels_avx2(cpu_kernels & k); // no-op when not built for x86-64
// matrix-vector kernels of the k-quants for the VNNI table (quants-vnni-matvec.cpp)
void add_matvec_kernels_vnni(cpu_kernels & k);       // no-op when not built for x86-64

} // namespace kvg
