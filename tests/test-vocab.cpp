#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "test-common.h"
#include "vocab-bpe.h"
#include "vocab.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using kvg::Vocab;

namespace {

std::string temp_path(const std::string & name) { return ::temp_path("test-vocab", name); }

// --- minimal JSON reader for the fixture: [ {"text": "...", "ids": [..]}, ... ]

struct Case {
    std::string text;
    std::vector<int> ids;
};

struct Json {
    const std::string& s;
    size_t i = 0;
    bool ok = true;

    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    }
    bool eat(char c) {
        ws();
        if (i < s.size() && s[i] == c) {
            i++;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) ok = false;
    }
    static void put_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += (char)cp;
        } else if (cp < 0x800) {
            out += (char)(0xC0 | (cp >> 6));
            out += (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += (char)(0xE0 | (cp >> 12));
            out += (char)(0x80 | ((cp >> 6) & 0x3F));
            out += (char)(0x80 | (cp & 0x3F));
        } else {
            out += (char)(0xF0 | (cp >> 18));
            out += (char)(0x80 | ((cp >> 12) & 0x3F));
            out += (char)(0x80 | ((cp >> 6) & 0x3F));
            out += (char)(0x80 | (cp & 0x3F));
        }
    }
    uint32_t hex4() {
        if (i + 4 > s.size()) {
            ok = false;
            return 0;
        }
        uint32_t v = (uint32_t)std::stoul(s.substr(i, 4), nullptr, 16);
        i += 4;
        return v;
    }
    std::string str() {
        std::string out;
        expect('"');
        while (ok && i < s.size() && s[i] != '"') {
            char c = s[i++];
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i >= s.size()) break;
            char e = s[i++];
            switch (e) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < s.size() && s[i] == '\\' && s[i + 1] == 'u') {
                        i += 2;
                        uint32_t lo = hex4();
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    put_utf8(out, cp);
                    break;
                }
                default: out += e;  // \" \\ \/
            }
        }
        expect('"');
        return out;
    }
    int integer() {
        ws();
        size_t j = i;
        if (j < s.size() && s[j] == '-') j++;
        while (j < s.size() && s[j] >= '0' && s[j] <= '9') j++;
        if (j == i) {
            ok = false;
            return 0;
        }
        int v = std::stoi(s.substr(i, j - i));
        i = j;
        return v;
    }
    std::vector<Case> cases() {
        std::vector<Case> out;
        expect('[');
        if (eat(']')) return out;
        do {
            Case c;
            expect('{');
            do {
                std::string key = str();
                expect(':');
                if (key == "text") {
                    c.text = str();
                } else if (key == "ids") {
                    expect('[');
                    if (!eat(']')) {
                        do c.ids.push_back(integer());
                        while (ok && eat(','));
                        expect(']');
                    }
                } else {
                    ok = false;
                }
            } while (ok && eat(','));
            expect('}');
            out.push_back(c);
        } while (ok && eat(','));
        expect(']');
        return out;
    }
};

const Vocab& llama_vocab() {
    static Vocab v;
    static bool loaded = false;
    if (!loaded) {
        std::string err;
        const std::string path = shared_dir() + "/models/tokenizer.bin";
        REQUIRE_MESSAGE(v.load_llama2c(path, &err), err);
        loaded = true;
    }
    return v;
}

const Vocab& tiny_vocab() {
    static Vocab v;
    static bool loaded = false;
    if (!loaded) {
        std::string err;
        const std::string path = shared_dir() + "/models/tok512.bin";
        REQUIRE_MESSAGE(v.load_llama2c(path, &err, 512), err);
        loaded = true;
    }
    return v;
}

std::vector<Case> fixture_cases() {
    const std::string text = read_file(shared_dir() + "/fixtures/llama2-tokenizer.json");
    REQUIRE(!text.empty());
    Json j{text};
    std::vector<Case> cases = j.cases();
    REQUIRE(j.ok);
    return cases;
}

// --- naive reference encoder: O(n^2) rescans, written independently of the
// priority-queue version, using only the public accessors. No user-defined
// pieces (neither shared vocab has any).

std::vector<std::string> naive_chars(const std::string& s) {
    // Decode code points; anything not shortest-form, in range, non-surrogate
    // is a one-byte "character".
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool good = n > 0 && i + n <= s.size();
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; good && k < n; k++) {
            unsigned char d = (unsigned char)s[i + k];
            if ((d & 0xC0) != 0x80) good = false;
            cp = (cp << 6) | (d & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (good && (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) good = false;
        if (!good) n = 1;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

std::vector<int> naive_encode(const Vocab& v, const std::string& text) {
    std::vector<int> out;
    if (text.empty()) return out;
    std::string norm = "\xE2\x96\x81";
    for (char c : text) norm += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    auto text_id = [&](const std::string& p) {
        int id = v.find(p);
        return id >= 0 && (v.type(id) == 1 || v.type(id) == 0 || v.type(id) == 4) ? id : -1;
    };
    std::vector<std::string> syms = naive_chars(norm);
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (size_t i = 0; i + 1 < syms.size(); i++) {
            int id = text_id(syms[i] + syms[i + 1]);
            if (id >= 0 && (best < 0 || v.score(id) > best_score)) {
                best = (int)i;
                best_score = v.score(id);
            }
        }
        if (best < 0) break;
        syms[best] += syms[best + 1];
        syms.erase(syms.begin() + best + 1);
    }
    for (const auto& sym : syms) {
        int id = text_id(sym);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (unsigned char b : sym) out.push_back(v.byte_token(b));
    }
    return out;
}

// Deterministic pseudo-random text over a mix of ASCII, spaces, multi-byte
// characters and invalid bytes.
std::string random_text(uint64_t& state, size_t n) {
    static const char* atoms[] = {"a", "b", "e", "t", "h", "in", " ", " ", "  ", "\t", "\n", ".", ",", "1", "0",
                                  "The", "ing", "\xC3\xBC", "\xE2\x80\x94", "\xF0\x9F\x99\x82", "\xE6\x97\xA5",
                                  "\xFF", "\x80", "\xC3", "\xED\xA0\x80", "<s>", "<0x41>"};
    const size_t n_atoms = sizeof(atoms) / sizeof(atoms[0]);
    std::string s;
    for (size_t i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        s += atoms[state % n_atoms];
    }
    return s;
}

std::string concat_decode_next(const Vocab& v, const std::vector<int>& ids) {
    std::string out;
    int prev = -1;
    for (int id : ids) {
        out += v.decode_next(prev, id);
        prev = id;
    }
    return out;
}

}  // namespace

TEST_CASE("llama2 tokenizer.bin loads with the known layout") {
    const Vocab& v = llama_vocab();
    CHECK(v.n_tokens() == 32000);
    CHECK(v.max_token_length() == 27);
    CHECK(v.bos() == 1);
    CHECK(v.eos() == 2);
    CHECK(v.unk() == 0);
    CHECK(v.piece(0) == "<unk>");
    CHECK(v.piece(1) == "<s>");  // stored as "\n<s>\n" by llama2.c
    CHECK(v.piece(2) == "</s>");
    CHECK(v.type(0) == kvg::TOKEN_TYPE_UNKNOWN);
    CHECK(v.type(1) == kvg::TOKEN_TYPE_CONTROL);
    CHECK(v.type(2) == kvg::TOKEN_TYPE_CONTROL);
    for (int b = 0; b < 256; b++) {
        CHECK(v.byte_token((uint8_t)b) == b + 3);
        CHECK(v.type(b + 3) == kvg::TOKEN_TYPE_BYTE);
    }
    CHECK(v.type(259) == kvg::TOKEN_TYPE_NORMAL);
    // Known Llama-2 pieces (spaces are canonical "▁" again).
    CHECK(v.piece(15043) == "\xE2\x96\x81Hello");
    CHECK(v.piece(3186) == "\xE2\x96\x81world");
    CHECK(v.piece(259) == "\xE2\x96\x81\xE2\x96\x81");
    CHECK(v.piece(29871) == "\xE2\x96\x81");
    CHECK(v.find("\xE2\x96\x81world") == 3186);
    CHECK(v.find("<0x0A>") == 13);
    CHECK(v.find("no such piece") == -1);
    CHECK(v.score(260) == -1.0f);
    CHECK(v.score(259) == -1e9f);
}

TEST_CASE("llama2 fixture: every case encodes exactly") {
    const Vocab& v = llama_vocab();
    const std::vector<Case> cases = fixture_cases();
    REQUIRE(cases.size() == 9);
    for (const Case& c : cases) {
        INFO("text: \"" << c.text << "\"");
        CHECK(v.encode(c.text, false) == c.ids);
        std::vector<int> with_bos = c.ids;
        with_bos.insert(with_bos.begin(), 1);
        CHECK(v.encode(c.text, true) == with_bos);
        CHECK(naive_encode(v, c.text) == c.ids);
    }
}

TEST_CASE("llama2 fixture strings decode back") {
    const Vocab& v = llama_vocab();
    for (const Case& c : fixture_cases()) {
        INFO("text: \"" << c.text << "\"");
        CHECK(v.decode(c.ids) == c.text);
        std::vector<int> with_bos = c.ids;
        with_bos.insert(with_bos.begin(), 1);
        with_bos.push_back(2);
        CHECK(v.decode(with_bos) == c.text);
        CHECK(concat_decode_next(v, with_bos) == c.text);
    }
}

TEST_CASE("token_to_piece and decode details") {
    const Vocab& v = llama_vocab();
    CHECK(v.token_to_piece(15043) == " Hello");
    CHECK(v.token_to_piece(243) == "\xF0");
    CHECK(v.token_to_piece(1).empty());
    CHECK(v.token_to_piece(2).empty());
    CHECK(v.token_to_piece(0) == " \xE2\x81\x87 ");
    // <unk>'s surface " ⁇ " is literal: no dummy-prefix strip even at the start.
    CHECK(v.decode({1, 0}) == " \xE2\x81\x87 ");
    CHECK(v.decode({15043, 3186}) == "Hello world");
    CHECK(v.decode({1, 15043, 3186, 2}) == "Hello world");
    // The emoji 🙂 arrives as four byte tokens and must come out whole.
    CHECK(v.decode({29871, 243, 162, 156, 133}) == "\xF0\x9F\x99\x82");
    CHECK(v.decode_next(1, 15043) == "Hello");
    CHECK(v.decode_next(15043, 3186) == " world");
    CHECK(v.decode_next(-1, 3186) == "world");
    CHECK(v.decode_next(15043, 2).empty());
    CHECK(v.decode_next(15043, 243) == "\xF0");
}

TEST_CASE("out-of-range ids do not crash") {
    const Vocab& v = llama_vocab();
    for (int id : {-1, -1000, 32000, 1 << 30}) {
        CHECK(v.piece(id).empty());
        CHECK(v.score(id) == 0.0f);
        CHECK(v.type(id) == -1);
        CHECK(v.token_to_piece(id).empty());
        CHECK(v.decode_next(1, id).empty());
    }
    CHECK(v.decode({-7, 15043, 99999}) == "Hello");
    Vocab empty;
    CHECK(empty.n_tokens() == 0);
    CHECK(empty.encode("hello", true).empty());
    CHECK(empty.decode({0, 1}).empty());
    CHECK(empty.piece(0).empty());
}

TEST_CASE("round trip: non-ASCII, emoji and invalid UTF-8") {
    // The Llama-2 model uses the identity normaliser and keeps extra spaces,
    // so the only text changes SentencePiece makes are (a) the dummy prefix,
    // which decode strips, and (b) invalid UTF-8 -> U+FFFD. We deviate on (b):
    // each invalid byte goes to byte fallback, so these strings all survive.
    const Vocab& v = llama_vocab();
    const std::vector<std::string> strings = {
        "Grüße aus Köln",
        "naïve café — déjà vu",
        "日本語のテキスト",
        "Привет, мир!",
        "emoji: \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\xA6\x99",
        "  two leading, trailing two  ",
        " ",
        "   ",
        "\n\n\t",
        "invalid \xFF byte",
        "\x80\x80 stray continuations",
        "truncated \xC3",
        "surrogate \xED\xA0\x80 and overlong \xC0\xAF and \xF4\x90\x80\x80",
        "<s>[INST] not special [/INST]</s>",
        "<0x41> is not byte A",
    };
    for (const std::string& s : strings) {
        INFO("text: \"" << s << "\"");
        std::vector<int> ids = v.encode(s, true);
        CHECK(v.decode(ids) == s);
        CHECK(concat_decode_next(v, ids) == s);
        CHECK(ids == [&] {
            std::vector<int> r = naive_encode(v, s);
            r.insert(r.begin(), 1);
            return r;
        }());
    }
    // Not round-trippable (as in SentencePiece): a literal "▁" in the text is
    // the space marker and decodes to ' '.
    CHECK(v.decode(v.encode("\xE2\x96\x81x", false)) == " x");
    // Invalid byte: its own character, so "▁" stays alone and 0xFF is <0xFF>.
    CHECK(v.encode("\xFF", false) == std::vector<int>{29871, 0xFF + 3});
    // Truncated 2-byte sequence followed by ASCII: both bytes separately.
    std::vector<int> ids = v.encode("\xC3(", false);
    REQUIRE(ids.size() >= 2);
    CHECK(ids[1] == 0xC3 + 3);
}

TEST_CASE("priority-queue encoder agrees with the naive O(n^2) encoder") {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (const Vocab* v : {&llama_vocab(), &tiny_vocab()}) {
        for (int t = 0; t < 200; t++) {
            std::string s = random_text(state, 1 + t % 40);
            INFO("text: \"" << s << "\"");
            std::vector<int> ids = v->encode(s, false);
            CHECK(ids == naive_encode(*v, s));
            CHECK(v->decode(ids) == s);
        }
    }
}

TEST_CASE("long prompt encodes quickly and round-trips") {
    // A quadratic encoder would take minutes on this; ours takes milliseconds.
    uint64_t state = 12345;
    std::string s = random_text(state, 100000);
    const Vocab& v = llama_vocab();
    std::vector<int> ids = v.encode(s, true);
    CHECK(ids.size() > 10000);
    CHECK(v.decode(ids) == s);
    std::string a(200000, 'a');
    CHECK(v.decode(v.encode(a, false)) == a);
}

TEST_CASE("tok512.bin (aidreams260K) loads and round-trips") {
    const Vocab& v = tiny_vocab();
    CHECK(v.n_tokens() == 512);
    CHECK(v.max_token_length() == 10);
    CHECK(v.piece(1) == "<s>");
    CHECK(v.byte_token(0x41) == 0x41 + 3);
    CHECK(v.piece(259) == "in");
    CHECK(v.piece(262) == "\xE2\x96\x81" "a");
    for (const std::string s : {"Once upon a time, there was a little girl.", "The sun is shining.",
                                "ünïcödé and \xF0\x9F\x99\x82", " x ", "in a tin"}) {
        INFO("text: \"" << s << "\"");
        std::vector<int> ids = v.encode(s, true);
        CHECK(ids.front() == 1);
        CHECK(v.decode(ids) == s);
    }
    // Plain text merges into fewer tokens than characters.
    CHECK(v.encode("in the garden", false).size() < std::string(" in the garden").size());
    // The model's own greedy output decodes to text that re-encodes to the same text.
    std::ifstream f(shared_dir() + "/fixtures/aidreams260K.greedy.txt");
    std::vector<int> greedy;
    for (int id; f >> id;) greedy.push_back(id);
    REQUIRE(greedy.size() == 64);
    std::string text = v.decode(greedy);
    CHECK(!text.empty());
    CHECK(v.decode(v.encode(text, true)) == text);
}

TEST_CASE("malformed tokenizer files give errors, not crashes") {
    const std::string good = read_file(shared_dir() + "/models/tok512.bin");
    REQUIRE(good.size() == 6290);
    const std::string path = temp_path("bad.bin");
    std::string err;
    Vocab v;

    SUBCASE("missing file") {
        CHECK_FALSE(v.load_llama2c(temp_path("does-not-exist.bin"), &err));
        CHECK(err.find("cannot open") != std::string::npos);
    }
    SUBCASE("empty file") {
        write_file(path, "");
        CHECK_FALSE(v.load_llama2c(path, &err));
        CHECK(err.find("offset 0") != std::string::npos);
    }
    SUBCASE("truncated at many offsets (expected size given)") {
        for (size_t cut : {size_t(1), size_t(3), size_t(4), size_t(7), size_t(11), size_t(12), size_t(14),
                           size_t(17), size_t(100), good.size() / 2, good.size() - 1}) {
            INFO("cut at " << cut);
            write_file(path, good.substr(0, cut));
            err.clear();
            CHECK_FALSE(v.load_llama2c(path, &err, 512));
            CHECK(err.find("offset") != std::string::npos);
            CHECK(v.n_tokens() == 0);
        }
    }
    SUBCASE("truncated inside a token (read to EOF)") {
        // Offsets 4..11 hold token 0's score/length, 12..16 its bytes.
        for (size_t cut : {size_t(6), size_t(13), good.size() - 1}) {
            INFO("cut at " << cut);
            write_file(path, good.substr(0, cut));
            CHECK_FALSE(v.load_llama2c(path, &err));
            CHECK(err.find("truncated") != std::string::npos);
        }
    }
    SUBCASE("negative length") {
        std::string bad = good;
        bad[8] = bad[9] = bad[10] = bad[11] = '\xFF';  // token 0 length = -1
        write_file(path, bad);
        CHECK_FALSE(v.load_llama2c(path, &err));
        CHECK(err.find("bad length -1") != std::string::npos);
        CHECK(err.find("offset 8") != std::string::npos);
    }
    SUBCASE("huge length") {
        std::string bad = good;
        bad[8] = '\xFF', bad[9] = '\xFF', bad[10] = '\xFF', bad[11] = '\x7F';
        write_file(path, bad);
        CHECK_FALSE(v.load_llama2c(path, &err));
        CHECK(err.find("bad length") != std::string::npos);
    }
    SUBCASE("negative max_token_length") {
        std::string bad = good;
        bad[3] = '\x80';
        write_file(path, bad);
        CHECK_FALSE(v.load_llama2c(path, &err));
        CHECK(err.find("max_token_length") != std::string::npos);
    }
    SUBCASE("wrong expected size") {
        write_file(path, good);
        CHECK_FALSE(v.load_llama2c(path, &err, 511));
        CHECK(err.find("the tokenizer has 512 tokens, the model 511") != std::string::npos);
        write_file(path, good + "xyz"); // bytes that are no token
        CHECK_FALSE(v.load_llama2c(path, &err, 512));
        CHECK(err.find("3 trailing bytes") != std::string::npos);
        write_file(path, good);
        CHECK_FALSE(v.load_llama2c(path, &err, 513));
        CHECK(err.find("truncated") != std::string::npos);
        CHECK(v.load_llama2c(path, &err, 512));
    }
    SUBCASE("too few tokens") {
        // max_len 5, then two tokens: (0.0, "<unk>"), (0.0, "<s>")
        std::string two("\x05\0\0\0" "\0\0\0\0" "\x05\0\0\0" "<unk>" "\0\0\0\0" "\x03\0\0\0" "<s>", 4 + 8 + 5 + 8 + 3);
        write_file(path, two);
        CHECK_FALSE(v.load_llama2c(path, &err));
        CHECK(err.find("only 2 tokens") != std::string::npos);
    }
    std::filesystem::remove(path);
}

TEST_CASE("init() with a hand-made vocab: merges computed by hand") {
    const std::string U = "\xE2\x96\x81";  // ▁
    std::vector<std::string> pieces = {
        "<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>",  // 0..4
        U, "a", "b", "c",                            // 5..8
        "ab", "bc", U + "a", "abc", "aa",            // 9..13
        "<", "s", ">", "<s", "xyz",                  // 14..18
    };
    std::vector<float> scores = {0, 0, 0, 0, 0, 0, 0, 0, 0, -1.0f, -0.5f, -2.0f, -3.0f, -1.0f, 0, 0, 0, -1.0f, 0};
    std::vector<int> types = {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4};
    Vocab v;
    std::string err;
    REQUIRE_MESSAGE(v.init(pieces, scores, types, 1, 2, 0, &err), err);
    CHECK(v.n_tokens() == 19);
    CHECK(v.byte_token(0xC3) == 3);
    CHECK(v.byte_token(0x41) == -1);

    // "▁abc": pairs ▁a(-2) ab(-1) bc(-0.5) -> take bc; then ▁a(-2) vs abc(-3)
    // -> take ▁a; "▁abc" is not a piece -> [▁a, bc].
    CHECK(v.encode("abc", false) == std::vector<int>{11, 10});
    CHECK(v.encode("abc", true) == std::vector<int>{1, 11, 10});
    // "▁aaa": aa(-1) at 1 and at 2 tie -> leftmost -> [▁, aa, a]; then no
    // pair ("▁aa", "aaa") is a piece. Rightmost would give [▁a, aa].
    CHECK(v.encode("aaa", false) == std::vector<int>{5, 13, 6});
    // "é" is not a piece: byte fallback, and bytes never merge with "▁".
    CHECK(v.encode("\xC3\xA9", false) == std::vector<int>{5, 3, 4});
    // "z" is not a piece and has no byte token -> <unk>.
    CHECK(v.encode("z", false) == std::vector<int>{5, 0});
    // "<s" + ">" would spell the control piece "<s>": not a merge.
    CHECK(v.encode("<s>", false) == std::vector<int>{5, 17, 16});
    // User-defined "xyz" is cut out whole before BPE and then left alone.
    CHECK(v.encode("axyz", false) == std::vector<int>{11, 18});
    // "a b": "▁a" then "▁b" is not a piece -> [▁a, ▁, b].
    CHECK(v.encode("a b", false) == std::vector<int>{11, 5, 7});

    CHECK(v.decode({1, 11, 10}) == "abc");
    CHECK(v.decode({5, 3, 4}) == "\xC3\xA9");
    CHECK(v.decode({11, 5, 7, 2}) == "a b");
    CHECK(v.token_to_piece(3) == "\xC3");
    CHECK(v.find("xyz") == 18);
    CHECK(v.type(18) == kvg::TOKEN_TYPE_USER_DEFINED);

    // Types inferred when not given.
    Vocab w;
    REQUIRE(w.init(pieces, scores, {}, 1, 2, 0, &err));
    CHECK(w.type(0) == kvg::TOKEN_TYPE_UNKNOWN);
    CHECK(w.type(1) == kvg::TOKEN_TYPE_CONTROL);
    CHECK(w.type(4) == kvg::TOKEN_TYPE_BYTE);
    CHECK(w.type(18) == kvg::TOKEN_TYPE_NORMAL);
    CHECK(w.encode("abc", false) == std::vector<int>{11, 10});
}

TEST_CASE("init() rejects inconsistent input") {
    Vocab v;
    std::string err;
    const std::vector<std::string> p = {"<unk>", "<s>", "</s>", "a"};
    CHECK_FALSE(v.init({}, {}, {}, -1, -1, -1, &err));
    CHECK(err.find("no tokens") != std::string::npos);
    CHECK_FALSE(v.init(p, {0, 0}, {}, 1, 2, 0, &err));
    CHECK(err.find("scores") != std::string::npos);
    CHECK_FALSE(v.init(p, {}, {1, 1}, 1, 2, 0, &err));
    CHECK(err.find("types") != std::string::npos);
    CHECK_FALSE(v.init(p, {}, {}, 4, 2, 0, &err));
    CHECK(err.find("out of range") != std::string::npos);
    CHECK_FALSE(v.init(p, {0, 0, 0, std::nanf("")}, {}, 1, 2, 0, &err));
    CHECK(err.find("NaN") != std::string::npos);
    CHECK_FALSE(v.init(p, {}, {2, 3, 3, 9}, 1, 2, 0, &err));
    CHECK(err.find("unknown type") != std::string::npos);
    CHECK_FALSE(v.init(p, {}, {2, 3, 3, 6}, 1, 2, 0, &err));
    CHECK(err.find("<0xNN>") != std::string::npos);
    CHECK(v.n_tokens() == 0);
    // Duplicates are allowed; find() returns the first.
    REQUIRE(v.init({"<unk>", "a", "a"}, {}, {}, -1, -1, 0, &err));
    CHECK(v.find("a") == 1);
}

namespace {

// The base of a hand-made vocab: <unk>, <s>, </s>, 256 byte tokens, the space mark.
void base_pieces(std::vector<std::string>& pieces, std::vector<int>& types) {
    pieces = {"<unk>", "<s>", "</s>"};
    types = {kvg::TOKEN_TYPE_UNKNOWN, kvg::TOKEN_TYPE_CONTROL, kvg::TOKEN_TYPE_CONTROL};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        pieces.push_back(name);
        types.push_back(kvg::TOKEN_TYPE_BYTE);
    }
    pieces.push_back("\xE2\x96\x81");
    types.push_back(kvg::TOKEN_TYPE_NORMAL);
}

double min_encode_seconds(const Vocab& v, const std::string& text) {
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<int> ids = v.encode(text, false);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        CHECK(!ids.empty());
    }
    return best;
}

}  // namespace

TEST_CASE("32k user-defined pieces with a shared 60-byte prefix: longest match, in time linear in the prompt") {
    std::vector<std::string> pieces;
    std::vector<int> types;
    base_pieces(pieces, types);
    Vocab plain;
    std::string err;
    REQUIRE_MESSAGE(plain.init(pieces, {}, types, 1, 2, 0, &err), err);
    const std::string prefix(60, 'q');
    const int first = (int)pieces.size(), n_user = 32000;
    for (int i = 0; i < n_user; ++i) {
        pieces.push_back(prefix + std::to_string(i));
        types.push_back(kvg::TOKEN_TYPE_USER_DEFINED);
    }
    Vocab v;
    REQUIRE_MESSAGE(v.init(pieces, {}, types, 1, 2, 0, &err), err);

    // ~10 KB of pieces back to back: the encoding is the space mark, then each piece whole
    // (no piece is a prefix of a text that continues with a digit it does not own: each
    // is followed by the next piece's 'q').
    uint64_t state = 99;
    std::string text;
    std::vector<int> want = {first - 1};
    while (text.size() < 10000) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const int i = (int)((state >> 33) % n_user);
        text += pieces[first + i];
        want.push_back(first + i);
    }
    CHECK(v.encode(text, false) == want);
    CHECK(v.decode(want) == text);
    // a prefix alone is no piece: bytes
    CHECK(v.encode(prefix, false).size() == 61);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(NDEBUG)
    MESSAGE("timing skipped in sanitizer and debug builds");
#else
    const double t_user = min_encode_seconds(v, text), t_plain = min_encode_seconds(plain, text);
    MESSAGE("10 KB: " << t_user * 1e3 << " ms with 32k user-defined pieces, " << t_plain * 1e3 << " ms without");
    CHECK(t_user < 2.0 * t_plain + 1e-3);
#endif
}

// The multi-pattern pre-tokenizers: each pattern splits every piece the previous ones left, into
// its matches and the text between them (llama.cpp's test vectors for these vocabularies are not
// in ../shared; these pieces are llama.cpp's for the same text).
TEST_CASE("byte-level BPE pre-tokenizers: deepseek-llm, deepseek-coder, falcon, qwen35") {
    using pieces = std::vector<std::string>;
    auto split = [](const std::string & pre, const std::string & text) {
        kvg::BpeTokenizer t;
        std::string err;
        REQUIRE_MESSAGE(t.init({"a"}, {1}, {}, pre, &err), err);
        return t.pre_tokenize(text);
    };
    // "é" is a DeepSeek LLM letter but not in its punctuation run, which also takes ASCII letters
    CHECK(split("deepseek-llm", "Hello caf\xC3\xA9  \n\xE4\xB8\x96\xE7\x95\x8C 123\xE4\xB8\xAD") ==
          pieces{"Hello", " caf", "\xC3\xA9", "  ", "\n", "\xE4\xB8\x96\xE7\x95\x8C", " ", "123", "\xE4\xB8\xAD"});
    // "+" is a symbol, not punctuation: it stays with the space before it
    CHECK(split("deepseek-coder", "a + b(12)\n") == pieces{"a", " +", " b", "(", "1", "2", ")", "\n"});
    // a digit run is cut in threes after gpt-2's split
    CHECK(split("falcon", "x = 12345;") == pieces{"x", " ", "=", " ", "123", "45", ";"});
    // combining marks stay with their word (qwen2 would split "e" + U+0301 apart)
    CHECK(split("qwen35", "cafe\xCC\x81 \xCC\x81! 12") == pieces{"cafe\xCC\x81", " \xCC\x81", "!", " ", "1", "2"});
    CHECK(split("qwen2", "cafe\xCC\x81") == pieces{"cafe", "\xCC\x81"});
}
