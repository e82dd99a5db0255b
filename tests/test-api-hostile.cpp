// The kvg_ C API under hostile calls: NULL for every pointer argument, negative and huge
// counts, saving over the file a model is mapped from, and running out of memory inside
// a call (a child process with a small address-space limit). Each call returns the error
// its header documents; none crashes or lets an exception out.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-common.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVG_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KVG_UNDER_SANITIZER 1
#endif
#endif

namespace {

kvg_model * load(const std::string & path, char * err, size_t err_size) {
    return kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, err_size);
}

std::string shipped_model() { return std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf"; }

kvg_context_params small_params() {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    return p;
}

// Greedy logits of a fixed prompt from a fresh context.
std::vector<float> prompt_logits(kvg_model * m) {
    char err[512] = "";
    kvg_context * c = kvg_context_new(m, small_params(), err, sizeof err);
    INFO(err);
    REQUIRE(c != nullptr);
    kvg_token toks[64];
    const int n = kvg_tokenize(m, "And God said, Let there be light", true, toks, 64);
    REQUIRE(n > 0);
    const float * l = kvg_decode(c, toks, n, 0, err, sizeof err);
    INFO(err);
    REQUIRE(l != nullptr);
    std::vector<float> out(l, l + kvg_model_n_vocab(m));
    kvg_context_free(c);
    return out;
}

} // namespace

TEST_CASE("every function accepts NULL and bad counts and returns its documented error") {
    char err[256];
    CHECK(kvg_model_load(nullptr, nullptr, kvg_model_default_params(), err, sizeof err) == nullptr);
    CHECK(kvg_model_load(nullptr, nullptr, kvg_model_default_params(), nullptr, 0) == nullptr);
    kvg_model_free(nullptr);
    CHECK_FALSE(kvg_model_save_gguf(nullptr, "x.gguf", KVG_FTYPE_F32, false, err, sizeof err));
    CHECK(kvg_model_n_vocab(nullptr) == 0);
    CHECK(kvg_model_n_ctx_train(nullptr) == 0);
    CHECK(kvg_model_n_embd(nullptr) == 0);
    CHECK(kvg_model_n_layer(nullptr) == 0);
    CHECK(kvg_model_n_head(nullptr) == 0);
    CHECK(kvg_model_n_head_kv(nullptr) == 0);
    CHECK(kvg_model_bos(nullptr) == -1);
    CHECK(kvg_model_eos(nullptr) == -1);
    CHECK_FALSE(kvg_model_has_vocab(nullptr));
    CHECK(kvg_model_weight_bytes(nullptr) == 0);
    CHECK(std::string(kvg_model_desc(nullptr)).empty());
    kvg_token t[4];
    char buf[64];
    CHECK(kvg_tokenize(nullptr, "a", true, t, 4) == INT32_MIN);
    CHECK(kvg_token_to_piece(nullptr, -1, 5, buf, 64) == INT32_MIN);
    CHECK(kvg_detokenize(nullptr, t, 1, buf, 64) == INT32_MIN);
    CHECK(kvg_context_new(nullptr, kvg_context_default_params(), err, sizeof err) == nullptr);
    kvg_context_free(nullptr);
    CHECK(kvg_n_ctx(nullptr) == 0);
    CHECK(kvg_kv_cache_bytes(nullptr) == 0);
    kvg_set_n_threads(nullptr, 4);
    CHECK(kvg_decode(nullptr, t, 1, 0, err, sizeof err) == nullptr);
    CHECK_FALSE(kvg_decode_batch(nullptr, t, nullptr, nullptr, 1, err, sizeof err));
    CHECK(kvg_get_logits(nullptr, 0) == nullptr);
    CHECK(kvg_n_past(nullptr) == -1);
    CHECK(kvg_seq_n_past(nullptr, 0) == -1);
    CHECK(kvg_n_seq_max(nullptr) == 0);
    kvg_sampler * s = kvg_sampler_new(kvg_sampler_default_params());
    REQUIRE(s != nullptr);
    CHECK(kvg_sampler_sample(nullptr, nullptr, 10) == -1);
    CHECK(kvg_sampler_sample(s, nullptr, 10) == -1);
    const float logits[3] = {0.0f, 2.0f, 1.0f};
    CHECK(kvg_sampler_sample(s, logits, 0) == -1);
    CHECK(kvg_sampler_sample(s, logits, -3) == -1);
    kvg_sampler_free(s);
    kvg_sampler_free(nullptr);
    CHECK(kvg_argmax(nullptr, 3) == -1);
    CHECK(kvg_argmax(logits, -1) == -1);
    CHECK(kvg_argmax(logits, 3) == 1);

    kvg_model * m = load(shipped_model(), err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    CHECK(kvg_detokenize(m, nullptr, 5, buf, 64) == INT32_MIN);
    CHECK(kvg_detokenize(m, t, -1, buf, 64) == INT32_MIN);
    CHECK(kvg_detokenize(m, nullptr, 0, buf, 64) == 0);
    const int n = kvg_tokenize(m, "In the beginning", false, t, 4); // 4 is too few: -(count)
    CHECK(n < -4);
    CHECK(kvg_tokenize(m, "In the beginning", false, nullptr, 0) == n); // NULL tokens: the same
    CHECK(kvg_token_to_piece(m, -1, 100, nullptr, 0) < 0);             // NULL buffer: -(length)
    kvg_context * c = kvg_context_new(m, small_params(), err, sizeof err);
    REQUIRE(c != nullptr);
    kvg_set_n_threads(c, -5);
    kvg_set_n_threads(c, INT32_MAX);
    CHECK(kvg_decode(c, t, -1, 0, err, sizeof err) == nullptr);
    CHECK(kvg_decode(c, t, 1, INT32_MAX, err, sizeof err) == nullptr);
    CHECK(kvg_get_logits(c, INT32_MIN) == nullptr);
    CHECK(kvg_seq_n_past(c, INT32_MAX) == -1);
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("saving over the file the model is mapped from keeps both the model and the file") {
    const std::string path = temp_path("test-api-hostile", "resave.gguf");
    char err[512] = "";
    {
        kvg_model * src = load(shipped_model(), err, sizeof err);
        REQUIRE(src != nullptr);
        REQUIRE(kvg_model_save_gguf(src, path.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
        kvg_model_free(src);
    }
    kvg_model * m = load(path, err, sizeof err); // mmapped
    INFO(err);
    REQUIRE(m != nullptr);
    const std::vector<float> before = prompt_logits(m);
    // over itself, then over itself in f16 (other bytes, other size): the mapped model must not change
    CHECK(kvg_model_save_gguf(m, path.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
    CHECK(prompt_logits(m) == before);
    CHECK(kvg_model_save_gguf(m, path.c_str(), KVG_FTYPE_F16, false, err, sizeof err));
    CHECK(prompt_logits(m) == before);
    kvg_model * again = load(path, err, sizeof err);
    REQUIRE(again != nullptr);
    const std::vector<float> f16 = prompt_logits(again);
    float worst = 0;
    for (size_t i = 0; i < f16.size(); ++i) worst = std::max(worst, std::fabs(f16[i] - before[i]));
    CHECK(worst < 0.1f); // the f16 file holds the same model
    kvg_model_free(again);
    // a save that cannot be written leaves the old file and says so
    const std::string dir_path = temp_path("test-api-hostile", "no-such-dir") + "/x.gguf";
    CHECK_FALSE(kvg_model_save_gguf(m, dir_path.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
    CHECK(std::string(err).find("x.gguf") != std::string::npos);
    kvg_model_free(m);
    std::remove(path.c_str());
}

TEST_CASE("running out of memory inside a call returns an error instead of aborting") {
#ifdef KVG_UNDER_SANITIZER
    MESSAGE("skipped under a sanitizer: its shadow memory does not fit an address-space limit");
#else
    char err[512] = "";
    kvg_model * m = load(shipped_model(), err, sizeof err);
    REQUIRE(m != nullptr);
    fflush(stdout);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // a ring context with logits for every token of a 200,000-token call needs ~800 MB
        rlimit lim;
        getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = (rlim_t) 512 << 20;
        long pages = 0;
        if (FILE * f = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
            std::fclose(f);
        }
        lim.rlim_cur += (rlim_t) pages * (rlim_t) sysconf(_SC_PAGESIZE);
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
        kvg_context_params p = small_params();
        p.kv_mode = KVG_KV_RING;
        p.logits_all = true;
        kvg_context * c = kvg_context_new(m, p, err, sizeof err);
        if (!c) _exit(4);
        std::vector<kvg_token> toks(200000, 5);
        const float * l = kvg_decode(c, toks.data(), (int32_t) toks.size(), 0, err, sizeof err);
        _exit(l == nullptr && std::strstr(err, "out of memory") ? 0 : 5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0); // 5: no error returned; a signal: it aborted
    kvg_model_free(m);
#endif
}
