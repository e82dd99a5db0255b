// The twin of scripts/tiny_family.py (writes each family's tiny model from its seed, byte for
// byte as the script does) and the reader of llama.cpp's reference, FAMILY.ref.bin (its format is
// at the top of tests/test-family.cpp). Shared by the tests that run the family models.
#pragma once

#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"
#include "vocab-test-common.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace family_twin {

// ---- the twin of scripts/tiny_family.py --------------------------------------------------------

// Defaults: llama3's settings.
struct Family {
    std::string name, arch = "llama", vocab_file = "ggml-vocab-llama-bpe.gguf"; // a llama.cpp ggml-vocab-*.gguf
    uint64_t seed = 4501;
    int n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, head_dim = 16, n_ff = 128, n_ctx = 2048;
    float rope_base = 500000.0f, rms_eps = 1e-5f;
    bool rope_freqs = true, add_bos = true, tied = true, qkv_bias = false, qk_norm = false, head_keys = false;
    bool fused = false;
    float yarn_factor = 0.0f; // YaRN scaling keys when > 0, over yarn_ctx_orig positions
    int yarn_ctx_orig = 0;
    int longrope_ctx_orig = 0;   // LongRoPE's keys and tables when > 0 (phi3-long, phi3-short)
    float longrope_attn = 0.0f;  // its rope.scaling.attn_factor
    bool longrope_tables = true; // false: the keys without rope_factors_long/short.weight (a control)
    int sliding_window = 0;      // attention.sliding_window when > 0 (mistral)
    // Gemma: post norms, no space prefix, window, soft-caps (0: no key), linear rope scaling (0: no key)
    bool post_norms = false, no_space_prefix = false;
    int swa = 0;
    float attn_softcap = 0.0f, final_softcap = 0.0f, linear = 0.0f;
    double mat_scale = 1.0; // scales the matrices but token_embd (the -256 variants: 0.5)
};

// FAMILIES of tiny_family.py (the settings that reach the file): what each changes from llama3.
inline Family family(const std::string & name) {
    const size_t w = name.size() > 4 ? name.size() - 4 : 0;
    if (w > 0 && name.compare(w, 4, "-256") == 0) { // 256 wide, for the Q4_K_M check
        Family f = family(name.substr(0, w));
        f.name = name;
        f.n_embd = 256;
        f.n_ff = 512;
        f.head_dim = f.arch == "qwen3" ? 128 : 64;
        f.mat_scale = 0.5;
        return f;
    }
    Family f;
    f.name = name;
    if (name == "llama3-norf" || name == "llama3-yarn") f.rope_freqs = false; // the control: the same weights
    if (name == "llama3-yarn") {
        f.yarn_factor = 4.0f;
        f.yarn_ctx_orig = 32;
    }
    if (name == "qwen2" || name == "qwen3") {
        f.arch = name;
        f.vocab_file = "ggml-vocab-qwen2.gguf";
        f.rope_base = 1000000.0f;
        f.rms_eps = 1e-6f;
        f.rope_freqs = f.add_bos = false;
    }
    if (name == "qwen2") {
        f.seed = 4502;
        f.tied = false;
        f.qkv_bias = true;
    }
    if (name == "qwen3") {
        f.seed = 4503;
        f.head_dim = 32;
        f.qk_norm = f.head_keys = true;
    }
    if (name == "phi3") {
        f.arch = "phi3";
        f.vocab_file = "ggml-vocab-phi-3.gguf";
        f.seed = 4504;
        f.rope_base = 10000.0f;
        f.rope_freqs = f.tied = false;
        f.fused = true;
    }
    if (name == "smollm3") { // llama3's shape and vocabulary, 4 layers: the 4th has no rope
        f.arch = "smollm3";
        f.seed = 4505;
        f.n_layer = 4;
        f.rope_freqs = false;
    }
    if (name == "phi3-long" || name == "phi3-short") { // phi3's weights, LongRoPE's tables and keys
        f = family("phi3");
        f.name = name;
        f.longrope_ctx_orig = name == "phi3-long" ? 128 : 512;
        f.longrope_attn = name == "phi3-long" ? 1.2536f : 1.1055f;
    }
    if (name == "mistral") { // llama with a sliding window llama.cpp ignores, SentencePiece vocabulary
        f.vocab_file = "ggml-vocab-llama-spm.gguf";
        f.seed = 4506;
        f.rope_base = 1000000.0f;
        f.rope_freqs = f.tied = false;
        f.sliding_window = 32;
    }
    if (name == "gemma2" || name == "gemma3") { // qwen3's shape, SentencePiece vocabulary
        f.arch = name;
        f.vocab_file = "ggml-vocab-llama-spm.gguf";
        f.seed = name == "gemma2" ? 4506 : 4507;
        f.head_dim = 32;
        f.head_keys = f.post_norms = f.no_space_prefix = true;
        f.rope_freqs = false;
        f.rms_eps = 1e-6f;
        f.swa = 16;
        f.rope_base = 10000.0f;
    }
    if (name == "gemma2") {
        f.attn_softcap = 1.5f;
        f.final_softcap = 4.0f;
    }
    if (name == "gemma3") {
        f.n_layer = 6;
        f.qk_norm = true;
        f.rope_base = 1000000.0f;
        f.linear = 8.0f;
    }
    const bool known =
        name == "llama3" || name == "llama3-norf" || name == "llama3-yarn" || name == "mistral" || f.arch != "llama";
    REQUIRE_MESSAGE(known, "unknown family " << name);
    return f;
}

// The vocabulary: ../shared/vocab, else $LLAMA_CPP_MODELS (llama.cpp's models/ folder); "" if absent.
inline std::string vocab_path(const Family & c) {
    std::vector<std::string> dirs = {shared_dir() + "/vocab"};
    if (const char * e = std::getenv("LLAMA_CPP_MODELS")) dirs.push_back(e);
    for (const std::string & d : dirs) {
        if (std::ifstream(d + "/" + c.vocab_file)) return d + "/" + c.vocab_file;
    }
    return "";
}

inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// gen_tensor: offset + scaled hash is exact in double, the cast to float rounds as numpy's does.
inline std::vector<float> gen_tensor(uint64_t seed, uint64_t number, size_t n, double scale, double offset) {
    const uint64_t stream = splitmix64((seed << 32) + number);
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) {
        const double u = (double) (splitmix64(stream + i) >> 40) * 0x1p-24;
        w[i] = (float) (offset + (u - 0.5) * scale);
    }
    return w;
}

// rope_freq_factors: Llama 3's per-pair factors with original context 256, rounded to 1/256.
inline std::vector<float> rope_freq_factors(int head_dim, double base) {
    const double factor = 8, low = 1, high = 4, orig_ctx = 256;
    std::vector<float> out;
    for (int i = 0; i < head_dim / 2; ++i) {
        const double wavelen = 2 * 3.14159265358979323846 * std::pow(base, 2.0 * i / head_dim);
        double f = factor;
        if (wavelen < orig_ctx / high) {
            f = 1;
        } else if (wavelen <= orig_ctx / low) {
            const double smooth = (orig_ctx / wavelen - low) / (high - low);
            f = 1 / ((1 - smooth) / factor + smooth);
        }
        out.push_back((float) (std::nearbyint(f * 256) / 256));
    }
    return out;
}

struct Spec {
    std::string name;
    std::vector<int64_t> ne; // ggml order; -1: n_vocab
    double scale, offset;
};

// tensor_specs: every random tensor in tensor_number order (the scales are explained there).
inline std::vector<Spec> tensor_specs(const Family & c) {
    const int64_t e = c.n_embd, ff = c.n_ff, hd = c.head_dim, q = hd * c.n_head, kv = hd * c.n_head_kv;
    std::vector<Spec> s = {{"token_embd.weight", {e, -1}, 1.0, 0.0}, {"output_norm.weight", {e}, 0.5, 1.0}};
    if (!c.tied) s.push_back({"output.weight", {e, -1}, 0.5, 0.0});
    for (int i = 0; i < c.n_layer; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        s.push_back({p + "attn_norm.weight", {e}, 0.5, 1.0});
        if (c.fused) {
            s.push_back({p + "attn_qkv.weight", {e, q + 2 * kv}, 0.25, 0.0});
        } else {
            s.push_back({p + "attn_q.weight", {e, q}, 0.25, 0.0});
            s.push_back({p + "attn_k.weight", {e, kv}, 0.25, 0.0});
            s.push_back({p + "attn_v.weight", {e, kv}, 0.5, 0.0});
        }
        if (c.qkv_bias) {
            s.push_back({p + "attn_q.bias", {q}, 0.5, 0.0});
            s.push_back({p + "attn_k.bias", {kv}, 0.5, 0.0});
            s.push_back({p + "attn_v.bias", {kv}, 0.5, 0.0});
        }
        if (c.qk_norm) {
            s.push_back({p + "attn_q_norm.weight", {hd}, 0.5, 1.0});
            s.push_back({p + "attn_k_norm.weight", {hd}, 0.5, 1.0});
        }
        s.push_back({p + "attn_output.weight", {q, e}, 0.25, 0.0});
        if (c.post_norms) s.push_back({p + "post_attention_norm.weight", {e}, 0.5, 1.0});
        s.push_back({p + "ffn_norm.weight", {e}, 0.5, 1.0});
        if (c.fused) {
            s.push_back({p + "ffn_up.weight", {e, 2 * ff}, 0.5, 0.0});
        } else {
            s.push_back({p + "ffn_gate.weight", {e, ff}, 0.5, 0.0});
            s.push_back({p + "ffn_up.weight", {e, ff}, 0.5, 0.0});
        }
        s.push_back({p + "ffn_down.weight", {ff, e}, 0.25, 0.0});
        if (c.post_norms) s.push_back({p + "post_ffw_norm.weight", {e}, 0.5, 1.0});
    }
    for (Spec & x : s) x.scale *= x.ne.size() == 2 && x.name != "token_embd.weight" ? c.mat_scale : 1.0;
    return s;
}

// Copies key i of src to dst with its type (a vocabulary's keys are scalars, strings and
// arrays of strings or numbers).
inline void copy_key(gguf_context * dst, const gguf_context * src, int64_t i) {
    const char * k = gguf_get_key(src, i);
    switch (gguf_get_kv_type(src, i)) {
        case GGUF_TYPE_STRING: gguf_set_val_str(dst, k, gguf_get_val_str(src, i)); break;
        case GGUF_TYPE_UINT32: gguf_set_val_u32(dst, k, gguf_get_val_u32(src, i)); break;
        case GGUF_TYPE_INT32: gguf_set_val_i32(dst, k, gguf_get_val_i32(src, i)); break;
        case GGUF_TYPE_FLOAT32: gguf_set_val_f32(dst, k, gguf_get_val_f32(src, i)); break;
        case GGUF_TYPE_BOOL: gguf_set_val_bool(dst, k, gguf_get_val_bool(src, i)); break;
        case GGUF_TYPE_ARRAY: {
            const size_t n = gguf_get_arr_n(src, i);
            if (gguf_get_arr_type(src, i) == GGUF_TYPE_STRING) {
                std::vector<const char *> v(n);
                for (size_t j = 0; j < n; ++j) v[j] = gguf_get_arr_str(src, i, j);
                gguf_set_arr_str(dst, k, v.data(), n);
            } else {
                gguf_set_arr_data(dst, k, gguf_get_arr_type(src, i), gguf_get_arr_data(src, i), n);
            }
            break;
        }
        default: FAIL("vocabulary key " << k << " has a type the twin does not copy");
    }
}

// model_kvs: the architecture's keys, in tiny_family.py's order.
inline void set_model_kvs(gguf_context * g, const Family & c, uint32_t n_vocab) {
    const std::string a = c.arch + ".";
    gguf_set_val_str(g, "general.architecture", c.arch.c_str());
    gguf_set_val_str(g, "general.name", ("tiny-" + c.arch).c_str());
    gguf_set_val_u32(g, (a + "block_count").c_str(), c.n_layer);
    gguf_set_val_u32(g, (a + "context_length").c_str(), c.n_ctx);
    gguf_set_val_u32(g, (a + "embedding_length").c_str(), c.n_embd);
    gguf_set_val_u32(g, (a + "feed_forward_length").c_str(), c.n_ff);
    gguf_set_val_u32(g, (a + "attention.head_count").c_str(), c.n_head);
    gguf_set_val_u32(g, (a + "attention.head_count_kv").c_str(), c.n_head_kv);
    gguf_set_val_f32(g, (a + "rope.freq_base").c_str(), c.rope_base);
    gguf_set_val_f32(g, (a + "attention.layer_norm_rms_epsilon").c_str(), c.rms_eps);
    gguf_set_val_u32(g, "general.file_type", 0);
    gguf_set_val_u32(g, (a + "vocab_size").c_str(), n_vocab);
    gguf_set_val_u32(g, (a + "rope.dimension_count").c_str(), c.head_dim);
    if (c.head_keys) {
        gguf_set_val_u32(g, (a + "attention.key_length").c_str(), c.head_dim);
        gguf_set_val_u32(g, (a + "attention.value_length").c_str(), c.head_dim);
    }
    if (c.yarn_factor > 0.0f) {
        gguf_set_val_str(g, (a + "rope.scaling.type").c_str(), "yarn");
        gguf_set_val_f32(g, (a + "rope.scaling.factor").c_str(), c.yarn_factor);
        gguf_set_val_u32(g, (a + "rope.scaling.original_context_length").c_str(), (uint32_t) c.yarn_ctx_orig);
    }
    if (c.longrope_ctx_orig > 0) {
        gguf_set_val_f32(g, (a + "rope.scaling.attn_factor").c_str(), c.longrope_attn);
        gguf_set_val_u32(g, (a + "rope.scaling.original_context_length").c_str(), (uint32_t) c.longrope_ctx_orig);
    }
    if (c.sliding_window > 0)
        gguf_set_val_u32(g, (a + "attention.sliding_window").c_str(), (uint32_t) c.sliding_window);
    if (c.linear > 0.0f) {
        gguf_set_val_str(g, (a + "rope.scaling.type").c_str(), "linear");
        gguf_set_val_f32(g, (a + "rope.scaling.factor").c_str(), c.linear);
    }
    if (c.swa > 0) gguf_set_val_u32(g, (a + "attention.sliding_window").c_str(), (uint32_t) c.swa);
    if (c.attn_softcap > 0.0f) {
        gguf_set_val_f32(g, (a + "attn_logit_softcapping").c_str(), c.attn_softcap);
        gguf_set_val_f32(g, (a + "final_logit_softcapping").c_str(), c.final_softcap);
    }
}

// A stand-in for a vocabulary file that is absent (CI has only ../shared/vocab): n_vocab
// SentencePiece pieces "<0>".."<n-1>" and the family's BOS/EOS ids, so that the model loads
// and decodes token ids; its text is meaningless. The weights do not depend on it.
inline void set_placeholder_vocab(gguf_context * g, const Family & c, uint32_t n_vocab) {
    std::vector<std::string> pieces(n_vocab);
    std::vector<const char *> ptrs(n_vocab);
    for (uint32_t i = 0; i < n_vocab; ++i) ptrs[i] = (pieces[i] = "<" + std::to_string(i) + ">").c_str();
    const bool qwen = c.vocab_file == "ggml-vocab-qwen2.gguf"; // the real files' ids
    const bool phi3 = c.vocab_file == "ggml-vocab-phi-3.gguf";
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), n_vocab);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", qwen ? 151643 : 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", qwen ? 151643 : phi3 ? 32000 : 2);
}

// Writes the family's model to path, as tiny_family.py does; with the placeholder vocabulary of
// placeholder_n_vocab tokens when the vocabulary file is absent (then only the weights and the
// architecture's keys are tiny_family.py's).
inline void write_model(const Family & c, const std::string & path, uint32_t placeholder_n_vocab = 0) {
    const std::string vocab = vocab_path(c);
    gguf_context * g = gguf_init_empty();
    uint32_t n_vocab = placeholder_n_vocab;
    if (vocab.empty()) {
        REQUIRE_MESSAGE(n_vocab > 0, c.vocab_file << " is absent and no placeholder size was given");
        set_model_kvs(g, c, n_vocab);
        set_placeholder_vocab(g, c, n_vocab);
    } else {
        gguf_init_params vp = {true, nullptr};
        gguf_context * voc = gguf_init_from_file(vocab.c_str(), vp);
        REQUIRE(voc != nullptr);
        const int64_t tok = gguf_find_key(voc, "tokenizer.ggml.tokens");
        REQUIRE(tok >= 0);
        n_vocab = (uint32_t) gguf_get_arr_n(voc, tok);
        set_model_kvs(g, c, n_vocab);
        for (int64_t i = 0; i < gguf_get_n_kv(voc); ++i) {
            const std::string k = gguf_get_key(voc, i);
            if (k.rfind("tokenizer.", 0) == 0 && k != "tokenizer.ggml.add_bos_token") copy_key(g, voc, i);
        }
        gguf_free(voc);
    }
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", c.add_bos);
    if (c.no_space_prefix) gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", false);

    std::vector<Spec> specs = tensor_specs(c);
    std::vector<std::vector<float>> data;
    if (c.rope_freqs) {
        specs.insert(specs.begin(), {"rope_freqs.weight", {c.head_dim / 2}, 0, 0});
        data.push_back(rope_freq_factors(c.head_dim, c.rope_base));
    }
    if (c.longrope_ctx_orig > 0 && c.longrope_tables) { // tiny_family.py's ROPE_LONG, ROPE_SHORT
        REQUIRE(c.head_dim == 16);
        specs.insert(specs.begin() + (std::ptrdiff_t) data.size(), {"rope_factors_long.weight", {8}, 0, 0});
        data.push_back({1.0f, 1.25f, 2.0f, 4.0f, 8.0f, 16.0f, 24.0f, 32.0f});
        specs.insert(specs.begin() + (std::ptrdiff_t) data.size(), {"rope_factors_short.weight", {8}, 0, 0});
        data.push_back({1.0f, 1.0f, 1.125f, 1.25f, 1.5f, 2.0f, 2.5f, 3.0f});
    }
    for (size_t k = data.size(), number = 0; k < specs.size(); ++k, ++number) {
        for (int64_t & d : specs[k].ne) d = d < 0 ? n_vocab : d;
        const int64_t n = specs[k].ne[0] * (specs[k].ne.size() > 1 ? specs[k].ne[1] : 1);
        data.push_back(gen_tensor(c.seed, number, (size_t) n, specs[k].scale, specs[k].offset));
    }
    ggml_init_params ip = {ggml_tensor_overhead() * (specs.size() + 1), nullptr, true};
    ggml_context * gctx = ggml_init(ip);
    for (size_t k = 0; k < specs.size(); ++k) {
        ggml_tensor * t = ggml_new_tensor(gctx, GGML_TYPE_F32, (int) specs[k].ne.size(), specs[k].ne.data());
        ggml_set_name(t, specs[k].name.c_str());
        t->data = data[k].data();
        gguf_add_tensor(g, t);
    }
    REQUIRE(gguf_write_to_file(g, path.c_str(), false));
    gguf_free(g);
    ggml_free(gctx);
}

inline uint64_t fnv1a(const std::string & s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
    return h;
}

// ---- llama.cpp's reference -----------------------------------------------------------------------

struct Row {
    float max_abs, gap;
    int32_t argmax;
    std::vector<int32_t> top_ids;
    std::vector<float> top, at_ids; // logits of top_ids and of Ref::ids
};

struct Ref {
    std::string note, prompt;
    uint64_t model_fnv = 0;
    int32_t n_vocab = 0;
    std::vector<int32_t> prompt_ids, greedy, ids;
    std::vector<Row> rows;
};

struct Reader {
    std::string s;
    size_t pos = 0;
    template <typename T> T get() {
        REQUIRE(pos + sizeof(T) <= s.size());
        uint64_t u = 0;
        for (size_t i = 0; i < sizeof(T); ++i) u |= (uint64_t) (uint8_t) s[pos + i] << (8 * i);
        pos += sizeof(T);
        T v;
        std::memcpy(&v, &u, sizeof(T)); // the low bytes: little-endian hosts only, as everywhere here
        return v;
    }
    std::string str() {
        const uint32_t n = get<uint32_t>();
        REQUIRE(pos + n <= s.size());
        pos += n;
        return s.substr(pos - n, n);
    }
    std::vector<int32_t> ints(int32_t n) {
        std::vector<int32_t> v((size_t) n);
        for (int32_t & x : v) x = get<int32_t>();
        return v;
    }
    std::vector<float> logits(int32_t n, float max_abs) {
        std::vector<float> v((size_t) n);
        for (float & x : v) x = (float) get<int16_t>() * max_abs / 32767.0f;
        return v;
    }
};

inline std::string ref_path(const std::string & name) {
    return std::string(KVG_SOURCE_DIR) + "/tests/fixtures/family/" + name + ".ref.bin";
}

inline Ref read_ref(const std::string & name) {
    Reader r;
    r.s = read_file(ref_path(name));
    REQUIRE_MESSAGE(r.s.rfind("KVGFAM01", 0) == 0, "not a family reference: " << ref_path(name));
    r.pos = 8;
    Ref ref;
    ref.note = r.str();
    ref.model_fnv = r.get<uint64_t>();
    ref.prompt = r.str();
    ref.n_vocab = r.get<int32_t>();
    const int32_t n_prompt = r.get<int32_t>(), n_greedy = r.get<int32_t>();
    const int32_t n_ids = r.get<int32_t>(), n_top = r.get<int32_t>();
    ref.prompt_ids = r.ints(n_prompt);
    ref.greedy = r.ints(n_greedy);
    ref.ids = r.ints(n_ids);
    for (int32_t p = 0; p < n_prompt + n_greedy; ++p) {
        Row row;
        row.max_abs = r.get<float>();
        row.argmax = r.get<int32_t>();
        row.gap = r.get<float>();
        row.top_ids = r.ints(n_top);
        row.top = r.logits(n_top, row.max_abs);
        row.at_ids = r.logits(n_ids, row.max_abs);
        ref.rows.push_back(std::move(row));
    }
    CHECK(r.pos == r.s.size());
    return ref;
}

// Removes the model file however the test case ends (a failed REQUIRE throws): 40-85 MB each.
struct TempFile {
    std::string path;
    ~TempFile() { std::remove(path.c_str()); }
};

} // namespace family_twin
