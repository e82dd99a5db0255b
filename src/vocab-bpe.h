// Byte-level BPE, as GGUF tokenizer.ggml.model = "gpt2" vocabularies use it (Llama 3, GPT-2
// and their kin): the text is split by a pre-tokenizer (tokenizer.ggml.pre), each piece's
// bytes are written as printable characters (GPT-2's byte-to-unicode map), adjacent
// symbols are merged by the rank of tokenizer.ggml.merges (lowest first), and the result
// looked up in the vocabulary (Llama 3 takes a piece that is itself a token whole, without
// merging: its tokenizer's ignore_merges). Decoding maps the characters back to bytes.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvg {

struct PreTokenizer; // the split patterns of one tokenizer.ggml.pre (vocab-bpe.cpp)

class BpeTokenizer {
public:
    // tokens: the vocabulary in its byte-to-unicode form; types as in vocab.h (control
    // tokens decode to ""); merges: "left right" pairs, best first; pre: the pre-tokenizer
    // (tokenizer.ggml.pre: llama-bpe, qwen2, qwen35, gpt-2/default, mpt, starcoder, refact,
    // command-r, smollm, falcon, deepseek-llm, deepseek-coder, ... see vocab-bpe.cpp).
    // false + message on bad input or an unknown pre-tokenizer.
    bool init(const std::vector<std::string> & tokens, const std::vector<int> & types,
              const std::vector<std::string> & merges, const std::string & pre, std::string * err);
    std::vector<int> encode(const std::string & text) const; // no BOS
    std::vector<std::string> pre_tokenize(const std::string & text) const; // the pieces encode() merges within
    const std::string & token_bytes(int id) const;            // what id decodes to; "" if out of range

private:
    const PreTokenizer * pre_ = nullptr; // set by init
    std::unordered_map<std::string, int> token_id_;
    std::unordered_map<std::string, int> merge_rank_; // "left right" -> rank
    std::vector<std::string> bytes_of_;               // id -> decoded bytes
    std::string byte_char_[256];                      // byte -> its printable character (UTF-8)
    std::vector<std::pair<size_t, size_t>> split(const std::string & text) const; // pre-tokens: [begin, end)
    void encode_word(const std::string & word, std::vector<int> & out) const;
};

} // namespace kvg
