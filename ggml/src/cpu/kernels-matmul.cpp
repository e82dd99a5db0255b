// GGML_OP_MUL_MAT: dst[n, m] = dot(weight row n of src0, activation row m of src1), per
// batch (i12, i13), src0 broadcast over dims 2/3.
//
// Phase 0 (only when needed) converts src1 into dense rows of the weights' vec_dot_type
// in wdata: q8_0 or q8_K for quantized weights, F32 rows when src1's rows are strided elements.
// Phase 1 splits the output into blocks of weight rows x activation rows, hands the tasks
// contiguous ranges of blocks (chunks taken from the node's work counter under the DAG
// scheduler, static shares otherwise), and runs register tiles (simd.h) over K chunks, so a
// weight vector loaded once is used for several activation rows and the chunk of
// activations a block sweeps stays in cache. Tiles sit on a grid fixed by the shape, and
// every output element is summed in the same order whatever the tile, so results do not
// depend on the number of tasks or on which task took a chunk.
// Paths with panel tiles (simd.h) for the weight type convert the activations of products
// with at least the kernel's panel_min rows into q8_0 panels of 16 rows instead (whatever the type's
// vec_dot_type: the k-quants' too; BF16 panels for bf16 weights on the AVX-512 BF16 path,
// ggml's bf16 activations; F32 panels for f32 and f16 weights on the AVX-512 paths), and run panel
// tiles over them (an output's order is then the panel tiles' own, again the same for every
// tile, but not the other tiles' order: as in ggml, a product's bits depend on its number of
// activation rows); paths with a matrix-vector kernel pack a single activation row for it
// (same bits as the tiles).
#include "kernels.h"
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#ifdef KVG_USE_OPENBLAS
#include <cblas.h>
#endif

using namespace kvg;

namespace {

constexpr size_t ALIGN = 64; // cache line: converted rows start on one

struct mm_info {
    const ggml_tensor * src0;
    const ggml_tensor * src1;
    ggml_type vdt;
    bool convert;       // phase 0 writes src1 as dense vdt rows into wdata
    bool panel;         // ... as activation panels (simd.h) of MM_PANEL_COLS rows
    bool mv;            // ... as the packed row of a matrix-vector kernel (simd.h)
    bool unpack;        // interleaved (r16) weights without a kernel of theirs: tasks unpack blocks of rows
    mm_type kernel;     // whose kernels run (the plain type's when unpacking)
    size_t x_stride;    // bytes between converted (or packed) rows, or between panels
    int64_t K, N, M;
    int64_t n_panels;   // panels per batch
};

// Bytes of a panel (simd.h) of activation type vdt before element k (k a multiple of 32 for
// q8_0 panels).
size_t panel_offset(ggml_type vdt, int64_t k) {
    return vdt == GGML_TYPE_BF16  ? (size_t) ((k + 1) / 2) * MM_PANEL_BF16_PAIR
         : vdt == GGML_TYPE_F32   ? (size_t) k * MM_PANEL_F32_ELEM
                                  : (size_t) (k / QK8_0) * MM_PANEL_BLOCK;
}

#ifdef KVG_USE_OPENBLAS
// Large dense f32 products go to OpenBLAS's sgemm (blas_mul_mat) instead of the tiles.
bool blas_eligible(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    const size_t row = (size_t) K * sizeof(float);
    return a->type == GGML_TYPE_F32 && ggml_is_contiguous_rows(b) && M >= 32 && N >= 64 && K >= 64 && a->nb[1] % 4 == 0 &&
           a->nb[1] >= row && b->nb[1] % 4 == 0 && b->nb[1] >= row && dst->nb[1] >= (size_t) N * sizeof(float);
}
#else
bool blas_eligible(const ggml_tensor *) { return false; }
#endif

// Validates the node and derives what both phases need; aborts with the reason otherwise.
// Products of M activation rows that take the weight type's panel tiles, and those that take
// its matrix-vector kernel (one row in whole groups): inspect and mm_activation_type agree.
bool takes_panels(const mm_kernel & mk, int64_t M) { return mk.panel_rows > 0 && M >= mk.panel_min; }
bool takes_mv(const mm_kernel & mk, int64_t M, int64_t K) {
    return M >= 1 && M <= std::max(1, mk.mv_max) && !takes_panels(mk, M) && mk.mv && K % MM_MV_GROUP == 0;
}
// Interleaved (r16) weights that take neither of their kernels: the product unpacks them.
bool unpacks(ggml_type type, int64_t M, int64_t K) {
    const mm_kernel & own = cpu_active_kernels().mm[mm_type_of(type)];
    return is_r16(type) && !takes_mv(own, M, K) && !takes_panels(own, M);
}

mm_info inspect(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (!a || !b) GGML_ABORT("mul_mat: missing source");
    mm_type_of(a->type); // aborts for unsupported weight types
    if (b->type != GGML_TYPE_F32) GGML_ABORT("mul_mat: src1 must be F32, got %s", ggml_type_name(b->type));
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) GGML_ABORT("mul_mat: dst must be F32 with dense rows");
    if (a->ne[0] != b->ne[0] || a->ne[1] != dst->ne[0] || b->ne[1] != dst->ne[1] || b->ne[2] != dst->ne[2] ||
        b->ne[3] != dst->ne[3] || a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        GGML_ABORT("mul_mat: incompatible shapes src0 [%lld,%lld,%lld,%lld] src1 [%lld,%lld,%lld,%lld] dst [%lld,%lld,%lld,%lld]",
                   (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) a->ne[3],
                   (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2], (long long) b->ne[3],
                   (long long) dst->ne[0], (long long) dst->ne[1], (long long) dst->ne[2], (long long) dst->ne[3]);
    }
    if (a->nb[0] != ggml_type_size(a->type)) GGML_ABORT("mul_mat: src0 rows must be contiguous (nb[0] = %zu)", a->nb[0]);
    if (a->ne[0] % ggml_blck_size(a->type) != 0) {
        GGML_ABORT("mul_mat: row length %lld is not a multiple of the %s block size", (long long) a->ne[0], ggml_type_name(a->type));
    }
    if (dst->nb[1] % sizeof(float) != 0) GGML_ABORT("mul_mat: dst row stride must be a multiple of 4");
    if (is_r16(a->type) && (a->ne[1] % R16_ROWS != 0 || a->nb[1] != ggml_row_size(a->type, a->ne[0]))) {
        GGML_ABORT("mul_mat: %s weights need dense rows in groups of 16 (%lld rows, nb[1] = %zu)", ggml_type_name(a->type),
                   (long long) a->ne[1], a->nb[1]);
    }
    mm_info info;
    info.src0 = a;
    info.src1 = b;
    info.K = a->ne[0];
    info.N = a->ne[1];
    info.M = b->ne[1];
    info.kernel = mm_type_of(a->type);
    info.unpack = unpacks(a->type, info.M, info.K);
    if (info.unpack) info.kernel = mm_type_of(r16_plain(a->type));
    info.vdt = mm_activation_type(info.unpack ? r16_plain(a->type) : a->type, info.M, info.K);
    const mm_kernel & mk = cpu_active_kernels().mm[info.kernel];
    info.panel = takes_panels(mk, info.M) && !blas_eligible(dst); // then vdt is the panels' type
    info.convert = info.vdt != GGML_TYPE_F32 || !ggml_is_contiguous_rows(b) || info.panel;
    info.n_panels = (info.M + MM_PANEL_COLS - 1) / MM_PANEL_COLS;
    info.mv = takes_mv(mk, info.M, info.K); // then vdt is what the row is rounded to before packing
    info.x_stride = info.panel ? panel_offset(info.vdt, info.K)
                  : info.mv    ? GGML_PAD((size_t) (info.K / MM_MV_GROUP) * mk.mv_group_bytes, ALIGN)
                               : GGML_PAD(ggml_row_size(info.vdt, info.K), ALIGN);
    return info;
}

char * align_up(void * p) {
    return (char *) (((uintptr_t) p + ALIGN - 1) & ~(uintptr_t) (ALIGN - 1));
}

size_t conv_bytes(const mm_info & mi) {
    return mi.x_stride * (size_t) ((mi.panel ? mi.n_panels : mi.M) * mi.src1->ne[2] * mi.src1->ne[3]);
}

// What rows the packer of panels or of a matrix-vector row takes: f32 ones for BF16 and F32
// panels and f16/bf16 rows (rounded as they are packed), else the quantized rows.
ggml_type packer_input(const mm_info & mi) {
    return mi.vdt == GGML_TYPE_BF16 || mi.vdt == GGML_TYPE_F16 ? GGML_TYPE_F32 : mi.vdt;
}

// Floats of per-task scratch: strided src1 rows are gathered there before quantizing; for
// panels and packed rows, the rows to pack follow (none where the packer reads f32 rows
// itself: BF16 and F32 panels of dense rows, and f16/bf16 matrix-vector rows, gathered or not).
// The first part: rows to quantize or round gathered there (f32 rows are gathered where they go).
int64_t gather_slot_floats(const mm_info & mi) {
    return mi.vdt != GGML_TYPE_F32 && !ggml_is_contiguous_rows(mi.src1) ? GGML_PAD(mi.K, 16) : 0;
}
int64_t gather_floats(const mm_info & mi) {
    const bool dense = ggml_is_contiguous_rows(mi.src1);
    const int64_t gather = gather_slot_floats(mi);
    const bool f32_packer = packer_input(mi) == GGML_TYPE_F32;
    const int64_t q8_rows = mi.panel ? (f32_packer && dense ? 0 : MM_PANEL_COLS) : mi.mv && !f32_packer ? 1 : 0;
    return gather + (q8_rows ? q8_rows * (int64_t) GGML_PAD(ggml_row_size(packer_input(mi), mi.K), 64) / 4 : 0);
}

// Task ith's share [begin, end) of n items split into nth nearly equal ranges.
void split(int64_t n, int ith, int nth, int64_t & begin, int64_t & end) {
    begin = n * ith / nth;
    end = n * (ith + 1) / nth;
}

// Activation row r (over all batches) of src1 as K floats: the row itself when its elements
// are dense, else gathered into g.
const float * f32_row(const mm_info & mi, int64_t r, float * g) {
    const ggml_tensor * b = mi.src1;
    const int64_t i11 = r % mi.M, i12 = (r / mi.M) % b->ne[2], i13 = r / (mi.M * b->ne[2]);
    const char * src = (const char *) b->data + i11 * b->nb[1] + i12 * b->nb[2] + i13 * b->nb[3];
    if (ggml_is_contiguous_rows(b)) return (const float *) src;
    for (int64_t i = 0; i < mi.K; ++i) g[i] = *(const float *) (src + i * b->nb[0]);
    return g;
}

// Converts activation row r (over all batches) of src1 into `out` as the vec_dot type;
// tmp: K floats for gathering strided rows.
void convert_row(const mm_info & mi, int64_t r, char * out, float * tmp) {
    const cpu_kernels & kern = cpu_active_kernels();
    const float * row = f32_row(mi, r, mi.vdt == GGML_TYPE_F32 ? (float *) out : tmp);
    if (mi.vdt == GGML_TYPE_Q8_0) kern.quantize_q8_0(row, out, mi.K);
    else if (mi.vdt == GGML_TYPE_Q8_K) kern.quantize_q8_K(row, out, mi.K);
    else if (row != (const float *) out) std::memcpy(out, row, mi.K * sizeof(float));
}

void convert_src1(const ggml_compute_params * params, const mm_info & mi) {
    const ggml_tensor * b = mi.src1;
    char * conv = align_up(params->wdata);
    float * tmp = (float *) (conv + GGML_PAD(conv_bytes(mi), ALIGN)) + params->ith * gather_floats(mi);
    // panels and packed rows: a task quantizes rows into its scratch, then packs them
    const size_t q_stride = mi.panel ? GGML_PAD(ggml_row_size(packer_input(mi), mi.K), 64) : 0;
    char * qrows = (char *) (tmp + gather_slot_floats(mi));
    if (!mi.panel) {
        const mm_kernel & mk = cpu_active_kernels().mm[mi.kernel];
        int64_t r0, r1;
        split(mi.M * b->ne[2] * b->ne[3], params->ith, params->nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            char * row = conv + r * mi.x_stride;
            if (mi.mv && packer_input(mi) == GGML_TYPE_F32) {
                mk.pack_mv(f32_row(mi, r, tmp), row, mi.K); // rounded as packed
                continue;
            }
            convert_row(mi, r, mi.mv ? qrows : row, tmp);
            if (mi.mv) mk.pack_mv(qrows, row, mi.K);
        }
        return;
    }
    int64_t p0, p1;
    split(mi.n_panels * b->ne[2] * b->ne[3], params->ith, params->nth, p0, p1);
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t batch = p / mi.n_panels, c0 = (p % mi.n_panels) * MM_PANEL_COLS;
        const int n = (int) std::min<int64_t>(MM_PANEL_COLS, mi.M - c0);
        const void * rows[MM_PANEL_COLS];
        for (int c = 0; c < n; ++c) {
            char * q = qrows + c * q_stride;
            if (packer_input(mi) == GGML_TYPE_F32) {
                rows[c] = f32_row(mi, batch * mi.M + c0 + c, (float *) q);
                continue;
            }
            convert_row(mi, batch * mi.M + c0 + c, q, tmp);
            rows[c] = q;
        }
        const cpu_kernels & kern = cpu_active_kernels();
        const auto pack = mi.vdt == GGML_TYPE_BF16 ? kern.pack_panel_bf16 : mi.vdt == GGML_TYPE_F32 ? kern.pack_panel_f32 : kern.pack_panel;
        pack(rows, n, conv + p * mi.x_stride, mi.K);
    }
}

#ifdef KVG_USE_OPENBLAS
// Large dense f32 products go to sgemm, OpenBLAS single-threaded (our tasks are the
// threads). Weight rows are cut into fixed chunks handed out to the tasks, so every
// output comes from the same sgemm call whatever the number of tasks (same bits).
constexpr int64_t BLAS_CHUNK = 256;

void blas_mul_mat(const ggml_compute_params * params, const mm_info & mi, ggml_tensor * dst) {
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
    const ggml_tensor * a = mi.src0;
    const ggml_tensor * b = mi.src1;
    const int64_t n_chunks = (mi.N + BLAS_CHUNK - 1) / BLAS_CHUNK;
    const int64_t n_batch = b->ne[2] * b->ne[3];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    int64_t u0, u1;
    split(n_batch * n_chunks, params->ith, params->nth, u0, u1);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t i12 = (u / n_chunks) % b->ne[2], i13 = u / (n_chunks * b->ne[2]);
        const int64_t n0 = (u % n_chunks) * BLAS_CHUNK, n1 = std::min(mi.N, n0 + BLAS_CHUNK);
        const float * A = (const float *) ((const char *) a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3] + n0 * a->nb[1]);
        const float * B = (const float *) ((const char *) b->data + i12 * b->nb[2] + i13 * b->nb[3]);
        float * C = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]) + n0;
        // C[m][n] = sum_k B[m][k] * A[n][k]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) mi.M, (int) (n1 - n0), (int) mi.K, 1.0f, B,
                    (int) (b->nb[1] / 4), A, (int) (a->nb[1] / 4), 0.0f, C, (int) (dst->nb[1] / 4));
    }
}
#endif

// Chunks of blocks per task (task_chunks): enough that a thread finishing early finds work
// left, few enough that claiming one (an atomic add on a shared line) costs nothing. Zen 4,
// 2 threads, 1.1B q4_0 and iq4_nl generation: perf samples in thread waits went from 7-18%
// of the kernels' to 4-6% (with static halves, one thread streamed alone while the other waited).
constexpr int MM_CHUNKS_PER_TASK = 8;

// Elements per K chunk: the activation chunk of a block (about 64 rows) should stay in
// L2, and each chunk ends in a reduction and a store per output, which longer chunks
// amortize. BF16 panel tiles need little bandwidth per operation and gain from longer
// chunks (Zen 4, K = 5632: 210 -> 220 GFLOP/s with 4096). Float tiles (f32 activations)
// do best with a 32 KiB chunk of their four weight rows (Zen 4, 1 thread, M = 128,
// GFLOP/s of a 118 FMA peak, K = 2048 and 5632: f32 87-89 -> 93-97 with 2048 instead of
// 512, 4096 lost at K = 5632; f16 87-92 -> 103-106 with 4096). F32 panel tiles: 2048 as well
// (K = 768-5632: 106-111 GFLOP/s; 1024: 106-110, 512: 100-105).
// Matrix-vector kernels over several packed rows re-read them for every weight row: the
// chunk keeps the packed rows of one call within MV_X_BYTES, so they stay in L1 beside the
// weight stream (one row streams whole rows, as before).
constexpr int64_t MV_X_BYTES = 16384;

int64_t k_chunk(const mm_info & mi, int tile_cols) {
    if (mi.M == 1 || (mi.M <= tile_cols && !mi.mv)) return std::max<int64_t>(mi.K, 1); // stream whole rows
    const mm_kernel & mk = cpu_active_kernels().mm[mi.kernel];
    const int64_t x_rows = std::min<int64_t>(mi.M, tile_cols);
    int64_t kc = mi.vdt == GGML_TYPE_F32    ? (mi.src0->type == GGML_TYPE_F32 ? 2048 : 4096)
                 : mi.vdt == GGML_TYPE_BF16 ? 4096
                                            : 2048;
    if (mi.mv) kc = std::max<int64_t>(1, MV_X_BYTES / (x_rows * (int64_t) mk.mv_group_bytes)) * MM_MV_GROUP;
    return mi.K < kc + kc / 2 ? std::max<int64_t>(mi.K, 1) : kc; // avoid a tiny last chunk
}

// Short f32 weight rows times one activation row: the path's dots_f32 costs less per row
// than the tiles (same bits), up to rows of DOTS_MAX_K, past which its 16 parallel row
// streams lack the tiles' prefetches.
constexpr int64_t DOTS_MAX_K = 512;

bool use_dots(const mm_info & mi, int rn_tile, int64_t kc) {
    return mi.M == 1 && mi.src0->type == GGML_TYPE_F32 && mi.vdt == GGML_TYPE_F32 && kc >= mi.K && mi.K <= DOTS_MAX_K &&
           rn_tile > 1 && cpu_active_kernels().dots_f32;
}

// Weight rows [n0, n1) of a matrix-vector product through dots_f32; returns the first row left
// to the tiles: a lone last row, whose tile[1][1] sums in four chains.
int64_t dots_rows(const mm_info & mi, int rn_tile, const char * w, const char * x, float * out, int64_t n0, int64_t n1) {
    const int64_t n = (n1 - n0) % rn_tile == 1 ? n1 - n0 - 1 : n1 - n0;
    const size_t ws = mi.src0->nb[1];
    cpu_active_kernels().dots_f32(1, n, (const float *) x, 0, w + n0 * ws, ws, mi.K, out + n0, 0);
    return n0 + n;
}

// Register tile and block shape of a product: RN weight rows x RM activation rows per tile,
// blocks of BN x BM (multiples of the tile, so tiles stay on a fixed grid; BN a multiple of
// the groups of interleaved (r16) weights).
struct mm_shape {
    int RN, RM;
    int64_t BN, BM;
    bool mv_float; // matrix-vector products of float weights through mv_float
};

mm_shape shape_of(const mm_info & mi) {
    const mm_kernel & mk = cpu_active_kernels().mm[mi.kernel];
    mm_shape sh;
    // matrix-vector products use the tile height that streams best from memory (tiles
    // compute each element the same way, so the result does not change)
    sh.mv_float = mi.M == 1 && !mi.panel && !mi.mv && mk.mv_float;
    // (mv_rows may exceed the tiles' height: it is the mv kernels' row count)
    sh.RN = mi.panel ? mk.panel_rows : mi.mv || sh.mv_float ? mk.mv_rows : mi.M == 1 ? mm_one_row_height(mk) : mk.rows;
    sh.RM = mi.panel ? mk.panel_cols : mi.mv ? std::max(1, mk.mv_cols) : mk.cols;
    sh.BM = mi.M <= sh.RM ? mi.M : sh.RM * ((64 + sh.RM - 1) / sh.RM);
    int64_t unit = sh.RN;
    if (is_r16(mi.src0->type)) while (unit % R16_ROWS != 0) unit += sh.RN;
    sh.BN = mi.M <= sh.RM && !mi.unpack ? 16 : unit * ((64 + unit - 1) / unit);
    return sh;
}

// Per-task bytes for the plain rows a task unpacks from interleaved weights (one block of rows).
size_t unpack_bytes(const mm_info & mi) {
    return mi.unpack ? GGML_PAD((size_t) shape_of(mi).BN * mi.src0->nb[1], ALIGN) : 0;
}

// The n weight rows at wr as plain rows in `unpacked`, unpacked from their interleaved groups
// unless the previous block (*from) already did.
const char * unpack_block(const mm_info & mi, const char * wr, int64_t n, char * unpacked, const char ** from) {
    const ggml_tensor * a = mi.src0;
    if (*from != wr) {
        for (int64_t g = 0; g < n; g += R16_ROWS) {
            r16_unpack(r16_plain(a->type), wr + g * a->nb[1], unpacked + g * a->nb[1], a->nb[1], mi.K);
        }
        *from = wr;
    }
    return unpacked;
}

void compute(const ggml_compute_params * params, const mm_info & mi, ggml_tensor * dst) {
    const ggml_tensor * a = mi.src0;
    const ggml_tensor * b = mi.src1;
    const mm_kernel & mk = cpu_active_kernels().mm[mi.kernel];
    const mm_shape sh = shape_of(mi);
    const int RN = sh.RN, RM = sh.RM;
    const bool mv_float = sh.mv_float;
    const int64_t BM = sh.BM, BN = sh.BN;
    const bool grouped = is_r16(a->type) && !mi.unpack; // the interleaved layouts' own kernels
    const int64_t KC = k_chunk(mi, RM);
    const bool dots = use_dots(mi, RN, KC);
    const int64_t nbn = (mi.N + BN - 1) / BN, nbm = (mi.M + BM - 1) / BM;
    const int64_t ne12 = b->ne[2];
    const int64_t n_batch = ne12 * b->ne[3];
    const int64_t r2 = ne12 / a->ne[2], r3 = b->ne[3] / a->ne[3];

    const size_t w_elem_num = ggml_type_size(a->type), w_elem_den = ggml_blck_size(a->type);
    const size_t x_elem_num = ggml_type_size(mi.vdt), x_elem_den = ggml_blck_size(mi.vdt);

    const char * conv = mi.convert ? align_up(params->wdata) : nullptr;
    const size_t x_stride = mi.convert ? mi.x_stride : b->nb[1];
    const int64_t out_stride = (int64_t) (dst->nb[1] / sizeof(float));
    // plain rows unpacked from interleaved groups, kept while consecutive blocks share them
    char * unpacked = mi.unpack ? align_up(params->wdata) + GGML_PAD(conv_bytes(mi), ALIGN) +
                                  (size_t) params->nth * gather_floats(mi) * sizeof(float) + params->ith * unpack_bytes(mi)
                                : nullptr;
    const char * unpacked_from = nullptr;

    // blocks in chunks: tasks take them from one pool under the DAG scheduler (task_chunks)
    task_chunks chunks(params, n_batch * nbn * nbm, MM_CHUNKS_PER_TASK);
    for (int64_t u0, u1; chunks.next(u0, u1);) {
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t batch = u / (nbn * nbm);
            const int64_t bn = (u / nbm) % nbn, bm = u % nbm;
            const int64_t i12 = batch % ne12, i13 = batch / ne12;
            const char * w = (const char *) a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
            const char * x = mi.convert ? conv + batch * (mi.panel ? mi.n_panels : mi.M) * mi.x_stride
                                        : (const char *) b->data + i12 * b->nb[2] + i13 * b->nb[3];
            float * out = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]);
            const int64_t n0 = bn * BN, m0 = bm * BM, m1 = std::min(mi.M, m0 + BM);
            // dots_f32 sums each row alone: the task's next blocks of this batch join this call
            // (a lone last row, left to the tiles, still only ends the matrix: BN % RN == 0)
            const int64_t last = dots && BN % RN == 0 && nbm == 1 ? std::min(u1, (batch + 1) * nbn) - 1 : u;
            const int64_t n1 = std::min(mi.N, n0 + (last - u + 1) * BN);
            u = last;
            // weight row i at wr + (i - n0) * nb[1]
            const char * wr = w + n0 * a->nb[1];
            if (mi.unpack) wr = unpack_block(mi, wr, n1 - n0, unpacked, &unpacked_from);
            const int64_t nd = dots ? dots_rows(mi, RN, w, x, out, n0, n1) : n0;
            for (int64_t k0 = 0; nd < n1 && (k0 == 0 || k0 < mi.K); k0 += KC) {
                const int64_t kc = std::min(KC, mi.K - k0);
                const size_t w_off = grouped ? (size_t) (k0 / w_elem_den) * r16_block_bytes(a->type) : k0 * w_elem_num / w_elem_den;
                const size_t x_off = mi.panel ? panel_offset(mi.vdt, k0)
                                   : mi.mv    ? k0 / MM_MV_GROUP * mk.mv_group_bytes
                                              : k0 * x_elem_num / x_elem_den;
                for (int64_t i = nd; i < n1; i += RN) {
                    const int rn = (int) std::min<int64_t>(RN, n1 - i);
                    // the interleaved layouts' kernels take the group and the row in it
                    const int64_t wi = grouped ? (i - n0) / R16_ROWS * R16_ROWS : i - n0;
                    for (int64_t j = m0; j < m1; j += RM) {
                        const int rm = (int) std::min<int64_t>(RM, m1 - j);
                        const char * xj = x + (mi.panel ? j / MM_PANEL_COLS : j) * x_stride + x_off;
                        // n_x set here, not in a copy: a copy's 16-byte loads of these 8-byte stores
                        // missed store forwarding (perf, 1.1B q4_0, 16 sequences: 2% of a step)
                        const mm_tile_args args = {kc,
                                                   wr + wi * a->nb[1] + w_off,
                                                   a->nb[1],
                                                   xj,
                                                   x_stride,
                                                   out + j * out_stride + i,
                                                   out_stride,
                                                   k0 > 0,
                                                   mi.mv || mv_float ? rn : rm,
                                                   (int) (i - n0 - wi),
                                                   mi.mv ? rm : 1};
                        if (mi.panel) mk.panel[rn](args);
                        else if (mi.mv) mk.mv(args);
                        else if (mv_float) mk.mv_float(args);
                        else mk.tile[rn][rm](args);
                    }
                }
            }
        }
    }
}

} // namespace

ggml_type kvg::mm_activation_type(ggml_type type, int64_t M, int64_t K) {
    const mm_kernel & mk = cpu_active_kernels().mm[mm_type_of(type)];
    // interleaved weights without their kernel for this product run the plain type's on unpacked rows
    if (unpacks(type, M, K)) return mm_activation_type(r16_plain(type), M, K);
    // one row times float weights with a matrix-vector kernel: the row rounded to the weights'
    // type, as ggml's vec_dot_type (the SIMD paths)
    if (takes_mv(mk, M, K) && mm_vec_dot_type(type) == GGML_TYPE_F32) return type;
    if (!takes_panels(mk, M)) return mm_vec_dot_type(type);
    return mk.panel_kind == MM_PANEL_BF16 ? GGML_TYPE_BF16 : mk.panel_kind == MM_PANEL_F32 ? GGML_TYPE_F32 : GGML_TYPE_Q8_0;
}

// F32 weights times dense F32 rows too few for the F32 panels: no conversion, so the
// scheduler's questions (asked per node and token) are answered without the full inspection;
// the kernel still validates the node.
static bool plain_f32(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    return a && b && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 && ggml_is_contiguous_rows(b) &&
           !takes_panels(cpu_active_kernels().mm[MM_F32], b->ne[1]);
}

int ggml_mul_mat_n_phases(const ggml_tensor * dst) { return plain_f32(dst) ? 1 : inspect(dst).convert ? 2 : 1; }

size_t ggml_mul_mat_work_size(const ggml_tensor * dst, int n_tasks) {
    if (plain_f32(dst)) return 0;
    const mm_info mi = inspect(dst);
    if (!mi.convert) return 0;
    return ALIGN + GGML_PAD(conv_bytes(mi), ALIGN) + (size_t) std::max(n_tasks, 1) * (gather_floats(mi) * sizeof(float) + unpack_bytes(mi));
}

void ggml_compute_forward_mul_mat(const ggml_compute_params * params, ggml_tensor * dst) {
    const mm_info mi = inspect(dst);
    if (params->ith < 0 || params->ith >= params->nth) GGML_ABORT("mul_mat: task %d of %d", params->ith, params->nth);
    if (mi.convert) {
        if (params->wsize < ggml_mul_mat_work_size(dst, params->nth) || !params->wdata) {
            GGML_ABORT("mul_mat: work buffer of %zu bytes, need %zu", params->wsize, ggml_mul_mat_work_size(dst, params->nth));
        }
        if (params->phase == 0) {
            convert_src1(params, mi);
            return;
        }
    }
#ifdef KVG_USE_OPENBLAS
    if (blas_eligible(dst)) {
        blas_mul_mat(params, mi, dst);
        return;
    }
#endif
    compute(params, mi, dst);
}
