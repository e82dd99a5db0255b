// Helpers for tests that drive the runtime's C API (include after doctest and kvgraph.h).
#pragma once

#include "test-common.h"

#include "cpu/simd.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

// The model file at path (and a shared tokenizer, if named) or the test stops with the
// loader's message.
inline kvg_model * load_model_file(const std::string & path, const char * tok = nullptr) {
    char err[1024] = "";
    kvg_model * m = kvg_model_load(path.c_str(), tok ? model_path(tok).c_str() : nullptr, kvg_model_default_params(),
                                   err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    return m;
}
// A shared model (and tokenizer, if named).
inline kvg_model * load_shared_model(const std::string & name, const char * tok = nullptr) {
    return load_model_file(model_path(name), tok);
}

// Context parameters for m: its training context length, this cache type, attention and threads.
inline kvg_context_params model_params(kvg_model * m, kvg_kv_type kv = KVG_KV_F32, kvg_attn_impl attn = KVG_ATTN_FLASH,
                                       int n_threads = 1) {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = kvg_model_n_ctx_train(m);
    p.kv_type = kv;
    p.attn = attn;
    p.n_threads = n_threads;
    return p;
}

inline kvg_context * new_ctx(kvg_model * m, const kvg_context_params & p) {
    char err[1024] = "";
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    INFO(err);
    REQUIRE(c != nullptr);
    return c;
}

// n token ids in 3..n_vocab-1 (not BOS/EOS/unk) from an LCG started at seed.
inline std::vector<int> random_tokens(int n, int n_vocab, uint32_t seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 3 + (int) ((seed >> 8) % (uint32_t) (n_vocab - 3));
    }
    return t;
}

// Whether logits of different batchings agree bit for bit: every f32 product then rounds alike
// whatever its number of activation rows. Not with OpenBLAS (sgemm for the large products),
// nor on the AVX-512 paths, whose F32 panel tiles (products of panel_min or more rows) sum each
// output in one chain in element order where the other tiles sum 16 lanes.
inline bool batchings_agree_bitwise() {
    return !ggml_cpu_has_blas() && kvg::cpu_active_kernels().mm[kvg::MM_F32].panel_rows == 0;
}

inline float max_diff(const float * a, const float * b, size_t n) {
    float w = 0.0f;
    for (size_t i = 0; i < n; ++i) w = std::max(w, std::fabs(a[i] - b[i]));
    return w;
}

// Prompt, then greedy tokens one by one; the logits of every step appended to *logits.
inline std::vector<int> greedy(kvg_context * c, int nv, const std::vector<int> & prompt, int n, std::vector<float> * logits) {
    char err[512] = "";
    const float * l = kvg_decode(c, prompt.data(), (int32_t) prompt.size(), 0, err, sizeof err);
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
        INFO(err);
        REQUIRE(l != nullptr);
        if (logits) logits->insert(logits->end(), l, l + nv);
        out.push_back(kvg_argmax(l, nv));
        if (i + 1 < n) l = kvg_decode(c, &out.back(), 1, (int32_t) (prompt.size() + i), err, sizeof err);
    }
    return out;
}

// What kvg_state_seq_get writes for sequence seq now.
inline std::vector<uint8_t> seq_state(kvg_context * c, int seq) {
    std::vector<uint8_t> s(kvg_state_seq_size(c, seq));
    char err[256] = "";
    REQUIRE(kvg_state_seq_get(c, seq, s.data(), s.size(), err, sizeof err) == s.size());
    return s;
}
