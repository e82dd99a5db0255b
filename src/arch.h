// The GGUF architectures kvgraph runs, as one table: what each changes in the llama layer.
//
// Every family shares llama's layer (llama-graph.cpp: rms norm, attention over the KV cache,
// SwiGLU feed-forward). An architecture only says which tensors its files hold and how rope
// pairs values; the loader (model-gguf.cpp) binds the tensors the entry names and the graph
// follows what was bound: a bias is added, a Q/K norm applied, a fused matrix split by views
// where the weight exists. So the llama path builds exactly the graph it always did.
//
// A new family: add its row to kArchs (arch.cpp); a difference the flags cannot say (another
// activation, extra norms, soft-capping) gets a field here, a tensor in LayerWeights and a
// piece in layer() that runs only where its weight or field is set.
#pragma once

#include <string>

namespace kvg {

struct ArchDesc {
    const char * name;   // general.architecture, also the prefix of its keys ({name}.context_length)
    int rope_mode;       // ggml rope mode: 0 adjacent pairs, GGML_ROPE_TYPE_NEOX pairs n_rot / 2 apart
    bool qkv_bias;       // blk.N.attn_q/k/v.bias may be present (Qwen2)
    bool qk_norm;        // blk.N.attn_q_norm/attn_k_norm.weight [head_dim] before rope (Qwen3)
    bool fused_qkv;      // blk.N.attn_qkv.weight [n_embd, n_embd_q + 2 n_embd_kv] (Phi-3)
    bool fused_gate_up;  // blk.N.ffn_up.weight [n_embd, 2 n_ff]: gate rows, then up rows (Phi-3)
    bool rope_freqs;     // rope_freqs.weight may be present (Llama 3)
    bool head_size_keys; // attention.key_length sets the head size, decoupled from n_embd / n_head (Qwen3)
    int no_rope_layer_step; // every step-th layer (counting from 1) has no rope (SmolLM3: 4); 0: none
    bool longrope = false;  // rope_factors_long/short.weight may be present (Phi-3.5, Phi-4-mini)
    // Gemma's generation (2, 3; 0: not Gemma): token embeddings times sqrt(n_embd), GELU feed-forward,
    // blk.N.post_attention_norm/post_ffw_norm, the query scale and soft-capping keys, sliding-window
    // layers by llama.cpp's pattern (2: every other layer, 3: five of six) with their own rope base.
    int gemma = 0;
};

// The entry of general.architecture, nullptr when kvgraph does not run it.
const ArchDesc * find_arch(const std::string & name);
// "'llama', 'qwen2', ..." for messages.
std::string arch_names();

} // namespace kvg
