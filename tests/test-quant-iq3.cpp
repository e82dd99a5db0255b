// kvgraph's iq3_xxs / iq3_s encoders against llama-quantize's on the same weights: every tensor
// of those types in llama.cpp's files of the tiny model (tests/fixtures/gguf-quant), decoded,
// against the f32 model's tensor, and that tensor encoded by ggml_quantize_chunk (no importance
// matrix) and decoded. kvgraph's RMS error must be no more than 1.05x llama-quantize's (whose
// iq3_xxs file was made with an importance matrix: it weighs columns, this test does not).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "gguf.h"
#include "test-common.h"

#include <cmath>
#include <string>
#include <vector>

namespace {

ggml_context * load(const std::string & path, gguf_context ** g) {
    ggml_context * data = nullptr;
    gguf_init_params gp = {false, &data};
    *g = gguf_init_from_file(path.c_str(), gp);
    REQUIRE(*g != nullptr);
    return data;
}

double rms(const float * a, const float * b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
    return std::sqrt(s / (double) n);
}

} // namespace

TEST_CASE("iq3 encoders: per tensor no farther from the f32 weights than llama-quantize's") {
    const std::string dir = std::string(KVG_SOURCE_DIR) + "/tests/fixtures/gguf-quant/";
    gguf_context * gf = nullptr;
    ggml_context * f32 = load(shared_dir() + "/gguf-quant/tiny256-f32.gguf", &gf);
    for (const char * file : {"tiny256-iq3_xxs.gguf", "tiny256-iq3_s.gguf"}) {
        gguf_context * gq = nullptr;
        ggml_context * q = load(dir + file, &gq);
        int n_checked = 0;
        for (int64_t i = 0; i < gguf_get_n_tensors(gq); ++i) {
            const ggml_tensor * tq = ggml_get_tensor(q, gguf_get_tensor_name(gq, i));
            if (tq->type != GGML_TYPE_IQ3_XXS && tq->type != GGML_TYPE_IQ3_S) continue;
            const ggml_tensor * tf = ggml_get_tensor(f32, tq->name);
            REQUIRE(tf != nullptr);
            REQUIRE(tf->type == GGML_TYPE_F32);
            const int64_t n = ggml_nelements(tq), row = tq->ne[0];
            std::vector<float> theirs(n), ours(n);
            std::vector<uint8_t> bytes(ggml_nbytes(tq));
            ggml_get_type_traits(tq->type)->to_float(tq->data, theirs.data(), n);
            ggml_quantize_chunk(tq->type, (const float *) tf->data, bytes.data(), 0, n / row, row, nullptr);
            ggml_get_type_traits(tq->type)->to_float(bytes.data(), ours.data(), n);
            const double e_ours = rms(ours.data(), (const float *) tf->data, n);
            const double e_theirs = rms(theirs.data(), (const float *) tf->data, n);
            const std::string what = std::string(file) + " " + tq->name + " (" + ggml_type_name(tq->type) + ")";
            MESSAGE(what, ": rms error ", e_ours, ", llama-quantize's ", e_theirs, ", ratio ", e_ours / e_theirs);
            CHECK(e_ours <= 1.05 * e_theirs);
            ++n_checked;
        }
        CHECK(n_checked >= 14);
        ggml_free(q);
        gguf_free(gq);
    }
    ggml_free(f32);
    gguf_free(gf);
}
