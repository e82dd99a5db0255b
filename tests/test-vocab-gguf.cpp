// llama.cpp's tokenizer test vectors (../shared/vocab) through the public API: each
// vocab-only GGUF loads with vocab_only, and every test string tokenizes (no BOS) to exactly
// the ids llama.cpp gives, for the Llama-2 SentencePiece vocabulary and the Llama-3
// byte-level BPE one; the ids also detokenize back to the string.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"
#include "vocab-test-common.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string g_vocab_dir; // where check_vocab looks: ../shared/vocab unless a test sets it
std::string vocab_path(const std::string & name) { return (g_vocab_dir.empty() ? shared_dir() + "/vocab" : g_vocab_dir) + "/" + name; }

std::string slurp(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> split_cases(const std::string & inp) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t next; (next = inp.find(sep, at)) != std::string::npos; at = next + sep.size()) out.push_back(inp.substr(at, next - at));
    return out;
}

std::vector<std::vector<int>> expected_ids(const std::string & out) {
    std::vector<std::vector<int>> all;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream nums(line);
        std::vector<int> ids;
        for (int x; nums >> x;) ids.push_back(x);
        all.push_back(ids);
    }
    return all;
}

// Checks every case of NAME.inp/.out; returns false without checking if the loader
// refuses the vocabulary and `refusal_ok` (its message is then printed).
bool check_vocab(const std::string & name, bool round_trip, bool refusal_ok = false) {
    kvg_model_params p = kvg_model_default_params();
    p.vocab_only = true;
    char err[512] = "";
    kvg_model * m = kvg_model_load(vocab_path(name).c_str(), nullptr, p, err, sizeof err);
    INFO(err);
    if (!m && refusal_ok) {
        MESSAGE(name << ": not loaded: " << err);
        return false;
    }
    REQUIRE(m != nullptr);
    CHECK(kvg_model_has_vocab(m));
    CHECK(kvg_context_new(m, kvg_context_default_params(), err, sizeof err) == nullptr); // no weights
    const std::vector<std::string> cases = split_cases(slurp(vocab_path(name + ".inp")));
    const std::vector<std::vector<int>> want = expected_ids(slurp(vocab_path(name + ".out")));
    REQUIRE(cases.size() == want.size());
    int passed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(i);
        CAPTURE(cases[i]);
        std::vector<kvg_token> got(cases[i].size() + 16);
        const int n = kvg_tokenize(m, cases[i].c_str(), false, got.data(), (int) got.size());
        REQUIRE(n >= 0);
        got.resize(n);
        CHECK(got == std::vector<kvg_token>(want[i].begin(), want[i].end()));
        passed += got == std::vector<kvg_token>(want[i].begin(), want[i].end());
        if (round_trip && n > 0) {
            std::vector<char> buf(cases[i].size() * 4 + 64);
            const int len = kvg_detokenize(m, got.data(), n, buf.data(), (int) buf.size());
            REQUIRE(len >= 0);
            CHECK(std::string(buf.data(), len) == cases[i]);
        }
    }
    MESSAGE(name << ": " << passed << " / " << cases.size() << " cases exact");
    kvg_model_free(m);
    return true;
}

} // namespace

TEST_CASE("Llama-2 SentencePiece vocabulary: llama.cpp's test vectors") { check_vocab("ggml-vocab-llama-spm.gguf", false); }
TEST_CASE("Llama-3 byte-level BPE vocabulary: llama.cpp's test vectors") { check_vocab("ggml-vocab-llama-bpe.gguf", true); }

// llama.cpp keeps test vectors for more vocabularies in its models/ folder; they are not in
// ../shared, so this runs where KVG_LLAMA_CPP_VOCAB_DIR points at such a folder. Every
// vocabulary kvgraph loads must pass every case; the ones it refuses are listed.
TEST_CASE("llama.cpp's other vocabularies (KVG_LLAMA_CPP_VOCAB_DIR)") {
    const char * dir = std::getenv("KVG_LLAMA_CPP_VOCAB_DIR");
    if (!dir || !*dir) {
        MESSAGE("KVG_LLAMA_CPP_VOCAB_DIR not set: skipped");
        return;
    }
    g_vocab_dir = dir;
    std::vector<std::string> names;
    for (const auto & e : std::filesystem::directory_iterator(dir)) {
        const std::string f = e.path().filename().string();
        if (f.size() > 9 && f.compare(f.size() - 9, 9, ".gguf.inp") == 0) names.push_back(f.substr(0, f.size() - 4));
    }
    std::sort(names.begin(), names.end());
    int loaded = 0;
    for (const std::string & n : names) {
        CAPTURE(n);
        loaded += check_vocab(n, false, true);
    }
    MESSAGE(loaded << " of " << names.size() << " vocabularies loaded and checked");
    g_vocab_dir.clear();
}

// ---- the file's choices about special tokens ----------------------------------------------------

namespace {

// A copy of a ../shared vocabulary with keys changed by edit.
template <class Edit> std::string edited_vocab(const std::string & name, const std::string & tag, Edit edit) {
    return edited_gguf(vocab_path(name), tag, edit);
}

std::vector<kvg_token> tokenize(const kvg_model * m, const std::string & text, bool add_bos) {
    std::vector<kvg_token> ids(text.size() + 16);
    const int n = kvg_tokenize(m, text.c_str(), add_bos, ids.data(), (int) ids.size());
    REQUIRE(n >= 0);
    ids.resize(n);
    return ids;
}

std::string detokenize(const kvg_model * m, const std::vector<kvg_token> & ids) {
    std::vector<char> buf(ids.size() * 64 + 64);
    const int len = kvg_detokenize(m, ids.data(), (int) ids.size(), buf.data(), (int) buf.size());
    REQUIRE(len >= 0);
    return std::string(buf.data(), len);
}

// Index of piece in the file's token list, read with gguf alone.
int file_token_id(const std::string & path, const std::string & piece) {
    gguf_init_params gp = {true, nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    REQUIRE(g != nullptr);
    const int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens");
    int id = -1;
    for (size_t i = 0; k >= 0 && i < gguf_get_arr_n(g, k) && id < 0; ++i) {
        if (piece == gguf_get_arr_str(g, k, i)) id = (int) i;
    }
    gguf_free(g);
    return id;
}

} // namespace

// SentencePiece without the dummy prefix (Gemma's files): " " + s normalizes to what s does with
// the prefix, so llama.cpp's ids for s are the reference; decoding drops no leading space.
TEST_CASE("tokenizer.ggml.add_space_prefix = false") {
    const std::string name = "ggml-vocab-llama-spm.gguf";
    const std::string path = edited_vocab(
        name, "no-prefix", [](gguf_context * g) { gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", false); });
    kvg_model * m = load_vocab(path);
    const std::vector<std::string> cases = split_cases(slurp(vocab_path(name + ".inp")));
    const std::vector<std::vector<int>> want = expected_ids(slurp(vocab_path(name + ".out")));
    int checked = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        if (cases[i].empty()) continue;
        CAPTURE(cases[i]);
        CHECK(tokenize(m, " " + cases[i], false) == std::vector<kvg_token>(want[i].begin(), want[i].end()));
        ++checked;
    }
    CHECK(checked > 20);
    const std::vector<kvg_token> ids = tokenize(m, "The cat", false);
    REQUIRE(!ids.empty());
    CHECK(ids[0] == file_token_id(path, "The")); // not "▁The"
    CHECK(detokenize(m, ids) == "The cat");
    CHECK(detokenize(m, tokenize(m, " The cat", false)) == " The cat");
    kvg_model_free(m);
    std::remove(path.c_str());
}

// Qwen's files say add_bos_token = false: asking for BOS adds none (llama.cpp's add_special).
TEST_CASE("tokenizer.ggml.add_bos_token") {
    for (bool add : {false, true}) {
        CAPTURE(add);
        const std::string path =
            edited_vocab("ggml-vocab-llama-bpe.gguf", add ? "bos" : "no-bos",
                         [&](gguf_context * g) { gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", add); });
        kvg_model * m = load_vocab(path);
        const std::vector<kvg_token> plain = tokenize(m, "Hello world", false),
                                     asked = tokenize(m, "Hello world", true);
        CHECK(plain == tokenize(m, "Hello world", false));
        REQUIRE(asked.size() == plain.size() + (add ? 1 : 0));
        if (add) CHECK(asked[0] == file_token_id(path, "<|begin_of_text|>"));
        CHECK(std::equal(plain.begin(), plain.end(), asked.end() - (long) plain.size()));
        kvg_model_free(m);
        std::remove(path.c_str());
    }
}

// The end-of-generation set: EOS, the eot/eom keys and the chat vocabularies' turn ends (the
// control-token names are llama.cpp's).
TEST_CASE("kvg_token_is_eog: Llama 3's end tokens and the eot/eom keys") {
    const std::string shared = vocab_path("ggml-vocab-llama-bpe.gguf");
    const int ordinary = file_token_id(shared, "Hello");
    REQUIRE(ordinary >= 0);
    const std::string path = edited_vocab("ggml-vocab-llama-bpe.gguf", "eot", [&](gguf_context * g) {
        gguf_set_val_u32(g, "tokenizer.ggml.eot_token_id", (uint32_t) ordinary + 1);
        gguf_set_val_u32(g, "tokenizer.ggml.eom_token_id", (uint32_t) ordinary + 2);
    });
    kvg_model * m = load_vocab(shared);
    for (const std::string end : {"<|eot_id|>", "<|end_of_text|>"}) { // Llama 3.0: no <|eom_id|>
        CAPTURE(end);
        const int id = file_token_id(shared, end);
        REQUIRE(id >= 0);
        CHECK(kvg_token_is_eog(m, id));
    }
    CHECK(kvg_token_is_eog(m, kvg_model_eos(m)));
    CHECK_FALSE(kvg_token_is_eog(m, file_token_id(shared, "<|begin_of_text|>")));
    CHECK_FALSE(kvg_token_is_eog(m, ordinary));
    CHECK_FALSE(kvg_token_is_eog(m, -1));
    CHECK_FALSE(kvg_token_is_eog(m, kvg_model_n_vocab(m)));
    CHECK_FALSE(kvg_token_is_eog(nullptr, 0));
    kvg_model_free(m);
    kvg_model * keyed = load_vocab(path);
    CHECK(kvg_token_is_eog(keyed, ordinary + 1));
    CHECK(kvg_token_is_eog(keyed, ordinary + 2));
    CHECK_FALSE(kvg_token_is_eog(keyed, ordinary));
    kvg_model_free(keyed);
    std::remove(path.c_str());
}

// ---- control tokens in the text (parse_special) --------------------------------------------------

namespace {

struct SpecialCase {
    std::string vocab, text;
    bool add_bos = false, parse = false;
    std::vector<kvg_token> ids;
};

std::string unescape(const std::string & s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) out += s[++i] == 'n' ? '\n' : s[i];
        else out += s[i];
    }
    return out;
}

// tests/fixtures/special-tokens.txt: "VOCAB ADD_SPECIAL PARSE_SPECIAL ID... | TEXT" per line.
std::vector<SpecialCase> special_cases() {
    std::istringstream lines(slurp(std::string(KVG_SOURCE_DIR) + "/tests/fixtures/special-tokens.txt"));
    std::vector<SpecialCase> all;
    for (std::string line; std::getline(lines, line);) {
        const size_t bar = line.find(" |");
        if (line.empty() || line[0] == '#' || bar == std::string::npos) continue;
        SpecialCase c;
        std::istringstream head(line.substr(0, bar));
        int add = 0, parse = 0;
        head >> c.vocab >> add >> parse;
        for (int x; head >> x;) c.ids.push_back(x);
        c.add_bos = add != 0;
        c.parse = parse != 0;
        c.text = unescape(line.size() > bar + 3 ? line.substr(bar + 3) : "");
        all.push_back(c);
    }
    return all;
}

} // namespace

// llama.cpp's llama_tokenize with parse_special on and off: kvg_tokenize_special gives the same
// ids, and kvg_tokenize is parse_special = false.
TEST_CASE("kvg_tokenize_special: control tokens in the text, as llama.cpp's parse_special") {
    const std::vector<SpecialCase> cases = special_cases();
    REQUIRE(cases.size() >= 40);
    int parsed = 0;
    for (const char * name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf"}) {
        kvg_model * m = load_vocab(vocab_path(name));
        for (const SpecialCase & c : cases) {
            if (c.vocab != name) continue;
            CAPTURE(name);
            CAPTURE(c.text);
            CAPTURE(c.add_bos);
            CAPTURE(c.parse);
            std::vector<kvg_token> got(c.text.size() + 16);
            const int n = kvg_tokenize_special(m, c.text.c_str(), c.add_bos, c.parse, got.data(), (int) got.size());
            REQUIRE(n >= 0);
            got.resize(n);
            CHECK(got == c.ids);
            if (!c.parse) CHECK(tokenize(m, c.text, c.add_bos) == c.ids);
            CHECK(kvg_tokenize_special(m, c.text.c_str(), c.add_bos, c.parse, nullptr, 0) == -n);
            parsed += c.parse;
        }
        kvg_model_free(m);
    }
    CHECK(parsed * 2 == (int) cases.size());
    CHECK(kvg_tokenize_special(nullptr, "<s>", true, true, nullptr, 0) == INT32_MIN);
}
