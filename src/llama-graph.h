// The decode graph of one batch shape: new tokens of one or more sequences attending over
// their KV-cache slots. Built once per shape and reused: token ids, positions, cache write
// rows, the attention mask and each sequence's valid length are input tensors filled
// before every run.
//
// Sequences (ONNX TensorScatter style): the tokens of a chunk are a flat list, each with
// its sequence id. Q/K/V projections, RoPE and the cache writes (set_rows at row
// seq * n_ctx + slot) run on the flat list; attention runs per sequence with sequences on
// dim 3 of q/k/v: query rows [n_q, n_head, n_seq] against cache slots [n_kv, n_head_kv,
// n_seq]. When the tokens are not already grouped as n_q per sequence in order, Q rows are
// gathered into that layout (padding rows for missing tokens) and the outputs scattered
// back with get_rows by index.
//
// A graph may hold several chunks run one after the other (n_chunks): chunk c + 1 writes
// cache slots that chunk c reads, and the dependency rules order those writes after the
// reads (WAR edges) while letting the rest of the two chunks overlap.
#pragma once

#include "ggml-alloc.h"
#include "ggml.h"
#include "ggml-cpu.h"
#include "kv-cache.h"
#include "model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvg {

struct GraphShape {
    int n_tokens = 1;     // tokens per chunk
    int n_seq = 1;        // sequences attention is split into (the cache's n_seq)
    int n_q = 1;          // query rows per sequence (n_tokens when n_seq == 1)
    bool gather = false;  // reorder tokens into [n_q rows of seq 0, of seq 1, ...] by index
    int n_outputs = 1;    // tokens per chunk whose logits are computed (0: none)
    int n_kv = 0;         // cache slots per sequence the attention covers
    bool kv_len = true;   // padding-free attention: stop at each sequence's valid length (flash only)
    bool flash_attn = true; // ggml_flash_attn_ext, or mul_mat + soft_max_ext + mul_mat
    int n_chunks = 1;     // chunks of this shape run one after the other in the graph

    bool operator==(const GraphShape & o) const {
        return n_tokens == o.n_tokens && n_seq == o.n_seq && n_q == o.n_q && gather == o.gather &&
               n_outputs == o.n_outputs && n_kv == o.n_kv && kv_len == o.kv_len && flash_attn == o.flash_attn &&
               n_chunks == o.n_chunks;
    }
};

// One chunk of a batch: token i is tokens[i] of sequence seq[i] at position pos[i].
struct Ubatch {
    std::vector<int32_t> tokens, pos, seq;
    std::vector<uint8_t> output; // compute the logits of token i
    int n() const { return (int) tokens.size(); }
};

// The shape of the graph that runs ub, after kv.apply() has seen ub's tokens (the valid
// lengths decide n_kv when attention reads a bucket of slots instead of all n_ctx).
GraphShape ubatch_shape(const Ubatch & ub, const KvCache & kv, bool flash_attn, bool kv_len);

// The graph's inputs, grouped by what fills them; each group fills its tensors from a chunk of
// tokens and the cache (llama.cpp's graph inputs that set themselves). Tensors a shape does not
// use are nullptr.
struct RowLayout {                       // query row of each token, filled by TokenInputs
    std::vector<int> seq_count;          // tokens of each sequence in the chunk
    std::vector<int> token_of_row;       // [n_q * n_seq]: token of each query row, -1 for padding
};
struct TokenInputs {
    ggml_tensor * tokens = nullptr;       // I32 [n_tokens]
    ggml_tensor * pos = nullptr;          // I32 [n_tokens]
    ggml_tensor * kv_idx = nullptr;       // I64 [n_tokens]: cache row of each token
    ggml_tensor * k_recent_idx = nullptr; // grouped K: I64 [n_tokens], k_recent row of each token
    ggml_tensor * q_idx = nullptr;        // I32 [n_q * n_seq]: token of each query row (gather)
    ggml_tensor * out_idx = nullptr;      // I32 [n_tokens]: query row of each token (gather)
    ggml_tensor * out_rows = nullptr;     // I32 [n_outputs]: tokens whose logits are computed
    void set(const GraphShape & shape, const Ubatch & ub, const KvCache & kv, RowLayout * layout) const;
};
struct GroupInputs {                        // grouped K only
    ggml_tensor * k_group_rows = nullptr;   // I64 [n_embd_kv * n_seq], KvKeyGroups::fill_group_rows
    ggml_tensor * k_recent_group = nullptr; // flash path: I32 [n_seq], the group k_recent holds
    ggml_tensor * k_recent_rows = nullptr;  // matmul path: I64 [32 * n_seq], rows of the dequantized
                                            // keys that take k_recent's rows
    void set(const GraphShape & shape, const KvCache & kv) const;
};
struct MaskInputs {
    ggml_tensor * mask = nullptr;   // F32 [n_kv, n_q, 1, n_seq]: 0 = may attend, -inf = not
    ggml_tensor * kv_len = nullptr; // I32 [n_seq]: valid slots per sequence (padding-free)
    ggml_tensor * mask_swa = nullptr; // as mask, for sliding-window layers: only the last n_swa positions
    int n_swa = 0;
    void set(const GraphShape & shape, const Ubatch & ub, const KvCache & kv, const RowLayout & layout) const;

private:
    static void fill(ggml_tensor * m, int window, const GraphShape & shape, const Ubatch & ub, const KvCache & kv,
                     const RowLayout & layout);
};

struct LlamaGraph {
    LlamaGraph() = default;
    ~LlamaGraph();
    LlamaGraph(const LlamaGraph &) = delete;
    LlamaGraph & operator=(const LlamaGraph &) = delete;

    GraphShape shape;
    ggml_context * ctx = nullptr; // tensor structs and the graph (no_alloc)
    ggml_cgraph * gf = nullptr;
    // ggml_graph_plan's answer for gf at these threads and CPU path (the graph is not
    // changed after it is built); plan_path -1: not planned yet.
    ggml_cplan plan = {};
    int plan_threads = 0;
    int plan_path = -1;

    struct Chunk {
        TokenInputs tok;
        GroupInputs grp;
        MaskInputs att;
        ggml_tensor * logits = nullptr; // output: F32 [n_vocab, n_outputs] (nullptr if n_outputs == 0)
    };
    std::vector<Chunk> chunks;
    ggml_tensor * logits = nullptr; // the last chunk's

    // Tensors are named "<what>_l<layer>_c<chunk>" for inspection (ggml_graph_get_tensor):
    // k_write / v_write (the cache writes), kv_read (flash attention: the op reading both) or
    // k_read / v_read (matmul path: the first ops reading each), q, k (after RoPE), att, x.

    // Fills chunk c's inputs for ub; kv.apply() must have seen ub's tokens (and those of
    // the chunks before c), not those of later chunks.
    void set_inputs(int c, const Ubatch & ub, const KvCache & kv);

  private:
    RowLayout layout; // of the chunk being filled, reused from run to run

  public:

    ggml_gallocr_t galloc = nullptr; // owns the memory of the intermediate tensors
};

// nullptr + message if the shape does not fit the cache or the arena cannot be allocated.
// Every successful build is counted: llama_graphs_built() (the process's total) lets tests
// see that a context builds one graph per shape, not one per step.
int64_t llama_graphs_built();
std::unique_ptr<LlamaGraph> build_llama_graph(const Model & model, const KvCache & kv, const GraphShape & shape,
                                              std::string * err);

// A graph that only writes n_rows new rows per layer into the cache (K and V), at row
// indices that are an input: measures the KV write cost alone, fills caches (benchmarks).
// Grouped K: n_rows is at most one group (32), and the rows must stay in one group.
struct KvWriteGraph {
    ~KvWriteGraph();
    // the next run writes positions [first, first + n_rows) of sequence 0
    void set_positions(KvCache & kv, int64_t first);
    int64_t n_rows() const { return inp_idx->ne[0]; }
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf = nullptr;
    ggml_tensor * inp_rows = nullptr;       // F32 [n_embd_kv, n_rows]
    ggml_tensor * inp_idx = nullptr;        // I64 [n_rows]
    ggml_tensor * inp_recent_idx = nullptr; // grouped K: I64 [n_rows]
    ggml_tensor * inp_group_rows = nullptr; // grouped K: I64 [n_embd_kv * n_seq]
    ggml_gallocr_t galloc = nullptr;
};
std::unique_ptr<KvWriteGraph> build_kv_write_graph(const KvCache & kv, std::string * err, int n_rows = 1);

} // namespace kvg
