// Graph memory planner: gives every intermediate tensor an offset in one compute buffer,
// reusing bytes whose previous tenants are finished, and lets ops write over a source
// that nobody reads afterwards (in-place).
//
// It plans over the graph's schedule (schedule.cpp), the order and edges the executor
// runs by, and changes neither the node list nor any tensor's edges.
//
// "Finished" is decided by the schedule's edges, not by node order alone: the DAG
// executor may run any two nodes at the same time unless a path of edges orders them. So
// bytes last touched by nodes A1..Ak may be given to the result of node N only if every
// Ai is an ancestor of N. Which nodes touch a root's bytes comes from the access model
// (ggml_op_accesses: reads of sources, the write of the result, through views), so a
// tensor read later through a view or written through a cpy/set_rows stays alive until
// those ops are done.
//
// Kept for the whole graph (never reused, never shared in-place), as in ggml: leafs,
// tensors flagged input or output, and the root of every tensor the program can still
// read after compute -- a node or view flagged output, and every sink (a node or view
// that no node of the graph reads).
//
// Replay. A plan is reused by ggml_gallocr_alloc_graph only for the graph it was made
// for (plan_hash: nodes, sources, edges, shapes, view offsets, flags). When the
// buffer grows, the old one is kept until the allocator is freed, so tensors of another
// graph placed earlier stay valid.
#include "ggml-alloc.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

static const size_t ALLOC_ALIGN = 64;

namespace {

struct free_block {
    size_t offset, size;
    int users_off, n_users; // nodes that touched the bytes last (in planner::user_pool); must precede a new tenant
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
    std::vector<std::pair<void *, size_t>> retired; // earlier, smaller buffers: graphs placed there stay valid
    bool order_only = false;
    bool inplace = true;
    ggml_gallocr_stats stats = {};

    // last plan, replayed when the graph is the one it was made for
    uint64_t fingerprint = 0;
    std::vector<std::pair<int, size_t>> node_offsets; // (position in the schedule (>=0) or in leafs (-1-i), offset)
    size_t plan_size = 0;
};

// ---- planning -------------------------------------------------------------------------
// Is p inside one of the buffers this allocator handed out (current or retired)?
static bool ours(const ggml_gallocr * ga, const void * p) {
    auto inside = [&](const void * base, size_t size) {
        return base && p >= base && (const char *) p < (const char *) base + size;
    };
    if (inside(ga->buffer, ga->buffer_size)) return true;
    for (const auto & r : ga->retired) {
        if (inside(r.first, r.second)) return true;
    }
    return false;
}

namespace {

// Hash of everything a plan depends on, in execution order: each node with its sources and
// control edges, types, shapes, strides, view offsets and flags, then the leafs, and which
// of them have memory of their own. Addresses this allocator handed out count as none
// (they are placed again), so the hash is the same before and after a graph is allocated.
struct plan_hash {
    const ggml_gallocr * ga;
    bool forgotten = false; // the planner drops our addresses before hashing: any data is the tensor's own
    // two lanes, each word pair in one step: the multiplies of a lane form one dependency
    // chain, and two chains of half the length hash a node in about half the time
    uint64_t a = 1469598103934665603ull, b = 0x9E3779B97F4A7C15ull;

    plan_hash(const ggml_gallocr * allocator, int n_nodes, int n_leafs) : ga(allocator) {
        mix((uint64_t) n_nodes << 32 | (uint32_t) n_leafs, (uint64_t) ga->inplace << 1 | (uint64_t) ga->order_only);
    }
    void mix(uint64_t x, uint64_t y) {
        a = (a ^ x) * 1099511628211ull;
        b = (b ^ y) * 0xff51afd7ed558ccdull;
    }
    uint64_t value() const { return a ^ (b >> 32 | b << 32); }
    bool has_memory(const ggml_tensor * t) const { return t->data && (forgotten || !ours(ga, t->data)); }
    void tensor(const ggml_tensor * t) {
        mix((uint64_t) (uintptr_t) t, (uint64_t) t->op << 32 | (uint64_t) t->type << 1 | (uint64_t) has_memory(t));
        for (int d = 0; d < GGML_MAX_DIMS; ++d) mix((uint64_t) t->ne[d], (uint64_t) t->nb[d]);
        mix((uint64_t) (uintptr_t) t->view_src, (uint64_t) t->view_offs);
    }
    void node(const ggml_tensor * t) {
        tensor(t);
        for (int s = 0; s < GGML_MAX_SRC; ++s) { // sources in the graph are hashed in full as nodes or leafs
            const ggml_tensor * src = t->src[s];
            if (!src) continue;
            mix((uint64_t) (uintptr_t) src + (uint64_t) s, // tensor structs lie far more than 10 bytes apart
                (uint64_t) (uintptr_t) src->view_src ^ ((uint64_t) src->view_offs << 1 | (uint64_t) has_memory(src)) * 0x9E3779B97F4A7C15ull);
        }
        for (int d = 0; d < t->n_deps; ++d) mix((uint64_t) (uintptr_t) t->deps[d].tensor, (uint64_t) t->deps[d].kind);
        mix((uint64_t) t->flags, (uint64_t) t->n_deps);
    }
};

// The hash of g as it is now (the planner computes the same while it reads the nodes).
uint64_t hash_graph(const ggml_gallocr * ga, const ggml_cgraph * g, const ggml_graph_sched * sc) {
    plan_hash h(ga, (int) sc->exec.size(), g->n_leafs);
    for (const ggml_tensor * t : sc->exec) h.node(t);
    for (int l = 0; l < g->n_leafs; ++l) h.tensor(g->leafs[l]);
    return h.value();
}

struct planner final : ggml_sched_visitor {
    ggml_gallocr * ga;
    ggml_cgraph * g;
    const ggml_graph_sched * sc = nullptr; // set by plan_graph once the schedule exists
    plan_hash hash;                        // of the graph as planned (see hash_graph)

    planner(ggml_gallocr * a, ggml_cgraph * graph) : ga(a), g(graph), hash(a, 0, 0) {}

    // Ancestors of each position, kept only while a successor still needs them. Every
    // position below `prefix` is an ancestor; bits cover [64 * base, i). In chains and
    // decoder graphs the prefix runs close behind i, so a set is a few words and planning
    // is linear; only wide graphs pay up to n bits per live set.
    struct ancestor_set {
        int prefix = 0, base = 0;
        std::vector<uint64_t> bits;
        bool has(int q) const {
            if (q < prefix) return true;
            const int w = (q >> 6) - base;
            return w >= 0 && w < (int) bits.size() && ((bits[w] >> (q & 63)) & 1);
        }
    };
    std::vector<ancestor_set> anc;
    std::vector<int> succ_left;

    // By position of the node whose result owns the bytes (roots that are not nodes are
    // never placed here): the nodes touching them, ascending (CSR), how many are still to
    // run, where they were placed, the root an in-place result shares, kept or not.
    std::vector<int> acc_off, acc;
    std::vector<int> pending;
    std::vector<size_t> offset;
    std::vector<int> alias;
    std::vector<char> kept, needs;
    std::vector<int> inplace_src;
    std::vector<size_t> nbytes;
    std::vector<std::pair<int, size_t>> leaf_offsets; // (leaf index, offset)
    std::vector<free_block> free_list;
    size_t top = 0;
    static constexpr size_t NOWHERE = SIZE_MAX;

    bool needs_alloc(const ggml_tensor * t) const { return t->data == nullptr && t->view_src == nullptr; }
    // Is node a certainly finished when node b (the one being placed) starts? With edges: a
    // is an ancestor of b. In order-only mode (a sequential planner's view): a comes earlier.
    bool done_before(int a, int b) const {
        if (ga->order_only) return a < b;
        return a < b && anc[b].has(a);
    }

    void compute_anc(int i) {
        ancestor_set & s = anc[i];
        s.prefix = 0;
        bool prev_is_pred = false;
        for (int k = sc->pred_off[i]; k < sc->pred_off[i + 1]; ++k) {
            s.prefix = std::max(s.prefix, anc[sc->preds[k]].prefix);
            prev_is_pred = prev_is_pred || sc->preds[k] == i - 1;
        }
        if (prev_is_pred && s.prefix >= i - 1) { // a chain link: everything before i is an ancestor
            s.prefix = i;
            s.base = i >> 6;
            s.bits.clear();
            return;
        }
        s.base = s.prefix >> 6;
        s.bits.assign(i > s.prefix ? (size_t) (((i - 1) >> 6) - s.base + 1) : 0, 0);
        for (int k = sc->pred_off[i]; k < sc->pred_off[i + 1]; ++k) {
            const int p = sc->preds[k];
            const ancestor_set & ps = anc[p];
            for (int w = std::max(ps.base, s.base); w - ps.base < (int) ps.bits.size(); ++w) s.bits[w - s.base] |= ps.bits[w - ps.base];
            if (p >= s.prefix) s.bits[(p >> 6) - s.base] |= 1ull << (p & 63);
        }
        // move the prefix over the bits that are all set, then drop the words below it
        while (s.prefix < i) {
            const int w = (s.prefix >> 6) - s.base;
            if ((s.prefix & 63) == 0 && w < (int) s.bits.size() && s.bits[w] == ~0ull) s.prefix += 64;
            else if (s.has(s.prefix)) ++s.prefix;
            else break;
        }
        const int drop = std::min((int) s.bits.size(), (s.prefix >> 6) - s.base);
        if (drop > 0) {
            s.bits.erase(s.bits.begin(), s.bits.begin() + drop);
            s.base += drop;
        }
    }
    void release_anc(int i) {
        for (int k = sc->pred_off[i]; k < sc->pred_off[i + 1]; ++k) {
            const int p = sc->preds[k];
            if (--succ_left[p] == 0) ancestor_set().bits.swap(anc[p].bits);
        }
        if (succ_left[i] == 0) ancestor_set().bits.swap(anc[i].bits);
    }

    std::vector<int> user_pool; // the free blocks' user lists; append-only, at most one per release
    bool can_reuse(const free_block & b, int i) const {
        for (int k = b.users_off; k < b.users_off + b.n_users; ++k) {
            if (user_pool[k] != i && !done_before(user_pool[k], i)) return false;
        }
        return true;
    }
    bool same_users(const free_block & a, const free_block & b) const {
        return a.n_users == b.n_users && std::equal(user_pool.begin() + a.users_off, user_pool.begin() + a.users_off + a.n_users,
                                                    user_pool.begin() + b.users_off);
    }

    // Free space is a list of segments sorted by offset, each with the nodes that last
    // touched it. Neighbours are not merged unless their users are the same: a merged
    // block would be usable only by descendants of all of them, so one parallel branch's
    // bytes would lock up a whole region. A tenant may span a run of adjacent segments
    // that it may all reuse; the smallest run that fits wins, else the top grows.
    size_t place(size_t size, int i) {
        size = GGML_PAD(size, ALLOC_ALIGN);
        if (i < 0) { // leafs: before any node, nothing to reuse
            const size_t off = top;
            top += size;
            return off;
        }
        int best = -1, best_end = -1;
        size_t best_size = SIZE_MAX;
        for (int k = 0; k < (int) free_list.size();) {
            if (!can_reuse(free_list[k], i)) { ++k; continue; }
            int e = k; // the run of reusable adjacent segments starting at k
            size_t run = free_list[k].size;
            while (e + 1 < (int) free_list.size() && free_list[e].offset + free_list[e].size == free_list[e + 1].offset &&
                   can_reuse(free_list[e + 1], i)) run += free_list[++e].size;
            const bool at_top = free_list[e].offset + free_list[e].size == top;
            if ((run >= size || at_top) && (run >= size ? run : SIZE_MAX - 1) < best_size) {
                best = k;
                best_end = e;
                best_size = run >= size ? run : SIZE_MAX - 1;
            }
            k = e + 1;
        }
        if (best < 0) {
            const size_t off = top;
            top += size;
            return off;
        }
        const size_t off = free_list[best].offset;
        size_t left = size;
        int k = best;
        while (k <= best_end && left >= free_list[k].size) left -= free_list[k++].size;
        if (k > best_end) { // the run ends at the top and is too short: grow the top
            top = std::max(top, off + size);
        } else if (left > 0) {
            free_list[k].offset += left;
            free_list[k].size -= left;
        }
        free_list.erase(free_list.begin() + best, free_list.begin() + k);
        return off;
    }

    // Frees [off, off + size) while node i runs the last access to them. A later tenant must
    // follow every user; users that are ancestors of i are represented by i itself, which
    // keeps the lists short (a chain's segments always have one user).
    // The users not done before i are user_pool[first ..); with i they become the block's list.
    void release(size_t off, size_t size, size_t first, int i) {
        user_pool.push_back(i);
        if (user_pool.size() - first > 1) {
            std::sort(user_pool.begin() + (std::ptrdiff_t) first, user_pool.end());
            user_pool.erase(std::unique(user_pool.begin() + (std::ptrdiff_t) first, user_pool.end()), user_pool.end());
        }
        auto it = std::lower_bound(free_list.begin(), free_list.end(), off,
                                   [](const free_block & b, size_t o) { return b.offset < o; });
        it = free_list.insert(it, free_block{off, size, (int) first, (int) (user_pool.size() - first)});
        // merge with neighbours that have the same users
        auto next = it + 1;
        if (next != free_list.end() && it->offset + it->size == next->offset && same_users(*next, *it)) {
            it->size += next->size;
            free_list.erase(next);
        }
        if (it != free_list.begin()) {
            auto prev = it - 1;
            if (prev->offset + prev->size == it->offset && same_users(*prev, *it)) {
                prev->size += it->size;
                free_list.erase(it);
            }
        }
    }

    bool keep_forever(int r) const { return r < 0 || kept[r]; }

    // Addresses we handed out earlier are not memory the tensor has: forget them, so that a
    // changed graph is planned from scratch and views take their root's new address.
    void forget_ours(ggml_tensor * t) const {
        if (t->data && ours(ga, t->data)) t->data = nullptr;
    }

    // The one read of the nodes' tensor structs (about 16 MB for 40k nodes: a second pass
    // would come from memory again), done while the schedule is built when it is built now
    // (ggml_sched_visitor), else by read_nodes. It forgets our old addresses and hashes the
    // nodes; the placement loop then reads these arrays:
    //  - nbytes, and whether the node needs memory here;
    //  - kept (finish_reading): inputs and outputs, and the roots the program may read after
    //    compute, those of outputs and of sinks (nodes nothing reads);
    //  - inplace_src: where the op could write over src[0] (its bytes permitting), else -1.
    std::vector<int> root_pos;  // position of the node owning the node's bytes (itself, or a view's root), or -1
    std::vector<char> output;   // flagged output

    void begin(int n) override {
        hash = plan_hash(ga, n, g->n_leafs);
        hash.forgotten = true;
        nbytes.assign(n, 0);
        kept.assign(n, 0);
        needs.assign(n, 0);
        inplace_src.assign(n, -1);
        root_pos.assign(n, -1);
        output.assign(n, 0);
    }
    void node(int i, ggml_tensor * t, const ggml_ptr_index & pos) override {
        forget_ours(t);
        for (int k = 0; k < GGML_MAX_SRC; ++k) if (t->src[k]) forget_ours(t->src[k]);
        hash.node(t);
        nbytes[i] = ggml_nbytes(t);
        needs[i] = needs_alloc(t);
        if (t->flags & (GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_INPUT)) kept[i] = 1;
        root_pos[i] = t->view_src ? pos.get(t->view_src) : i;
        output[i] = (t->flags & GGML_TENSOR_FLAG_OUTPUT) != 0;
        inplace_src[i] = ga->inplace ? inplace_candidate(i, t, pos) : -1;
    }
    void read_nodes() {
        begin((int) sc->exec.size());
        for (int i = 0; i < (int) sc->exec.size(); ++i) node(i, sc->exec[i], sc->position);
    }
    // Once the schedule knows which nodes are read (is_src).
    void finish_reading() {
        for (int i = 0; i < (int) sc->exec.size(); ++i) {
            if ((output[i] || !sc->is_src[i]) && root_pos[i] >= 0) kept[root_pos[i]] = 1; // an output or a sink
        }
    }

    // src[0]'s position if node i's op may overwrite it as far as shapes go: same type and
    // size, both contiguous, src[0] a node that no other source of i aliases.
    int inplace_candidate(int i, const ggml_tensor * t, const ggml_ptr_index & pos) const {
        const ggml_tensor * s = t->src[0];
        if (!op_can_inplace(t) || !s || s->view_src) return -1;
        const int sp = pos.get(s); // a source: placed before i, its nbytes known
        if (sp < 0 || s->type != t->type || nbytes[sp] != nbytes[i] || !ggml_is_contiguous(s) || !ggml_is_contiguous(t)) return -1;
        for (int k = 1; k < GGML_MAX_SRC; ++k) {
            if (t->src[k] && root_of(t->src[k]) == s) return -1;
        }
        return sp;
    }

    // Can node i write its result over src[0]'s bytes now? Only if every other node touching
    // them is certainly done before i starts (no reordering: the schedule is fixed).
    bool try_inplace(int i) const {
        const int sp = inplace_src[i];
        if (sp < 0 || offset[sp] == NOWHERE || keep_forever(sp)) return false;
        for (int k = acc_off[sp]; k < acc_off[sp + 1]; ++k) {
            if (acc[k] != i && !done_before(acc[k], i)) return false;
        }
        return true;
    }

    void place_node(int i) {
        if (!needs[i] || offset[i] != NOWHERE) return;
        if (try_inplace(i)) {
            const int sp = inplace_src[i];
            offset[i] = offset[sp];
            alias[i] = sp;
            ga->stats.n_inplace++;
            pending[sp] = -1; // s's bytes now belong to t: s is never released on its own
        } else {
            offset[i] = place(nbytes[i], i);
        }
        ga->stats.n_tensors++;
        ga->stats.sum_tensor_bytes += nbytes[i];
    }

    // For each node owning a root: the nodes touching its bytes (CSR by root, ascending; a
    // node twice if it touches them twice), and how many accesses are still to run.
    void index_accessors() {
        const int n = (int) sc->exec.size();
        const std::vector<int> & roots = sc->acc_root; // per access, -1: a root no node owns
        acc_off.assign(n + 1, 0);
        for (int rp : roots) if (rp >= 0) acc_off[rp + 1]++;
        for (int i = 0; i < n; ++i) acc_off[i + 1] += acc_off[i];
        acc.resize(acc_off[n]);
        std::vector<int> fill(acc_off.begin(), acc_off.end() - 1);
        for (int i = 0; i < n; ++i) {
            for (int k = sc->acc_off[i]; k < sc->acc_off[i + 1]; ++k) if (roots[k] >= 0) acc[fill[roots[k]]++] = i;
        }
        pending.resize(n);
        for (int i = 0; i < n; ++i) pending[i] = acc_off[i + 1] - acc_off[i];
    }

    void run() {
        const int n = (int) sc->exec.size();
        finish_reading();
        anc.assign(n, {});
        succ_left.assign(n, 0);
        offset.assign(n, NOWHERE);
        alias.assign(n, -1);
        for (int i = 0; i < n; ++i) succ_left[i] = sc->succ_off[i + 1] - sc->succ_off[i];
        index_accessors();
        // leafs and inputs without memory live for the whole graph
        for (int l = 0; l < g->n_leafs; ++l) {
            ggml_tensor * t = g->leafs[l];
            forget_ours(t);
            hash.tensor(t);
            if (!needs_alloc(t)) continue;
            leaf_offsets.emplace_back(l, place(ggml_nbytes(t), -1));
            ga->stats.n_tensors++;
            ga->stats.sum_tensor_bytes += ggml_nbytes(t);
        }
        for (int i = 0; i < n; ++i) {
            if (!ga->order_only) compute_anc(i);
            place_node(i);
            // release roots whose last accessor is this node
            for (int k = sc->acc_off[i]; k < sc->acc_off[i + 1]; ++k) {
                const int rp = sc->acc_root[k];
                if (rp >= 0 && pending[rp] > 0 && --pending[rp] == 0 && offset[rp] != NOWHERE && !keep_forever(rp)) release_chain(rp, i);
            }
            if (!ga->order_only) release_anc(i);
        }
    }

    // r may end an in-place chain: its bytes are also those of the sources it overwrote,
    // so every user of the chain must precede the next tenant.
    void release_chain(int r, int i) {
        const size_t first = user_pool.size();
        auto add_users = [&](int root) {
            for (int k = acc_off[root]; k < acc_off[root + 1]; ++k) {
                if (acc[k] != i && !done_before(acc[k], i)) user_pool.push_back(acc[k]);
            }
        };
        add_users(r);
        for (int base = alias[r]; base >= 0; base = alias[base]) add_users(base);
        release(offset[r], GGML_PAD(nbytes[r], ALLOC_ALIGN), first, i);
    }
};

} // namespace

static bool plan_graph(ggml_gallocr * ga, ggml_cgraph * g) {
    const int64_t t0 = ggml_time_us();
    planner p(ga, g);
    bool read = false; // the planner saw the nodes while the schedule was built
    p.sc = ggml_graph_get_sched_visiting(g, &p, &read);
    if (!p.sc->ok) return false; // the message names the cycle
    if (!read) p.read_nodes();
    ga->stats.n_tensors = 0;
    ga->stats.sum_tensor_bytes = 0;
    ga->stats.n_inplace = 0;
    p.run();
    ga->plan_size = p.top;
    ga->node_offsets.clear();
    for (int k = 0; k < (int) p.offset.size(); ++k) { // placed: the nodes that needed memory
        if (p.offset[k] != planner::NOWHERE) ga->node_offsets.push_back({k, p.offset[k]});
    }
    for (const auto & lo : p.leaf_offsets) ga->node_offsets.push_back({-1 - lo.first, lo.second});
    ga->fingerprint = p.hash.value();
    ga->stats.n_plans++;
    ga->stats.plan_time_us = ggml_time_us() - t0;
    ga->stats.buffer_bytes = p.top;
    return true;
}

// A larger buffer; the old one is retired, not freed: another graph may still point into it.
static bool grow_buffer(ggml_gallocr * ga, size_t size) {
    if (size <= ga->buffer_size) return true;
    void * mem = std::aligned_alloc(ALLOC_ALIGN, GGML_PAD(size, ALLOC_ALIGN));
    if (!mem) {
        GGML_LOG_ERROR("ggml_gallocr: failed to allocate a compute buffer of %zu bytes\n", size);
        return false;
    }
    if (ga->buffer) ga->retired.emplace_back(ga->buffer, ga->buffer_size);
    ga->buffer = mem;
    ga->buffer_size = size;
    return true;
}

// Views get their root's address (plus their offset) once the root has memory.
static void init_view(ggml_tensor * t) {
    if (t->view_src && t->data == nullptr && t->view_src->data) t->data = (char *) t->view_src->data + t->view_offs;
}

static void assign(ggml_gallocr * ga, ggml_cgraph * g) {
    const ggml_graph_sched * sc = ggml_graph_get_sched(g); // the one planned over: the graph is unchanged
    for (const auto & no : ga->node_offsets) {
        ggml_tensor * t = no.first >= 0 ? sc->exec[no.first] : g->leafs[-1 - no.first];
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

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t) { return new ggml_gallocr(); } // one kind of memory
ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int) { return ggml_gallocr_new(bufts ? bufts[0] : nullptr); }
void ggml_gallocr_free(ggml_gallocr_t ga) {
    if (!ga) return;
    std::free(ga->buffer);
    for (const auto & r : ga->retired) std::free(r.first);
    delete ga;
}

bool ggml_gallocr_reserve(ggml_gallocr_t ga, ggml_cgraph * g) {
    if (!plan_graph(ga, g)) return false;
    return grow_buffer(ga, ga->plan_size);
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t ga, ggml_cgraph * g) {
    // A graph whose schedule is not built yet (a new graph, or one changed since) is planned
    // with it; a replay needs the hash, which needs the schedule's order.
    if (ga->buffer == nullptr || !ggml_graph_sched_current(g) || hash_graph(ga, g, ggml_graph_get_sched(g)) != ga->fingerprint) {
        if (!plan_graph(ga, g)) return false;
    }
    if (!grow_buffer(ga, ga->plan_size)) return false;
    assign(ga, g);
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
            GGML_LOG_ERROR("ggml_cpu_alloc_ctx_tensors: failed to allocate %zu bytes\n", total);
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
