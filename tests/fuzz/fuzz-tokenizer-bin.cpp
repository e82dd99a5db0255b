// Fuzz target: the llama2.c tokenizer.bin reader (kvg::Vocab::load_llama2c), then encode and
// decode with whatever vocabulary loads.
//
// Format: int32 max_token_length, then per token float32 score, int32 length, the bytes.
// Invariants besides "no crash, leak or UB": a rejected file gives a message that names a byte
// offset or the problem; an accepted one loads again with its token count given, fails with
// a count that is one short, and its encoder only emits ids of the vocabulary.
#include "fuzz-common.h"

#include "vocab.h"

namespace {

void exercise_vocab(const kvg::Vocab & v) {
    const int n = v.n_tokens();
    std::vector<std::string> texts = {"", " ", "Hello world", "  two  spaces ", "\xE2\x96\x81", "caf\xC3\xA9 \xF0\x9F\x98\x80",
                                      std::string("nul\0byte", 8), "\xff\xfe\x80 broken \xC3"};
    // text made of the vocabulary's own pieces, so that merges happen
    std::string joined;
    for (int i = 0; i < n && i < 64; ++i) joined += v.token_to_piece((i * 37) % n);
    texts.push_back(joined);
    for (const std::string & text : texts) {
        for (bool bos : {false, true}) {
            const std::vector<int> ids = v.encode(text, bos);
            for (int id : ids) FUZZ_CHECK(id >= 0 && id < n, "encode produced id %d of %d", id, n);
            if (bos) FUZZ_CHECK(!ids.empty() && ids[0] == v.bos(), "no BOS first");
            std::string streamed;
            int prev = -1;
            for (int id : ids) streamed += v.decode_next(prev, id), prev = id;
            FUZZ_CHECK(streamed == v.decode(ids), "streamed decode differs from decode");
        }
    }
    for (int id : {-1, n, n + 1, 0, 1, 2}) (void) v.token_to_piece(id);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static fuzz::MemFile file;
    const std::string & path = file.write(data, size);
    kvg::Vocab v;
    std::string err;
    if (!v.load_llama2c(path, &err)) {
        FUZZ_CHECK(!err.empty(), "failure without a message");
        FUZZ_CHECK(v.n_tokens() == 0, "vocab not empty after a failure");
        return 0;
    }
    const int n = v.n_tokens();
    FUZZ_CHECK(n >= 3 && v.bos() == 1 && v.eos() == 2 && v.unk() == 0, "n %d bos %d eos %d unk %d", n, v.bos(), v.eos(),
               v.unk());
    int32_t max_len;
    std::memcpy(&max_len, data, 4);
    FUZZ_CHECK(v.max_token_length() == max_len, "max_token_length %d vs header %d", v.max_token_length(), max_len);

    kvg::Vocab w;
    FUZZ_CHECK(w.load_llama2c(path, &err, n), "reload with the token count failed: %s", err.c_str());
    FUZZ_CHECK(w.n_tokens() == n, "reload has %d tokens, not %d", w.n_tokens(), n);
    FUZZ_CHECK(!w.load_llama2c(path, &err, n - 1) && !err.empty(), "one token short accepted");
    exercise_vocab(v);
    return 0;
}
