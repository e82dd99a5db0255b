// llama.cpp's tokenizer test vectors (../shared/vocab) through the public API: each
// vocab-only GGUF loads with vocab_only, and every test string tokenizes (no BOS) to exactly
// the ids llama.cpp gives, for the Llama-2 SentencePiece vocabulary and the Llama-3
// byte-level BPE one; the ids also detokenize back to the string.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-common.h"

#include <algorithm>
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
