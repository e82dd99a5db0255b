// SentencePiece-style BPE tokenizer, as Llama-2 uses it.
//
// Pieces are stored in SentencePiece's canonical form: a space is "▁" (U+2581).
// llama2.c's tokenizer.bin writes spaces instead of "▁" and "\n<s>\n" for BOS;
// load_llama2c() converts both back, so a vocab looks the same whichever loader
// filled it (GGUF tokenizer.ggml.model = "llama" already uses "▁").
//
// No function throws or aborts on bad input: loaders return false + message,
// accessors return an empty value for an out-of-range id.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvg {

// Token types, numbered as SentencePiece / GGUF tokenizer.ggml.token_type.
enum TokenType : int {
    TOKEN_TYPE_UNDEFINED    = 0,  // treated as normal
    TOKEN_TYPE_NORMAL       = 1,
    TOKEN_TYPE_UNKNOWN      = 2,
    TOKEN_TYPE_CONTROL      = 3,
    TOKEN_TYPE_USER_DEFINED = 4,
    TOKEN_TYPE_UNUSED       = 5,
    TOKEN_TYPE_BYTE         = 6,
};

class BpeTokenizer;

class Vocab {
public:
    Vocab();

    // llama2.c tokenizer.bin: int32 max_token_length, then per token
    // float32 score, int32 len, len bytes. If expected_n_tokens > 0 exactly
    // that many tokens are read (trailing bytes are an error); otherwise tokens
    // are read until EOF. Ids 0/1/2 become unk/bos/eos; types are inferred.
    bool load_llama2c(const std::string& path, std::string* err, int expected_n_tokens = -1);

    // For the GGUF loader. scores may be empty (all 0); types may be empty
    // (inferred like llama2.c: "<0xNN>" byte, bos/eos control, unk unknown).
    // bos/eos/unk may be -1 (absent). On failure the vocab is left empty.
    bool init(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types,
              int bos, int eos, int unk, std::string* err);

    // Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2", vocab-bpe.h): tokens in their
    // byte-to-unicode form, merges "left right" best first, pre the pre-tokenizer name.
    // encode / decode / token_to_piece then follow that scheme (no dummy prefix).
    bool init_bpe(std::vector<std::string> tokens, std::vector<int> types, const std::vector<std::string>& merges,
                  const std::string& pre, int bos, int eos, std::string* err);

    // Llama-2 SentencePiece encoding: dummy-prefix space, ' ' -> "▁", split into
    // UTF-8 characters, merge the best-scoring adjacent pair (leftmost on ties)
    // until none is in the vocab, then byte-fallback for pieces not in it.
    // Invalid UTF-8 bytes are single-byte characters (SentencePiece would turn
    // them into U+FFFD first); this keeps decode(encode(s)) == s.
    // parse_special: the text of a control or unknown token in `text` is that token (leftmost,
    // longest match); the text between such matches is encoded as above, each SentencePiece
    // piece with its own dummy prefix (as llama.cpp's parse_special does).
    std::vector<int> encode(const std::string & text, bool add_bos, bool parse_special = false) const;

    // Text of one token: "▁" -> ' ', "<0xNN>" -> that byte, control -> "",
    // unknown -> " ⁇ " (SentencePiece's surface for <unk>), bad id -> "".
    std::string token_to_piece(int id) const;

    // Concatenation of token_to_piece, minus the dummy-prefix space of the first
    // text token (the first token that is not a control token).
    std::string decode(const std::vector<int>& ids) const;

    // Streaming form of decode(): the text `id` adds after `prev` (prev < 0 or
    // BOS means `id` starts the text). A byte token yields one raw byte, which
    // may be part of a UTF-8 sequence completed by the following tokens.
    std::string decode_next(int prev, int id) const;

    // The file's tokenizer.ggml.add_bos_token (encode adds BOS only where both it and the
    // caller ask) and, for SentencePiece, tokenizer.ggml.add_space_prefix (the dummy prefix
    // of encode and the space decode drops). Both default to true.
    void set_specials(bool add_bos, bool add_space_prefix);
    // The tokens that end generation (llama.cpp's end-of-generation set): EOS, the ids
    // given (tokenizer.ggml.eot_token_id / eom_token_id, -1: none) and the control tokens
    // chat models end a turn with ("<|eot_id|>", "<|im_end|>", "<end_of_turn>", ...).
    void find_end_tokens(int eot, int eom);
    bool is_end(int id) const { return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end(); }

    int n_tokens() const { return (int)pieces_.size(); }
    int bos() const { return bos_; }
    int eos() const { return eos_; }
    int unk() const { return unk_; }
    int max_token_length() const { return max_token_length_; }  // 0 unless from llama2.c

    // Out-of-range id: "" / 0.0f / -1.
    const std::string& piece(int id) const;
    float score(int id) const;
    int type(int id) const;

    int find(const std::string& piece) const;  // -1 if none
    int byte_token(uint8_t b) const { return byte_to_id_[b]; }  // -1 if none

private:
    bool valid_id(int id) const { return id >= 0 && id < (int)pieces_.size(); }
    bool is_mergeable(int id) const;  // piece may be produced by encode's merges
    void clear();

    std::shared_ptr<const BpeTokenizer> bpe_;  // set: a byte-level BPE vocabulary
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::vector<int> types_;
    std::unordered_map<std::string, int> piece_to_id_;  // first id on duplicates
    int byte_to_id_[256];  // -1: no byte token for that value
    int bos_ = -1, eos_ = -1, unk_ = -1;
    bool add_bos_ = true, add_space_prefix_ = true;
    std::vector<int> end_ids_; // a few ids: a scan is cheaper than a set
    int max_token_length_ = 0;
    // Pieces matched whole in the text, longest first, through a trie: a position costs at most
    // the longest piece's length in steps, whatever the number of pieces (a linear scan was
    // quadratic on crafted vocabularies).
    struct PieceTrie {
        std::unordered_map<uint64_t, int> edges;    // (node << 8 | byte) -> child; node 0 is the root
        std::vector<int> ids{-1};                   // node -> token ending there (first on duplicates), -1
        void add(int id, const std::string & text); // text: what it matches
        size_t match(const std::string & text, size_t pos) const;          // bytes matched, 0 if none
        int id_at(const std::string & text, size_t pos, size_t len) const; // the token of a match
        void clear();
        // Splits text at the leftmost, longest matches: their tokens go to out, the text before,
        // between and after them to encode(part) (which appends to out).
        template <class Encode> void split(const std::string & text, std::vector<int> & out, Encode encode) const {
            size_t start = 0;
            for (size_t pos = 0; pos < text.size();) {
                const size_t len = match(text, pos);
                if (len == 0) {
                    ++pos;
                    continue;
                }
                if (pos > start) encode(text.substr(start, pos - start));
                out.push_back(id_at(text, pos, len));
                pos += len;
                start = pos;
            }
            if (start < text.size()) encode(text.substr(start));
        }
    };
    PieceTrie user_trie_;                     // user-defined pieces: always matched first (as SentencePiece)
    PieceTrie special_trie_;                  // control and unknown tokens: with parse_special only
    void add_trie_pieces(bool user_by_bytes); // fills both tries from types_

    // encode's two schemes; the SentencePiece one in steps over a list of symbols
    void encode_byte_level(const std::string& text, std::vector<int>& out) const;
    void encode_piece(const std::string & text, std::vector<int> & out) const; // no specials parsed
    struct SpSymbol;
    std::vector<SpSymbol> sp_symbols(const std::string& norm) const;
    int sp_piece_id(const std::string& norm, int start, int len, std::string& key) const;  // -1 if none
    void sp_merge(const std::string& norm, std::vector<SpSymbol>& syms) const;
    void sp_emit(const std::string& norm, const std::vector<SpSymbol>& syms, std::vector<int>& out) const;
};

}  // namespace kvg
