// llama.cpp's reference for tests/fixtures/special-tokens.txt (checked by tests/test-vocab-gguf.cpp):
// tokenizes a few chat-template strings with control tokens in them, with parse_special on and
// off and add_special on and off, for the two vocab-only GGUFs in ../shared/vocab.
// Not part of the build: it links llama.cpp, which lives outside the tree. Build it against a
// llama.cpp build directory (as scripts/llama-ref.cpp):
//   L=/work/peers/llama.cpp
//   g++ -O2 -std=c++17 scripts/llama-special-ref.cpp -I$L/include -I$L/ggml/include -L$L/build/bin \
//       -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o /work/peers/llama-special-ref
// Usage: llama-special-ref VOCAB_DIR > tests/fixtures/special-tokens.txt
//   Output: one line per case, "VOCAB ADD_SPECIAL PARSE_SPECIAL ID... | TEXT", TEXT with
//   backslash and newline escaped as \\ and \n.
#include "llama.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

const char * const kTexts[] = {
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>[INST] Hi [/INST]",
    "Hel<|eot_id|>lo wor</s>ld",               // a control token inside a word
    "a<|eot_id|><|start_header_id|>b</s><s>c", // two adjacent
    "Hi there<|eot_id|>",
    "Hi there</s>",
    " <s> spaced </s> \n",
    "<|eot_id", // incomplete: plain text
    "<s",
    "<unk> x <|reserved_special_token_0|>",
    "",
};

std::string escape(const std::string & s) {
    std::string out;
    for (char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s VOCAB_DIR\n", argv[0]);
        return 1;
    }
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    for (const char * name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf"}) {
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        llama_model * model = llama_model_load_from_file((std::string(argv[1]) + "/" + name).c_str(), mp);
        if (!model) {
            std::fprintf(stderr, "cannot load %s\n", name);
            return 1;
        }
        const llama_vocab * vocab = llama_model_get_vocab(model);
        for (const char * text : kTexts) {
            for (int add = 0; add < 2; ++add) {
                for (int parse = 0; parse < 2; ++parse) {
                    std::vector<llama_token> ids(std::string(text).size() + 8);
                    const int n = llama_tokenize(vocab, text, (int) std::string(text).size(), ids.data(),
                                                 (int) ids.size(), add, parse);
                    if (n < 0) return 1;
                    std::printf("%s %d %d", name, add, parse);
                    for (int i = 0; i < n; ++i) std::printf(" %d", ids[i]);
                    std::printf(" | %s\n", escape(text).c_str());
                }
            }
        }
        llama_model_free(model);
    }
    llama_backend_free();
    return 0;
}
