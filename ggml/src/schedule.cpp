// A graph's execution order and edges: what the executor (both schedulers) and the memory
// planner run by, so that they agree on what may overlap.
//
// Order. Each node once (a repeated node keeps its first place), in a topological order of
// its edges (ggml_for_each_pred: data edges, control edges, both looked through views the
// graph does not list). Where the node list already is such an order (everything
// ggml_build_forward_expand builds) it is kept as is; otherwise the earliest-listed ready
// node goes first, so an edge added after both ends were in the graph is honoured. Edges
// that form a cycle cannot be honoured: the graph is refused with a message.
//
// Edges. Besides those, the hazard rules run over the nodes' accesses in this order and add
// an edge for every conflict (ggml_hazard_rules, the same rules as at op creation). Where
// the creation edges already order a pair this repeats them; where they do not (a write
// and a read created in two contexts, a hand-built graph, ggml_hazards_reset) it keeps
// ggml's sequential order, so the DAG executor never runs two conflicting nodes at once.
//
// The schedule is cached in the graph and rebuilt when the node list changed (graph
// version) or an edge was added to a node some graph already holds (edge epoch).
#include "ggml-impl.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <queue>

static std::atomic<uint64_t> g_edge_epoch{1};
void ggml_graph_edges_changed(void) { g_edge_epoch.fetch_add(1, std::memory_order_relaxed); }

namespace {

// Each node once, in list order (index: tensor -> position in nodes), with its explicit
// predecessors as CSR (positions in the same list).
void collect_nodes(const ggml_cgraph * g, std::vector<ggml_tensor *> & nodes, ggml_ptr_index & index, std::vector<int> & off,
                   std::vector<int> & preds, std::vector<char> & is_src) {
    for (int i = 0; i < g->n_nodes; ++i) {
        if (index.put(g->nodes[i], (int) nodes.size()) == (int) nodes.size()) nodes.push_back(g->nodes[i]);
    }
    const int n = (int) nodes.size();
    int found = -1; // f is called right after is_node(p) holds for the same p: one lookup
    auto is_node = [&](const ggml_tensor * p) { return (found = index.get(p)) >= 0; };
    off.assign(n + 1, 0);
    preds.clear();
    preds.reserve((size_t) n * 2);
    is_src.assign(n, 0);
    for (int i = 0; i < n; ++i) {
        ggml_for_each_pred(nodes[i], is_node, [&](const ggml_tensor *, ggml_dep_kind, bool direct) {
            preds.push_back(found);
            if (direct) is_src[found] = 1;
        });
        off[i + 1] = (int) preds.size();
    }
}

// Positions in a topological order, earliest-listed ready node first; false on a cycle.
bool topological_order(const std::vector<ggml_tensor *> & nodes, const std::vector<int> & off, const std::vector<int> & preds,
                       std::vector<int> & order) {
    const int n = (int) nodes.size();
    order.clear();
    bool sorted = true;
    for (int i = 0; i < n && sorted; ++i) {
        for (int k = off[i]; k < off[i + 1]; ++k) sorted = sorted && preds[k] < i;
    }
    if (sorted) {
        for (int i = 0; i < n; ++i) order.push_back(i);
        return true;
    }
    std::vector<int> indeg(n, 0);
    std::vector<std::vector<int>> succ(n);
    for (int i = 0; i < n; ++i) {
        for (int k = off[i]; k < off[i + 1]; ++k) { succ[preds[k]].push_back(i); ++indeg[i]; }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i) if (indeg[i] == 0) ready.push(i);
    while (!ready.empty()) {
        const int v = ready.top();
        ready.pop();
        order.push_back(v);
        for (int s : succ[v]) if (--indeg[s] == 0) ready.push(s);
    }
    if ((int) order.size() == n) return true;
    for (int i = 0; i < n; ++i) {
        if (indeg[i] == 0) continue;
        for (int k = off[i]; k < off[i + 1]; ++k) {
            const int p = preds[k];
            if (indeg[p] == 0) continue;
            GGML_LOG_ERROR("ggml_graph_compute: node '%s' (%s) and node '%s' (%s) wait for each other through their edges "
                            "(a cycle of control edges); the graph cannot run\n",
                    nodes[i]->name, ggml_op_desc(nodes[i]), nodes[p]->name, ggml_op_desc(nodes[p]));
            return false;
        }
    }
    return false;
}

// The schedule's CSR: node k's predecessors are its own edges (preds of list position
// order[k], mapped to exec positions by pos) and the conflict edges into k, which
// add_conflict_edges emits with ascending k; each list sorted, without repeats. Successors
// are the same edges from the other end (a counting sort).
void to_csr(const std::vector<int> & order, const std::vector<int> & pos, const std::vector<int> & off,
            const std::vector<int> & preds, const std::vector<std::pair<int, int>> & conflicts, ggml_graph_sched * s) {
    const int n = (int) order.size();
    s->pred_off.assign(n + 1, 0);
    s->preds.clear();
    s->preds.reserve(preds.size() + conflicts.size());
    size_t c = 0;
    for (int k = 0; k < n; ++k) {
        const size_t first = s->preds.size();
        const int i = order[k];
        for (int q = off[i]; q < off[i + 1]; ++q) s->preds.push_back(pos[preds[q]]);
        for (; c < conflicts.size() && conflicts[c].second == k; ++c) s->preds.push_back(conflicts[c].first);
        const auto begin = s->preds.begin() + (std::ptrdiff_t) first;
        if (s->preds.size() - first > 1) {
            std::sort(begin, s->preds.end());
            s->preds.erase(std::unique(begin, s->preds.end()), s->preds.end());
        }
        s->pred_off[k + 1] = (int) s->preds.size();
    }
    s->succ_off.assign(n + 1, 0);
    for (int p : s->preds) s->succ_off[p + 1]++;
    for (int i = 0; i < n; ++i) s->succ_off[i + 1] += s->succ_off[i];
    s->succ.resize(s->preds.size());
    std::vector<int> fill(s->succ_off.begin(), s->succ_off.end() - 1);
    for (int i = 0; i < n; ++i) {
        for (int k = s->pred_off[i]; k < s->pred_off[i + 1]; ++k) s->succ[fill[s->preds[k]]++] = i;
    }
}

// Is `writer` a source of t, directly or through view ops?
bool reads_through_data_edge(const ggml_tensor * t, const ggml_tensor * writer) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        for (const ggml_tensor * p = t->src[i]; p; p = p->src[0]) {
            if (p == writer) return true;
            if (!ggml_op_is_view(p->op)) break;
        }
    }
    return false;
}

// Edges for the conflicting accesses of exec, in that order, by the same rules as at op
// creation. Only roots where a conflict can lack a data edge go through the rules: those
// written by two or more nodes, or by one that some other reader reaches by no data edge.
// A root with one writer whose readers all read it through data edges (nearly every
// intermediate result) has nothing to add, and a root nobody writes has no conflicts.
void add_conflict_edges(const ggml_graph_sched * s, std::vector<std::pair<int, int>> & edges) {
    const int n = (int) s->exec.size();
    // a root's id: its exec position when a node owns it, else n + the order of first sight
    ggml_ptr_index other_roots((size_t) std::count(s->acc_root.begin(), s->acc_root.end(), -1));
    std::vector<int> n_writers(n, 0);
    std::vector<const ggml_tensor *> writer(n, nullptr);
    std::vector<int> ids(s->acc.size());
    for (int k = 0; k < n; ++k) {
        for (int a = s->acc_off[k]; a < s->acc_off[k + 1]; ++a) {
            const ggml_access & x = s->acc[a];
            int id = s->acc_root[a];
            if (id < 0) {
                id = other_roots.put(x.root, (int) n_writers.size());
                if (id == (int) n_writers.size()) { n_writers.push_back(0); writer.push_back(nullptr); }
            }
            ids[a] = id;
            if (x.write && writer[id] != s->exec[k]) { n_writers[id]++; writer[id] = s->exec[k]; }
        }
    }
    std::vector<char> needs_rules(n_writers.size(), 0);
    bool any = false;
    for (int k = 0; k < n; ++k) {
        for (int a = s->acc_off[k]; a < s->acc_off[k + 1]; ++a) {
            const ggml_access & x = s->acc[a];
            const int id = ids[a];
            const bool ordered_read = x.write || writer[id] == s->exec[k] || reads_through_data_edge(s->exec[k], writer[id]);
            if (n_writers[id] > 1 || (n_writers[id] == 1 && !ordered_read)) {
                needs_rules[id] = 1;
                any = true;
            }
        }
    }
    if (!any) return;
    ggml_hazard_rules rules;
    for (int k = 0; k < n; ++k) {
        for (int a = s->acc_off[k]; a < s->acc_off[k + 1]; ++a) {
            if (!needs_rules[ids[a]]) continue;
            rules.record(s->exec[k], s->acc[a], [&](ggml_tensor * pred, ggml_dep_kind) { edges.emplace_back(s->position.get(pred), k); });
        }
    }
}

void build(ggml_cgraph * g, ggml_graph_sched * s) {
    std::vector<ggml_tensor *> nodes;
    ggml_ptr_index index((size_t) g->n_nodes);
    std::vector<int> off, preds, order;
    std::vector<char> is_src;
    collect_nodes(g, nodes, index, off, preds, is_src);
    s->exec.clear();
    s->ok = topological_order(nodes, off, preds, order);
    if (!s->ok) return;

    const int n = (int) nodes.size();
    bool identity = true;
    for (int k = 0; k < n && identity; ++k) identity = order[k] == k;
    std::vector<int> pos(n);
    if (identity) s->position = std::move(index); // node -> list position is node -> exec position
    else s->position = ggml_ptr_index((size_t) n);
    s->exec.resize(n);
    for (int k = 0; k < n; ++k) {
        pos[order[k]] = k;
        s->exec[k] = nodes[order[k]];
        if (!identity) s->position.put(nodes[order[k]], k);
    }
    s->is_src.resize(n);
    for (int k = 0; k < n; ++k) s->is_src[k] = is_src[order[k]];
    s->acc_off.assign(n + 1, 0);
    s->acc.clear();
    s->acc.reserve((size_t) n * 3);
    s->acc_root.clear();
    s->acc_root.reserve((size_t) n * 3);
    for (int k = 0; k < n; ++k) {
        ggml_access acc[GGML_MAX_ACCESSES];
        const int c = ggml_op_accesses(s->exec[k], acc);
        for (int a = 0; a < c; ++a) {
            s->acc.push_back(acc[a]);
            s->acc_root.push_back(s->position.get(acc[a].root));
        }
        s->acc_off[k + 1] = (int) s->acc.size();
    }
    std::vector<std::pair<int, int>> conflicts;
    add_conflict_edges(s, conflicts);
    to_csr(order, pos, off, preds, conflicts, s);
}

} // namespace

const ggml_graph_sched * ggml_graph_get_sched(ggml_cgraph * g) {
    const uint64_t epoch = g_edge_epoch.load(std::memory_order_relaxed);
    ggml_graph_sched * s = g->sched;
    if (s && s->version == g->version && s->edge_epoch == epoch && s->n_nodes == g->n_nodes) return s;
    if (!s) s = g->sched = new ggml_graph_sched();
    build(g, s);
    s->version = g->version;
    s->edge_epoch = epoch;
    s->n_nodes = g->n_nodes;
    return s;
}

void ggml_graph_sched_free(ggml_cgraph * g) {
    delete g->sched;
    g->sched = nullptr;
}

uint64_t ggml_graph_fingerprint(const ggml_cgraph * g) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    auto mix_tensor = [&](const ggml_tensor * t) {
        mix((uint64_t) (uintptr_t) t);
        mix((uint64_t) t->op << 32 | (uint64_t) t->type << 1 | (uint64_t) (t->data != nullptr));
        for (int d = 0; d < GGML_MAX_DIMS; ++d) { mix((uint64_t) t->ne[d]); mix((uint64_t) t->nb[d]); }
        mix((uint64_t) (uintptr_t) t->view_src);
        mix((uint64_t) t->view_offs);
    };
    mix((uint64_t) g->n_nodes);
    mix((uint64_t) g->n_leafs);
    for (int i = 0; i < g->n_nodes; ++i) {
        const ggml_tensor * t = g->nodes[i];
        mix_tensor(t);
        mix((uint64_t) t->flags);
        for (int s = 0; s < GGML_MAX_SRC; ++s) { // sources in the graph are hashed in full as nodes or leafs
            const ggml_tensor * src = t->src[s];
            if (!src) continue;
            mix((uint64_t) (uintptr_t) src + (uint64_t) s); // tensor structs lie far more than 10 bytes apart
            mix((uint64_t) (uintptr_t) src->view_src);
            mix((uint64_t) src->view_offs << 1 | (uint64_t) (src->data != nullptr));
        }
        for (int d = 0; d < t->n_deps; ++d) mix((uint64_t) (uintptr_t) t->deps[d].tensor ^ (uint64_t) t->deps[d].kind); // kind < 8
        mix((uint64_t) t->n_deps);
    }
    for (int i = 0; i < g->n_leafs; ++i) mix_tensor(g->leafs[i]);
    return h;
}
