// The dependency-edge rules: the one place that decides which ops must run after which.
//
// Memory model. Every tensor's bytes are (root, [begin, end)): root is view_src (ggml
// keeps view_src pointing at the tensor that owns the bytes) or the tensor itself, and
// the extent runs from the first to one past the last byte the tensor can touch. For
// contiguous tensors that is exact. For strided views (permuted, row-strided, per-head
// slices) it is the hull of the touched bytes: it never misses a real overlap, but may
// report one where interleaved rows do not actually touch (an extra edge, never a
// missing one).
//
// Accesses. Creating an op reads the extent of each of its sources (except cpy's
// destination, src[1], which it only writes). An op whose result is
// a view of existing memory (cpy, set_rows, *_inplace, custom *_inplace) also writes the
// extent of its result. View ops (view/reshape/permute/transpose) touch no bytes. set_rows
// writes rows chosen at run time, so its write is the whole destination view (conservative).
//
// Rules, applied in the order the program created the ops, per root buffer:
//   RAW  a read gets an edge to each overlapping write since the last write that covers
//        the whole read extent (that covering write included).
//   WAW  a write gets an edge to each overlapping write since the last write covering it.
//   WAR  a write gets an edge to each overlapping read since that covering write.
// Stopping at a covering write is sound: everything before it that overlaps is already
// ordered before it by these same rules, and edges compose. A computed root (an op's own
// result) counts as written by that op before any logged access: reads through a view
// with no data edge to it (ggml_view_tensor) get a RAW edge to it, writes a WAW edge.
//
// Pruning: a new write removes logged accesses lying fully inside its extent (they are
// ordered before it, so any later access that conflicts with them conflicts with it).
// The cost of an op is therefore O(live accesses to the buffers it touches), not O(graph).
#include "ggml-impl.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace {

struct access {
    ggml_tensor * op;
    size_t begin, end;
    uint64_t seq; // creation order
};

struct buffer_log {
    std::vector<access> writes;
    std::vector<access> reads;
};

bool overlaps(size_t b0, size_t e0, size_t b1, size_t e1) { return b0 < e1 && b1 < e0; }
bool covers(const access & a, size_t b, size_t e) { return a.begin <= b && e <= a.end; }

// ops that compute nothing never touch bytes
bool touches_memory(const ggml_tensor * t) { return t->op != GGML_OP_NONE && !ggml_op_is_view(t->op); }

} // namespace

struct ggml_hazard_log {
    std::unordered_map<const ggml_tensor *, buffer_log> buffers;
    uint64_t next_seq = 0;
};

ggml_hazard_log * ggml_hazards_new(void) { return new ggml_hazard_log(); }
void ggml_hazards_clear(ggml_hazard_log * log) { log->buffers.clear(); }
void ggml_hazards_free(ggml_hazard_log * log) { delete log; }
void ggml_hazards_reset(ggml_context * ctx) { ggml_hazards_clear(ctx->hazards); }

bool ggml_op_reads_src(const ggml_tensor * t, int i) {
    return t->src[i] != nullptr && !(t->op == GGML_OP_CPY && i == 1);
}

void ggml_tensor_extent(const ggml_tensor * t, const ggml_tensor ** root, size_t * begin, size_t * end) {
    *root = t->view_src ? t->view_src : t;
    *begin = t->view_src ? t->view_offs : 0;
    *end = *begin + ggml_nbytes(t);
}

// Index of the latest write covering [b, e), or -1.
static long last_covering_write(const buffer_log & log, size_t b, size_t e) {
    for (long i = (long) log.writes.size() - 1; i >= 0; --i) {
        if (covers(log.writes[i], b, e)) return i;
    }
    return -1;
}

static void record_read(ggml_context * ctx, ggml_tensor * op, const ggml_tensor * src) {
    const ggml_tensor * root;
    size_t b, e;
    ggml_tensor_extent(src, &root, &b, &e);
    if (b == e) return;
    buffer_log & log = ctx->hazards->buffers[root];
    const long stop = last_covering_write(log, b, e);
    for (long i = (long) log.writes.size() - 1; i >= 0 && i >= stop; --i) {
        const access & w = log.writes[i];
        if (w.op != op && overlaps(w.begin, w.end, b, e)) ggml_push_dep(ctx, op, w.op, GGML_DEP_RAW);
    }
    if (stop < 0 && src->view_src && src->op == GGML_OP_NONE && touches_memory(root)) {
        // a plain view (ggml_view_tensor) of an op's result has no data edge to that op
        ggml_push_dep(ctx, op, const_cast<ggml_tensor *>(root), GGML_DEP_RAW);
    }
    log.reads.push_back({op, b, e, ctx->hazards->next_seq++});
}

static void record_write(ggml_context * ctx, ggml_tensor * op) {
    const ggml_tensor * root;
    size_t b, e;
    ggml_tensor_extent(op, &root, &b, &e);
    if (b == e) return;
    buffer_log & log = ctx->hazards->buffers[root];
    const long stop = last_covering_write(log, b, e);
    for (long i = (long) log.writes.size() - 1; i >= 0 && i >= stop; --i) {
        const access & w = log.writes[i];
        if (w.op != op && overlaps(w.begin, w.end, b, e)) ggml_push_dep(ctx, op, w.op, GGML_DEP_WAW);
    }
    const uint64_t since = stop >= 0 ? log.writes[stop].seq : 0;
    for (long i = (long) log.reads.size() - 1; i >= 0 && log.reads[i].seq >= since; --i) {
        const access & r = log.reads[i];
        if (r.op != op && overlaps(r.begin, r.end, b, e)) ggml_push_dep(ctx, op, r.op, GGML_DEP_WAR);
    }
    if (stop < 0 && touches_memory(root)) {
        // the root's own op produced these bytes: overwrite them only after it ran
        ggml_push_dep(ctx, op, const_cast<ggml_tensor *>(root), GGML_DEP_WAW);
    }
    // prune what this write dominates, then log it
    auto inside = [&](const access & a) { return b <= a.begin && a.end <= e && a.op != op; };
    log.writes.erase(std::remove_if(log.writes.begin(), log.writes.end(), inside), log.writes.end());
    log.reads.erase(std::remove_if(log.reads.begin(), log.reads.end(), inside), log.reads.end());
    log.writes.push_back({op, b, e, ctx->hazards->next_seq++});
}

void ggml_hazards_on_new_op(ggml_context * ctx, ggml_tensor * t) {
    if (!touches_memory(t)) return;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (ggml_op_reads_src(t, i)) record_read(ctx, t, t->src[i]);
    }
    if (ggml_writes_borrowed_memory(t)) record_write(ctx, t);
}
