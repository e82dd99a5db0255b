// Graph checks: ggml_graph_validate (conflicting accesses that no path of edges orders,
// and edges that the node order contradicts) and ggml_graph_dump_dot.
//
// Model. Only computing nodes (not views, not leafs) touch bytes. A node reads the extent
// of each source and writes its own extent when its result is borrowed memory (cpy,
// set_rows, *_inplace) -- hazards.cpp's rules. A node with its own memory also writes that
// (hazards.cpp treats a computed root as written by its op before any logged access), so
// a read of a computed tensor that bypasses data edges is caught too.
//
// Ordering. Views are transparent: an edge into a view continues to the view's sources,
// whether or not the view was added to the graph, because a hand-built graph may list only
// the computing nodes. Edges to tensors outside the graph are dropped (they will not run).
// Reachability uses per-node ancestor bitsets over a topological order, computed in
// column blocks so that memory stays bounded (about 64 MiB) for large graphs.
#include "ggml-impl.h"

#include <algorithm>
#include <cstring>
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

bool computes(const ggml_tensor * t) { return t->op != GGML_OP_NONE && !ggml_op_is_view(t->op); }

struct checker {
    const ggml_cgraph * g;
    std::vector<const ggml_tensor *> nodes;           // computing nodes, graph order
    std::vector<int> graph_pos;                       // their index in g->nodes
    std::unordered_map<const ggml_tensor *, int> idx; // computing node -> index
    std::unordered_set<const ggml_tensor *> in_graph; // every node of g
    std::vector<std::vector<pred_edge>> preds;
    std::unordered_map<const ggml_tensor *, std::vector<pred_edge>> view_preds; // memo for views

    explicit checker(const ggml_cgraph * graph) : g(graph) {
        for (int i = 0; i < g->n_nodes; ++i) {
            const ggml_tensor * t = g->nodes[i];
            in_graph.insert(t);
            if (!computes(t) || idx.count(t)) continue; // a repeated node keeps its first position
            idx[t] = (int) nodes.size();
            nodes.push_back(t);
            graph_pos.push_back(i);
        }
        preds.resize(nodes.size());
        for (size_t i = 0; i < nodes.size(); ++i) {
            std::vector<pred_edge> & p = preds[i];
            collect(nodes[i], p);
            // one edge per predecessor; a control edge's kind says more than "data"
            std::stable_sort(p.begin(), p.end(), [](const pred_edge & a, const pred_edge & b) { return a.node < b.node; });
            p.erase(std::unique(p.begin(), p.end(), [](const pred_edge & a, const pred_edge & b) { return a.node == b.node; }),
                    p.end());
        }
    }

    // Predecessors of t among computing nodes, looking through views.
    void collect(const ggml_tensor * t, std::vector<pred_edge> & out) {
        for (int i = 0; i < t->n_deps; ++i) add_pred(t->deps[i].tensor, t->deps[i].kind, out);
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (t->src[i]) add_pred(t->src[i], GGML_DEP_RAW, out);
        }
    }
    void add_pred(const ggml_tensor * p, ggml_dep_kind kind, std::vector<pred_edge> & out) {
        if (p == nullptr) return;
        auto it = idx.find(p);
        if (it != idx.end()) {
            out.push_back({it->second, kind});
            return;
        }
        if (!ggml_op_is_view(p->op)) return; // a leaf, or an op that is not in this graph
        auto memo = view_preds.find(p);
        if (memo == view_preds.end()) {
            std::vector<pred_edge> vp;
            view_preds[p]; // placeholder: guards against cycles through views
            collect(p, vp);
            memo = view_preds.find(p);
            memo->second = std::move(vp);
        }
        for (const pred_edge & e : memo->second) {
            // a control edge on a view applies to whatever reads the view
            out.push_back({e.node, kind == GGML_DEP_RAW ? e.kind : kind});
        }
    }

    std::vector<node_access> accesses_of(int n) const {
        std::vector<node_access> acc;
        const ggml_tensor * t = nodes[n];
        const ggml_tensor * root;
        size_t b, e;
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (!t->src[i]) continue;
            ggml_tensor_extent(t->src[i], &root, &b, &e);
            if (b < e) acc.push_back({n, root, b, e, false});
        }
        ggml_tensor_extent(t, &root, &b, &e);
        if (b < e) acc.push_back({n, root, b, e, true}); // borrowed or its own bytes
        return acc;
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

} // namespace

int ggml_graph_validate(const ggml_cgraph * cgraph, ggml_hazard * out, int max_out, FILE * log) {
    if (cgraph == nullptr) {
        fprintf(stderr, "ggml_graph_validate: graph is NULL\n");
        return -1;
    }
    if (out == nullptr || max_out < 0) max_out = 0;
    checker c(cgraph);
    const int n = (int) c.nodes.size();
    int count = 0;
    auto emit = [&](const ggml_hazard & h, bool misordered, bool w1, bool w2) {
        if (count < max_out) out[count] = h;
        ++count;
        print_hazard(log, c, h, misordered, w1, w2);
    };

    std::vector<std::vector<node_access>> acc(n);
    for (int i = 0; i < n; ++i) acc[i] = c.accesses_of(i);

    // (b) edges that point forward in the node list: a sequential run reads stale bytes
    for (int i = 0; i < n; ++i) {
        for (const pred_edge & e : c.preds[i]) {
            if (c.graph_pos[e.node] <= c.graph_pos[i]) continue;
            ggml_hazard h = {c.nodes[i], c.nodes[e.node], nullptr, 0, 0, 0, 0, e.kind};
            bool w1 = false, w2 = false;
            bool found = false;
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
            emit(h, true, w1, w2);
        }
    }

    // topological order (Kahn); nodes on a cycle (only possible with manual edges) go last
    std::vector<int> rank(n, -1), order;
    order.reserve(n);
    {
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
        for (int k = 0; k < n; ++k) rank[order[k]] = k;
    }

    // (a) conflicting pairs per root: sort by begin, sweep while extents overlap
    struct pair_q {
        int x, y;     // x has the lower topological rank: is x an ancestor of y?
        node_access a, b;
    };
    std::vector<pair_q> pairs;
    {
        std::unordered_map<const ggml_tensor *, std::vector<node_access>> by_root;
        for (int i = 0; i < n; ++i) {
            for (const node_access & a : acc[i]) by_root[a.root].push_back(a);
        }
        // one report per node pair and root; a write-write conflict says the most
        std::unordered_map<uint64_t, size_t> seen;
        for (auto & kv : by_root) {
            std::vector<node_access> & v = kv.second;
            bool any_write = false;
            for (const node_access & a : v) any_write |= a.write;
            if (!any_write) continue;
            std::sort(v.begin(), v.end(), [](const node_access & a, const node_access & b) { return a.begin < b.begin; });
            seen.clear();
            for (size_t i = 0; i < v.size(); ++i) {
                for (size_t j = i + 1; j < v.size() && v[j].begin < v[i].end; ++j) {
                    const node_access & a = v[i];
                    const node_access & b = v[j];
                    if (a.node == b.node || !(a.write || b.write)) continue;
                    const bool a_first = rank[a.node] < rank[b.node];
                    const pair_q q = a_first ? pair_q{a.node, b.node, a, b} : pair_q{b.node, a.node, b, a};
                    const uint64_t key = ((uint64_t) (uint32_t) q.x << 32) | (uint32_t) q.y;
                    auto it = seen.find(key);
                    if (it == seen.end()) {
                        seen[key] = pairs.size();
                        pairs.push_back(q);
                    } else if (q.a.write && q.b.write) {
                        pairs[it->second] = q;
                    }
                }
            }
        }
    }

    // answer "is x an ancestor of y" in blocks of topological ranks
    std::vector<bool> ordered(pairs.size(), false);
    if (!pairs.empty()) {
        const size_t max_bytes = (size_t) 64 << 20;
        size_t block = std::max<size_t>(64, std::min<size_t>((size_t) n, max_bytes * 8 / std::max(1, n)));
        block = (block + 63) / 64 * 64;
        const size_t words = block / 64;
        std::vector<std::vector<size_t>> by_block((n + block - 1) / block);
        for (size_t q = 0; q < pairs.size(); ++q) by_block[rank[pairs[q].x] / block].push_back(q);
        std::vector<uint64_t> bits;
        for (size_t blk = 0; blk < by_block.size(); ++blk) {
            if (by_block[blk].empty()) continue;
            const size_t lo = blk * block;
            // rows for ranks >= lo only: nothing ranked earlier has an ancestor in this block
            bits.assign((n - lo) * words, 0);
            for (size_t r = lo; r < (size_t) n; ++r) {
                uint64_t * row = &bits[(r - lo) * words];
                for (const pred_edge & e : c.preds[order[r]]) {
                    const size_t pr = rank[e.node];
                    if (pr < lo || pr >= r) continue; // outside the block, or a cycle edge
                    const uint64_t * prow = &bits[(pr - lo) * words];
                    for (size_t w = 0; w < words; ++w) row[w] |= prow[w];
                    if (pr < lo + block) row[(pr - lo) / 64] |= (uint64_t) 1 << ((pr - lo) % 64);
                }
            }
            for (size_t q : by_block[blk]) {
                const size_t xr = rank[pairs[q].x] - lo;
                const size_t yr = rank[pairs[q].y];
                ordered[q] = (bits[(yr - lo) * words + xr / 64] >> (xr % 64)) & 1;
            }
        }
    }

    // report unordered pairs in graph order
    std::vector<size_t> unordered;
    for (size_t q = 0; q < pairs.size(); ++q) if (!ordered[q]) unordered.push_back(q);
    auto gpos = [&](size_t q) {
        const pair_q & p = pairs[q];
        const int a = c.graph_pos[p.x], b = c.graph_pos[p.y];
        return std::make_pair(std::min(a, b), std::max(a, b));
    };
    std::sort(unordered.begin(), unordered.end(), [&](size_t a, size_t b) { return gpos(a) < gpos(b); });
    for (size_t q : unordered) {
        pair_q p = pairs[q];
        if (c.graph_pos[p.x] > c.graph_pos[p.y]) {
            std::swap(p.x, p.y);
            std::swap(p.a, p.b);
        }
        const ggml_dep_kind kind = p.a.write ? (p.b.write ? GGML_DEP_WAW : GGML_DEP_RAW) : GGML_DEP_WAR;
        const ggml_hazard h = {c.nodes[p.x], c.nodes[p.y], p.a.root, p.a.begin, p.a.end, p.b.begin, p.b.end, kind};
        emit(h, false, p.a.write, p.b.write);
    }
    return count;
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
        fprintf(stderr, "ggml_graph_dump_dot: %s is NULL\n", filename ? "graph" : "filename");
        return;
    }
    FILE * fp = fopen(filename, "w");
    if (!fp) {
        fprintf(stderr, "ggml_graph_dump_dot: cannot open '%s' for writing\n", filename);
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
    if (fclose(fp) != 0 || !ok) fprintf(stderr, "ggml_graph_dump_dot: error writing '%s'\n", filename);
}
