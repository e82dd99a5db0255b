// Fuzz target: SentencePiece-style encode/decode of arbitrary bytes with the real Llama 2
// vocabulary (shared/models/tokenizer.bin, loaded once; $KVG_SHARED_DIR overrides the path
// compiled in).
//
// Invariants besides "no crash, leak or UB":
//  - ids are in the vocabulary, never <unk> (all 256 byte tokens exist), BOS only when asked;
//  - decode(encode(s)) == s when s has no literal U+2581 (the encoder's own space mark);
//  - streaming decode (decode_next) concatenates to decode;
//  - token_to_piece accepts any id, including out-of-range ones.
#include "fuzz-common.h"

#include "kvgraph.h"
#include "vocab.h"

namespace {

const kvg::Vocab & vocab() {
    static kvg::Vocab * v = [] {
        const char * env = std::getenv("KVG_SHARED_DIR");
        const std::string path = std::string(env && *env ? env : KVG_SHARED_DIR) + "/models/tokenizer.bin";
        auto * v = new kvg::Vocab;
        std::string err;
        if (!v->load_llama2c(path, &err)) {
            std::fprintf(stderr, "fuzz-tokenize: cannot load %s: %s\n", path.c_str(), err.c_str());
            std::abort();
        }
        return v;
    }();
    return *v;
}

// Llama 3's byte-level BPE vocabulary (llama.cpp's vocab-only file): any bytes round-trip.
kvg_model * bpe_model() {
    static kvg_model * m = [] {
        const char * env = std::getenv("KVG_SHARED_DIR");
        const std::string path = std::string(env && *env ? env : KVG_SHARED_DIR) + "/vocab/ggml-vocab-llama-bpe.gguf";
        kvg_model_params p = kvg_model_default_params();
        p.vocab_only = true;
        char err[512];
        kvg_model * model = kvg_model_load(path.c_str(), nullptr, p, err, sizeof err);
        if (!model) {
            std::fprintf(stderr, "fuzz-tokenize: cannot load %s: %s\n", path.c_str(), err);
            std::abort();
        }
        return model;
    }();
    return m;
}

void check_bpe(const std::string & text) {
    kvg_model * m = bpe_model();
    const int32_t n = -kvg_tokenize(m, text.c_str(), false, nullptr, 0);
    std::vector<kvg_token> ids((size_t) n + 1);
    FUZZ_CHECK(kvg_tokenize(m, text.c_str(), false, ids.data(), (int32_t) ids.size()) == n, "bpe: token count changed");
    for (int32_t i = 0; i < n; ++i) FUZZ_CHECK(ids[i] >= 0 && ids[i] < kvg_model_n_vocab(m), "bpe: bad id %d", ids[i]);
    std::vector<char> buf(text.size() + 16);
    const int32_t len = kvg_detokenize(m, ids.data(), n, buf.data(), (int32_t) buf.size());
    // the C API stops at the first NUL, so compare with the text up to it
    const std::string upto(text.c_str());
    FUZZ_CHECK(len == (int32_t) upto.size() && std::memcmp(buf.data(), upto.data(), upto.size()) == 0,
               "bpe: round trip of %zu bytes gave %d", upto.size(), len);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const kvg::Vocab & v = vocab();
    const int n = v.n_tokens();
    const std::string text((const char *) data, size);

    const std::vector<int> ids = v.encode(text, false);
    for (int id : ids) {
        FUZZ_CHECK(id >= 0 && id < n && id != v.unk() && id != v.bos() && id != v.eos(), "bad id %d", id);
    }
    FUZZ_CHECK(text.empty() == ids.empty(), "%zu ids for %zu bytes", ids.size(), size);
    const std::string back = v.decode(ids);
    if (text.find("\xE2\x96\x81") == std::string::npos) {
        FUZZ_CHECK(back == text, "round trip of %zu bytes gave %zu bytes", size, back.size());
    }
    std::string streamed;
    int prev = -1;
    for (int id : ids) streamed += v.decode_next(prev, id), prev = id;
    FUZZ_CHECK(streamed == back, "streamed decode differs");

    std::vector<int> with_bos = v.encode(text, true);
    FUZZ_CHECK(!with_bos.empty() && with_bos[0] == v.bos(), "no BOS");
    with_bos.erase(with_bos.begin());
    FUZZ_CHECK(with_bos == ids, "BOS changes the encoding");
    FUZZ_CHECK(v.decode(v.encode(text, true)) == back, "BOS changes the decoding");

    check_bpe(text);

    // the bytes as token ids
    for (size_t i = 0; i + 4 <= size && i < 64; i += 4) {
        int32_t id;
        std::memcpy(&id, data + i, 4);
        (void) v.token_to_piece(id);
        (void) v.decode_next(id, id % (n + 2));
    }
    return 0;
}
