// Helpers shared by the fuzz targets (libFuzzer or replay-main.cpp).
#pragma once

#include "kvgraph.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// An invariant that must hold for every input: failing it is a finding, like a crash.
#define FUZZ_CHECK(cond, ...)                                                                   \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                                  \
            std::fprintf(stderr, "\n");                                                         \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

namespace fuzz {

// The loaders take a path: hand them the input as an in-memory file, reused across runs
// (the previous model must be freed before the next write).
class MemFile {
public:
    MemFile() {
        fd_ = memfd_create("kvg-fuzz", 0);
        if (fd_ < 0) {
            std::perror("memfd_create");
            std::abort();
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    ~MemFile() { close(fd_); }
    MemFile(const MemFile &) = delete;
    MemFile & operator=(const MemFile &) = delete;

    const std::string & write(const uint8_t * data, size_t size) {
        if (ftruncate(fd_, 0) != 0) std::abort();
        size_t done = 0;
        while (done < size) {
            const ssize_t n = pwrite(fd_, data + done, size - done, (off_t) done);
            if (n <= 0) std::abort();
            done += (size_t) n;
        }
        return path_;
    }

private:
    int fd_ = -1;
    std::string path_;
};

inline bool contains(const char * s, const char * what) { return std::strstr(s, what) != nullptr; }

// A model that loaded from fuzzed bytes must also run: create a short context, decode a few
// tokens, and check that the API's own limits (context length, token ids) are errors, not
// crashes. Weights may be NaN/inf: only the shape of the result is checked. Big models are
// skipped so that one run stays fast.
inline void exercise_model(kvg_model * model) {
    const int32_t n_vocab = kvg_model_n_vocab(model), n_ctx_train = kvg_model_n_ctx_train(model);
    FUZZ_CHECK(n_vocab > 0 && n_ctx_train > 0, "n_vocab %d, n_ctx_train %d", n_vocab, n_ctx_train);
    FUZZ_CHECK(kvg_model_desc(model) && *kvg_model_desc(model), "empty description");
    const size_t weights = kvg_model_weight_bytes(model);
    const int64_t kv_bytes = (int64_t) kvg_model_n_layer(model) * kvg_model_n_embd(model) * 2 * 4 * 4;
    if (weights > (1u << 20) || kv_bytes > (1 << 22) || kvg_model_n_layer(model) > 8 || n_vocab > 4096) return;

    char err[512];
    kvg_context_params cp = kvg_context_default_params();
    cp.n_threads = 1;
    cp.n_ctx = -1; // (0 means the model's context length)
    FUZZ_CHECK(!kvg_context_new(model, cp, err, sizeof err) && err[0], "n_ctx -1 accepted");
    if (n_ctx_train < INT32_MAX) {
        cp.n_ctx = n_ctx_train + 1;
        FUZZ_CHECK(!kvg_context_new(model, cp, err, sizeof err) && err[0], "n_ctx beyond the model accepted");
    }
    cp.n_ctx = std::min(n_ctx_train, 4);
    cp.n_batch = 2;
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    FUZZ_CHECK(ctx, "context: %s", err);

    const kvg_token bad = n_vocab;
    FUZZ_CHECK(!kvg_decode(ctx, &bad, 1, 0, err, sizeof err) && err[0], "token id n_vocab accepted");
    std::vector<kvg_token> toks;
    for (int i = 0; i < cp.n_ctx; ++i) toks.push_back((kvg_token) ((i * 7 + 1) % n_vocab));
    const float * logits = kvg_decode(ctx, toks.data(), (int32_t) toks.size(), 0, err, sizeof err);
    FUZZ_CHECK(logits, "decode: %s", err);
    FUZZ_CHECK(kvg_n_past(ctx) == cp.n_ctx, "n_past %d after %d tokens", kvg_n_past(ctx), cp.n_ctx);
    const kvg_token t = kvg_argmax(logits, n_vocab);
    FUZZ_CHECK(t >= -1 && t < n_vocab, "argmax %d", t);
    // the context is full: one more position is an error
    FUZZ_CHECK(!kvg_decode(ctx, toks.data(), 1, cp.n_ctx, err, sizeof err) && err[0], "decode past n_ctx accepted");
    kvg_context_free(ctx);

    // ring cache: three times as many tokens as slots, one sink
    if (n_ctx_train >= 3) {
        kvg_context_params rp = kvg_context_default_params();
        rp.n_threads = 1;
        rp.n_ctx = std::min(n_ctx_train, 4);
        rp.kv_mode = KVG_KV_RING;
        rp.n_sink = 1;
        rp.n_window = rp.n_ctx; // too many with a sink
        FUZZ_CHECK(!kvg_context_new(model, rp, err, sizeof err) && err[0], "n_window + n_sink > n_ctx accepted");
        rp.n_window = rp.n_ctx - 2;
        kvg_context * ring = kvg_context_new(model, rp, err, sizeof err);
        FUZZ_CHECK(ring, "ring context: %s", err);
        std::vector<kvg_token> many(3 * rp.n_ctx);
        for (size_t i = 0; i < many.size(); ++i) many[i] = (kvg_token) ((i * 5 + 2) % n_vocab);
        FUZZ_CHECK(kvg_decode(ring, many.data(), (int32_t) many.size(), 0, err, sizeof err), "ring decode: %s", err);
        FUZZ_CHECK(kvg_n_past(ring) == (int32_t) many.size(), "ring n_past %d", kvg_n_past(ring));
        kvg_context_free(ring);
    }

    // two sequences in one batch, f16 cache (q8_0 when the rows allow it)
    {
        kvg_context_params bp = kvg_context_default_params();
        bp.n_threads = 2;
        bp.n_ctx = std::min(n_ctx_train, 4);
        bp.n_seq_max = 2;
        bp.kv_type = kvg_model_n_embd(model) / kvg_model_n_head(model) * kvg_model_n_head_kv(model) % 32 == 0
                         ? KVG_KV_Q8_0 : KVG_KV_F16;
        bp.attn = KVG_ATTN_MATMUL;
        kvg_context * b = kvg_context_new(model, bp, err, sizeof err);
        FUZZ_CHECK(b, "batch context: %s", err);
        const kvg_token toks2[3] = {1 % n_vocab, 2 % n_vocab, 3 % n_vocab};
        const int32_t pos[3] = {0, 0, std::min(1, bp.n_ctx - 1)}, seq[3] = {0, 1, 1};
        if (pos[2] == 1) {
            FUZZ_CHECK(kvg_decode_batch(b, toks2, pos, seq, 3, err, sizeof err), "batch decode: %s", err);
            FUZZ_CHECK(kvg_get_logits(b, 0) && kvg_get_logits(b, 2) && !kvg_get_logits(b, 1), "batch logits");
        }
        const int32_t bad_seq[3] = {0, 2, 1};
        FUZZ_CHECK(!kvg_decode_batch(b, toks2, pos, bad_seq, 3, err, sizeof err) && err[0], "sequence id 2 accepted");
        kvg_context_free(b);
    }

    if (kvg_model_has_vocab(model)) {
        kvg_token ids[64];
        const int32_t n = kvg_tokenize(model, "Hello world, \xE2\x96\x81 \xff!", true, ids, 64);
        for (int32_t i = 0; i < n; ++i) FUZZ_CHECK(ids[i] >= 0 && ids[i] < n_vocab, "token %d", ids[i]);
        char buf[256];
        for (kvg_token id = -2; id < std::min(n_vocab + 2, 300); ++id) {
            const int32_t len = kvg_token_to_piece(model, id - 1, id, buf, sizeof buf);
            FUZZ_CHECK(len > -(1 << 21), "piece length %d", len);
        }
    }
}

} // namespace fuzz
