// Graph checks: ggml_graph_validate (conflicting accesses that no path of edges orders,
// and edges that the node order contradicts) and ggml_graph_dump_dot.
//
// Model. What each node touches and which nodes it waits for come from hazards.cpp
// (ggml_op_accesses, ggml_for_each_pred): only computing nodes touch bytes; views the
// graph does not list are looked through, and so are ops that run in no graph when a
// control edge leads to them (the order ran through them); other edges to tensors outside
// the graph are dropped (they will not run). The check covers the graph's own edges only, not the extra
// node-order edges the schedule adds (schedule.cpp): it reports what those had to fix.
//
// Search. Nodes are visited in a topological order of the edges, each with the bitset of
// its ancestors (kept only while a successor still needs it). Per root, a log of accesses
// is compared with each new access; an entry that a later access dominates (lies inside
// it, is its ancestor, and conflicts with everything the entry conflicts with) moves
// under it, so chains of ordered accesses stay cheap while every unordered pair is still
// found: an access ordered after an entry is ordered after the whole subtree below it.
#include "ggml-impl.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

struct node_access {
    int node;           // index among computing nodes
    const ggml_tensor * root;
    size_t begin, end;
    bool write;
};

struct pred_edge {
    int node;           // computing-node index of the predecessor
    ggml_dep_kind kind; // data edges count as RAW
};

struct checker {
    const ggml_cgraph * g;
    std::vector<const ggml_tensor *> nodes;           // computing nodes, graph order
    std::vector<int> graph_pos;                       // their index in g->nodes
    std::unordered_map<const ggml_tensor *, int> idx; // computing node -> index
    std::vector<std::vector<pred_edge>> preds;

    explicit checker(const ggml_cgraph * graph) : g(graph) {
        for (int i = 0; i < g->n_nodes; ++i) {
            const ggml_tensor * t = g->nodes[i];
            if (!ggml_op_computes(t) || idx.count(t)) continue; // a repeated node keeps its first position
            idx[t] = (int) nodes.size();
            nodes.push_back(t);
            graph_pos.push_back(i);
        }
        // views listed in the graph are looked through like unlisted ones
        auto is_node = [&](const ggml_tensor * p) { return idx.count(p) != 0; };
        preds.resize(nodes.size());
        for (size_t i = 0; i < nodes.size(); ++i) {
            std::vector<pred_edge> & p = preds[i];
            ggml_for_each_pred(nodes[i], g->id, is_node, [&](const ggml_tensor * q, ggml_dep_kind kind, bool) { p.push_back({idx.at(q), kind}); });
            // one edge per predecessor; a control edge's kind says more than "data"
            std::stable_sort(p.begin(), p.end(), [](const pred_edge & a, const pred_edge & b) {
                return a.node != b.node ? a.node < b.node : a.kind > b.kind;
            });
            p.erase(std::unique(p.begin(), p.end(), [](const pred_edge & a, const pred_edge & b) { return a.node == b.node; }),
                    p.end());
        }
    }

    std::vector<node_access> accesses_of(int n) const {
        ggml_access acc[GGML_MAX_ACCESSES];
        const int na = ggml_op_accesses(nodes[n], acc);
        std::vector<node_access> out;
        for (int i = 0; i < na; ++i) out.push_back({n, acc[i].root, acc[i].begin, acc[i].end, acc[i].write});
        return out;
    }
};

const char * root_name(const ggml_tensor * root) { return root ? root->name : "(none)"; }

void print_hazard(FILE * log, const checker & c, const ggml_hazard & h, bool misordered, bool first_writes, bool second_writes) {
    if (!log) return;
    const int p1 = c.graph_pos[c.idx.at(h.first)];
    const int p2 = c.graph_pos[c.idx.at(h.second)];
    fprintf(log, "ggml_graph_validate: %s hazard on buffer '%s': node %d '%s' (%s) %s [%zu, %zu) and node %d '%s' (%s) %s [%zu, %zu): %s\n",
            ggml_dep_kind_name(h.kind), root_name(h.root), p1, h.first->name, ggml_op_desc(h.first),
            first_writes ? "writes" : "reads", h.first_begin, h.first_end, p2, h.second->name, ggml_op_desc(h.second),
            second_writes ? "writes" : "reads", h.second_begin, h.second_end,
            misordered ? "the first depends on the second, which comes later in the node list"
                       : "no path of edges orders them");
}

bool overlap(const node_access & a, const node_access & b) {
    return a.root == b.root && a.begin < b.end && b.begin < a.end && (a.write || b.write);
}

// An access in a root's log. Entries a later access dominates (they lie inside it, are
// its ancestors, and everything conflicting with them conflicts with it) move under it
// as children: an access ordered after the dominating entry is ordered after all of its
// subtree, so only unordered entries are ever descended into.
struct log_entry {
    node_access a;
    int first_child = -1, next_sibling = -1;
};

struct unordered_hit {
    int earlier; // node processed first (lower topological rank)
    node_access a, b;
};

// Where found hazards go: the caller's array (as far as it reaches), the count, the log.
struct hazard_sink {
    const checker & c;
    ggml_hazard * out;
    int max_out;
    FILE * log;
    int count = 0;

    void emit(const ggml_hazard & h, bool misordered, bool w1, bool w2) {
        if (count < max_out) out[count] = h;
        ++count;
        print_hazard(log, c, h, misordered, w1, w2);
    }
};

// (b) edges that point forward in the node list: a sequential run reads stale bytes.
void report_misordered_edges(const checker & c, const std::vector<std::vector<node_access>> & acc, hazard_sink & sink) {
    for (int i = 0; i < (int) c.nodes.size(); ++i) {
        for (const pred_edge & e : c.preds[i]) {
            if (c.graph_pos[e.node] <= c.graph_pos[i]) continue;
            ggml_hazard h = {c.nodes[i], c.nodes[e.node], nullptr, 0, 0, 0, 0, e.kind};
            bool w1 = false, w2 = false, found = false;
            for (const node_access & a : acc[i]) {
                for (const node_access & b : acc[e.node]) {
                    if (found || !overlap(a, b)) continue;
                    h.root = a.root;
                    h.first_begin = a.begin; h.first_end = a.end;
                    h.second_begin = b.begin; h.second_end = b.end;
                    w1 = a.write; w2 = b.write;
                    found = true;
                }
            }
            sink.emit(h, true, w1, w2);
        }
    }
}

// Topological order (Kahn) and each node's rank in it; nodes on a cycle (only possible
// with manual edges) go last.
std::vector<int> topological_order(const checker & c, std::vector<int> & rank) {
    const int n = (int) c.nodes.size();
    std::vector<int> order;
    order.reserve(n);
    std::vector<int> indeg(n, 0);
    std::vector<std::vector<int>> succ(n);
    for (int i = 0; i < n; ++i) {
        for (const pred_edge & e : c.preds[i]) {
            succ[e.node].push_back(i);
            ++indeg[i];
        }
    }
    for (int i = 0; i < n; ++i) if (indeg[i] == 0) order.push_back(i);
    for (size_t k = 0; k < order.size(); ++k) {
        for (int s : succ[order[k]]) if (--indeg[s] == 0) order.push_back(s);
    }
    std::vector<bool> placed(n, false);
    for (int v : order) placed[v] = true;
    for (int i = 0; i < n; ++i) if (!placed[i]) order.push_back(i);
    rank.assign(n, -1);
    for (int k = 0; k < n; ++k) rank[order[k]] = k;
    return order;
}

// The conflict search in topological order. Ancestor bitsets (indexed by rank) are kept
// only while a successor still needs them: memory is the widest frontier times n bits,
// not n * n bits.
struct unordered_search {
    const checker & c;
    const std::vector<std::vector<node_access>> & acc;
    std::vector<int> order, rank;
    size_t words;
    std::vector<int> succ_left; // successors (later in rank) still to visit
    std::vector<std::vector<uint64_t>> bits, spare;
    std::vector<log_entry> pool;
    std::unordered_map<const ggml_tensor *, std::vector<int>> logs; // root -> live entries
    std::vector<unordered_hit> hits;

    unordered_search(const checker & chk, const std::vector<std::vector<node_access>> & a) : c(chk), acc(a) {
        const int n = (int) c.nodes.size();
        order = topological_order(c, rank);
        words = ((size_t) n + 63) / 64;
        succ_left.assign(n, 0);
        for (int i = 0; i < n; ++i) {
            for (const pred_edge & e : c.preds[i]) if (rank[e.node] < rank[i]) ++succ_left[e.node];
        }
        bits.resize(n);
    }

    // False (logged) when the ancestor sets alive at once would take more than 2 GiB.
    bool fits() const {
        std::vector<int> left = succ_left;
        size_t live = 0, peak = 0;
        for (int x : order) {
            ++live;
            peak = std::max(peak, live);
            for (const pred_edge & e : c.preds[x]) if (rank[e.node] < rank[x] && --left[e.node] == 0) --live;
            if (succ_left[x] == 0) --live;
        }
        const double bytes = (double) peak * (double) words * 8.0;
        if (bytes > (double) ((size_t) 2 << 30)) {
            GGML_LOG_ERROR("ggml_graph_validate: graph too wide to check (%d nodes, %zu live at once: %.1f GiB of ancestor sets)\n",
                    (int) c.nodes.size(), peak, bytes / (1 << 30));
            return false;
        }
        return true;
    }

    void build_ancestors(int x) {
        std::vector<uint64_t> & bx = bits[x];
        if (!spare.empty()) { bx.swap(spare.back()); spare.pop_back(); }
        bx.assign(words, 0);
        for (const pred_edge & e : c.preds[x]) {
            const int pr = rank[e.node];
            if (pr >= rank[x]) continue; // a cycle edge
            const std::vector<uint64_t> & bp = bits[e.node];
            for (size_t w = 0; w < words; ++w) bx[w] |= bp[w];
            bx[pr / 64] |= (uint64_t) 1 << (pr % 64);
        }
    }

    bool is_ancestor(int x, int a) const { return (bits[x][rank[a] / 64] >> (rank[a] % 64)) & 1; }

    // Conflicts of x's accesses with what came before; one hit per earlier node and root.
    void find_conflicts(int x) {
        const size_t hits_begin = hits.size();
        auto record = [&](const node_access & a, const node_access & b) {
            for (size_t k = hits_begin; k < hits.size(); ++k) {
                unordered_hit & h = hits[k];
                if (h.earlier == a.node && h.a.root == a.root) {
                    if (a.write && b.write) { h.a = a; h.b = b; }
                    return;
                }
            }
            hits.push_back({a.node, a, b});
        };
        std::vector<int> stack;
        for (const node_access & X : acc[x]) {
            auto it = logs.find(X.root);
            if (it == logs.end()) continue;
            stack.assign(it->second.begin(), it->second.end());
            while (!stack.empty()) {
                const log_entry & E = pool[stack.back()];
                stack.pop_back();
                if (!overlap(E.a, X) || is_ancestor(x, E.a.node)) continue;
                record(E.a, X);
                for (int ch = E.first_child; ch >= 0; ch = pool[ch].next_sibling) stack.push_back(ch);
            }
        }
    }

    // Logs x's accesses (a read inside its own write adds nothing); entries they
    // dominate move under them.
    void log_accesses(int x) {
        const node_access * own_write = nullptr;
        for (const node_access & X : acc[x]) if (X.write) own_write = &X;
        for (const node_access & X : acc[x]) {
            if (!X.write && own_write && own_write->root == X.root && own_write->begin <= X.begin && X.end <= own_write->end) continue;
            std::vector<int> & lg = logs[X.root];
            const int id = (int) pool.size();
            pool.push_back({X});
            size_t keep = 0;
            for (size_t k = 0; k < lg.size(); ++k) {
                const int e = lg[k];
                const node_access & E = pool[e].a;
                if (X.begin <= E.begin && E.end <= X.end && (X.write || !E.write) && is_ancestor(x, E.node)) {
                    pool[e].next_sibling = pool[id].first_child;
                    pool[id].first_child = e;
                } else {
                    lg[keep++] = e;
                }
            }
            lg.resize(keep);
            lg.push_back(id);
        }
    }

    // Releases the ancestor sets nobody needs any more.
    void release(int x) {
        for (const pred_edge & e : c.preds[x]) {
            if (rank[e.node] < rank[x] && --succ_left[e.node] == 0) spare.push_back(std::move(bits[e.node]));
        }
        if (succ_left[x] == 0) spare.push_back(std::move(bits[x]));
    }

    void run() {
        for (int x : order) {
            build_ancestors(x);
            find_conflicts(x);
            log_accesses(x);
            release(x);
        }
    }
};

// (a) the unordered pairs, in graph order.
void report_unordered(const checker & c, std::vector<unordered_hit> & hits, hazard_sink & sink) {
    auto gpos = [&](const unordered_hit & h) {
        const int a = c.graph_pos[h.a.node], b = c.graph_pos[h.b.node];
        return std::make_pair(std::min(a, b), std::max(a, b));
    };
    std::stable_sort(hits.begin(), hits.end(), [&](const unordered_hit & a, const unordered_hit & b) { return gpos(a) < gpos(b); });
    for (unordered_hit p : hits) {
        if (c.graph_pos[p.a.node] > c.graph_pos[p.b.node]) std::swap(p.a, p.b);
        const ggml_dep_kind kind = p.a.write ? (p.b.write ? GGML_DEP_WAW : GGML_DEP_RAW) : GGML_DEP_WAR;
        const ggml_hazard h = {c.nodes[p.a.node], c.nodes[p.b.node], p.a.root, p.a.begin, p.a.end, p.b.begin, p.b.end, kind};
        sink.emit(h, false, p.a.write, p.b.write);
    }
}

} // namespace

int ggml_graph_validate(const ggml_cgraph * cgraph, ggml_hazard * out, int max_out, FILE * log) {
    if (cgraph == nullptr) {
        GGML_LOG_ERROR("ggml_graph_validate: graph is NULL\n");
        return -1;
    }
    if (out == nullptr || max_out < 0) max_out = 0;
    const checker c(cgraph);
    const int n = (int) c.nodes.size();
    hazard_sink sink{c, out, max_out, log};

    std::vector<std::vector<node_access>> acc(n);
    for (int i = 0; i < n; ++i) acc[i] = c.accesses_of(i);

    report_misordered_edges(c, acc, sink);
    unordered_search search(c, acc);
    if (!search.fits()) return -1;
    search.run();
    report_unordered(c, search.hits, sink);
    return sink.count;
}

// ---- Graphviz ------------------------------------------------------------------------------
namespace {

std::string dot_escape(const char * s) {
    std::string r;
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') r += '\\';
        if (*s == '\n') { r += "\\n"; continue; }
        r += *s;
    }
    return r;
}

const char * dep_colour(ggml_dep_kind kind) {
    switch (kind) {
        case GGML_DEP_RAW: return "red";
        case GGML_DEP_WAR: return "blue";
        case GGML_DEP_WAW: return "darkorange";
        case GGML_DEP_MANUAL: return "gray40";
    }
    return "black";
}

std::string shape_str(const ggml_tensor * t) {
    char buf[96];
    const int nd = ggml_n_dims(t);
    int len = snprintf(buf, sizeof(buf), "[%lld", (long long) t->ne[0]);
    for (int i = 1; i < nd && len > 0 && (size_t) len < sizeof(buf); ++i) {
        len += snprintf(buf + len, sizeof(buf) - len, ", %lld", (long long) t->ne[i]);
    }
    std::string s(buf);
    return s + "] " + ggml_type_name(t->type);
}

} // namespace

void ggml_graph_dump_dot(const ggml_cgraph * gb, const ggml_cgraph * gf, const char * filename) {
    const ggml_cgraph * main_g = gf ? gf : gb;
    if (main_g == nullptr || filename == nullptr) {
        GGML_LOG_ERROR("ggml_graph_dump_dot: %s is NULL\n", filename ? "graph" : "filename");
        return;
    }
    FILE * fp = fopen(filename, "w");
    if (!fp) {
        GGML_LOG_ERROR("ggml_graph_dump_dot: cannot open '%s' for writing\n", filename);
        return;
    }
    // nodes of both graphs; those only in gb are shaded differently
    std::vector<const ggml_tensor *> nodes, leafs;
    std::unordered_map<const ggml_tensor *, int> id;
    std::unordered_set<const ggml_tensor *> only_gb;
    auto add = [&](const ggml_cgraph * g, bool extra) {
        if (!g) return;
        for (int i = 0; i < g->n_nodes; ++i) {
            if (id.emplace(g->nodes[i], (int) id.size()).second) {
                nodes.push_back(g->nodes[i]);
                if (extra) only_gb.insert(g->nodes[i]);
            }
        }
        for (int i = 0; i < g->n_leafs; ++i) {
            if (id.emplace(g->leafs[i], (int) id.size()).second) leafs.push_back(g->leafs[i]);
        }
    };
    add(main_g, false);
    if (gb && gb != main_g) add(gb, true);

    fprintf(fp, "digraph G {\n  newrank = true;\n  rankdir = TB;\n  node [fontname = \"monospace\", fontsize = 10];\n");
    for (const ggml_tensor * t : nodes) {
        const char * fill = only_gb.count(t) ? "lightyellow" : (ggml_op_is_view(t->op) ? "gray95" : "white");
        fprintf(fp, "  t%d [shape = box, style = \"rounded,filled\", fillcolor = %s, label = \"%s\\n%s\\n%s\"];\n", id[t], fill,
                dot_escape(t->name).c_str(), ggml_op_desc(t), shape_str(t).c_str());
    }
    for (const ggml_tensor * t : leafs) {
        fprintf(fp, "  t%d [shape = ellipse, style = filled, fillcolor = lightblue, label = \"%s\\n%s\"];\n", id[t],
                dot_escape(t->name).c_str(), shape_str(t).c_str());
    }
    // tensors referenced by an edge but in neither graph
    std::vector<const ggml_tensor *> outside;
    auto ref = [&](const ggml_tensor * t) {
        if (id.emplace(t, (int) id.size()).second) {
            outside.push_back(t);
            fprintf(fp, "  t%d [shape = box, style = dotted, label = \"%s\\n%s (not in graph)\"];\n", id[t],
                    dot_escape(t->name).c_str(), ggml_op_desc(t));
        }
        return id[t];
    };
    for (const ggml_tensor * t : nodes) {
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (!t->src[i]) continue;
            const int from = ref(t->src[i]);
            fprintf(fp, "  t%d -> t%d [label = \"src%d\", fontsize = 8];\n", from, id[t], i);
        }
        for (int i = 0; i < t->n_deps; ++i) {
            const int from = ref(t->deps[i].tensor);
            fprintf(fp, "  t%d -> t%d [style = dashed, color = %s, fontcolor = %s, label = \"%s\"];\n", from, id[t],
                    dep_colour(t->deps[i].kind), dep_colour(t->deps[i].kind), ggml_dep_kind_name(t->deps[i].kind));
        }
    }
    fprintf(fp, "}\n");
    const bool ok = !ferror(fp);
    if (fclose(fp) != 0 || !ok) GGML_LOG_ERROR("ggml_graph_dump_dot: error writing '%s'\n", filename);
}
