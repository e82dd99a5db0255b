// llama.cpp's own quantized GGUF files (../shared/gguf-quant: one tiny llama model written
// by llama-quantize in 11 types, mixed as that tool mixes them, with llama.cpp's logits for
// 48 tokens; tests/fixtures/gguf-quant: IQ4_XS, TQ2_0, TQ1_0, IQ3_XXS, IQ3_S and, with an importance matrix,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M, made the same way, see its
// README): each loads and decodes; its argmax equals llama.cpp's at >= 46 of 48 positions and
// wherever llama.cpp's top two logits are more than 1e-3 apart, and its logits
// are no farther from llama.cpp's f32 logits than 1.1x the distance of llama.cpp's own
// quantized logits to them. kvgraph's own IQ4_XS file of the f32 model is held to the same.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int N_TOKENS = 48, N_VOCAB = 512;

// the tree's fixtures first (types added after ../shared/gguf-quant was made), then the shared ones
std::string quant_path(const std::string & name) {
    const std::string own = std::string(KVG_SOURCE_DIR) + "/tests/fixtures/gguf-quant/" + name;
    return std::ifstream(own).good() ? own : shared_dir() + "/gguf-quant/" + name;
}

std::vector<float> read_logits(const std::string & type) {
    std::ifstream f(quant_path("tiny256-" + type + ".logits.f32"), std::ios::binary);
    REQUIRE(f);
    std::vector<float> v((size_t) N_TOKENS * N_VOCAB);
    f.read((char *) v.data(), (std::streamsize) (v.size() * sizeof(float)));
    REQUIRE(f);
    return v;
}

std::vector<int> read_tokens() {
    std::ifstream f(quant_path("tiny256.tokens.txt"));
    REQUIRE(f);
    std::vector<int> t;
    for (int x; f >> x;) t.push_back(x);
    REQUIRE(t.size() == N_TOKENS);
    return t;
}

// kvgraph's logits, one token at a time from position 0 or all tokens in one batch (products of
// 48 activation rows: the SIMD paths' batch kernels, VNNI panels among them), f16 KV cache (as
// llama.cpp's were made)
std::vector<float> logits_of_file(const std::string & path, const std::vector<int> & tokens, bool batch) {
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    REQUIRE(kvg_model_n_vocab(m) == N_VOCAB);
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    p.kv_type = KVG_KV_F16;
    p.logits_all = batch;
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    REQUIRE(c != nullptr);
    std::vector<float> out;
    if (batch) {
        INFO(err);
        REQUIRE(kvg_decode(c, tokens.data(), N_TOKENS, 0, err, sizeof err) != nullptr);
        for (int i = 0; i < N_TOKENS; ++i) {
            const float * l = kvg_get_logits(c, i);
            REQUIRE(l != nullptr);
            out.insert(out.end(), l, l + N_VOCAB);
        }
    }
    for (int i = 0; !batch && i < N_TOKENS; ++i) {
        const float * l = kvg_decode(c, &tokens[i], 1, i, err, sizeof err);
        INFO(err);
        REQUIRE(l != nullptr);
        out.insert(out.end(), l, l + N_VOCAB);
    }
    kvg_context_free(c);
    kvg_model_free(m);
    return out;
}

std::vector<float> our_logits(const std::string & type, const std::vector<int> & tokens, bool batch) {
    return logits_of_file(quant_path("tiny256-" + type + ".gguf"), tokens, batch);
}

double rms(const std::vector<float> & a, const std::vector<float> & b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (double) (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(s / (double) a.size());
}

int argmax_matches(const std::vector<float> & a, const std::vector<float> & b) {
    int n = 0;
    for (int t = 0; t < N_TOKENS; ++t) {
        const int ia = kvg_argmax(a.data() + (size_t) t * N_VOCAB, N_VOCAB), ib = kvg_argmax(b.data() + (size_t) t * N_VOCAB, N_VOCAB);
        n += ia == ib;
    }
    return n;
}

// positions where llama.cpp's (b's) top two logits are more than 1e-3 apart and a's argmax is not b's
int clear_argmax_misses(const std::vector<float> & a, const std::vector<float> & b) {
    int n = 0;
    for (int t = 0; t < N_TOKENS; ++t) {
        const float * rb = b.data() + (size_t) t * N_VOCAB;
        const int ib = kvg_argmax(rb, N_VOCAB);
        float second = -INFINITY;
        for (int v = 0; v < N_VOCAB; ++v)
            if (v != ib) second = std::max(second, rb[v]);
        n += rb[ib] - second > 1e-3f && kvg_argmax(a.data() + (size_t) t * N_VOCAB, N_VOCAB) != ib;
    }
    return n;
}

} // namespace

TEST_CASE("llama.cpp's quantized files: same argmax, no farther from the f32 model than llama.cpp") {
    const std::vector<int> tokens = read_tokens();
    const std::vector<float> ref_f32 = read_logits("f32");
    std::ostringstream table;
    table << "type      mode    argmax  rms(ours,f32)  rms(llama.cpp,f32)  ratio\n";
    for (const char * type :
         {"f32",  "q8_0",   "q4_0",   "q4_1",  "q5_0",  "q5_1",    "q2_k",   "q3_k_m", "q4_k_m", "q5_k_m",
          "q6_k", "iq4_nl", "iq4_xs", "tq2_0", "tq1_0", "iq3_xxs", "iq3_s", "iq2_m", "iq2_xxs", "iq2_xs", "iq2_s",  "iq1_s",  "iq1_m"})
        for (bool batch : {false, true}) {
            CAPTURE(type);
            CAPTURE(batch);
            const std::vector<float> ours = our_logits(type, tokens, batch), theirs = read_logits(type);
            const int same = argmax_matches(ours, theirs);
            const double d_ours = rms(ours, ref_f32), d_theirs = rms(theirs, ref_f32);
            char line[160];
            snprintf(line, sizeof line, "%-8s  %-6s  %2d/48  %13.4f  %18.4f  %5.2f\n", type, batch ? "batch" : "single",
                     same, d_ours, d_theirs, d_theirs > 0 ? d_ours / d_theirs : 0.0);
            table << line;
            CHECK(same >= 46);
            CHECK(clear_argmax_misses(ours, theirs) == 0);
            if (std::string(type) == "f32") CHECK(d_ours < 0.05);
            else CHECK(d_ours <= 1.1 * d_theirs);
        }
    MESSAGE(table.str());
}

// kvg_model_save_gguf's IQ4_XS, TQ1_0 and TQ2_0 files of the f32 model, without an importance
// matrix, as llama-quantize's files were made: the same type for every tensor as llama-quantize
// chose (its mixtures: output.weight in q6_K; for the ternary types token_embd.weight in q4_K),
// and logits as close to the f32 model's as those of llama-quantize's file.
TEST_CASE("kvgraph's IQ4_XS, TQ1_0 and TQ2_0 files of the f32 model: llama-quantize's types, as close to f32") {
    const std::vector<int> tokens = read_tokens();
    const std::vector<float> f32 = read_logits("f32");
    const std::pair<kvg_ftype, const char *> cases[] = {
        {KVG_FTYPE_IQ4_XS, "iq4_xs"}, {KVG_FTYPE_TQ1_0, "tq1_0"}, {KVG_FTYPE_TQ2_0, "tq2_0"}};
    for (const auto & c : cases) {
        const kvg_ftype ftype = c.first;
        const std::string name = c.second;
        CAPTURE(name);
        char err[512] = "";
        kvg_model * m = kvg_model_load(quant_path("tiny256-f32.gguf").c_str(), nullptr, kvg_model_default_params(), err,
                                       sizeof err);
        INFO(err);
        REQUIRE(m != nullptr);
        const std::string path = temp_path("gguf-quant", name + ".gguf");
        REQUIRE(kvg_model_save_gguf(m, path.c_str(), ftype, false, err, sizeof err));
        kvg_model_free(m);
        gguf_init_params gp = {true, nullptr};
        gguf_context * ours = gguf_init_from_file(path.c_str(), gp);
        gguf_context * theirs = gguf_init_from_file(quant_path("tiny256-" + name + ".gguf").c_str(), gp);
        REQUIRE(ours != nullptr);
        REQUIRE(theirs != nullptr);
        CHECK(gguf_get_n_tensors(ours) == gguf_get_n_tensors(theirs));
        for (int64_t i = 0; i < gguf_get_n_tensors(theirs); ++i) {
            const std::string tn = gguf_get_tensor_name(theirs, i);
            CAPTURE(tn);
            const int64_t j = gguf_find_tensor(ours, tn.c_str());
            REQUIRE(j >= 0);
            CHECK(ggml_type_name(gguf_get_tensor_type(ours, j)) ==
                  std::string(ggml_type_name(gguf_get_tensor_type(theirs, i))));
        }
        gguf_free(ours);
        gguf_free(theirs);
        const std::vector<float> mine = logits_of_file(path, tokens, false), peer = read_logits(name);
        const double d_ours = rms(mine, f32), d_theirs = rms(peer, f32);
        MESSAGE("kvgraph's ", name, " file: rms to f32 ", d_ours, ", llama-quantize's ", d_theirs,
                ", argmax equal to f32's at ", argmax_matches(mine, f32), "/48");
        CHECK(d_ours <= 1.1 * d_theirs);
        std::remove(path.c_str());
    }
}
