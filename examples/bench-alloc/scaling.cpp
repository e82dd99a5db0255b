// How planning scales: time and peak memory of one ggml_gallocr_reserve on a fresh graph,
// for a chain and for a many-layer decoder of about 1e3, 1e4 and 4e4 nodes, each in a child
// process so that its peak RSS is its own. Built against kvgraph (kvg-bench-alloc-scaling)
// and, by scripts/bench-alloc-vs-ggml.sh, against ggml itself (-DBENCH_WITH_GGML), so both
// planners plan the same graphs in one run. Leafs (weights, caches, inputs) get real memory
// before planning; weights are shared by all layers to keep that small.
#include "ggml-alloc.h"
#include "ggml.h"
#ifdef BENCH_WITH_GGML
#include "ggml-backend.h"
#include "ggml-cpu.h"
#define PLANNER_NAME "ggml"
static ggml_gallocr_t new_allocator() { return ggml_gallocr_new(ggml_backend_cpu_buffer_type()); }
static void alloc_leafs(ggml_context * ctx) { ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type()); }
#else
#define PLANNER_NAME "kvgraph"
static ggml_gallocr_t new_allocator() { return ggml_gallocr_new(NULL); }
static void alloc_leafs(ggml_context * ctx) { ggml_cpu_alloc_ctx_tensors(ctx); }
#endif

#include <cstdio>
#include <cstring>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr int EMBD = 256, HEADS = 4, HEADS_KV = 2, FF = 512, CTX = 32, NODES_PER_LAYER = 27;

ggml_cgraph * chain(ggml_context * leafs, ggml_context * ctx, int n_nodes) {
    ggml_tensor * cur = ggml_new_tensor_1d(leafs, GGML_TYPE_F32, 4096);
    alloc_leafs(leafs);
    for (int i = 0; i < n_nodes; ++i) cur = i % 2 ? ggml_sqr(ctx, cur) : ggml_cont(ctx, cur);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, (size_t) n_nodes + 16, false);
    ggml_build_forward_expand(g, cur);
    return g;
}

// One token through n_layer llama-style layers: norm, q/k/v, rope, cache writes, flash
// attention, output projection, SwiGLU, residuals.
ggml_cgraph * decoder(ggml_context * leafs, ggml_context * ctx, int n_layer, size_t graph_size) {
    const int hd = EMBD / HEADS;
    ggml_tensor * wq = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, EMBD);
    ggml_tensor * wk = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, hd * HEADS_KV);
    ggml_tensor * wv = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, hd * HEADS_KV);
    ggml_tensor * wo = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, EMBD);
    ggml_tensor * w1 = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, FF);
    ggml_tensor * w3 = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, FF);
    ggml_tensor * w2 = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, FF, EMBD);
    ggml_tensor * norm = ggml_new_tensor_1d(leafs, GGML_TYPE_F32, EMBD);
    ggml_tensor * x = ggml_new_tensor_2d(leafs, GGML_TYPE_F32, EMBD, 1);
    ggml_tensor * pos = ggml_new_tensor_1d(leafs, GGML_TYPE_I32, 1);
    ggml_tensor * idx = ggml_new_tensor_1d(leafs, GGML_TYPE_I64, 1);
    ggml_tensor * mask = ggml_new_tensor_2d(leafs, GGML_TYPE_F16, CTX, 1);
    std::vector<ggml_tensor *> kc(n_layer), vc(n_layer);
    for (int l = 0; l < n_layer; ++l) {
        kc[l] = ggml_new_tensor_2d(leafs, GGML_TYPE_F16, hd * HEADS_KV, CTX);
        vc[l] = ggml_new_tensor_2d(leafs, GGML_TYPE_F16, hd * HEADS_KV, CTX);
    }
    alloc_leafs(leafs);
    for (int l = 0; l < n_layer; ++l) {
        ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), norm);
        ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, wq, h), hd, HEADS, 1);
        ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, wk, h), hd, HEADS_KV, 1);
        ggml_tensor * v = ggml_mul_mat(ctx, wv, h);
        q = ggml_rope_ext(ctx, q, pos, nullptr, hd, 0, CTX, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        k = ggml_rope_ext(ctx, k, pos, nullptr, hd, 0, CTX, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        ggml_tensor * kw = ggml_set_rows(ctx, kc[l], ggml_reshape_2d(ctx, k, hd * HEADS_KV, 1), idx);
        ggml_tensor * vw = ggml_set_rows(ctx, vc[l], v, idx);
        // ggml's order: the writes go in before the read (kvgraph would pull them by RAW)
        ggml_tensor * kv = ggml_view_3d(ctx, kw, hd, CTX, HEADS_KV, kc[l]->nb[1], hd * 2, 0);
        ggml_tensor * vv = ggml_view_3d(ctx, vw, hd, CTX, HEADS_KV, vc[l]->nb[1], hd * 2, 0);
        ggml_tensor * a = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), kv, vv, mask, 0.125f, 0.0f, 0.0f);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, wo, ggml_reshape_2d(ctx, a, EMBD, 1)));
        h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), norm);
        ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, w1, h));
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, w2, ggml_mul(ctx, gate, ggml_mul_mat(ctx, w3, h))));
    }
    ggml_set_output(x);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, graph_size, false);
    ggml_build_forward_expand(g, x);
    return g;
}

long peak_rss_kb() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// false when the child (one row) failed: a failed reserve, a crash, or no fork
bool row(bool is_chain, int target_nodes) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return false;
    }
    if (pid != 0) {
        int status = 0;
        return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    const size_t n_tensors = (size_t) target_nodes * 2 + 64;
    ggml_init_params lp = {ggml_tensor_overhead() * (2 * (size_t) target_nodes / NODES_PER_LAYER + 64), nullptr, true};
    ggml_init_params gp = {ggml_tensor_overhead() * n_tensors + ggml_graph_overhead_custom(n_tensors, false), nullptr, true};
    ggml_context * leafs = ggml_init(lp);
    ggml_context * ctx = ggml_init(gp);
    ggml_cgraph * g = is_chain ? chain(leafs, ctx, target_nodes) : decoder(leafs, ctx, target_nodes / NODES_PER_LAYER, n_tensors);
    const long rss_before = peak_rss_kb();
    ggml_gallocr_t ga = new_allocator();
    const int64_t t0 = ggml_time_us();
    const bool ok = ggml_gallocr_reserve(ga, g);
    const double ms = (double) (ggml_time_us() - t0) / 1000.0;
    printf("| %-8s | %-7s | %7d | %10.2f | %12.1f | %10.2f |%s\n", PLANNER_NAME, is_chain ? "chain" : "decoder",
           ggml_graph_n_nodes(g), ms, (double) (peak_rss_kb() - rss_before) / 1024.0,
           (double) ggml_gallocr_get_buffer_size(ga, 0) / 1048576.0, ok ? "" : " (reserve failed)");
    fflush(stdout);
    _exit(ok ? 0 : 1);
}

} // namespace

int main(int argc, char ** argv) {
    const bool header = !(argc > 1 && std::strcmp(argv[1], "--no-header") == 0);
    ggml_time_init();
    if (header) {
        printf("one ggml_gallocr_reserve of a fresh graph; planner MiB = peak RSS growth while planning\n");
        printf("| %-8s | %-7s | %7s | %10s | %12s | %10s |\n", "planner", "graph", "nodes", "plan ms", "planner MiB", "buffer MiB");
        printf("| %-8s | %-7s | %7s | %10s | %12s | %10s |\n", "---", "---", "---:", "---:", "---:", "---:");
    }
    bool ok = true;
    for (bool is_chain : {true, false}) {
        for (int n : {1000, 10000, 40000}) ok &= row(is_chain, n);
    }
    return ok ? 0 : 1;
}
