// Pieces shared by the programs that write llama.cpp's references for the family tests
// (llama-ref.cpp, llama-quant-ref.cpp; built outside the tree, see scripts/README-family.md).
#pragma once

#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

// The id sampler: the tests draw the same ids with the same function.
inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// 64-bit FNV-1a: the tests check that they wrote (or encoded) these very bytes.
inline uint64_t fnv1a(const char * p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char) p[i]) * 0x100000001B3ull;
    return h;
}
inline uint64_t fnv1a(const std::string & s) { return fnv1a(s.data(), s.size()); }

inline std::string slurp(const char * path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The reference file being written: little-endian values and length-prefixed strings.
struct Out {
    std::string buf;
    template <typename T> void put(T v) { buf.append((const char *) &v, sizeof v); } // little-endian hosts only
    void str(const std::string & s) {
        put((uint32_t) s.size());
        buf += s;
    }
};

// llama.cpp's log, errors only: the programs print nothing but their own lines.
inline void log_errors_only(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// A program's start: checks that it got n_args arguments (else prints its usage and returns
// false), then starts llama.cpp with only its errors logged.
inline bool start_llama(int argc, char ** argv, int n_args, const char * usage) {
    if (argc != n_args + 1) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return false;
    }
    llama_log_set(log_errors_only, nullptr);
    llama_backend_init();
    return true;
}

// The model, on the CPU (nullptr on failure).
inline llama_model * load_cpu_model(const char * path) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    return llama_model_load_from_file(path, mp);
}

// A context with the settings of every reference: 256 positions in one batch, 1 thread, no
// flash attention, an f16 cache (nullptr on failure).
inline llama_context * reference_context(llama_model * model) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F16;
    return llama_init_from_model(model, cp);
}
