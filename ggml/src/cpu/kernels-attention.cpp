// GGML_OP_FLASH_ATTN_EXT: softmax(q·K^T * scale [softcap] + slope * mask) · V, one pass
// over K/V with an online softmax: a running maximum and sum per query, the accumulator
// rescaled when the maximum grows.
//
// Work unit: a block of up to C (query row, head) pairs that read the same K/V head
// (consecutive query rows of a head, or the heads of a GQA group). Per chunk of K/V
// positions, the scores of the whole block come from the matmul register tiles (K rows
// as weights, the block's queries as activations), so each K row loaded serves C queries;
// V rows are folded into the C accumulators the same way. Positions whose mask is -inf
// cost no dot product. Units sit on a grid fixed by the shape, so results do not depend
// on the number of tasks.
//
// kvgraph additions: kv_len (src[4]) stops each sequence's loop at its valid length, so
// cache slots past it cost nothing; Q8_0 K/V rows are dequantized per chunk into scratch
// and then take the F32 path; K/V rows may pack several heads (a whole cache row); K may
// be stored by channel in groups of 32 positions with the newest group in F32 (src[5],
// src[6]: ggml_flash_attn_ext_grouped), gathered per chunk into the same scratch rows.
//
// Where the path has fa_dec_kernels (simd.h) a block holds up to MM_MAX_COLS pairs, so one
// token's GQA group reads each K and V row once, and K and V are read in the cache's own type
// (F16 rows, Q8_0 rows, Q8_0/F16 groups scored by channel) with no conversion pass; F32/F16
// rows get the tiles' bits. Decoding (at most DEC_MAX_Q query rows) past SEG positions, the
// cache length is cut into segments of SEG (a grid fixed by the shape): phase 0 runs every
// (block, segment) with its own maximum, sum and accumulators, phase 1 merges a block's
// segments, so every thread streams the cache even when there are fewer KV heads than threads.
//
// Prompts (more than DEC_MAX_Q query rows, AVX2, no softcap or ALiBi) take tile_unit: FA_TILE_Q
// (query row, head) pairs of one KV head against tiles of FA_TILE_KV positions (one K group when
// grouped), K and V converted to f32 once per tile for all the block's rows, scores and values as
// register tiles (simd.h's fa_tile_kernels); tiles the mask hides for every row are skipped.
#include "kernels.h"
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kvg;

namespace {

constexpr int64_t CHUNK = 64; // K/V positions scored before they are folded into the sum
// Heads up to this size score F32 K through dots_f32 (one call per chunk, all positions)
// instead of the tiles, whose per-call cost dominates for short rows (same bits below 64).
constexpr int64_t DOTS_MAX_D = 32;
constexpr int64_t DEC_MAX_Q = 4; // query rows up to which the cache length is split into segments
constexpr int64_t SEG = 512;     // positions per segment (a multiple of CHUNK)
static_assert(SEG % CHUNK == 0, "segments hold whole chunks");

struct fa_info {
    const ggml_tensor * q, * k, * v, * mask, * kv_len;
    const ggml_tensor * k_recent, * k_recent_group; // grouped K only
    int64_t D, Dv, n_q, n_kv, n_head, n_head_kv, ne3;
    int64_t kpack, vpack; // KV heads per k/v row slice
    bool k_quant, v_quant;
    bool k_grouped; // K by channel in groups of GGML_KV_GROUP positions
};

bool fa_kv_type_ok(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_Q8_0; }

// Row -> floats: the vector dequantizer for q8_0, the type's reference otherwise.
ggml_to_float_t row_to_float(ggml_type type) {
    return type == GGML_TYPE_Q8_0 ? cpu_active_kernels().dequantize_q8_0 : kvg::row_decoder(type);
}

// Elements [e0, e0 + n) of a quantized row as floats: the covering blocks go through tmp.
void dequant_part(ggml_type type, const char * row, int64_t e0, int64_t n, float * tmp, float * out) {
    const int64_t bs = ggml_blck_size(type);
    const int64_t b0 = e0 / bs, b1 = (e0 + n + bs - 1) / bs;
    const ggml_to_float_t to_float = row_to_float(type);
    if (e0 % bs == 0 && n % bs == 0) {
        to_float(row + b0 * ggml_type_size(type), out, n);
        return;
    }
    if (type == GGML_TYPE_Q8_0) { // a head inside a block: only its values (same products as the dequantizer)
        const block_q8_0 * blocks = (const block_q8_0 *) row;
        for (int64_t e = e0; e < e0 + n;) {
            const block_q8_0 & blk = blocks[e / QK8_0];
            const float d = ggml_fp16_to_fp32(blk.d);
            for (const int64_t end = std::min(e0 + n, (e / QK8_0 + 1) * QK8_0); e < end; ++e) out[e - e0] = blk.qs[e % QK8_0] * d;
        }
        return;
    }
    to_float(row + b0 * ggml_type_size(type), tmp, (b1 - b0) * bs);
    std::memcpy(out, tmp + (e0 - b0 * bs), n * sizeof(float));
}

fa_info inspect(const ggml_tensor * dst) {
    fa_info f;
    f.q = dst->src[0];
    f.k = dst->src[1];
    f.v = dst->src[2];
    f.mask = dst->src[3];
    f.kv_len = dst->src[4];
    f.k_recent = dst->src[5];
    f.k_recent_group = dst->src[6];
    f.k_grouped = f.k_recent != nullptr;
    if (!f.q || !f.k || !f.v) GGML_ABORT("flash_attn_ext: missing q, k or v");
    if (f.k_grouped != (f.k_recent_group != nullptr)) GGML_ABORT("flash_attn_ext: grouped K needs k_recent and k_recent_group");
    const ggml_tensor * q = f.q, * k = f.k, * v = f.v, * m = f.mask;
    if (q->type != GGML_TYPE_F32) GGML_ABORT("flash_attn_ext: q must be F32, got %s", ggml_type_name(q->type));
    for (const ggml_tensor * t : {k, v}) {
        if (!fa_kv_type_ok(t->type)) {
            GGML_ABORT("flash_attn_ext: k and v must be F32, F16 or Q8_0, got %s", ggml_type_name(t->type));
        }
        if (t->nb[0] != ggml_type_size(t->type)) GGML_ABORT("flash_attn_ext: k and v rows must be contiguous");
    }
    f.D = q->ne[0];
    f.Dv = dst->ne[0];
    f.n_q = q->ne[1];
    f.n_head = q->ne[2];
    f.ne3 = q->ne[3];
    f.n_kv = v->ne[1];
    f.vpack = f.Dv > 0 ? v->ne[0] / f.Dv : 0;
    f.n_head_kv = v->ne[2] * f.vpack;
    f.kpack = f.k_grouped ? 1 : f.D > 0 ? k->ne[0] / f.D : 0;
    f.k_quant = ggml_is_quantized(k->type) || f.k_grouped; // both read K through the dequantized scratch rows
    f.v_quant = ggml_is_quantized(v->type);
    const bool k_ok = f.k_grouped ? k->ne[0] == GGML_KV_GROUP && k->ne[1] == f.D * f.n_head_kv &&
                                        k->ne[2] * GGML_KV_GROUP >= f.n_kv && f.k_recent->type == GGML_TYPE_F32 &&
                                        f.k_recent->nb[0] == sizeof(float) && f.k_recent->ne[0] == k->ne[1] &&
                                        f.k_recent->ne[1] == GGML_KV_GROUP && f.k_recent->ne[2] == f.ne3 &&
                                        f.k_recent_group->type == GGML_TYPE_I32 && ggml_is_contiguous(f.k_recent_group) &&
                                        ggml_nelements(f.k_recent_group) == f.ne3
                                  : f.kpack > 0 && k->ne[0] == f.D * f.kpack && k->ne[1] == f.n_kv &&
                                        k->ne[2] * f.kpack == f.n_head_kv;
    if (!k_ok || f.vpack == 0 || v->ne[0] != f.Dv * f.vpack || k->ne[3] != f.ne3 || v->ne[3] != f.ne3 ||
        f.n_head_kv == 0 || f.n_head % f.n_head_kv != 0) {
        GGML_ABORT("flash_attn_ext: incompatible shapes q [%lld,%lld,%lld,%lld] k [%lld,%lld,%lld,%lld] v [%lld,%lld,%lld,%lld]",
                   (long long) q->ne[0], (long long) q->ne[1], (long long) q->ne[2], (long long) q->ne[3],
                   (long long) k->ne[0], (long long) k->ne[1], (long long) k->ne[2], (long long) k->ne[3],
                   (long long) v->ne[0], (long long) v->ne[1], (long long) v->ne[2], (long long) v->ne[3]);
    }
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float) || dst->ne[1] != f.n_head ||
        dst->ne[2] != f.n_q || dst->ne[3] != f.ne3) {
        GGML_ABORT("flash_attn_ext: dst must be F32 [Dv, n_head, n_q, ne3] with dense rows");
    }
    if (f.kv_len && (f.kv_len->type != GGML_TYPE_I32 || !ggml_is_contiguous(f.kv_len) || ggml_nelements(f.kv_len) != f.ne3)) {
        GGML_ABORT("flash_attn_ext: kv_len must be I32 [%lld] (one per sequence), got %s with %lld elements",
                   (long long) f.ne3, ggml_type_name(f.kv_len->type), (long long) ggml_nelements(f.kv_len));
    }
    if (m) {
        if (m->type != GGML_TYPE_F32 && m->type != GGML_TYPE_F16) GGML_ABORT("flash_attn_ext: mask must be F16 or F32");
        if (m->nb[0] != ggml_type_size(m->type) || m->ne[0] != f.n_kv || m->ne[1] < f.n_q || m->ne[2] == 0 ||
            m->ne[3] == 0 || f.n_head % m->ne[2] != 0 || f.ne3 % m->ne[3] != 0) {
            GGML_ABORT("flash_attn_ext: mask [%lld,%lld,%lld,%lld] does not fit n_kv %lld, n_q %lld",
                       (long long) m->ne[0], (long long) m->ne[1], (long long) m->ne[2], (long long) m->ne[3],
                       (long long) f.n_kv, (long long) f.n_q);
        }
    }
    return f;
}

// The few-query kernels for K and V (both set, or false: the tiles' path). Q8_0 rows need heads on
// block boundaries; F32 groups keep the gather path (its bits equal plain F32 rows').
bool pick_dec(const fa_info & f, const fa_dec_type ** dk, const fa_dec_type ** dv) {
    *dk = *dv = nullptr;
    const fa_dec_kernels * t = cpu_active_path() >= PATH_AVX2 ? fa_dec_kernels_avx2() : nullptr;
    if (!t || f.D % 8 != 0 || f.Dv % 8 != 0) return false;
    if (!f.k_grouped && f.k->type == GGML_TYPE_F32 && f.D <= DOTS_MAX_D && cpu_active_kernels().dots_f32) return false;
    auto of = [&](ggml_type type, int64_t head) -> const fa_dec_type * {
        if (type == GGML_TYPE_F32) return &t->f32;
        if (type == GGML_TYPE_F16) return &t->f16;
        return type == GGML_TYPE_Q8_0 && head % QK8_0 == 0 ? &t->q8_0 : nullptr;
    };
    *dk = f.k_grouped ? (f.k->type == GGML_TYPE_F32 ? nullptr : of(f.k->type, 0)) : of(f.k->type, f.D);
    *dv = of(f.v->type, f.Dv);
    return *dk && *dv;
}

// The prompt path: more query rows than decoding takes, no softcap or ALiBi, heads the tiles
// cover (q8_0 rows: heads on block boundaries).
const fa_tile_kernels * pick_tiles(const fa_info & f, float softcap, float max_bias) {
    const fa_tile_kernels * t = cpu_active_path() >= PATH_AVX2 ? fa_tile_kernels_avx2() : nullptr;
    if (!t || f.n_q <= DEC_MAX_Q || softcap != 0.0f || max_bias != 0.0f || f.D % 8 != 0 || f.Dv % 32 != 0)
        return nullptr;
    if (!f.k_grouped && f.k->type == GGML_TYPE_Q8_0 && f.D % QK8_0 != 0) return nullptr;
    return t;
}

// Segments of the cache length (1: none). Fixed by the shape: results do not depend on the tasks.
int64_t n_segments(const fa_info & f) { return f.n_q <= DEC_MAX_Q && f.n_kv > SEG ? (f.n_kv + SEG - 1) / SEG : 1; }

// Grouped K (see ggml_flash_attn_ext_grouped): positions [c0, c0 + cn) of KV head hk as
// rows of out [cn][Dp]. Chunks start on a group boundary; the newest group comes from the
// F32 rows of k_recent, the others are dequantized channel by channel.
static_assert(CHUNK % GGML_KV_GROUP == 0, "chunks must hold whole groups");
void gather_grouped_k(const fa_info & f, const char * kbase, int64_t hk, int64_t iq3, int64_t recent_group, int64_t c0,
                      int64_t cn, int64_t Dp, float * tmp, float * out) {
    const ggml_tensor * k = f.k, * kr = f.k_recent;
    const ggml_to_float_t to_float = row_to_float(k->type);
    for (int64_t j0 = 0; j0 < cn; j0 += GGML_KV_GROUP) {
        const int64_t g = (c0 + j0) / GGML_KV_GROUP, n = std::min<int64_t>(GGML_KV_GROUP, cn - j0);
        if (g == recent_group) {
            for (int64_t t = 0; t < n; ++t) {
                const char * row = (const char *) kr->data + t * kr->nb[1] + iq3 * kr->nb[2];
                std::memcpy(out + (j0 + t) * Dp, (const float *) row + hk * f.D, f.D * sizeof(float));
            }
            continue;
        }
        for (int64_t d = 0; d < f.D; ++d) {
            to_float(kbase + (hk * f.D + d) * k->nb[1] + g * k->nb[2], tmp, GGML_KV_GROUP);
            for (int64_t t = 0; t < n; ++t) out[(j0 + t) * Dp + d] = tmp[t];
        }
    }
}

// Per-task scratch for a block of MM_MAX_COLS queries: accumulators [C][Dv], scores and
// dot products [C][CHUNK] each, gathered queries [C][D], active-position flags [CHUNK];
// quantized K/V add dequantized rows [CHUNK][D] / [CHUNK][Dv] and a block buffer.
// The prompt path's tiles (tile_unit) take queries transposed [Dp][TQ], scores [TKV][TQ],
// accumulators [TQ][Dvp], K [TKV][Dp] (or [Dp][TKV] by channel), V [TKV][Dvp], and m, l, alpha [TQ].
constexpr int64_t TQ = FA_TILE_Q, TKV = FA_TILE_KV;
static_assert(TKV == GGML_KV_GROUP, "a tile of grouped K is one group");
int64_t scratch_floats(const fa_info & f) {
    const int64_t Dp = GGML_PAD(f.D, 16), Dvp = GGML_PAD(f.Dv, 16);
    const int64_t deq = f.k_quant || f.v_quant ? CHUNK * (Dp + Dvp) + std::max(Dp, Dvp) + 64 : 0;
    const int64_t tiles = TQ * Dp + TKV * TQ + TQ * Dvp + TKV * Dp + TKV * Dvp + 3 * TQ + 64;
    return std::max(MM_MAX_COLS * (Dvp + 2 * CHUNK + Dp) + CHUNK + deq, tiles);
}

// ALiBi slope of head h (1 when max_bias is 0).
float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const int64_t n_log2 = (int64_t) 1 << (int) std::floor(std::log2((double) n_head));
    const float m0 = std::pow(2.0f, -max_bias / n_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_log2);
    return h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
}

// One task's view of the op: the inputs, scaling, kernels and its scratch rows.
struct fa_run {
    fa_info f;
    float scale, max_bias, softcap;
    const cpu_kernels * kern;
    const mm_kernel * kdot; // quantized or grouped K: F32 rows after dequantizing/gathering into kdeq
    bool dec;               // the decode kernels (dk, dv, and dk_recent for grouped K's F32 group)
    const fa_dec_type *dk, *dv, *dk_recent;
    bool use_dots;          // score with dots_f32 (short F32 K rows)
    const fa_tile_kernels * tiles; // the prompt path (tile_unit), or nullptr
    int RN, QB;
    decltype(cpu_kernels::accum_f32) accum;
    int64_t Dp, Dvp;
    float * acc;     // [c][Dvp] accumulators
    float * s;       // [c][CHUNK] scores, then weights
    float * dots;    // [c][CHUNK]
    float * qbuf;    // [c][Dp] gathered queries
    uint8_t * active; // [CHUNK]
    float * kdeq;    // [CHUNK][Dp]
    float * vdeq;    // [CHUNK][Dvp]
    float * blk_tmp; // a block buffer
};

fa_run start_run(const ggml_compute_params * params, const ggml_tensor * dst) {
    fa_run r;
    r.f = inspect(dst);
    const fa_info & f = r.f;
    std::memcpy(&r.scale, (const float *) dst->op_params + 0, sizeof(float));
    std::memcpy(&r.max_bias, (const float *) dst->op_params + 1, sizeof(float));
    std::memcpy(&r.softcap, (const float *) dst->op_params + 2, sizeof(float));
    if (r.softcap != 0.0f) r.scale /= r.softcap; // s = softcap * tanh(qk * scale / softcap)

    r.kern = &cpu_active_kernels();
    r.kdot = &r.kern->mm[f.k->type == GGML_TYPE_F16 && !f.k_quant ? MM_F16 : MM_F32];
    r.dec = pick_dec(f, &r.dk, &r.dv);
    r.dk_recent = r.dec ? &fa_dec_kernels_avx2()->f32 : nullptr;
    r.use_dots = !r.dec && !f.k_quant && f.k->type == GGML_TYPE_F32 && f.D <= DOTS_MAX_D && r.kern->dots_f32;
    r.tiles = pick_tiles(f, r.softcap, r.max_bias);
    r.RN = r.kdot->rows;
    r.QB = r.dec ? MM_MAX_COLS : r.kdot->cols;
    r.accum = f.v->type == GGML_TYPE_F16 ? r.kern->accum_f16 : r.kern->accum_f32;

    r.Dp = GGML_PAD(f.D, 16);
    r.Dvp = GGML_PAD(f.Dv, 16);
    r.acc = (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + params->ith * scratch_floats(f);
    r.s = r.acc + MM_MAX_COLS * r.Dvp;
    r.dots = r.s + MM_MAX_COLS * CHUNK;
    r.qbuf = r.dots + MM_MAX_COLS * CHUNK;
    r.active = (uint8_t *) (r.qbuf + MM_MAX_COLS * r.Dp);
    r.kdeq = (float *) (r.active + CHUNK);
    r.vdeq = r.kdeq + CHUNK * r.Dp;
    r.blk_tmp = r.vdeq + CHUNK * r.Dvp;
    return r;
}

// One work unit: qb (query row, head) pairs of sequence iq3 that read KV head hk.
struct fa_block {
    int64_t hk, iq3;
    int qb;
    int64_t hs[MM_MAX_COLS], iqs[MM_MAX_COLS];
    const char * mrow[MM_MAX_COLS];
    float slope[MM_MAX_COLS], run_max[MM_MAX_COLS], run_sum[MM_MAX_COLS];
    float chunk_max[MM_MAX_COLS]; // the current chunk's largest score per query
    // KV head hk is element range [ke0, ke0 + D) of row slice hk / pack
    int64_t ke0, ve0;
    const char * kbase, * vbase;
    const char *khead, *vhead; // decode path: the head's first element in the cache's type
    int64_t recent_group;
    int64_t n_kv;     // padding-free: this sequence's valid length, then one past the last position the mask lets through
    int64_t kv_begin; // first chunk with a position the mask lets through
};

// The positions [lo, hi) of a mask row (F16 or F32) between its leading and trailing runs of
// -inf, within [lo, hi) as given; lo == hi when all of them are -inf. Trailing runs (unused
// cache slots, the causal triangle) are skipped 32 bytes, then 8 bytes at a time (a token's
// scan of a 128-slot F32 row took 5% of a tiny model's step 8 bytes at a time).
void live_range(const ggml_tensor * m, const char * row, int64_t & lo, int64_t & hi) {
    const bool f16 = m->type == GGML_TYPE_F16;
    const size_t es = f16 ? 2 : 4;
    const uint64_t all_masked = f16 ? 0xFC00FC00FC00FC00ull : 0xFF800000FF800000ull; // -inf in every element
    auto masked = [&](int64_t j) {
        return f16 ? ((const ggml_fp16_t *) row)[j] == 0xFC00 : ((const float *) row)[j] == -INFINITY;
    };
    const int64_t per_word = (int64_t) (8 / es);
    while (hi - lo >= 4 * per_word) {
        uint64_t w[4];
        std::memcpy(w, row + (hi - 4 * per_word) * es, 32);
        if (((w[0] ^ all_masked) | (w[1] ^ all_masked) | (w[2] ^ all_masked) | (w[3] ^ all_masked)) != 0) break;
        hi -= 4 * per_word;
    }
    while (hi - lo >= per_word) {
        uint64_t w;
        std::memcpy(&w, row + (hi - per_word) * es, 8);
        if (w != all_masked) break;
        hi -= per_word;
    }
    while (hi > lo && masked(hi - 1)) --hi;
    while (lo < hi && masked(lo)) ++lo;
}

// Narrows [begin, end) to the chunks holding positions some query of the block can see:
// causal masks and unused cache slots (-inf to the end of the row) then cost nothing. Whole
// chunks are dropped, so every score and sum is computed exactly as over the full range.
void live_span(const ggml_tensor * m, const fa_block & b, int64_t & begin, int64_t & end) {
    int64_t first = end, last = begin; // [first, last): positions some query sees
    for (int c = 0; c < b.qb; ++c) {
        if (c > 0 && b.mrow[c] == b.mrow[c - 1]) continue; // heads of one query row share it
        int64_t lo = begin, hi = end;
        live_range(m, b.mrow[c], lo, hi);
        if (lo < hi) { first = std::min(first, lo); last = std::max(last, hi); }
    }
    if (first >= last) { end = begin; return; } // every position masked: zero outputs
    begin = first / CHUNK * CHUNK;
    end = last;
}

// The (query row, head) pairs of block u (of `blocks` per KV head and sequence).
void locate_block(const fa_run & r, int64_t u, int64_t blocks, int64_t group, int64_t pairs, fa_block & b) {
    const fa_info & f = r.f;
    const ggml_tensor * m = f.mask;
    const int64_t blk = u % blocks;
    b.hk = (u / blocks) % f.n_head_kv;
    b.iq3 = u / (blocks * f.n_head_kv);
    b.qb = (int) std::min<int64_t>(r.QB, pairs - blk * r.QB);
    for (int c = 0; c < b.qb; ++c) {
        const int64_t pr = blk * r.QB + c;
        b.iqs[c] = pr / group;
        b.hs[c] = b.hk * group + pr % group;
        b.slope[c] = alibi_slope(r.max_bias, b.hs[c], f.n_head);
        b.run_max[c] = -INFINITY;
        b.run_sum[c] = 0.0f;
        b.mrow[c] = m ? (const char *) m->data + b.iqs[c] * m->nb[1] + (b.hs[c] % m->ne[2]) * m->nb[2] +
                            (b.iq3 % m->ne[3]) * m->nb[3]
                      : nullptr;
    }
}

// Gathers the block's queries, zeroes its accumulators and locates its K/V head and its live
// positions within segment seg of n_seg.
void start_block(const fa_run & r, int64_t u, int64_t blocks, int64_t group, int64_t pairs, int64_t seg, int64_t n_seg,
                 fa_block & b) {
    const fa_info & f = r.f;
    const ggml_tensor *q = f.q, *k = f.k, *v = f.v, *m = f.mask;
    locate_block(r, u, blocks, group, pairs, b);
    const int64_t hk = b.hk, iq3 = b.iq3;
    for (int c = 0; c < b.qb; ++c) {
        const char * qsrc = (const char *) q->data + b.iqs[c] * q->nb[1] + b.hs[c] * q->nb[2] + iq3 * q->nb[3];
        for (int64_t i = 0; i < f.D; ++i) r.qbuf[c * r.Dp + i] = *(const float *) (qsrc + i * q->nb[0]);
        std::fill(r.acc + c * r.Dvp, r.acc + c * r.Dvp + f.Dv, 0.0f);
    }
    b.ke0 = (hk % f.kpack) * f.D;
    b.ve0 = (hk % f.vpack) * f.Dv;
    b.kbase = (const char *) k->data + (f.k_grouped ? 0 : (hk / f.kpack) * k->nb[2]) + iq3 * k->nb[3];
    b.vbase = (const char *) v->data + (hk / f.vpack) * v->nb[2] + iq3 * v->nb[3];
    b.recent_group = f.k_grouped ? ((const int32_t *) f.k_recent_group->data)[iq3] : -1;
    // (only read by the decode kernels, which need the heads on block boundaries)
    b.khead = f.k_grouped ? b.kbase : b.kbase + b.ke0 / ggml_blck_size(k->type) * ggml_type_size(k->type);
    b.vhead = b.vbase + b.ve0 / ggml_blck_size(v->type) * ggml_type_size(v->type);
    if (!f.k_quant) b.kbase += b.ke0 * k->nb[0];
    if (!f.v_quant) b.vbase += b.ve0 * v->nb[0];
    b.n_kv = f.n_kv;
    if (f.kv_len) b.n_kv = std::max<int64_t>(0, std::min<int64_t>(b.n_kv, ((const int32_t *) f.kv_len->data)[iq3]));
    b.kv_begin = 0;
    if (n_seg > 1) {
        b.kv_begin = std::min(b.n_kv, seg * SEG);
        b.n_kv = std::min(b.n_kv, (seg + 1) * SEG);
    }
    if (m) live_span(m, b, b.kv_begin, b.n_kv);
}

// Scores start as the mask (times slope); positions at -inf are skipped later.
// Query c's F32 mask at c0 when add_scores can read it in place (no copy into the scores).
const float * direct_mask(const fa_run & r, const fa_block & b, int c, int64_t c0) {
    const bool ok = r.use_dots && r.kern->add_scores && r.softcap == 0.0f && b.mrow[c] && r.f.mask->type == GGML_TYPE_F32 &&
                    b.slope[c] == 1.0f;
    return ok ? (const float *) b.mrow[c] + c0 : nullptr;
}

void mask_scores(const fa_run & r, const fa_block & b, int64_t c0, int64_t cn) {
    const ggml_tensor * m = r.f.mask;
    for (int c = 0; c < b.qb; ++c) {
        float * sc = r.s + c * CHUNK;
        if (direct_mask(r, b, c, c0)) continue;
        if (!b.mrow[c]) {
            std::fill(sc, sc + cn, 0.0f);
            continue;
        }
        if (m->type == GGML_TYPE_F16) r.kern->f16_to_f32((const ggml_fp16_t *) b.mrow[c] + c0, sc, cn);
        else std::memcpy(sc, (const float *) b.mrow[c] + c0, cn * sizeof(float));
        if (b.slope[c] != 1.0f) {
            for (int64_t j = 0; j < cn; ++j) sc[j] = sc[j] == -INFINITY ? -INFINITY : b.slope[c] * sc[j];
        }
    }
}

// Decode path: q·k of the chunk's positions that some query sees, K read in its own type
// (grouped K by channel, its F32 group as rows).
void dec_dot_products(const fa_run & r, const fa_block & b, int64_t c0, int64_t cn) {
    const fa_info & f = r.f;
    const ggml_tensor * k = f.k;
    std::fill(r.active, r.active + cn, (uint8_t) 0);
    for (int c = 0; c < b.qb; ++c) { // query-major: the compiler vectorizes the inner loop
        const float * sc = r.s + c * CHUNK;
        for (int64_t j = 0; j < cn; ++j) r.active[j] |= (uint8_t) (sc[j] != -INFINITY);
    }
    if (!f.k_grouped) {
        r.dk->dots_rows(b.qb, cn, r.qbuf, r.Dp, b.khead + c0 * k->nb[1], k->nb[1], f.D, r.active, r.dots, CHUNK);
        return;
    }
    const ggml_tensor * kr = f.k_recent;
    for (int64_t j0 = 0; j0 < cn; j0 += GGML_KV_GROUP) {
        const int64_t g = (c0 + j0) / GGML_KV_GROUP, n = std::min<int64_t>(GGML_KV_GROUP, cn - j0);
        if (std::find(r.active + j0, r.active + j0 + n, (uint8_t) 1) == r.active + j0 + n) continue; // all masked
        if (g == b.recent_group) {
            const char * rows = (const char *) kr->data + b.iq3 * kr->nb[2] + b.hk * f.D * sizeof(float);
            r.dk_recent->dots_rows(b.qb, n, r.qbuf, r.Dp, rows, kr->nb[1], f.D, r.active + j0, r.dots + j0, CHUNK);
        } else {
            const char * rows = b.khead + b.hk * f.D * k->nb[1] + g * k->nb[2];
            r.dk->dots_channels(b.qb, n, r.qbuf, r.Dp, rows, k->nb[1], f.D, r.dots + j0, CHUNK);
        }
    }
}

// The tiles' path: RN K rows x the block's queries per register tile; fully masked tiles cost
// nothing, quantized K rows are dequantized per tile.
void tile_dot_products(const fa_run & r, const fa_block & b, int64_t c0, int64_t cn) {
    const fa_info & f = r.f;
    const ggml_tensor * k = f.k;
    const char * kchunk = f.k_quant ? (const char *) r.kdeq : b.kbase + c0 * k->nb[1];
    const size_t kstride = f.k_quant ? r.Dp * sizeof(float) : k->nb[1];
    // dots_f32 scores masked positions too (their scores stay -inf below)
    if (r.use_dots) r.kern->dots_f32(b.qb, cn, r.qbuf, r.Dp, kchunk, kstride, f.D, r.dots, CHUNK);
    for (int64_t j = 0; j < cn && !r.use_dots; j += r.RN) {
        const int rn = (int) std::min<int64_t>(r.RN, cn - j);
        bool any = false;
        for (int c = 0; c < b.qb; ++c) {
            for (int t = 0; t < rn; ++t) any |= r.s[c * CHUNK + j + t] != -INFINITY;
        }
        if (!any) continue;
        for (int t = 0; t < rn && f.k_quant && !f.k_grouped; ++t) {
            dequant_part(k->type, b.kbase + (c0 + j + t) * k->nb[1], b.ke0, f.D, r.blk_tmp, r.kdeq + (j + t) * r.Dp);
        }
        const mm_tile_args args = {f.D, kchunk + j * kstride, kstride, (const char *) r.qbuf, (size_t) r.Dp * sizeof(float),
                                   r.dots + j, CHUNK, false};
        r.kdot->tile[rn][b.qb](args);
    }
}

// Adds the scaled (and capped) q·k to the scores.
void add_dot_products(const fa_run & r, fa_block & b, int64_t c0, int64_t cn) {
    if (r.dec) dec_dot_products(r, b, c0, cn);
    else tile_dot_products(r, b, c0, cn);
    // one pass over the chunk (dots of skipped positions are stale, their scores -inf and kept)
    for (int c = 0; c < b.qb; ++c) {
        float * sc = r.s + c * CHUNK;
        const float * dot = r.dots + c * CHUNK;
        if (r.softcap == 0.0f && r.kern->add_scores) {
            const float * m = direct_mask(r, b, c, c0);
            b.chunk_max[c] = r.kern->add_scores(cn, m ? m : sc, dot, r.scale, sc);
            continue;
        }
        if (r.softcap == 0.0f) {
            for (int64_t j = 0; j < cn; ++j) sc[j] = sc[j] == -INFINITY ? sc[j] : sc[j] + dot[j] * r.scale;
        } else {
            for (int64_t j = 0; j < cn; ++j) {
                if (sc[j] != -INFINITY) sc[j] += r.softcap * std::tanh(dot[j] * r.scale);
            }
        }
        b.chunk_max[c] = max_f32(sc, cn);
    }
}

// Scores -> weights per query (online softmax: the accumulator is rescaled when the
// running maximum grows); marks the positions some query weighs. False: none does.
bool scores_to_weights(const fa_run & r, fa_block & b, int64_t cn) {
    std::fill(r.active, r.active + cn, (uint8_t) 0);
    bool any_active = false;
    for (int c = 0; c < b.qb; ++c) {
        float * sc = r.s + c * CHUNK;
        const float cmax = b.chunk_max[c];
        if (cmax == -INFINITY) { // whole chunk masked for this query
            std::fill(sc, sc + cn, 0.0f);
            continue;
        }
        if (cmax > b.run_max[c]) {
            // exp(-inf) = 0: the first unmasked chunk just zeroes the (empty) sum
            const float rescale = std::exp(b.run_max[c] - cmax);
            if (b.run_sum[c] != 0.0f) r.kern->scale_f32(r.f.Dv, rescale, r.acc + c * r.Dvp);
            b.run_sum[c] *= rescale;
            b.run_max[c] = cmax;
        }
        b.run_sum[c] += r.kern->softmax_weights(cn, sc, b.run_max[c], r.active);
        any_active = true; // cmax is finite: some position is weighed
    }
    return any_active;
}

// Folds the weighted V rows of the chunk's active positions into the accumulators.
void accumulate_values(const fa_run & r, const fa_block & b, int64_t c0, int64_t cn) {
    const fa_info & f = r.f;
    const ggml_tensor * v = f.v;
    if (r.dec) {
        r.dv->accum(b.qb, cn, r.s, CHUNK, r.active, b.vhead + c0 * v->nb[1], v->nb[1], f.Dv, r.acc, r.Dvp);
    } else if (f.v_quant) {
        for (int64_t j = 0; j < cn; ++j) {
            if (r.active[j]) dequant_part(v->type, b.vbase + (c0 + j) * v->nb[1], b.ve0, f.Dv, r.blk_tmp, r.vdeq + j * r.Dvp);
        }
        r.kern->accum_f32(b.qb, cn, r.s, CHUNK, r.active, (const char *) r.vdeq, r.Dvp * sizeof(float), f.Dv, r.acc, r.Dvp);
    } else {
        r.accum(b.qb, cn, r.s, CHUNK, r.active, b.vbase + c0 * v->nb[1], v->nb[1], f.Dv, r.acc, r.Dvp);
    }
}

// Output rows: the accumulators divided by their sums.
void write_block(const fa_run & r, const fa_block & b, ggml_tensor * dst) {
    for (int c = 0; c < b.qb; ++c) {
        float * out = (float *) ((char *) dst->data + b.hs[c] * dst->nb[1] + b.iqs[c] * dst->nb[2] + b.iq3 * dst->nb[3]);
        // a fully masked row has no weights at all: its output is zero, not 0/0
        const float inv = b.run_sum[c] > 0.0f ? 1.0f / b.run_sum[c] : 0.0f;
        for (int64_t i = 0; i < r.f.Dv; ++i) out[i] = r.acc[c * r.Dvp + i] * inv;
    }
}

// The work grid: blocks of QB (query row, head) pairs per KV head and sequence, each run over
// n_seg segments of the cache length (fixed by the shape and the path's kernels).
struct fa_grid {
    int64_t group, pairs, blocks, n_seg;
};
fa_grid grid_of(const fa_info & f, int QB) {
    fa_grid g;
    g.group = f.n_head / f.n_head_kv;
    g.pairs = g.group * f.n_q; // (query row, head) pairs per K/V head, query-major
    g.blocks = (g.pairs + QB - 1) / QB;
    g.n_seg = n_segments(f);
    return g;
}
int block_cols(const fa_info & f) {
    const fa_dec_type *dk, *dv;
    if (pick_dec(f, &dk, &dv)) return MM_MAX_COLS;
    return cpu_active_kernels().mm[f.k->type == GGML_TYPE_F16 && !f.k_quant ? MM_F16 : MM_F32].cols;
}

// A segment's result: per query its maximum, its sum and its accumulators (relative to that maximum).
int64_t partial_floats(const fa_info & f) { return MM_MAX_COLS * (2 + GGML_PAD(f.Dv, 16)); }

void save_partial(const fa_run & r, const fa_block & b, float * part) {
    for (int c = 0; c < b.qb; ++c) {
        part[c] = b.run_max[c];
        part[MM_MAX_COLS + c] = b.run_sum[c];
        std::memcpy(part + 2 * MM_MAX_COLS + c * r.Dvp, r.acc + c * r.Dvp, r.f.Dv * sizeof(float));
    }
}

// Phase 1: a block's segments merged in order (each rescaled to the largest maximum), then divided by the sum.
void merge_segments(const ggml_compute_params * params, const fa_run & r, const fa_grid & g, const float * parts,
                    ggml_tensor * dst) {
    const fa_info & f = r.f;
    const int64_t rec = partial_floats(f);
    task_chunks chunks(params, f.ne3 * f.n_head_kv * g.blocks, 1);
    fa_block b;
    for (int64_t u0, u1; chunks.next(u0, u1);) {
        for (int64_t u = u0; u < u1; ++u) {
            locate_block(r, u, g.blocks, g.group, g.pairs, b);
            const float * seg0 = parts + u * g.n_seg * rec;
            for (int c = 0; c < b.qb; ++c) {
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t s = 0; s < g.n_seg; ++s) {
                    if (seg0[s * rec + MM_MAX_COLS + c] > 0.0f) mx = std::max(mx, seg0[s * rec + c]);
                }
                float * acc = r.acc + c * r.Dvp;
                std::fill(acc, acc + f.Dv, 0.0f);
                for (int64_t s = 0; s < g.n_seg; ++s) {
                    const float * p = seg0 + s * rec;
                    if (!(p[MM_MAX_COLS + c] > 0.0f)) continue; // nothing seen in this segment
                    const float w = std::exp(p[c] - mx);
                    sum += w * p[MM_MAX_COLS + c];
                    const float * pa = p + 2 * MM_MAX_COLS + c * r.Dvp;
                    for (int64_t i = 0; i < f.Dv; ++i) acc[i] += w * pa[i];
                }
                b.run_sum[c] = sum;
            }
            write_block(r, b, dst);
        }
    }
}

// ---- prompts: blocks of TQ (query row, head) pairs against tiles of TKV cache positions ----------

// Elements [e0, e0 + n) of a cache row as floats (q8_0: e0 and n multiples of 32).
void row_floats(const fa_run & r, ggml_type type, const char * row, int64_t e0, int64_t n, float * out) {
    if (type == GGML_TYPE_F32) std::memcpy(out, (const float *) row + e0, n * sizeof(float));
    else if (type == GGML_TYPE_F16) r.kern->f16_to_f32((const ggml_fp16_t *) row + e0, out, n);
    else r.kern->dequantize_q8_0(row + e0 / QK8_0 * sizeof(block_q8_0), out, n);
}

// A block's view of the mask: each query row's mask row, and the rows that differ.
struct fa_tile_block {
    int64_t hk, iq3, p0, qb; // pairs [p0, p0 + qb) of KV head hk, sequence iq3
    const char * mrow[TQ];
    int n_distinct;
    const char * distinct[TQ];
};

enum tile_mask {
    TILE_SKIP,
    TILE_CLEAN,
    TILE_MIXED
};
// Mask values of positions [c0, c0 + cn) for the block's rows: all -inf (skip), all 0, or else.
tile_mask classify(const ggml_tensor * m, const fa_tile_block & b, int64_t c0, int64_t cn) {
    if (!m) return TILE_CLEAN;
    // by the bits: -inf, and zero of either sign (no conversion of the mask)
    const bool f16 = m->type == GGML_TYPE_F16;
    const uint32_t ninf = f16 ? 0xFC00u : 0xFF800000u, abs_mask = f16 ? 0x7FFFu : 0x7FFFFFFFu;
    uint32_t bits[TKV];
    bool any_live = false, all_zero = true;
    for (int i = 0; i < b.n_distinct; ++i) {
        if (f16) {
            uint16_t h[TKV];
            std::memcpy(h, (const ggml_fp16_t *) b.distinct[i] + c0, cn * sizeof(uint16_t));
            for (int64_t j = 0; j < cn; ++j) bits[j] = h[j];
        } else {
            std::memcpy(bits, (const float *) b.distinct[i] + c0, cn * sizeof(uint32_t));
        }
        for (int64_t j = 0; j < cn; ++j) {
            any_live |= bits[j] != ninf;
            all_zero &= (bits[j] & abs_mask) == 0;
        }
    }
    return !any_live ? TILE_SKIP : all_zero ? TILE_CLEAN : TILE_MIXED;
}

// Adds the mask to the tile's scores; positions past cn (and past the rows' masks) are -inf.
void mask_tile(const ggml_tensor * m, const fa_tile_block & b, int64_t c0, int64_t cn, float * s) {
    for (int64_t t = cn; t < TKV; ++t) std::fill(s + t * TQ, s + (t + 1) * TQ, -INFINITY);
    if (!m) return;
    for (int r = 0; r < b.qb; ++r) {
        for (int64_t t = 0; t < cn; ++t) {
            const int64_t j = c0 + t;
            s[t * TQ + r] += m->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *) b.mrow[r])[j])
                                                      : ((const float *) b.mrow[r])[j];
        }
    }
}

// The K tile at c0 as floats in kf; returns its element strides (position, channel).
std::pair<int64_t, int64_t> k_tile(const fa_run & r, const fa_tile_block & b, int64_t c0, int64_t cn, float * kf) {
    const fa_info & f = r.f;
    const ggml_tensor * k = f.k;
    const int64_t Dp = GGML_PAD(f.D, 16);
    if (!f.k_grouped) {
        const char * base = (const char *) k->data + (b.hk / f.kpack) * k->nb[2] + b.iq3 * k->nb[3];
        for (int64_t t = 0; t < cn; ++t)
            row_floats(r, k->type, base + (c0 + t) * k->nb[1], (b.hk % f.kpack) * f.D, f.D, kf + t * Dp);
        return {Dp, 1};
    }
    const int64_t g = c0 / GGML_KV_GROUP;
    if (g == ((const int32_t *) f.k_recent_group->data)[b.iq3]) { // the open group: f32 rows
        const ggml_tensor * kr = f.k_recent;
        for (int64_t t = 0; t < cn; ++t) {
            const char * row = (const char *) kr->data + t * kr->nb[1] + b.iq3 * kr->nb[2];
            std::memcpy(kf + t * Dp, (const float *) row + b.hk * f.D, f.D * sizeof(float));
        }
        return {Dp, 1};
    }
    const char * base = (const char *) k->data + g * k->nb[2] + b.iq3 * k->nb[3];
    for (int64_t d = 0; d < f.D; ++d) row_floats(r, k->type, base + (b.hk * f.D + d) * k->nb[1], 0, TKV, kf + d * TKV);
    return {1, TKV};
}

// Gathers the block's queries (transposed, times the scale) and mask rows; [begin, end): the
// positions some row sees, starting on a tile.
void start_tile_block(const fa_run & r, const fa_grid & g, int64_t u, fa_tile_block & b, float * qt, int64_t & begin,
                      int64_t & end) {
    const fa_info & f = r.f;
    const ggml_tensor *q = f.q, *m = f.mask;
    const int64_t blk = u % g.blocks;
    b.hk = (u / g.blocks) % f.n_head_kv;
    b.iq3 = u / (g.blocks * f.n_head_kv);
    b.p0 = blk * TQ;
    b.qb = std::min<int64_t>(TQ, g.pairs - b.p0);
    std::fill(qt, qt + f.D * TQ, 0.0f);
    b.n_distinct = 0;
    end = f.n_kv;
    if (f.kv_len) end = std::max<int64_t>(0, std::min<int64_t>(end, ((const int32_t *) f.kv_len->data)[b.iq3]));
    int64_t first = end, last = 0;
    for (int rr = 0; rr < b.qb; ++rr) {
        const int64_t pr = b.p0 + rr, iq = pr / g.group, h = b.hk * g.group + pr % g.group;
        const char * qrow = (const char *) q->data + iq * q->nb[1] + h * q->nb[2] + b.iq3 * q->nb[3];
        for (int64_t d = 0; d < f.D; ++d) qt[d * TQ + rr] = *(const float *) (qrow + d * q->nb[0]) * r.scale;
        if (!m) continue;
        b.mrow[rr] = (const char *) m->data + iq * m->nb[1] + (h % m->ne[2]) * m->nb[2] + (b.iq3 % m->ne[3]) * m->nb[3];
        if (std::find(b.distinct, b.distinct + b.n_distinct, b.mrow[rr]) != b.distinct + b.n_distinct) continue;
        b.distinct[b.n_distinct++] = b.mrow[rr];
        int64_t lo = 0, hi = end;
        live_range(m, b.mrow[rr], lo, hi);
        if (lo < hi) {
            first = std::min(first, lo);
            last = std::max(last, hi);
        }
    }
    if (m) end = first < last ? last : 0;
    begin = m && first < last ? first / TKV * TKV : 0;
}

// One block: per tile of the cache, scores, online softmax and the weighted values.
void tile_unit(const fa_run & r, const fa_grid & g, int64_t u, ggml_tensor * dst) {
    const fa_info & f = r.f;
    const int64_t Dp = GGML_PAD(f.D, 16), Dvp = GGML_PAD(f.Dv, 16);
    float * qt = r.acc; // the task's scratch (scratch_floats)
    float *s = qt + TQ * Dp, *o = s + TKV * TQ, *kf = o + TQ * Dvp, *vf = kf + TKV * Dp;
    float *m = vf + TKV * Dvp, *l = m + TQ, *alpha = l + TQ;
    fa_tile_block b;
    int64_t begin, end;
    start_tile_block(r, g, u, b, qt, begin, end);
    std::fill(m, m + TQ, -INFINITY);
    std::fill(l, l + TQ, 0.0f);
    std::fill(o, o + TQ * Dvp, 0.0f);
    const int nr = (int) (b.qb + 2) / 3 * 3;
    const ggml_tensor * v = f.v;
    const char * vbase = (const char *) v->data + (b.hk / f.vpack) * v->nb[2] + b.iq3 * v->nb[3];
    for (int64_t c0 = begin; c0 < end; c0 += TKV) {
        const int64_t cn = std::min(TKV, end - c0);
        const tile_mask cls = classify(f.mask, b, c0, cn);
        if (cls == TILE_SKIP) continue;
        const std::pair<int64_t, int64_t> st = k_tile(r, b, c0, cn, kf);
        r.tiles->scores(f.D, kf, st.first, st.second, qt, s);
        if (cls == TILE_MIXED || cn < TKV) mask_tile(cls == TILE_MIXED ? f.mask : nullptr, b, c0, cn, s);
        r.tiles->softmax(s, m, l, alpha);
        for (int64_t t = 0; t < cn; ++t)
            row_floats(r, v->type, vbase + (c0 + t) * v->nb[1], (b.hk % f.vpack) * f.Dv, f.Dv, vf + t * Dvp);
        r.tiles->values(cn, nr, s, vf, Dvp, f.Dv, alpha, o, Dvp);
    }
    for (int rr = 0; rr < b.qb; ++rr) {
        const int64_t pr = b.p0 + rr, iq = pr / g.group, h = b.hk * g.group + pr % g.group;
        float * out = (float *) ((char *) dst->data + h * dst->nb[1] + iq * dst->nb[2] + b.iq3 * dst->nb[3]);
        const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f; // a fully masked row: zeros
        for (int64_t i = 0; i < f.Dv; ++i) out[i] = o[rr * Dvp + i] * inv;
    }
}

} // namespace

// Chunks of blocks per task (task_chunks).
constexpr int FA_CHUNKS_PER_TASK = 4;

// Per-task scratch, then (with segments) one partial result per (block, segment).
static size_t work_bytes(const fa_info & f, int n_tasks) {
    const fa_grid g = grid_of(f, block_cols(f));
    const int64_t parts = g.n_seg > 1 ? f.ne3 * f.n_head_kv * g.blocks * g.n_seg * partial_floats(f) : 0;
    return ((size_t) std::max(n_tasks, 1) * scratch_floats(f) + (size_t) parts) * sizeof(float) + 64;
}

size_t ggml_flash_attn_ext_work_size(const ggml_tensor * dst, int n_tasks) { return work_bytes(inspect(dst), n_tasks); }

int ggml_flash_attn_ext_n_phases(const ggml_tensor * dst) { return n_segments(inspect(dst)) > 1 ? 2 : 1; }

void ggml_compute_forward_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst) {
    if (params->ith < 0 || params->ith >= params->nth) GGML_ABORT("flash_attn_ext: task %d of %d", params->ith, params->nth);
    const fa_run r = start_run(params, dst); // its scratch pointers are only used past this check
    if (!params->wdata || params->wsize < work_bytes(r.f, params->nth)) {
        GGML_ABORT("flash_attn_ext: work buffer of %zu bytes, need %zu", params->wsize, work_bytes(r.f, params->nth));
    }
    const fa_info & f = r.f;
    const fa_grid g = grid_of(f, r.QB);
    float * parts =
        (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + std::max(params->nth, 1) * scratch_floats(f);
    if (params->phase == 1) {
        merge_segments(params, r, g, parts, dst);
        return;
    }
    if (r.tiles) {
        const fa_grid gt = grid_of(f, (int) TQ);
        task_chunks chunks(params, f.ne3 * f.n_head_kv * gt.blocks, FA_CHUNKS_PER_TASK);
        for (int64_t u0, u1; chunks.next(u0, u1);) {
            for (int64_t u = u0; u < u1; ++u) tile_unit(r, gt, u, dst);
        }
        return;
    }
    const int64_t units = f.ne3 * f.n_head_kv * g.blocks * g.n_seg; // segments of a block adjacent
    // chunks of units taken from the node's counter: causal blocks differ in length (the last
    // query rows see the most positions) and segments past a sequence's length are empty, so
    // static shares would leave a task waiting
    task_chunks chunks(params, units, FA_CHUNKS_PER_TASK);
    fa_block b;
    for (int64_t u0, u1; chunks.next(u0, u1);) {
        for (int64_t u = u0; u < u1; ++u) {
            start_block(r, u / g.n_seg, g.blocks, g.group, g.pairs, u % g.n_seg, g.n_seg, b);
            for (int64_t c0 = b.kv_begin; c0 < b.n_kv; c0 += CHUNK) {
                const int64_t cn = std::min(CHUNK, b.n_kv - c0);
                if (f.k_grouped && !r.dec)
                    gather_grouped_k(f, b.kbase, b.hk, b.iq3, b.recent_group, c0, cn, r.Dp, r.blk_tmp, r.kdeq);
                mask_scores(r, b, c0, cn);
                add_dot_products(r, b, c0, cn);
                if (scores_to_weights(r, b, cn)) accumulate_values(r, b, c0, cn);
            }
            if (g.n_seg > 1) save_partial(r, b, parts + u * partial_floats(f));
            else write_block(r, b, dst);
        }
    }
}
