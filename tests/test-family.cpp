// The model families of issue 45 against llama.cpp: tiny random f32 models written with
// llama.cpp's keys and tensor names and a real vocabulary give the same prompt token ids, the
// same greedy ids and the same logits (within 1e-3 of the largest |logit|) as llama.cpp.
//
// The models are not stored: the test writes each one from its seed with a twin of
// scripts/tiny_family.py's generator (the file's 64-bit FNV-1a must equal that of the file
// llama.cpp ran, so both wrote the same bytes), then reads llama.cpp's reference from
// tests/fixtures/family/FAMILY.ref.bin, made by scripts/llama-ref.cpp (scripts/README-family.md).
//
// FAMILY.ref.bin, little-endian:
//   char[8]  "KVGFAM01"
//   u32 n, char[n]  note (family, llama.cpp commit)
//   u64      FNV-1a 64 of the model file llama.cpp loaded
//   u32 n, char[n]  the prompt text (tokenized with add_special = true, parse_special = false)
//   i32      n_vocab, n_prompt, n_greedy, n_ids, n_top
//   i32      prompt[n_prompt], greedy[n_greedy], ids[n_ids] (ids: sorted; the prompt's and the
//            greedy tokens and 384 drawn from a fixed seed)
//   then per position p = 0 .. n_prompt + n_greedy - 1 (the token decoded at p is prompt[p], then
//   greedy[p - n_prompt]; greedy[k] is the argmax at position n_prompt - 1 + k):
//     f32 max_abs (largest |logit|), i32 argmax, f32 gap (top-1 minus top-2 logit)
//     i32 top_ids[n_top] (best first), i16 top_q[n_top], i16 q[n_ids]
//   A logit is q * max_abs / 32767 (rounded to nearest: off by at most 1.6e-5 of max_abs).
//
// A family the runtime does not implement yet (check_family's `missing`) is only written and
// checked against the file llama.cpp ran, unless KVG_FAMILY_ALL=1. The qwen and phi-3
// vocabularies are not in ../shared/vocab: set LLAMA_CPP_MODELS to llama.cpp's models/ folder
// (without it those families are skipped).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"
#include "vocab-test-common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

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
};

// FAMILIES of tiny_family.py (the settings that reach the file): what each changes from llama3.
Family family(const std::string & name) {
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
    const bool known = name == "llama3" || name == "llama3-norf" || name == "llama3-yarn" || f.arch != "llama";
    REQUIRE_MESSAGE(known, "unknown family " << name);
    return f;
}

// The vocabulary: ../shared/vocab, else $LLAMA_CPP_MODELS (llama.cpp's models/ folder); "" if absent.
std::string vocab_path(const Family & c) {
    std::vector<std::string> dirs = {shared_dir() + "/vocab"};
    if (const char * e = std::getenv("LLAMA_CPP_MODELS")) dirs.push_back(e);
    for (const std::string & d : dirs) {
        if (std::ifstream(d + "/" + c.vocab_file)) return d + "/" + c.vocab_file;
    }
    return "";
}

uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// gen_tensor: offset + scaled hash is exact in double, the cast to float rounds as numpy's does.
std::vector<float> gen_tensor(uint64_t seed, uint64_t number, size_t n, double scale, double offset) {
    const uint64_t stream = splitmix64((seed << 32) + number);
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) {
        const double u = (double) (splitmix64(stream + i) >> 40) * 0x1p-24;
        w[i] = (float) (offset + (u - 0.5) * scale);
    }
    return w;
}

// rope_freq_factors: Llama 3's per-pair factors with original context 256, rounded to 1/256.
std::vector<float> rope_freq_factors(int head_dim, double base) {
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
std::vector<Spec> tensor_specs(const Family & c) {
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
        s.push_back({p + "ffn_norm.weight", {e}, 0.5, 1.0});
        if (c.fused) {
            s.push_back({p + "ffn_up.weight", {e, 2 * ff}, 0.5, 0.0});
        } else {
            s.push_back({p + "ffn_gate.weight", {e, ff}, 0.5, 0.0});
            s.push_back({p + "ffn_up.weight", {e, ff}, 0.5, 0.0});
        }
        s.push_back({p + "ffn_down.weight", {ff, e}, 0.25, 0.0});
    }
    return s;
}

// Copies key i of src to dst with its type (a vocabulary's keys are scalars, strings and
// arrays of strings or numbers).
void copy_key(gguf_context * dst, const gguf_context * src, int64_t i) {
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
void set_model_kvs(gguf_context * g, const Family & c, uint32_t n_vocab) {
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
}

// Writes the family's model to path, as tiny_family.py does.
void write_model(const Family & c, const std::string & path) {
    gguf_init_params vp = {true, nullptr};
    gguf_context * voc = gguf_init_from_file(vocab_path(c).c_str(), vp);
    REQUIRE(voc != nullptr);
    const int64_t tok = gguf_find_key(voc, "tokenizer.ggml.tokens");
    REQUIRE(tok >= 0);
    const uint32_t n_vocab = (uint32_t) gguf_get_arr_n(voc, tok);
    gguf_context * g = gguf_init_empty();
    set_model_kvs(g, c, n_vocab);
    for (int64_t i = 0; i < gguf_get_n_kv(voc); ++i) {
        const std::string k = gguf_get_key(voc, i);
        if (k.rfind("tokenizer.", 0) == 0 && k != "tokenizer.ggml.add_bos_token") copy_key(g, voc, i);
    }
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", c.add_bos);
    gguf_free(voc);

    std::vector<Spec> specs = tensor_specs(c);
    std::vector<std::vector<float>> data;
    if (c.rope_freqs) {
        specs.insert(specs.begin(), {"rope_freqs.weight", {c.head_dim / 2}, 0, 0});
        data.push_back(rope_freq_factors(c.head_dim, c.rope_base));
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

uint64_t fnv1a(const std::string & s) {
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

std::string ref_path(const std::string & name) {
    return std::string(KVG_SOURCE_DIR) + "/tests/fixtures/family/" + name + ".ref.bin";
}

Ref read_ref(const std::string & name) {
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

// ---- the comparison ------------------------------------------------------------------------------

struct Result {
    double max_rel = 0; // largest |ours - llama.cpp| / llama.cpp's max |logit|, over every stored logit
    int worst_pos = -1, n_greedy_checked = 0, first_greedy_diff = -1;
};

// Largest difference of one position's stored logits, relative to llama.cpp's max |logit|.
double row_diff(const Row & row, const std::vector<int32_t> & ids, const float * l, int n_vocab) {
    float our_max = 0;
    for (int i = 0; i < n_vocab; ++i) our_max = std::max(our_max, std::fabs(l[i]));
    double d = std::fabs(our_max - row.max_abs);
    for (size_t k = 0; k < ids.size(); ++k) d = std::max(d, (double) std::fabs(l[ids[k]] - row.at_ids[k]));
    for (size_t k = 0; k < row.top_ids.size(); ++k) {
        d = std::max(d, (double) std::fabs(l[row.top_ids[k]] - row.top[k]));
    }
    return d / row.max_abs;
}

// Decodes llama.cpp's tokens one at a time from position 0 (its prompt ids, then its greedy ids,
// so that a near-tie cannot shift the later positions) and compares every position.
Result compare(kvg_model * m, const Ref & ref) {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 256;
    p.n_threads = 1;
    p.kv_type = KVG_KV_F16;
    p.attn = KVG_ATTN_MATMUL; // llama.cpp ran with flash attention off
    char err[512] = "";
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    INFO(err);
    REQUIRE(c != nullptr);
    std::vector<int32_t> tokens = ref.prompt_ids;
    tokens.insert(tokens.end(), ref.greedy.begin(), ref.greedy.end());
    const size_t n_prompt = ref.prompt_ids.size();
    Result res;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const float * l = kvg_decode(c, &tokens[i], 1, (int32_t) i, err, sizeof err);
        REQUIRE_MESSAGE(l != nullptr, err);
        const Row & row = ref.rows[i];
        const double d = row_diff(row, ref.ids, l, ref.n_vocab);
        if (d > res.max_rel) res.max_rel = d, res.worst_pos = (int) i;
        const size_t k = i + 1 - n_prompt; // greedy[k] is this position's argmax
        if (i + 1 >= n_prompt && k < ref.greedy.size() && row.gap > 1e-3f) {
            ++res.n_greedy_checked;
            const int32_t ours = kvg_argmax(l, ref.n_vocab);
            if (ours != ref.greedy[k] && res.first_greedy_diff < 0) res.first_greedy_diff = (int) k;
        }
    }
    kvg_context_free(c);
    return res;
}

// The prompt in one decode with flash attention and an f32 cache (the batched path: every piece
// of the layer on many rows at once) -> the last prompt position's difference.
double batched_prompt_diff(kvg_model * m, const Ref & ref) {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 256;
    p.n_threads = 1;
    p.kv_type = KVG_KV_F32;
    p.attn = KVG_ATTN_FLASH;
    char err[512] = "";
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    INFO(err);
    REQUIRE(c != nullptr);
    const int32_t n = (int32_t) ref.prompt_ids.size();
    const float * l = kvg_decode(c, ref.prompt_ids.data(), n, 0, err, sizeof err);
    REQUIRE_MESSAGE(l != nullptr, err);
    const double d = row_diff(ref.rows[(size_t) n - 1], ref.ids, l, ref.n_vocab);
    kvg_context_free(c);
    return d;
}

// The prompt's token ids from the tokenizer alone (vocab_only: it loads whatever the architecture),
// as a user tokenizes (BOS as the file says), against llama.cpp's.
void check_tokens(const std::string & path, const Ref & ref) {
    kvg_model * v = load_vocab(path);
    std::vector<kvg_token> toks(ref.prompt.size() + 8);
    const int32_t n = kvg_tokenize(v, ref.prompt.c_str(), true, toks.data(), (int32_t) toks.size());
    kvg_model_free(v);
    REQUIRE(n > 0);
    toks.resize((size_t) n);
    size_t i = 0;
    while (i < toks.size() && i < ref.prompt_ids.size() && toks[i] == ref.prompt_ids[i]) ++i;
    INFO("first difference at " << i << ": ours " << (i < toks.size() ? toks[i] : -1) << ", llama.cpp's "
                                << (i < ref.prompt_ids.size() ? ref.prompt_ids[i] : -1) << " (" << toks.size()
                                << " and " << ref.prompt_ids.size() << " tokens)");
    CHECK(toks == std::vector<kvg_token>(ref.prompt_ids.begin(), ref.prompt_ids.end()));
}

void check_logits(const std::string & path, const Ref & ref, const std::string & name) {
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    REQUIRE(kvg_model_n_vocab(m) == ref.n_vocab);
    const Result res = compare(m, ref);
    MESSAGE(name << " (" << ref.note << "): largest logit difference " << res.max_rel
                 << " of the largest |logit| (position " << res.worst_pos << " of " << ref.rows.size() << "); "
                 << res.n_greedy_checked << " greedy ids checked, first difference at " << res.first_greedy_diff);
    CHECK(res.max_rel <= 1e-3);
    CHECK(res.first_greedy_diff == -1);
    const double batched = batched_prompt_diff(m, ref);
    MESSAGE(name << ": the prompt in one batch (flash attention): last position off by " << batched);
    CHECK(batched <= 1e-3);
    kvg_model_free(m);
}

// Removes the model file however the test case ends (a failed REQUIRE throws): 40-85 MB each.
struct TempFile {
    std::string path;
    ~TempFile() { std::remove(path.c_str()); }
};

bool run_all() {
    const char * e = std::getenv("KVG_FAMILY_ALL");
    return e && std::string(e) == "1";
}

// Writes the family's model and checks it is the file llama.cpp ran; then, if the runtime
// implements the family (or KVG_FAMILY_ALL=1), compares tokens, greedy ids and logits. missing:
// what the runtime lacks for this family, NULL when it has all.
void check_family(const std::string & name, const char * missing) {
    const Family fam = family(name);
    const Ref ref = read_ref(name);
    if (vocab_path(fam).empty()) {
        MESSAGE("skipped " << name << ": " << fam.vocab_file << " is neither in " << shared_dir()
                           << "/vocab nor in $LLAMA_CPP_MODELS (llama.cpp's models/)");
        return;
    }
    const TempFile file{temp_path("family", name + ".gguf")};
    const std::string & path = file.path;
    write_model(fam, path);
    CHECK_MESSAGE(fnv1a(read_file(path)) == ref.model_fnv,
                  "the C++ twin did not write the bytes of tiny_family.py's " << name);
    if (missing && !run_all()) {
        MESSAGE("skipped " << name << " (the model file is checked): kvgraph does not implement "
                           << std::string(missing) << " yet (issue 45); KVG_FAMILY_ALL=1 runs it");
        return;
    }
    check_tokens(path, ref);
    check_logits(path, ref, name);
}

} // namespace

TEST_CASE("llama3 control: GQA, tied output, Llama-3 BPE vocabulary, rope base 500000, no rope_freqs") {
    check_family("llama3-norf", nullptr);
}

TEST_CASE("llama3 with rope_freqs.weight (Llama 3's frequency factors)") {
    check_family("llama3", nullptr);
}

TEST_CASE("llama3 with YaRN rope scaling (factor 4 over an original context of 32)") {
    check_family("llama3-yarn", nullptr);
}

TEST_CASE("smollm3: no rope on every fourth layer") { check_family("smollm3", nullptr); }

TEST_CASE("qwen2: Q/K/V biases, NEOX rope, no BOS, untied output") { check_family("qwen2", nullptr); }

TEST_CASE("qwen3: per-head Q/K norms, head size 32 with n_embd 64, tied output") { check_family("qwen3", nullptr); }

TEST_CASE("phi3: fused QKV and gate+up matrices, NEOX rope, SentencePiece vocabulary, untied output") {
    check_family("phi3", nullptr);
}
