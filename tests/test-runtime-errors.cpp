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
#include <sys/stat.h>
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
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    CHECK(contains(load_error(""), "no model path"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    const std::string empty = temp_path("empty.bin");
    write_file(empty, "");
    CHECK(contains(load_error(empty), "empty"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
    CHECK(contains(load_error(shared_dir()), "not a regular file"));
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    kvg_model * m = load_ok(model_path("aidreams260K.bin")); // success resets it
    CHECK(kvg_last_status() == KVG_STATUS_OK);
    char err[512];
    CHECK(!kvg_model_save_gguf(m, "/nonexistent-dir/m.gguf", KVG_FTYPE_F32, true, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    CHECK(!kvg_model_save_gguf(m, temp_path("m.gguf").c_str(), (kvg_ftype) 77, true, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    kvg_model_free(m);
    CHECK(std::string(kvg_status_name(KVG_STATUS_CONTEXT_FULL)) == "context full");
    // a value kvg_status does not name is checked from C (test-c-api.c): C++ may not even hold one
    std::remove(empty.c_str());
}

TEST_CASE("damaged llama2.c checkpoints") {
    const std::string good = read_file(model_path("aidreams260K.bin"));
    REQUIRE(good.size() == 932124);
    const std::string path = temp_path("bad.bin");

    write_file(path, good.substr(0, 10));
    std::string e = load_error(path);
    CHECK(contains(e, "neither a GGUF file (no 'GGUF' magic"));
    CHECK(contains(e, "file is 10 bytes"));

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
    CHECK(contains(e, "tokenizer.bin"));
    CHECK(contains(e, "the tokenizer has 32000 tokens, the model 512"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
    e = load_error(model_path("aidreams260K.bin"), "/nonexistent/tok.bin");
    CHECK(contains(e, "/nonexistent/tok.bin"));
    CHECK(contains(e, "cannot open"));
    CHECK(kvg_last_status() == KVG_STATUS_IO); // as kvgraph.h promises for a file that cannot be read
    e = load_error(model_path("aidreams260K.bin"), shared_dir().c_str());
    CHECK(contains(e, "not a regular file"));
    CHECK(kvg_last_status() == KVG_STATUS_IO);
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
    CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
    std::remove(p.c_str());

    p = edited_gguf("nokey.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_remove_key(g, "llama.block_count");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "missing key llama.block_count"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
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
    CHECK(contains(load_error(p), "a 'gpt2' tokenizer needs tokenizer.ggml.merges"));
    std::remove(p.c_str());

    p = edited_gguf("tokmodel2.gguf", [](gguf_context * g, ggml_context * d) {
        gguf_set_val_str(g, "tokenizer.ggml.model", "bert");
        add_all_tensors(g, d);
    });
    CHECK(contains(load_error(p), "tokenizer.ggml.model is 'bert'; supported: 'llama'"));
    std::remove(p.c_str());
}

// Mixtral-style files: the expert count, or the router and expert tensors without it; a dense
// file that writes an expert count of 0 still loads.
TEST_CASE("mixture-of-experts files are refused, naming the expert count or tensor") {
    ggml_context * extra = ggml_init({4 * ggml_tensor_overhead() + (1 << 20), nullptr, false});
    ggml_tensor * router = ggml_new_tensor_2d(extra, GGML_TYPE_F32, 64, 4);
    ggml_set_name(router, "blk.0.ffn_gate_inp.weight");
    ggml_tensor * experts = ggml_new_tensor_3d(extra, GGML_TYPE_F32, 64, 172, 4);
    ggml_set_name(experts, "blk.0.ffn_up_exps.weight");
    for (ggml_tensor * t : {router, experts}) std::memset(t->data, 0, ggml_nbytes(t));
    for (int variant = 0; variant < 3; ++variant) {
        CAPTURE(variant);
        const std::string p = edited_gguf("moe.gguf", [&](gguf_context * g, ggml_context * d) {
            if (variant != 1) gguf_set_val_u32(g, "llama.expert_count", variant == 0 ? 4 : 0);
            if (variant == 0) gguf_set_val_u32(g, "llama.expert_used_count", 2);
            add_all_tensors(g, d);
            if (variant != 2) {
                gguf_add_tensor(g, router);
                gguf_add_tensor(g, experts);
            }
        });
        if (variant == 2) {
            kvg_model_free(load_ok(p));
        } else {
            const std::string e = load_error(p);
            CHECK(contains(e, "mixture-of-experts"));
            CHECK(contains(e, variant == 0 ? "llama.expert_count = 4" : "tensor blk.0.ffn_gate_inp.weight"));
            CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
        }
        std::remove(p.c_str());
    }
    ggml_free(extra);
}

TEST_CASE("context parameters") {
    kvg_model * m = load_ok(model_path("aidreams260K.bin"), model_path("tok512.bin").c_str());
    char err[512];
    kvg_context_params p = kvg_context_default_params();
    CHECK(p.n_ctx == 0); // the default: the model's context, as llama.cpp
    kvg_context * c0 = kvg_context_new(m, p, err, sizeof err);
    INFO(err);
    REQUIRE(c0 != nullptr);
    CHECK(kvg_n_ctx(c0) == kvg_model_n_ctx_train(m));
    CHECK(kvg_n_ctx(c0) == 128);
    kvg_context_free(c0);
    p.n_ctx = -1;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "n_ctx = -1 is invalid"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
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
    CHECK(kvg_last_status() == KVG_STATUS_CONTEXT_FULL);
    // also from text: tokenize, then decode
    std::vector<kvg_token> toks(256);
    const int n = kvg_tokenize(m, "a gentle hum of precision, as I sense the nodes, a gentle hum of precision", true,
                               toks.data(), 256);
    REQUIRE(n > 16);
    CHECK(kvg_decode(c, toks.data(), n, 0, err, sizeof err) == nullptr);
    CHECK(contains(err, "do not fit"));

    CHECK(kvg_decode(c, long_prompt.data(), 4, 2, err, sizeof err) == nullptr); // gap: cache holds nothing
    CHECK(contains(err, "position 2 is invalid"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK(kvg_decode(c, long_prompt.data(), 0, 0, err, sizeof err) == nullptr);
    CHECK(kvg_decode(c, nullptr, 3, 0, err, sizeof err) == nullptr);
    CHECK(kvg_decode(c, long_prompt.data(), 1, -1, err, sizeof err) == nullptr);
    kvg_token bad[2] = {1, 512};
    CHECK(kvg_decode(c, bad, 2, 0, err, sizeof err) == nullptr);
    CHECK(contains(err, "id 512"));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    bad[1] = -3;
    CHECK(kvg_decode(c, bad, 2, 0, err, sizeof err) == nullptr);

    // still works after the errors, up to the last position
    CHECK(kvg_decode(c, long_prompt.data(), 15, 0, err, sizeof err) != nullptr);
    CHECK(kvg_n_past(c) == 15);
    CHECK(kvg_decode(c, long_prompt.data(), 1, 15, err, sizeof err) != nullptr);
    CHECK(kvg_last_status() == KVG_STATUS_OK);
    CHECK(kvg_decode(c, long_prompt.data(), 1, 16, err, sizeof err) == nullptr); // full
    CHECK(kvg_last_status() == KVG_STATUS_CONTEXT_FULL);
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
    CHECK(kvg_last_status() == KVG_STATUS_OUT_OF_MEMORY);
    CHECK(msg.find(std::to_string(need)) != std::string::npos);

    mp.max_weight_bytes = need; // exactly enough
    kvg_model * ok = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof(err));
    CHECK(ok != nullptr);
    kvg_model_free(ok);
}

// ---- check_tensors ---------------------------------------------------------------------------------

namespace {

// Loads with check_tensors on or off: the model (NULL on failure) and the message.
kvg_model * load_checked(const std::string & path, bool check, std::string * msg) {
    kvg_model_params mp = kvg_model_default_params();
    mp.check_tensors = check;
    char err[1024] = "unset";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof err);
    *msg = err;
    return m;
}

// The file must load without the check and fail with it; returns the message.
std::string check_fails(const std::string & path) {
    std::string msg;
    kvg_model * m = load_checked(path, false, &msg);
    CHECK_MESSAGE(m != nullptr, msg);
    kvg_model_free(m);
    m = load_checked(path, true, &msg);
    CHECK(m == nullptr);
    kvg_model_free(m);
    return msg;
}

void check_loads(const std::string & path) {
    std::string msg;
    kvg_model * m = load_checked(path, true, &msg);
    CHECK_MESSAGE(m != nullptr, msg);
    kvg_model_free(m);
}

template <class T> void put(std::string & bytes, size_t off, T value) {
    REQUIRE(off + sizeof value <= bytes.size());
    std::memcpy(&bytes[off], &value, sizeof value);
}

// Byte offset of a tensor's data in a GGUF file, from the file's own tensor infos.
size_t gguf_tensor_offset(const std::string & path, const char * name) {
    gguf_init_params p = {true, nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), p);
    REQUIRE(g != nullptr);
    const int64_t id = gguf_find_tensor(g, name);
    REQUIRE(id >= 0);
    const size_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id);
    gguf_free(g);
    return off;
}

std::string saved_gguf(const std::string & name, kvg_ftype ftype) {
    kvg_model * m = load_ok(model_path("aidreams260K.bin"));
    const std::string path = temp_path(name);
    char err[512];
    REQUIRE(kvg_model_save_gguf(m, path.c_str(), ftype, false, err, sizeof err));
    kvg_model_free(m);
    return path;
}

const uint16_t F16_NAN = 0x7e00, F16_NEG_INF = 0xfc00, BF16_NAN = 0x7fc0;

} // namespace

TEST_CASE("check_tensors: NaN and inf weights of a llama2.c checkpoint name the tensor and element") {
    const std::string good = read_file(model_path("aidreams260K.bin"));
    int32_t h[7];
    REQUIRE(good.size() > sizeof h);
    std::memcpy(h, good.data(), sizeof h);
    const size_t dim = h[0], L = h[2], kv = (size_t) h[0] / h[3] * h[4], V = h[5];
    REQUIRE(h[5] > 0); // tied output: no wcls array
    // float offsets of the arrays in file order (see the llama2.c format): embedding, rms_att, wq, wk, wv, wo, rms_ffn
    const size_t wq = V * dim + L * dim, rms_ffn = wq + 2 * L * dim * dim + 2 * L * kv * dim;
    auto at = [](size_t f) { return 28 + 4 * f; };
    const std::string path = temp_path("nan.bin");

    std::string s = good;
    put(s, at(wq + dim * dim + 123), std::nanf("")); // blk.1.attn_q.weight, element 123 = row 1, column 59
    write_file(path, s);
    std::string e = check_fails(path);
    CHECK(e == path + ": tensor 'blk.1.attn_q.weight' holds a non-finite value (nan) at element 123 (row 1, column 59)");

    s = good;
    put(s, at(rms_ffn + 2 * dim + 7), INFINITY); // blk.2.ffn_norm.weight, a vector: no row/column
    write_file(path, s);
    e = check_fails(path);
    CHECK(e == path + ": tensor 'blk.2.ffn_norm.weight' holds a non-finite value (inf) at element 7");

    s = good;
    put(s, at(V * dim - 1), -INFINITY); // the last embedding value
    write_file(path, s);
    e = check_fails(path);
    CHECK(contains(e, "tensor 'token_embd.weight' holds a non-finite value (-inf) at element " +
                          std::to_string(V * dim - 1) + " (row " + std::to_string(V - 1) + ", column 63)"));

    // two bad values: the first one in tensor order and, inside a tensor, in element order
    s = good;
    put(s, at(wq + dim * dim + 500), std::nanf(""));
    put(s, at(wq + 300), INFINITY);
    put(s, at(wq + 200), INFINITY);
    write_file(path, s);
    CHECK(contains(check_fails(path), "'blk.0.attn_q.weight' holds a non-finite value (inf) at element 200"));

    // the largest finite float is not flagged
    s = good;
    put(s, at(wq + 5), 3.4028235e38f);
    write_file(path, s);
    check_loads(path);
    check_loads(model_path("aidreams260K.bin"));
    check_loads(model_path("stories260K.bin"));
    std::remove(path.c_str());
}

TEST_CASE("check_tensors: GGUF f32/f16/bf16 values and q8_0/q4_0 block scales") {
    const std::string path = temp_path("bad.gguf");

    SUBCASE("f32 norm") {
        std::string s = read_file(aidreams_gguf());
        put(s, gguf_tensor_offset(aidreams_gguf(), "output_norm.weight") + 4 * 3, INFINITY);
        write_file(path, s);
        CHECK(check_fails(path) == path + ": tensor 'output_norm.weight' holds a non-finite value (inf) at element 3");
    }
    SUBCASE("f16 matrix") {
        const std::string f16 = saved_gguf("f16.gguf", KVG_FTYPE_F16);
        check_loads(f16);
        std::string s = read_file(f16);
        const size_t off = gguf_tensor_offset(f16, "blk.0.attn_v.weight");
        put(s, off + 2 * 70, F16_NAN);
        put(s, off + 2 * 71, F16_NEG_INF);
        write_file(path, s);
        CHECK(check_fails(path) ==
              path + ": tensor 'blk.0.attn_v.weight' holds a non-finite value (nan) at element 70 (row 1, column 6)");
        put(s, off + 2 * 70, ggml_fp32_to_fp16(65504.0f)); // f16's largest finite value
        write_file(path, s);
        CHECK(contains(check_fails(path), "'blk.0.attn_v.weight' holds a non-finite value (-inf) at element 71"));
        std::remove(f16.c_str());
    }
    SUBCASE("bf16 matrix") {
        // the converter writes no bf16: replace one f32 matrix by its bf16 rounding
        ggml_init_params ip = {ggml_tensor_overhead() + 64 * 64 * 2 + 256, nullptr, false};
        ggml_context * bctx = ggml_init(ip);
        REQUIRE(bctx != nullptr);
        ggml_tensor * b = ggml_new_tensor_2d(bctx, GGML_TYPE_BF16, 64, 64);
        ggml_set_name(b, "blk.3.attn_output.weight");
        auto bf16_file = [&](const std::string & name) {
            return edited_gguf(name, [&](gguf_context * g, ggml_context * d) {
                for (ggml_tensor * t = ggml_get_first_tensor(d); t; t = ggml_get_next_tensor(d, t)) {
                    if (std::string(t->name) != b->name) {
                        gguf_add_tensor(g, t);
                        continue;
                    }
                    REQUIRE(t->type == GGML_TYPE_F32);
                    REQUIRE(ggml_nelements(t) == ggml_nelements(b));
                    ggml_fp32_to_bf16_row((const float *) t->data, (ggml_bf16_t *) b->data, ggml_nelements(b));
                    gguf_add_tensor(g, b);
                }
            });
        };
        const std::string good = bf16_file("bf16-good.gguf");
        check_loads(good);
        std::string s = read_file(good);
        put(s, gguf_tensor_offset(good, b->name) + 2 * 4000, BF16_NAN);
        write_file(path, s);
        CHECK(check_fails(path) == path + ": tensor 'blk.3.attn_output.weight' holds a non-finite value (nan) at "
                                          "element 4000 (row 62, column 32)");
        ggml_free(bctx);
        std::remove(good.c_str());
    }
    SUBCASE("q8_0 scale") {
        const std::string q8 = saved_gguf("q8.gguf", KVG_FTYPE_Q8_0);
        check_loads(q8);
        std::string s = read_file(q8);
        const size_t off = gguf_tensor_offset(q8, "blk.0.attn_k.weight"), block = 2 + 32; // f16 d + 32 int8
        // quants whose byte pairs read as f16 would be inf/NaN: only the scales are floats
        for (size_t i = 2; i < block; ++i) s[off + 5 * block + i] = (char) (i % 2 ? 0x7c : 0xff);
        write_file(path, s);
        check_loads(path);
        put(s, off + 4 * block, F16_NAN); // block 4: row 2 (two blocks per 64-wide row), columns 0..31
        write_file(path, s);
        CHECK(check_fails(path) == path + ": tensor 'blk.0.attn_k.weight' (q8_0): block 4 has a non-finite scale (nan), "
                                          "elements 128..159 (row 2, columns 0..31)");
        std::remove(q8.c_str());
    }
    SUBCASE("q4_0 scale") {
        const std::string q4 = saved_gguf("q4.gguf", KVG_FTYPE_Q4_0);
        check_loads(q4);
        std::string s = read_file(q4);
        put(s, gguf_tensor_offset(q4, "blk.1.attn_q.weight") + 3 * (2 + 16), F16_NEG_INF); // f16 d + 16 nibble pairs
        write_file(path, s);
        CHECK(check_fails(path) == path + ": tensor 'blk.1.attn_q.weight' (q4_0): block 3 has a non-finite scale (-inf), "
                                          "elements 96..127 (row 1, columns 32..63)");
        std::remove(q4.c_str());
    }
    std::remove(path.c_str());
}

// ---- max_kv_bytes ---------------------------------------------------------------------------------

namespace {

// The KV cache's size from its documented layout (src/kv-cache.h), per layer and sequence:
// f32/f16: K and V rows of n_embd_kv values for n_ctx slots. q8_0: V rows of 34-byte blocks
// (f16 scale + 32 int8); K by channel, one block per channel per group of 32 slots (the
// last group partly unused); the recent group's K in f32 (32 rows); a ring's sink rows in f32.
size_t expected_kv_bytes(size_t L, size_t n_embd_kv, size_t n_ctx, size_t n_seq, kvg_kv_type type, size_t n_sink) {
    if (type != KVG_KV_Q8_0) return L * n_seq * 2 * n_ctx * n_embd_kv * (type == KVG_KV_F32 ? 4 : 2);
    const size_t v = n_ctx * (n_embd_kv / 32) * 34, k = (n_ctx + 31) / 32 * n_embd_kv * 34;
    return L * n_seq * (v + k + 2 * 32 * n_embd_kv * 4 + n_sink * n_embd_kv * 4); // the open and the last group in f32
}

} // namespace

TEST_CASE("max_kv_bytes: the message states the size the cache would have; a limit of exactly that size is enough") {
    kvg_model * m = load_ok(model_path("aidreams260K.bin"));
    const size_t L = kvg_model_n_layer(m);
    const size_t n_embd_kv = kvg_model_n_embd(m) / kvg_model_n_head(m) * kvg_model_n_head_kv(m);
    REQUIRE(n_embd_kv % 32 == 0);
    const char * type_names[] = {"f32", "f16", "q8_0"};
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16, KVG_KV_Q8_0}) {
        for (kvg_kv_mode mode : {KVG_KV_LINEAR, KVG_KV_RING}) {
            for (int n_seq : {1, 3}) {
                CAPTURE(type);
                CAPTURE(mode);
                CAPTURE(n_seq);
                kvg_context_params p = kvg_context_default_params();
                p.n_ctx = 100; // not a multiple of 32: q8_0 K has a partly used group
                p.n_threads = 1;
                p.kv_type = type;
                p.kv_mode = mode;
                p.n_seq_max = n_seq;
                if (mode == KVG_KV_RING) p.n_sink = 3, p.n_window = 40;
                const size_t want = expected_kv_bytes(L, n_embd_kv, 100, n_seq, type, mode == KVG_KV_RING ? 3 : 0);

                // the prediction made before anything is reserved
                char err[512] = "";
                p.max_kv_bytes = 1;
                CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
                size_t predicted = 0;
                CHECK(std::sscanf(err, "the KV cache needs %zu bytes", &predicted) == 1);
                CHECK(kvg_last_status() == KVG_STATUS_OUT_OF_MEMORY);
                CHECK(predicted == want);
                const std::string shape = std::string("(n_ctx 100 x ") + std::to_string(n_seq) +
                                          (n_seq == 1 ? " sequence, " : " sequences, ") + type_names[type] + ")";
                CHECK_MESSAGE(contains(err, shape), err);

                p.max_kv_bytes = want - 1;
                CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
                CHECK(std::string(err) == "the KV cache needs " + std::to_string(want) + " bytes " + shape +
                                              ", more than the limit of " + std::to_string(want - 1) + " bytes");

                // exactly enough, and no limit: the cache that exists has the predicted size
                for (size_t limit : {want, (size_t) 0}) {
                    p.max_kv_bytes = limit;
                    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
                    INFO(err);
                    REQUIRE(c != nullptr);
                    CHECK(kvg_kv_cache_bytes(c) == want);
                    const kvg_token bos = 1;
                    CHECK(kvg_decode(c, &bos, 1, 0, err, sizeof err) != nullptr); // and it works
                    kvg_context_free(c);
                }
            }
        }
    }
    // a bad parameter is reported as such, not as a size
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 16;
    p.kv_mode = KVG_KV_RING;
    p.n_sink = 16;
    p.max_kv_bytes = 1;
    char err[512];
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "n_sink = 16 must be in 0..15"));
    kvg_model_free(m);
}

namespace {
long resident_kb() {
    long pages = 0, res = 0;
    if (FILE * f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        std::fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}
} // namespace

TEST_CASE("memory follows use: a 2^24-slot context for 32 sequences costs nothing until tokens arrive") {
    const std::string path = edited_gguf("ctx-2-24.gguf", [](gguf_context * g, ggml_context * data) {
        gguf_set_val_u32(g, "llama.context_length", 1u << 24);
        add_all_tensors(g, data);
    });
    kvg_model * m = load_ok(path);
    char err[512] = "";
    kvg_context_params p = kvg_context_default_params();
    p.n_ctx = 1 << 24;
    p.n_seq_max = 32;
    p.n_threads = 1;
    const long before = resident_kb();
    kvg_context * c = kvg_context_new(m, p, err, sizeof err);
    INFO(err);
    REQUIRE(c != nullptr);
    const long grown_mb = (resident_kb() - before) / 1024;
    MESSAGE("resident growth of a 2^24 x 32 context: " << grown_mb << " MiB (KV cache reserved: " << kvg_kv_cache_bytes(c) / (1 << 20) << " MiB)");
    CHECK(grown_mb < 64);
    kvg_context_free(c);

    // a static cache must be committed at creation: one the machine cannot hold is refused there
    p.kv_static = true;
    CHECK(kvg_context_new(m, p, err, sizeof err) == nullptr);
    CHECK(contains(err, "cannot commit"));
    CHECK(contains(err, "static KV cache"));
    kvg_model_free(m);
    std::remove(path.c_str());
}

TEST_CASE("a FIFO given as the model or the tokenizer is refused at once, not waited on") {
    const std::string fifo = temp_path("model.fifo");
    std::remove(fifo.c_str());
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(contains(load_error(fifo), "not a regular file"));
    CHECK(contains(load_error(model_path("stories260K.bin"), fifo.c_str()), "not a regular file"));
    std::remove(fifo.c_str());
}
