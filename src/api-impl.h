// What the files of the C API share (runtime.cpp, seq-api.cpp): the structs behind the
// opaque handles and the error conventions of kvgraph.h (message in err, kind in
// kvg_last_status, no exception crossing the API).
#pragma once

#include "kvgraph.h"

#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"
#include "status.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct kvg_model {
    std::unique_ptr<kvg::Model> m;
};

// Per-call working memory of decode, kept so that a call allocates only when a batch is
// larger than any before (and a thread-pool worker once, the first time it runs a kernel
// with per-thread storage). tests/test-decode-heap.cpp counts.
struct Scratch {
    std::vector<int32_t> pos, seq; // kvg_decode's positions and sequence ids
    std::vector<int64_t> next, chunk_first;
    std::vector<uint8_t> output, seen;
    std::vector<kvg::Ubatch> chunks;     // the first n_chunks are this call's
    std::vector<std::vector<int32_t>> index; // batch index of each chunk token
    kvg::KvCache::Batch batch;
};

struct kvg_context {
    const kvg::Model * model = nullptr;
    kvg_context_params params{};
    kvg::KvCache kv;

    struct cached_graph {
        std::unique_ptr<kvg::LlamaGraph> g;
        uint64_t last_use;
    };
    std::vector<cached_graph> graphs;
    uint64_t use_clock = 0;

    std::vector<uint8_t> work; // executor scratch, grown on demand
    std::vector<float> logits; // [outputs of the last decode call, n_vocab]
    std::vector<int> logit_row; // per token of the last call: its row in logits, -1 if none
    int n_batch_tokens = 0;     // tokens of the last successful call
    Scratch scratch;
};

namespace kvg {

// A call that reports errors starts: empty message, status OK.
void begin_call(char * err, size_t err_size);
// The call fails with msg; its kind is what the failing code noted, else `kind`.
void set_err(char * err, size_t err_size, const std::string & msg, kvg_status kind = KVG_STATUS_BAD_INPUT);
// Inside a catch handler: the message and kind of the exception being handled (fn names the
// API function). Each entry point that can allocate is a function-try block calling it.
void set_exception_err(char * err, size_t err_size, const char * fn);

} // namespace kvg
