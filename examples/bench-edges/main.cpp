// Cost of recording dependency edges: op-creation time per op for 1e3, 1e4 and 1e5 ops over
// one shared buffer (a KV-cache-like ring of rows: each op copies a row into slot i % R,
// every fourth op also reads a window of W slots), in one context. Two programs: all ops
// for one graph, and a new graph every 64 ops (ggml's one-context-many-graphs habit, where
// the log forgets the ops of graphs it no longer feeds). Flat ns/op = cost O(live accesses).
//   kvg-bench-edges [-r ROWS]
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int D = 64, WINDOW = 32, GRAPH_EVERY = 64;

struct result {
    double ns_per_op;
    long edges;
    int max_nodes;
};

result run(int n_ops, int rows, bool graph_per_step) {
    const size_t n_tensors = (size_t) n_ops * 4 + 16;
    const size_t n_graphs = graph_per_step ? (size_t) n_ops / GRAPH_EVERY + 2 : 2;
    ggml_init_params p = {n_tensors * ggml_tensor_overhead() + n_graphs * ggml_graph_overhead_custom(4 * GRAPH_EVERY, false),
                          nullptr, true};
    ggml_context * ctx = ggml_init(p);
    static std::vector<float> storage;
    storage.assign((size_t) D * rows + D, 0.0f);
    ggml_tensor * cache = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, rows);
    ggml_tensor * row = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, D);
    cache->data = storage.data();
    row->data = storage.data() + (size_t) D * rows;
    std::vector<ggml_tensor *> step;
    result r = {0, 0, 0};
    const int64_t t0 = ggml_time_us();
    for (int i = 0; i < n_ops; ++i) {
        const int slot = i % rows;
        step.push_back(ggml_cpy(ctx, row, ggml_view_1d(ctx, cache, D, (size_t) slot * cache->nb[1])));
        if (i % 4 == 3) {
            const int first = slot + 1 >= WINDOW ? slot + 1 - WINDOW : 0;
            step.push_back(ggml_scale(ctx, ggml_view_2d(ctx, cache, D, slot + 1 - first, cache->nb[1], (size_t) first * cache->nb[1]), 1.0f));
        }
        if (graph_per_step && (i + 1) % GRAPH_EVERY == 0) {
            ggml_cgraph * g = ggml_new_graph_custom(ctx, 4 * GRAPH_EVERY, false);
            for (ggml_tensor * t : step) ggml_build_forward_expand(g, t);
            if (ggml_graph_n_nodes(g) > r.max_nodes) r.max_nodes = ggml_graph_n_nodes(g);
            step.clear();
        }
    }
    r.ns_per_op = 1000.0 * (double) (ggml_time_us() - t0) / n_ops;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) r.edges += ggml_n_control_deps(t);
    ggml_free(ctx);
    return r;
}

} // namespace

int main(int argc, char ** argv) {
    int rows = 1024;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "-r") && i + 1 < argc) rows = std::atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-r ROWS]\n", argv[0]);
            return 1;
        }
    }
    if (rows < WINDOW) rows = WINDOW;
    printf("ring of %d rows x %d floats; every 4th op also reads a window of %d rows\n", rows, D, WINDOW);
    printf("| %8s | %-22s | %10s | %12s | %14s |\n", "ops", "program", "ns/op", "edges/op", "nodes/graph");
    printf("| %8s | %-22s | %10s | %12s | %14s |\n", "---:", "---", "---:", "---:", "---:");
    for (int n : {1000, 10000, 100000}) {
        for (bool per_step : {false, true}) {
            const result r = run(n, rows, per_step);
            char nodes[32] = "-";
            if (per_step) snprintf(nodes, sizeof(nodes), "%d", r.max_nodes);
            printf("| %8d | %-22s | %10.0f | %12.2f | %14s |\n", n, per_step ? "graph every 64 ops" : "one graph (not built)",
                   r.ns_per_op, (double) r.edges / n, nodes);
        }
    }
    return 0;
}
