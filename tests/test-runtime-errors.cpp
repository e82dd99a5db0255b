// Bad input to the runtime comes back as an error message, never a crash: missing and
// damaged model files (llama2.c and GGUF), bad tokenizers, bad context sizes, prompts
// longer than the context, bad positions and token ids.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-common.h"

#include "ggml.h"
#include "gguf.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string temp_path(const std::string & name) { return ::temp_path("test-rterr", name); }

// Loads path expecting failure; returns the message.
std::string load_error(const std::string & path, const char * tok = nullptr) {
    char err[1024] = "unset";
    kvg_model * m = kvg_model_load(path.c_str(), tok, kvg_model_default_params(), err, sizeof err);
    CHECK(m == nullptr);
    if (m) kvg_model_free(m);
    return err;
}

bool contains(const std::string & s, const std::string & part) { return s.find(part) != std::string::npos; }

kvg_model * load_ok(const std::string & path, const char * tok = nullptr) {
    char err[1024] = "";
    kvg_model * m = kvg_model_load(path.c_str(), tok, kvg_model_default_params(), err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    return m;
}

// A GGUF of aidreams260K written once for the tests that damage GGUF files.
struct TempFile {
    std::string path;
    ~TempFile() {
        if (!path.empty()) std::remove(path.c_str());
    }
};
const std::string & aidreams_gguf() {
    static TempFile file; // removed at exit
    std::string & path = file.path;
    if (path.empty()) {
        path = temp_path("aidreams.gguf");
        kvg_model * m = load_ok(model_path("aidreams260K.bin"), model_path("tok512.bin").c_str());
        char err[512];
        REQUIRE(kvg_model_save_gguf(m, path.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
        kvg_model_free(m);
    }
    return path;
}

// Rewrites the GGUF with one change applied to its metadata/tensors.
template <class F> std::string edited_gguf(const std::string & name, F edit) {
    ggml_context * data = nullptr;
    gguf_init_params p = {false, &data};
    gguf_context * src = gguf_init_from_file(aidreams_gguf().c_str(), p);
    REQUIRE(src != nullptr);
    gguf_context * dst = gguf_init_empty();
    gguf_set_kv(dst, src);
    edit(dst, data);
    const std::string path = temp_path(name);
    REQUIRE(gguf_write_to_file(dst, path.c_str(), false));
    gguf_free(dst);
    gguf_free(src);
    ggml_free(data);
    return path;
}

void add_all_tensors(gguf_context * g, ggml_context * data, const char * skip = nullptr) {
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) {
        if (!skip || std::string(t->name) != skip) gguf_add_tensor(g, t);
    }
}

} // namespace

TEST_CASE("missing, empty and non-model files") {
    CHECK(contains(load_error("/nonexistent/model.bin"), "cannot open"));
    CHECK(contains(load_error(""), "no model path"));
    const std::string empty = temp_path("empty.bin");
    write_file(empty, "");
    CHECK(contains(load_error(empty), "empty"));
    CHECK(contains(load_error(shared_dir()), "not a regular file"));
    std::remove(empty.c_str());
}

TEST_CASE("damaged llama2.c checkpoints") {
    const std::string good = read_file(model_path("aidreams260K.bin"));
    REQUIRE(good.size() == 932124);
    const std::string path = temp_path("bad.bin");

    write_file(path, good.substr(0, 10));
    std::string e = load_error(path);
    CHECK(contains(e, "truncated llama2.c header"));
    CHECK(contains(e, "offset 10"));

    // cut inside the token embedding, inside layer weights, inside the RoPE tables
    for (size_t cut : {1000ul, 300000ul, 931000ul}) {
        CAPTURE(cut);
        write_file(path, good.substr(0, cut));
        e = load_error(path);
        CHECK(contains(e, "truncated llama2.c checkpoint"));
        CHECK(contains(e, "file ends at offset " + std::to_string(cut)));
    }
    write_file(path, good.substr(0, 1000));
    CHECK(contains(load_error(path), "array token_embedding"));

    write_file(path, good + std::string(12, '\0'));
    e = load_error(path);
    CHECK(contains(e, "12 unexpected bytes"));
    CHECK(contains(e, "offset 932124"));

    // header fields: negative dim, zero layers, heads not dividing dim, absurd sizes
    auto with_field = [&](int field, int32_t value) {
        std::string s = good;
        std::memcpy(&s[4 * field], &value, 4);
        write_file(path, s);
        return load_error(path);
    };
    e = with_field(0, -64);
    CHECK(contains(e, "dim at offset 0 is -64"));
    CHECK(contains(with_field(2, 0), "n_layers at offset 8 is 0"));
    CHECK(contains(with_field(3, 5), "not a multiple of n_head 5"));
    CHECK(contains(with_field(4, 3), "not a multiple of n_head_kv 3"));
    CHECK(contains(with_field(5, 1 << 30), "vocab_size at offset 20"));
    CHECK(contains(with_field(6, 2000000000), "seq_len at offset 24"));
    // plausible header that does not match the data size
    CHECK(contains(with_field(1, 200), "truncated llama2.c checkpoint"));

    // random bytes
    std::string garbage(5000, '\0');
    uint32_t x = 12345;
    for (char & c : garbage) c = (char) ((x = x * 1103515245u + 12345u) >> 24);
    write_file(path, garbage);
    CHECK(contains(load_error(path), "not a llama2.c checkpoint"));
    std::remove(path.c_str());
}

TEST_CASE("bad tokenizer files") {
    // the Llama-2 vocabulary has 32000 tokens, the model 512
    std::string e = load_error(model_path("aidreams260K.bin"), model_path("tokenizer.bin").c_str());
    CHECK_FALSE(e.empty());
    CHECK(contains(e, "tokenizer.bin"));
    e = load_error(model_path("aidreams260K.bin"), "/nonexistent/tok.bin");
    CHECK(contains(e, "/nonexistent/tok.bin"));
    const std::string tok = temp_path("tok.bin");
    write_file(tok, read_file(model_path("tok512.bin")).substr(0, 3000));
    CHECK_FALSE(load_error(model_path("aidreams260K.bin"), tok.c_str()).empty());
    std::remove(tok.c_str());
}

TEST_CASE("damaged GGUF files: every truncation is an error with an offset") {
    const std::string good = read_file(aidreams_gguf());
    REQUIRE(good.size() > 900000);
    const std::string path = temp_path("trunc.gguf");
    // inside the header, the KV pairs (tokenizer strings), the tensor infos, the data
    for (size_t cut : {6ul, 20ul, 100ul, 3000ul, 9000ul, good.size() / 2, good.size() - 1}) {
        CAPTURE(cut);
        write_file(path, good.substr(0, cut));
        const std::string e = load_error(path);
        CHECK_FALSE(e.empty());
        CHECK(contains(e, "offset"));
    }
    // flipped bytes in the metadata area must not crash (error or a model that loads)
    for (size_t at = 8; at < 4000; at += 97) {
        std::string s = good;
        s[at] = (char) (s[at] ^ 0x5a);
        write_file(path, s);
        char err[512];
        kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        if (m) kvg_model_free(m);
    }
    std::remove(path.c_str());
}

TEST_CASE("GGUF files with wrong metadata or tensors") {
    std::string p = edited_gguf("arch.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_set_val_str(g, "general.architecture", "gpt2");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "architecture 'gpt2'"));
    std::remove(p.c_str());

    p = edited_gguf("nokey.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_remove_key(g, "llama.block_count");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "missing key llama.block_count"));
    std::remove(p.c_str());

    p = edited_gguf("keytype.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_set_val_str(g, "llama.embedding_length", "sixty-four");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "llama.embedding_length has type"));
    std::remove(p.c_str());

    p = edited_gguf("heads.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_set_val_u32(g, "llama.attention.head_count_kv", 3);
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "n_head_kv 3"));
    std::remove(p.c_str());

    p = edited_gguf("notensor.gguf", [](gguf_context * g, ggml_context * d) {
        add_all_tensors(g, d, "blk.2.ffn_up.weight");
    });
    CHECK(contains(load_error(p), "missing tensor blk.2.ffn_up.weight"));
    std::remove(p.c_str());

    p = edited_gguf("shape.gguf", [](gguf_context * g, ggml_context * d) {
        for (ggml_tensor * t = ggml_get_first_tensor(d); t; t = ggml_get_next_tensor(d, t)) {
            if (std::string(t->name) == "blk.1.attn_k.weight") {
                t->ne[1] = 32; // half of the rows: same file, wrong shape
                t->nb[2] = t->nb[3] = t->nb[1] * 32;
            }
            gguf_add_tensor(g, t);
        }
    });
    std::string e = load_error(p);
    CHECK(contains(e, "blk.1.attn_k.weight has shape [64, 32"));
    std::remove(p.c_str());

    p = edited_gguf("vocab.gguf", [](gguf_context * g, ggml_context * d) {
        const char * toks[] = {"<unk>", "<s>", "</s>"};
        gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, 3);
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "tokenizer has 3 tokens"));
    std::remove(p.c_str());

    p = edited_gguf("tokmodel.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "tokenizer.ggml.model is 'gpt2'"));
    std::remove(p.c_str());
}

TEST_CASE("context parameters") {
    kvg_model * m = load_ok(model_path("aidreams260K.bin"), model_path("tok512.bin").c_str());
    char err[512];
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 0;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "n_ctx = 0 is invalid"));
    p.n_ctx = 129; // the model's context is 128
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "1..128"));
    p.n_ctx = 64;
    p.n_threads = 0;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "n_threads"));
    p.n_threads = 1;
    p.n_batch = -1;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    p.n_batch = 16;
    int bad = 7; // what a C caller may store in the enum field
    std::memcpy(&p.kv_type, &bad, sizeof bad);
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "unknown KV cache type 7"));
    p.kv_type = KVG_KV_F16;
    std::memcpy(&p.attn, &bad, sizeof bad);
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "unknown attention"));
    CHECK(kvg_context_new(nullptr, kvg_context_default_params(), err, sizeof err) == nullptr);
    kvg_model_free(m);
}

TEST_CASE("decode: prompt longer than the context, bad positions and ids; the context stays usable") {
    kvg_model * m = load_ok(model_path("aidreams260K.bin"), model_path("tok512.bin").c_str());
    char err[512];
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 16;
    p.n_threads = 1;
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    REQUIRE(c != nullptr);

    std::vector<kvg_token> long_prompt(17, 5);
    long_prompt[0] = 1;
    CHECK(kvg_decode(c, long_prompt.data(), 17, 0, err, sizeof err) == nullptr);
    CHECK(contains(err, "17 tokens at position 0 do not fit in the context of 16"));
    // also from text: tokenize, then decode
    std::vector<kvg_token> toks(256);
    const int n = kvg_tokenize(m, "a gentle hum of precision, as I sense the nodes, a gentle hum of precision", true,
                               toks.data(), 256);
    REQUIRE(n > 16);
    CHECK(kvg_decode(c, toks.data(), n, 0, err, sizeof err) == nullptr);
    CHECK(contains(err, "do not fit"));

    CHECK(kvg_decode(c, long_prompt.data(), 4, 2, err, sizeof err) == nullptr); // gap: cache holds nothing
    CHECK(contains(err, "position 2 is invalid"));
    CHECK(kvg_decode(c, long_prompt.data(), 0, 0, err, sizeof err) == nullptr);
    CHECK(kvg_decode(c, nullptr, 3, 0, err, sizeof err) == nullptr);
    CHECK(kvg_decode(c, long_prompt.data(), 1, -1, err, sizeof err) == nullptr);
    kvg_token bad[2] = {1, 512};
    CHECK(kvg_decode(c, bad, 2, 0, err, sizeof err) == nullptr);
    CHECK(contains(err, "id 512"));
    bad[1] = -3;
    CHECK(kvg_decode(c, bad, 2, 0, err, sizeof err) == nullptr);

    // still works after the errors, up to the last position
    CHECK(kvg_decode(c, long_prompt.data(), 15, 0, err, sizeof err) != nullptr);
    CHECK(kvg_n_past(c) == 15);
    CHECK(kvg_decode(c, long_prompt.data(), 1, 15, err, sizeof err) != nullptr);
    CHECK(kvg_decode(c, long_prompt.data(), 1, 16, err, sizeof err) == nullptr); // full
    CHECK(kvg_get_logits(c, 5) == nullptr);

    // tokenizer buffers too small
    CHECK(kvg_tokenize(m, "hello world", true, toks.data(), 1) < 0);
    char small[2];
    CHECK(kvg_detokenize(m, toks.data(), n, small, sizeof small) < 0);
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("a model whose weights exceed the stated memory limit is refused with a clear error") {
    const std::string path = model_path("stories260K.bin");
    char err[512] = {0};
    kvg_model_params mp = kvg_model_default_params();
    kvg_model * full = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof(err));
    REQUIRE(full != nullptr);
    const size_t need = kvg_model_weight_bytes(full);
    kvg_model_free(full);

    mp.max_weight_bytes = need - 1;
    CHECK(kvg_model_load(path.c_str(), nullptr, mp, err, sizeof(err)) == nullptr);
    const std::string msg = err;
    CHECK(msg.find("limit of " + std::to_string(need - 1) + " bytes") != std::string::npos);
    CHECK(msg.find(std::to_string(need)) != std::string::npos);

    mp.max_weight_bytes = need; // exactly enough
    kvg_model * ok = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof(err));
    CHECK(ok != nullptr);
    kvg_model_free(ok);
}
