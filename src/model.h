// Llama-style model weights as ggml tensors, loaded from GGUF (llama.cpp's llama, qwen2, qwen3
// and phi3 architectures: keys and tensor names, see arch.h) or from llama2.c checkpoints, and
// written back as GGUF (llama only).
//
// Tensors are named and shaped as in llama.cpp's GGUF files (ne[0] = input features;
// n_embd_q = head_dim * n_head, n_embd_kv = head_dim * n_head_kv):
//   token_embd.weight [n_embd, n_vocab]      output_norm.weight [n_embd]
//   output.weight     [n_embd, n_vocab] (may be token_embd itself: tied)
//   blk.N.attn_norm [n_embd]  attn_q [n_embd, n_embd_q]  attn_k/attn_v [n_embd, n_embd_kv]
//     (phi3: attn_qkv [n_embd, n_embd_q + 2 n_embd_kv] instead)  qwen2: attn_q/k/v.bias
//     qwen3: attn_q_norm/attn_k_norm [head_dim]
//   attn_output [n_embd_q, n_embd]  ffn_norm [n_embd]  ffn_gate/ffn_up [n_embd, n_ff]  ffn_down [n_ff, n_embd]
//     (phi3: ffn_up [n_embd, 2 n_ff] holds the gate rows, then the up rows; no ffn_gate)
// Weight data points into a read-only mapping of the file when the layout allows (no copy).
#pragma once

#include "ggml.h"
#include "vocab.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvg {

struct HParams {
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_ff = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int n_rot = 0;     // rotated dimensions per head (== head_dim for llama)
    float rope_base = 10000.0f;
    // RoPE scaling (llama.rope.scaling.*): linear scaling divides every angle by the factor;
    // YaRN also blends scaled and unscaled angles per dimension over the ramp of the original
    // context, with a magnitude correction.
    bool rope_yarn = false;
    float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor
    float rope_attn_factor = 1.0f; // rope.scaling.attn_factor
    int n_ctx_orig = 0;            // rope.scaling.original_context_length (0: n_ctx_train)

    // ggml_rope_ext's arguments for the above
    int rope_ctx_orig() const { return n_ctx_orig > 0 ? n_ctx_orig : n_ctx_train; }
    float rope_ext_factor() const { return rope_yarn ? 1.0f : 0.0f; }
    float rope_magnitude() const; // attn_factor: ggml's rope multiplies YaRN's 1 + 0.1 ln(factor) in itself
    float rms_eps = 1e-5f;
    int no_rope_layer_step = 0; // layers il with (il + 1) % step == 0 skip rope (SmolLM3); 0: none
    bool layer_uses_rope(int il) const { return no_rope_layer_step == 0 || (il + 1) % no_rope_layer_step != 0; }
    int rope_mode = 0;   // ggml's: 0 rotates adjacent pairs (llama), GGML_ROPE_TYPE_NEOX pairs n_rot / 2 apart
    int n_embd_head = 0; // head size ({arch}.attention.key_length); 0: n_embd / n_head

    // Gemma 2/3 (arch.h's gemma): sliding-window attention on the layers swa_layers marks, where
    // a token at p sees the positions q with p - q < n_swa, rotated with their own rope base and
    // scale; soft-capping c * tanh(x / c) of the attention scores and of the logits (0: none).
    int n_swa = 0;
    std::vector<uint8_t> swa_layers; // [n_layer], empty: none
    float rope_base_swa = 10000.0f, rope_freq_scale_swa = 1.0f;
    float attn_softcap = 0.0f, final_softcap = 0.0f;
    float q_scale = 0.0f;    // query scale; 0: 1 / sqrt(head_dim)
    bool embd_scale = false; // token embeddings times sqrt(n_embd)
    bool ffn_gelu = false;   // GELU (tanh approximation) gates the feed-forward instead of SiLU
    bool layer_is_swa(int il) const { return n_swa > 0 && il < (int) swa_layers.size() && swa_layers[il]; }
    float layer_rope_base(int il) const { return layer_is_swa(il) ? rope_base_swa : rope_base; }
    float layer_rope_freq_scale(int il) const { return layer_is_swa(il) ? rope_freq_scale_swa : rope_freq_scale; }
    float attn_scale() const { return q_scale > 0.0f ? q_scale : 1.0f / std::sqrt((float) head_dim()); }

    int head_dim() const { return n_embd_head > 0 ? n_embd_head : n_embd / n_head; }
    int n_embd_q() const { return head_dim() * n_head; }
    int n_embd_kv() const { return head_dim() * n_head_kv; }
};

// The optional tensors are nullptr when the architecture has none; the graph follows what is bound.
struct LayerWeights {
    ggml_tensor * attn_norm = nullptr;
    ggml_tensor * wq = nullptr;
    ggml_tensor * wk = nullptr;
    ggml_tensor * wv = nullptr;
    ggml_tensor * wqkv = nullptr; // fused [q; k; v] rows (then wq, wk, wv are nullptr)
    ggml_tensor * bq = nullptr;   // biases of q, k, v
    ggml_tensor * bk = nullptr;
    ggml_tensor * bv = nullptr;
    ggml_tensor * q_norm = nullptr; // per-head RMS norm weights [head_dim] of q and k, before rope
    ggml_tensor * k_norm = nullptr;
    ggml_tensor * wo = nullptr;
    ggml_tensor * ffn_norm = nullptr;
    ggml_tensor * ffn_gate = nullptr; // w1; nullptr: ffn_up holds the gate rows first
    ggml_tensor * ffn_up = nullptr;   // w3
    ggml_tensor * ffn_down = nullptr; // w2
    ggml_tensor * attn_post_norm = nullptr; // Gemma: RMS norms of the attention and feed-forward outputs
    ggml_tensor * ffn_post_norm = nullptr;  // before their residual adds

    std::vector<ggml_tensor *> matrices() const; // the bound matrices, in file order
    std::vector<ggml_tensor *> all() const;      // every bound tensor, in file order
};

struct FileMapping; // read-only mmap of a file (model-impl.h)

struct Model {
    Model();
    ~Model();
    Model(const Model &) = delete;
    Model & operator=(const Model &) = delete;

    HParams hp;
    std::string format;   // "gguf" or "llama2.c"
    std::string arch = "llama"; // general.architecture
    std::string desc;     // one-line summary

    ggml_context * ctx = nullptr; // tensor structs (data points into the mapping or `owned`)
    ggml_tensor * tok_embd = nullptr;
    ggml_tensor * output_norm = nullptr;
    ggml_tensor * output = nullptr; // == tok_embd when tied
    // Llama 3's rope_freqs.weight, f32 [n_rot / 2] or nullptr: pair k's angle is divided by
    // rope_freqs[k] (ggml_rope_ext's frequency factors), in every layer and in a KV shift.
    ggml_tensor * rope_freqs = nullptr;
    // LongRoPE (Phi-3.5, Phi-4-mini): rope_factors_long/short.weight, f32 [n_rot / 2] or nullptr;
    // the long table serves contexts longer than the original training context.
    ggml_tensor * rope_long = nullptr;
    ggml_tensor * rope_short = nullptr;
    // The frequency factors a context of n_ctx_seq positions per sequence rotates with, in every
    // layer and in a KV shift: rope_freqs, else the long table when n_ctx_seq exceeds
    // hp.rope_ctx_orig(), else the short one (llama.cpp's rule, with n_ctx_seq rounded up to 256
    // as llama.cpp rounds its context).
    ggml_tensor * rope_factor_table(int n_ctx_seq) const;
    const float * rope_factors(int n_ctx_seq) const {
        const ggml_tensor * t = rope_factor_table(n_ctx_seq);
        return t ? (const float *) t->data : nullptr;
    }
    std::vector<LayerWeights> layers;

    bool has_vocab = false;
    Vocab vocab;
    std::string chat_template; // tokenizer.chat_template (Jinja text), "" if the file has none
    int bos = 1, eos = 2; // ids used for generation even without a tokenizer

    std::unique_ptr<FileMapping> mapping;
    std::vector<std::unique_ptr<uint8_t[]>> owned; // weights that could not point into the mapping

    // Every distinct weight tensor, in file order (tied output counted once).
    std::vector<ggml_tensor *> tensors() const;
    size_t weight_bytes() const;
};

struct LoadOptions {
    bool use_mmap = true;
    bool check_tensors = false; // fail on NaN/inf weights or non-finite block scales (see check_tensor_data)
    bool vocab_only = false;    // GGUF: read the tokenizer only (any file, tensors or not)
    bool repack = true;         // q4_0/q8_0/q4_K/q6_K/iq4_nl matrices into the CPU's interleaved layouts (repack_weights)
    bool f16_as_bf16 = false;   // f16 matrices rounded to bf16 where the path has bf16 kernels (round_f16_weights)
};

// Either format, chosen by the file's first bytes ("GGUF" magic or not). tokenizer_path
// may be empty. All errors come back in *err (with the file offset where one applies).
std::unique_ptr<Model> load_model(const std::string & path, const std::string & tokenizer_path,
                                  const LoadOptions & opt, std::string * err);

std::unique_ptr<Model> load_gguf(const std::string & path, const LoadOptions & opt, std::string * err);
std::unique_ptr<Model> load_llama2c(const std::string & path, const std::string & tokenizer_path,
                                    const LoadOptions & opt, std::string * err);

// First non-finite value of the weights: f32/f16/bf16 elements, q8_0/q4_0 block scales.
// false + "tensor 'NAME' holds a non-finite value (nan) at element I" or "tensor 'NAME' (q8_0):
// block B (elements ...) has a non-finite scale (inf)".
bool check_tensor_data(const Model & model, std::string * err);

// Rearranges the q4_0, q8_0, q4_K, q6_K and iq4_nl matrices of the layers and the output (not a tied
// embedding, which ggml_get_rows reads) into their interleaved layouts where the CPU path has
// the kernels (ggml_kvg_repack); weights in a read-only mapping are left as they are.
// Returns how many it rearranged.
int repack_weights(Model & model);

// Whether round_f16_weights rounds on the CPU path in use (AVX-512 BF16: the bf16 kernels run
// at twice the f32 FMA rate an exact f16 product is bound to).
bool rounds_f16_to_bf16();
// Rounds the f16 matrices of the layers and the output (not a tied embedding) to bf16 in
// place (nearest even; 3 fewer mantissa bits, the f16 exponent range kept), as ik_llama.cpp's
// run-time repacking does, where rounds_f16_to_bf16(); weights in a read-only mapping are left
// as they are. Returns how many it rounded.
int round_f16_weights(Model & model);

// GGUF v3, llama architecture. Matrices are converted to `type` (f32, f16, q8_0, q4_0;
// q8_0/q4_0 need rows that are a multiple of 32, else f16 is written); norms stay f32.
// The vocabulary goes into tokenizer.ggml.*; without one, placeholder_vocab writes
// <unk>/<s>/</s>, the 256 byte tokens and filler pieces so that the file is complete.
bool save_gguf(const Model & model, const std::string & path, ggml_type type, bool placeholder_vocab,
               std::string * err);

} // namespace kvg
