// Graph memory planner: gives every intermediate tensor an offset in one compute buffer,
// reusing bytes whose previous tenants are finished, and lets ops write over a source
// that nobody reads afterwards (in-place).
//
// "Finished" is decided by the graph's edges, not by node order alone: the DAG executor
// may run any two nodes at the same time unless a path of data or control edges orders
// them. So bytes last touched by nodes A1..Ak may be given to the result of node N only
// if every Ai is an ancestor of N. Which nodes touch a tensor's bytes comes from the
// same memory model the hazard rules use (ggml_tensor_extent: root buffer + extent;
// reads of sources, writes through views), so a tensor read later through a view or
// written through a cpy/set_rows stays alive until those ops are done.
#include "ggml-alloc.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

static const size_t ALLOC_ALIGN = 64;

namespace {

struct free_block {
    size_t offset, size;
    std::vector<int> last_users; // nodes that touched the bytes last; must precede a new tenant
};

// Ops whose kernel computes dst[i] only from the same position (or the same row) of
// src[0], reading it before writing, so dst may share src[0]'s bytes.
bool op_can_inplace(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_ADD: case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV:
        case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_SCALE: case GGML_OP_UNARY:
        case GGML_OP_NORM: case GGML_OP_RMS_NORM: case GGML_OP_SOFT_MAX: case GGML_OP_ROPE:
        case GGML_OP_DIAG_MASK_INF:
            return true;
        default:
            return false;
    }
}

const ggml_tensor * root_of(const ggml_tensor * t) { return t->view_src ? t->view_src : t; }

} // namespace

struct ggml_gallocr {
    void * buffer = nullptr;
    size_t buffer_size = 0;
    bool order_only = false;
    bool inplace = true;
    ggml_gallocr_stats stats = {};

    // last plan, replayed when the graph's structure is unchanged
    uint64_t signature = 0;
    std::vector<std::pair<int, size_t>> node_offsets; // (index in nodes (>=0) or leafs (-1-i), offset)
    size_t plan_size = 0;
};

// ---- planning -------------------------------------------------------------------------
namespace {

struct planner {
    ggml_gallocr * ga;
    ggml_cgraph * g;
    std::vector<ggml_tensor *> order;                       // nodes, possibly reordered
    std::unordered_map<const ggml_tensor *, int> pos;       // node -> index in order
    std::vector<std::vector<uint64_t>> anc;                 // ancestor bitsets by order index
    std::vector<char> anc_ready;
    size_t words = 0;

    std::unordered_map<const ggml_tensor *, std::vector<int>> accessors; // root -> node indices (into order)
    std::unordered_map<const ggml_tensor *, size_t> offset;              // placed root -> offset
    std::unordered_map<const ggml_tensor *, int> pending;                // root -> accessors not yet done
    std::unordered_map<const ggml_tensor *, const ggml_tensor *> alias;  // in-place result -> root it shares
    std::vector<free_block> free_list;
    size_t top = 0;

    bool needs_alloc(const ggml_tensor * t) const { return t->data == nullptr && t->view_src == nullptr; }
    bool is_anc(int a, int b) const { return (anc[b][a >> 6] >> (a & 63)) & 1; } // a ancestor of b
    // Is node a certainly finished when node b starts? With edges: a is an ancestor of b.
    // In order-only mode (a sequential planner's view): a comes earlier in node order.
    bool done_before(int a, int b) const { return ga->order_only ? a < b : is_anc(a, b); }
    bool is_node(const ggml_tensor * t) const { return pos.count(t) != 0; }

    template <typename F> void for_each_pred(const ggml_tensor * t, F f) const {
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (t->src[s] && is_node(t->src[s])) f(pos.at(t->src[s]));
        }
        for (int d = 0; d < t->n_deps; ++d) {
            if (is_node(t->deps[d].tensor)) f(pos.at(t->deps[d].tensor));
        }
    }

    void compute_anc(int i) {
        std::vector<uint64_t> & bits = anc[i];
        std::fill(bits.begin(), bits.end(), 0);
        for_each_pred(order[i], [&](int p) {
            if (p >= i) return; // order contradicts an edge: not an ancestor we can rely on
            if (!anc_ready[p]) compute_anc(p);
            for (size_t w = 0; w < words; ++w) bits[w] |= anc[p][w];
            bits[p >> 6] |= 1ull << (p & 63);
        });
        anc_ready[i] = 1;
    }

    // Roots whose bytes the node touches when it runs (reads of sources, write through a view).
    template <typename F> void for_each_access(const ggml_tensor * t, F f) const {
        if (t->op == GGML_OP_NONE || ggml_op_is_view(t->op)) return;
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (t->src[s]) f(root_of(t->src[s]));
        }
        f(root_of(t)); // its own result (fresh or borrowed)
    }

    bool can_reuse(const free_block & b, int i) const {
        for (int u : b.last_users) {
            if (u != i && !done_before(u, i)) return false;
        }
        return true;
    }

    size_t place(size_t size, int i) {
        size = GGML_PAD(size, ALLOC_ALIGN);
        if (i < 0) { // leafs: before any node, nothing to reuse
            const size_t off = top;
            top += size;
            return off;
        }
        int best = -1;
        for (int k = 0; k < (int) free_list.size(); ++k) {
            const free_block & b = free_list[k];
            if (b.size >= size && can_reuse(b, i) && (best < 0 || b.size < free_list[best].size)) best = k;
        }
        if (best >= 0) {
            free_block & b = free_list[best];
            const size_t off = b.offset;
            b.offset += size;
            b.size -= size;
            if (b.size == 0) free_list.erase(free_list.begin() + best);
            return off;
        }
        // a free block at the top whose users are all ancestors can be extended
        for (int k = 0; k < (int) free_list.size(); ++k) {
            free_block & b = free_list[k];
            if (b.offset + b.size == top && can_reuse(b, i)) {
                const size_t off = b.offset;
                top = off + size;
                free_list.erase(free_list.begin() + k);
                return off;
            }
        }
        const size_t off = top;
        top += size;
        return off;
    }

    void release(const ggml_tensor * root) {
        const size_t size = GGML_PAD(ggml_nbytes(root), ALLOC_ALIGN);
        free_block nb{offset.at(root), size, accessors[root]};
        // merge with neighbours (their users must also precede any later tenant)
        for (int k = 0; k < (int) free_list.size();) {
            free_block & b = free_list[k];
            if (b.offset + b.size == nb.offset || nb.offset + nb.size == b.offset) {
                nb.offset = std::min(nb.offset, b.offset);
                nb.size += b.size;
                nb.last_users.insert(nb.last_users.end(), b.last_users.begin(), b.last_users.end());
                free_list.erase(free_list.begin() + k);
            } else {
                ++k;
            }
        }
        std::sort(nb.last_users.begin(), nb.last_users.end());
        nb.last_users.erase(std::unique(nb.last_users.begin(), nb.last_users.end()), nb.last_users.end());
        free_list.push_back(std::move(nb));
    }

    bool keep_forever(const ggml_tensor * root) const {
        return (root->flags & (GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_INPUT)) || !is_node(root);
    }

    // Can node i write its result over src[0]'s bytes? Readers of src[0] that are not yet
    // ordered before i but could be (all their predecessors come earlier) are moved before
    // i and get an edge; returns -1 if in-place is impossible, else the number of moves.
    int try_inplace(int i) {
        ggml_tensor * t = order[i];
        ggml_tensor * s = t->src[0];
        if (!ga->inplace || !op_can_inplace(t) || !s || s->view_src || !offset.count(s) || keep_forever(s)) return -1;
        if (s->type != t->type || ggml_nbytes(s) != ggml_nbytes(t) || !ggml_is_contiguous(s) || !ggml_is_contiguous(t)) return -1;
        for (int k = 1; k < GGML_MAX_SRC; ++k) {
            if (t->src[k] && root_of(t->src[k]) == s) return -1;
        }
        std::vector<int> to_move;
        for (int a : accessors[s]) {
            if (a == i || done_before(a, i)) continue;
            if (a < i || ga->order_only) return -1;        // may run concurrently: unsafe
            bool movable = true;                           // all its predecessors already placed?
            for_each_pred(order[a], [&](int p) { if (p >= i) movable = false; });
            if (!movable) return -1;
            to_move.push_back(a);
        }
        return (int) to_move.size() == 0 ? 0 : move_before(i, to_move);
    }

    int move_before(int i, const std::vector<int> & movers) {
        ggml_tensor * consumer = order[i];
        std::vector<ggml_tensor *> moved;
        for (int a : movers) moved.push_back(order[a]);
        for (ggml_tensor * m : moved) {
            // the consumer overwrites bytes m reads: m must run first
            ggml_push_dep(g->ctx, consumer, m, GGML_DEP_WAR);
            order.erase(std::find(order.begin(), order.end(), m));
        }
        order.insert(order.begin() + i, moved.begin(), moved.end());
        (void) consumer;
        return (int) moved.size();
    }

    void reindex() {
        pos.clear();
        for (int k = 0; k < (int) order.size(); ++k) pos[order[k]] = k;
        accessors.clear();
        for (int k = 0; k < (int) order.size(); ++k) {
            for_each_access(order[k], [&](const ggml_tensor * r) {
                auto & v = accessors[r];
                if (v.empty() || v.back() != k) v.push_back(k);
            });
        }
    }

    void run() {
        order.assign(g->nodes, g->nodes + g->n_nodes);
        const int n = (int) order.size();
        words = (size_t) (n + 63) / 64;
        anc.assign(n, std::vector<uint64_t>(words, 0));
        anc_ready.assign(n, 0);
        reindex();

        // leafs and inputs without memory live for the whole graph
        for (int l = 0; l < g->n_leafs; ++l) {
            ggml_tensor * t = g->leafs[l];
            if (needs_alloc(t) && !offset.count(t)) {
                offset[t] = place(ggml_nbytes(t), -1);
                ga->stats.n_tensors++;
                ga->stats.sum_tensor_bytes += ggml_nbytes(t);
            }
        }
        for (auto & kv : accessors) pending[kv.first] = (int) kv.second.size();

        for (int i = 0; i < (int) order.size(); ++i) {
            if (!anc_ready[i]) compute_anc(i);
            ggml_tensor * t = order[i];
            if (needs_alloc(t) && !offset.count(t)) {
                const int moves = try_inplace(i);
                if (moves > 0) {
                    // new order: recompute indices, ancestors and pending counts, redo this position
                    ga->stats.n_reordered += moves;
                    reindex();
                    std::fill(anc_ready.begin(), anc_ready.end(), 0);
                    pending.clear();
                    for (auto & kv : accessors) {
                        int left = 0;
                        for (int k : kv.second) left += k >= i;
                        pending[kv.first] = left;
                    }
                    --i;
                    continue;
                }
                if (moves == 0) {
                    const ggml_tensor * s = t->src[0];
                    offset[t] = offset.at(s);
                    alias[t] = s;
                    ga->stats.n_inplace++;
                    // s's bytes now belong to t: s is never released on its own
                    pending[s] = -1;
                } else {
                    offset[t] = place(ggml_nbytes(t), i);
                }
                ga->stats.n_tensors++;
                ga->stats.sum_tensor_bytes += ggml_nbytes(t);
            }
            // release roots whose last accessor is this node
            std::vector<const ggml_tensor *> roots;
            for_each_access(t, [&](const ggml_tensor * r) {
                if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
            });
            for (const ggml_tensor * r : roots) {
                auto it = pending.find(r);
                if (it == pending.end() || it->second <= 0) continue;
                if (--it->second == 0 && offset.count(r) && !keep_forever(r)) release_chain(r);
            }
        }
        // write the reordered node list back (it is a topological order of all edges)
        std::copy(order.begin(), order.end(), g->nodes);
    }

    // r may end an in-place chain: its bytes are also those of the sources it overwrote,
    // so every user of the chain must precede the next tenant.
    void release_chain(const ggml_tensor * r) {
        std::vector<int> users = accessors[r];
        for (const ggml_tensor * base = r; alias.count(base);) {
            base = alias.at(base);
            users.insert(users.end(), accessors[base].begin(), accessors[base].end());
        }
        accessors[r] = users;
        release(r);
    }
};

uint64_t graph_signature(const ggml_cgraph * g) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix((uint64_t) g->n_nodes);
    mix((uint64_t) g->n_leafs);
    for (int i = 0; i < g->n_nodes; ++i) {
        const ggml_tensor * t = g->nodes[i];
        mix((uint64_t) (uintptr_t) t);
        mix((uint64_t) t->op);
        mix((uint64_t) t->type);
        for (int d = 0; d < GGML_MAX_DIMS; ++d) mix((uint64_t) t->ne[d]);
        mix((uint64_t) t->n_deps);
        mix((uint64_t) (t->data != nullptr));
    }
    for (int i = 0; i < g->n_leafs; ++i) {
        mix((uint64_t) (uintptr_t) g->leafs[i]);
        mix((uint64_t) (g->leafs[i]->data != nullptr));
    }
    return h;
}

} // namespace

// Addresses we handed out earlier are not "data the tensor already has": forget them so
// that a changed graph is planned from scratch.
static void forget_our_addresses(ggml_gallocr * ga, ggml_cgraph * g) {
    if (!ga->buffer) return;
    const char * lo = (const char *) ga->buffer;
    const char * hi = lo + ga->buffer_size;
    auto forget = [&](ggml_tensor * t) {
        if (t && t->data >= (const void *) lo && t->data < (const void *) hi) t->data = nullptr;
    };
    for (int i = 0; i < g->n_nodes; ++i) {
        forget(g->nodes[i]);
        for (int s = 0; s < GGML_MAX_SRC; ++s) forget(g->nodes[i]->src[s]);
    }
    for (int i = 0; i < g->n_leafs; ++i) forget(g->leafs[i]);
}

static bool plan_graph(ggml_gallocr * ga, ggml_cgraph * g) {
    const int64_t t0 = ggml_time_us();
    forget_our_addresses(ga, g);
    ga->stats.n_tensors = 0;
    ga->stats.sum_tensor_bytes = 0;
    ga->stats.n_inplace = 0;
    ga->stats.n_reordered = 0;
    planner p{ga, g, {}, {}, {}, {}, 0, {}, {}, {}, {}, {}, 0};
    p.run();
    ga->plan_size = p.top;
    ga->node_offsets.clear();
    for (int i = 0; i < g->n_nodes; ++i) {
        auto it = p.offset.find(g->nodes[i]);
        if (it != p.offset.end() && p.needs_alloc(g->nodes[i])) ga->node_offsets.push_back({i, it->second});
    }
    for (int l = 0; l < g->n_leafs; ++l) {
        auto it = p.offset.find(g->leafs[l]);
        if (it != p.offset.end() && p.needs_alloc(g->leafs[l])) ga->node_offsets.push_back({-1 - l, it->second});
    }
    ga->signature = graph_signature(g); // after reordering: the replay sees this order
    ga->stats.n_plans++;
    ga->stats.plan_time_us = ggml_time_us() - t0;
    ga->stats.buffer_bytes = p.top;
    return true;
}

static bool grow_buffer(ggml_gallocr * ga, size_t size) {
    if (size <= ga->buffer_size) return true;
    void * mem = std::aligned_alloc(ALLOC_ALIGN, GGML_PAD(size, ALLOC_ALIGN));
    if (!mem) {
        fprintf(stderr, "ggml_gallocr: failed to allocate a compute buffer of %zu bytes\n", size);
        return false;
    }
    std::free(ga->buffer);
    ga->buffer = mem;
    ga->buffer_size = size;
    return true;
}

// Views get their root's address (plus their offset) once the root has memory.
static void init_view(ggml_tensor * t) {
    if (t->view_src && t->data == nullptr && t->view_src->data) t->data = (char *) t->view_src->data + t->view_offs;
}

static void assign(ggml_gallocr * ga, ggml_cgraph * g) {
    for (const auto & no : ga->node_offsets) {
        ggml_tensor * t = no.first >= 0 ? g->nodes[no.first] : g->leafs[-1 - no.first];
        t->data = (char *) ga->buffer + no.second;
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        ggml_tensor * t = g->nodes[i];
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (t->src[s]) init_view(t->src[s]);
        }
        init_view(t);
    }
}

ggml_gallocr_t ggml_gallocr_new(void) { return new ggml_gallocr(); }
void ggml_gallocr_free(ggml_gallocr_t ga) {
    if (!ga) return;
    std::free(ga->buffer);
    delete ga;
}

bool ggml_gallocr_reserve(ggml_gallocr_t ga, ggml_cgraph * g) {
    if (!plan_graph(ga, g)) return false;
    return grow_buffer(ga, ga->plan_size);
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t ga, ggml_cgraph * g) {
    if (graph_signature(g) != ga->signature || ga->buffer == nullptr) {
        if (!plan_graph(ga, g)) return false;
    }
    if (!grow_buffer(ga, ga->plan_size)) return false;
    assign(ga, g);
    // the signature records which tensors had data; ours do now, so remember that state
    ga->signature = graph_signature(g);
    return true;
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t ga, int buffer_id) {
    (void) buffer_id;
    return ga->buffer_size;
}
void * ggml_gallocr_get_buffer_base(ggml_gallocr_t ga) { return ga->buffer; }
ggml_gallocr_stats ggml_gallocr_get_stats(ggml_gallocr_t ga) { return ga->stats; }
void ggml_gallocr_set_order_only(ggml_gallocr_t ga, bool order_only) { ga->order_only = order_only; }
void ggml_gallocr_set_inplace(ggml_gallocr_t ga, bool enable) { ga->inplace = enable; }

// ---- whole-context allocation ------------------------------------------------------------
struct ggml_cpu_buffer {
    void * base;
    size_t size;
};

ggml_cpu_buffer_t ggml_cpu_alloc_ctx_tensors(ggml_context * ctx) {
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) total += GGML_PAD(ggml_nbytes(t), ALLOC_ALIGN);
    }
    auto * buf = new ggml_cpu_buffer{nullptr, total};
    if (total > 0) {
        buf->base = std::aligned_alloc(ALLOC_ALIGN, total);
        if (!buf->base) {
            fprintf(stderr, "ggml_cpu_alloc_ctx_tensors: failed to allocate %zu bytes\n", total);
            delete buf;
            return nullptr;
        }
    }
    size_t off = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) {
            t->data = (char *) buf->base + off;
            off += GGML_PAD(ggml_nbytes(t), ALLOC_ALIGN);
        }
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) init_view(t);
    return buf;
}
size_t ggml_cpu_buffer_size(ggml_cpu_buffer_t b) { return b ? b->size : 0; }
void * ggml_cpu_buffer_base(ggml_cpu_buffer_t b) { return b ? b->base : nullptr; }
void ggml_cpu_buffer_free(ggml_cpu_buffer_t b) {
    if (!b) return;
    std::free(b->base);
    delete b;
}
