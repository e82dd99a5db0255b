// The Llama forward pass as a ggml graph, following llama2.c's run.c step by step, and the
// other families of arch.h through the same layer: their differences are pieces (q/k/v
// projection, feed-forward) that follow the weights the loader bound.
#include "llama-graph.h"
#include "status.h"

#include "ggml-alloc.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvg {

// Slots a bucketed attention reads are rounded up to this, so that a generation of n
// tokens builds about n / KV_BUCKET graphs, not n (padding-free attention needs one).
static const int KV_BUCKET = 256;

// ---- memory of intermediates ---------------------------------------------------------------------

// Gives every tensor of the graph without data an address in one compute buffer owned
// by the planner, which reuses the bytes of tensors that are dead (it follows the
// control edges too, so a cache read is never moved past its write).
static bool alloc_graph_memory(ggml_cgraph * gf, ggml_gallocr_t * galloc) {
    *galloc = ggml_gallocr_new(NULL);
    return *galloc && ggml_gallocr_alloc_graph(*galloc, gf);
}

static ggml_context * new_graph_ctx(int n_layer, size_t * graph_size) {
    *graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, 64 * (size_t) n_layer + 64);
    const size_t n_tensors = 96 * (size_t) n_layer + 64;
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

// ---- shapes ---------------------------------------------------------------------------------------

GraphShape ubatch_shape(const Ubatch & ub, const KvCache & kv, bool flash_attn, bool kv_len) {
    GraphShape s;
    s.n_tokens = ub.n();
    s.n_seq = kv.n_seq();
    thread_local std::vector<int> count; // per-sequence token counts (kept: decode allocates nothing once warm)
    count.assign(kv.n_seq(), 0);
    bool in_order = true; // token i is row i of [n_q per sequence]: checked below
    for (int i = 0; i < ub.n(); ++i) {
        in_order = in_order && (i == 0 || ub.seq[i] >= ub.seq[i - 1]);
        ++count[ub.seq[i]];
    }
    s.n_q = *std::max_element(count.begin(), count.end());
    for (int c : count) in_order = in_order && c == s.n_q;
    s.gather = !in_order;
    s.n_outputs = (int) std::count(ub.output.begin(), ub.output.end(), (uint8_t) 1);
    s.flash_attn = flash_attn;
    s.kv_len = flash_attn && kv_len;
    if (s.kv_len) {
        s.n_kv = kv.n_ctx(); // one graph for every fill level: the valid lengths are inputs
    } else {
        int longest = 1;
        for (int i = 0; i < ub.n(); ++i) longest = std::max(longest, kv.kv_len(ub.seq[i]));
        s.n_kv = std::min(kv.n_ctx(), GGML_PAD(longest, KV_BUCKET));
    }
    return s;
}

// ---- the graph ------------------------------------------------------------------------------------

static ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, float eps) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), weight);
}

static ggml_tensor * input(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           const char * name, int chunk) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    ggml_format_name(t, "%s_%d", name, chunk);
    ggml_set_input(t);
    return t;
}

// Names a tensor "<what>_l<layer>_c<chunk>" (llama.cpp's cb(cur, name, il) habit): tests and
// tools find it with ggml_graph_get_tensor instead of fields kept for them.
static ggml_tensor * named(ggml_tensor * t, const char * what, int il, int c) {
    ggml_format_name(t, "%s_l%d_c%d", what, il, c);
    return t;
}

// What one layer's builders share: the chunk's inputs and where in the graph they are.
struct LayerIn {
    ggml_context * ctx;
    const Model & model;
    const KvCache & kv;
    const GraphShape & shape;
    const LlamaGraph::Chunk & in;
    int il, c;
};

// RoPE with the architecture's pair layout (llama: adjacent values, llama2.c's; NEOX: n_rot / 2
// apart) rotated by the token's true position, with the file's scaling and frequency factors;
// none on the layers the architecture leaves without (SmolLM3).
static ggml_tensor * rope(const LayerIn & L, ggml_tensor * x) {
    const HParams & hp = L.model.hp;
    if (!hp.layer_uses_rope(L.il)) return x;
    const float beta_fast = 32.0f, beta_slow = 1.0f; // YaRN's ramp: llama.cpp's defaults
    ggml_tensor * factors = L.model.rope_factor_table(L.kv.n_ctx());
    return ggml_rope_ext(L.ctx, x, L.in.tok.pos, factors, hp.n_rot, hp.rope_mode, hp.rope_ctx_orig(),
                         hp.layer_rope_base(L.il), hp.layer_rope_freq_scale(L.il), hp.rope_ext_factor(),
                         hp.rope_magnitude(), beta_fast, beta_slow);
}

// Gemma's soft-capping: cap * tanh(x / cap), x unchanged when cap is 0.
static ggml_tensor * softcap(ggml_context * ctx, ggml_tensor * x, float cap) {
    if (cap == 0.0f) return x;
    return ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, x, 1.0f / cap)), cap);
}

// The mask of layer il: sliding-window layers see only the last n_swa positions.
static ggml_tensor * layer_mask(const LayerIn & L) {
    return L.model.hp.layer_is_swa(L.il) ? L.in.att.mask_swa : L.in.att.mask;
}

// Flash attention of Q [hd, n_q, n_head, n_seq] over the cache -> [n_embd_q, n_q * n_seq].
// Quantized rows are passed whole (heads packed): a head may be shorter than a block.
static ggml_tensor * attention_flash(const LayerIn & L, ggml_tensor * Q, float kq_scale) {
    const KvCache & kv = L.kv;
    const bool quant = ggml_is_quantized(kv.type());
    const float cap = L.model.hp.attn_softcap;
    ggml_tensor * V = kv.view_v(L.ctx, L.il, L.shape.n_kv, quant);
    ggml_tensor * att;
    if (kv.grouped()) {
        const KvKeyGroups & groups = kv.groups();
        att = ggml_flash_attn_ext_grouped(L.ctx, Q, groups.view_groups(L.ctx, L.il, L.shape.n_kv),
                                          groups.view_recent(L.ctx, L.il), L.in.grp.k_recent_group, V, layer_mask(L),
                                          kq_scale, 0.0f, cap);
    } else {
        att = ggml_flash_attn_ext(L.ctx, Q, kv.view_k(L.ctx, L.il, L.shape.n_kv, quant), V, layer_mask(L), kq_scale,
                                  0.0f, cap);
    } // [hd, n_head, n_q, n_seq]
    if (L.shape.kv_len) ggml_flash_attn_ext_set_kv_len(L.ctx, att, L.in.att.kv_len);
    named(att, "kv_read", L.il, L.c); // reads K and V
    return ggml_reshape_2d(L.ctx, att, L.model.hp.n_embd_q(), L.shape.n_q * L.shape.n_seq);
}

// The cache's K rows in f32 [n_embd_kv, n_kv, 1, n_seq] for the matmul path. Grouped K:
// groups -> f32 [32, n_embd_kv, G, n_seq] -> positions as rows, then the recent groups'
// f32 rows over their quantized copies (a WAW edge orders it).
static ggml_tensor * dequantized_k(const LayerIn & L) {
    ggml_context * ctx = L.ctx;
    const KvCache & kv = L.kv;
    const int n_kv = L.shape.n_kv, n_seq = L.shape.n_seq, n_embd_kv = L.model.hp.n_embd_kv();
    if (!kv.grouped()) {
        ggml_tensor * K = kv.view_k(ctx, L.il, n_kv, true);
        return named(ggml_cpy(ctx, K, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K->ne[0], n_kv, 1, n_seq)), "k_read", L.il, L.c);
    }
    ggml_tensor * Kg = kv.groups().view_groups(ctx, L.il, n_kv);
    const int64_t G = Kg->ne[2];
    ggml_tensor * Kf = ggml_cpy(ctx, Kg, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, GGML_KV_GROUP, n_embd_kv, G, n_seq));
    named(Kf, "k_read", L.il, L.c);
    Kf = ggml_cont_2d(ctx, ggml_permute(ctx, Kf, 1, 0, 2, 3), n_embd_kv, GGML_KV_GROUP * G * n_seq);
    Kf = ggml_set_rows(ctx, Kf, ggml_reshape_2d(ctx, kv.groups().recent(L.il), n_embd_kv, GGML_KV_GROUP * n_seq),
                       L.in.grp.k_recent_rows);
    return ggml_view_4d(ctx, Kf, n_embd_kv, n_kv, 1, n_seq, Kf->nb[1], n_kv * Kf->nb[1], GGML_KV_GROUP * G * Kf->nb[1], 0);
}

// mul_mat + soft_max_ext + mul_mat over the cache -> [n_embd_q, n_q * n_seq]. The matmuls need
// per-head rows: quantized slots are dequantized first.
static ggml_tensor * attention_matmul(const LayerIn & L, ggml_tensor * Q, float kq_scale) {
    ggml_context * ctx = L.ctx;
    const HParams & hp = L.model.hp;
    const int hd = hp.head_dim(), n_kv = L.shape.n_kv, n_seq = L.shape.n_seq;
    const bool quant = ggml_is_quantized(L.kv.type());
    ggml_tensor * K, * V;
    if (quant) {
        ggml_tensor * Vq = L.kv.view_v(ctx, L.il, n_kv, true);
        ggml_tensor * Kf = dequantized_k(L);
        ggml_tensor * Vf = named(ggml_cpy(ctx, Vq, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, Vq->ne[0], n_kv, 1, n_seq)),
                                 "v_read", L.il, L.c);
        auto heads = [&](ggml_tensor * t) {
            return ggml_view_4d(ctx, t, hd, n_kv, hp.n_head_kv, n_seq, t->nb[1], hd * sizeof(float), t->nb[3], 0);
        };
        K = heads(Kf);
        V = heads(Vf);
    } else {
        K = L.kv.view_k(ctx, L.il, n_kv, false);
        V = L.kv.view_v(ctx, L.il, n_kv, false);
    }
    ggml_tensor * kq = ggml_mul_mat(ctx, K, Q); // [n_kv, n_q, n_head, n_seq]
    if (!quant) named(kq, "k_read", L.il, L.c);
    if (hp.attn_softcap != 0.0f) { // capped after the scale: softmax adds no other
        kq = softcap(ctx, ggml_scale(ctx, kq, kq_scale), hp.attn_softcap);
        kq_scale = 1.0f;
    }
    kq = ggml_soft_max_ext(ctx, kq, layer_mask(L), kq_scale, 0.0f);
    ggml_tensor * Vt = ggml_cont(ctx, ggml_transpose(ctx, V)); // [n_kv, hd, n_head_kv, n_seq]
    if (!quant) named(Vt, "v_read", L.il, L.c);
    ggml_tensor * att = ggml_mul_mat(ctx, Vt, kq); // [hd, n_q, n_head, n_seq]
    return ggml_cont_2d(ctx, ggml_permute(ctx, att, 0, 2, 1, 3), hp.n_embd_q(), L.shape.n_q * n_seq);
}

// Multihead attention of the chunk's queries q [head_dim, n_head, n_tokens] over the cache
// slots of layer il -> [n_embd_q, n_tokens].
static ggml_tensor * attention(const LayerIn & L, ggml_tensor * q) {
    const HParams & hp = L.model.hp;
    const GraphShape & shape = L.shape;
    const float kq_scale = hp.attn_scale();
    // queries as [hd, n_q, n_head, n_seq]: sequence s's rows on dim 3 slice s
    ggml_tensor * Q = q;
    if (shape.gather)
        Q = ggml_get_rows(L.ctx, ggml_reshape_2d(L.ctx, q, hp.n_embd_q(), shape.n_tokens), L.in.tok.q_idx);
    Q = ggml_permute(L.ctx, ggml_reshape_4d(L.ctx, Q, hp.head_dim(), hp.n_head, shape.n_q, shape.n_seq), 0, 2, 1, 3);
    ggml_tensor * att = shape.flash_attn ? attention_flash(L, Q, kq_scale) : attention_matmul(L, Q, kq_scale);
    if (shape.gather) att = ggml_get_rows(L.ctx, att, L.in.tok.out_idx); // back to token order
    return att;
}

// The inputs of chunk c (see LlamaGraph::Chunk for their shapes).
static LlamaGraph::Chunk chunk_inputs(ggml_context * ctx, const HParams & hp, const KvCache & kv, const GraphShape & shape,
                                      int c) {
    const int n_tokens = shape.n_tokens, n_q = shape.n_q, n_seq = shape.n_seq;
    LlamaGraph::Chunk in;
    in.tok.tokens = input(ctx, GGML_TYPE_I32, n_tokens, 1, 1, 1, "inp_tokens", c);
    in.tok.pos = input(ctx, GGML_TYPE_I32, n_tokens, 1, 1, 1, "inp_pos", c);
    in.tok.kv_idx = input(ctx, GGML_TYPE_I64, n_tokens, 1, 1, 1, "inp_kv_idx", c);
    in.att.mask = input(ctx, GGML_TYPE_F32, shape.n_kv, n_q, 1, n_seq, "inp_mask", c);
    in.att.n_swa = hp.n_swa;
    if (hp.n_swa > 0) in.att.mask_swa = input(ctx, GGML_TYPE_F32, shape.n_kv, n_q, 1, n_seq, "inp_mask_swa", c);
    if (shape.kv_len) in.att.kv_len = input(ctx, GGML_TYPE_I32, n_seq, 1, 1, 1, "inp_kv_len", c);
    if (kv.grouped()) {
        in.tok.k_recent_idx = input(ctx, GGML_TYPE_I64, n_tokens, 1, 1, 1, "inp_k_recent_idx", c);
        in.grp.k_group_rows = input(ctx, GGML_TYPE_I64, (int64_t) hp.n_embd_kv() * n_seq, 1, 1, 1, "inp_k_group_rows", c);
        if (shape.flash_attn) {
            in.grp.k_recent_group = input(ctx, GGML_TYPE_I32, n_seq, 1, 1, 1, "inp_k_recent_group", c);
        } else {
            in.grp.k_recent_rows = input(ctx, GGML_TYPE_I64, (int64_t) GGML_KV_GROUP * n_seq, 1, 1, 1, "inp_k_recent_rows", c);
        }
    }
    if (shape.gather) {
        in.tok.q_idx = input(ctx, GGML_TYPE_I32, (int64_t) n_q * n_seq, 1, 1, 1, "inp_q_idx", c);
        in.tok.out_idx = input(ctx, GGML_TYPE_I32, n_tokens, 1, 1, 1, "inp_out_idx", c);
    }
    if (shape.n_outputs > 0 && shape.n_outputs < n_tokens) {
        in.tok.out_rows = input(ctx, GGML_TYPE_I32, shape.n_outputs, 1, 1, 1, "inp_out_rows", c);
    }
    return in;
}

struct Qkv {
    ggml_tensor * q; // [head_dim, n_head, n_tokens], before rope
    ggml_tensor * k; // [head_dim, n_head_kv, n_tokens], before rope
    ggml_tensor * v; // [n_embd_kv, n_tokens]
};

// q, k, v of the normed input xb: three matrices or one fused [q; k; v] (split by views), each
// with its bias if the file has one, q and k RMS-normed per head if the file has their norms.
static Qkv project_qkv(const LayerIn & L, const LayerWeights & w, ggml_tensor * xb) {
    ggml_context * ctx = L.ctx;
    const HParams & hp = L.model.hp;
    const int64_t hd = hp.head_dim(), n_tokens = L.shape.n_tokens;
    ggml_tensor *q, *k, *v;
    if (w.wqkv) {
        ggml_tensor * qkv = ggml_mul_mat(ctx, w.wqkv, xb); // [n_embd_q + 2 n_embd_kv, n_tokens]
        const size_t es = ggml_element_size(qkv), row = qkv->nb[1];
        q = ggml_view_3d(ctx, qkv, hd, hp.n_head, n_tokens, hd * es, row, 0);
        k = ggml_view_3d(ctx, qkv, hd, hp.n_head_kv, n_tokens, hd * es, row, hp.n_embd_q() * es);
        // the cache write reads dense rows
        v = ggml_cont(ctx,
                      ggml_view_2d(ctx, qkv, hp.n_embd_kv(), n_tokens, row, (hp.n_embd_q() + hp.n_embd_kv()) * es));
    } else {
        q = ggml_mul_mat(ctx, w.wq, xb);
        k = ggml_mul_mat(ctx, w.wk, xb);
        v = ggml_mul_mat(ctx, w.wv, xb);
        if (w.bq) q = ggml_add(ctx, q, w.bq);
        if (w.bk) k = ggml_add(ctx, k, w.bk);
        if (w.bv) v = ggml_add(ctx, v, w.bv);
        q = ggml_reshape_3d(ctx, q, hd, hp.n_head, n_tokens);
        k = ggml_reshape_3d(ctx, k, hd, hp.n_head_kv, n_tokens);
    }
    if (w.q_norm) q = rms_norm(ctx, q, w.q_norm, hp.rms_eps); // over each head's hd values
    if (w.k_norm) k = rms_norm(ctx, k, w.k_norm, hp.rms_eps);
    return {q, k, v};
}

// SwiGLU: w2(silu(w1(x)) * w3(x)); a fused ffn_up holds w1's rows, then w3's. Gemma: gelu for silu.
static ggml_tensor * feed_forward(ggml_context * ctx, const LayerWeights & w, ggml_tensor * xb, bool gelu) {
    if (!w.ffn_gate) return ggml_mul_mat(ctx, w.ffn_down, ggml_swiglu(ctx, ggml_mul_mat(ctx, w.ffn_up, xb)));
    ggml_tensor * gate = ggml_mul_mat(ctx, w.ffn_gate, xb);
    gate = gelu ? ggml_gelu(ctx, gate) : ggml_silu(ctx, gate);
    ggml_tensor * up = ggml_mul_mat(ctx, w.ffn_up, xb);
    return ggml_mul_mat(ctx, w.ffn_down, ggml_mul(ctx, gate, up));
}

// One layer on x [n_embd, n_tokens]: attention rmsnorm, q/k/v, RoPE, cache writes,
// attention, output projection and residual, ffn rmsnorm, SwiGLU and residual. The last
// layer keeps only the rows whose logits are wanted once attention is done (the cache
// writes need every token; what follows only the outputs), and with no outputs stops after
// the cache writes. Returns the new x, or nullptr when nothing follows the writes.
static ggml_tensor * layer(const LayerIn & L, ggml_tensor * x, ggml_cgraph * gf) {
    ggml_context * ctx = L.ctx;
    const HParams & hp = L.model.hp;
    const LayerWeights & w = L.model.layers[L.il];
    const int n_tokens = L.shape.n_tokens;
    const bool last = L.il == hp.n_layer - 1;

    const Qkv qkv = project_qkv(L, w, rms_norm(ctx, x, w.attn_norm, hp.rms_eps));
    ggml_tensor * q = named(rope(L, qkv.q), "q", L.il, L.c);
    ggml_tensor * k = named(rope(L, qkv.k), "k", L.il, L.c);
    ggml_tensor * v = qkv.v;

    // Store k and v in the cache rows chosen by kv_idx. Reading the cache below records a RAW
    // edge to these writes; a later chunk's writes get WAR edges to the reads.
    ggml_tensor * k_write = L.kv.write_k(ctx, L.il, ggml_reshape_2d(ctx, k, hp.n_embd_kv(), n_tokens),
                                         L.kv.grouped() ? L.in.tok.k_recent_idx : L.in.tok.kv_idx, L.in.grp.k_group_rows);
    ggml_tensor * v_write = L.kv.write_v(ctx, L.il, v, L.in.tok.kv_idx);
    named(k_write, "k_write", L.il, L.c);
    named(v_write, "v_write", L.il, L.c);
    if (last && L.shape.n_outputs == 0) {
        ggml_build_forward_expand(gf, k_write);
        ggml_build_forward_expand(gf, v_write);
        return nullptr;
    }

    ggml_tensor * att = named(attention(L, q), "att", L.il, L.c);
    if (last && L.in.tok.out_rows) {
        att = ggml_get_rows(ctx, att, L.in.tok.out_rows);
        x = ggml_get_rows(ctx, x, L.in.tok.out_rows);
    }
    ggml_tensor * out = ggml_mul_mat(ctx, w.wo, att);
    if (w.attn_post_norm) out = rms_norm(ctx, out, w.attn_post_norm, hp.rms_eps); // Gemma's extra norms
    x = ggml_add(ctx, x, out);

    out = feed_forward(ctx, w, rms_norm(ctx, x, w.ffn_norm, hp.rms_eps), hp.ffn_gelu);
    if (w.ffn_post_norm) out = rms_norm(ctx, out, w.ffn_post_norm, hp.rms_eps);
    x = ggml_add(ctx, x, out);
    return named(x, "x", L.il, L.c);
}

static std::atomic<int64_t> n_graphs_built{0};
int64_t llama_graphs_built() { return n_graphs_built.load(std::memory_order_relaxed); }

std::unique_ptr<LlamaGraph> build_llama_graph(const Model & model, const KvCache & kv, const GraphShape & shape_in,
                                              std::string * err) {
    const HParams & hp = model.hp;
    GraphShape shape = shape_in;
    if (shape.n_seq == 1) {
        shape.n_q = shape.n_tokens;
        shape.gather = false;
    }
    shape.kv_len = shape.kv_len && shape.flash_attn;
    auto fail = [&](const std::string & msg) -> std::unique_ptr<LlamaGraph> {
        if (err) *err = msg;
        return nullptr;
    };
    if (shape.n_tokens <= 0 || shape.n_kv <= 0 || shape.n_kv > kv.n_ctx() || shape.n_seq != kv.n_seq() ||
        shape.n_q <= 0 || (int64_t) shape.n_q * shape.n_seq < shape.n_tokens ||
        (!shape.gather && shape.n_q * shape.n_seq != shape.n_tokens) || shape.n_outputs < 0 ||
        shape.n_outputs > shape.n_tokens || shape.n_chunks <= 0) {
        return fail("graph shape does not fit the KV cache (" + std::to_string(shape.n_tokens) + " tokens, " +
                    std::to_string(shape.n_kv) + " of " + std::to_string(kv.n_ctx()) + " slots, " +
                    std::to_string(shape.n_seq) + " sequences)");
    }
    auto g = std::make_unique<LlamaGraph>();
    g->shape = shape;
    size_t graph_size = 0;
    g->ctx = new_graph_ctx(hp.n_layer * shape.n_chunks, &graph_size);
    if (!g->ctx) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        return fail("cannot allocate the graph context");
    }
    g->gf = ggml_new_graph_custom(g->ctx, graph_size, false);

    for (int c = 0; c < shape.n_chunks; ++c) {
        LlamaGraph::Chunk in = chunk_inputs(g->ctx, hp, kv, shape, c);
        // every input gets memory, also one nothing reads (a one-layer model without outputs
        // stops before attention): set_inputs fills them all
        for (ggml_tensor * t : {in.tok.tokens, in.tok.pos, in.tok.kv_idx, in.tok.k_recent_idx, in.grp.k_group_rows,
                                in.grp.k_recent_group, in.grp.k_recent_rows, in.att.mask, in.att.mask_swa,
                                in.att.kv_len, in.tok.q_idx, in.tok.out_idx, in.tok.out_rows}) {
            if (t) ggml_build_forward_expand(g->gf, t);
        }
        ggml_tensor * x = ggml_get_rows(g->ctx, model.tok_embd, in.tok.tokens); // [n_embd, n_tokens]
        if (hp.embd_scale) x = ggml_scale(g->ctx, x, std::sqrt((float) hp.n_embd));
        for (int il = 0; il < hp.n_layer && x; ++il) x = layer(LayerIn{g->ctx, model, kv, shape, in, il, c}, x, g->gf);
        if (x) { // rows of the tokens that need logits (the last layer kept only those)
            in.logits = ggml_mul_mat(g->ctx, model.output, rms_norm(g->ctx, x, model.output_norm, hp.rms_eps));
            in.logits = softcap(g->ctx, in.logits, hp.final_softcap);
            ggml_format_name(in.logits, "logits_%d", c);
            ggml_set_output(in.logits);
            ggml_build_forward_expand(g->gf, in.logits);
        }
        g->chunks.push_back(in);
    }
    g->logits = g->chunks.back().logits;

    if (!alloc_graph_memory(g->gf, &g->galloc)) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        return fail("cannot allocate the graph's intermediate tensors");
    }
    n_graphs_built.fetch_add(1, std::memory_order_relaxed);
    return g;
}

void TokenInputs::set(const GraphShape & shape, const Ubatch & ub, const KvCache & kv, RowLayout * layout) const {
    const int n = shape.n_tokens, n_q = shape.n_q;
    // query row of each token: the k-th token of sequence s is row s * n_q + k
    layout->seq_count.assign(shape.n_seq, 0);
    layout->token_of_row.assign((size_t) n_q * shape.n_seq, -1);
    int n_out = 0;
    for (int i = 0; i < n; ++i) {
        const int s = ub.seq[i];
        const int r = s * n_q + layout->seq_count[s]++;
        layout->token_of_row[r] = i;
        ((int32_t *) tokens->data)[i] = ub.tokens[i];
        ((int32_t *) pos->data)[i] = ub.pos[i];
        ((int64_t *) kv_idx->data)[i] = kv.row(s, ub.pos[i]);
        if (k_recent_idx) ((int64_t *) k_recent_idx->data)[i] = kv.recent_row(s, ub.pos[i]);
        if (out_idx) ((int32_t *) out_idx->data)[i] = r;
        if (out_rows && ub.output[i]) ((int32_t *) out_rows->data)[n_out++] = i;
    }
    for (size_t r = 0; q_idx && r < layout->token_of_row.size(); ++r) {
        ((int32_t *) q_idx->data)[r] = std::max(layout->token_of_row[r], 0); // padding rows read token 0
    }
}

void GroupInputs::set(const GraphShape & shape, const KvCache & kv) const {
    if (!k_group_rows) return;
    const KvKeyGroups & groups = kv.groups();
    groups.fill_group_rows((int64_t *) k_group_rows->data);
    const int64_t G = KvKeyGroups::n_groups(shape.n_kv);
    for (int s = 0; s < shape.n_seq; ++s) {
        if (k_recent_group) ((int32_t *) k_recent_group->data)[s] = groups.recent_group(s);
        // matmul path: sequences of this chunk read at most group G - 1; the others' rows are dropped
        const int64_t first = ((int64_t) s * G + std::min<int64_t>(groups.recent_group(s), G - 1)) * GGML_KV_GROUP;
        for (int j = 0; k_recent_rows && j < GGML_KV_GROUP; ++j) {
            ((int64_t *) k_recent_rows->data)[s * GGML_KV_GROUP + j] = first + j;
        }
    }
}

void MaskInputs::set(const GraphShape & shape, const Ubatch & ub, const KvCache & kv, const RowLayout & layout) const {
    const std::vector<int> & count = layout.seq_count;
    // sequences without tokens in this chunk read nothing
    for (int s = 0; s < shape.n_seq && kv_len; ++s) ((int32_t *) kv_len->data)[s] = count[s] > 0 ? kv.kv_len(s) : 0;
    fill(mask, 0, shape, ub, kv, layout);
    if (mask_swa) fill(mask_swa, n_swa, shape, ub, kv, layout);
}

void MaskInputs::fill(ggml_tensor * m, int window, const GraphShape & shape, const Ubatch & ub, const KvCache & kv,
                      const RowLayout & layout) {
    const int n_kv = shape.n_kv, n_q = shape.n_q;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int s = 0; s < shape.n_seq; ++s) {
        const int valid = layout.seq_count[s] > 0 ? std::min(kv.kv_len(s), n_kv) : 0;
        // padding-free attention never reads past the valid length: no need to fill it
        const int end = shape.kv_len ? valid : n_kv;
        for (int k = 0; k < n_q; ++k) {
            const int t = layout.token_of_row[s * n_q + k];
            float * row = (float *) m->data + ((size_t) s * n_q + k) * n_kv;
            if (t < 0) { // padding row: one visible slot keeps its softmax finite; its output is dropped
                for (int j = 0; j < end; ++j) row[j] = j == 0 ? 0.0f : neg_inf;
                continue;
            }
            for (int j = 0; j < valid; ++j) row[j] = kv.visible(s, j, ub.pos[t], window) ? 0.0f : neg_inf;
            for (int j = valid; j < end; ++j) row[j] = neg_inf;
        }
    }
}

void LlamaGraph::set_inputs(int c, const Ubatch & ub, const KvCache & kv) {
    const Chunk & in = chunks[c];
    GGML_ASSERT(ub.n() == shape.n_tokens);
    in.tok.set(shape, ub, kv, &layout);
    in.grp.set(shape, kv);
    in.att.set(shape, ub, kv, layout);
}

std::unique_ptr<KvWriteGraph> build_kv_write_graph(const KvCache & kv, std::string * err, int n_rows) {
    auto g = std::make_unique<KvWriteGraph>();
    const int n_layer = kv.n_layer();
    size_t graph_size = 0;
    g->ctx = new_graph_ctx(n_layer, &graph_size);
    if (!g->ctx) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        if (err) *err = "cannot allocate the graph context";
        return nullptr;
    }
    if (kv.grouped()) n_rows = std::min(n_rows, GGML_KV_GROUP);
    g->inp_rows = ggml_new_tensor_2d(g->ctx, GGML_TYPE_F32, kv.n_embd_kv(), n_rows);
    g->inp_idx = ggml_new_tensor_1d(g->ctx, GGML_TYPE_I64, n_rows);
    ggml_set_input(g->inp_rows);
    ggml_set_input(g->inp_idx);
    if (kv.grouped()) {
        g->inp_recent_idx = ggml_new_tensor_1d(g->ctx, GGML_TYPE_I64, n_rows);
        g->inp_group_rows = ggml_new_tensor_1d(g->ctx, GGML_TYPE_I64, (int64_t) kv.n_embd_kv() * kv.n_seq());
        ggml_set_input(g->inp_recent_idx);
        ggml_set_input(g->inp_group_rows);
    }
    g->gf = ggml_new_graph_custom(g->ctx, graph_size, false);
    for (int il = 0; il < n_layer; ++il) {
        ggml_tensor * k_idx = kv.grouped() ? g->inp_recent_idx : g->inp_idx;
        ggml_build_forward_expand(g->gf, kv.write_k(g->ctx, il, g->inp_rows, k_idx, g->inp_group_rows));
        ggml_build_forward_expand(g->gf, kv.write_v(g->ctx, il, g->inp_rows, g->inp_idx));
    }
    if (!alloc_graph_memory(g->gf, &g->galloc)) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        if (err) *err = "cannot allocate the graph's intermediate tensors";
        return nullptr;
    }
    return g;
}

void KvWriteGraph::set_positions(KvCache & kv, int64_t first) {
    for (int64_t i = 0; i < n_rows(); ++i) {
        ((int64_t *) inp_idx->data)[i] = kv.row(0, first + i);
        if (!inp_recent_idx) continue;
        kv.use_group(0, first + i);
        ((int64_t *) inp_recent_idx->data)[i] = kv.recent_row(0, first + i);
    }
    if (inp_group_rows) kv.groups().fill_group_rows((int64_t *) inp_group_rows->data);
}

} // namespace kvg
