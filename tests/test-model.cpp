// The runtime against an independent reference: the fixtures in ../shared/fixtures were
// computed by a PyTorch implementation checked against llama2.c's run.c.
//   *.greedy.txt           64 greedy token ids after BOS = 1
//   *.logits.tokens.txt    32 token ids (BOS + the first 31 greedy ones)
//   *.logits.f32           logits at those 32 positions, LE float32 [32][512]
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "api-impl.h"
#include "reference-llama.h"
#include "test-runtime-common.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string temp_path(const std::string & name) { return ::temp_path("test-model", name); }

struct Case {
    const char * name;
    const char * model;
    const char * tokenizer; // nullptr: none available
};
const Case CASES[] = {
    {"aidreams260K", "aidreams260K.bin", "tok512.bin"},
    {"stories260K", "stories260K.bin", nullptr},
};

kvg_model * load(const std::string & path, const char * tok = nullptr) { return load_model_file(path, tok); }

// A model's *.logits.tokens.txt and *.logits.f32: 32 tokens and their logits [32][512].
struct LogitsFixture {
    std::vector<int> tokens;
    std::vector<float> logits;
};
LogitsFixture logits_fixture(const std::string & name) {
    LogitsFixture f{read_ids(fixture_path(name + ".logits.tokens.txt")), read_f32(fixture_path(name + ".logits.f32"))};
    REQUIRE(f.tokens.size() == 32);
    REQUIRE(f.logits.size() == 32 * 512);
    return f;
}

kvg_context * new_ctx(kvg_model * m, int n_threads = 1, kvg_kv_type kv = KVG_KV_F32, kvg_attn_impl attn = KVG_ATTN_FLASH,
                      bool logits_all = false, int n_batch = 512) {
    kvg_context_params p = model_params(m, kv, attn, n_threads);
    p.logits_all = logits_all;
    p.n_batch = n_batch;
    return new_ctx(m, p);
}

// Greedy generation after BOS (token by token), n tokens.
std::vector<int> greedy(kvg_context * c, kvg_model * m, int n) { return greedy(c, kvg_model_n_vocab(m), {1}, n, nullptr); }

// Max abs difference between the logits of `tokens` (decoded one by one) and `ref`.
float logits_error(kvg_context * c, const std::vector<int> & tokens, const std::vector<float> & ref, int n_vocab) {
    float worst = 0.0f;
    char err[512] = "";
    for (size_t i = 0; i < tokens.size(); ++i) {
        const float * l = kvg_decode(c, &tokens[i], 1, (int32_t) i, err, sizeof err);
        INFO(err);
        REQUIRE(l != nullptr);
        for (int j = 0; j < n_vocab; ++j) worst = std::max(worst, std::fabs(l[j] - ref[i * n_vocab + j]));
    }
    return worst;
}

} // namespace

TEST_CASE("llama2.c checkpoints load with the documented shapes") {
    kvg_model * m = load(model_path("aidreams260K.bin"), "tok512.bin");
    CHECK(kvg_model_n_vocab(m) == 512);
    CHECK(kvg_model_n_embd(m) == 64);
    CHECK(kvg_model_n_layer(m) == 4);
    CHECK(kvg_model_n_head(m) == 4);
    CHECK(kvg_model_n_head_kv(m) == 4);
    CHECK(kvg_model_n_ctx_train(m) == 128);
    CHECK(kvg_model_bos(m) == 1);
    CHECK(kvg_model_eos(m) == 2);
    CHECK(kvg_model_has_vocab(m));
    // every float of the file except the 28-byte header and the skipped RoPE tables
    CHECK(kvg_model_weight_bytes(m) == 932124 - 28 - 2 * 128 * 8 * 4);
    kvg_context * c = new_ctx(m);
    CHECK(kvg_kv_cache_bytes(c) == 2u * 4 * 128 * 64 * sizeof(float));
    kvg_context_free(c);
    kvg_model_free(m);

    m = load(model_path("stories260K.bin"));
    CHECK(kvg_model_n_layer(m) == 5);
    CHECK(kvg_model_n_head(m) == 8);
    CHECK(kvg_model_n_head_kv(m) == 4);
    CHECK(kvg_model_n_ctx_train(m) == 512);
    CHECK_FALSE(kvg_model_has_vocab(m));
    kvg_token t[4];
    CHECK(kvg_tokenize(m, "hi", true, t, 4) == INT32_MIN);
    kvg_model_free(m);
}

// Small checkpoints are read so that the arrays after the 28-byte header start on a cache line;
// the tensors must still hold the file's floats (checked against a plain read of the file).
TEST_CASE("small llama2.c checkpoints: weights on a cache line, equal to the file's bytes") {
    std::ifstream in(model_path("stories260K.bin"), std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(file.size() > 28);
    for (bool use_mmap : {true, false}) {
        CAPTURE(use_mmap);
        kvg::LoadOptions opt;
        opt.use_mmap = use_mmap;
        std::string e;
        auto model = kvg::load_model(model_path("stories260K.bin"), "", opt, &e);
        REQUIRE(model);
        const ggml_tensor * embd = model->tok_embd;
        const ggml_tensor * wq = model->layers[0].wq;
        CHECK((uintptr_t) embd->data % 64 == 0);
        CHECK((uintptr_t) wq->data % 64 == 0);
        // token embedding right after the header; attention norms (dim x layers), then wq
        CHECK(std::memcmp(embd->data, file.data() + 28, ggml_nbytes(embd)) == 0);
        const size_t wq_off = 28 + ggml_nbytes(embd) + model->layers.size() * ggml_nbytes(model->layers[0].attn_norm);
        CHECK(std::memcmp(wq->data, file.data() + wq_off, ggml_nbytes(wq)) == 0);
    }
}

// reference-llama.h, the plain forward pass the tests compare kvgraph with, against the
// PyTorch fixtures: the logits at the 32 fixture positions and the 64 greedy tokens.
TEST_CASE("the reference forward pass reproduces the PyTorch fixtures") {
    for (const Case & tc : CASES) {
        CAPTURE(tc.name);
        std::string e;
        auto model = kvg::load_model(model_path(tc.model), "", kvg::LoadOptions(), &e);
        INFO(e);
        REQUIRE(model);
        const LogitsFixture fx = logits_fixture(tc.name);
        const std::vector<int> & toks = fx.tokens;
        const std::vector<float> & want = fx.logits;
        const std::vector<float> got = ref::logits(*model, toks);
        REQUIRE(got.size() == want.size());
        const float worst = max_diff(got.data(), want.data(), want.size());
        MESSAGE(std::string(tc.name), ": reference vs PyTorch, max |logit difference| over 32 positions ", worst);
        CHECK(worst < 1e-4f);

        // greedy from BOS, token by token through the reference's own KV cache
        ref::Llama llama(*model);
        std::vector<int> out;
        int tok = 1;
        for (int pos = 0; pos < 64; ++pos) {
            const std::vector<double> l = llama.forward(tok, pos);
            tok = (int) (std::max_element(l.begin(), l.end()) - l.begin());
            out.push_back(tok);
        }
        CHECK(out == read_ids(fixture_path(std::string(tc.name) + ".greedy.txt")));
    }
}

TEST_CASE("greedy tokens and logits match the reference") {
    for (const Case & tc : CASES) {
        std::string e;
        auto model = kvg::load_model(model_path(tc.model), "", kvg::LoadOptions(), &e);
        REQUIRE(model);
        for (kvg_attn_impl attn : {KVG_ATTN_FLASH, KVG_ATTN_MATMUL}) {
            CAPTURE(tc.name);
            CAPTURE((int) attn);
            kvg_model * m = load(model_path(tc.model), tc.tokenizer);
            kvg_context * c = new_ctx(m, 1, KVG_KV_F32, attn);
            std::vector<float> path_logits;
            const std::vector<int> out = greedy(c, 512, {1}, 64, &path_logits);
            CHECK(out == read_ids(fixture_path(std::string(tc.name) + ".greedy.txt")));
            // the logits of all 64 steps against reference-llama.h (the fixture has 32)
            std::vector<int> path = {1};
            path.insert(path.end(), out.begin(), out.end() - 1);
            const std::vector<float> want = ref::logits(*model, path);
            REQUIRE(want.size() == path_logits.size());
            const float worst = max_diff(path_logits.data(), want.data(), want.size());
            const std::string what = std::string(tc.name) + (attn == KVG_ATTN_FLASH ? " flash" : " matmul");
            MESSAGE(what, ": max |logit - reference| over 64 greedy steps ", worst);
            CHECK(worst < 1e-4f);
            const LogitsFixture fx = logits_fixture(tc.name);
            CHECK(logits_error(c, fx.tokens, fx.logits, 512) < 1e-4f);
            kvg_context_free(c);
            kvg_model_free(m);
        }
    }
}

// The runtime plans a graph once per thread count and CPU path; changing either between
// tokens of one context must plan again and keep the tokens and logits.
TEST_CASE("decoding through thread-count and CPU-path changes keeps the reference") {
    const Case & tc = CASES[1]; // stories260K: GQA, the fixture's 64 greedy tokens
    std::string e;
    auto model = kvg::load_model(model_path(tc.model), "", kvg::LoadOptions(), &e);
    REQUIRE(model);
    kvg_model * m = load(model_path(tc.model));
    kvg_context * c = new_ctx(m, 1);
    const int nv = kvg_model_n_vocab(m);
    std::vector<int> out;
    std::vector<float> got;
    int tok = 1;
    char err[512] = "";
    for (int pos = 0; pos < 64; ++pos) {
        if (pos == 16) kvg_set_n_threads(c, 2);
        if (pos == 32) ggml_cpu_set_features_limit(GGML_CPU_FEATURES_SCALAR);
        if (pos == 40) ggml_cpu_set_features_limit(GGML_CPU_FEATURES_AVX2);
        if (pos == 48) {
            ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
            kvg_set_n_threads(c, 1);
        }
        const float * l = kvg_decode(c, &tok, 1, pos, err, sizeof err);
        INFO(err);
        REQUIRE(l);
        got.insert(got.end(), l, l + nv);
        tok = kvg_argmax(l, nv);
        out.push_back(tok);
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    CHECK(out == read_ids(fixture_path(std::string(tc.name) + ".greedy.txt")));
    std::vector<int> path = {1};
    path.insert(path.end(), out.begin(), out.end() - 1);
    const std::vector<float> want = ref::logits(*model, path);
    REQUIRE(want.size() == got.size());
    CHECK(max_diff(got.data(), want.data(), want.size()) < 1e-4f);
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("a batched prompt gives the logits of token-by-token decoding") {
    for (const Case & tc : CASES) {
        CAPTURE(tc.name);
        kvg_model * m = load(model_path(tc.model), tc.tokenizer);
        const LogitsFixture fx = logits_fixture(tc.name);
        const std::vector<int> & toks = fx.tokens;
        const std::vector<float> & ref = fx.logits;
        for (int n_batch : {32, 7}) { // one graph, or chunks of 7 with a short last one
            CAPTURE(n_batch);
            kvg_context * c = new_ctx(m, 2, KVG_KV_F32, KVG_ATTN_FLASH, true, n_batch);
            char err[512] = "";
            const float * last = kvg_decode(c, toks.data(), 32, 0, err, sizeof err);
            INFO(err);
            REQUIRE(last != nullptr);
            CHECK(last == kvg_get_logits(c, 31));
            float worst = 0.0f;
            for (int i = 0; i < 32; ++i) {
                const float * l = kvg_get_logits(c, i);
                REQUIRE(l != nullptr);
                for (int j = 0; j < 512; ++j) worst = std::max(worst, std::fabs(l[j] - ref[i * 512 + j]));
            }
            CHECK(worst < 1e-4f);
            CHECK(kvg_get_logits(c, 32) == nullptr);
            kvg_context_free(c);
        }
        kvg_model_free(m);
    }
}

TEST_CASE("same tokens with 1 and 2 threads, batched or token-by-token prompt, both attention paths") {
    for (const Case & tc : CASES) {
        CAPTURE(tc.name);
        kvg_model * m = load(model_path(tc.model), tc.tokenizer);
        const std::vector<int> expected = read_ids(fixture_path(std::string(tc.name) + ".greedy.txt"));
        // prompt: BOS + the first 20 reference tokens; then 40 greedy tokens
        std::vector<int> prompt = {1};
        prompt.insert(prompt.end(), expected.begin(), expected.begin() + 20);
        std::vector<std::vector<int>> runs;
        for (int threads : {1, 2}) {
            for (bool batched : {true, false}) {
                for (kvg_attn_impl attn : {KVG_ATTN_FLASH, KVG_ATTN_MATMUL}) {
                    kvg_context * c = new_ctx(m, threads, KVG_KV_F32, attn);
                    char err[512] = "";
                    const float * l = nullptr;
                    if (batched) {
                        l = kvg_decode(c, prompt.data(), (int32_t) prompt.size(), 0, err, sizeof err);
                    } else {
                        for (size_t i = 0; i < prompt.size(); ++i) l = kvg_decode(c, &prompt[i], 1, (int32_t) i, err, sizeof err);
                    }
                    REQUIRE(l != nullptr);
                    std::vector<int> out;
                    for (int i = 0; i < 40; ++i) {
                        kvg_token t = kvg_argmax(l, 512);
                        out.push_back(t);
                        l = kvg_decode(c, &t, 1, (int32_t) (prompt.size() + i), err, sizeof err);
                        REQUIRE(l != nullptr);
                    }
                    runs.push_back(out);
                    kvg_context_free(c);
                }
            }
        }
        const std::vector<int> ref(expected.begin() + 20, expected.begin() + 60);
        for (const auto & r : runs) CHECK(r == ref);
        kvg_model_free(m);
    }
}

TEST_CASE("f16 KV cache keeps the first 32 greedy tokens") {
    for (const Case & tc : CASES) {
        CAPTURE(tc.name);
        kvg_model * m = load(model_path(tc.model), tc.tokenizer);
        kvg_context * c = new_ctx(m, 1, KVG_KV_F16);
        CHECK(kvg_kv_cache_bytes(c) == 2u * kvg_model_n_layer(m) * kvg_model_n_ctx_train(m) * 64 /
                                           (kvg_model_n_head(m) / kvg_model_n_head_kv(m)) * 2);
        const std::vector<int> out = greedy(c, m, 64);
        const std::vector<int> expected = read_ids(fixture_path(std::string(tc.name) + ".greedy.txt"));
        CHECK(std::vector<int>(out.begin(), out.begin() + 32) == std::vector<int>(expected.begin(), expected.begin() + 32));
        kvg_context_free(c);
        kvg_model_free(m);
    }
}

TEST_CASE("converted to GGUF f32: same tokens and logits; mapped, not copied") {
    for (const Case & tc : CASES) {
        CAPTURE(tc.name);
        kvg_model * m = load(model_path(tc.model), tc.tokenizer);
        const std::string out = temp_path(std::string(tc.name) + ".gguf");
        char err[1024] = "";
        REQUIRE(kvg_model_save_gguf(m, out.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
        kvg_model_free(m);

        m = load(out);
        CHECK(kvg_model_has_vocab(m)); // the real tokenizer, or the placeholder one
        CHECK(kvg_model_bos(m) == 1);
        kvg_context * c = new_ctx(m);
        CHECK(greedy(c, m, 64) == read_ids(fixture_path(std::string(tc.name) + ".greedy.txt")));
        const LogitsFixture fx = logits_fixture(tc.name);
        CHECK(logits_error(c, fx.tokens, fx.logits, 512) < 1e-4f);
        kvg_context_free(c);
        kvg_model_free(m);

        // the internal loader shows where the weights live
        std::string e;
        auto model = kvg::load_model(out, "", kvg::LoadOptions(), &e);
        REQUIRE(model);
        CHECK(model->format == "gguf");
        CHECK(model->owned.empty()); // every weight points into the mapping
        CHECK(model->output == model->tok_embd); // llama2.c shared classifier -> tied output
        CHECK(model->tok_embd->type == GGML_TYPE_F32);
        std::remove(out.c_str());
    }
}

TEST_CASE("f16_as_bf16: f16 matrices rounded to bf16 at load (nearest even), embeddings kept; only on the BF16 path") {
    kvg_model * m = load(model_path("stories260K.bin"));
    const std::string out = temp_path("f16.gguf");
    char err[1024] = "";
    REQUIRE(kvg_model_save_gguf(m, out.c_str(), KVG_FTYPE_F16, true, err, sizeof err));
    kvg_model_free(m);
    std::string e;
    auto exact = kvg::load_model(out, "", kvg::LoadOptions(), &e);
    REQUIRE(exact);
    // nearest even to 8 significant bits, by scaling (f16 values are normal bf16 numbers)
    auto to_bf16 = [](double v) {
        if (v == 0.0) return v;
        int ex;
        std::frexp(v, &ex);
        const double ulp = std::ldexp(1.0, ex - 8);
        return std::nearbyint(v / ulp) * ulp;
    };
    for (ggml_cpu_features limit : {GGML_CPU_FEATURES_BEST, GGML_CPU_FEATURES_AVX512_VNNI}) {
        ggml_cpu_set_features_limit(limit);
        const bool rounds = kvg::rounds_f16_to_bf16();
        CAPTURE(rounds);
        kvg::LoadOptions opt;
        opt.f16_as_bf16 = true; // with use_mmap: the file is read into memory to be written
        auto r = kvg::load_model(out, "", opt, &e);
        REQUIRE(r);
        const auto a = exact->tensors(), b = r->tensors();
        REQUIRE(a.size() == b.size());
        int n_bad = 0, n_rounded = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            CAPTURE(a[i]->name);
            const bool embd = a[i] == exact->tok_embd; // also the tied output: read by get_rows
            if (a[i]->type != GGML_TYPE_F16 || embd || !rounds) {
                CHECK(b[i]->type == a[i]->type);
                CHECK(std::memcmp(a[i]->data, b[i]->data, ggml_nbytes(a[i])) == 0);
                continue;
            }
            REQUIRE(b[i]->type == GGML_TYPE_BF16);
            ++n_rounded;
            const ggml_fp16_t * x = (const ggml_fp16_t *) a[i]->data;
            const ggml_bf16_t * y = (const ggml_bf16_t *) b[i]->data;
            for (int64_t j = 0; j < ggml_nelements(a[i]); ++j) {
                n_bad += (double) ggml_bf16_to_fp32(y[j]) != to_bf16(ggml_fp16_to_fp32(x[j]));
            }
        }
        CHECK(n_bad == 0);
        CHECK(n_rounded == (rounds ? 7 * exact->hp.n_layer : 0));
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);

    // the rounded model through the C API against the PyTorch logits: bf16's 8 significant bits
    // cost more than f16's 11 (the f16 file: < 0.2 above; rounded: 0.45 measured)
    const LogitsFixture fx = logits_fixture("stories260K");
    kvg_model_params mp = kvg_model_default_params();
    mp.f16_as_bf16 = true;
    kvg_model * g = kvg_model_load(out.c_str(), nullptr, mp, err, sizeof err);
    REQUIRE_MESSAGE(g, err);
    CHECK((std::string(kvg_model_desc(g)).find("bf16") != std::string::npos) == kvg::rounds_f16_to_bf16());
    kvg_context * c = new_ctx(g);
    const float worst = logits_error(c, fx.tokens, fx.logits, 512);
    MESSAGE("f16 rounded to bf16: max logit error ", worst);
    CHECK(worst < 0.6f);
    kvg_context_free(c);
    kvg_model_free(g);
    std::remove(out.c_str());
}

TEST_CASE("the tokenizer survives the GGUF round trip") {
    kvg_model * m = load(model_path("aidreams260K.bin"), "tok512.bin");
    const std::string out = temp_path("tok.gguf");
    char err[1024] = "";
    REQUIRE(kvg_model_save_gguf(m, out.c_str(), KVG_FTYPE_F16, false, err, sizeof err));
    kvg_model * g = load(out);
    const char * text = "Echoes of vectors unfold, a gentle hum";
    kvg_token a[64], b[64];
    const int na = kvg_tokenize(m, text, true, a, 64), nb = kvg_tokenize(g, text, true, b, 64);
    REQUIRE(na > 2);
    REQUIRE(na == nb);
    CHECK(std::vector<int>(a, a + na) == std::vector<int>(b, b + nb));
    char buf[256];
    REQUIRE(kvg_detokenize(g, b, nb, buf, sizeof buf) > 0);
    CHECK(std::string(buf) == text);
    CHECK(kvg_detokenize(g, b, nb, buf, 4) < 0); // too small: -(length)
    kvg_model_free(g);
    kvg_model_free(m);
    std::remove(out.c_str());
}

// Largest |x| of a block of n floats.
static float amax(const float * x, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

TEST_CASE("quantized GGUF conversions: weights within the format's rounding, model still works") {
    std::string e;
    auto orig = kvg::load_model(model_path("stories260K.bin"), "", kvg::LoadOptions(), &e);
    REQUIRE(orig);
    kvg_model * m = load(model_path("stories260K.bin"));
    const LogitsFixture fx = logits_fixture("stories260K");
    const std::vector<int> & toks = fx.tokens;
    const std::vector<float> & ref = fx.logits;
    for (kvg_ftype ft : {KVG_FTYPE_F16, KVG_FTYPE_Q8_0, KVG_FTYPE_Q4_0}) {
        CAPTURE((int) ft);
        const ggml_type gt = ft == KVG_FTYPE_F16 ? GGML_TYPE_F16 : ft == KVG_FTYPE_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0;
        const std::string out = temp_path("q.gguf");
        char err[1024] = "";
        REQUIRE(kvg_model_save_gguf(m, out.c_str(), ft, true, err, sizeof err));
        auto conv = kvg::load_model(out, "", kvg::LoadOptions(), &e);
        REQUIRE(conv);
        CHECK_FALSE(conv->has_vocab); // no_vocab
        CHECK(conv->layers[0].wq->type == gt);
        CHECK(conv->tok_embd->type == gt);
        CHECK(conv->layers[0].attn_norm->type == GGML_TYPE_F32);
        // ffn_down rows have 172 elements, not a multiple of 32: never block-quantized
        CHECK(conv->layers[0].ffn_down->type == GGML_TYPE_F16);

        // every weight, dequantized, within the rounding bound of its block
        const auto a = orig->tensors(), b = conv->tensors();
        REQUIRE(a.size() == b.size());
        int n_bad = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            CAPTURE(a[i]->name);
            REQUIRE(std::string(a[i]->name) == b[i]->name);
            REQUIRE(ggml_nelements(a[i]) == ggml_nelements(b[i]));
            const int64_t n0 = a[i]->ne[0];
            std::vector<float> row(n0);
            for (int64_t r = 0; r < a[i]->ne[1]; ++r) {
                const float * x = (const float *) ((const char *) a[i]->data + r * a[i]->nb[1]);
                kvg::row_decoder(b[i]->type)((const char *) b[i]->data + r * b[i]->nb[1], row.data(), n0);
                const int blk = ggml_is_quantized(b[i]->type) ? 32 : 1;
                for (int64_t j0 = 0; j0 < n0; j0 += blk) {
                    const float m_abs = amax(x + j0, blk);
                    for (int j = 0; j < blk; ++j) {
                        float bound = 0.0f; // f32: exact
                        if (b[i]->type == GGML_TYPE_F16) bound = std::fabs(x[j0 + j]) / 2048.0f + 1e-7f;
                        if (b[i]->type == GGML_TYPE_Q8_0) bound = 0.6f * m_abs / 127.0f + 1e-7f; // half a step (+ f16 scale)
                        if (b[i]->type == GGML_TYPE_Q4_0) bound = 1.1f * m_abs / 8.0f + 1e-7f;   // one step at the clamped end
                        n_bad += std::fabs(row[j0 + j] - x[j0 + j]) > bound;
                    }
                }
            }
        }
        CHECK(n_bad == 0);

        // the converted model runs; f16 and q8_0 mostly keep the reference's top token
        kvg_model * g = load(out);
        kvg_context * c = new_ctx(g);
        float worst = 0.0f;
        int agree = 0;
        bool finite = true;
        for (int i = 0; i < 32; ++i) {
            const float * l = kvg_decode(c, &toks[i], 1, i, err, sizeof err);
            REQUIRE(l != nullptr);
            for (int j = 0; j < 512; ++j) {
                finite = finite && std::isfinite(l[j]);
                worst = std::max(worst, std::fabs(l[j] - ref[i * 512 + j]));
            }
            agree += kvg_argmax(l, 512) == kvg_argmax(&ref[i * 512], 512);
        }
        MESSAGE(std::string(ggml_type_name(gt)), ": max logit error ", worst, ", top-1 agreement ", agree, "/32");
        CHECK(finite);
        if (ft == KVG_FTYPE_F16) {
            CHECK(worst < 0.2f);
            CHECK(agree == 32);
        }
        if (ft == KVG_FTYPE_Q8_0) CHECK(agree >= 24);
        kvg_context_free(c);
        kvg_model_free(g);
        std::remove(out.c_str());
    }
    kvg_model_free(m);
}

TEST_CASE("graph: cache writes are ordered before the attention reads by RAW edges") {
    std::string e;
    auto model = kvg::load_model(model_path("stories260K.bin"), "", kvg::LoadOptions(), &e);
    REQUIRE(model);
    kvg::KvCache kv;
    REQUIRE(kv.init(model->hp, 64, GGML_TYPE_F32, &e));
    for (bool flash : {true, false}) {
        kvg::GraphShape shape;
        shape.n_tokens = 3;
        shape.n_kv = 32;
        shape.flash_attn = flash;
        auto g = kvg::build_llama_graph(*model, kv, shape, &e);
        REQUIRE(g);
        auto get = [&](const char * what, int il) {
            ggml_tensor * t = graph_tensor(g->gf, what, il, 0);
            REQUIRE(t != nullptr);
            return t;
        };
        CHECK(graph_tensor(g->gf, "k_write", 5, 0) == nullptr); // 5 layers
        for (int il = 0; il < 5; ++il) {
            CAPTURE(il);
            ggml_tensor * k_write = get("k_write", il), * v_write = get("v_write", il);
            ggml_tensor * k_read = get(flash ? "kv_read" : "k_read", il), * v_read = get(flash ? "kv_read" : "v_read", il);
            CHECK(k_write->op == GGML_OP_SET_ROWS);
            CHECK(k_write->view_src == kv.k_tensor(il));
            CHECK(v_write->view_src == kv.v_tensor(il));
            CHECK(has_dep(k_read, k_write, GGML_DEP_RAW));
            CHECK(has_dep(v_read, v_write, GGML_DEP_RAW));
            if (!flash) CHECK_FALSE(has_dep(k_read, v_write, GGML_DEP_RAW)); // K alone: no edge to the V write
            // the writes are in the graph only through those edges, before their readers
            CHECK(node_index(g->gf, k_write) >= 0);
            CHECK(node_index(g->gf, k_write) < node_index(g->gf, k_read));
            CHECK(node_index(g->gf, v_write) < node_index(g->gf, v_read));
        }
        CHECK(ggml_graph_validate(g->gf, nullptr, 0, nullptr) == 0);
        // intermediates share one planned buffer, smaller than giving each its own bytes
        const ggml_gallocr_stats st = ggml_gallocr_get_stats(g->galloc);
        CHECK(st.n_tensors > 0);
        CHECK(st.buffer_bytes < st.sum_tensor_bytes);
    }
}

// A context builds one graph per batch shape and plans its memory once: a prompt and 20
// single-token steps are two shapes (flash: attention over all n_ctx slots with valid
// lengths as inputs; matmul: slots rounded up to 256), so two builds and two plans; a
// rewind over the old rows builds and plans nothing more.
TEST_CASE("graphs are reused across steps; decode overwrites from pos") {
    const std::vector<int> expected = read_ids(fixture_path("stories260K.greedy.txt"));
    std::vector<int> prompt = {1};
    prompt.insert(prompt.end(), expected.begin(), expected.begin() + 8);
    const std::vector<int> want(expected.begin() + 8, expected.begin() + 29);
    for (kvg_attn_impl attn : {KVG_ATTN_FLASH, KVG_ATTN_MATMUL}) {
        CAPTURE((int) attn);
        kvg_model * m = load(model_path("stories260K.bin"));
        kvg_context * c = new_ctx(m, 1, KVG_KV_F32, attn);
        auto n_plans = [&] { // plans made by the allocators of the context's graphs
            int n = 0;
            for (const auto & cg : c->graphs) n += ggml_gallocr_get_stats(cg.g->galloc).n_plans;
            return n;
        };
        const int64_t built_before = kvg::llama_graphs_built();
        // the prompt (9 tokens), then 20 single-token steps
        CHECK(greedy(c, 512, prompt, 21, nullptr) == want);
        CHECK(kvg_n_past(c) == 29);
        MESSAGE(std::string(attn == KVG_ATTN_FLASH ? "flash" : "matmul"), ": prompt + 20 steps built ",
                kvg::llama_graphs_built() - built_before, " graphs, ", n_plans(), " plans");
        CHECK(kvg::llama_graphs_built() - built_before == 2);
        CHECK(c->graphs.size() == 2);
        for (const auto & cg : c->graphs) CHECK(ggml_gallocr_get_stats(cg.g->galloc).n_plans == 1);
        CHECK(n_plans() == 2);

        // rewind: decode again from position 0 over the old rows, same result, same graphs
        CHECK(greedy(c, m, 16) == std::vector<int>(expected.begin(), expected.begin() + 16));
        CHECK(kvg_n_past(c) == 16);
        CHECK(greedy(c, 512, prompt, 21, nullptr) == want);
        CHECK(kvg::llama_graphs_built() - built_before == 2);
        CHECK(c->graphs.size() == 2);
        CHECK(n_plans() == 2);
        kvg_context_free(c);
        kvg_model_free(m);
    }
}

// models/kjv-tiny.gguf (the project's own model, llama.cpp keys, tokenizer in the metadata)
// against models/kjv-tiny.expected.txt written by scripts/train_tiny.py from PyTorch.
// KVG_KJV_GGUF may point at another export with its .expected.txt beside it.
TEST_CASE("kjv-tiny.gguf reproduces its PyTorch reference") {
    std::string path = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    if (const char * e = std::getenv("KVG_KJV_GGUF")) path = e;
    const std::string expected = path.substr(0, path.size() - 5) + ".expected.txt";
    if (!std::filesystem::exists(path) || !std::filesystem::exists(expected)) {
        MESSAGE("skipped: no " << path << " with " << expected);
        return;
    }
    std::map<std::string, std::string> kv;
    std::ifstream f(expected);
    for (std::string line; std::getline(f, line);) {
        const size_t c = line.find(": ");
        if (!line.empty() && line[0] != '#' && c != std::string::npos) kv[line.substr(0, c)] = line.substr(c + 2);
    }
    auto ints = [&](const std::string & k) {
        std::vector<int> v;
        std::istringstream ss(kv[k]);
        for (int x; ss >> x;) v.push_back(x);
        return v;
    };
    auto floats = [&](const std::string & k) {
        std::vector<float> v;
        std::istringstream ss(kv[k]);
        for (float x; ss >> x;) v.push_back(x);
        return v;
    };
    const std::vector<int> prompt_ids = ints("prompt_ids"), greedy_ids = ints("greedy_ids"), top5 = ints("top5_ids");
    const std::vector<float> top5_logits = floats("top5_logits");
    REQUIRE(!greedy_ids.empty());
    REQUIRE(top5.size() == 5);

    kvg_model * m = load(path);
    REQUIRE(kvg_model_has_vocab(m));
    std::vector<kvg_token> toks(512);
    const int n = kvg_tokenize(m, kv["prompt"].c_str(), true, toks.data(), 512);
    CHECK(std::vector<int>(toks.begin(), toks.begin() + std::max(n, 0)) == prompt_ids);

    kvg_context * c = new_ctx(m, 2);
    char err[512] = "";
    const float * l = kvg_decode(c, prompt_ids.data(), (int32_t) prompt_ids.size(), 0, err, sizeof err);
    REQUIRE(l != nullptr);
    for (int i = 0; i < 5; ++i) CHECK(std::fabs(l[top5[i]] - top5_logits[i]) < 1e-3f);
    std::vector<int> out;
    for (size_t i = 0; i < greedy_ids.size(); ++i) {
        kvg_token t = kvg_argmax(l, kvg_model_n_vocab(m));
        out.push_back(t);
        l = kvg_decode(c, &t, 1, (int32_t) (prompt_ids.size() + i), err, sizeof err);
        REQUIRE(l != nullptr);
    }
    CHECK(out == greedy_ids);
    kvg_context_free(c);
    kvg_model_free(m);
}
