// The decode graph of one batch shape: n_tokens new tokens attending over KV-cache rows
// [0, n_kv). Built once per shape and reused: token ids, positions, cache write indices
// and the attention mask are input tensors filled before every run.
#pragma once

#include "ggml-alloc.h"
#include "ggml.h"
#include "kv-cache.h"
#include "model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvg {

struct GraphShape {
    int n_tokens = 1;
    int n_kv = 0;            // cache rows the attention reads (a bucket >= last position + 1)
    bool logits_all = false; // logits of every token, or only of the last one
    bool flash_attn = true;  // ggml_flash_attn_ext, or mul_mat + soft_max_ext + mul_mat

    bool operator==(const GraphShape & o) const {
        return n_tokens == o.n_tokens && n_kv == o.n_kv && logits_all == o.logits_all && flash_attn == o.flash_attn;
    }
};

struct LlamaGraph {
    LlamaGraph() = default;
    ~LlamaGraph();
    LlamaGraph(const LlamaGraph &) = delete;
    LlamaGraph & operator=(const LlamaGraph &) = delete;

    GraphShape shape;
    ggml_context * ctx = nullptr; // tensor structs and the graph (no_alloc)
    ggml_cgraph * gf = nullptr;

    // inputs
    ggml_tensor * inp_tokens = nullptr; // I32 [n_tokens]
    ggml_tensor * inp_pos = nullptr;    // I32 [n_tokens]
    ggml_tensor * inp_kv_idx = nullptr; // I64 [n_tokens]: cache row of each token
    ggml_tensor * inp_mask = nullptr;   // F32 [n_kv, n_tokens]: 0 = may attend, -inf = not
    // output
    ggml_tensor * logits = nullptr;     // F32 [n_vocab, n_tokens or 1]

    // per layer, for inspection (tests check the edges between them)
    std::vector<ggml_tensor *> k_write, v_write; // set_rows into the cache
    std::vector<ggml_tensor *> k_read, v_read;   // first ops that read the cache views

    // Fills the inputs for tokens[0..n_tokens) at positions pos, pos+1, ...
    void set_inputs(const int32_t * tokens, int pos, const KvCache & kv);

    ggml_gallocr_t galloc = nullptr; // owns the memory of the intermediate tensors
};

// nullptr + message if the context arena cannot be allocated.
std::unique_ptr<LlamaGraph> build_llama_graph(const Model & model, const KvCache & kv, const GraphShape & shape,
                                              std::string * err);

// A graph that only writes one new row per layer into the cache (K and V), at a write
// index that is an input: measures the KV write cost alone (benchmarks).
struct KvWriteGraph {
    ~KvWriteGraph();
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf = nullptr;
    ggml_tensor * inp_rows = nullptr; // F32 [n_embd_kv, 1]
    ggml_tensor * inp_idx = nullptr;  // I64 [1]
    ggml_gallocr_t galloc = nullptr;
};
std::unique_ptr<KvWriteGraph> build_kv_write_graph(const KvCache & kv, std::string * err);

} // namespace kvg
