// Byte-level BPE (see vocab-bpe.h). The pre-tokenizers are hand-written matchers of the
// regular expressions the vocabularies were trained with, tried in order at each position
// (the first alternative that matches wins, as in the regex):
//   gpt-2:  's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//   qwen2:  llama3 with \p{N} (one digit per piece)
//   qwen35: qwen2 with [\p{L}\p{M}] for \p{L} (a word keeps its combining marks) and \p{M}
//           left out of the punctuation run
// A pre-tokenizer of several patterns (tokenizer.json's Sequence of Splits) applies them in
// turn: each one splits every piece the previous ones left into its matches and the text
// between them, which stays a piece of its own:
//   starcoder (refact, command-r, smollm, ...): \p{N} ; gpt-2
//   falcon:         [\p{P}$+<=>^~|`]+ ; gpt-2 ; [0-9][0-9][0-9]
//   deepseek-coder: [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ; [CJK]+ ; \p{N}
//   deepseek-llm:   [\r\n] ; \s?[cased letters]+ ; \s?[ASCII and CJK punctuation]+ ; \s+$ ; [CJK]+ ; \p{N}+
// In these patterns \s is ASCII's (tab to CR, space) or Unicode white space above ASCII, and a
// white-space character is in no listed range (U+3000 is not punctuation), as llama.cpp has it.
#include "vocab-bpe.h"
#include "status.h"

#include "unicode.h"

#include <climits>
#include <cstring>

namespace kvg {

namespace {

// A piece's characters; a pattern sees the piece's end as the end of the text.
struct chars {
    const utf8_char * p;
    size_t n;
    size_t size() const { return n; }
    const utf8_char & operator[](size_t i) const { return p[i]; }
};

// A pattern anchored at i: the number of characters it matches there, or 0.
using Matcher = size_t (*)(const chars &, size_t);

bool letter(const chars & c, size_t i) { return i < c.size() && is_letter(c[i].cp); }
bool number(const chars & c, size_t i) { return i < c.size() && is_number(c[i].cp); }
bool mark(const chars & c, size_t i) { return i < c.size() && is_mark(c[i].cp); }
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

// llama3 (Digits 3), qwen2 (1) and qwen35 (1, Marks)
template <size_t Digits, bool Marks> size_t match_llama3(const chars & c, size_t i) {
    const auto word = [](const chars & s, size_t k) { return letter(s, k) || (Marks && mark(s, k)); };
    const auto punct = [](const chars & s, size_t k) { return other(s, k) && !(Marks && mark(s, k)); };
    if (size_t n = contraction(c, i, true)) return n;
    if (size_t n = run(c, i, word)) return n;
    if (!newline(c, i) && !letter(c, i) && !number(c, i) && word(c, i + 1)) return 1 + run(c, i + 1, word);
    if (size_t n = run(c, i, number)) return n < Digits ? n : Digits;
    const size_t sp = c[i].cp == ' ' ? 1 : 0;
    if (size_t n = run(c, i + sp, punct)) return sp + n + run(c, i + sp + n, newline);
    const size_t ws = run(c, i, space); // \s*[\r\n]+: up to the last newline of the run
    for (size_t k = ws; k > 0; --k) {
        if (newline(c, i + k - 1)) return k;
    }
    return spaces(c, i);
}

// ---- the classes and patterns of the multi-pattern pre-tokenizers ----

// DeepSeek LLM's letters: the cased letters (Lu, Ll, Lt) of an older Unicode, as its regex lists them
const uint32_t kDeepSeekLetters[][2] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}};
// DeepSeek LLM's punctuation: ASCII's printable non-digits, curly quotes, CJK and fullwidth ones
const uint32_t kDeepSeekPunct[][2] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
                                      {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
// DeepSeek's CJK run: U+0800..U+9FA5 (Samaritan through the CJK ideographs) and Hangul
const uint32_t kDeepSeekCjk[][2] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

bool rx_space(uint32_t cp) { return cp < 128 ? cp == ' ' || (cp >= '\t' && cp <= '\r') : is_space(cp); }
bool ds_letter(uint32_t cp) { return in_ranges(kDeepSeekLetters, cp); }
bool ds_punct(uint32_t cp) { return !is_space(cp) && in_ranges(kDeepSeekPunct, cp); }
bool ds_cjk(uint32_t cp) { return !is_space(cp) && in_ranges(kDeepSeekCjk, cp); }
bool falcon_punct(uint32_t cp) { return is_punct(cp) || (cp < 128 && cp && std::strchr("$+<=>^~|`", (int) cp)); }
bool ascii_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
bool cr_lf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

template <bool (*Cls)(uint32_t)> bool in(const chars & c, size_t i) { return i < c.size() && Cls(c[i].cp); }
template <bool (*Cls)(uint32_t)> size_t one(const chars & c, size_t i) { return in<Cls>(c, i) ? 1 : 0; }
template <bool (*Cls)(uint32_t)> size_t some(const chars & c, size_t i) { return run(c, i, in<Cls>); }
// \s?X+
template <bool (*Cls)(uint32_t)> size_t spaced_some(const chars & c, size_t i) {
    const size_t sp = rx_space(c[i].cp) && in<Cls>(c, i + 1) ? 1 : 0;
    const size_t n = run(c, i + sp, in<Cls>);
    return n ? sp + n : 0;
}
// \s+$: the piece's trailing white space
size_t trailing_spaces(const chars & c, size_t i) {
    if (i > 0 && in<rx_space>(c, i - 1)) return 0; // a run that started earlier did not reach the end
    const size_t n = run(c, i, in<rx_space>);
    return i + n == c.size() ? n : 0;
}
size_t three_digits(const chars & c, size_t i) {
    return in<ascii_digit>(c, i) && in<ascii_digit>(c, i + 1) && in<ascii_digit>(c, i + 2) ? 3 : 0;
}

// One pattern over one piece (at base in the text): its matches and the text between them.
void split_piece(const chars & c, Matcher match, size_t base, std::vector<std::pair<size_t, size_t>> & out) {
    size_t gap = 0; // where the unmatched text since the last match begins
    for (size_t i = 0; i < c.size();) {
        const size_t n = match(c, i);
        if (n == 0) {
            ++i;
            continue;
        }
        if (gap < i) out.emplace_back(base + gap, base + i);
        out.emplace_back(base + i, base + i + n);
        gap = i += n;
    }
    if (gap < c.size()) out.emplace_back(base + gap, base + c.size());
}

} // namespace

struct PreTokenizer {
    Matcher pass[6];    // the patterns, applied in turn up to the first null
    bool ignore_merges; // a piece that is itself a token is taken whole (Llama 3)
};

namespace {

const PreTokenizer kLlama3{{match_llama3<3, false>}, true};
const PreTokenizer kQwen2{{match_llama3<1, false>}, false};
const PreTokenizer kQwen35{{match_llama3<1, true>}, false};
const PreTokenizer kGpt2{{match_gpt2}, false};
const PreTokenizer kDigits{{one<is_number>, match_gpt2}, false};
const PreTokenizer kFalcon{{some<falcon_punct>, match_gpt2, three_digits}, false};
const PreTokenizer kDeepSeekCoder{
    {one<cr_lf>, spaced_some<is_letter>, spaced_some<is_punct>, some<ds_cjk>, one<is_number>}, false};
const PreTokenizer kDeepSeekLlm{
    {one<cr_lf>, spaced_some<ds_letter>, spaced_some<ds_punct>, trailing_spaces, some<ds_cjk>, some<is_number>}, false};

// tokenizer.ggml.pre -> its pre-tokenizer
const std::pair<const char *, const PreTokenizer *> kPreTokenizers[] = {
    {"llama-bpe", &kLlama3},
    {"llama3", &kLlama3},
    {"qwen2", &kQwen2},
    {"deepseek-r1-qwen", &kQwen2},
    {"qwen35", &kQwen35},
    {"default", &kGpt2},
    {"gpt-2", &kGpt2},
    {"gpt2", &kGpt2},
    {"", &kGpt2},
    {"mpt", &kGpt2},
    {"olmo", &kGpt2},
    {"jais", &kGpt2},
    {"starcoder", &kDigits},
    {"refact", &kDigits},
    {"command-r", &kDigits},
    {"smollm", &kDigits},
    {"codeshell", &kDigits},
    {"exaone", &kDigits},
    {"minerva-7b", &kDigits},
    {"falcon", &kFalcon},
    {"deepseek-coder", &kDeepSeekCoder},
    {"deepseek-llm", &kDeepSeekLlm},
};

} // namespace

bool BpeTokenizer::init(const std::vector<std::string> & tokens, const std::vector<int> & types,
                        const std::vector<std::string> & merges, const std::string & pre, std::string * err) {
    bool known = false;
    for (const auto & n : kPreTokenizers) {
        if (pre == n.first) { pre_ = n.second; known = true; break; }
    }
    if (!known) {
        if (err) {
            kvg::note_status(KVG_STATUS_UNSUPPORTED);
            *err = "pre-tokenizer '" + pre + "' is not supported (";
            for (const auto & n : kPreTokenizers) *err += std::string(n.first) + (*n.first ? ", " : "");
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
    const std::vector<utf8_char> all = utf8_chars(text);
    std::vector<std::pair<size_t, size_t>> pieces, next; // [begin, end) in characters
    if (!pre_ || all.empty()) return pieces;             // no pre-tokenizer before init()
    pieces.emplace_back(0, all.size());
    for (const Matcher match : pre_->pass) {
        if (!match) break;
        next.clear();
        for (const auto & p : pieces) split_piece({all.data() + p.first, p.second - p.first}, match, p.first, next);
        pieces.swap(next);
    }
    for (auto & p : pieces) p = {all[p.first].begin, all[p.second - 1].begin + all[p.second - 1].len}; // to bytes
    return pieces;
}

// Merges the lowest-ranked adjacent pair until none is a merge; symbols start as bytes.
void BpeTokenizer::encode_word(const std::string & word, std::vector<int> & out) const {
    std::vector<std::string> sym;
    for (unsigned char b : word) sym.push_back(byte_char_[b]);
    if (pre_->ignore_merges) {
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

std::vector<std::string> BpeTokenizer::pre_tokenize(const std::string & text) const {
    std::vector<std::string> out;
    for (const auto & piece : split(text)) out.push_back(text.substr(piece.first, piece.second - piece.first));
    return out;
}

const std::string & BpeTokenizer::token_bytes(int id) const {
    static const std::string none;
    return id >= 0 && id < (int) bytes_of_.size() ? bytes_of_[id] : none;
}

} // namespace kvg
