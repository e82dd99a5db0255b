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
// vocabularies are not in ../shared/vocab: set LLAMA_CPP_MODELS to llama.cpp's models/ folder.
// Without them a placeholder vocabulary of the reference's size stands in (family-common.h):
// the weights are the same, the logits are compared, the file's FNV and the tokenizer are not.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "family-common.h"
#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"
#include "test-runtime-common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace family_twin;

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
// so that a near-tie cannot shift the later positions) and compares every position. window > 0:
// a ring cache where a token attends the last `window` positions only (sliding-window attention).
Result compare(kvg_model * m, const Ref & ref, int window = 0, int n_ctx = 256, kvg_attn_impl attn = KVG_ATTN_MATMUL) {
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = n_ctx;
    if (window > 0) p.kv_mode = KVG_KV_RING, p.n_window = window, p.n_sink = 0;
    p.n_threads = 1;
    p.kv_type = KVG_KV_F16;
    p.attn = attn; // llama.cpp ran with flash attention off
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

// A variant of a family's model (fam, run with a sliding window when window > 0, in a context of
// n_ctx) against llama.cpp's reference of the family itself: its largest logit difference. The
// controls that show what a passing case checks.
double variant_diff(const Family & fam, int window, const char * what, int n_ctx = 256) {
    const Ref ref = read_ref(fam.name);
    const TempFile file{temp_path("family", fam.name + "-variant.gguf")};
    write_model(fam, file.path, (uint32_t) ref.n_vocab);
    char err[512] = "";
    kvg_model * m = kvg_model_load(file.path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    REQUIRE_MESSAGE(m != nullptr, err);
    const Result res = compare(m, ref, window, n_ctx);
    kvg_model_free(m);
    MESSAGE(fam.name << " " << std::string(what) << ": largest logit difference " << res.max_rel
                     << " of the largest |logit|");
    return res.max_rel;
}

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
    const bool real_vocab = !vocab_path(fam).empty();
    const TempFile file{temp_path("family", name + ".gguf")};
    const std::string & path = file.path;
    write_model(fam, path, (uint32_t) ref.n_vocab);
    if (real_vocab) {
        CHECK_MESSAGE(fnv1a(read_file(path)) == ref.model_fnv,
                      "the C++ twin did not write the bytes of tiny_family.py's " << name);
    } else {
        MESSAGE(name << ": " << fam.vocab_file << " is neither in " << shared_dir()
                     << "/vocab nor in $LLAMA_CPP_MODELS (llama.cpp's models/): a placeholder vocabulary of "
                     << ref.n_vocab << " tokens stands in; the file's FNV and the tokenizer are not checked");
    }
    if (missing && !run_all()) {
        MESSAGE("skipped " << name << " (the model file is checked): kvgraph does not implement "
                           << std::string(missing) << " yet (issue 45); KVG_FAMILY_ALL=1 runs it");
        return;
    }
    if (real_vocab) check_tokens(path, ref);
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

TEST_CASE("phi3-long: LongRoPE's long table (a context of 256 over an original 128) and attention factor") {
    check_family("phi3-long", nullptr);
}

TEST_CASE("phi3-short: LongRoPE's short table (a context of 256 within an original 512)") {
    check_family("phi3-short", nullptr);
}

// The control: phi3-long's keys (attention factor, original context) without the two tables is
// far from llama.cpp's phi3-long, so the tables are what the passing case above checks.
TEST_CASE("phi3-long without rope_factors_long/short.weight differs from llama.cpp's phi3-long") {
    Family fam = family("phi3-long");
    fam.longrope_tables = false;
    CHECK(variant_diff(fam, 0, "without its tables") > 0.05);
}

// The table follows the context: phi3-long's file with an original context of 512 instead of 128
// (which changes nothing else: no YaRN) rotates with the long table, as llama.cpp's phi3-long
// did, in a context of 1024 positions, and with the short one in a context of 256.
TEST_CASE("LongRoPE's long table serves a context longer than the original one, the short table the others") {
    Family fam = family("phi3-long");
    fam.longrope_ctx_orig = 512;
    CHECK(variant_diff(fam, 0, "with an original context of 512, n_ctx 1024", 1024) <= 1e-3);
    CHECK(variant_diff(fam, 0, "with an original context of 512, n_ctx 256", 256) > 0.05);
}

TEST_CASE("mistral: llama with attention.sliding_window (ignored, as llama.cpp does), SentencePiece vocabulary") {
    check_family("mistral", nullptr);
}

// The control: mistral's window of 32 applied (a ring cache of 32 positions) is far from
// llama.cpp's full attention, so the passing case above shows the window is ignored.
TEST_CASE("mistral with its sliding window applied differs from llama.cpp's") {
    CHECK(variant_diff(family("mistral"), 32, "with a window of 32") > 0.05);
}

TEST_CASE("gemma2: GELU, post norms, scaled embeddings, soft-capped attention and logits, a window of 16") {
    check_family("gemma2", nullptr);
}

TEST_CASE("gemma3: Q/K norms, five of six layers in a window of 16 at rope base 10000, the sixth at 1e6 scaled") {
    check_family("gemma3", nullptr);
}

namespace {

// Logits of cont decoded after tokens, with the tokens decoded at 0 and then moved to [d, d + n)
// by kvg_seq_add (which rotates each layer's keys with that layer's rope base and scale). Rope
// and the window see only distances: every d must give the logits of d = 0, no shift.
std::vector<float> after_shift(kvg_model * m, kvg_kv_type type, const std::vector<int> & tokens,
                               const std::vector<int> & cont, int d) {
    const int nv = kvg_model_n_vocab(m), n = (int) tokens.size();
    kvg_context * c = new_ctx(m, model_params(m, type, KVG_ATTN_MATMUL));
    char err[512] = "";
    REQUIRE(kvg_decode(c, tokens.data(), n, 0, err, sizeof err));
    if (d != 0) REQUIRE_MESSAGE(kvg_seq_add(c, 0, 0, -1, d, err, sizeof err), err);
    REQUIRE(kvg_seq_pos_min(c, 0) == d);
    std::vector<float> out;
    for (int i = 0; i < (int) cont.size(); ++i) {
        const float * l = kvg_decode(c, &cont[i], 1, d + n + i, err, sizeof err);
        REQUIRE_MESSAGE(l != nullptr, err);
        out.insert(out.end(), l, l + nv);
    }
    kvg_context_free(c);
    return out;
}

void check_shift(const std::string & name) {
    const Family fam = family(name);
    const TempFile file{temp_path("family", name + "-shift.gguf")};
    write_model(fam, file.path);
    kvg_model * m = load_model_file(file.path);
    const int nv = kvg_model_n_vocab(m);
    // 40 tokens: more than the window of 16; moved by 37 positions
    const std::vector<int> tokens = random_tokens(40, nv, 5), cont = random_tokens(6, nv, 6);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16}) {
        CAPTURE(type);
        const std::vector<float> a = after_shift(m, type, tokens, cont, 0);
        const std::vector<float> b = after_shift(m, type, tokens, cont, 37);
        float top = 0.0f;
        for (float x : a) top = std::max(top, std::fabs(x));
        const float diff = max_diff(a.data(), b.data(), a.size());
        MESSAGE(name << ", kv type " << type << ": shifted by 37 vs not shifted: max |dlogit| " << diff << " of "
                     << top);
        CHECK(diff <= 1e-3f * top);
    }
    kvg_model_free(m);
}

} // namespace

TEST_CASE("kvg_seq_add on gemma2 and gemma3: each layer's keys rotated with its own rope base and scale") {
    check_shift("gemma2");
    check_shift("gemma3");
}

namespace {

// The gemma3 twin with one key changed by edit, then loaded: the loader's message ("" if loaded).
template <typename Edit> std::string load_edited_gemma3(const std::string & tag, Edit edit) {
    const TempFile file{temp_path("family", "gemma3-" + tag + ".gguf")};
    write_model(family("gemma3"), file.path);
    ggml_context * data = nullptr;
    gguf_context * src = gguf_init_from_file(file.path.c_str(), {false, &data});
    REQUIRE(src != nullptr);
    gguf_context * g = gguf_init_empty();
    gguf_set_kv(g, src);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) gguf_add_tensor(g, t);
    edit(g);
    REQUIRE(gguf_write_to_file(g, file.path.c_str(), false));
    gguf_free(g);
    gguf_free(src);
    ggml_free(data);
    char err[512] = "";
    kvg_model * m = kvg_model_load(file.path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    kvg_model_free(m);
    return m ? "" : err;
}

} // namespace

TEST_CASE("gemma keys: a window pattern per layer is read; a short one or a bad local rope base is refused") {
    // llama.cpp's bools, one per layer: all global is allowed
    CHECK(load_edited_gemma3("pattern", [](gguf_context * g) {
              const bool v[6] = {false, false, false, false, false, false};
              gguf_set_arr_data(g, "gemma3.attention.sliding_window_pattern", GGUF_TYPE_BOOL, v, 6);
          }) == "");
    const std::string shrt = load_edited_gemma3("short", [](gguf_context * g) {
        const bool v[2] = {true, false};
        gguf_set_arr_data(g, "gemma3.attention.sliding_window_pattern", GGUF_TYPE_BOOL, v, 2);
    });
    CHECK(shrt.find("gemma3.attention.sliding_window_pattern is not an array of 6 bools") != std::string::npos);
    const std::string base =
        load_edited_gemma3("base", [](gguf_context * g) { gguf_set_val_f32(g, "gemma3.rope.freq_base_swa", -1.0f); });
    CHECK(base.find("sliding-window rope base -1 is invalid") != std::string::npos);
}

// The window's mask on the flash path, one token at a time (the cases above decode one at a time
// with matmul attention and run the prompt at once with flash attention).
TEST_CASE("gemma2 and gemma3 decoded one token at a time with flash attention") {
    for (const char * name : {"gemma2", "gemma3"}) {
        const Ref ref = read_ref(name);
        const TempFile file{temp_path("family", std::string(name) + "-flash.gguf")};
        write_model(family(name), file.path);
        kvg_model * m = load_model_file(file.path);
        const Result res = compare(m, ref, 0, 256, KVG_ATTN_FLASH);
        MESSAGE(std::string(name) << ", flash attention: largest logit difference " << res.max_rel << " (position "
                                  << res.worst_pos << "), first greedy difference at " << res.first_greedy_diff);
        CHECK(res.max_rel <= 1e-3);
        CHECK(res.first_greedy_diff == -1);
        kvg_model_free(m);
    }
}
