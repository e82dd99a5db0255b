// Compute graphs: membership set, build_forward_expand (follows src[] always and control
// edges by the pull rule of hazards.cpp), accessors, printing.
#include "ggml-impl.h"

#include <atomic>
#include <cstring>
#include <vector>

// ---- hash set --------------------------------------------------------------------------
static size_t hash_size_for(size_t min_size) {
    // a prime-ish odd size roughly twice the capacity keeps probe chains short
    size_t n = min_size * 2 + 1;
    return n | 1;
}

static size_t hash_slot(const ggml_hash_set * set, const ggml_tensor * key) {
    return (size_t) ((uintptr_t) key >> 4) % set->size;
}
static bool bit_get(const uint32_t * bits, size_t i) { return (bits[i >> 5] >> (i & 31)) & 1; }
static void bit_set(uint32_t * bits, size_t i) { bits[i >> 5] |= 1u << (i & 31); }

size_t ggml_hash_find(const ggml_hash_set * set, const ggml_tensor * key) {
    size_t i = hash_slot(set, key);
    for (size_t probes = 0; probes < set->size; ++probes) {
        if (!bit_get(set->used, i)) return i;            // free slot: key absent
        if (set->keys[i] == key) return i;
        i = (i + 1) % set->size;
    }
    return SIZE_MAX;                                      // full
}
bool ggml_hash_contains(const ggml_hash_set * set, const ggml_tensor * key) {
    const size_t i = ggml_hash_find(set, key);
    return i != SIZE_MAX && bit_get(set->used, i) && set->keys[i] == key;
}
// returns true if inserted, false if already present
static bool hash_insert(ggml_hash_set * set, ggml_tensor * key) {
    const size_t i = ggml_hash_find(set, key);
    GGML_ASSERT(i != SIZE_MAX && "graph hash set is full");
    if (bit_get(set->used, i)) return false;
    bit_set(set->used, i);
    set->keys[i] = key;
    return true;
}

// ---- allocation ------------------------------------------------------------------------
static size_t graph_nbytes(size_t size, size_t hash_size) {
    return sizeof(ggml_cgraph) + 2 * size * sizeof(ggml_tensor *) + hash_size * sizeof(ggml_tensor *) +
           ((hash_size + 31) / 32) * sizeof(uint32_t) + 64;
}
size_t ggml_graph_overhead_custom(size_t size, bool grads) {
    (void) grads;
    return GGML_OBJECT_SIZE + GGML_PAD(graph_nbytes(size, hash_size_for(size)), GGML_MEM_ALIGN);
}
size_t ggml_graph_overhead(void) { return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false); }

ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bool grads) {
    (void) grads; // no autograd in kvgraph
    const size_t hash_size = hash_size_for(size);
    ggml_object * obj = ggml_new_object(ctx, GGML_OBJECT_TYPE_GRAPH, graph_nbytes(size, hash_size));
    char * p = (char *) ctx->mem_buffer + obj->offs;
    ggml_cgraph * g = (ggml_cgraph *) p;
    p += sizeof(ggml_cgraph);
    static std::atomic<uint64_t> next_id{1};
    g->ctx = ctx;
    g->id = next_id.fetch_add(1, std::memory_order_relaxed);
    g->sched = nullptr;
    g->open_nodes = nullptr;
    g->version = 0;
    g->size = (int) size;
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->nodes = (ggml_tensor **) p; p += size * sizeof(ggml_tensor *);
    g->leafs = (ggml_tensor **) p; p += size * sizeof(ggml_tensor *);
    g->visited_hash_set.size = hash_size;
    g->visited_hash_set.keys = (ggml_tensor **) p; p += hash_size * sizeof(ggml_tensor *);
    g->visited_hash_set.used = (uint32_t *) p;
    std::memset(g->visited_hash_set.used, 0, ((hash_size + 31) / 32) * sizeof(uint32_t));
    return g;
}
ggml_cgraph * ggml_new_graph(ggml_context * ctx) { return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false); }

void ggml_graph_clear(ggml_cgraph * g) {
    g->version++;
    g->n_nodes = 0;
    g->n_leafs = 0;
    if (g->open_nodes) g->open_nodes->clear();
    std::memset(g->visited_hash_set.used, 0, ((g->visited_hash_set.size + 31) / 32) * sizeof(uint32_t));
}

// ---- building --------------------------------------------------------------------------
// The graph now holds t: control edges of later graphs will not pull it in again.
static void claim(ggml_cgraph * g, ggml_tensor * t) {
    g->version++;
    ggml_tensor_state * st = ggml_state(t);
    st->graph_id = g->id;
    st->owner->current_graph_id = g->id;
}

// Could a control edge of a node order it after an op that is not in g yet? Its target is
// no node of g, and may become one, or be looked through (ggml_for_each_pred).
static bool edge_may_open(const ggml_cgraph * g, const ggml_dep & d) {
    const ggml_tensor * p = d.tensor;
    if (ggml_hash_contains(&g->visited_hash_set, p)) return false;
    return ggml_op_is_view(p->op) || ggml_op_runs_nowhere(p, g->id);
}

// Post-order DFS over data edges (src[]) and the control edges that pull (ggml_dep_pulls):
// every predecessor it adds is placed before its consumer. Edges are taken oldest first, so
// that writers a reader pulls land in the order they were created.
static void visit(ggml_cgraph * g, ggml_tensor * t) {
    if (!hash_insert(&g->visited_hash_set, t)) return;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (t->src[i]) visit(g, t->src[i]);
    }
    bool open = false;
    for (int i = t->n_deps - 1; i >= 0; --i) {
        if (ggml_dep_pulls(t->deps[i], g)) visit(g, t->deps[i].tensor);
        else open = open || edge_may_open(g, t->deps[i]);
    }
    if (t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM)) {
        GGML_ASSERT(g->n_leafs < g->size && "graph is full: use ggml_new_graph_custom with a larger size");
        if (t->name[0] == '\0') ggml_format_name(t, "leaf_%d", g->n_leafs);
        g->leafs[g->n_leafs++] = t;
    } else {
        GGML_ASSERT(g->n_nodes < g->size && "graph is full: use ggml_new_graph_custom with a larger size");
        if (t->name[0] == '\0') ggml_format_name(t, "node_%d", g->n_nodes);
        g->nodes[g->n_nodes++] = t;
        claim(g, t);
        if (open) {
            if (!g->open_nodes) g->open_nodes = new std::vector<ggml_tensor *>();
            g->open_nodes->push_back(t);
        }
    }
}

// Sorts the node list into a topological order of every edge among its nodes (the
// earliest-listed ready node first, so a list in order stays as it is). On a cycle of
// manual edges the list stays: the schedule refuses the graph with a message.
static void reorder_nodes(ggml_cgraph * g) {
    const int n = g->n_nodes;
    ggml_ptr_index index((size_t) n);
    for (int i = 0; i < n; ++i) index.put(g->nodes[i], i);
    std::vector<int> off(n + 1, 0), preds, order;
    auto is_node = [&](const ggml_tensor * p) { return index.get(p) >= 0; };
    for (int i = 0; i < n; ++i) {
        ggml_for_each_pred(g->nodes[i], g->id, is_node, [&](const ggml_tensor * p, ggml_dep_kind, bool) {
            const int k = index.get(p);
            if (k != i) preds.push_back(k);
        });
        off[i + 1] = (int) preds.size();
    }
    if (!ggml_topological_order(n, off, preds, order)) return;
    std::vector<ggml_tensor *> old(g->nodes, g->nodes + n);
    for (int k = 0; k < n; ++k) g->nodes[k] = old[order[k]];
    g->version++;
}

// After an expansion that added nodes [first_new, n_nodes): does an open node now have a
// predecessor placed after it? Only new nodes can be such predecessors (the list was in
// order before). Open nodes whose edges all reach nodes now are closed.
static void settle_order(ggml_cgraph * g, int first_new) {
    std::vector<ggml_tensor *> & open = *g->open_nodes;
    ggml_ptr_index fresh((size_t) (g->n_nodes - first_new));
    for (int i = first_new; i < g->n_nodes; ++i) fresh.put(g->nodes[i], i);
    auto is_node = [&](const ggml_tensor * p) { return ggml_graph_has_node(g, p); };
    bool misordered = false;
    size_t kept = 0;
    for (ggml_tensor * t : open) {
        const int pos = fresh.get(t); // -1: an older node
        ggml_for_each_pred(t, g->id, is_node, [&](const ggml_tensor * p, ggml_dep_kind, bool) {
            const int pp = fresh.get(p);
            misordered = misordered || (pp >= 0 && (pos < 0 || pp > pos));
        });
        bool still_open = false;
        for (int i = 0; i < t->n_deps; ++i) still_open = still_open || edge_may_open(g, t->deps[i]);
        if (still_open) open[kept++] = t;
    }
    open.resize(kept);
    if (misordered) reorder_nodes(g);
}

void ggml_build_forward_expand(ggml_cgraph * g, ggml_tensor * tensor) {
    const int first_new = g->n_nodes;
    visit(g, tensor);
    if (g->open_nodes && !g->open_nodes->empty() && g->n_nodes > first_new) settle_order(g, first_new);
}

void ggml_graph_add_node(ggml_cgraph * g, ggml_tensor * tensor) {
    GGML_ASSERT(g->n_nodes < g->size && "graph is full: use ggml_new_graph_custom with a larger size");
    hash_insert(&g->visited_hash_set, tensor);
    g->nodes[g->n_nodes++] = tensor;
    claim(g, tensor);
}

// The nodes move to dst as they are (same order; the schedule is rebuilt for dst).
void ggml_graph_cpy(ggml_cgraph * src, ggml_cgraph * dst) {
    GGML_ASSERT(dst->size >= src->n_leafs && dst->size >= src->n_nodes);
    ggml_graph_clear(dst);
    for (int i = 0; i < src->n_leafs; ++i) {
        hash_insert(&dst->visited_hash_set, src->leafs[i]);
        dst->leafs[dst->n_leafs++] = src->leafs[i];
    }
    for (int i = 0; i < src->n_nodes; ++i) ggml_graph_add_node(dst, src->nodes[i]);
}
void ggml_graph_reset(ggml_cgraph * g) { GGML_ASSERT(g != nullptr); } // no gradients to zero

bool ggml_graph_has_node(const ggml_cgraph * g, const ggml_tensor * t) {
    return ggml_hash_contains(&g->visited_hash_set, t) && t->op != GGML_OP_NONE;
}

int ggml_graph_size(ggml_cgraph * g) { return g->size; }
int ggml_graph_n_nodes(ggml_cgraph * g) { return g->n_nodes; }
ggml_tensor ** ggml_graph_nodes(ggml_cgraph * g) { return g->nodes; }
ggml_tensor * ggml_graph_node(ggml_cgraph * g, int i) {
    if (i < 0) i += g->n_nodes;
    GGML_ASSERT(i >= 0 && i < g->n_nodes);
    return g->nodes[i];
}

ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; ++i) {
        if (std::strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        if (std::strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    }
    return nullptr;
}

void ggml_graph_print(const ggml_cgraph * g) {
    printf("=== GRAPH ===\nn_nodes = %d\n", g->n_nodes);
    for (int i = 0; i < g->n_nodes; ++i) {
        const ggml_tensor * t = g->nodes[i];
        printf(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %16s %-24s deps:%d\n", i, (long long) t->ne[0], (long long) t->ne[1],
               (long long) t->ne[2], (long long) t->ne[3], ggml_op_desc(t), t->name, t->n_deps);
    }
    printf("n_leafs = %d\n", g->n_leafs);
    for (int i = 0; i < g->n_leafs; ++i) {
        const ggml_tensor * t = g->leafs[i];
        printf(" - %3d: [ %5lld, %5lld] %8s %s\n", i, (long long) t->ne[0], (long long) t->ne[1], ggml_op_name(t->op), t->name);
    }
    printf("========================================\n");
}
