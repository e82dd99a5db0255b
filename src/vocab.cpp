// The SentencePiece-style BPE vocabulary: llama2.c and GGUF loading, encoding, decoding
// (byte-level BPE vocabularies delegate to vocab-bpe.cpp).
#include "vocab.h"

#include "errors.h"

#include "vocab-bpe.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <queue>
#include <sys/stat.h>
#include <unistd.h>

namespace kvg {

namespace {

const char kSpaceMark[] = "\xE2\x96\x81";  // "▁", U+2581
constexpr size_t kSpaceMarkLen = 3;

// A piece longer than this is a corrupt length field, not a token.
constexpr int32_t kMaxPieceBytes = 1 << 20;
// A tokenizer file larger than this is not a tokenizer.
constexpr int64_t kMaxFileBytes = int64_t(1) << 30;

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// "<0xNN>" -> NN, else -1.
int parse_byte_piece(const std::string& p) {
    if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
}

// Length of the well-formed UTF-8 character at s[0..n), or 1 if it is not
// well-formed (overlong, surrogate, > U+10FFFF, truncated, stray continuation):
// such a byte becomes a character of its own and so goes to byte fallback.
size_t utf8_char_len(const unsigned char* s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;  // overlong
        if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;  // overlong
        if (c == 0xF4) hi = 0x8F;  // > U+10FFFF
    } else {
        return 1;
    }
    if (n < len) return 1;
    if (s[1] < lo || s[1] > hi) return 1;
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) return 1;
    }
    return len;
}

uint32_t read_u32_le(const unsigned char* p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

std::string replace_all(const std::string& s, const char* from, size_t from_len, const char* to,
                        size_t to_len) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, from_len, from, from_len) == 0) {
            out.append(to, to_len);
            i += from_len;
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

// A whole tokenizer file into buf; false with a message (prefixed by where) otherwise.
bool read_file(const std::string& path, const std::string& where, std::vector<unsigned char>& buf, std::string* err) {
    const int fd = open_regular(path, err);
    if (fd < 0) return fail(err, KVG_STATUS_IO, where + (err ? *err : std::string()));
    struct stat st;
    const bool sized = fstat(fd, &st) == 0 && st.st_size <= kMaxFileBytes;
    if (!sized) {
        ::close(fd);
        return fail(err, where + "cannot determine the file's size, or the file is too large for a tokenizer");
    }
    buf.resize((size_t) st.st_size);
    size_t got = 0;
    while (got < buf.size()) {
        const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
        if (n <= 0) {
            const std::string why = n < 0 ? strerror(errno) : "the file ended early";
            ::close(fd);
            return fail(err, KVG_STATUS_IO, where + "read error: " + why);
        }
        got += (size_t) n;
    }
    ::close(fd);
    return true;
}

// Bytes left over after the tokens a model expects. The usual cause: a tokenizer of
// another model; the message says how many tokens it really has.
std::string trailing_bytes_message(const std::vector<unsigned char>& buf, size_t off, size_t n_read) {
    const size_t n = buf.size();
    size_t at = off, more = 0;
    while (n - at >= 8) {
        const int32_t len = (int32_t)read_u32_le(buf.data() + at + 4);
        if (len < 0 || len > kMaxPieceBytes || n - at - 8 < (size_t)len) break;
        at += 8 + (size_t)len;
        ++more;
    }
    if (at == n) {
        return "the tokenizer has " + std::to_string(n_read + more) + " tokens, the model " + std::to_string(n_read) +
               " (a tokenizer of another model?)";
    }
    return std::to_string(n - off) + " trailing bytes after " + std::to_string(n_read) + " tokens at byte offset " +
           std::to_string(off);
}

// llama2.c tokenizer.bin (see Vocab::load_llama2c): the pieces and scores as stored.
bool parse_llama2c(const std::vector<unsigned char>& buf, const std::string& where, int expected_n_tokens,
                   int32_t& max_len, std::vector<std::string>& pieces, std::vector<float>& scores, std::string* err) {
    const size_t n = buf.size();
    if (n < 4) {
        fail(err, where + "truncated at byte offset 0: missing int32 max_token_length");
        return false;
    }
    max_len = (int32_t)read_u32_le(buf.data());
    if (max_len < 0) {
        fail(err, where + "negative max_token_length " + std::to_string(max_len) + " at byte offset 0");
        return false;
    }
    size_t off = 4;
    for (int i = 0;; i++) {
        if (expected_n_tokens > 0 ? i >= expected_n_tokens : off == n) break;
        const std::string tok = "token " + std::to_string(i);
        if (n - off < 8) {
            fail(err, where + "truncated at byte offset " + std::to_string(off) + ": " + tok +
                          " needs score and length (8 bytes), " + std::to_string(n - off) + " left");
            return false;
        }
        const uint32_t score_bits = read_u32_le(buf.data() + off);
        float score;
        std::memcpy(&score, &score_bits, sizeof(score));
        if (std::isnan(score)) {
            fail(err, where + "score of " + tok + " at byte offset " + std::to_string(off) + " is NaN");
            return false;
        }
        const int32_t len = (int32_t)read_u32_le(buf.data() + off + 4);
        if (len < 0 || len > kMaxPieceBytes) {
            fail(err, where + "bad length " + std::to_string(len) + " for " + tok + " at byte offset " +
                          std::to_string(off + 4));
            return false;
        }
        off += 8;
        if (n - off < (size_t)len) {
            fail(err, where + "truncated at byte offset " + std::to_string(off) + ": " + tok + " needs " +
                          std::to_string(len) + " bytes, " + std::to_string(n - off) + " left");
            return false;
        }
        pieces.emplace_back(reinterpret_cast<const char*>(buf.data() + off), (size_t)len);
        scores.push_back(score);
        off += (size_t)len;
    }
    if (off != n) {
        fail(err, where + trailing_bytes_message(buf, off, pieces.size()));
        return false;
    }
    return true;
}

// SentencePiece's normalisation: a dummy prefix (unless the file turns it off), then every
// space becomes "▁".
std::string sp_normalize(const std::string & text, bool dummy_prefix) {
    std::string norm;
    norm.reserve(text.size() + kSpaceMarkLen * 4);
    if (dummy_prefix) norm.append(kSpaceMark, kSpaceMarkLen);
    for (char c : text) {
        if (c == ' ') {
            norm.append(kSpaceMark, kSpaceMarkLen);
        } else {
            norm.push_back(c);
        }
    }
    return norm;
}

}  // namespace

Vocab::Vocab() { clear(); }

bool Vocab::init_bpe(std::vector<std::string> tokens, std::vector<int> types, const std::vector<std::string>& merges,
                     const std::string& pre, int bos, int eos, std::string* err) {
    clear();
    if (tokens.empty()) {
        fail(err, "vocab has no tokens");
        return false;
    }
    if (!types.empty() && types.size() != tokens.size()) {
        fail(err, "token types do not match the tokens");
        return false;
    }
    auto bpe = std::make_shared<BpeTokenizer>();
    if (!bpe->init(tokens, types, merges, pre, err)) return false;
    const int n = (int)tokens.size();
    if (bos >= n || eos >= n) {
        fail(err, "special token id out of range");
        return false;
    }
    if (types.empty()) types.assign(tokens.size(), TOKEN_TYPE_NORMAL);
    scores_.assign(tokens.size(), 0.0f);
    for (size_t i = 0; i < tokens.size(); ++i) piece_to_id_.emplace(tokens[i], (int)i);
    pieces_ = std::move(tokens);
    types_ = std::move(types);
    bos_ = bos;
    eos_ = eos;
    bpe_ = std::move(bpe);
    add_trie_pieces(true);
    find_end_tokens(-1, -1);
    return true;
}

void Vocab::clear() {
    bpe_.reset();
    pieces_.clear();
    scores_.clear();
    types_.clear();
    piece_to_id_.clear();
    std::fill(std::begin(byte_to_id_), std::end(byte_to_id_), -1);
    bos_ = eos_ = unk_ = -1;
    add_bos_ = add_space_prefix_ = true;
    end_ids_.clear();
    max_token_length_ = 0;
    user_trie_.clear();
    special_trie_.clear();
}

// Byte-level BPE finds user-defined tokens (MPT's runs of spaces, ...) by what they decode to;
// control tokens are found by their text, as llama.cpp does.
void Vocab::add_trie_pieces(bool user_by_bytes) {
    for (size_t i = 0; i < pieces_.size(); ++i) {
        const int t = types_[i];
        if (t == TOKEN_TYPE_USER_DEFINED) {
            const std::string text = user_by_bytes ? bpe_->token_bytes((int) i) : pieces_[i];
            if (!text.empty()) user_trie_.add((int) i, text);
        } else if ((t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_UNKNOWN) && !pieces_[i].empty()) {
            special_trie_.add((int) i, pieces_[i]);
        }
    }
}

void Vocab::PieceTrie::clear() {
    edges.clear();
    ids.assign(1, -1);
}

void Vocab::PieceTrie::add(int id, const std::string & text) {
    int node = 0;
    for (unsigned char c : text) {
        const auto edge = edges.emplace((uint64_t) node << 8 | c, (int) ids.size());
        if (edge.second) ids.push_back(-1);
        node = edge.first->second;
    }
    if (ids[node] < 0) ids[node] = id;
}

int Vocab::PieceTrie::id_at(const std::string & text, size_t pos, size_t len) const {
    int node = 0;
    for (size_t k = pos; k < pos + len; ++k) node = edges.find((uint64_t) node << 8 | (unsigned char) text[k])->second;
    return ids[node];
}

size_t Vocab::PieceTrie::match(const std::string & text, size_t pos) const {
    size_t len = 0;
    int node = 0;
    if (edges.empty()) return 0; // most vocabularies: no lookups per byte
    for (size_t k = pos; k < text.size(); ++k) {
        const auto it = edges.find((uint64_t) node << 8 | (unsigned char) text[k]);
        if (it == edges.end()) break;
        node = it->second;
        if (ids[node] >= 0) len = k - pos + 1;
    }
    return len;
}

bool Vocab::load_llama2c(const std::string& path, std::string* err, int expected_n_tokens) {
    clear();
    const std::string where = "tokenizer '" + path + "': ";
    std::vector<unsigned char> buf;
    if (!read_file(path, where, buf, err)) return false;
    int32_t max_len = 0;
    std::vector<std::string> pieces;
    std::vector<float> scores;
    if (!parse_llama2c(buf, where, expected_n_tokens, max_len, pieces, scores, err)) return false;
    if (pieces.size() < 3) {
        fail(err, where + "only " + std::to_string(pieces.size()) +
                      " tokens; the format needs <unk>, <s>, </s> at ids 0, 1, 2");
        return false;
    }

    // llama2.c's exporter wrote ' ' for "▁" and wrapped BOS/EOS in newlines;
    // undo both so pieces match SentencePiece / GGUF.
    for (auto& p : pieces) p = replace_all(p, " ", 1, kSpaceMark, kSpaceMarkLen);
    if (pieces[1] == "\n<s>\n") pieces[1] = "<s>";
    if (pieces[2] == "\n</s>\n") pieces[2] = "</s>";

    if (!init(std::move(pieces), std::move(scores), {}, 1, 2, 0, err)) {
        if (err) *err = where + *err;
        return false;
    }
    max_token_length_ = max_len;
    return true;
}

bool Vocab::init(std::vector<std::string> pieces, std::vector<float> scores, std::vector<int> types, int bos,
                 int eos, int unk, std::string* err) {
    clear();
    const size_t n = pieces.size();
    if (n == 0) {
        fail(err, "vocab has no tokens");
        return false;
    }
    if (n > (size_t)std::numeric_limits<int>::max()) {
        fail(err, "vocab too large");
        return false;
    }
    if (!scores.empty() && scores.size() != n) {
        fail(err, "scores has " + std::to_string(scores.size()) + " entries for " + std::to_string(n) + " tokens");
        return false;
    }
    if (!types.empty() && types.size() != n) {
        fail(err, "token types has " + std::to_string(types.size()) + " entries for " + std::to_string(n) + " tokens");
        return false;
    }
    for (int id : {bos, eos, unk}) {
        if (id < -1 || id >= (int)n) {
            fail(err, "special token id " + std::to_string(id) + " out of range [0, " + std::to_string(n) + ")");
            return false;
        }
    }
    if (scores.empty()) scores.assign(n, 0.0f);
    for (size_t i = 0; i < n; i++) {
        // NaN would break the merge queue's ordering.
        if (std::isnan(scores[i])) {
            fail(err, "score of token " + std::to_string(i) + " is NaN");
            return false;
        }
    }
    if (types.empty()) {
        types.assign(n, TOKEN_TYPE_NORMAL);
        for (size_t i = 0; i < n; i++) {
            if (parse_byte_piece(pieces[i]) >= 0) types[i] = TOKEN_TYPE_BYTE;
        }
        if (bos >= 0) types[bos] = TOKEN_TYPE_CONTROL;
        if (eos >= 0) types[eos] = TOKEN_TYPE_CONTROL;
        if (unk >= 0) types[unk] = TOKEN_TYPE_UNKNOWN;
    }

    for (size_t i = 0; i < n; i++) {
        const int t = types[i];
        if (t < TOKEN_TYPE_UNDEFINED || t > TOKEN_TYPE_BYTE) {
            fail(err, "token " + std::to_string(i) + " has unknown type " + std::to_string(t));
            clear();
            return false;
        }
        if (t == TOKEN_TYPE_BYTE) {
            const int b = parse_byte_piece(pieces[i]);
            if (b < 0) {
                fail(err, "token " + std::to_string(i) + " has type byte but its piece is not <0xNN>");
                clear();
                return false;
            }
            if (byte_to_id_[b] < 0) byte_to_id_[b] = (int)i;
        }
        piece_to_id_.emplace(pieces[i], (int)i);  // keeps the first id of a duplicate
    }
    pieces_ = std::move(pieces);
    scores_ = std::move(scores);
    types_ = std::move(types);
    add_trie_pieces(false);
    bos_ = bos;
    eos_ = eos;
    unk_ = unk;
    find_end_tokens(-1, -1);
    return true;
}

bool Vocab::is_mergeable(int id) const {
    const int t = types_[id];
    return t == TOKEN_TYPE_NORMAL || t == TOKEN_TYPE_UNDEFINED || t == TOKEN_TYPE_USER_DEFINED;
}

void Vocab::set_specials(bool add_bos, bool add_space_prefix) {
    add_bos_ = add_bos;
    add_space_prefix_ = add_space_prefix;
}

void Vocab::find_end_tokens(int eot, int eom) {
    end_ids_.clear();
    for (int id : {eos_, eot, eom}) {
        if (valid_id(id) && !is_end(id)) end_ids_.push_back(id);
    }
    static const char * const kTurnEnds[] = {"<|eot_id|>", "<|eom_id|>",    "<|end_of_text|>", "<|im_end|>",
                                             "<|end|>",    "<end_of_turn>", "<|endoftext|>",   "<EOT>"};
    for (const char * text : kTurnEnds) {
        const int id = find(text);
        if (id >= 0 && !is_end(id)) end_ids_.push_back(id);
    }
}

std::vector<int> Vocab::encode(const std::string & text, bool add_bos, bool parse_special) const {
    std::vector<int> out;
    if (add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
    if (!parse_special) {
        encode_piece(text, out);
        return out;
    }
    // control tokens split the text; each part between them is encoded on its own
    special_trie_.split(text, out, [&](const std::string & part) { encode_piece(part, out); });
    return out;
}

void Vocab::encode_piece(const std::string & text, std::vector<int> & out) const {
    if (bpe_) {
        encode_byte_level(text, out);
        return;
    }
    if (text.empty() || pieces_.empty()) return;
    const std::string norm = sp_normalize(text, add_space_prefix_);
    std::vector<SpSymbol> syms = sp_symbols(norm);
    sp_merge(norm, syms);
    sp_emit(norm, syms, out);
}

// User-defined tokens first (leftmost, longest), the text between them through BPE.
void Vocab::encode_byte_level(const std::string & text, std::vector<int> & out) const {
    user_trie_.split(text, out, [&](const std::string & part) {
        const std::vector<int> ids = bpe_->encode(part);
        out.insert(out.end(), ids.begin(), ids.end());
    });
}

// Symbols form a doubly linked list over byte ranges of the normalised text; a
// merged-away symbol has len 0.
struct Vocab::SpSymbol {
    int start, len, prev, next;
    bool frozen;  // a user-defined piece: never merged further
};

// One symbol per UTF-8 character, or per user-defined piece.
std::vector<Vocab::SpSymbol> Vocab::sp_symbols(const std::string& norm) const {
    std::vector<SpSymbol> syms;
    syms.reserve(norm.size());
    const auto* s = reinterpret_cast<const unsigned char*>(norm.data());
    for (size_t pos = 0; pos < norm.size();) {
        size_t len = user_trie_.match(norm, pos);
        const bool frozen = len > 0;
        if (len == 0) len = utf8_char_len(s + pos, norm.size() - pos);
        const int i = (int)syms.size();
        syms.push_back({(int)pos, (int)len, i - 1, i + 1, frozen});
        pos += len;
    }
    syms.back().next = -1;
    return syms;
}

int Vocab::sp_piece_id(const std::string& norm, int start, int len, std::string& key) const {
    key.assign(norm, (size_t)start, (size_t)len);
    auto it = piece_to_id_.find(key);
    return it == piece_to_id_.end() ? -1 : it->second;
}

// Merges the best-scoring adjacent pair (leftmost on ties) until no pair is a piece.
void Vocab::sp_merge(const std::string& norm, std::vector<SpSymbol>& syms) const {
    // Candidate merges; stale ones (a side merged since) are skipped on pop.
    struct Cand {
        float score;
        int left, right, len;
    };
    auto lower = [](const Cand& a, const Cand& b) {
        if (a.score != b.score) return a.score < b.score;
        return a.left > b.left;  // leftmost wins ties
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(lower)> queue(lower);

    std::string key;  // reused so lookups do not allocate each time
    auto push_pair = [&](int l, int r) {
        if (l < 0 || r < 0 || syms[l].frozen || syms[r].frozen) return;
        const int len = syms[l].len + syms[r].len;
        const int id = sp_piece_id(norm, syms[l].start, len, key);
        if (id < 0 || !is_mergeable(id)) return;
        queue.push({scores_[id], l, r, len});
    };

    for (size_t i = 0; i + 1 < syms.size(); i++) push_pair((int)i, (int)i + 1);

    while (!queue.empty()) {
        const Cand c = queue.top();
        queue.pop();
        SpSymbol& l = syms[c.left];
        SpSymbol& r = syms[c.right];
        // Start offsets never change, so adjacency + same total length means
        // the pair still spells the same piece.
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
        l.len = c.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = c.left;
        push_pair(l.prev, c.left);
        push_pair(c.left, l.next);
    }
}

// The merged symbols as ids; a symbol that is no piece falls back to byte tokens.
void Vocab::sp_emit(const std::string& norm, const std::vector<SpSymbol>& syms, std::vector<int>& out) const {
    const auto* s = reinterpret_cast<const unsigned char*>(norm.data());
    std::string key;
    for (int i = 0; i >= 0; i = syms[i].next) {
        const SpSymbol& sym = syms[i];
        const int id = sp_piece_id(norm, sym.start, sym.len, key);
        if (id >= 0 && is_mergeable(id)) {
            out.push_back(id);
            continue;
        }
        // Byte fallback; SentencePiece emits one <unk> if any byte lacks a token.
        bool all_bytes = true;
        for (int k = 0; k < sym.len; k++) all_bytes = all_bytes && byte_to_id_[s[sym.start + k]] >= 0;
        if (all_bytes) {
            for (int k = 0; k < sym.len; k++) out.push_back(byte_to_id_[s[sym.start + k]]);
        } else if (unk_ >= 0) {
            out.push_back(unk_);
        }
    }
}

std::string Vocab::token_to_piece(int id) const {
    if (!valid_id(id)) return {};
    if (bpe_) return bpe_->token_bytes(id);
    switch (types_[id]) {
        case TOKEN_TYPE_CONTROL:
            return {};
        case TOKEN_TYPE_UNKNOWN:
            return " \xE2\x81\x87 ";  // " ⁇ "
        case TOKEN_TYPE_BYTE:
            return std::string(1, (char)parse_byte_piece(pieces_[id]));
        default:
            return replace_all(pieces_[id], kSpaceMark, kSpaceMarkLen, " ", 1);
    }
}

std::string Vocab::decode_next(int prev, int id) const {
    std::string p = token_to_piece(id);
    if (bpe_) return p;  // no dummy prefix to drop
    // Only a text piece carries the dummy prefix; a byte token is literal.
    const bool text_piece = valid_id(id) && types_[id] != TOKEN_TYPE_BYTE && types_[id] != TOKEN_TYPE_UNKNOWN;
    const bool starts = prev < 0 || prev == bos_;
    if (add_space_prefix_ && starts && text_piece && !p.empty() && p[0] == ' ') p.erase(0, 1);
    return p;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
    std::string out;
    int prev = -1;
    for (int id : ids) {
        out += decode_next(prev, id);
        prev = id;
    }
    return out;
}

const std::string& Vocab::piece(int id) const {
    static const std::string empty;
    return valid_id(id) ? pieces_[id] : empty;
}

float Vocab::score(int id) const { return valid_id(id) ? scores_[id] : 0.0f; }

int Vocab::type(int id) const { return valid_id(id) ? types_[id] : -1; }

int Vocab::find(const std::string& piece) const {
    auto it = piece_to_id_.find(piece);
    return it == piece_to_id_.end() ? -1 : it->second;
}

}  // namespace kvg
