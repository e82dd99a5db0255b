// Memory-planner benchmark: peak compute-buffer bytes vs the sum of all intermediate
// tensor sizes for a llama-style graph at several batch sizes, and planning time; then how
// planning scales: time and peak memory to plan a chain and a many-layer decoder graph of
// about 1e3, 1e4 and 4e4 nodes (each in a child process, so its peak RSS is its own).
// Only metadata is built: weights and the KV cache are leafs that already have memory
// (as when mmapped), so nothing is computed.
#include "ggml-alloc.h"
#include "ggml.h"

#include <cstdio>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

struct shape {
    int n_embd = 2048, n_head = 32, n_head_kv = 4, n_ff = 5632, n_layer = 4, n_ctx = 2048, n_vocab = 32000;
};

char g_fake_weights[64]; // stands in for mapped weights: the planner only checks data != NULL

ggml_tensor * weight(ggml_context * ctx, int ne0, int ne1) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, ne0, ne1);
    t->data = g_fake_weights;
    return t;
}

ggml_cgraph * build(ggml_context * ctx, const shape & s, int n_tokens, size_t graph_size = 4096) {
    const int hd = s.n_embd / s.n_head;
    ggml_tensor * tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_tokens);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, s.n_ctx, n_tokens);
    for (ggml_tensor * t : {tokens, pos, idx, mask}) ggml_set_input(t);
    ggml_tensor * x = ggml_get_rows(ctx, weight(ctx, s.n_embd, s.n_vocab), tokens);
    for (int l = 0; l < s.n_layer; ++l) {
        ggml_tensor * kc = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, hd * s.n_head_kv, s.n_ctx);
        ggml_tensor * vc = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, hd * s.n_head_kv, s.n_ctx);
        kc->data = vc->data = g_fake_weights;
        ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), weight(ctx, s.n_embd, 1));
        ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, weight(ctx, s.n_embd, s.n_embd), h), hd, s.n_head, n_tokens);
        ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, weight(ctx, s.n_embd, hd * s.n_head_kv), h), hd, s.n_head_kv, n_tokens);
        ggml_tensor * v = ggml_mul_mat(ctx, weight(ctx, s.n_embd, hd * s.n_head_kv), h);
        q = ggml_rope_ext(ctx, q, pos, nullptr, hd, 0, s.n_ctx, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        k = ggml_rope_ext(ctx, k, pos, nullptr, hd, 0, s.n_ctx, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        ggml_set_rows(ctx, kc, ggml_reshape_2d(ctx, k, hd * s.n_head_kv, n_tokens), idx);
        ggml_set_rows(ctx, vc, v, idx);
        ggml_tensor * kv = ggml_view_3d(ctx, kc, hd, s.n_ctx, s.n_head_kv, kc->nb[1], hd * 2, 0);
        ggml_tensor * vv = ggml_view_3d(ctx, vc, hd, s.n_ctx, s.n_head_kv, vc->nb[1], hd * 2, 0);
        ggml_tensor * a = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), kv, vv, mask, 0.125f, 0.0f, 0.0f);
        a = ggml_mul_mat(ctx, weight(ctx, s.n_embd, s.n_embd), ggml_reshape_2d(ctx, a, s.n_embd, n_tokens));
        x = ggml_add(ctx, x, a);
        h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), weight(ctx, s.n_embd, 1));
        ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, weight(ctx, s.n_embd, s.n_ff), h));
        ggml_tensor * up = ggml_mul_mat(ctx, weight(ctx, s.n_embd, s.n_ff), h);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, weight(ctx, s.n_ff, s.n_embd), ggml_mul(ctx, gate, up)));
    }
    x = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), weight(ctx, s.n_embd, 1));
    ggml_tensor * logits = ggml_mul_mat(ctx, weight(ctx, s.n_embd, s.n_vocab), x);
    ggml_set_output(logits);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, graph_size, false);
    ggml_build_forward_expand(g, logits);
    return g;
}

ggml_cgraph * build_chain(ggml_context * ctx, int n_nodes) {
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096);
    x->data = g_fake_weights; // an input with memory: only the chain is planned
    ggml_tensor * cur = x;
    for (int i = 0; i < n_nodes; ++i) cur = i % 2 ? ggml_sqr(ctx, cur) : ggml_cont(ctx, cur);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, (size_t) n_nodes + 16, false);
    ggml_build_forward_expand(g, cur);
    return g;
}

long peak_rss_kb() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// Builds the graph, then plans it once, in a child process; prints one table row.
void scaling_row(const char * kind, int target_nodes) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid != 0) {
        int status = 0;
        waitpid(pid, &status, 0);
        return;
    }
    shape s;
    s.n_layer = target_nodes / 28 + 1; // ~28 nodes per layer
    const size_t n_tensors = (size_t) target_nodes * 3 + 64;
    ggml_init_params params = {ggml_tensor_overhead() * n_tensors + ggml_graph_overhead_custom(n_tensors, false), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_cgraph * g = kind[0] == 'c' ? build_chain(ctx, target_nodes) : build(ctx, s, 1, n_tensors);
    const long rss_before = peak_rss_kb();
    ggml_gallocr_t ga = ggml_gallocr_new();
    const int64_t t0 = ggml_time_us();
    ggml_gallocr_reserve(ga, g);
    const double ms = (ggml_time_us() - t0) / 1000.0;
    printf("| %-8s | %7d | %10.1f | %12.1f | %12.2f |\n", kind, ggml_graph_n_nodes(g), ms, (peak_rss_kb() - rss_before) / 1024.0,
           ggml_gallocr_get_buffer_size(ga, 0) / 1048576.0);
    fflush(stdout);
    _exit(0);
}

} // namespace

int main() {
    shape s;
    printf("llama-style graph: n_embd %d, n_head %d/%d, n_ff %d, %d layers, n_ctx %d, vocab %d\n",
           s.n_embd, s.n_head, s.n_head_kv, s.n_ff, s.n_layer, s.n_ctx, s.n_vocab);
    printf("%8s %7s %14s %14s %7s %9s %10s %11s\n", "n_tokens", "nodes", "sum_tensors", "peak_buffer", "ratio", "in-place", "plan_us", "replay_us");
    for (int n_tokens : {1, 32, 128, 512}) {
        ggml_init_params params = {ggml_tensor_overhead() * 4096 + ggml_graph_overhead_custom(4096, false), nullptr, true};
        ggml_context * ctx = ggml_init(params);
        ggml_cgraph * g = build(ctx, s, n_tokens);
        // planning time: average over fresh allocators (each plans once)
        const int reps = 20;
        int64_t plan_us = 0;
        ggml_gallocr_stats st = {};
        for (int r = 0; r < reps; ++r) {
            ggml_gallocr_t ga = ggml_gallocr_new();
            ggml_gallocr_reserve(ga, g);
            st = ggml_gallocr_get_stats(ga);
            plan_us += st.plan_time_us;
            ggml_gallocr_free(ga);
        }
        // replay: the same graph allocated again without re-planning
        ggml_gallocr_t ga = ggml_gallocr_new();
        ggml_gallocr_alloc_graph(ga, g);
        const int64_t t0 = ggml_time_us();
        for (int r = 0; r < reps; ++r) ggml_gallocr_alloc_graph(ga, g);
        const double replay_us = (double) (ggml_time_us() - t0) / reps;
        const int n_plans = ggml_gallocr_get_stats(ga).n_plans;
        ggml_gallocr_free(ga);
        printf("%8d %7d %14zu %14zu %6.1f%% %9d %10.1f %11.2f%s\n", n_tokens, ggml_graph_n_nodes(g), st.sum_tensor_bytes,
               st.buffer_bytes, 100.0 * (double) st.buffer_bytes / (double) st.sum_tensor_bytes, st.n_inplace,
               (double) plan_us / reps, replay_us, n_plans == 1 ? "" : " (re-planned!)");
        ggml_free(ctx);
    }
    printf("\nplanning cost (schedule + plan, one reserve of a fresh graph; memory: peak RSS growth while planning)\n");
    printf("| %-8s | %7s | %10s | %12s | %12s |\n", "graph", "nodes", "plan ms", "planner MiB", "buffer MiB");
    printf("| %-8s | %7s | %10s | %12s | %12s |\n", "---", "---:", "---:", "---:", "---:");
    for (const char * kind : {"chain", "decoder"}) {
        for (int n : {1000, 10000, 40000}) scaling_row(kind, n);
    }
    return 0;
}
