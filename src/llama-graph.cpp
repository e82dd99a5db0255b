// The Llama forward pass as a ggml graph, following llama2.c's run.c step by step.
#include "llama-graph.h"

#include "ggml-alloc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvg {

// ---- memory of intermediates ---------------------------------------------------------------------

// Gives every tensor of the graph without data an address in one compute buffer owned
// by the planner, which reuses the bytes of tensors that are dead (it follows the
// control edges too, so a cache read is never moved past its write).
static bool alloc_graph_memory(ggml_cgraph * gf, ggml_gallocr_t * galloc) {
    *galloc = ggml_gallocr_new();
    return *galloc && ggml_gallocr_alloc_graph(*galloc, gf);
}

static ggml_context * new_graph_ctx(int n_layer, size_t * graph_size) {
    *graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, 64 * (size_t) n_layer + 64);
    const size_t n_tensors = 80 * (size_t) n_layer + 64;
    ggml_init_params p = {n_tensors * ggml_tensor_overhead() + ggml_graph_overhead_custom(*graph_size, false), nullptr,
                          true};
    return ggml_init(p);
}

LlamaGraph::~LlamaGraph() {
    if (galloc) ggml_gallocr_free(galloc);
    if (ctx) ggml_free(ctx);
}
KvWriteGraph::~KvWriteGraph() {
    if (galloc) ggml_gallocr_free(galloc);
    if (ctx) ggml_free(ctx);
}

// ---- the graph ------------------------------------------------------------------------------------

static ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, float eps) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), weight);
}

std::unique_ptr<LlamaGraph> build_llama_graph(const Model & model, const KvCache & kv, const GraphShape & shape,
                                              std::string * err) {
    const HParams & hp = model.hp;
    const int n_tokens = shape.n_tokens, n_kv = shape.n_kv;
    const int hd = hp.head_dim(), n_head = hp.n_head, n_head_kv = hp.n_head_kv;
    const float kq_scale = 1.0f / std::sqrt((float) hd);

    auto g = std::make_unique<LlamaGraph>();
    g->shape = shape;
    size_t graph_size = 0;
    g->ctx = new_graph_ctx(hp.n_layer, &graph_size);
    if (!g->ctx) {
        if (err) *err = "cannot allocate the graph context";
        return nullptr;
    }
    ggml_context * ctx = g->ctx;

    g->inp_tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    g->inp_pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    g->inp_kv_idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_tokens);
    g->inp_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_name(g->inp_tokens, "inp_tokens");
    ggml_set_name(g->inp_pos, "inp_pos");
    ggml_set_name(g->inp_kv_idx, "inp_kv_idx");
    ggml_set_name(g->inp_mask, "inp_mask");
    for (ggml_tensor * t : {g->inp_tokens, g->inp_pos, g->inp_kv_idx, g->inp_mask}) ggml_set_input(t);

    // x = token embeddings, one column per token: [n_embd, n_tokens]
    ggml_tensor * x = ggml_get_rows(ctx, model.tok_embd, g->inp_tokens);

    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights & w = model.layers[il];

        // attention rmsnorm, then q, k, v
        ggml_tensor * xb = rms_norm(ctx, x, w.attn_norm, hp.rms_eps);
        ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w.wq, xb), hd, n_head, n_tokens);
        ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w.wk, xb), hd, n_head_kv, n_tokens);
        ggml_tensor * v = ggml_mul_mat(ctx, w.wv, xb); // [n_embd_kv, n_tokens]

        // RoPE on adjacent pairs (mode 0) at each token's position
        q = ggml_rope_ext(ctx, q, g->inp_pos, nullptr, hp.n_rot, 0, hp.n_ctx_train, hp.rope_base, 1.0f, 0.0f, 1.0f,
                          32.0f, 1.0f);
        k = ggml_rope_ext(ctx, k, g->inp_pos, nullptr, hp.n_rot, 0, hp.n_ctx_train, hp.rope_base, 1.0f, 0.0f, 1.0f,
                          32.0f, 1.0f);
        ggml_format_name(q, "q_l%d", il);
        ggml_format_name(k, "k_l%d", il);

        // Store k and v in the cache rows chosen by inp_kv_idx. No ggml_build_forward_expand
        // ordering hack: reading the cache views below records a RAW edge to these writes
        // when the read op is created, so the graph orders the set_rows before the attention.
        g->k_write.push_back(kv.write_k(ctx, il, ggml_reshape_2d(ctx, k, hp.n_embd_kv(), n_tokens), g->inp_kv_idx));
        g->v_write.push_back(kv.write_v(ctx, il, v, g->inp_kv_idx));

        // multihead attention over cache rows [0, n_kv); the mask hides future and unused rows
        ggml_tensor * K = kv.view_k(ctx, il, n_kv); // [hd, n_kv, n_head_kv]
        ggml_tensor * V = kv.view_v(ctx, il, n_kv);
        ggml_tensor * Q = ggml_permute(ctx, q, 0, 2, 1, 3); // [hd, n_tokens, n_head]
        ggml_tensor * att;
        if (shape.flash_attn) {
            att = ggml_flash_attn_ext(ctx, Q, K, V, g->inp_mask, kq_scale, 0.0f, 0.0f); // [hd, n_head, n_tokens]
            g->k_read.push_back(att);
            g->v_read.push_back(att);
            att = ggml_reshape_2d(ctx, att, hp.n_embd, n_tokens);
        } else {
            ggml_tensor * kq = ggml_mul_mat(ctx, K, Q); // [n_kv, n_tokens, n_head]
            g->k_read.push_back(kq);
            kq = ggml_soft_max_ext(ctx, kq, g->inp_mask, kq_scale, 0.0f);
            ggml_tensor * Vt = ggml_cont(ctx, ggml_transpose(ctx, V)); // [n_kv, hd, n_head_kv]
            g->v_read.push_back(Vt);
            att = ggml_mul_mat(ctx, Vt, kq); // [hd, n_tokens, n_head]
            att = ggml_cont_2d(ctx, ggml_permute(ctx, att, 0, 2, 1, 3), hp.n_embd, n_tokens);
        }
        ggml_format_name(att, "att_l%d", il);

        // output projection, residual
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, w.wo, att));

        // ffn rmsnorm, SwiGLU: w2(silu(w1(x)) * w3(x)), residual
        xb = rms_norm(ctx, x, w.ffn_norm, hp.rms_eps);
        ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, w.ffn_gate, xb));
        ggml_tensor * up = ggml_mul_mat(ctx, w.ffn_up, xb);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, w.ffn_down, ggml_mul(ctx, gate, up)));
        ggml_format_name(x, "x_l%d", il);
    }

    if (!shape.logits_all && n_tokens > 1) {
        x = ggml_view_2d(ctx, x, hp.n_embd, 1, x->nb[1], (size_t) (n_tokens - 1) * x->nb[1]); // last token only
    }
    x = rms_norm(ctx, x, model.output_norm, hp.rms_eps);
    g->logits = ggml_mul_mat(ctx, model.output, x);
    ggml_set_name(g->logits, "logits");
    ggml_set_output(g->logits);

    g->gf = ggml_new_graph_custom(ctx, graph_size, false);
    ggml_build_forward_expand(g->gf, g->logits);

    if (!alloc_graph_memory(g->gf, &g->galloc)) {
        if (err) *err = "cannot allocate the graph's intermediate tensors";
        return nullptr;
    }
    return g;
}

void LlamaGraph::set_inputs(const int32_t * tokens, int pos, const KvCache & kv) {
    const int n = shape.n_tokens, n_kv = shape.n_kv;
    int32_t * tok = (int32_t *) inp_tokens->data;
    int32_t * p = (int32_t *) inp_pos->data;
    int64_t * idx = (int64_t *) inp_kv_idx->data;
    float * mask = (float *) inp_mask->data;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) {
        tok[i] = tokens[i];
        p[i] = pos + i;
        idx[i] = kv.slot(pos + i);
        // causal: token i sees cache rows holding positions 0..pos+i (row == position)
        float * row = mask + (size_t) i * n_kv;
        for (int j = 0; j < n_kv; ++j) row[j] = j <= pos + i ? 0.0f : neg_inf;
    }
}

std::unique_ptr<KvWriteGraph> build_kv_write_graph(const KvCache & kv, std::string * err) {
    auto g = std::make_unique<KvWriteGraph>();
    const int n_layer = (int) kv.k.size();
    size_t graph_size = 0;
    g->ctx = new_graph_ctx(n_layer, &graph_size);
    if (!g->ctx) {
        if (err) *err = "cannot allocate the graph context";
        return nullptr;
    }
    g->inp_rows = ggml_new_tensor_2d(g->ctx, GGML_TYPE_F32, kv.k[0]->ne[0], 1);
    g->inp_idx = ggml_new_tensor_1d(g->ctx, GGML_TYPE_I64, 1);
    ggml_set_input(g->inp_rows);
    ggml_set_input(g->inp_idx);
    g->gf = ggml_new_graph_custom(g->ctx, graph_size, false);
    for (int il = 0; il < n_layer; ++il) {
        ggml_build_forward_expand(g->gf, kv.write_k(g->ctx, il, g->inp_rows, g->inp_idx));
        ggml_build_forward_expand(g->gf, kv.write_v(g->ctx, il, g->inp_rows, g->inp_idx));
    }
    if (!alloc_graph_memory(g->gf, &g->galloc)) {
        if (err) *err = "cannot allocate the graph's intermediate tensors";
        return nullptr;
    }
    return g;
}

} // namespace kvg
