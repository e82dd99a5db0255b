// Loading GGUF files of the architectures in arch.h (llama.cpp's keys and tensor names): the
// hyperparameter keys under the architecture's prefix, the tensors (mapped in place, copied when
// misaligned, widened when no kernel reads their type) and the tokenizer (tokenizer.ggml.*:
// SentencePiece or byte-level BPE).
#include "arch.h"
#include "model-impl.h"
#include "model.h"
#include "status.h"

#include "ggml-cpu.h"
#include "gguf.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <unordered_set>

namespace kvg {

namespace {

struct GgufReader {
    gguf_context * g;
    std::string path;
    std::string * err;

    std::string arch = "llama"; // the prefix of the architecture's keys: arch_key("context_length")

    int64_t key(const std::string & k) const { return gguf_find_key(g, k.c_str()); }
    std::string arch_key(const char * suffix) const { return arch + "." + suffix; }

    // Any integer type; false (with message) if missing and required, or out of range.
    bool get_int(const std::string & k, int64_t lo, int64_t hi, bool required, int64_t * out) const {
        const int64_t id = key(k);
        if (id < 0) return required ? fail(err, strfmt("%s: missing key %s", path.c_str(), k.c_str())) : true;
        int64_t v;
        switch (gguf_get_kv_type(g, id)) {
            case GGUF_TYPE_UINT8: v = gguf_get_val_u8(g, id); break;
            case GGUF_TYPE_INT8: v = gguf_get_val_i8(g, id); break;
            case GGUF_TYPE_UINT16: v = gguf_get_val_u16(g, id); break;
            case GGUF_TYPE_INT16: v = gguf_get_val_i16(g, id); break;
            case GGUF_TYPE_UINT32: v = gguf_get_val_u32(g, id); break;
            case GGUF_TYPE_INT32: v = gguf_get_val_i32(g, id); break;
            case GGUF_TYPE_UINT64: {
                const uint64_t u = gguf_get_val_u64(g, id);
                v = u > (uint64_t) INT64_MAX ? INT64_MAX : (int64_t) u;
                break;
            }
            case GGUF_TYPE_INT64: v = gguf_get_val_i64(g, id); break;
            default:
                return fail(err, strfmt("%s: key %s has type %s, expected an integer", path.c_str(), k.c_str(),
                                        gguf_type_name(gguf_get_kv_type(g, id))));
        }
        if (v < lo || v > hi) {
            return fail(err, strfmt("%s: key %s = %" PRId64 " is out of range %" PRId64 "..%" PRId64, path.c_str(),
                                    k.c_str(), v, lo, hi));
        }
        *out = v;
        return true;
    }
    bool get_int(const std::string & k, int64_t lo, int64_t hi, bool required, int * out) const {
        int64_t v = *out;
        if (!get_int(k, lo, hi, required, &v)) return false;
        *out = (int) v;
        return true;
    }
    bool get_float(const std::string & k, bool required, float * out) const {
        const int64_t id = key(k);
        if (id < 0) return required ? fail(err, strfmt("%s: missing key %s", path.c_str(), k.c_str())) : true;
        const gguf_type t = gguf_get_kv_type(g, id);
        if (t == GGUF_TYPE_FLOAT32) *out = gguf_get_val_f32(g, id);
        else if (t == GGUF_TYPE_FLOAT64) *out = (float) gguf_get_val_f64(g, id);
        else
            return fail(err,
                        strfmt("%s: key %s has type %s, expected a float", path.c_str(), k.c_str(), gguf_type_name(t)));
        return true;
    }
    bool get_bool(const std::string & k, bool * out) const { // optional
        const int64_t id = key(k);
        if (id < 0) return true;
        if (gguf_get_kv_type(g, id) != GGUF_TYPE_BOOL)
            return fail(err, strfmt("%s: key %s is not a bool", path.c_str(), k.c_str()));
        *out = gguf_get_val_bool(g, id);
        return true;
    }
    bool get_str(const std::string & k, std::string * out) const {
        const int64_t id = key(k);
        if (id < 0) return fail(err, strfmt("%s: missing key %s", path.c_str(), k.c_str()));
        if (gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) {
            return fail(err, strfmt("%s: key %s is not a string", path.c_str(), k.c_str()));
        }
        *out = gguf_get_val_str(g, id);
        return true;
    }
};

// Types the CPU matmul runs directly: f32, f16, bf16 and llama.cpp's block types
// (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K..q6_K, iq4_nl, iq4_xs, tq1_0, tq2_0, iq3_xxs, iq3_s, iq2_*, iq1_*). Not q8_K: the k-quants' activation
// format has a vec_dot (with itself) but no matmul kernel.
bool is_weight_type(ggml_type t) {
    return t >= 0 && t < GGML_TYPE_COUNT && t != GGML_TYPE_Q8_K && ggml_get_type_traits_cpu(t)->vec_dot != nullptr;
}

// Block formats the library can read but has no kernels for: widened to f32 at load.
bool is_widened_type(ggml_type t) {
    return t >= 0 && t < GGML_TYPE_COUNT && !is_weight_type(t) && ggml_is_quantized(t) && ggml_get_type_traits(t)->to_float;
}

// Bytes a type's kernels need the data aligned to.
size_t type_alignment(ggml_type t) { return t == GGML_TYPE_F32 ? 4 : 2; }

// tokenizer.ggml.merges of a byte-level BPE vocabulary: strings "left right", best first.
bool read_merges(const GgufReader & r, std::vector<std::string> * merges) {
    const int64_t id = r.key("tokenizer.ggml.merges");
    if (id < 0) return fail(r.err, r.path + ": a 'gpt2' tokenizer needs tokenizer.ggml.merges");
    if (gguf_get_kv_type(r.g, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(r.g, id) != GGUF_TYPE_STRING) {
        return fail(r.err, r.path + ": tokenizer.ggml.merges is not an array of strings");
    }
    const size_t n = gguf_get_arr_n(r.g, id);
    merges->reserve(n);
    for (size_t i = 0; i < n; ++i) merges->push_back(gguf_get_arr_str(r.g, id, i));
    return true;
}

// The keys that say which special tokens encode adds and which ids end generation.
bool read_specials(const GgufReader & r, Model & m, int bos, int eos) {
    bool add_bos = true, add_space_prefix = true;
    int eot = -1, eom = -1;
    const int64_t hi = (int64_t) m.vocab.n_tokens() - 1;
    if (!r.get_bool("tokenizer.ggml.add_bos_token", &add_bos) ||
        !r.get_bool("tokenizer.ggml.add_space_prefix", &add_space_prefix) ||
        !r.get_int("tokenizer.ggml.eot_token_id", 0, hi, false, &eot) ||
        !r.get_int("tokenizer.ggml.eom_token_id", 0, hi, false, &eom)) {
        return false;
    }
    m.vocab.set_specials(add_bos, add_space_prefix);
    m.vocab.find_end_tokens(eot, eom);
    m.has_vocab = true;
    if (bos >= 0) m.bos = bos;
    if (eos >= 0) m.eos = eos;
    return true;
}

bool read_vocab(const GgufReader & r, Model & m) {
    if (r.key("tokenizer.chat_template") >= 0 && !r.get_str("tokenizer.chat_template", &m.chat_template)) return false;
    const int64_t tok_id = r.key("tokenizer.ggml.tokens");
    if (tok_id < 0) return true; // token ids only
    std::string model = "llama";
    if (r.key("tokenizer.ggml.model") >= 0) {
        if (!r.get_str("tokenizer.ggml.model", &model)) return false;
        if (model != "llama" && model != "gpt2") {
            return fail(r.err, KVG_STATUS_UNSUPPORTED, strfmt("%s: tokenizer.ggml.model is '%s'; supported: 'llama' (SentencePiece BPE), "
                                      "'gpt2' (byte-level BPE)", r.path.c_str(), model.c_str()));
        }
    }
    gguf_context * g = r.g;
    if (gguf_get_kv_type(g, tok_id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, tok_id) != GGUF_TYPE_STRING) {
        return fail(r.err, r.path + ": tokenizer.ggml.tokens is not an array of strings");
    }
    const size_t n = gguf_get_arr_n(g, tok_id);
    if ((int64_t) n != m.hp.n_vocab) {
        return fail(r.err, strfmt("%s: tokenizer has %zu tokens but token_embd.weight has %d rows", r.path.c_str(), n,
                                  m.hp.n_vocab));
    }
    std::vector<std::string> pieces(n);
    for (size_t i = 0; i < n; ++i) pieces[i] = gguf_get_arr_str(g, tok_id, i);
    std::vector<float> scores;
    const int64_t sc_id = r.key("tokenizer.ggml.scores");
    if (sc_id >= 0) {
        if (gguf_get_kv_type(g, sc_id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, sc_id) != GGUF_TYPE_FLOAT32 ||
            gguf_get_arr_n(g, sc_id) != n) {
            return fail(r.err, r.path + ": tokenizer.ggml.scores must be float32[n_vocab]");
        }
        const float * p = (const float *) gguf_get_arr_data(g, sc_id);
        scores.assign(p, p + n);
    }
    std::vector<int> types;
    const int64_t ty_id = r.key("tokenizer.ggml.token_type");
    if (ty_id >= 0) {
        const gguf_type at = gguf_get_kv_type(g, ty_id) == GGUF_TYPE_ARRAY ? gguf_get_arr_type(g, ty_id) : GGUF_TYPE_COUNT;
        if ((at != GGUF_TYPE_INT32 && at != GGUF_TYPE_UINT32) || gguf_get_arr_n(g, ty_id) != n) {
            return fail(r.err, r.path + ": tokenizer.ggml.token_type must be int32[n_vocab]");
        }
        const int32_t * p = (const int32_t *) gguf_get_arr_data(g, ty_id);
        types.assign(p, p + n);
    }
    int bos = -1, eos = -1, unk = -1;
    const int64_t hi = (int64_t) n - 1;
    if (!r.get_int("tokenizer.ggml.bos_token_id", 0, hi, false, &bos) ||
        !r.get_int("tokenizer.ggml.eos_token_id", 0, hi, false, &eos) ||
        !r.get_int("tokenizer.ggml.unknown_token_id", 0, hi, false, &unk)) {
        return false;
    }
    std::string verr;
    if (model == "gpt2") {
        std::vector<std::string> merges;
        if (!read_merges(r, &merges)) return false;
        std::string pre;
        if (r.key("tokenizer.ggml.pre") >= 0 && !r.get_str("tokenizer.ggml.pre", &pre)) return false;
        if (!m.vocab.init_bpe(std::move(pieces), std::move(types), merges, pre, bos, eos, &verr)) {
            return fail(r.err, r.path + ": tokenizer: " + verr);
        }
    } else if (!m.vocab.init(std::move(pieces), std::move(scores), std::move(types), bos, eos, unk, &verr)) {
        return fail(r.err, r.path + ": tokenizer: " + verr);
    }
    return read_specials(r, m, bos, eos);
}


// The tokenizer of any GGUF file (vocab_only): the vocabulary's size is its token count.
std::unique_ptr<Model> read_vocab_only(const GgufReader & r, std::unique_ptr<Model> m) {
    const int64_t tok_id = r.key("tokenizer.ggml.tokens");
    if (tok_id < 0) {
        fail(r.err, r.path + ": no tokenizer (tokenizer.ggml.tokens) in the file");
        return nullptr;
    }
    const size_t n = gguf_get_kv_type(r.g, tok_id) == GGUF_TYPE_ARRAY ? gguf_get_arr_n(r.g, tok_id) : 0;
    if (n == 0 || n > (size_t) INT32_MAX) {
        fail(r.err, r.path + ": tokenizer.ggml.tokens is empty or not an array");
        return nullptr;
    }
    m->hp.n_vocab = (int) n;
    if (!read_vocab(r, *m)) return nullptr;
    m->desc = "gguf vocab only: " + std::to_string(n) + " tokens";
    return m;
}

// {arch}.rope.scaling.*: the type (none, linear or yarn; llama.cpp's default: linear), the
// factor (also under the older key rope.scale_linear), YaRN's original context and the
// magnitude factor.
bool read_rope_scaling(const GgufReader & r, HParams & hp) {
    std::string type = "linear";
    const std::string type_key = r.arch_key("rope.scaling.type");
    if (r.key(type_key) >= 0 && !r.get_str(type_key, &type)) return false;
    if (type != "none" && type != "linear" && type != "yarn") {
        return fail(r.err, KVG_STATUS_UNSUPPORTED,
                    strfmt("%s: %s '%s' is not supported (none, linear, yarn)", r.path.c_str(), type_key.c_str(),
                           type.c_str()));
    }
    float factor = 0.0f, attn_factor = 1.0f;
    const std::string factor_key = r.key(r.arch_key("rope.scaling.factor")) >= 0 ? r.arch_key("rope.scaling.factor")
                                                                                 : r.arch_key("rope.scale_linear");
    if (!r.get_float(factor_key, false, &factor) ||
        !r.get_float(r.arch_key("rope.scaling.attn_factor"), false, &attn_factor) ||
        !r.get_int(r.arch_key("rope.scaling.original_context_length"), 1, 1 << 24, false, &hp.n_ctx_orig)) {
        return false;
    }
    if (!std::isfinite(factor) || factor < 0.0f || !std::isfinite(attn_factor) || attn_factor <= 0.0f) {
        return fail(r.err, strfmt("%s: rope scaling factor %g or attention factor %g is invalid", r.path.c_str(), factor,
                                  attn_factor));
    }
    hp.rope_freq_scale = type == "none" || factor == 0.0f ? 1.0f : 1.0f / factor;
    hp.rope_yarn = type == "yarn";
    hp.rope_attn_factor = attn_factor;
    return true;
}

// attention.key_length / value_length: one head size for keys and values; n_embd / n_head
// unless the architecture sets the head size by these keys (then it is hp.n_embd_head).
bool read_head_size(const GgufReader & r, const ArchDesc & arch, HParams & hp) {
    const int usual = hp.n_embd % hp.n_head == 0 ? hp.n_embd / hp.n_head : 0;
    int key_len = usual, value_len = usual;
    const std::string kk = r.arch_key("attention.key_length"), vk = r.arch_key("attention.value_length");
    if (!r.get_int(kk, 1, 1 << 16, false, &key_len) || !r.get_int(vk, 1, 1 << 16, false, &value_len)) return false;
    if (key_len != value_len) {
        return fail(r.err, KVG_STATUS_UNSUPPORTED,
                    strfmt("%s: %s = %d differs from %s = %d, which kvgraph does not support", r.path.c_str(),
                           kk.c_str(), key_len, vk.c_str(), value_len));
    }
    if (arch.head_size_keys) {
        hp.n_embd_head = key_len;
        return true;
    }
    if (key_len != usual) {
        return fail(r.err, KVG_STATUS_UNSUPPORTED,
                    strfmt("%s: %s = %d differs from n_embd / n_head = %d, which kvgraph does not support",
                           r.path.c_str(), kk.c_str(), key_len, usual));
    }
    return true;
}

// Mixture-of-experts files ({arch}.expert_count > 0, or a router or expert tensor: Mixtral's
// blk.N.ffn_gate_inp and ffn_*_exps) route each token through a few of many feed-forward
// networks, which the llama layer does not.
bool refuse_experts(const GgufReader & r) {
    int64_t n_expert = 0;
    if (!r.get_int(r.arch_key("expert_count"), 0, INT32_MAX, false, &n_expert)) return false;
    std::string tensor;
    for (int64_t i = 0; i < gguf_get_n_tensors(r.g) && tensor.empty(); ++i) {
        const std::string name = gguf_get_tensor_name(r.g, i);
        if (name.find("_exps.") != std::string::npos || name.find(".ffn_gate_inp.") != std::string::npos) tensor = name;
    }
    if (n_expert == 0 && tensor.empty()) return true;
    const std::string what =
        n_expert > 0 ? strfmt("%s = %" PRId64, r.arch_key("expert_count").c_str(), n_expert) : "tensor " + tensor;
    return fail(r.err, KVG_STATUS_UNSUPPORTED,
                strfmt("%s: mixture-of-experts models (%s) are not supported", r.path.c_str(), what.c_str()));
}

// {arch}.attention.sliding_window_pattern: a period (the last layer of each period is global) or
// one bool per layer (true: sliding window); without it, llama.cpp's period for the generation.
bool read_swa_layers(const GgufReader & r, int period, HParams & hp) {
    const std::string key = r.arch_key("attention.sliding_window_pattern");
    const int64_t id = r.key(key);
    hp.swa_layers.assign((size_t) hp.n_layer, 0);
    if (id >= 0 && gguf_get_kv_type(r.g, id) == GGUF_TYPE_ARRAY) {
        if (gguf_get_arr_type(r.g, id) != GGUF_TYPE_BOOL || gguf_get_arr_n(r.g, id) < (size_t) hp.n_layer)
            return fail(r.err, strfmt("%s: %s is not an array of %d bools", r.path.c_str(), key.c_str(), hp.n_layer));
        const bool * v = (const bool *) gguf_get_arr_data(r.g, id);
        for (int il = 0; il < hp.n_layer; ++il) hp.swa_layers[il] = v[il];
        return true;
    }
    if (!r.get_int(key, 0, 1 << 10, false, &period)) return false;
    for (int il = 0; il < hp.n_layer; ++il) hp.swa_layers[il] = period == 0 || il % period < period - 1;
    return true;
}

// Gemma 2/3's keys, with llama.cpp's defaults: Gemma 2 always has a window (4096) and both
// soft-caps (50, 30), its local layers keep the file's rope; Gemma 3 has a window only if the
// file gives one, a final soft-cap only if the file gives one, and local layers at base 10000
// without scaling. The query scale follows the size llama.cpp infers from the layer count (the
// 27B models scale by n_embd / n_head), not query_pre_attn_scalar.
bool read_gemma_hparams(const GgufReader & r, int gen, HParams & hp) {
    hp.embd_scale = hp.ffn_gelu = true;
    int n_swa = gen == 2 ? 4096 : 0;
    if (gen == 2) {
        hp.attn_softcap = 50.0f;
        hp.final_softcap = 30.0f;
        hp.rope_base_swa = hp.rope_base;
        hp.rope_freq_scale_swa = hp.rope_freq_scale;
    }
    if (!r.get_int(r.arch_key("attention.sliding_window"), 0, 1 << 24, false, &n_swa) ||
        !r.get_float(r.arch_key("rope.freq_base_swa"), false, &hp.rope_base_swa) ||
        !r.get_float(r.arch_key("final_logit_softcapping"), false, &hp.final_softcap) ||
        (gen == 2 && !r.get_float(r.arch_key("attn_logit_softcapping"), false, &hp.attn_softcap))) {
        return false;
    }
    if (!std::isfinite(hp.attn_softcap) || !std::isfinite(hp.final_softcap) || hp.attn_softcap < 0.0f ||
        hp.final_softcap < 0.0f || !std::isfinite(hp.rope_base_swa) || !(hp.rope_base_swa > 0.0f)) {
        return fail(r.err, strfmt("%s: soft-capping %g / %g or sliding-window rope base %g is invalid", r.path.c_str(),
                                  hp.attn_softcap, hp.final_softcap, hp.rope_base_swa));
    }
    hp.n_swa = n_swa;
    if (n_swa > 0 && !read_swa_layers(r, gen == 2 ? 2 : 6, hp)) return false;
    const bool is_27b = hp.n_layer == (gen == 2 ? 46 : 62);
    hp.q_scale = 1.0f / std::sqrt((float) (is_27b ? hp.n_embd / hp.n_head : hp.head_dim()));
    return true;
}

// general.architecture must be one of arch.h's; its {arch}.* keys fill hp.
bool read_hparams(GgufReader & r, Model & m) {
    HParams & hp = m.hp;
    if (!r.get_str("general.architecture", &m.arch)) return false;
    const ArchDesc * arch = find_arch(m.arch);
    if (!arch) {
        return fail(r.err, KVG_STATUS_UNSUPPORTED,
                    strfmt("%s: architecture '%s' is not supported (supported: %s)", r.path.c_str(), m.arch.c_str(),
                           arch_names().c_str()));
    }
    r.arch = m.arch;
    if (!refuse_experts(r)) return false;
    hp.rope_mode = arch->rope_mode;
    hp.no_rope_layer_step = arch->no_rope_layer_step;
    const int64_t big = 1 << 24;
    if (!r.get_int(r.arch_key("context_length"), 1, big, true, &hp.n_ctx_train) ||
        !r.get_int(r.arch_key("embedding_length"), 1, 1 << 16, true, &hp.n_embd) ||
        !r.get_int(r.arch_key("block_count"), 1, 1 << 10, true, &hp.n_layer) ||
        !r.get_int(r.arch_key("feed_forward_length"), 1, 1 << 20, true, &hp.n_ff) ||
        !r.get_int(r.arch_key("attention.head_count"), 1, 1 << 12, true, &hp.n_head)) {
        return false;
    }
    hp.n_head_kv = hp.n_head;
    if (!r.get_int(r.arch_key("attention.head_count_kv"), 1, 1 << 12, false, &hp.n_head_kv) ||
        !read_head_size(r, *arch, hp)) {
        return false;
    }
    hp.n_rot = hp.head_dim();
    return r.get_int(r.arch_key("rope.dimension_count"), 1, 1 << 16, false, &hp.n_rot) &&
           r.get_float(r.arch_key("rope.freq_base"), false, &hp.rope_base) &&
           r.get_float(r.arch_key("attention.layer_norm_rms_epsilon"), true, &hp.rms_eps) && read_rope_scaling(r, hp) &&
           (arch->gemma == 0 || read_gemma_hparams(r, arch->gemma, hp));
}

// Binds the file's tensors to the model: every tensor listed, of the expected shape and a
// readable type, inside the file, mapped (or copied when misaligned, widened to f32 when
// it is a norm or no kernel reads its type).
struct TensorBinder {
    const GgufReader & r;
    ggml_context * meta;
    Model & m;
    size_t data_offset;

    // The tensor's metadata and its id in the file, checked; nullptr (with message) when
    // it does not fit.
    ggml_tensor * find(const std::string & name, int64_t ne0, int64_t ne1, int64_t * id) const {
        const char * path = r.path.c_str();
        *id = gguf_find_tensor(r.g, name.c_str());
        if (*id < 0) {
            fail(r.err, strfmt("%s: missing tensor %s", path, name.c_str()));
            return nullptr;
        }
        ggml_tensor * t = ggml_get_tensor(meta, name.c_str());
        if (!t) {
            fail(r.err, strfmt("%s: tensor %s has no metadata", path, name.c_str()));
            return nullptr;
        }
        if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
            fail(r.err, strfmt("%s: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                               "], expected [%" PRId64 ", %" PRId64 "]", path, name.c_str(), t->ne[0], t->ne[1],
                               t->ne[2], t->ne[3], ne0, ne1));
            return nullptr;
        }
        if (!is_weight_type(t->type) && !is_widened_type(t->type)) {
            fail(r.err, KVG_STATUS_UNSUPPORTED,
                 strfmt(
                     "%s: tensor %s has type %s; supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                     "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, tq1_0, tq2_0, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m",
                     path, name.c_str(), ggml_type_name(t->type)));
            return nullptr;
        }
        return t;
    }

    ggml_tensor * operator()(const std::string & name, int64_t ne0, int64_t ne1) const {
        int64_t id;
        ggml_tensor * t = find(name, ne0, ne1, &id);
        if (!t) return nullptr;
        const FileMapping & f = *m.mapping;
        const size_t begin = data_offset + gguf_get_tensor_offset(r.g, id);
        const size_t nbytes = ggml_nbytes(t);
        if (begin > f.size || nbytes > f.size - begin) {
            fail(r.err, strfmt("%s: tensor %s data at offset %zu..%zu lies past the end of the file (%zu bytes)",
                               r.path.c_str(), name.c_str(), begin, begin + nbytes, f.size));
            return nullptr;
        }
        const uint8_t * src = f.data + begin;
        const bool is_norm = ne1 == 1;
        if ((is_norm && t->type != GGML_TYPE_F32) || !is_weight_type(t->type)) {
            // norms are applied with an f32 multiply, and a block format without kernels is
            // widened once here, row by row (exactly the values the file encodes)
            auto buf = std::make_unique<uint8_t[]>((size_t) ne0 * ne1 * sizeof(float));
            const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
            for (int64_t i = 0; i < ne1; ++i) to_float(src + i * t->nb[1], (float *) buf.get() + i * ne0, ne0);
            t->type = GGML_TYPE_F32;
            t->nb[0] = sizeof(float);
            for (int i = 1; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
            t->data = buf.get();
            m.owned.push_back(std::move(buf));
        } else if ((uintptr_t) src % type_alignment(t->type) != 0) {
            auto buf = std::make_unique<uint8_t[]>(nbytes);
            std::memcpy(buf.get(), src, nbytes);
            t->data = buf.get();
            m.owned.push_back(std::move(buf));
        } else {
            t->data = const_cast<uint8_t *>(src);
        }
        return t;
    }
};

// The vocabulary size comes from the embedding matrix ({arch}.vocab_size, if present, must agree).
bool read_n_vocab(const GgufReader & r, ggml_context * meta, HParams & hp) {
    const int64_t emb_id = gguf_find_tensor(r.g, "token_embd.weight");
    ggml_tensor * emb = emb_id >= 0 ? ggml_get_tensor(meta, "token_embd.weight") : nullptr;
    if (!emb) return fail(r.err, r.path + ": missing tensor token_embd.weight");
    hp.n_vocab = (int) std::min<int64_t>(emb->ne[1], INT32_MAX);
    if (!check_hparams(hp, r.err)) {
        *r.err = r.path + ": " + *r.err;
        return false;
    }
    int64_t vocab_key = hp.n_vocab;
    const std::string key = r.arch_key("vocab_size");
    if (!r.get_int(key, 1, INT32_MAX, false, &vocab_key)) return false;
    if (vocab_key != hp.n_vocab) {
        return fail(r.err, strfmt("%s: %s %" PRId64 " differs from token_embd.weight's %d rows", r.path.c_str(),
                                  key.c_str(), vocab_key, hp.n_vocab));
    }
    return true;
}

// A tensor the graph would not read (a bias, other rope factors, experts, ...) changes what
// the file computes: refused, named, rather than silently left out.
bool refuse_unused_tensors(const GgufReader & r, const Model & m) {
    std::unordered_set<std::string> used;
    for (const ggml_tensor * t : m.tensors()) used.insert(t->name);
    for (int64_t i = 0; i < gguf_get_n_tensors(r.g); ++i) {
        const char * name = gguf_get_tensor_name(r.g, i);
        if (!used.count(name)) {
            return fail(r.err, KVG_STATUS_UNSUPPORTED,
                        strfmt("%s: tensor %s is not supported: kvgraph's %s graph has no use for it, and leaving it "
                               "out would change the result",
                               r.path.c_str(), name, m.arch.c_str()));
        }
    }
    return true;
}

// The tensor if the file has it (checked like a required one), else nullptr; false on a bad one.
bool get_optional(const GgufReader & r, const TensorBinder & get, const std::string & name, int64_t ne0, int64_t ne1,
                  ggml_tensor ** out) {
    if (gguf_find_tensor(r.g, name.c_str()) < 0) return true;
    return (*out = get(name, ne0, ne1)) != nullptr;
}

// Attention tensors of layer l as the architecture stores them: q/k/v apart or fused, their
// biases (llama.cpp reads them when present), Q/K norms.
bool bind_attention(const GgufReader & r, const TensorBinder & get, const ArchDesc & arch, const HParams & hp,
                    const std::string & p, LayerWeights & w) {
    const int64_t dim = hp.n_embd, q = hp.n_embd_q(), kv = hp.n_embd_kv(), hd = hp.head_dim();
    if (!(w.attn_norm = get(p + "attn_norm.weight", dim, 1)) || !(w.wo = get(p + "attn_output.weight", q, dim)))
        return false;
    if (arch.fused_qkv) {
        if (!(w.wqkv = get(p + "attn_qkv.weight", dim, q + 2 * kv))) return false;
    } else if (!(w.wq = get(p + "attn_q.weight", dim, q)) || !(w.wk = get(p + "attn_k.weight", dim, kv)) ||
               !(w.wv = get(p + "attn_v.weight", dim, kv))) {
        return false;
    }
    if (arch.qkv_bias && (!get_optional(r, get, p + "attn_q.bias", q, 1, &w.bq) ||
                          !get_optional(r, get, p + "attn_k.bias", kv, 1, &w.bk) ||
                          !get_optional(r, get, p + "attn_v.bias", kv, 1, &w.bv))) {
        return false;
    }
    return !arch.qk_norm ||
           ((w.q_norm = get(p + "attn_q_norm.weight", hd, 1)) && (w.k_norm = get(p + "attn_k_norm.weight", hd, 1)));
}

bool bind_ffn(const TensorBinder & get, const ArchDesc & arch, const HParams & hp, const std::string & p,
              LayerWeights & w) {
    const int64_t dim = hp.n_embd, ff = hp.n_ff;
    if (arch.gemma && (!(w.attn_post_norm = get(p + "post_attention_norm.weight", dim, 1)) ||
                       !(w.ffn_post_norm = get(p + "post_ffw_norm.weight", dim, 1)))) {
        return false;
    }
    if (!(w.ffn_norm = get(p + "ffn_norm.weight", dim, 1)) || !(w.ffn_down = get(p + "ffn_down.weight", ff, dim)))
        return false;
    if (arch.fused_gate_up) return (w.ffn_up = get(p + "ffn_up.weight", dim, 2 * ff)) != nullptr;
    return (w.ffn_gate = get(p + "ffn_gate.weight", dim, ff)) && (w.ffn_up = get(p + "ffn_up.weight", dim, ff));
}

bool bind_weights(const GgufReader & r, const TensorBinder & get, Model & m) {
    const HParams & hp = m.hp;
    const ArchDesc & arch = *find_arch(m.arch);
    const int64_t dim = hp.n_embd, V = hp.n_vocab;
    if (!(m.tok_embd = get("token_embd.weight", dim, V))) return false;
    m.layers.resize(hp.n_layer);
    for (int l = 0; l < hp.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        if (!bind_attention(r, get, arch, hp, p, m.layers[l]) || !bind_ffn(get, arch, hp, p, m.layers[l])) return false;
    }
    if (!(m.output_norm = get("output_norm.weight", dim, 1)) ||
        !get_optional(r, get, "output.weight", dim, V, &m.output)) {
        return false;
    }
    if (!m.output) m.output = m.tok_embd; // tied embeddings
    if (arch.rope_freqs && !get_optional(r, get, "rope_freqs.weight", hp.n_rot / 2, 1, &m.rope_freqs)) return false;
    if (arch.longrope && (!get_optional(r, get, "rope_factors_long.weight", hp.n_rot / 2, 1, &m.rope_long) ||
                          !get_optional(r, get, "rope_factors_short.weight", hp.n_rot / 2, 1, &m.rope_short))) {
        return false;
    }
    return refuse_unused_tensors(r, m);
}

// The matrices' types in file order, "/"-separated, each once.
std::string matrix_types(const Model & m) {
    std::string types;
    for (const ggml_tensor * t : m.tensors()) {
        if (t->ne[1] > 1 && types.find(ggml_type_name(t->type)) == std::string::npos) {
            types += types.empty() ? "" : "/";
            types += ggml_type_name(t->type);
        }
    }
    return types;
}

// Whether the load writes a matrix of the file on this CPU (besides the embeddings): one that
// ggml_kvg_repack rearranges, or an f16 one rounded to bf16.
bool has_matrix_to_change(const gguf_context * g, const LoadOptions & opt) {
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        if (std::string(gguf_get_tensor_name(g, i)) == "token_embd.weight") continue;
        const ggml_type type = gguf_get_tensor_type(g, i);
        if (opt.repack && ggml_kvg_repacks(type)) return true;
        if (opt.f16_as_bf16 && type == GGML_TYPE_F16 && rounds_f16_to_bf16()) return true;
    }
    return false;
}

} // namespace

// The GGUF reader names an unsupported tensor type by its number; add ggml's name for it:
// "tensor type 23 (iq4_xs) is not supported".
static std::string name_tensor_type(std::string msg) {
    const std::string key = "tensor type ";
    const size_t at = msg.find(key);
    if (at == std::string::npos) return msg;
    size_t end = at + key.size();
    int type = 0;
    while (end < msg.size() && std::isdigit((unsigned char) msg[end]) && type < GGML_TYPE_COUNT)
        type = type * 10 + (msg[end++] - '0');
    if (end == at + key.size() || type >= GGML_TYPE_COUNT || msg.compare(end, 17, " is not supported") != 0) return msg;
    return msg.insert(end, std::string(" (") + ggml_type_name((ggml_type) type) + ")");
}

std::unique_ptr<Model> load_gguf(const std::string & path, const LoadOptions & opt, std::string * err) {
    std::string e;
    if (!err) err = &e;
    auto m = std::make_unique<Model>();
    m->format = "gguf";
    char gerr[512] = "";
    ggml_context * meta = nullptr;
    gguf_init_params gp = {true, &meta};
    gguf_context * g = gguf_init_from_file_ex(path.c_str(), gp, gerr, sizeof(gerr));
    if (!g) {
        fail(err, path + ": " + name_tensor_type(gerr));
        return nullptr;
    }
    m->ctx = meta;
    struct guard { gguf_context * g; ~guard() { gguf_free(g); } } gguard{g};
    GgufReader r{g, path, err};

    if (opt.vocab_only) return read_vocab_only(r, std::move(m));
    if (!read_hparams(r, *m)) return nullptr;
    if (!m->mapping) m->mapping = std::make_unique<FileMapping>();
    // weights to be rearranged are read into memory: written in a mapping, each page would be
    // copied on a fault of its own (1.1B q4_0: 475 ms against a 60 ms read)
    if (!m->mapping->open(path, opt.use_mmap && !has_matrix_to_change(g, opt), err)) return nullptr;
    const TensorBinder get{r, meta, *m, gguf_get_data_offset(g)};
    if (!read_n_vocab(r, meta, m->hp) || !bind_weights(r, get, *m) || !read_vocab(r, *m)) return nullptr;
    if (opt.check_tensors && !check_tensor_data(*m, err)) {
        *err = path + ": " + *err;
        return nullptr;
    }
    if (opt.repack) repack_weights(*m);
    if (opt.f16_as_bf16) round_f16_weights(*m);
    m->desc = describe(*m, matrix_types(*m).c_str());
    return m;
}

} // namespace kvg
