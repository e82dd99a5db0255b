// Byte-level BPE (see vocab-bpe.h). The pre-tokenizers are hand-written matchers of the
// regular expressions the vocabularies were trained with, tried in order at each position
// (the first alternative that matches wins, as in the regex):
//   gpt-2:  's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//   qwen2:  llama3 with \p{N} (one digit per piece)
//   starcoder (and refact, command-r, smollm, ...): every digit alone (\p{N}), then gpt-2
//           within the text between digits
#include "vocab-bpe.h"
#include "status.h"

#include "unicode.h"

#include <climits>

namespace kvg {

namespace {

using chars = std::vector<utf8_char>;

bool letter(const chars & c, size_t i) { return i < c.size() && is_letter(c[i].cp); }
bool number(const chars & c, size_t i) { return i < c.size() && is_number(c[i].cp); }
bool space(const chars & c, size_t i) { return i < c.size() && is_space(c[i].cp); }
bool newline(const chars & c, size_t i) { return i < c.size() && (c[i].cp == '\r' || c[i].cp == '\n'); }
bool other(const chars & c, size_t i) { return i < c.size() && !space(c, i) && !letter(c, i) && !number(c, i); }

uint32_t lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

// 's 't 're 've 'm 'll 'd (case-insensitive when `fold`): characters matched, or 0.
size_t contraction(const chars & c, size_t i, bool fold) {
    if (i + 1 >= c.size() || c[i].cp != '\'') return 0;
    auto at = [&](size_t k) { return k < c.size() ? (fold ? lower(c[k].cp) : c[k].cp) : 0u; };
    const uint32_t a = at(i + 1), b = at(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

template <typename F> size_t run(const chars & c, size_t i, F pred) {
    size_t j = i;
    while (j < c.size() && pred(c, j)) ++j;
    return j - i;
}

// \s+(?!\S) then \s+: a white-space run, minus its last character when a non-space follows
size_t spaces(const chars & c, size_t i) {
    const size_t n = run(c, i, space);
    if (n == 0) return 0;
    return i + n < c.size() && n >= 2 ? n - 1 : n;
}

size_t match_gpt2(const chars & c, size_t i) {
    if (size_t n = contraction(c, i, false)) return n;
    const size_t sp = c[i].cp == ' ' ? 1 : 0;
    if (size_t n = run(c, i + sp, letter)) return sp + n;
    if (size_t n = run(c, i + sp, number)) return sp + n;
    if (size_t n = run(c, i + sp, other)) return sp + n;
    return spaces(c, i);
}

size_t match_llama3(const chars & c, size_t i, size_t max_digits) {
    if (size_t n = contraction(c, i, true)) return n;
    if (size_t n = run(c, i, letter)) return n;
    if (!newline(c, i) && !letter(c, i) && !number(c, i) && letter(c, i + 1)) return 1 + run(c, i + 1, letter);
    if (size_t n = run(c, i, number)) return n < max_digits ? n : max_digits;
    const size_t sp = c[i].cp == ' ' ? 1 : 0;
    if (size_t n = run(c, i + sp, other)) return sp + n + run(c, i + sp + n, newline);
    const size_t ws = run(c, i, space); // \s*[\r\n]+: up to the last newline of the run
    for (size_t k = ws; k > 0; --k) {
        if (newline(c, i + k - 1)) return k;
    }
    return spaces(c, i);
}

} // namespace

bool BpeTokenizer::init(const std::vector<std::string> & tokens, const std::vector<int> & types,
                        const std::vector<std::string> & merges, const std::string & pre, std::string * err) {
    static const std::pair<const char *, Pre> names[] = {
        {"llama-bpe", Pre::Llama3}, {"llama3", Pre::Llama3}, {"qwen2", Pre::Qwen2}, {"deepseek-r1-qwen", Pre::Qwen2},
        {"default", Pre::Gpt2}, {"gpt-2", Pre::Gpt2}, {"gpt2", Pre::Gpt2}, {"", Pre::Gpt2}, {"mpt", Pre::Gpt2},
        {"olmo", Pre::Gpt2}, {"jais", Pre::Gpt2}, {"starcoder", Pre::Digits}, {"refact", Pre::Digits},
        {"command-r", Pre::Digits}, {"smollm", Pre::Digits}, {"codeshell", Pre::Digits}, {"exaone", Pre::Digits},
        {"minerva-7b", Pre::Digits}};
    bool known = false;
    for (const auto & n : names) {
        if (pre == n.first) { pre_ = n.second; known = true; break; }
    }
    if (!known) {
        if (err) {
            kvg::note_status(KVG_STATUS_UNSUPPORTED);
            *err = "pre-tokenizer '" + pre + "' is not supported (";
            for (const auto & n : names) *err += std::string(n.first) + (*n.first ? ", " : "");
            err->resize(err->size() - 2);
            *err += ")";
        }
        return false;
    }
    // GPT-2's map: printable Latin-1 bytes stand for themselves, the others take U+0100...
    int next = 256;
    std::vector<int> byte_of_cp(256 + 68, -1); // the 68 unprintable bytes go to U+0100..U+0143
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        const int cp = printable ? b : next++;
        byte_char_[b] = utf8_encode((uint32_t) cp);
        byte_of_cp[cp] = b;
    }
    bytes_of_.assign(tokens.size(), std::string());
    for (size_t id = 0; id < tokens.size(); ++id) {
        token_id_.emplace(tokens[id], (int) id);
        if (id < types.size() && types[id] == 3) continue; // control: decodes to nothing
        for (const utf8_char & ch : utf8_chars(tokens[id])) {
            const int b = ch.cp < byte_of_cp.size() ? byte_of_cp[ch.cp] : -1;
            if (b >= 0) bytes_of_[id] += (char) b;
            else bytes_of_[id] += tokens[id].substr(ch.begin, ch.len); // not a mapped byte: as written
        }
    }
    for (size_t r = 0; r < merges.size(); ++r) merge_rank_.emplace(merges[r], (int) r);
    return true;
}

std::vector<std::pair<size_t, size_t>> BpeTokenizer::split(const std::string & text) const {
    const chars all = utf8_chars(text);
    std::vector<std::pair<size_t, size_t>> out;
    // Digits: the text between digits is split on its own (the gpt-2 lookahead ends there)
    for (size_t seg = 0; seg < all.size();) {
        size_t end = all.size();
        if (pre_ == Pre::Digits) {
            end = seg;
            if (number(all, seg)) end = seg + 1;
            else while (end < all.size() && !number(all, end)) ++end;
        }
        const chars c(all.begin() + (long) seg, all.begin() + (long) end);
        for (size_t i = 0; i < c.size();) {
            size_t n = pre_ == Pre::Llama3 ? match_llama3(c, i, 3) : pre_ == Pre::Qwen2 ? match_llama3(c, i, 1) : match_gpt2(c, i);
            if (n == 0) n = 1; // cannot happen: \s+ or a single other character always matches
            out.emplace_back(c[i].begin, c[i + n - 1].begin + c[i + n - 1].len);
            i += n;
        }
        seg = end;
    }
    return out;
}

// Merges the lowest-ranked adjacent pair until none is a merge; symbols start as bytes.
void BpeTokenizer::encode_word(const std::string & word, std::vector<int> & out) const {
    std::vector<std::string> sym;
    for (unsigned char b : word) sym.push_back(byte_char_[b]);
    if (pre_ == Pre::Llama3) {
        // Llama 3's tokenizer ignores the merges for a word that is itself a token
        std::string whole;
        for (const std::string & s : sym) whole += s;
        const auto it = token_id_.find(whole);
        if (it != token_id_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    for (;;) {
        int best = INT_MAX;
        size_t at = 0;
        for (size_t k = 0; k + 1 < sym.size(); ++k) {
            const auto it = merge_rank_.find(sym[k] + " " + sym[k + 1]);
            if (it != merge_rank_.end() && it->second < best) { best = it->second; at = k; }
        }
        if (best == INT_MAX) break;
        sym[at] += sym[at + 1];
        sym.erase(sym.begin() + (long) at + 1);
    }
    for (const std::string & s : sym) {
        const auto it = token_id_.find(s);
        if (it != token_id_.end()) { out.push_back(it->second); continue; }
        for (const utf8_char & ch : utf8_chars(s)) { // not in the vocabulary: its bytes one by one
            const auto bt = token_id_.find(s.substr(ch.begin, ch.len));
            if (bt != token_id_.end()) out.push_back(bt->second);
        }
    }
}

std::vector<int> BpeTokenizer::encode(const std::string & text) const {
    std::vector<int> out;
    for (const auto & piece : split(text)) encode_word(text.substr(piece.first, piece.second - piece.first), out);
    return out;
}

const std::string & BpeTokenizer::token_bytes(int id) const {
    static const std::string none;
    return id >= 0 && id < (int) bytes_of_.size() ? bytes_of_[id] : none;
}

} // namespace kvg
