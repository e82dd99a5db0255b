// Compute graphs: membership set, build_forward_expand (follows src[] always and control
// edges by the pull rule of hazards.cpp), accessors, printing.
#include "ggml-impl.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

// ---- membership ------------------------------------------------------------------------
// Twice as many slots as the graph can hold keeps probe runs short; an odd count lets
// tensors laid out at even strides in the arena still spread over every slot.
static size_t member_slots_for(size_t capacity) { return (capacity * 2 + 1) | 1; }
static size_t taken_words(size_t n_slot) { return (n_slot + 31) / 32; }

static bool slot_taken(const ggml_graph_members & m, size_t i) { return (m.taken[i / 32] >> (i % 32)) & 1u; }

// The slot holding t, or the free slot where it would go; SIZE_MAX when t is absent and no
// slot is free.
static size_t member_slot(const ggml_graph_members & m, const ggml_tensor * t) {
    const size_t home = (size_t) ((uintptr_t) t >> 4) % m.n_slot;
    for (size_t k = 0, i = home; k < m.n_slot; ++k, i = i + 1 == m.n_slot ? 0 : i + 1) {
        if (!slot_taken(m, i) || m.slot[i] == t) return i;
    }
    return SIZE_MAX;
}
static bool is_member(const ggml_graph_members & m, const ggml_tensor * t) {
    const size_t i = member_slot(m, t);
    return i != SIZE_MAX && slot_taken(m, i);
}
// false when t was a member already
static bool add_member(ggml_graph_members & m, ggml_tensor * t) {
    const size_t i = member_slot(m, t);
    if (i == SIZE_MAX) GGML_ABORT("graph membership table full (%zu slots): a bug in sizing it", m.n_slot);
    if (slot_taken(m, i)) return false;
    m.taken[i / 32] |= 1u << (i % 32);
    m.slot[i] = t;
    return true;
}
static void clear_members(ggml_graph_members & m) { std::memset(m.taken, 0, taken_words(m.n_slot) * sizeof(uint32_t)); }

// ---- allocation ------------------------------------------------------------------------
// One arena block per graph: the struct, nodes[], leafs[], the member slots, the taken bits
// (the pointer arrays first, so that each stays pointer-aligned), and slack.
static size_t graph_nbytes(size_t capacity) {
    const size_t n_slot = member_slots_for(capacity);
    const size_t pointers = 2 * capacity + n_slot;
    return sizeof(ggml_cgraph) + pointers * sizeof(ggml_tensor *) + taken_words(n_slot) * sizeof(uint32_t) + 64;
}
size_t ggml_graph_overhead_custom(size_t size, bool /*grads: no autograd*/) {
    return GGML_OBJECT_SIZE + GGML_PAD(graph_nbytes(size), GGML_MEM_ALIGN);
}
size_t ggml_graph_overhead(void) { return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false); }

ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bool /*grads: no autograd*/) {
    static std::atomic<uint64_t> last_id{0};
    ggml_object * obj = ggml_new_object(ctx, GGML_OBJECT_TYPE_GRAPH, graph_nbytes(size));
    ggml_cgraph * g = new (ggml_object_payload(ctx, obj)) ggml_cgraph();
    ggml_tensor ** arrays = (ggml_tensor **) (g + 1);
    g->id = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
    g->ctx = ctx;
    g->capacity = (int) size;
    g->nodes = arrays;
    g->leafs = arrays + size;
    g->members.slot = arrays + 2 * size;
    g->members.n_slot = member_slots_for(size);
    g->members.taken = (uint32_t *) (g->members.slot + g->members.n_slot);
    clear_members(g->members);
    return g; // counts, version, schedule and open nodes start at zero / null
}
ggml_cgraph * ggml_new_graph(ggml_context * ctx) { return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false); }

void ggml_graph_clear(ggml_cgraph * g) {
    g->n_nodes = g->n_leafs = 0;
    clear_members(g->members);
    if (g->open_nodes) g->open_nodes->clear();
    g->version++;
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
    if (is_member(g->members, p)) return false;
    return ggml_op_is_view(p->op) || ggml_op_runs_nowhere(p, g->id);
}

// Post-order DFS over data edges (src[]) and the control edges that pull (ggml_dep_pulls):
// every predecessor it adds is placed before its consumer. Edges are taken oldest first, so
// that writers a reader pulls land in the order they were created.
static void visit(ggml_cgraph * g, ggml_tensor * t) {
    if (!add_member(g->members, t)) return;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (t->src[i]) visit(g, t->src[i]);
    }
    bool open = false;
    for (int i = t->n_deps - 1; i >= 0; --i) {
        if (ggml_dep_pulls(t->deps[i], g)) visit(g, t->deps[i].tensor);
        else open = open || edge_may_open(g, t->deps[i]);
    }
    if (t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM)) {
        GGML_ASSERT(g->n_leafs < g->capacity && "graph is full: use ggml_new_graph_custom with a larger size");
        if (t->name[0] == '\0') ggml_format_name(t, "leaf_%d", g->n_leafs);
        g->leafs[g->n_leafs++] = t;
    } else {
        GGML_ASSERT(g->n_nodes < g->capacity && "graph is full: use ggml_new_graph_custom with a larger size");
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
    GGML_ASSERT(g->n_nodes < g->capacity && "graph is full: use ggml_new_graph_custom with a larger size");
    add_member(g->members, tensor);
    g->nodes[g->n_nodes++] = tensor;
    claim(g, tensor);
}

// The nodes move to dst as they are (same order; the schedule is rebuilt for dst).
void ggml_graph_cpy(ggml_cgraph * src, ggml_cgraph * dst) {
    GGML_ASSERT(dst->capacity >= src->n_leafs && dst->capacity >= src->n_nodes);
    ggml_graph_clear(dst);
    for (int i = 0; i < src->n_leafs; ++i) {
        add_member(dst->members, src->leafs[i]);
        dst->leafs[dst->n_leafs++] = src->leafs[i];
    }
    for (int i = 0; i < src->n_nodes; ++i) ggml_graph_add_node(dst, src->nodes[i]);
}
void ggml_graph_reset(ggml_cgraph * g) { GGML_ASSERT(g != nullptr); } // no gradients to zero

bool ggml_graph_has_node(const ggml_cgraph * g, const ggml_tensor * t) {
    return is_member(g->members, t) && t->op != GGML_OP_NONE;
}

int ggml_graph_size(ggml_cgraph * g) { return g->capacity; }
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

// One line per tensor: position, what it is, its shape, and for nodes what it reads and how
// many control edges order it.
static void print_shape(const ggml_tensor * t) {
    printf("%-5s %lld x %lld x %lld x %lld", ggml_type_name(t->type), (long long) t->ne[0], (long long) t->ne[1],
           (long long) t->ne[2], (long long) t->ne[3]);
}
void ggml_graph_print(const ggml_cgraph * g) {
    printf("graph %llu: %d of %d nodes used, %d leafs\n", (unsigned long long) g->id, g->n_nodes, g->capacity,
           g->n_leafs);
    for (int i = 0; i < g->n_nodes; ++i) {
        const ggml_tensor * t = g->nodes[i];
        printf("  node %4d  %-14s '%s'  ", i, ggml_op_desc(t), t->name);
        print_shape(t);
        const char * sep = "  reads ";
        for (const ggml_tensor * src : t->src) {
            if (!src) continue;
            printf("%s'%s'", sep, src->name);
            sep = ", ";
        }
        if (t->n_deps > 0) printf("  after %d edge%s", t->n_deps, t->n_deps == 1 ? "" : "s");
        printf("\n");
    }
    for (int i = 0; i < g->n_leafs; ++i) {
        const ggml_tensor * t = g->leafs[i];
        printf("  leaf %4d  '%s'  ", i, t->name);
        print_shape(t);
        printf("\n");
    }
}
