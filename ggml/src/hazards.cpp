// The dependency-edge rules: the one place that decides what an op touches, which ops
// must run after which, and which of them a graph pulls in.
//
// Memory model. Every tensor's bytes are (root, [begin, end)): root is view_src (ggml
// keeps view_src pointing at the tensor that owns the bytes) or the tensor itself, and
// the extent runs from the first to one past the last byte the tensor can touch. An
// access is dense when it touches every byte of its extent (contiguous, or permuted
// without gaps); a strided view (rows with gaps, per-head slices, a transposed block)
// touches only some. Overlap is judged on extents: it never misses a real overlap, but
// may report one where interleaved rows do not actually touch (an extra edge, never a
// missing one).
//
// Accesses (ggml_op_accesses). A computing op reads the extent of each of its sources
// (except cpy's destination, src[1], which it only writes) and writes the extent of its
// result: its own bytes, or borrowed ones when the result is a view (cpy, set_rows,
// *_inplace, custom *_inplace). set_inplace and acc_inplace are exact instead: their
// result is a view of all of a, but they write only the region b lands in (acc also
// reads it) and do not touch a's other bytes, which keep their earlier writers for later
// readers; their data edge to a still runs them after a's producer. View ops
// (view/reshape/permute/transpose) and leafs touch no bytes. set_rows writes rows chosen at run time, so its write is the whole
// destination view (conservative); the rows it does not write keep their earlier
// contents, which its result exposes, so it also reads its destination (a
// read-modify-write: it waits for, and pulls in, the earlier writers of those bytes).
//
// Rules (ggml_hazard_rules), applied to accesses in sequence, per root buffer. A write
// covers an extent when it is dense and its extent contains it: only then are all the
// bytes there its own.
//   RAW  a read gets an edge to each overlapping write since the last write that covers
//        the whole read extent (that covering write included).
//   WAW  a write gets an edge to each overlapping write since the last write covering it.
//   WAR  a write gets an edge to each overlapping read since that covering write.
// Stopping at a covering write is sound: everything before it that overlaps is already
// ordered before it by these same rules, and edges compose. A strided write never stops a
// scan: the bytes in its extent that it skips keep their earlier writers, which a later
// reader needs (and pulls in). A new dense write drops logged accesses lying fully inside
// its extent (they are ordered before it, so anything that conflicts with them later
// conflicts with it); a strided write drops nothing. So the cost of an access is O(live
// accesses to its buffer), not O(program).
//
// Two sequences use the rules. At op creation (ggml_hazards_on_new_op), per context, in
// the order the program creates ops: the edges become the op's control edges (edges that
// duplicate a data edge are left out). At schedule time (schedule.cpp), per graph, in
// execution order: there they order nodes no creation edge orders (ops of two contexts,
// hand-built graphs, logs cleared by ggml_hazards_reset), exactly as ggml's sequential
// order would.
//
// Lifetime of edges. An edge orders two ops inside the graph being built; it never pulls
// into a graph an op that another graph already holds. Building a graph follows data
// edges always (ggml's meaning: a source is recomputed wherever it is used) but a control
// edge only when (ggml_dep_pulls):
//   - it is RAW or MANUAL: the reader needs the bytes the writer produces (the KV-cache
//     pattern: a cpy into the cache that nothing expanded, read later in the same graph),
//     or the user asked for the order. WAR and WAW edges only order: an earlier reader or
//     writer that no node of this graph needs is not run (as in ggml, where an op nobody
//     expanded never runs);
//   - and its target is held by no graph, or by this one (after ggml_graph_clear). An op
//     an earlier graph holds has run, or will run, with that graph: running it again
//     would redo an old write from today's inputs.
// For the same reason a context's log forgets accesses of ops that a graph other than the
// one it most recently fed holds: once a program builds a new graph from a context, the
// earlier graph's ops cannot be pulled into it, and edges to them would only grow. (A
// program that goes back to extend an older graph still runs correctly: the schedule's
// edges order its nodes.)
//
// Orders through ops that do not run. The rules lean on composition: a write that covers
// an earlier write W is ordered only after W, and W after the readers before it. When W
// runs in no graph (a dead write: overwritten before anyone read it), that chain still
// holds: every consumer of edges (ggml_for_each_pred: expansion, schedule, planner,
// validator) looks through an op that a control edge leads to and that runs nowhere, to
// the ops it waited for. Expansion keeps the node list a topological order of these edges:
// a node whose WAR/WAW edge leads outside the graph stays open, and when a later
// expansion adds an op it must follow, the list is sorted again (graph.cpp).
//
// Edges between contexts. Hazard edges join ops of one context (one log); a manual edge
// (ggml_add_control_dep) may join two, and is dropped when either context is freed or
// reset (context.cpp), so no edge points at freed memory.
#include "ggml-impl.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace {

struct logged_access {
    ggml_tensor * op;
    size_t begin, end;
    uint64_t seq; // order of recording
    bool dense;   // every byte of [begin, end) is touched
};

struct buffer_log {
    std::vector<logged_access> writes;
    std::vector<logged_access> reads;
    size_t size_after_prune = 0;
};

bool overlaps(size_t b0, size_t e0, size_t b1, size_t e1) { return b0 < e1 && b1 < e0; }
// A write covers [b, e) only if it writes every byte of it: a strided write's span holds
// bytes it leaves alone, and their earlier writers must stay visible.
bool covers(const logged_access & w, size_t b, size_t e) { return w.dense && w.begin <= b && e <= w.end; }

// Index of the latest write covering [b, e), or -1.
long last_covering_write(const buffer_log & log, size_t b, size_t e) {
    for (long i = (long) log.writes.size() - 1; i >= 0; --i) {
        if (covers(log.writes[i], b, e)) return i;
    }
    return -1;
}

} // namespace

struct ggml_hazard_rules::impl {
    std::unordered_map<const ggml_tensor *, buffer_log> buffers;
    uint64_t next_seq = 0;
    bool (*dead)(const ggml_tensor * op, const void * arg) = nullptr;
    const void * dead_arg = nullptr;

    bool is_dead(const ggml_tensor * op) const { return dead && dead(op, dead_arg); }

    // amortized: a log is filtered only after it doubled since the last time
    void prune_dead(buffer_log & log) {
        if (!dead || log.writes.size() + log.reads.size() < 2 * log.size_after_prune + 16) return;
        auto gone = [&](const logged_access & a) { return is_dead(a.op); };
        log.writes.erase(std::remove_if(log.writes.begin(), log.writes.end(), gone), log.writes.end());
        log.reads.erase(std::remove_if(log.reads.begin(), log.reads.end(), gone), log.reads.end());
        log.size_after_prune = log.writes.size() + log.reads.size();
    }
};

ggml_hazard_rules::ggml_hazard_rules() : p(new impl()) {}
ggml_hazard_rules::~ggml_hazard_rules() { delete p; }
void ggml_hazard_rules::clear() { p->buffers.clear(); }
void ggml_hazard_rules::set_dead_filter(bool (*dead)(const ggml_tensor *, const void *), const void * arg) {
    p->dead = dead;
    p->dead_arg = arg;
}

void ggml_hazard_rules::record_impl(ggml_tensor * op, const ggml_access & a, void (*cb)(void *, ggml_tensor *, ggml_dep_kind),
                                    void * f) {
    if (a.begin >= a.end) return;
    buffer_log & log = p->buffers[a.root];
    p->prune_dead(log);
    auto edge = [&](const logged_access & x, ggml_dep_kind kind) {
        if (x.op != op && overlaps(x.begin, x.end, a.begin, a.end) && !p->is_dead(x.op)) cb(f, x.op, kind);
    };
    const long stop = last_covering_write(log, a.begin, a.end);
    for (long i = (long) log.writes.size() - 1; i >= 0 && i >= stop; --i) {
        edge(log.writes[i], a.write ? GGML_DEP_WAW : GGML_DEP_RAW);
    }
    if (!a.write) {
        log.reads.push_back({op, a.begin, a.end, p->next_seq++, a.dense});
        return;
    }
    const uint64_t since = stop >= 0 ? log.writes[stop].seq : 0;
    for (long i = (long) log.reads.size() - 1; i >= 0 && log.reads[i].seq >= since; --i) edge(log.reads[i], GGML_DEP_WAR);
    // A dense write dominates what lies inside its extent: drop that, then log the write.
    // Only the covering write and accesses since can lie inside: older ones inside it lay
    // inside that (dense) write and went then.
    if (a.dense) {
        auto inside = [&](const logged_access & x) { return a.begin <= x.begin && x.end <= a.end && x.op != op; };
        log.writes.erase(std::remove_if(log.writes.begin() + std::max(stop, 0L), log.writes.end(), inside), log.writes.end());
        const auto recent = std::lower_bound(log.reads.begin(), log.reads.end(), since,
                                             [](const logged_access & x, uint64_t seq) { return x.seq < seq; });
        log.reads.erase(std::remove_if(recent, log.reads.end(), inside), log.reads.end());
    }
    log.writes.push_back({op, a.begin, a.end, p->next_seq++, a.dense});
}

// ---- the access model -----------------------------------------------------------------------

bool ggml_op_computes(const ggml_tensor * t) { return t->op != GGML_OP_NONE && !ggml_op_is_view(t->op); }

void ggml_tensor_extent(const ggml_tensor * t, const ggml_tensor ** root, size_t * begin, size_t * end) {
    *root = t->view_src ? t->view_src : t;
    *begin = t->view_src ? t->view_offs : 0;
    *end = *begin + ggml_nbytes(t);
}

// set/acc in place: a's bytes outside the region are neither read nor written
static bool is_region_write(const ggml_tensor * t) {
    return (t->op == GGML_OP_SET || t->op == GGML_OP_ACC) && ggml_get_set_region(t).inplace;
}

static bool op_reads_src(const ggml_tensor * t, int i) {
    if (t->src[i] == nullptr) return false;
    if (t->op == GGML_OP_CPY && i == 1) return false;
    return !(i == 0 && is_region_write(t));
}

// Do elements of this shape and these strides fill their span without gaps? Sorted by
// stride, each dimension must start where the one below it ends (block types count
// blocks along dimension 0). Broadcast (stride 0) and gapped views do not.
static bool layout_is_dense(ggml_type type, const int64_t * ne, const size_t * nb) {
    struct dim {
        int64_t n;
        size_t stride;
    } d[GGML_MAX_DIMS];
    int nd = 0;
    const int64_t blocks0 = ne[0] / ggml_blck_size(type);
    if (blocks0 > 1) d[nd++] = {blocks0, nb[0]};
    for (int i = 1; i < GGML_MAX_DIMS; ++i) if (ne[i] > 1) d[nd++] = {ne[i], nb[i]};
    // insertion sort of at most 4 entries (std::sort here draws a false -Warray-bounds from GCC 12)
    for (int i = 1; i < nd; ++i) {
        for (int j = i; j > 0 && d[j].stride < d[j - 1].stride; --j) std::swap(d[j], d[j - 1]);
    }
    size_t next = ggml_type_size(type);
    for (int i = 0; i < nd; ++i) {
        if (d[i].stride != next) return false;
        next *= (size_t) d[i].n;
    }
    return true;
}

bool ggml_tensor_is_dense(const ggml_tensor * t) { return layout_is_dense(t->type, t->ne, t->nb); }

static bool extent_access(const ggml_tensor * t, bool write, ggml_access * out) {
    ggml_tensor_extent(t, &out->root, &out->begin, &out->end);
    out->write = write;
    out->dense = ggml_tensor_is_dense(t);
    out->producer = nullptr;
    return out->begin < out->end;
}

// Source i of t as a read access, with the op it reads the result of.
static bool source_access(const ggml_tensor * t, int i, ggml_access * out) {
    if (!extent_access(t->src[i], false, out)) return false;
    const ggml_tensor * p = t->src[i];
    for (int depth = 0; p && ggml_op_is_view(p->op) && depth < 64; ++depth) p = p->src[0];
    out->producer = p;
    return true;
}

// The bytes of the set/acc region inside the result's root.
static bool region_access(const ggml_tensor * t, bool write, ggml_access * out) {
    const ggml_set_region g = ggml_get_set_region(t);
    size_t end;
    ggml_tensor_extent(t, &out->root, &out->begin, &end);
    out->begin += g.offset;
    out->end = out->begin + g.nbytes;
    out->write = write;
    out->dense = layout_is_dense(t->type, g.ne, g.nb);
    out->producer = nullptr;
    return out->begin < out->end;
}

int ggml_op_accesses(const ggml_tensor * t, ggml_access * out) {
    if (!ggml_op_computes(t)) return 0;
    int n = 0;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (op_reads_src(t, i) && source_access(t, i, &out[n])) ++n;
    }
    if (t->op == GGML_OP_SET_ROWS && extent_access(t, false, &out[n])) ++n; // the rows it keeps
    if (is_region_write(t)) {
        if (t->op == GGML_OP_ACC && region_access(t, false, &out[n])) ++n; // adds to what is there
        if (region_access(t, true, &out[n])) ++n;
        return n;
    }
    if (extent_access(t, true, &out[n])) ++n;
    return n;
}

// ---- edges at op creation -------------------------------------------------------------------

// Is pred a source of t, directly or through view ops? Then a data edge already orders them.
static bool is_data_pred(const ggml_tensor * t, const ggml_tensor * pred) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        for (const ggml_tensor * s = t->src[i]; s; s = s->src[0]) {
            if (s == pred) return true;
            if (!ggml_op_is_view(s->op)) break;
        }
    }
    return false;
}

// An op held by a graph the context no longer feeds (see "Lifetime of edges").
static bool held_by_older_graph(const ggml_tensor * op, const void * arg) {
    const uint64_t id = ggml_state(op)->graph_id;
    return id != 0 && id != ((const ggml_context *) arg)->current_graph_id;
}

static void record(ggml_context * ctx, ggml_tensor * t, const ggml_access & a) {
    ctx->hazards->set_dead_filter(held_by_older_graph, ctx);
    ctx->hazards->record(t, a, [&](ggml_tensor * pred, ggml_dep_kind kind) {
        if (!is_data_pred(t, pred)) ggml_push_dep(t, pred, kind);
    });
}

void ggml_hazards_on_new_op(ggml_context * ctx, ggml_tensor * t) {
    ggml_access acc[GGML_MAX_ACCESSES];
    const int n = ggml_op_accesses(t, acc);
    for (int i = 0; i < n; ++i) record(ctx, t, acc[i]);
}

void ggml_hazards_on_new_src(ggml_context * ctx, ggml_tensor * t, int i) {
    if (ggml_state(t)->graph_id != 0) ggml_graph_edges_changed(); // a new data edge
    ggml_access a;
    if (ggml_op_computes(t) && op_reads_src(t, i) && source_access(t, i, &a)) record(ctx, t, a);
}

void ggml_hazards_reset(ggml_context * ctx) { ctx->hazards->clear(); }

bool ggml_dep_pulls(const ggml_dep & dep, const ggml_cgraph * g) {
    if (dep.kind != GGML_DEP_RAW && dep.kind != GGML_DEP_MANUAL) return false;
    const uint64_t holder = ggml_state(dep.tensor)->graph_id;
    return holder == 0 || holder == g->id;
}
