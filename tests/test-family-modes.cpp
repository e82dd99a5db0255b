// The runtime's modes on every model family of tests/test-family.cpp (its tiny models, written
// by tests/family-common.h; a placeholder vocabulary stands in where the real one is absent):
// two sequences decoded together in one kvg_decode_batch give the logits each gives alone, and
// a sequence saved to a file and restored into another context continues with the same logits.
// Each family's layer (biases, fused matrices, Q/K norms, NEOX rope, rope factors, LongRoPE,
// layers without rope) runs here on the batched and restored paths, which test-family's
// one-sequence decode does not reach.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "family-common.h"
#include "kvgraph.h"
#include "test-runtime-common.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace family_twin;

const char * const kFamilies[] = {"llama3", "llama3-norf", "llama3-yarn", "smollm3", "qwen2",  "qwen3",
                                  "phi3",   "phi3-long",   "phi3-short",  "mistral", "gemma2", "gemma3"};

kvg_context_params ctx_params(int n_seq) {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 256; // as llama-ref: phi3-long's long table, phi3-short's short one
    p.n_threads = 2;
    p.kv_type = KVG_KV_F32;
    p.n_seq_max = n_seq;
    return p;
}

// Equal bit for bit where every batching rounds alike, else within 1e-4 of the largest |logit|.
// Returns the largest difference.
float check_same(const std::vector<float> & got, const std::vector<float> & want, const char * what) {
    REQUIRE(got.size() == want.size());
    float top = 0.0f;
    for (float x : want) top = std::max(top, std::fabs(x));
    const float d = max_diff(got.data(), want.data(), want.size());
    INFO(what << ": largest difference " << d << " of " << top);
    if (batchings_agree_bitwise()) CHECK(d == 0.0f);
    else CHECK(d <= 1e-4f * top);
    return d;
}

// The logits of the last token of a, then of b, decoded as two sequences in one interleaved batch.
std::vector<float> together(kvg_model * m, const std::vector<int> & a, const std::vector<int> & b, int nv) {
    std::vector<int32_t> toks, pos, seq;
    int32_t last[2] = {-1, -1}; // each sequence's last token in the batch
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        for (int s = 0; s < 2; ++s) {
            const std::vector<int> & t = s == 0 ? a : b;
            if (i >= t.size()) continue;
            last[s] = (int32_t) toks.size();
            toks.push_back(t[i]), pos.push_back((int32_t) i), seq.push_back(s);
        }
    }
    kvg_context * c = new_ctx(m, ctx_params(2));
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_decode_batch(c, toks.data(), pos.data(), seq.data(), (int32_t) toks.size(), err, sizeof err),
                    err);
    std::vector<float> out;
    for (int s = 0; s < 2; ++s) {
        const float * l = kvg_get_logits(c, last[s]);
        REQUIRE(l != nullptr);
        out.insert(out.end(), l, l + nv);
    }
    kvg_context_free(c);
    return out;
}

std::vector<float> alone(kvg_model * m, const std::vector<int> & t, int nv) {
    kvg_context * c = new_ctx(m, ctx_params(1));
    char err[512] = "";
    const float * l = kvg_decode(c, t.data(), (int32_t) t.size(), 0, err, sizeof err);
    REQUIRE_MESSAGE(l != nullptr, err);
    std::vector<float> out(l, l + nv);
    kvg_context_free(c);
    return out;
}

// Decodes cont one token at a time after pos, the logits of every step.
std::vector<float> continue_from(kvg_context * c, int pos, const std::vector<int> & cont, int nv) {
    std::vector<float> out;
    char err[512] = "";
    for (size_t i = 0; i < cont.size(); ++i) {
        const float * l = kvg_decode(c, &cont[i], 1, pos + (int32_t) i, err, sizeof err);
        REQUIRE_MESSAGE(l != nullptr, err);
        out.insert(out.end(), l, l + nv);
    }
    return out;
}

void check_modes(const std::string & name) {
    const Ref ref = read_ref(name);
    const TempFile file{temp_path("family-modes", name + ".gguf")};
    write_model(family(name), file.path, (uint32_t) ref.n_vocab);
    kvg_model * m = load_model_file(file.path);
    const int nv = kvg_model_n_vocab(m);
    REQUIRE(ref.prompt_ids.size() >= 60);
    const std::vector<int> a(ref.prompt_ids.begin(), ref.prompt_ids.begin() + 37);
    const std::vector<int> b(ref.prompt_ids.begin() + 20, ref.prompt_ids.begin() + 45);
    const std::vector<int> cont(ref.prompt_ids.begin() + 45, ref.prompt_ids.begin() + 53);

    std::vector<float> both = together(m, a, b, nv), each = alone(m, a, nv);
    const std::vector<float> lb = alone(m, b, nv);
    each.insert(each.end(), lb.begin(), lb.end());
    const float d_batch = check_same(both, each, "two sequences in one batch against each alone");

    kvg_context * c = new_ctx(m, ctx_params(1));
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_decode(c, a.data(), (int32_t) a.size(), 0, err, sizeof err), err);
    const TempFile state{temp_path("family-modes", name + ".state")};
    REQUIRE_MESSAGE(kvg_state_seq_save_file(c, 0, state.path.c_str(), a.data(), (int32_t) a.size(), err, sizeof err),
                    err);
    const std::vector<float> want = continue_from(c, (int) a.size(), cont, nv);
    kvg_context_free(c);
    kvg_context * r = new_ctx(m, ctx_params(2)); // restored into sequence 1 of a larger context
    std::vector<kvg_token> toks(64);
    REQUIRE_MESSAGE(
        kvg_state_seq_load_file(r, 1, state.path.c_str(), toks.data(), 64, err, sizeof err) == (int32_t) a.size(), err);
    CHECK(std::vector<int>(toks.begin(), toks.begin() + (std::ptrdiff_t) a.size()) == a);
    std::vector<float> got;
    for (size_t i = 0; i < cont.size(); ++i) {
        const int32_t p = (int32_t) (a.size() + i), s = 1;
        REQUIRE_MESSAGE(kvg_decode_batch(r, &cont[i], &p, &s, 1, err, sizeof err), err);
        got.insert(got.end(), kvg_get_logits(r, -1), kvg_get_logits(r, -1) + nv);
    }
    kvg_context_free(r);
    const float d_state = check_same(got, want, "continued after a save and a load into another sequence");
    MESSAGE(name << ": batched against alone " << d_batch << ", restored against continued " << d_state
                 << std::string(batchings_agree_bitwise() ? " (bitwise expected)" : ""));
    kvg_model_free(m);
}

} // namespace

TEST_CASE("every family: batched sequences equal each alone; a saved and restored sequence continues alike") {
    for (const char * name : kFamilies) {
        CAPTURE(name);
        check_modes(name);
    }
}
