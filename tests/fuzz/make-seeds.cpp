// Writes the seed corpora of the fuzz targets: tiny but valid inputs, so that mutations
// start from files the loaders accept (the llama2.c format has no magic and must match its
// header to the byte, so random bytes alone would never get past the size check).
//
//   fuzz-make-seeds <tests/fuzz/corpus> [target...]
//
// Writes corpus/llama2c/*.bin, corpus/tokenizer-bin/*.bin, corpus/gguf/*.gguf (the llama2.c
// models converted with kvg_model_save_gguf), corpus/tokenize/*.txt and corpus/state/*.kvgs
// (sequence states of shared/models/stories260K.bin; $KVG_SHARED_DIR overrides the path
// compiled in) and corpus/rpc/*.bin (RPC request streams, rpc-seeds.h), or those of the
// target named (state or rpc). Deterministic.
#include "kvgraph.h"
#include "rpc-seeds.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Config {
    int32_t dim, hidden, layers, heads, kv_heads, vocab, seq; // vocab < 0: separate classifier
};

void write_file(const std::string & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write((const char *) bytes.data(), (std::streamsize) bytes.size());
    if (!f) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

template <typename T> void put(std::vector<uint8_t> & out, T v) {
    const size_t n = out.size();
    out.resize(n + sizeof(T));
    std::memcpy(out.data() + n, &v, sizeof(T));
}

// Header + every array llama2.c stores, small deterministic values.
std::vector<uint8_t> checkpoint(const Config & c) {
    std::vector<uint8_t> out;
    for (int32_t v : {c.dim, c.hidden, c.layers, c.heads, c.kv_heads, c.vocab, c.seq}) put(out, v);
    const uint64_t V = (uint64_t) std::abs(c.vocab), D = c.dim, F = c.hidden, L = c.layers;
    const uint64_t hs = D / c.heads, kv = hs * c.kv_heads;
    const uint64_t n = V * D + L * (D + D * D + 2 * kv * D + D * D + D + 3 * F * D) + D + c.seq * hs +
                       (c.vocab < 0 ? V * D : 0);
    uint32_t s = 12345;
    for (uint64_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        put(out, (float) ((int) (s >> 24) - 128) / 512.0f);
    }
    return out;
}

// tokenizer.bin: <unk>, BOS, EOS as llama2.c writes them, then the given pieces.
std::vector<uint8_t> tokenizer(const std::vector<std::string> & pieces) {
    std::vector<std::string> all = {"<unk>", "\n<s>\n", "\n</s>\n"};
    all.insert(all.end(), pieces.begin(), pieces.end());
    int32_t max_len = 0;
    for (const std::string & p : all) max_len = std::max(max_len, (int32_t) p.size());
    std::vector<uint8_t> out;
    put(out, max_len);
    for (size_t i = 0; i < all.size(); ++i) {
        put(out, i < 3 ? 0.0f : -(float) i);
        put(out, (int32_t) all[i].size());
        out.insert(out.end(), all[i].begin(), all[i].end());
    }
    return out;
}

// States of stories260K in the contexts fuzz-state.cpp makes (n_ctx 64, two sequences, a
// ring with 4 sinks and a window of 40), after histories that reach each part of the
// layout: open and left q8_0 groups, a wrapped ring, middle holes, an empty sequence.
void write_state_seeds(const std::string & dir) {
    const char * env = std::getenv("KVG_SHARED_DIR");
    const std::string path = std::string(env && *env ? env : KVG_SHARED_DIR) + "/models/stories260K.bin";
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    if (!m) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), err);
        std::exit(1);
    }
    struct Seed {
        const char * name;
        kvg_kv_type type;
        kvg_kv_mode mode;
        int n, rm0, rm1;
    };
    const Seed seeds[] = {
        {"f32-30", KVG_KV_F32, KVG_KV_LINEAR, 30, -1, -1},
        {"f32-hole", KVG_KV_F32, KVG_KV_LINEAR, 30, 5, 12},
        {"f32-empty", KVG_KV_F32, KVG_KV_LINEAR, 30, 0, -1},
        {"f32-last-only", KVG_KV_F32, KVG_KV_LINEAR, 30, 0, 29},
        {"f16-20", KVG_KV_F16, KVG_KV_LINEAR, 20, -1, -1},
        {"q8_0-50", KVG_KV_Q8_0, KVG_KV_LINEAR, 50, -1, -1},
        {"q8_0-rolled-back", KVG_KV_Q8_0, KVG_KV_LINEAR, 60, 40, -1},
        {"ring-f32-100", KVG_KV_F32, KVG_KV_RING, 100, -1, -1},
        {"ring-q8_0-150", KVG_KV_Q8_0, KVG_KV_RING, 150, 140, -1},
    };
    for (const Seed & s : seeds) {
        kvg_context_params p = kvg_context_default_params();
        p.n_ctx = 64, p.n_seq_max = 2, p.n_threads = 1, p.kv_type = s.type, p.kv_mode = s.mode;
        if (s.mode == KVG_KV_RING) p.n_sink = 4, p.n_window = 40;
        kvg_context * c = kvg_context_new(m, p, err, sizeof err);
        bool ok = c != nullptr;
        for (int i = 0; ok && i < s.n; ++i) {
            const kvg_token t = 3 + (11 * i + 5) % 500;
            ok = kvg_decode(c, &t, 1, i, err, sizeof err) != nullptr;
        }
        if (ok && (s.rm0 >= 0 || s.rm1 >= 0)) ok = kvg_seq_rm(c, 0, s.rm0, s.rm1, err, sizeof err);
        std::vector<uint8_t> state(ok ? kvg_state_seq_size(c, 0) : 0);
        if (!ok || kvg_state_seq_get(c, 0, state.data(), state.size(), err, sizeof err) != state.size()) {
            std::fprintf(stderr, "%s: %s\n", s.name, err);
            std::exit(1);
        }
        write_file(dir + "/state/" + s.name + ".kvgs", state);
        kvg_context_free(c);
    }
    kvg_model_free(m);
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 1;
    }
    const std::string dir = argv[1];
    for (const char * sub : {"llama2c", "tokenizer-bin", "gguf", "tokenize", "state", "rpc"}) {
        std::filesystem::create_directories(dir + "/" + sub);
    }
    const std::string only = argc > 2 ? argv[2] : "";
    if (argc > 3 || (argc > 2 && only != "state" && only != "rpc")) {
        std::fprintf(stderr, "only 'state' or 'rpc' can be written alone\n");
        return 1;
    }
    if (only != "state") {
        for (const auto & seed : rpct::rpc_seeds()) write_file(dir + "/rpc/" + seed.first, seed.second);
    }
    if (only != "rpc") write_state_seeds(dir);
    if (argc > 2) return 0;

    // 16 pieces: 3 specials, 13 text pieces with merges ("a"+"b" -> "ab", ...)
    const std::vector<std::string> tiny_pieces = {" ", "a", "b", "c", " a", "ab", " ab", "abc", "<0x41>", "<0x0A>", "x", "\xC3\xA9", "bc"};
    std::vector<std::string> bytes_pieces;
    for (int b = 0; b < 256; ++b) {
        char p[8];
        std::snprintf(p, sizeof p, "<0x%02X>", b);
        bytes_pieces.push_back(p);
    }
    for (const char * p : {" t", "he", " the", "in", " a", "an", "nd", " and"}) bytes_pieces.push_back(p);
    write_file(dir + "/tokenizer-bin/tiny16.bin", tokenizer(tiny_pieces));
    write_file(dir + "/tokenizer-bin/bytes267.bin", tokenizer(bytes_pieces));
    write_file(dir + "/tokenizer-bin/specials-only.bin", tokenizer({}));

    const Config tiny = {8, 16, 1, 2, 1, 16, 8};      // GQA, shared classifier
    const Config two = {32, 32, 2, 4, 2, -24, 16};    // separate classifier, rows of 32 for q8_0/q4_0
    const Config mha = {16, 24, 1, 4, 4, 267, 4};     // vocab of bytes267.bin
    const Config kv32 = {64, 32, 1, 2, 1, 16, 8};     // K/V rows of 32: the grouped q8_0 KV cache path
    const Config wide = {256, 256, 1, 4, 2, -16, 8};  // rows of 256: the super-block types
    write_file(dir + "/llama2c/tiny.bin", checkpoint(tiny));
    write_file(dir + "/llama2c/two-layers.bin", checkpoint(two));
    write_file(dir + "/llama2c/mha.bin", checkpoint(mha));
    write_file(dir + "/llama2c/kv32.bin", checkpoint(kv32));

    // GGUF versions of the same models, through the runtime's own writer
    const std::string tmp = dir + "/.seed-tmp.bin";
    struct Out { const char * name; Config c; const char * tok; kvg_ftype ftype; bool no_vocab; };
    const Out outs[] = {
        {"tiny-f32-vocab.gguf", tiny, "tokenizer-bin/tiny16.bin", KVG_FTYPE_F32, false},
        {"tiny-f16-placeholder-vocab.gguf", tiny, nullptr, KVG_FTYPE_F16, false},
        {"two-q8_0-no-vocab.gguf", two, nullptr, KVG_FTYPE_Q8_0, true},
        {"two-q4_0-no-vocab.gguf", two, nullptr, KVG_FTYPE_Q4_0, true},
        {"mha-f16-bytes-vocab.gguf", mha, "tokenizer-bin/bytes267.bin", KVG_FTYPE_F16, false},
        {"kv32-bf16-vocab.gguf", kv32, "tokenizer-bin/tiny16.bin", KVG_FTYPE_BF16, false},
        {"wide-iq4_xs-no-vocab.gguf", wide, nullptr, KVG_FTYPE_IQ4_XS, true}, // + q6_K output
        {"wide-tq1_0-no-vocab.gguf", wide, nullptr, KVG_FTYPE_TQ1_0, true},   // + q4_K embeddings
        {"wide-tq2_0-no-vocab.gguf", wide, nullptr, KVG_FTYPE_TQ2_0, true},
    };
    char err[512];
    for (const Out & o : outs) {
        write_file(tmp, checkpoint(o.c));
        const std::string tok = o.tok ? dir + "/" + o.tok : "";
        kvg_model * m = kvg_model_load(tmp.c_str(), o.tok ? tok.c_str() : nullptr, kvg_model_default_params(), err, sizeof err);
        if (!m || !kvg_model_save_gguf(m, (dir + "/gguf/" + o.name).c_str(), o.ftype, o.no_vocab, err, sizeof err)) {
            std::fprintf(stderr, "%s: %s\n", o.name, err);
            return 1;
        }
        kvg_model_free(m);
    }
    std::filesystem::remove(tmp);

    const char * texts[][2] = {
        {"story.txt", "Once upon a time, there was a little girl named Lily. She loved to play outside."},
        {"spaces.txt", "  leading, double  and trailing spaces   "},
        {"newlines.txt", "line one\nline two\r\n\ttabbed\n\n"},
        {"unicode.txt", "caf\xC3\xA9 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 \xCE\xB1\xCE\xB2\xCE\xB3"},
        {"invalid-utf8.txt", "\xff\xfe bad \xC3 lone lead, \x80 stray, \xED\xA0\x80 surrogate, \xF4\x90\x80\x80 too big"},
        {"specials.txt", "<s> </s> <unk> <0x41> \xE2\x96\x81 literal marks"},
        {"digits.txt", "3.14159 2718 0x1F 1,000,000"},
        {"code.txt", "int main(void) { return a[i] != b ? 1 : 0; } // done"},
    };
    for (const auto & t : texts) {
        const std::string s = t[1];
        write_file(dir + "/tokenize/" + t[0], std::vector<uint8_t>(s.begin(), s.end()));
    }
    const std::string nul("nul\0inside", 10);
    write_file(dir + "/tokenize/nul.txt", std::vector<uint8_t>(nul.begin(), nul.end()));
    std::printf("seeds written to %s\n", dir.c_str());
    return 0;
}
