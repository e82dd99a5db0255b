// Internal structures shared by the library's files (not installed).
#pragma once

#include "ggml.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <algorithm>
#include <deque>
#include <vector>

// Library messages, through the callback of ggml_log_set (context.cpp).
void ggml_log_internal(enum ggml_log_level level, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
#define GGML_LOG_INFO(...)  ggml_log_internal(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define GGML_LOG_WARN(...)  ggml_log_internal(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define GGML_LOG_ERROR(...) ggml_log_internal(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)

struct ggml_hazard_rules; // the dependency-edge rules and their access log (hazards.cpp)

// One allocation inside the arena: a tensor (struct + data), a graph, or a work buffer.
struct ggml_object {
    size_t offs;  // of the payload from the start of the arena
    size_t size;  // payload bytes
    struct ggml_object * next;
    int type;     // ggml_object_type
    char padding[4];
};

enum ggml_object_type { GGML_OBJECT_TYPE_TENSOR, GGML_OBJECT_TYPE_GRAPH, GGML_OBJECT_TYPE_WORK_BUFFER };

static const size_t GGML_OBJECT_SIZE = sizeof(struct ggml_object);

struct ggml_tensor_state;  // per-tensor library state (below)
struct ggml_graph_sched;   // a graph's execution order and edges (schedule.cpp)

// The arena holds objects end to end, in creation order (ggml_new_object); everything
// needing a destructor lives outside it.
struct ggml_context {
    char * arena;
    size_t arena_size;   // a multiple of GGML_MEM_ALIGN
    ggml_object * first; // the object list, oldest first
    ggml_object * last;  // the arena is in use up to the end of its payload
    bool arena_owned;    // ggml_init allocated it: ggml_free releases it
    bool skip_data;      // no_alloc: new tensors get a struct only, data comes later

    // Per-tensor state of the tensors created here, outside the arena so that arena sizing
    // stays what ggml programs expect (deque: element addresses stay put).
    std::deque<ggml_tensor_state> * tensor_states;
    ggml_hazard_rules * hazards; // accesses of the ops created here, in creation order
    // The graph that most recently took one of this context's ops as a node: accesses of
    // ops held by other graphs are dead for the hazard rules (hazards.cpp).
    uint64_t current_graph_id;
};

// What the library keeps per tensor (tensor->impl), owned by the tensor's own context.
struct ggml_tensor_state {
    ggml_context * owner;
    std::vector<ggml_dep> deps; // storage behind tensor->deps
    uint64_t graph_id = 0;      // the latest graph that holds this tensor as a node; 0: none
};
static inline ggml_tensor_state * ggml_state(const ggml_tensor * t) { return (ggml_tensor_state *) t->impl; }
static inline void * ggml_object_payload(const ggml_context * ctx, const ggml_object * obj) {
    return ctx->arena + obj->offs;
}

// The tensors a graph has seen (nodes and leafs), by pointer: linear probing over a table
// in the graph's own arena block. A bit per slot marks it taken, so clearing the set
// touches 1/64 of the memory the pointers take.
struct ggml_graph_members {
    ggml_tensor ** slot;
    uint32_t * taken;
    size_t n_slot;
};

struct ggml_cgraph {
    uint64_t id;               // unique over the process, never reused
    uint64_t version;          // bumped whenever the node list changes
    struct ggml_context * ctx; // the context whose arena holds this graph
    int capacity;              // entries in nodes[] and in leafs[]
    int n_nodes;
    struct ggml_tensor ** nodes; // ops, in the order the program added them
    int n_leafs;
    struct ggml_tensor ** leafs; // tensors without an op (weights, inputs, constants)
    ggml_graph_members members;
    ggml_graph_sched * sched;    // cached execution order (schedule.cpp); freed with ctx
    // Nodes with a WAR/WAW edge to an op that is not yet a node: a later expansion may add
    // it (or an op ordered through it) and must then keep the list in order (graph.cpp).
    std::vector<ggml_tensor *> * open_nodes; // heap, freed with ctx; null while none
};

// op_params of GGML_OP_MAP_CUSTOM1..3
struct custom_op_params {
    void * fun;
    int n_tasks;
    void * userdata;
};
static_assert(sizeof(custom_op_params) <= GGML_MAX_OP_PARAMS, "custom op params must fit");

// ---- context helpers (context.cpp) ----
struct ggml_tensor * ggml_new_tensor_impl(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                          const int64_t * ne, struct ggml_tensor * view_src, size_t view_offs);
// Allocates raw bytes in the arena (graphs, work buffers); aborts with a clear message if it does not fit.
struct ggml_object * ggml_new_object(struct ggml_context * ctx, enum ggml_object_type type, size_t size);
void ggml_set_op_params(struct ggml_tensor * tensor, const void * params, size_t size);
int32_t ggml_get_op_params_i32(const struct ggml_tensor * tensor, uint32_t i);
float   ggml_get_op_params_f32(const struct ggml_tensor * tensor, uint32_t i);
void    ggml_set_op_params_i32(struct ggml_tensor * tensor, uint32_t i, int32_t value);
void    ggml_set_op_params_f32(struct ggml_tensor * tensor, uint32_t i, float value);
// Appends a control edge unless one to `dep` exists (stored in tensor's own context).
void ggml_push_dep(struct ggml_tensor * tensor, struct ggml_tensor * dep, enum ggml_dep_kind kind);
// View ops share bytes and compute nothing.
static inline bool ggml_op_is_view(enum ggml_op op) { // inline: the access model asks per source
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// ---- the access model and the hazard rules (hazards.cpp) ----
// Every consumer (op creation, graph expansion, schedule, planner, validator) takes what
// an op touches and what it waits for from here; none re-derives it.

// Does the node run a kernel? (not a leaf, not a view op)
bool ggml_op_computes(const struct ggml_tensor * t);
// Byte extent [begin, end) of a tensor inside its root (conservative hull for strided views).
void ggml_tensor_extent(const struct ggml_tensor * t, const struct ggml_tensor ** root, size_t * begin, size_t * end);

// Do the tensor's elements fill its extent, every byte of it? (contiguous, or permuted without gaps)
bool ggml_tensor_is_dense(const struct ggml_tensor * t);

struct ggml_access {
    const ggml_tensor * root;
    size_t begin, end;
    bool write;
    bool dense; // touches every byte of [begin, end); else some bytes in between are left alone
    // A read of a source: the op whose result it reads, the first op on the source's view
    // chain that is not a view (the data edge orders the reader after it). Else null.
    const ggml_tensor * producer;
};
enum { GGML_MAX_ACCESSES = GGML_MAX_SRC + 2 };
// The bytes a computing op touches when it runs: the extent of every source it reads
// (cpy's src[1] is only its destination; set_rows also reads its destination, whose rows
// it does not write it keeps), then the extent of its result, which it writes (its own
// bytes, or borrowed ones for cpy/set_rows/*_inplace). set/acc in place: b, then only
// the region of a (read by acc, written by both). Empty extents are left out.
// Returns the count; 0 for ops that compute nothing.
int ggml_op_accesses(const struct ggml_tensor * t, ggml_access * out);

// GGML_OP_SET / GGML_OP_ACC (ops-llm.cpp): the region of the result that b is written
// into or added to, as a view: b's shape, these strides, offset bytes past the result's
// first byte. The access model reads it for the in-place forms.
struct ggml_set_region {
    int64_t ne[GGML_MAX_DIMS];
    size_t nb[GGML_MAX_DIMS]; // the result's element size, then nb1, nb2, nb3 of the op params
    size_t offset;
    size_t nbytes;            // from offset to one past the region's last byte; 0 if empty
    bool inplace;             // the result is a view of a (only the region is written)
};
ggml_set_region ggml_get_set_region(const struct ggml_tensor * t);

// Would an op that is not a node of graph `graph_id` run in no graph at all? (a computing
// op that no graph holds, or only this one before it was cleared)
static inline bool ggml_op_runs_nowhere(const ggml_tensor * p, uint64_t graph_id) {
    const uint64_t holder = ((const ggml_tensor_state *) p->impl)->graph_id;
    return p->op != GGML_OP_NONE && !ggml_op_is_view(p->op) && (holder == 0 || holder == graph_id);
}

// The predecessors of t among the nodes of graph `graph_id`: each src[] entry and
// control-edge target for which is_node() holds. One that is not a node is looked through
// to its own sources and edges when it is a view op (a hand-built graph may omit views), or
// when a control edge led to it and it runs in no graph: the ordering ran through it (a
// write that a later write overwrote before anyone read it still orders that later write
// after the readers it waited for; hazards.cpp). f(p, kind, direct): kind is RAW for a data
// edge, else the first control edge's kind on the way; direct: p is one of t's own src[]
// entries. A predecessor may be reported more than once.
template <typename IsNode, typename F> struct ggml_pred_walk {
    const ggml_tensor * origin;
    uint64_t graph_id;
    IsNode & is_node;
    F & f;
    std::vector<const ggml_tensor *> passed; // ops looked through that run nowhere (rare)

    void from(const ggml_tensor * t, ggml_dep_kind via, bool control, int depth) {
        for (int i = 0; i < GGML_MAX_SRC; ++i) step(t->src[i], GGML_DEP_RAW, via, control, depth);
        for (int i = 0; i < t->n_deps; ++i) step(t->deps[i].tensor, t->deps[i].kind, via, true, depth);
    }
    void step(const ggml_tensor * p, ggml_dep_kind kind, ggml_dep_kind via, bool control, int depth) {
        if (p == nullptr || p == origin) return;
        const ggml_dep_kind k = via == GGML_DEP_RAW ? kind : via;
        if (is_node(p)) f(p, k, depth == 0 && !control);
        else if (depth >= 1024) return;
        else if (ggml_op_is_view(p->op)) from(p, k, control, depth + 1);
        else if (control && ggml_op_runs_nowhere(p, graph_id) &&
                 std::find(passed.begin(), passed.end(), p) == passed.end()) {
            passed.push_back(p);
            from(p, k, true, depth + 1);
        }
    }
};
template <typename IsNode, typename F>
void ggml_for_each_pred(const ggml_tensor * t, uint64_t graph_id, IsNode is_node, F f) {
    ggml_pred_walk<IsNode, F> walk{t, graph_id, is_node, f, {}};
    walk.from(t, GGML_DEP_RAW, false, 0);
}

// The RAW/WAR/WAW rules over a sequence of accesses, per root buffer. record() compares
// one access of `op` with the earlier ones and calls edge(pred, kind) for each op it must
// run after, then logs it. Used at op creation (program order) and by the schedule (node
// order); the rules and their reasoning are in hazards.cpp.
struct ggml_hazard_rules {
    ggml_hazard_rules();
    ~ggml_hazard_rules();
    ggml_hazard_rules(const ggml_hazard_rules &) = delete;
    ggml_hazard_rules & operator=(const ggml_hazard_rules &) = delete;
    template <typename F> void record(ggml_tensor * op, const ggml_access & a, F edge) {
        record_impl(op, a, [](void * f, ggml_tensor * p, ggml_dep_kind k) { (*(F *) f)(p, k); }, &edge);
    }
    void clear();
    // Drops logged accesses for which dead(op) holds (amortized: only when a log has grown).
    void set_dead_filter(bool (*dead)(const ggml_tensor * op, const void * arg), const void * arg);
  private:
    void record_impl(ggml_tensor * op, const ggml_access & a, void (*cb)(void *, ggml_tensor *, ggml_dep_kind), void * f);
    struct impl;
    impl * p;
};

// Called by every op constructor once src[] and view_src are set: records the op's
// accesses in its context and gives it control edges.
void ggml_hazards_on_new_op(struct ggml_context * ctx, struct ggml_tensor * tensor);
// The end of an op constructor: sets op and the first two sources, then records the op.
inline struct ggml_tensor * ggml_finish_op(struct ggml_context * ctx, struct ggml_tensor * r, enum ggml_op op,
                                           struct ggml_tensor * a, struct ggml_tensor * b = nullptr) {
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    ggml_hazards_on_new_op(ctx, r);
    return r;
}
// Records one more read for a source set after creation (src[i] already set).
void ggml_hazards_on_new_src(struct ggml_context * ctx, struct ggml_tensor * tensor, int i);
// Should a control edge pull its target into the graph being built? (graph expansion)
bool ggml_dep_pulls(const ggml_dep & dep, const struct ggml_cgraph * g);

// ---- graphs (graph.cpp) ----
bool   ggml_graph_has_node(const struct ggml_cgraph * g, const struct ggml_tensor * t);

// Tensor pointer -> int, open addressing, no per-entry allocation (schedule and planner
// index every node of a graph; std::unordered_map's node allocations dominated their cost).
struct ggml_ptr_index {
    struct entry {
        const ggml_tensor * key;
        int val;
    };
    std::vector<entry> slots; // key and value side by side: one cache line per probe
    int bits = 4;
    size_t n_keys = 0;
    explicit ggml_ptr_index(size_t n = 0) {
        while (((size_t) 1 << bits) < 2 * n) ++bits;
        slots.assign((size_t) 1 << bits, entry{nullptr, -1});
    }
    // Tensors of a context lie in creation order at a stride above 256 bytes, and a graph
    // asks mostly for nodes made shortly before the one it looks at. A slot per 256 bytes of
    // address keeps those lookups on cache lines just touched (a scattering hash made each
    // one a cache miss once the table outgrew L2); the high bits are folded in so that
    // tensors exactly a table's span apart do not share a home.
    size_t slot(const ggml_tensor * t) const {
        const size_t mask = slots.size() - 1;
        const uint64_t a = (uint64_t) (uintptr_t) t >> 8;
        size_t i = (size_t) (a + (a >> bits)) & mask;
        while (slots[i].key != nullptr && slots[i].key != t) i = (i + 1) & mask;
        return i;
    }
    int get(const ggml_tensor * t) const { return slots[slot(t)].val; } // -1 if absent
    // Inserts t -> v unless present; returns the value stored for t. Grows past n keys.
    int put(const ggml_tensor * t, int v) {
        entry * e = &slots[slot(t)];
        if (e->key != nullptr) return e->val;
        if (2 * (n_keys + 1) > slots.size()) {
            grow();
            e = &slots[slot(t)];
        }
        *e = entry{t, v};
        ++n_keys;
        return v;
    }
    void grow() {
        std::vector<entry> old(std::move(slots));
        slots.assign(old.size() * 2, entry{nullptr, -1});
        ++bits;
        for (const entry & e : old) if (e.key) slots[slot(e.key)] = e;
    }
};

// ---- execution order (schedule.cpp) ----
// The order and edges every runner of a graph obeys: exec[] lists each node once, in a
// topological order of its edges (the node list's order where that list already is one);
// preds of exec position i are positions < i. Edges: the ggml_for_each_pred edges, plus
// one for every pair of nodes touching overlapping bytes (one writing) in exec order, by
// the hazard rules, so nodes from different contexts, hand-built graphs and reset logs
// still run as in ggml's sequential order.
struct ggml_graph_sched {
    uint64_t version = 0, edge_epoch = 0; // of the graph and of the edges it was built from
    int n_nodes = 0;
    bool ok = false;                       // false: the edges form a cycle (message printed)
    std::vector<ggml_tensor *> exec;       // nodes in execution order
    std::vector<int> pred_off, preds;      // CSR by exec position, each list sorted, no repeats
    std::vector<int> succ_off, succ;       // the same edges, from the other end
    ggml_ptr_index position;               // node -> exec position
    std::vector<int> acc_off;              // node k's accesses (ggml_op_accesses, in its order): [acc_off[k] ..)
    std::vector<int> acc_root;             // per access: exec position of the node owning its root, or
                                           // -1 - j for the j-th root no node owns
    std::vector<char> is_src;              // by exec position: the node is a src[] entry of some node

    // The CPU executor's per-node facts (ggml_exec_facts, cpu/compute.cpp) by exec position, for
    // facts_threads threads on kernel path facts_path: they only depend on the nodes, so they
    // live as long as the schedule (a rebuild clears them) instead of being derived again
    // for every compute (a tiny model's token: ~100 nodes, several mul_mat inspections each).
    struct node_facts {
        int n_tasks, n_phases;
        size_t wsize;
    };
    mutable std::vector<node_facts> facts;
    mutable int facts_threads = 0, facts_path = -1;
    mutable size_t facts_max_ws = 0; // largest wsize
};
// Kahn's order of positions 0..n-1 whose predecessors are preds[off[i] .. off[i+1]), the
// earliest-listed ready position first (an order already topological is kept); false on a
// cycle (order then holds the positions it could place).
bool ggml_topological_order(int n, const std::vector<int> & off, const std::vector<int> & preds, std::vector<int> & order);
// The schedule of g, rebuilt when its node list or the edges of its nodes changed.
const ggml_graph_sched * ggml_graph_get_sched(struct ggml_cgraph * g);
// Sees the nodes while a schedule is built, each right after the build read its tensor
// struct: a caller that must read every node anyway (the planner) then needs no pass of its
// own over memory that large graphs do not keep in cache.
struct ggml_sched_visitor {
    virtual void begin(int n_nodes) = 0; // before the first node (again if the build restarts)
    // exec position k; position: node -> exec position, complete
    virtual void node(int k, ggml_tensor * t, const ggml_ptr_index & position) = 0;
  protected:
    ~ggml_sched_visitor() = default;
};
// As ggml_graph_get_sched; *visited tells whether v saw every node in exec order (the
// schedule was built now, over a node list already in topological order).
const ggml_graph_sched * ggml_graph_get_sched_visiting(struct ggml_cgraph * g, ggml_sched_visitor * v, bool * visited);
// Would ggml_graph_get_sched return a cached schedule (no build)?
bool ggml_graph_sched_current(const struct ggml_cgraph * g);
// Frees what a graph keeps on the heap (its schedule, its open nodes).
void ggml_graph_sched_free(struct ggml_cgraph * g);
// Called when an edge is added to a tensor a graph already holds: cached schedules are stale.
void ggml_graph_edges_changed(void);
#endif // __cplusplus
