// Fuzz target: the GGUF reader (gguf_init_from_buffer), its accessors, the writer's metadata
// round trip, and the llama model loader + runtime on whatever parses.
//
// Invariants checked besides "no crash, leak or UB":
//  - a rejected file gives a message "gguf: ... at offset N: ..." and no ggml context;
//  - an accepted file's tensors lie inside the buffer and do not overlap, and reading the
//    data (no_alloc = false) copies exactly those bytes;
//  - the writer's metadata for an accepted file, followed by the same data section, parses
//    back to the same keys, values and tensor infos;
//  - the model loader either fails with a message or yields a model that runs.
#include "fuzz-common.h"

#include "ggml.h"
#include "gguf.h"

namespace {

size_t value_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

// Every value through the typed accessors (a wrong-typed call would abort).
void read_all_values(const gguf_context * g) {
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        FUZZ_CHECK(gguf_get_key(g, i) && gguf_find_key(g, gguf_get_key(g, i)) == i, "key %lld", (long long) i);
        const gguf_type t = gguf_get_kv_type(g, i);
        FUZZ_CHECK(gguf_type_name(t) != nullptr, "type %d", (int) t);
        volatile double sink = 0;
        switch (t) {
            case GGUF_TYPE_UINT8: sink = gguf_get_val_u8(g, i); break;
            case GGUF_TYPE_INT8: sink = gguf_get_val_i8(g, i); break;
            case GGUF_TYPE_UINT16: sink = gguf_get_val_u16(g, i); break;
            case GGUF_TYPE_INT16: sink = gguf_get_val_i16(g, i); break;
            case GGUF_TYPE_UINT32: sink = gguf_get_val_u32(g, i); break;
            case GGUF_TYPE_INT32: sink = gguf_get_val_i32(g, i); break;
            case GGUF_TYPE_FLOAT32: sink = gguf_get_val_f32(g, i); break;
            case GGUF_TYPE_UINT64: sink = (double) gguf_get_val_u64(g, i); break;
            case GGUF_TYPE_INT64: sink = (double) gguf_get_val_i64(g, i); break;
            case GGUF_TYPE_FLOAT64: sink = gguf_get_val_f64(g, i); break;
            case GGUF_TYPE_BOOL: sink = gguf_get_val_bool(g, i); break;
            case GGUF_TYPE_STRING: sink = std::strlen(gguf_get_val_str(g, i)); break;
            case GGUF_TYPE_ARRAY: {
                const gguf_type at = gguf_get_arr_type(g, i);
                const size_t n = gguf_get_arr_n(g, i);
                if (at == GGUF_TYPE_STRING) {
                    for (size_t j = 0; j < n; ++j) sink = std::strlen(gguf_get_arr_str(g, i, j));
                } else {
                    FUZZ_CHECK(value_size(at) > 0, "array element type %d", (int) at);
                    const uint8_t * p = (const uint8_t *) gguf_get_arr_data(g, i);
                    if (n > 0) sink = p[0] + p[n * value_size(at) - 1];
                }
                break;
            }
            default: FUZZ_CHECK(false, "unexpected kv type %d", (int) t);
        }
        (void) sink;
    }
}

// Tensor infos agree with the ggml context and lie inside the buffer.
void check_tensors(const gguf_context * g, ggml_context * meta, size_t size) {
    const size_t data_offset = gguf_get_data_offset(g);
    // a file without tensors may end before its (empty) data section: unpadded, as ggml allows
    FUZZ_CHECK((data_offset <= size || gguf_get_n_tensors(g) == 0) && data_offset % gguf_get_alignment(g) == 0,
               "data offset %zu", data_offset);
    ggml_tensor * t = ggml_get_first_tensor(meta);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i, t = ggml_get_next_tensor(meta, t)) {
        FUZZ_CHECK(t != nullptr, "tensor %lld missing from the ggml context", (long long) i);
        const char * name = gguf_get_tensor_name(g, i);
        FUZZ_CHECK(std::strcmp(name, t->name) == 0 && gguf_find_tensor(g, name) == i, "tensor %lld name", (long long) i);
        FUZZ_CHECK(gguf_get_tensor_type(g, i) == t->type, "tensor %s type", name);
        const size_t off = gguf_get_tensor_offset(g, i), n = gguf_get_tensor_size(g, i);
        FUZZ_CHECK(n == ggml_nbytes(t), "tensor %s size %zu vs %zu", name, n, ggml_nbytes(t));
        FUZZ_CHECK(off <= size - data_offset && n <= size - data_offset - off, "tensor %s outside the file", name);
    }
    FUZZ_CHECK(t == nullptr, "ggml context has extra tensors");
}

// The writer's metadata + the original data section must read back the same.
void check_round_trip(const gguf_context * g, const uint8_t * data, size_t size) {
    size_t used = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        used = std::max(used, gguf_get_tensor_offset(g, i) + gguf_get_tensor_size(g, i));
    }
    FUZZ_CHECK(used <= size - gguf_get_data_offset(g), "data section past the end");
    std::vector<uint8_t> buf(gguf_get_meta_size(g));
    gguf_get_meta_data(g, buf.data());
    const uint8_t * section = data + gguf_get_data_offset(g);
    buf.insert(buf.end(), section, section + used);

    char err[512];
    gguf_context * h = gguf_init_from_buffer_ex(buf.data(), buf.size(), {true, nullptr}, err, sizeof err);
    FUZZ_CHECK(h != nullptr, "re-reading the written metadata failed: %s", err);
    FUZZ_CHECK(gguf_get_n_kv(h) == gguf_get_n_kv(g) && gguf_get_n_tensors(h) == gguf_get_n_tensors(g), "counts differ");
    FUZZ_CHECK(gguf_get_alignment(h) == gguf_get_alignment(g), "alignment differs");
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        FUZZ_CHECK(std::strcmp(gguf_get_key(g, i), gguf_get_key(h, i)) == 0, "key %lld differs", (long long) i);
        const gguf_type t = gguf_get_kv_type(g, i);
        FUZZ_CHECK(gguf_get_kv_type(h, i) == t, "key %s type differs", gguf_get_key(g, i));
        if (t == GGUF_TYPE_STRING) {
            FUZZ_CHECK(std::strcmp(gguf_get_val_str(g, i), gguf_get_val_str(h, i)) == 0, "key %s value", gguf_get_key(g, i));
        } else if (t == GGUF_TYPE_ARRAY) {
            const gguf_type at = gguf_get_arr_type(g, i);
            const size_t n = gguf_get_arr_n(g, i);
            FUZZ_CHECK(gguf_get_arr_type(h, i) == at && gguf_get_arr_n(h, i) == n, "key %s array", gguf_get_key(g, i));
            for (size_t j = 0; at == GGUF_TYPE_STRING && j < n; ++j) {
                FUZZ_CHECK(std::strcmp(gguf_get_arr_str(g, i, j), gguf_get_arr_str(h, i, j)) == 0, "key %s[%zu]",
                           gguf_get_key(g, i), j);
            }
            if (at != GGUF_TYPE_STRING && n > 0) {
                FUZZ_CHECK(std::memcmp(gguf_get_arr_data(g, i), gguf_get_arr_data(h, i), n * value_size(at)) == 0,
                           "key %s array data", gguf_get_key(g, i));
            }
        } else {
            FUZZ_CHECK(std::memcmp(gguf_get_val_data(g, i), gguf_get_val_data(h, i), value_size(t)) == 0, "key %s value",
                       gguf_get_key(g, i));
        }
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        FUZZ_CHECK(std::strcmp(gguf_get_tensor_name(g, i), gguf_get_tensor_name(h, i)) == 0 &&
                       gguf_get_tensor_type(g, i) == gguf_get_tensor_type(h, i) &&
                       gguf_get_tensor_offset(g, i) == gguf_get_tensor_offset(h, i) &&
                       gguf_get_tensor_size(g, i) == gguf_get_tensor_size(h, i),
                   "tensor %lld differs after the round trip", (long long) i);
    }
    gguf_free(h);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    char err[512];
    ggml_context * meta = nullptr;
    gguf_context * g = gguf_init_from_buffer_ex(data, size, {true, &meta}, err, sizeof err);
    if (!g) {
        FUZZ_CHECK(meta == nullptr, "ggml context left behind on failure");
        FUZZ_CHECK(std::strncmp(err, "gguf: ", 6) == 0 && fuzz::contains(err, " offset "),
                   "error without the gguf prefix or an offset: '%s'", err);
        return 0;
    }
    FUZZ_CHECK(err[0] == '\0', "success with a message: '%s'", err);
    FUZZ_CHECK(meta != nullptr, "no ggml context");
    read_all_values(g);
    check_tensors(g, meta, size);

    // with data: same result, and every tensor holds its bytes of the buffer
    ggml_context * full = nullptr;
    gguf_context * g2 = gguf_init_from_buffer_ex(data, size, {false, &full}, err, sizeof err);
    FUZZ_CHECK(g2 && full, "loading with data failed after loading without: %s", err);
    ggml_tensor * t = ggml_get_first_tensor(full);
    for (int64_t i = 0; i < gguf_get_n_tensors(g2); ++i, t = ggml_get_next_tensor(full, t)) {
        const uint8_t * src = data + gguf_get_data_offset(g2) + gguf_get_tensor_offset(g2, i);
        FUZZ_CHECK(std::memcmp(t->data, src, ggml_nbytes(t)) == 0, "tensor %s data differs", t->name);
    }
    gguf_free(g2);
    ggml_free(full);

    check_round_trip(g, data, size);
    const bool is_llama = gguf_find_key(g, "general.architecture") >= 0;
    const bool has_tokens = gguf_find_key(g, "tokenizer.ggml.tokens") >= 0;
    gguf_free(g);
    ggml_free(meta);

    static fuzz::MemFile file;
    if (has_tokens) { // the tokenizer alone (vocab_only), whatever the rest of the file
        const std::string & path = file.write(data, size);
        kvg_model_params vp = kvg_model_default_params();
        vp.vocab_only = true;
        kvg_model * v = kvg_model_load(path.c_str(), nullptr, vp, err, sizeof err);
        FUZZ_CHECK(v || err[0] != '\0', "vocab-only load failed without a message");
        if (v) {
            kvg_token ids[64];
            const int32_t n = kvg_tokenize(v, "Hello world, \xE2\x96\x81 \xff!", false, ids, 64);
            char buf[512];
            if (n > 0) FUZZ_CHECK(kvg_detokenize(v, ids, n, buf, sizeof buf) > -(1 << 20), "detokenize");
            kvg_model_free(v);
        }
    }

    // a llama model? (the loader reads from a path); the copying load also scans the weights
    if (is_llama) {
        const std::string & path = file.write(data, size);
        for (bool mmap : {true, false}) {
            kvg_model_params mp = kvg_model_default_params();
            mp.use_mmap = mmap;
            mp.check_tensors = !mmap;
            kvg_model * model = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof err);
            if (!model) {
                FUZZ_CHECK(err[0] != '\0', "model load failed without a message");
                break;
            }
            if (mmap) fuzz::exercise_model(model);
            kvg_model_free(model);
        }
    }
    return 0;
}
