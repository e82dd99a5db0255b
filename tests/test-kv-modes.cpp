// KV-cache modes against plain references:
//   - flash_attn_ext with per-sequence valid lengths, packed heads and q8_0 K/V against a
//     naive softmax(q·K^T)·V over the valid slots (slots past the length hold NaN: read
//     them and the result is NaN);
//   - multi-sequence batches give each sequence the tokens it gets alone;
//   - ring caches against the plain forward pass of reference-llama.h attending only to
//     the last n_window positions plus the sinks; the WAR edges of a two-chunk ring graph;
//   - dynamic residency: /proc/self/statm grows with the rows written, not the capacity;
//   - q8_0 caches keep the greedy tokens of the f32 cache.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "reference-llama.h"
#include "test-runtime-common.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const float NEG_INF = -std::numeric_limits<float>::infinity();

// ---- flash attention with valid lengths -------------------------------------------------------------

// Element i of row r of a 2-d cache tensor, as the kernel must see it (dequantized).
std::vector<float> row_floats(const ggml_tensor * t, int64_t r) {
    std::vector<float> out(t->ne[0]);
    kvg::row_decoder(t->type)((const char *) t->data + r * t->nb[1], out.data(), t->ne[0]);
    return out;
}

void run_attention_case(ggml_type type, bool packed, bool with_mask, int n_threads) {
    CAPTURE(ggml_type_name(type));
    CAPTURE(packed);
    CAPTURE(with_mask);
    CAPTURE(n_threads);
    const int D = 16, n_head = 4, n_head_kv = 2, n_q = 3, n_kv = 150, n_seq = 3;
    const int n_embd_kv = D * n_head_kv;
    const int32_t kv_len[n_seq] = {n_kv, 37, 0};
    ggml_context * ctx = ggml_init({64 << 20, nullptr, false});
    REQUIRE(ctx);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);

    // cache rows: sequence s owns rows [s * n_kv, (s + 1) * n_kv); past kv_len: NaN
    ggml_tensor * kc = ggml_new_tensor_2d(ctx, type, n_embd_kv, n_kv * n_seq);
    ggml_tensor * vc = ggml_new_tensor_2d(ctx, type, n_embd_kv, n_kv * n_seq);
    std::vector<float> row(n_embd_kv);
    for (ggml_tensor * t : {kc, vc}) {
        for (int s = 0; s < n_seq; ++s) {
            for (int j = 0; j < n_kv; ++j) {
                char * dst = (char *) t->data + ((int64_t) s * n_kv + j) * t->nb[1];
                if (j >= kv_len[s]) { // all ones: NaN as f32, f16 and as a q8_0 scale
                    std::memset(dst, 0xff, t->nb[1]);
                    continue;
                }
                for (float & x : row) x = U(rng);
                if (type == GGML_TYPE_F32) std::memcpy(dst, row.data(), row.size() * 4);
                else if (type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(row.data(), (ggml_fp16_t *) dst, n_embd_kv);
                else ggml_get_type_traits(type)->from_float_ref(row.data(), dst, n_embd_kv);
            }
        }
    }
    ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, n_q, n_head, n_seq);
    for (int64_t i = 0; i < ggml_nelements(q); ++i) ((float *) q->data)[i] = U(rng);
    ggml_tensor * mask = nullptr;
    if (with_mask) {
        mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, n_kv, n_q, 1, n_seq);
        for (int64_t i = 0; i < ggml_nelements(mask); ++i) ((float *) mask->data)[i] = rng() % 3 == 0 ? NEG_INF : 0.0f;
    }
    ggml_tensor * len = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_seq);
    std::memcpy(len->data, kv_len, sizeof kv_len);

    const size_t seq_stride = (size_t) n_kv * kc->nb[1];
    auto view = [&](ggml_tensor * t) {
        if (packed) return ggml_view_4d(ctx, t, n_embd_kv, n_kv, 1, n_seq, t->nb[1], n_kv * t->nb[1], seq_stride, 0);
        return ggml_view_4d(ctx, t, D, n_kv, n_head_kv, n_seq, t->nb[1], ggml_row_size(type, D), seq_stride, 0);
    };
    const float scale = 0.3f;
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, view(kc), view(vc), mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_kv_len(ctx, out, len);
    CHECK(out->src[4] == len);
    CHECK(out->ne[0] == D);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);

    double worst = 0.0;
    bool finite = true;
    for (int s = 0; s < n_seq; ++s) {
        for (int h = 0; h < n_head; ++h) {
            const int hk = h / (n_head / n_head_kv);
            for (int iq = 0; iq < n_q; ++iq) {
                const float * qr = (const float *) q->data + ((int64_t) (s * n_head + h) * n_q + iq) * D;
                std::vector<double> scores(kv_len[s], -INFINITY); // masked: -inf
                for (int j = 0; j < kv_len[s]; ++j) {
                    if (mask && ((const float *) mask->data)[((int64_t) s * n_q + iq) * n_kv + j] == NEG_INF) continue;
                    const std::vector<float> kr = row_floats(kc, (int64_t) s * n_kv + j);
                    double d = 0;
                    for (int i = 0; i < D; ++i) d += (double) qr[i] * kr[hk * D + i];
                    scores[j] = d * scale;
                }
                const std::vector<double> want = ref::attend(scores, D, [&](int j) {
                    const std::vector<float> vr = row_floats(vc, (int64_t) s * n_kv + j);
                    return std::vector<float>(vr.begin() + hk * D, vr.begin() + (hk + 1) * D);
                }); // nothing valid: zero
                const float * o = (const float *) ((const char *) out->data + h * out->nb[1] + iq * out->nb[2] + s * out->nb[3]);
                for (int i = 0; i < D; ++i) {
                    finite = finite && std::isfinite(o[i]);
                    worst = std::max(worst, std::fabs(o[i] - want[i]));
                }
            }
        }
    }
    CHECK(finite); // no NaN slot past a valid length was read
    CHECK(worst < 2e-5);
    ggml_free(ctx);
}

} // namespace

TEST_CASE("flash_attn_ext: valid length per sequence, packed heads, f32/f16/q8_0 K/V") {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        for (bool packed : {false, true}) {
            if (t == GGML_TYPE_Q8_0 && !packed) continue; // a 16-element head is half a block
            for (bool with_mask : {false, true}) {
                for (int threads : {1, 3}) run_attention_case(t, packed, with_mask, threads);
            }
        }
    }
}

TEST_CASE("flash_attn_ext_set_kv_len registers the read with the dependency rules") {
    ggml_context * ctx = ggml_init({16 << 20, nullptr, false});
    ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 8, 1, 2, 2);
    ggml_tensor * k = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 8, 4, 2, 2);
    ggml_tensor * lens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    ggml_tensor * a = ggml_flash_attn_ext(ctx, q, k, k, nullptr, 1.0f, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_kv_len(ctx, a, lens);
    // a later in-place write into the lengths must wait for the attention (WAR)
    ggml_tensor * w = ggml_set_rows(ctx, ggml_reshape_2d(ctx, lens, 1, 2), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 1),
                                    ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1));
    bool war = false;
    for (int i = 0; i < ggml_n_control_deps(w); ++i) {
        ggml_dep_kind kind;
        war = war || (ggml_get_control_dep(w, i, &kind) == a && kind == GGML_DEP_WAR);
    }
    CHECK(war);
    CHECK(a->src[0] == q); // the other sources are kept
    CHECK(a->src[1] == k);
    ggml_free(ctx);
}

// ---- model-level helpers ----------------------------------------------------------------------------

namespace {

kvg_model * load(const std::string & name, const char * tok = nullptr) { return load_shared_model(name, tok); }

kvg_context_params params(kvg_model * m, int n_seq = 1, kvg_kv_type kv = KVG_KV_F32, kvg_attn_impl attn = KVG_ATTN_FLASH,
                          int n_threads = 1) {
    kvg_context_params p = model_params(m, kv, attn, n_threads);
    p.n_seq_max = n_seq;
    return p;
}

// Prompt, then n greedy tokens, one sequence alone in its context.
std::vector<int> greedy_alone(kvg_model * m, const kvg_context_params & p, const std::vector<int> & prompt, int n) {
    kvg_context * c = new_ctx(m, p);
    const std::vector<int> out = greedy(c, kvg_model_n_vocab(m), prompt, n, nullptr);
    kvg_context_free(c);
    return out;
}

} // namespace

TEST_CASE("batched decoding of sequences of different lengths gives the tokens each gets alone") {
    struct Run {
        const char * model;
        const char * tok;
        kvg_kv_type kv;
        kvg_attn_impl attn;
    };
    const Run runs[] = {
        {"stories260K.bin", nullptr, KVG_KV_F32, KVG_ATTN_FLASH},
        {"aidreams260K.bin", "tok512.bin", KVG_KV_F32, KVG_ATTN_FLASH},
        {"stories260K.bin", nullptr, KVG_KV_F32, KVG_ATTN_MATMUL},
        {"aidreams260K.bin", "tok512.bin", KVG_KV_Q8_0, KVG_ATTN_FLASH},
    };
    for (const Run & r : runs) {
        CAPTURE(std::string(r.model));
        CAPTURE((int) r.kv);
        CAPTURE((int) r.attn);
        kvg_model * m = load(r.model, r.tok);
        const int n_seq = 4, n_vocab = kvg_model_n_vocab(m);
        std::vector<std::vector<int>> prompts(n_seq), expected(n_seq);
        std::vector<int> n_gen(n_seq);
        for (int s = 0; s < n_seq; ++s) {
            prompts[s] = random_tokens(3 * s, n_vocab, 11 + s);
            prompts[s].insert(prompts[s].begin(), 1); // BOS + 0, 3, 6, 9 tokens
            n_gen[s] = 12 + 7 * s;
            expected[s] = greedy_alone(m, params(m, 1, r.kv, r.attn), prompts[s], n_gen[s]);
        }

        kvg_context * c = new_ctx(m, params(m, n_seq, r.kv, r.attn, 2));
        // all prompts in one batch, last sequence first (tokens not grouped in order: gathered)
        std::vector<int32_t> toks, pos, seq;
        for (int s = n_seq - 1; s >= 0; --s) {
            for (size_t i = 0; i < prompts[s].size(); ++i) {
                toks.push_back(prompts[s][i]);
                pos.push_back((int32_t) i);
                seq.push_back(s);
            }
        }
        char err[512] = "";
        REQUIRE(kvg_decode_batch(c, toks.data(), pos.data(), seq.data(), (int32_t) toks.size(), err, sizeof err));
        std::vector<std::vector<int>> got(n_seq);
        std::vector<int> last_index(n_seq);
        for (size_t i = 0; i < toks.size(); ++i) last_index[seq[i]] = (int) i;
        for (int step = 0;; ++step) {
            std::vector<int32_t> bt, bp, bs;
            for (int s = 0; s < n_seq; ++s) {
                const float * l = kvg_get_logits(c, last_index[s]);
                if ((int) got[s].size() >= n_gen[s]) continue;
                REQUIRE(l != nullptr);
                got[s].push_back(kvg_argmax(l, n_vocab));
                if ((int) got[s].size() == n_gen[s]) continue;
                bt.push_back(got[s].back());
                bp.push_back((int32_t) (prompts[s].size() + got[s].size() - 1));
                bs.push_back(s);
            }
            if (bt.empty()) break;
            if (step % 2 == 1) { // odd steps: reversed order (gathered), even: in order
                std::reverse(bt.begin(), bt.end());
                std::reverse(bp.begin(), bp.end());
                std::reverse(bs.begin(), bs.end());
            }
            REQUIRE(kvg_decode_batch(c, bt.data(), bp.data(), bs.data(), (int32_t) bt.size(), err, sizeof err));
            std::fill(last_index.begin(), last_index.end(), -1);
            for (size_t i = 0; i < bt.size(); ++i) last_index[bs[i]] = (int) i;
            for (int s = 0; s < n_seq; ++s) {
                if (last_index[s] < 0) last_index[s] = 1 << 30; // finished: no logits
            }
        }
        for (int s = 0; s < n_seq; ++s) {
            CAPTURE(s);
            CHECK(got[s] == expected[s]);
            CHECK(kvg_seq_n_past(c, s) == (int) (prompts[s].size() + n_gen[s] - 1));
        }
        kvg_context_free(c);
        kvg_model_free(m);
    }
}

TEST_CASE("batch errors: sequence ids, gaps, order; the context stays usable") {
    kvg_model * m = load("stories260K.bin");
    kvg_context_params p = params(m, 2);
    p.n_ctx = 16;
    kvg_context * c = new_ctx(m, p);
    char err[512] = "";
    const int32_t t[3] = {1, 5, 6};
    const int32_t pos_ok[3] = {0, 0, 1}, seq_ok[3] = {0, 1, 1};
    const int32_t seq_bad[3] = {0, 2, 1};
    CHECK_FALSE(kvg_decode_batch(c, t, pos_ok, seq_bad, 3, err, sizeof err));
    CHECK(std::string(err).find("sequence 2, outside 0..1") != std::string::npos);
    const int32_t pos_gap[3] = {0, 0, 2};
    CHECK_FALSE(kvg_decode_batch(c, t, pos_gap, seq_ok, 3, err, sizeof err));
    CHECK(std::string(err).find("expected 1") != std::string::npos);
    const int32_t pos_late[3] = {0, 1, 2}; // sequence 1 has nothing yet
    CHECK_FALSE(kvg_decode_batch(c, t, pos_late, seq_ok, 3, err, sizeof err));
    CHECK(std::string(err).find("position 1 is invalid") != std::string::npos);
    const int32_t pos_full[3] = {0, 15, 16};
    CHECK_FALSE(kvg_decode_batch(c, t, pos_full, seq_ok, 3, err, sizeof err));
    CHECK(kvg_decode_batch(c, t, pos_ok, seq_ok, 3, err, sizeof err));
    CHECK(kvg_get_logits(c, 0) != nullptr); // last of sequence 0
    CHECK(kvg_get_logits(c, 1) == nullptr); // not the last of sequence 1
    CHECK(kvg_get_logits(c, 2) != nullptr);
    CHECK(kvg_get_logits(c, -1) == kvg_get_logits(c, 2));
    CHECK(kvg_seq_n_past(c, 1) == 2);
    CHECK(kvg_seq_n_past(c, 2) == -1);
    kvg_context_free(c);

    // bad cache parameters
    p = params(m);
    p.kv_mode = KVG_KV_RING;
    p.n_ctx = 32;
    p.n_sink = 4;
    p.n_window = 29;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(std::string(err).find("n_window = 29") != std::string::npos);
    p.n_window = 8;
    p.n_seq_max = 0;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(std::string(err).find("n_seq_max") != std::string::npos);
    p.n_seq_max = 1;
    int bad = 9;
    std::memcpy(&p.kv_mode, &bad, sizeof bad);
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(std::string(err).find("unknown KV cache mode") != std::string::npos);
    kvg_model_free(m);
}

// ---- ring cache against the plain forward pass (reference-llama.h) ------------------------------------

TEST_CASE("ring cache: full-cache logits inside the window, sliding-window reference past it") {
    struct Run {
        const char * model;
        int n_ctx, n_window, n_sink, n_tokens;
        kvg_kv_type kv;
        kvg_attn_impl attn;
    };
    const Run runs[] = {
        {"stories260K.bin", 40, 24, 4, 100, KVG_KV_F32, KVG_ATTN_FLASH},
        {"stories260K.bin", 40, 24, 4, 100, KVG_KV_F32, KVG_ATTN_MATMUL},
        {"aidreams260K.bin", 20, 16, 0, 120, KVG_KV_F32, KVG_ATTN_FLASH},
        {"aidreams260K.bin", 24, 12, 2, 100, KVG_KV_F16, KVG_ATTN_FLASH},
    };
    for (const Run & r : runs) {
        CAPTURE(std::string(r.model));
        CAPTURE(r.n_window);
        CAPTURE(r.n_sink);
        CAPTURE((int) r.attn);
        std::string e;
        auto model = kvg::load_model(model_path(r.model), "", kvg::LoadOptions(), &e);
        REQUIRE(model);
        kvg_model * m = load(r.model);
        const int nv = kvg_model_n_vocab(m);
        std::vector<int> toks = random_tokens(r.n_tokens - 1, nv, 99);
        toks.insert(toks.begin(), 1);
        const std::vector<float> ref_ring = ref::logits(*model, toks, r.n_window, r.n_sink);

        // full cache, token by token: positions < n_window must agree with the ring
        kvg_context * full = new_ctx(m, params(m, 1, r.kv, r.attn));
        std::vector<float> full_logits((size_t) r.n_window * nv);
        char err[512] = "";
        for (int p = 0; p < r.n_window; ++p) {
            const float * l = kvg_decode(full, &toks[p], 1, p, err, sizeof err);
            REQUIRE(l != nullptr);
            std::copy(l, l + nv, full_logits.begin() + (size_t) p * nv);
        }
        kvg_context_free(full);

        const float tol = r.kv == KVG_KV_F16 ? 2e-2f : 2e-4f;
        for (bool one_call : {false, true}) {
            CAPTURE(one_call);
            kvg_context_params p = params(m, 1, r.kv, r.attn, 2);
            p.kv_mode = KVG_KV_RING;
            p.n_ctx = r.n_ctx;
            p.n_window = r.n_window;
            p.n_sink = r.n_sink;
            p.n_batch = 32;
            p.logits_all = one_call;
            kvg_context * c = new_ctx(m, p);
            float err_in = 0.0f, err_past = 0.0f;
            auto check = [&](int pos, const float * l) {
                REQUIRE(l != nullptr);
                const float d = max_diff(l, &ref_ring[(size_t) pos * nv], nv);
                if (pos < r.n_window) {
                    CHECK(max_diff(l, &full_logits[(size_t) pos * nv], nv) < 1e-4f); // batched vs one by one: rounding only
                    err_in = std::max(err_in, d);
                } else {
                    err_past = std::max(err_past, d);
                }
            };
            if (one_call) { // chunks limited by the ring slack, several per graph
                REQUIRE(kvg_decode(c, toks.data(), r.n_tokens, 0, err, sizeof err) != nullptr);
                for (int pos = 0; pos < r.n_tokens; ++pos) check(pos, kvg_get_logits(c, pos));
            } else {
                for (int pos = 0; pos < r.n_tokens; ++pos) check(pos, kvg_decode(c, &toks[pos], 1, pos, err, sizeof err));
            }
            MESSAGE(std::string(r.model), " ring W=", r.n_window, " sinks=", r.n_sink, ": max |logit - reference| ", err_in,
                    " inside the window, ", err_past, " past it");
            CHECK(err_in < tol);
            CHECK(err_past < tol);
            CHECK(kvg_n_past(c) == r.n_tokens);
            // a ring can step back inside its slack, not past what it still holds
            const int back = r.n_ctx - r.n_sink - r.n_window;
            CHECK(kvg_decode(c, &toks[0], 1, r.n_tokens - back, err, sizeof err) != nullptr);
            CHECK(kvg_decode(c, &toks[0], 1, r.n_tokens - back - 2, err, sizeof err) == nullptr);
            CHECK(std::string(err).find("no longer holds") != std::string::npos);
            kvg_context_free(c);
        }
        kvg_model_free(m);
    }
}

TEST_CASE("ring graph with two chunks: the second chunk's cache writes wait for the first chunk's reads (WAR)") {
    std::string e;
    auto model = kvg::load_model(model_path("stories260K.bin"), "", kvg::LoadOptions(), &e);
    REQUIRE(model);
    kvg::KvCache kv;
    kvg::KvCacheParams kp;
    kp.n_ctx = 40;
    kp.mode = kvg::KvMode::Ring;
    kp.n_window = 24;
    kp.n_sink = 4;
    REQUIRE(kv.init(model->hp, kp, &e));
    for (bool flash : {true, false}) {
        CAPTURE(flash);
        kvg::GraphShape shape;
        shape.n_tokens = 4;
        shape.n_kv = 40;
        shape.flash_attn = flash;
        shape.n_chunks = 2;
        auto g = kvg::build_llama_graph(*model, kv, shape, &e);
        REQUIRE(g);
        const int L = model->hp.n_layer;
        auto get = [&](const char * what, int il, int c) {
            ggml_tensor * t = graph_tensor(g->gf, what, il, c);
            REQUIRE(t != nullptr);
            return t;
        };
        const char * k_reader = flash ? "kv_read" : "k_read", * v_reader = flash ? "kv_read" : "v_read";
        for (int il = 0; il < L; ++il) {
            CAPTURE(il);
            ggml_tensor * k_write0 = get("k_write", il, 0), * k_write1 = get("k_write", il, 1);
            ggml_tensor * k_read0 = get(k_reader, il, 0);
            CHECK(has_dep(k_write1, k_read0, GGML_DEP_WAR));
            CHECK(has_dep(get("v_write", il, 1), get(v_reader, il, 0), GGML_DEP_WAR));
            // set_rows keeps the rows it does not write: the second write reads (RAW) the first's result
            CHECK((has_dep(k_write1, k_write0, GGML_DEP_RAW) || has_dep(k_write1, k_write0, GGML_DEP_WAW)));
            CHECK(has_dep(get(k_reader, il, 1), k_write1, GGML_DEP_RAW));
            CHECK(node_index(g->gf, k_read0) < node_index(g->gf, k_write1));
        }
        // chunk 1's first layer does not wait for chunk 0's last layer: only for the cache
        CHECK_FALSE(has_dep(get("k_write", 0, 1), get(k_reader, L - 1, 0), GGML_DEP_WAR));
        CHECK(ggml_graph_validate(g->gf, nullptr, 0, nullptr) == 0);
    }
}

// ---- dynamic residency ------------------------------------------------------------------------------------

namespace {

long resident_pages() {
    std::ifstream f("/proc/self/statm");
    long size = 0, resident = 0;
    f >> size >> resident;
    return resident;
}

} // namespace

TEST_CASE("dynamic residency: resident memory grows with the rows written, not the capacity") {
    const long page = sysconf(_SC_PAGESIZE);
    kvg::HParams hp;
    hp.n_layer = 2;
    hp.n_embd = 1024;
    hp.n_head = 8;
    hp.n_head_kv = 8; // a row (one position of one layer's K) is 1024 floats: one 4 KiB page
    const int n_ctx = 8192;
    std::string e;
    kvg::KvCache kv;
    REQUIRE(kv.init(hp, n_ctx, GGML_TYPE_F32, &e));
    const long row_pages = (long) (kv.k_tensor(0)->nb[1] / page); // pages per row (>= 1 here)
    REQUIRE(row_pages >= 1);
    REQUIRE((long) kv.k_tensor(0)->nb[1] % page == 0);
    const int n_rows = 256;
    auto wg = kvg::build_kv_write_graph(kv, &e, n_rows);
    REQUIRE(wg);
    for (int64_t i = 0; i < ggml_nelements(wg->inp_rows); ++i) ((float *) wg->inp_rows->data)[i] = 0.25f;
    std::vector<uint8_t> work;
    auto write_rows = [&](int64_t first) { // rows first..first+n_rows-1 of every K and V
        for (int i = 0; i < n_rows; ++i) ((int64_t *) wg->inp_idx->data)[i] = first + i;
        ggml_cplan plan = ggml_graph_plan(wg->gf, 2, nullptr);
        work.resize(plan.work_size + 1);
        plan.work_data = work.data();
        REQUIRE(ggml_graph_compute(wg->gf, &plan) == GGML_STATUS_SUCCESS);
    };
    write_rows(0); // warm-up: threads, graph buffers and the first rows are resident now
    const long base = resident_pages();
    const int n_tensors = 2 * hp.n_layer;
    int written = n_rows;
    for (int fill : {n_ctx / 4, n_ctx / 2}) {
        CAPTURE(fill);
        for (; written < fill; written += n_rows) write_rows(written);
        const long grown = resident_pages() - base;
        const long expected = (long) n_tensors * (fill - n_rows) * row_pages;
        MESSAGE("filled ", fill, " of ", n_ctx, " positions: resident +", grown * page / 1024, " KiB, rows written ",
                expected * page / 1024, " KiB, capacity ", kv.bytes() / 1024, " KiB");
        CHECK(std::labs(grown - expected) <= 16); // a page-size tolerance (allocator noise)
    }
    // clear gives the pages back
    kv.clear();
    CHECK(resident_pages() - base <= 16);

    // a static cache is resident in full from the start
    const long before = resident_pages();
    kvg::KvCache st;
    kvg::KvCacheParams sp;
    sp.n_ctx = n_ctx;
    sp.commit = true;
    REQUIRE(st.init(hp, sp, &e));
    const long st_grown = resident_pages() - before;
    const long st_pages = (long) (st.bytes() / page);
    CHECK(std::labs(st_grown - st_pages) <= std::max(16L, st_pages / 256)); // sanitizer builds add a little
}

TEST_CASE("dynamic residency through the API: a static context commits its cache, a dynamic one does not") {
    kvg_model * m = load("stories260K.bin");
    const long page = sysconf(_SC_PAGESIZE);
    kvg_context_params p = params(m, 32); // 32 sequences x 512 slots x 1280 bytes = 20 MiB
    long before = resident_pages();
    kvg_context * dyn = new_ctx(m, p);
    const long dyn_grown = resident_pages() - before;
    p.kv_static = true;
    before = resident_pages();
    kvg_context * st = new_ctx(m, p);
    const long st_grown = resident_pages() - before;
    const long cache_pages = (long) (kvg_kv_cache_bytes(st) / page);
    MESSAGE("KV cache ", kvg_kv_cache_bytes(st) / 1024, " KiB: resident at creation +", dyn_grown * page / 1024,
            " KiB dynamic, +", st_grown * page / 1024, " KiB static");
    CHECK(dyn_grown < 64);
    CHECK(std::labs(st_grown - cache_pages) <= 64);
    // both decode the same
    char err[256];
    const kvg_token t[3] = {1, 7, 9};
    const float * a = kvg_decode(dyn, t, 3, 0, err, sizeof err);
    const float * b = kvg_decode(st, t, 3, 0, err, sizeof err);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(max_diff(a, b, 512) == 0.0f);
    kvg_context_free(st);
    kvg_context_free(dyn);
    kvg_model_free(m);
}

// ---- quantized cache --------------------------------------------------------------------------------------

// stories260K's greedy path from BOS has top-2 margins of 0.05..0.35 logits before token
// 32 and a tie (0.003) at token 37. Per-position q8_0 rows of K (a block = all 4 of its
// 8-wide heads) moved its logits by up to 1.8 and kept 10 tokens; K by channel in groups
// of 32 positions with the newest group in f32 keeps 37 and moves logits by 0.55 at most.
TEST_CASE("q8_0 cache: greedy tokens of the f32 cache; max logit error") {
    struct Case {
        const char * model;
        const char * tok;
        int min_same;    // greedy tokens that must agree
        float max_error; // max |logit difference| along the f32 greedy path
    };
    for (const Case & tc : {Case{"aidreams260K.bin", "tok512.bin", 64, 0.05f}, Case{"stories260K.bin", nullptr, 37, 0.6f}}) {
        for (kvg_attn_impl attn : {KVG_ATTN_FLASH, KVG_ATTN_MATMUL}) {
            CAPTURE(std::string(tc.model));
            CAPTURE((int) attn);
            kvg_model * m = load(tc.model, tc.tok);
            const int nv = kvg_model_n_vocab(m), n = 64;
            const std::vector<int> bos = {1};
            const std::vector<int> ref = greedy_alone(m, params(m, 1, KVG_KV_F32, attn), bos, n);
            const std::vector<int> q8 = greedy_alone(m, params(m, 1, KVG_KV_Q8_0, attn), bos, n);
            int same = 0;
            while (same < n && q8[same] == ref[same]) ++same;
            CHECK(same >= tc.min_same);
            // logits along the f32 greedy path, both caches
            std::vector<int> toks = bos;
            toks.insert(toks.end(), ref.begin(), ref.end() - 1);
            kvg_context_params pf = params(m, 1, KVG_KV_F32, attn), pq = params(m, 1, KVG_KV_Q8_0, attn);
            pf.logits_all = pq.logits_all = true;
            kvg_context * cf = new_ctx(m, pf);
            kvg_context * cq = new_ctx(m, pq);
            char err[256];
            REQUIRE(kvg_decode(cf, toks.data(), n, 0, err, sizeof err));
            REQUIRE(kvg_decode(cq, toks.data(), n, 0, err, sizeof err));
            float worst = 0.0f;
            for (int i = 0; i < n; ++i) worst = std::max(worst, max_diff(kvg_get_logits(cf, i), kvg_get_logits(cq, i), nv));
            MESSAGE(std::string(tc.model), std::string(attn == KVG_ATTN_FLASH ? " flash" : " matmul"), ": q8_0 cache keeps ", same, "/", n,
                    " greedy tokens, max logit error ", worst, " over ", n, " positions; KV bytes ",
                    kvg_kv_cache_bytes(cq), " vs ", kvg_kv_cache_bytes(cf));
            CHECK(worst < tc.max_error);
            // q8_0: 34 bytes per 32 values of K and V, plus two f32 groups of K rows per layer
            // (the open one and the one left last)
            const size_t f32_bytes = kvg_kv_cache_bytes(cf), n_ctx = (size_t) kvg_n_ctx(cf);
            CHECK(kvg_kv_cache_bytes(cq) == f32_bytes / 4 * 34 / 32 + 2 * (f32_bytes / 2 / n_ctx * 32));
            kvg_context_free(cf);
            kvg_context_free(cq);
            kvg_model_free(m);
        }
    }
}
