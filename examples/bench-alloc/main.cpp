// Memory-planner benchmark: peak compute-buffer bytes vs the sum of all intermediate
// tensor sizes for a llama-style graph at several batch sizes, and planning time.
// Only metadata is built: weights and the KV cache are leafs that already have memory
// (as when mmapped), so nothing is computed.
#include "ggml-alloc.h"
#include "ggml.h"

#include <cstdio>
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

ggml_cgraph * build(ggml_context * ctx, const shape & s, int n_tokens) {
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
    ggml_cgraph * g = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(g, logits);
    return g;
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
            ggml_gallocr_t ga = ggml_gallocr_new(NULL);
            if (!ga || !ggml_gallocr_reserve(ga, g)) {
                fprintf(stderr, "error: planning %d tokens failed\n", n_tokens);
                return 1;
            }
            st = ggml_gallocr_get_stats(ga);
            plan_us += st.plan_time_us;
            ggml_gallocr_free(ga);
        }
        // replay: the same graph allocated again without re-planning
        ggml_gallocr_t ga = ggml_gallocr_new(NULL);
        if (!ga || !ggml_gallocr_alloc_graph(ga, g)) {
            fprintf(stderr, "error: allocating the graph of %d tokens failed\n", n_tokens);
            return 1;
        }
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
    return 0;
}
