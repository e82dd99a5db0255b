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

bool ggml_topological_order(int n, const std::vector<int> & off, const std::vector<int> & preds, std::vector<int> & order) {
    std::vector<int> indeg(n, 0), succ_off(n + 1, 0), succ(preds.size());
    for (int i = 0; i < n; ++i) {
        indeg[i] = off[i + 1] - off[i];
        for (int k = off[i]; k < off[i + 1]; ++k) succ_off[preds[k] + 1]++;
    }
    for (int i = 0; i < n; ++i) succ_off[i + 1] += succ_off[i];
    std::vector<int> fill(succ_off.begin(), succ_off.end() - 1);
    for (int i = 0; i < n; ++i) {
        for (int k = off[i]; k < off[i + 1]; ++k) succ[fill[preds[k]]++] = i;
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i) if (indeg[i] == 0) ready.push(i);
    order.clear();
    while (!ready.empty()) {
        const int v = ready.top();
        ready.pop();
        order.push_back(v);
        for (int k = succ_off[v]; k < succ_off[v + 1]; ++k) if (--indeg[succ[k]] == 0) ready.push(succ[k]);
    }
    return (int) order.size() == n;
}
void ggml_graph_edges_changed(void) { g_edge_epoch.fetch_add(1, std::memory_order_relaxed); }

namespace {

// Roots of the nodes' accesses, in exec order, and which roots need the hazard rules:
// those written by two or more nodes, read before their writer by another node, or read
// by a node whose read does not come through the writer's result (x.producer). A root with
// one writer whose readers all read its result (nearly every intermediate result) has
// nothing to add, and a root nobody writes has no conflicts.
struct access_scan {
    struct root_state {
        const ggml_tensor * writer = nullptr;       // the first node writing it
        const ggml_tensor * early_reader = nullptr; // a node reading it before any write
        bool early_readers = false;                 // more than one such node
        bool needs_rules = false;
    };
    ggml_graph_sched * s;
    std::vector<root_state> owned, others; // by exec position of the owning node / by j
    ggml_ptr_index other_roots;            // roots no node owns -> j
    bool any = false;

    access_scan(ggml_graph_sched * sched, int n, int n_leafs) : s(sched), owned(n), other_roots((size_t) n_leafs + 16) {
        s->acc_off.assign(n + 1, 0);
        s->acc_root.clear();
        s->acc_root.reserve((size_t) n * 3);
    }
    root_state & state(int id) { return id >= 0 ? owned[id] : others[-1 - id]; }

    // Node at exec position k; pos(root): exec position of the node owning root, or -1.
    template <typename Pos> void node(int k, const ggml_tensor * t, Pos pos) {
        ggml_access acc[GGML_MAX_ACCESSES];
        const int c = ggml_op_accesses(t, acc);
        for (int a = 0; a < c; ++a) {
            const ggml_access & x = acc[a];
            int id = x.root == t ? k : pos(x.root); // most writes are of the node's own bytes
            if (id < 0) {
                id = -1 - other_roots.put(x.root, (int) others.size());
                if (-1 - id == (int) others.size()) others.emplace_back();
            }
            s->acc_root.push_back(id);
            root_state & r = state(id);
            bool conflict;
            if (x.write) {
                conflict = (r.writer && r.writer != t) || r.early_readers || (r.early_reader && r.early_reader != t);
                if (!r.writer) r.writer = t;
            } else if (!r.writer) { // a conflict only if another node writes it later
                conflict = false;
                if (r.early_reader && r.early_reader != t) r.early_readers = true;
                if (!r.early_reader) r.early_reader = t;
            } else {
                conflict = r.writer != t && x.producer != r.writer;
            }
            if (conflict && !r.needs_rules) r.needs_rules = any = true;
        }
        s->acc_off[k + 1] = (int) s->acc_root.size();
    }
};

// Each node once, in list order (index: tensor -> position in nodes), with its explicit
// predecessors as CSR (positions in the same list). While the list is a topological order
// (the exec order then), the access scan and the visitor run in the same pass, over
// tensors just read.
bool collect_nodes(const ggml_cgraph * g, std::vector<ggml_tensor *> & nodes, ggml_ptr_index & index, std::vector<int> & off,
                   std::vector<int> & preds, std::vector<char> & is_src, access_scan & scan, ggml_sched_visitor * v) {
    for (int i = 0; i < g->n_nodes; ++i) {
        if (index.put(g->nodes[i], (int) nodes.size()) == (int) nodes.size()) nodes.push_back(g->nodes[i]);
    }
    const int n = (int) nodes.size();
    if (v) v->begin(n);
    int found = -1; // f is called right after is_node(p) holds for the same p: one lookup
    auto is_node = [&](const ggml_tensor * p) { return (found = index.get(p)) >= 0; };
    auto position = [&](const ggml_tensor * p) { return index.get(p); };
    off.assign(n + 1, 0);
    preds.clear();
    preds.reserve((size_t) n * 2);
    is_src.assign(n, 0);
    bool sorted = true;
    for (int i = 0; i < n; ++i) {
        ggml_for_each_pred(nodes[i], g->id, is_node, [&](const ggml_tensor *, ggml_dep_kind, bool direct) {
            preds.push_back(found);
            sorted = sorted && found < i;
            if (direct) is_src[found] = 1;
        });
        off[i + 1] = (int) preds.size();
        if (sorted) {
            scan.node(i, nodes[i], position);
            if (v) v->node(i, nodes[i], index);
        }
    }
    return sorted;
}

// Positions in a topological order, earliest-listed ready node first; false on a cycle.
bool topological_order(const std::vector<ggml_tensor *> & nodes, const std::vector<int> & off, const std::vector<int> & preds,
                       bool sorted, std::vector<int> & order) {
    const int n = (int) nodes.size();
    order.clear();
    if (sorted) {
        for (int i = 0; i < n; ++i) order.push_back(i);
        return true;
    }
    if (ggml_topological_order(n, off, preds, order)) return true;
    std::vector<char> placed(n, 0);
    for (int v : order) placed[v] = 1;
    for (int i = 0; i < n; ++i) {
        if (placed[i]) continue;
        for (int k = off[i]; k < off[i + 1]; ++k) {
            const int p = preds[k];
            if (placed[p]) continue;
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

// Edges for the conflicting accesses of exec, in that order, by the same rules as at op
// creation, for the roots the scan marked. Accesses of the nodes touching them are asked
// for again (rare: they were not kept).
void add_conflict_edges(const ggml_graph_sched * s, access_scan & scan, std::vector<std::pair<int, int>> & edges) {
    if (!scan.any) return;
    ggml_hazard_rules rules;
    const int n = (int) s->exec.size();
    for (int k = 0; k < n; ++k) {
        bool touches = false;
        for (int a = s->acc_off[k]; a < s->acc_off[k + 1]; ++a) touches = touches || scan.state(s->acc_root[a]).needs_rules;
        if (!touches) continue;
        ggml_access acc[GGML_MAX_ACCESSES];
        ggml_op_accesses(s->exec[k], acc);
        for (int a = s->acc_off[k]; a < s->acc_off[k + 1]; ++a) {
            if (!scan.state(s->acc_root[a]).needs_rules) continue;
            rules.record(s->exec[k], acc[a - s->acc_off[k]],
                         [&](ggml_tensor * pred, ggml_dep_kind) { edges.emplace_back(s->position.get(pred), k); });
        }
    }
}

// Returns whether the list was in topological order (the visitor saw every node).
bool build(ggml_cgraph * g, ggml_graph_sched * s, ggml_sched_visitor * v) {
    std::vector<ggml_tensor *> nodes;
    ggml_ptr_index index((size_t) g->n_nodes);
    std::vector<int> off, preds, order;
    std::vector<char> is_src;
    access_scan scan(s, g->n_nodes, g->n_leafs);
    const bool sorted = collect_nodes(g, nodes, index, off, preds, is_src, scan, v);
    s->exec.clear();
    s->ok = topological_order(nodes, off, preds, sorted, order);
    if (!s->ok) return false;

    const int n = (int) nodes.size();
    std::vector<int> pos(n);
    if (sorted) s->position = std::move(index); // node -> list position is node -> exec position
    else s->position = ggml_ptr_index((size_t) n);
    s->exec.resize(n);
    for (int k = 0; k < n; ++k) {
        pos[order[k]] = k;
        s->exec[k] = nodes[order[k]];
        if (!sorted) s->position.put(nodes[order[k]], k);
    }
    s->is_src.resize(n);
    for (int k = 0; k < n; ++k) s->is_src[k] = is_src[order[k]];
    if (!sorted) { // the scan stopped where the list left topological order: again, in exec order
        scan = access_scan(s, n, g->n_leafs);
        for (int k = 0; k < n; ++k) scan.node(k, s->exec[k], [&](const ggml_tensor * p) { return s->position.get(p); });
    }
    std::vector<std::pair<int, int>> conflicts;
    add_conflict_edges(s, scan, conflicts);
    to_csr(order, pos, off, preds, conflicts, s);
    return sorted;
}

} // namespace

bool ggml_graph_sched_current(const ggml_cgraph * g) {
    const ggml_graph_sched * s = g->sched;
    return s && s->version == g->version && s->edge_epoch == g_edge_epoch.load(std::memory_order_relaxed) && s->n_nodes == g->n_nodes;
}

const ggml_graph_sched * ggml_graph_get_sched_visiting(ggml_cgraph * g, ggml_sched_visitor * v, bool * visited) {
    if (visited) *visited = false;
    if (ggml_graph_sched_current(g)) return g->sched;
    const uint64_t epoch = g_edge_epoch.load(std::memory_order_relaxed);
    ggml_graph_sched * s = g->sched;
    if (!s) s = g->sched = new ggml_graph_sched();
    const bool all_seen = build(g, s, v);
    if (visited) *visited = v && all_seen && s->ok;
    s->version = g->version;
    s->edge_epoch = epoch;
    s->facts_threads = 0; // other nodes: the executor's facts are stale
    s->n_nodes = g->n_nodes;
    return s;
}

const ggml_graph_sched * ggml_graph_get_sched(ggml_cgraph * g) { return ggml_graph_get_sched_visiting(g, nullptr, nullptr); }

void ggml_graph_sched_free(ggml_cgraph * g) {
    delete g->sched;
    g->sched = nullptr;
    delete g->open_nodes;
    g->open_nodes = nullptr;
}
