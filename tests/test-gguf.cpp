// GGUF reader/writer: round trips of every KV type and tensor type, a file built byte by byte
// here (independent of the writer), and malformed files that must fail with a clear error.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "gguf.h"
#include "test-common.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

// Little-endian byte builder, written independently of the library's writer.
struct Bytes {
    std::vector<uint8_t> b;
    Bytes & u8(uint8_t v) { b.push_back(v); return *this; }
    Bytes & u16(uint16_t v) { return le(v, 2); }
    Bytes & u32(uint32_t v) { return le(v, 4); }
    Bytes & u64(uint64_t v) { return le(v, 8); }
    Bytes & le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) b.push_back((uint8_t) (v >> (8 * i)));
        return *this;
    }
    Bytes & raw(const void * p, size_t n) {
        const uint8_t * c = (const uint8_t *) p;
        b.insert(b.end(), c, c + n);
        return *this;
    }
    Bytes & str(const std::string & s) { u64(s.size()); return raw(s.data(), s.size()); }
    Bytes & pad(size_t align) {
        while (b.size() % align) b.push_back(0);
        return *this;
    }
    Bytes & zeros(size_t n) { b.resize(b.size() + n, 0); return *this; }
    size_t size() const { return b.size(); }
};

Bytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    Bytes b;
    b.raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
    return b;
}

std::string temp_path(const std::string & name) { return ::temp_path("test-gguf", name); }

std::vector<uint8_t> read_all(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const std::string & path, const std::vector<uint8_t> & data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write((const char *) data.data(), (std::streamsize) data.size());
}

// Owns what a load returns; the input is copied into an exactly-sized heap block so that a
// sanitizer build catches any read past the end.
struct Loaded {
    gguf_context * g = nullptr;
    ggml_context * c = nullptr;
    std::string err;
    Loaded() = default;
    Loaded(const Loaded &) = delete;
    ~Loaded() {
        gguf_free(g);
        ggml_free(c);
    }
};

std::unique_ptr<Loaded> load(const uint8_t * data, size_t n, bool with_ctx = false, bool no_alloc = true) {
    auto out = std::make_unique<Loaded>();
    std::unique_ptr<uint8_t[]> copy(new uint8_t[n > 0 ? n : 1]);
    if (n > 0) std::memcpy(copy.get(), data, n);
    ggml_context * sentinel = (ggml_context *) 0x1; // must be overwritten either way
    out->c = sentinel;
    gguf_init_params p = {no_alloc, with_ctx ? &out->c : nullptr};
    if (!with_ctx) out->c = nullptr;
    char err[512] = "unchanged";
    out->g = gguf_init_from_buffer_ex(copy.get(), n, p, err, sizeof(err));
    out->err = err;
    CHECK(out->c != sentinel);
    if (out->c == sentinel) out->c = nullptr;
    return out;
}
std::unique_ptr<Loaded> load(const Bytes & b, bool with_ctx = false, bool no_alloc = true) {
    return load(b.b.data(), b.size(), with_ctx, no_alloc);
}

// Parses b expecting failure; returns the message.
std::string error_of(const Bytes & b) {
    auto l = load(b, true, false);
    CHECK(l->g == nullptr);
    CHECK(l->c == nullptr);
    CHECK(l->err.rfind("gguf: ", 0) == 0);
    return l->err;
}

bool contains(const std::string & s, const std::string & part) { return s.find(part) != std::string::npos; }

// One tensor info as a file stores it.
struct TensorSpec {
    std::string name = "w";
    std::vector<int64_t> ne = {32, 2};
    uint32_t type = GGML_TYPE_F32;
    uint64_t offset = 0;
};

void put_tensor(Bytes & b, const TensorSpec & t) {
    b.str(t.name).u32((uint32_t) t.ne.size());
    for (int64_t d : t.ne) b.u64((uint64_t) d);
    b.u32(t.type).u64(t.offset);
}

// header + alignment key (if align != 0) + tensor infos + padding + data_bytes zero bytes.
Bytes tensor_file(const std::vector<TensorSpec> & ts, size_t data_bytes, uint32_t align = 0) {
    Bytes b = header(ts.size(), align ? 1 : 0);
    if (align) b.str("general.alignment").u32(4).u32(align);
    for (const TensorSpec & t : ts) put_tensor(b, t);
    b.pad(align ? align : 32);
    return b.zeros(data_bytes);
}

size_t pad32(size_t n) { return (n + 31) / 32 * 32; }

template <typename T> std::vector<uint8_t> bytes_of(const T & v) {
    std::vector<uint8_t> out(sizeof(T));
    std::memcpy(out.data(), &v, sizeof(T));
    return out;
}

} // namespace

TEST_CASE("a GGUF file built byte by byte is read with its values, shapes and data") {
    for (uint32_t version : {3u, 2u}) {
        CAPTURE(version);
        Bytes b = header(2, 4, version);
        b.str("general.architecture").u32(8).str("llama");
        b.str("llama.context_length").u32(4).u32(128);
        b.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(3).str("<s>").str("a").str("");
        b.str("tokenizer.ggml.scores").u32(9).u32(6).u64(2).u32(0x3f800000).u32(0xc0000000); // 1.0f, -2.0f
        b.str("w").u32(2).u64(4).u64(2).u32(0).u64(0);       // f32 [4, 2] at 0
        b.str("b").u32(1).u64(3).u32(1).u64(32);             // f16 [3] at 32
        b.pad(32);
        const size_t data_offset = b.size();
        for (int i = 0; i < 8; ++i) {
            const float v = (float) i * 0.5f - 1.0f;
            b.raw(&v, 4);
        }
        b.u16(0x3c00).u16(0x4000).u16(0xbc00).zeros(2); // f16 1, 2, -1 then padding to 8 bytes

        auto l = load(b, true, false);
        REQUIRE_MESSAGE(l->g, l->err);
        CHECK(l->err.empty());
        gguf_context * g = l->g;
        CHECK(gguf_get_version(g) == version);
        CHECK(gguf_get_alignment(g) == 32);
        CHECK(gguf_get_data_offset(g) == data_offset);
        REQUIRE(gguf_get_n_kv(g) == 4);
        CHECK(std::string(gguf_get_key(g, 0)) == "general.architecture");
        CHECK(gguf_get_kv_type(g, 0) == GGUF_TYPE_STRING);
        CHECK(std::string(gguf_get_val_str(g, 0)) == "llama");
        CHECK(gguf_find_key(g, "llama.context_length") == 1);
        CHECK(gguf_get_val_u32(g, 1) == 128);
        CHECK(gguf_get_kv_type(g, 2) == GGUF_TYPE_ARRAY);
        CHECK(gguf_get_arr_type(g, 2) == GGUF_TYPE_STRING);
        REQUIRE(gguf_get_arr_n(g, 2) == 3);
        CHECK(std::string(gguf_get_arr_str(g, 2, 0)) == "<s>");
        CHECK(std::string(gguf_get_arr_str(g, 2, 1)) == "a");
        CHECK(std::string(gguf_get_arr_str(g, 2, 2)).empty());
        REQUIRE(gguf_get_arr_n(g, 3) == 2);
        const float * scores = (const float *) gguf_get_arr_data(g, 3);
        CHECK(scores[0] == 1.0f);
        CHECK(scores[1] == -2.0f);
        CHECK(gguf_find_key(g, "missing") == -1);

        REQUIRE(gguf_get_n_tensors(g) == 2);
        CHECK(gguf_find_tensor(g, "b") == 1);
        CHECK(gguf_find_tensor(g, "nope") == -1);
        CHECK(std::string(gguf_get_tensor_name(g, 0)) == "w");
        CHECK(gguf_get_tensor_type(g, 0) == GGML_TYPE_F32);
        CHECK(gguf_get_tensor_type(g, 1) == GGML_TYPE_F16);
        CHECK(gguf_get_tensor_offset(g, 0) == 0);
        CHECK(gguf_get_tensor_offset(g, 1) == 32);
        CHECK(gguf_get_tensor_size(g, 0) == 32);
        CHECK(gguf_get_tensor_size(g, 1) == 6);

        REQUIRE(l->c);
        ggml_tensor * w = ggml_get_tensor(l->c, "w");
        REQUIRE(w);
        CHECK(w->type == GGML_TYPE_F32);
        CHECK(w->ne[0] == 4);
        CHECK(w->ne[1] == 2);
        CHECK(w->ne[2] == 1);
        CHECK(w->ne[3] == 1);
        for (int i = 0; i < 8; ++i) CHECK(((const float *) w->data)[i] == (float) i * 0.5f - 1.0f);
        ggml_tensor * bt = ggml_get_tensor(l->c, "b");
        REQUIRE(bt);
        const uint16_t * h = (const uint16_t *) bt->data;
        CHECK(h[0] == 0x3c00);
        CHECK(h[1] == 0x4000);
        CHECK(h[2] == 0xbc00);
    }
}

TEST_CASE("a header with no tensors and no keys is valid, padded to the alignment or not") {
    auto l = load(header(0, 0).pad(32));
    REQUIRE_MESSAGE(l->g, l->err);
    CHECK(gguf_get_n_kv(l->g) == 0);
    CHECK(gguf_get_n_tensors(l->g) == 0);
    CHECK(gguf_get_data_offset(l->g) == 32);
    // without tensors the file may end unpadded (llama.cpp's vocab-only files do; ggml accepts them)
    auto u = load(header(0, 0));
    REQUIRE_MESSAGE(u->g, u->err);
    CHECK(gguf_get_n_tensors(u->g) == 0);
}

// The round trip's inputs: every scalar type at its edges, every array type, four tensors.
namespace roundtrip {

const uint32_t nan_bits = 0x7fc01234u; // NaN with a payload: must survive bit-exact
const uint8_t a_u8[] = {0, 1, 255};
const int8_t a_i8[] = {-128, 0, 127};
const uint16_t a_u16[] = {1, 65535};
const int16_t a_i16[] = {-32768, 32767, -1};
const uint32_t a_u32[] = {7, 0xffffffffu, 0};
const int32_t a_i32[] = {-5, 5};
const float a_f32[] = {1.5f, -0.0f, 3.0e38f, 1e-45f};
const uint64_t a_u64[] = {1ull << 63, 42};
const int64_t a_i64[] = {std::numeric_limits<int64_t>::min(), -1, 9};
const double a_f64[] = {3.141592653589793, -2.5e-310};
const bool a_bool[] = {true, false, true};
const std::string long_str(300, 'x');
const char * const strs[] = {"alpha", "", "\xe2\x96\x81the", long_str.c_str()};
const char * const names[] = {"tok_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "output.weight"};
const size_t expect_size[] = {7 * 3 * 4, 8 * 2 * 2, 2 * 3 * 34, 1 * 2 * 2 * 18};
constexpr int n_tensors = 4;

void set_values(gguf_context * g) {
    gguf_set_val_u8(g, "t.u8", 255);
    gguf_set_val_i8(g, "t.i8", -128);
    gguf_set_val_u16(g, "t.u16", 65535);
    gguf_set_val_i16(g, "t.i16", -32768);
    gguf_set_val_u32(g, "t.u32", 0xdeadbeefu);
    gguf_set_val_i32(g, "t.i32", std::numeric_limits<int32_t>::min());
    float f32_odd;
    std::memcpy(&f32_odd, &nan_bits, 4);
    gguf_set_val_f32(g, "t.f32", f32_odd);
    gguf_set_val_u64(g, "t.u64", std::numeric_limits<uint64_t>::max());
    gguf_set_val_i64(g, "t.i64", std::numeric_limits<int64_t>::min());
    gguf_set_val_f64(g, "t.f64", -1.0e-300);
    gguf_set_val_bool(g, "t.bool_t", true);
    gguf_set_val_bool(g, "t.bool_f", false);
    gguf_set_val_str(g, "t.str", "h\xc3\xa9llo, w\xc3\xb6rld");
    gguf_set_val_str(g, "t.str_empty", "");
    gguf_set_arr_data(g, "a.u8", GGUF_TYPE_UINT8, a_u8, 3);
    gguf_set_arr_data(g, "a.i8", GGUF_TYPE_INT8, a_i8, 3);
    gguf_set_arr_data(g, "a.u16", GGUF_TYPE_UINT16, a_u16, 2);
    gguf_set_arr_data(g, "a.i16", GGUF_TYPE_INT16, a_i16, 3);
    gguf_set_arr_data(g, "a.u32", GGUF_TYPE_UINT32, a_u32, 3);
    gguf_set_arr_data(g, "a.i32", GGUF_TYPE_INT32, a_i32, 2);
    gguf_set_arr_data(g, "a.f32", GGUF_TYPE_FLOAT32, a_f32, 4);
    gguf_set_arr_data(g, "a.u64", GGUF_TYPE_UINT64, a_u64, 2);
    gguf_set_arr_data(g, "a.i64", GGUF_TYPE_INT64, a_i64, 3);
    gguf_set_arr_data(g, "a.f64", GGUF_TYPE_FLOAT64, a_f64, 2);
    gguf_set_arr_data(g, "a.bool", GGUF_TYPE_BOOL, a_bool, 3);
    gguf_set_arr_data(g, "a.empty", GGUF_TYPE_INT32, nullptr, 0);
    const char * str_items[] = {strs[0], strs[1], strs[2], strs[3]};
    gguf_set_arr_str(g, "a.str", str_items, 4);
}

// Tensors with byte patterns (any bytes are valid storage for these types), added to g.
std::vector<ggml_tensor *> add_tensors(ggml_context * gctx, gguf_context * g) {
    std::vector<ggml_tensor *> ts = {
        ggml_new_tensor_2d(gctx, GGML_TYPE_F32, 7, 3),
        ggml_new_tensor_2d(gctx, GGML_TYPE_F16, 8, 2),
        ggml_new_tensor_2d(gctx, GGML_TYPE_Q8_0, 64, 3),
        ggml_new_tensor_3d(gctx, GGML_TYPE_Q4_0, 32, 2, 2),
    };
    std::mt19937 rng(1234);
    for (int i = 0; i < n_tensors; ++i) {
        ggml_set_name(ts[i], names[i]);
        REQUIRE(ggml_nbytes(ts[i]) == expect_size[i]);
        for (size_t j = 0; j < expect_size[i]; ++j) ((uint8_t *) ts[i]->data)[j] = (uint8_t) rng();
        gguf_add_tensor(g, ts[i]);
    }
    return ts;
}

int64_t id(const gguf_context * r, const char * k) {
    const int64_t i = gguf_find_key(r, k);
    REQUIRE_MESSAGE(i >= 0, k);
    return i;
}

void check_scalars(const gguf_context * r) {
    CHECK(gguf_get_kv_type(r, id(r, "t.u8")) == GGUF_TYPE_UINT8);
    CHECK(gguf_get_val_u8(r, id(r, "t.u8")) == 255);
    CHECK(gguf_get_kv_type(r, id(r, "t.i8")) == GGUF_TYPE_INT8);
    CHECK(gguf_get_val_i8(r, id(r, "t.i8")) == -128);
    CHECK(gguf_get_val_u16(r, id(r, "t.u16")) == 65535);
    CHECK(gguf_get_val_i16(r, id(r, "t.i16")) == -32768);
    CHECK(gguf_get_val_u32(r, id(r, "t.u32")) == 0xdeadbeefu);
    CHECK(gguf_get_val_i32(r, id(r, "t.i32")) == std::numeric_limits<int32_t>::min());
    CHECK(bytes_of(gguf_get_val_f32(r, id(r, "t.f32"))) == bytes_of(nan_bits));
    CHECK(gguf_get_kv_type(r, id(r, "t.f32")) == GGUF_TYPE_FLOAT32);
    CHECK(gguf_get_val_u64(r, id(r, "t.u64")) == std::numeric_limits<uint64_t>::max());
    CHECK(gguf_get_val_i64(r, id(r, "t.i64")) == std::numeric_limits<int64_t>::min());
    CHECK(bytes_of(gguf_get_val_f64(r, id(r, "t.f64"))) == bytes_of(-1.0e-300));
    CHECK(gguf_get_kv_type(r, id(r, "t.bool_t")) == GGUF_TYPE_BOOL);
    CHECK(gguf_get_val_bool(r, id(r, "t.bool_t")) == true);
    CHECK(gguf_get_val_bool(r, id(r, "t.bool_f")) == false);
    CHECK(std::string(gguf_get_val_str(r, id(r, "t.str"))) == "h\xc3\xa9llo, w\xc3\xb6rld");
    CHECK(std::string(gguf_get_val_str(r, id(r, "t.str_empty"))).empty());
    const uint32_t u32v = 0xdeadbeefu;
    CHECK(std::memcmp(gguf_get_val_data(r, id(r, "t.u32")), &u32v, 4) == 0);
}

void check_arrays(const gguf_context * r) {
    auto check_arr = [&](const char * k, gguf_type t, const void * data, size_t n, size_t es) {
        CAPTURE(k);
        const int64_t i = id(r, k);
        CHECK(gguf_get_kv_type(r, i) == GGUF_TYPE_ARRAY);
        CHECK(gguf_get_arr_type(r, i) == t);
        REQUIRE(gguf_get_arr_n(r, i) == n);
        if (n) CHECK(std::memcmp(gguf_get_arr_data(r, i), data, n * es) == 0);
    };
    check_arr("a.u8", GGUF_TYPE_UINT8, a_u8, 3, 1);
    check_arr("a.i8", GGUF_TYPE_INT8, a_i8, 3, 1);
    check_arr("a.u16", GGUF_TYPE_UINT16, a_u16, 2, 2);
    check_arr("a.i16", GGUF_TYPE_INT16, a_i16, 3, 2);
    check_arr("a.u32", GGUF_TYPE_UINT32, a_u32, 3, 4);
    check_arr("a.i32", GGUF_TYPE_INT32, a_i32, 2, 4);
    check_arr("a.f32", GGUF_TYPE_FLOAT32, a_f32, 4, 4);
    check_arr("a.u64", GGUF_TYPE_UINT64, a_u64, 2, 8);
    check_arr("a.i64", GGUF_TYPE_INT64, a_i64, 3, 8);
    check_arr("a.f64", GGUF_TYPE_FLOAT64, a_f64, 2, 8);
    const uint8_t bool_bytes[] = {1, 0, 1};
    check_arr("a.bool", GGUF_TYPE_BOOL, bool_bytes, 3, 1);
    check_arr("a.empty", GGUF_TYPE_INT32, nullptr, 0, 4);
    const int64_t si = id(r, "a.str");
    CHECK(gguf_get_arr_type(r, si) == GGUF_TYPE_STRING);
    REQUIRE(gguf_get_arr_n(r, si) == 4);
    for (size_t j = 0; j < 4; ++j) CHECK(std::string(gguf_get_arr_str(r, si, j)) == strs[j]);
}

// The tensors read back (r, rctx) against the ones written (g, ts): names, types, shapes,
// offsets, and the bytes unless no_alloc.
void check_tensors(const gguf_context * r, ggml_context * rctx, const gguf_context * g, const std::vector<ggml_tensor *> & ts, bool no_alloc) {
    REQUIRE(gguf_get_n_tensors(r) == n_tensors);
    ggml_tensor * t = ggml_get_first_tensor(rctx);
    for (int i = 0; i < n_tensors; ++i) {
        CAPTURE(names[i]);
        CHECK(std::string(gguf_get_tensor_name(r, i)) == names[i]);
        CHECK(gguf_get_tensor_type(r, i) == ts[i]->type);
        CHECK(gguf_get_tensor_size(r, i) == expect_size[i]);
        CHECK(gguf_get_tensor_offset(r, i) == gguf_get_tensor_offset(g, i));
        REQUIRE(t);
        CHECK(std::string(t->name) == names[i]);
        CHECK(t->type == ts[i]->type);
        for (int d = 0; d < 4; ++d) CHECK(t->ne[d] == ts[i]->ne[d]);
        if (no_alloc) {
            CHECK(t->data == nullptr);
        } else {
            REQUIRE(t->data);
            CHECK(std::memcmp(t->data, ts[i]->data, expect_size[i]) == 0);
        }
        t = ggml_get_next_tensor(rctx, t);
    }
    CHECK(t == nullptr);
}

} // namespace roundtrip

TEST_CASE("write and read back every KV type, arrays and F32/F16/Q8_0/Q4_0 tensors byte-exact") {
    using namespace roundtrip;
    gguf_context * g = gguf_init_empty();
    set_values(g);
    ggml_init_params ip = {1 << 20, nullptr, false};
    ggml_context * gctx = ggml_init(ip);
    REQUIRE(gctx);
    const std::vector<ggml_tensor *> ts = add_tensors(gctx, g);
    // offsets: each previous size padded to 32
    size_t off = 0;
    for (int i = 0; i < n_tensors; ++i) {
        CHECK(gguf_get_tensor_offset(g, i) == off);
        off += pad32(expect_size[i]);
    }
    const size_t data_total = off;

    const std::string path = temp_path("roundtrip.gguf");
    REQUIRE(gguf_write_to_file(g, path.c_str(), false));
    const size_t meta_size = gguf_get_meta_size(g);
    CHECK(meta_size % 32 == 0);
    const std::vector<uint8_t> file = read_all(path);
    CHECK(file.size() == meta_size + data_total);
    std::vector<uint8_t> meta(meta_size);
    gguf_get_meta_data(g, meta.data());
    REQUIRE(file.size() >= meta_size);
    CHECK(std::memcmp(file.data(), meta.data(), meta_size) == 0);
    CHECK(std::memcmp(file.data(), "GGUF\x03\x00\x00\x00", 8) == 0);
    // tensor data sits at meta_size + offset in the raw file
    for (int i = 0; i < n_tensors; ++i) {
        CHECK(std::memcmp(file.data() + meta_size + gguf_get_tensor_offset(g, i), ts[i]->data, expect_size[i]) == 0);
    }

    for (bool no_alloc : {false, true}) {
        CAPTURE(no_alloc);
        ggml_context * rctx = nullptr;
        char err[256];
        gguf_context * r = gguf_init_from_file_ex(path.c_str(), {no_alloc, &rctx}, err, sizeof(err));
        REQUIRE_MESSAGE(r, err);
        REQUIRE(rctx);
        CHECK(gguf_get_version(r) == 3);
        CHECK(gguf_get_data_offset(r) == meta_size);
        REQUIRE(gguf_get_n_kv(r) == gguf_get_n_kv(g));
        for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
            CAPTURE(gguf_get_key(g, i));
            CHECK(std::string(gguf_get_key(r, i)) == gguf_get_key(g, i)); // order kept
        }
        check_scalars(r);
        check_arrays(r);
        check_tensors(r, rctx, g, ts, no_alloc);
        ggml_free(rctx);
        gguf_free(r);
    }

    // only_meta writes exactly the metadata; reading it back reports the missing data
    const std::string meta_path = temp_path("meta.gguf");
    REQUIRE(gguf_write_to_file(g, meta_path.c_str(), true));
    CHECK(read_all(meta_path).size() == meta_size);
    char err[256];
    CHECK(gguf_init_from_file_ex(meta_path.c_str(), {true, nullptr}, err, sizeof(err)) == nullptr);
    CHECK(contains(err, "extends past end of file"));

    ggml_free(gctx);
    gguf_free(g);
    std::remove(path.c_str());
    std::remove(meta_path.c_str());
}

TEST_CASE("editing: set overrides and moves to the back, remove, set_kv, alignment and tensor type relayout") {
    gguf_context * g = gguf_init_empty();
    CHECK(gguf_get_alignment(g) == 32);
    gguf_set_val_u32(g, "a", 1);
    gguf_set_val_str(g, "b", "x");
    gguf_set_val_i32(g, "a", -7); // override with another type
    REQUIRE(gguf_get_n_kv(g) == 2);
    CHECK(std::string(gguf_get_key(g, 0)) == "b");
    CHECK(gguf_get_kv_type(g, 1) == GGUF_TYPE_INT32);
    CHECK(gguf_get_val_i32(g, 1) == -7);
    // a value that points into the context itself
    gguf_set_val_str(g, "b", gguf_get_val_str(g, gguf_find_key(g, "b")));
    CHECK(std::string(gguf_get_val_str(g, gguf_find_key(g, "b"))) == "x");
    CHECK(gguf_remove_key(g, "a") == 0); // "b" was set again, so it moved behind "a"
    CHECK(gguf_remove_key(g, "a") == -1);
    CHECK(gguf_get_n_kv(g) == 1);

    gguf_context * src = gguf_init_empty();
    gguf_set_val_u8(src, "b", 9);
    const char * s[] = {"p", "q"};
    gguf_set_arr_str(src, "c", s, 2);
    gguf_set_kv(g, src);
    REQUIRE(gguf_get_n_kv(g) == 2);
    CHECK(gguf_get_val_u8(g, gguf_find_key(g, "b")) == 9);
    CHECK(std::string(gguf_get_arr_str(g, gguf_find_key(g, "c"), 1)) == "q");
    gguf_free(src);

    ggml_init_params ip = {1 << 16, nullptr, false};
    ggml_context * gctx = ggml_init(ip);
    ggml_tensor * t0 = ggml_set_name(ggml_new_tensor_1d(gctx, GGML_TYPE_F32, 64), "t0"); // 256 bytes
    ggml_tensor * t1 = ggml_set_name(ggml_new_tensor_1d(gctx, GGML_TYPE_F32, 3), "t1");  // 12 bytes
    ggml_tensor * t2 = ggml_set_name(ggml_new_tensor_1d(gctx, GGML_TYPE_F32, 1), "t2");
    gguf_add_tensor(g, t0);
    gguf_add_tensor(g, t1);
    gguf_add_tensor(g, t2);
    CHECK(gguf_get_tensor_offset(g, 1) == 256);
    CHECK(gguf_get_tensor_offset(g, 2) == 288);
    gguf_set_tensor_type(g, "t0", GGML_TYPE_Q8_0); // 2 blocks = 68 bytes -> padded 96
    CHECK(gguf_get_tensor_size(g, 0) == 68);
    CHECK(gguf_get_tensor_offset(g, 1) == 96);
    CHECK(gguf_get_tensor_offset(g, 2) == 128);
    gguf_set_val_u32(g, GGUF_KEY_GENERAL_ALIGNMENT, 128);
    CHECK(gguf_get_alignment(g) == 128);
    CHECK(gguf_get_tensor_offset(g, 1) == 128);
    CHECK(gguf_get_tensor_offset(g, 2) == 256);
    CHECK(gguf_get_meta_size(g) % 128 == 0);

    // writing needs data for every tensor: t0 changed type, so give it Q8_0 bytes
    std::vector<uint8_t> q(68, 0x11);
    gguf_set_tensor_data(g, "t0", q.data());
    const std::string path = temp_path("edit.gguf");
    REQUIRE(gguf_write_to_file(g, path.c_str(), false));
    char err[256];
    gguf_context * r = gguf_init_from_file_ex(path.c_str(), {true, nullptr}, err, sizeof(err));
    REQUIRE_MESSAGE(r, err);
    CHECK(gguf_get_alignment(r) == 128);
    CHECK(gguf_get_data_offset(r) % 128 == 0);
    CHECK(gguf_get_tensor_offset(r, 2) == 256);
    CHECK(gguf_get_tensor_type(r, 0) == GGML_TYPE_Q8_0);
    const std::vector<uint8_t> file = read_all(path);
    REQUIRE(file.size() == gguf_get_data_offset(r) + 384);
    CHECK(std::memcmp(file.data() + gguf_get_data_offset(r), q.data(), 68) == 0);
    gguf_free(r);

    gguf_remove_key(g, GGUF_KEY_GENERAL_ALIGNMENT);
    CHECK(gguf_get_alignment(g) == 32);
    CHECK(gguf_get_tensor_offset(g, 2) == 128);

    // a tensor without data cannot be written
    gguf_set_tensor_data(g, "t1", nullptr);
    CHECK_FALSE(gguf_write_to_file(g, path.c_str(), false));
    std::remove(path.c_str());
    ggml_free(gctx);
    gguf_free(g);

    CHECK(std::string(gguf_type_name(GGUF_TYPE_UINT8)) == "u8");
    CHECK(std::string(gguf_type_name(GGUF_TYPE_STRING)) == "str");
    CHECK(std::string(gguf_type_name(GGUF_TYPE_ARRAY)) == "arr");
    CHECK(std::string(gguf_type_name(GGUF_TYPE_FLOAT64)) == "f64");
    CHECK(gguf_type_name((gguf_type) 13) == nullptr);
}

// A small valid file from the writer: a few keys (string array included) and two tensors.
static std::vector<uint8_t> small_valid_file() {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_u32(g, "n", 3);
    gguf_set_val_bool(g, "flag", true);
    const char * toks[] = {"<s>", "ab"};
    gguf_set_arr_str(g, "toks", toks, 2);
    const float fl[] = {0.5f, -1.0f};
    gguf_set_arr_data(g, "fl", GGUF_TYPE_FLOAT32, fl, 2);
    ggml_init_params ip = {1 << 16, nullptr, false};
    ggml_context * gctx = ggml_init(ip);
    ggml_tensor * a = ggml_set_name(ggml_new_tensor_1d(gctx, GGML_TYPE_F32, 4), "a");
    ggml_tensor * q = ggml_set_name(ggml_new_tensor_1d(gctx, GGML_TYPE_Q8_0, 32), "q");
    std::memset(a->data, 0x3f, ggml_nbytes(a));
    std::memset(q->data, 0x01, ggml_nbytes(q));
    gguf_add_tensor(g, a);
    gguf_add_tensor(g, q);
    std::vector<uint8_t> out(gguf_get_meta_size(g));
    gguf_get_meta_data(g, out.data());
    for (ggml_tensor * t : {a, q}) {
        const uint8_t * d = (const uint8_t *) t->data;
        out.insert(out.end(), d, d + ggml_nbytes(t));
        out.resize(pad32(out.size()), 0);
    }
    ggml_free(gctx);
    gguf_free(g);
    return out;
}

TEST_CASE("a file truncated at every byte offset fails cleanly with an error") {
    const std::vector<uint8_t> file = small_valid_file();
    {
        auto full = load(file.data(), file.size(), true, false);
        REQUIRE_MESSAGE(full->g, full->err);
        REQUIRE(full->c);
        CHECK(gguf_get_n_tensors(full->g) == 2);
    }
    // the last tensor's data ends at size - padding; cutting anywhere before that must fail
    const size_t q_end = file.size() - (32 - 34 % 32);
    for (size_t n = 0; n < q_end; ++n) {
        CAPTURE(n);
        for (bool no_alloc : {true, false}) {
            auto l = load(file.data(), n, true, no_alloc);
            CHECK(l->g == nullptr);
            CHECK(l->c == nullptr);
            CHECK(l->err.rfind("gguf: ", 0) == 0);
            CHECK(contains(l->err, " at offset "));
            CHECK((contains(l->err, "end of file") || contains(l->err, "exceeds") || contains(l->err, "too large")));
        }
    }
    // trailing padding after the last tensor is optional
    for (size_t n = q_end; n <= file.size(); ++n) {
        auto l = load(file.data(), n);
        CHECK_MESSAGE(l->g != nullptr, l->err);
    }
    // the same through files, for a sample of cut points
    const std::string path = temp_path("trunc.gguf");
    for (size_t n = 0; n < q_end; n += 13) {
        CAPTURE(n);
        write_all(path, std::vector<uint8_t>(file.begin(), file.begin() + (long) n));
        char err[256];
        CHECK(gguf_init_from_file_ex(path.c_str(), {false, nullptr}, err, sizeof(err)) == nullptr);
        CHECK(contains(err, "gguf: "));
    }
    write_all(path, std::vector<uint8_t>(file.begin(), file.begin() + 10));
    CHECK(gguf_init_from_file(path.c_str(), {false, nullptr}) == nullptr); // prints the error
    std::remove(path.c_str());
    char err[256];
    CHECK(gguf_init_from_file_ex(temp_path("does-not-exist.gguf").c_str(), {false, nullptr}, err, sizeof(err)) == nullptr);
    CHECK(contains(err, "cannot open"));
}

TEST_CASE("malformed headers and key-value pairs are rejected with the problem and offset named") {
    {
        Bytes b;
        b.raw("GGML", 4).u32(3).u64(0).u64(0);
        const std::string e = error_of(b);
        CHECK(contains(e, "bad magic \"GGML\""));
        CHECK(contains(e, "at offset 0"));
    }
    CHECK(contains(error_of(header(0, 0, 1)), "GGUF v1 is not supported"));
    CHECK(contains(error_of(header(0, 0, 7)), "unsupported GGUF version 7"));
    CHECK(contains(error_of(header(0, 0, 0x03000000)), "big-endian"));
    {
        const std::string e = error_of(header(0, 1ull << 60).zeros(100));
        CHECK(contains(e, "n_kv = 1152921504606846976 is too large"));
        CHECK(contains(e, "at offset 16"));
    }
    {
        const std::string e = error_of(header(1ull << 40, 0).zeros(100));
        CHECK(contains(e, "n_tensors = 1099511627776 is too large"));
        CHECK(contains(e, "at offset 8"));
    }
    // 7 KV pairs cannot fit in 97 bytes (each takes at least 14)
    CHECK(contains(error_of(header(0, 7).zeros(97)), "n_kv = 7 is too large"));
    {
        Bytes b = header(0, 1);
        b.u64(1ull << 62).zeros(40); // key length
        const std::string e = error_of(b);
        CHECK(contains(e, "key #0 at offset 24"));
        CHECK(contains(e, "key length 4611686018427387904 at offset 24 exceeds the 40 bytes left"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(8).u64(1000).zeros(20); // string value length
        const std::string e = error_of(b);
        CHECK(contains(e, "key 'k' at offset 24"));
        CHECK(contains(e, "string length 1000 at offset 37 exceeds the 20 bytes left"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(9).u32(4).u64(1ull << 61).zeros(64); // u32 array length
        CHECK(contains(error_of(b), "array length 2305843009213693952 at offset 41 is too large"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(9).u32(8).u64(9).zeros(64); // 9 strings need >= 72 bytes
        CHECK(contains(error_of(b), "array length 9 at offset 41 is too large"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(13).zeros(8);
        CHECK(contains(error_of(b), "key 'k' at offset 24: invalid value type 13 at offset 33"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(9).u32(99).u64(1).zeros(8);
        CHECK(contains(error_of(b), "invalid array element type 99 at offset 37"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(9).u32(9).u64(1).u32(0).u64(1).u8(0);
        CHECK(contains(error_of(b), "arrays of arrays are not supported"));
    }
    {
        Bytes b = header(0, 1);
        b.str("k").u32(7).u8(2);
        CHECK(contains(error_of(b), "invalid bool value 2 at offset 37"));
        Bytes c = header(0, 1);
        c.str("k").u32(9).u32(7).u64(3).u8(1).u8(0).u8(5);
        CHECK(contains(error_of(c), "invalid bool value 5 at offset 51"));
    }
    {
        Bytes b = header(0, 2);
        b.str("k").u32(0).u8(1).str("k").u32(0).u8(2);
        CHECK(contains(error_of(b), "key 'k' at offset 38: duplicate key"));
    }
    {
        Bytes b = header(0, 1);
        b.str("").u32(0).u8(1).zeros(4);
        CHECK(contains(error_of(b), "key is empty"));
        Bytes c = header(0, 1);
        c.str(std::string("a\0b", 3)).u32(0).u8(1);
        CHECK(contains(error_of(c), "key contains a NUL byte"));
    }
    {
        Bytes b = header(0, 1);
        b.str("general.alignment").u32(4).u32(24);
        CHECK(contains(error_of(b), "alignment 24 is not a nonzero power of 2"));
        Bytes c = header(0, 1);
        c.str("general.alignment").u32(4).u32(0);
        CHECK(contains(error_of(c), "alignment 0 is not a nonzero power of 2"));
        Bytes d = header(0, 1);
        d.str("general.alignment").u32(10).u64(32);
        CHECK(contains(error_of(d), "must be of type u32, not u64"));
    }
}

TEST_CASE("malformed tensor infos and tensor data are rejected with the problem and offset named") {
    // the first tensor info starts right after the 24-byte header
    auto err_for = [](TensorSpec t, size_t data_bytes = 1024) { return error_of(tensor_file({t}, data_bytes)); };
    TensorSpec t;
    t.type = 99;
    CHECK(contains(err_for(t), "tensor 'w' at offset 24: invalid tensor type 99"));
    t.type = 39; // mxfp4 exists in ggml but not here
    CHECK(contains(err_for(t), "tensor type 39 is not supported (supported: f32, f16, q4_0, q4_1"));
    t = TensorSpec();
    t.ne = {};
    CHECK(contains(err_for(t), "n_dims = 0"));
    t.ne = {1, 1, 1, 1, 1};
    CHECK(contains(err_for(t), "n_dims = 5"));
    t.ne = {32, 0};
    CHECK(contains(err_for(t), "dimension 1 at offset 45 is 0 (must be > 0)"));
    t.ne = {-32};
    CHECK(contains(err_for(t), "dimension 0 at offset 37 is -32"));
    t.ne = {1ll << 32, 1ll << 32};
    CHECK(contains(err_for(t), "element count overflows"));
    t.ne = {1ll << 31, 1ll << 31}; // 2^62 elements fit int64, 2^64 bytes do not fit size_t
    CHECK(contains(err_for(t), "data size overflows"));
    t.ne = {33};
    t.type = GGML_TYPE_Q8_0;
    CHECK(contains(err_for(t), "ne[0] = 33 is not a multiple of the block size 32 of type q8_0"));
    t = TensorSpec();
    t.offset = 4;
    CHECK(contains(err_for(t), "data offset 4 (at offset 57) is not a multiple of the alignment 32"));
    t.offset = 0xffffffffffffffe0ull;
    CHECK(contains(err_for(t), "overflows"));
    t.name = std::string(64, 'n');
    CHECK(contains(err_for(t), "name is 64 bytes long (at most 63 allowed)"));
    t.name = "";
    CHECK(contains(err_for(t), "tensor #0 at offset 24: tensor name is empty"));

    {
        // f32 [32, 2] = 256 bytes, only 100 present
        TensorSpec w;
        w.name = "blk.0.attn_q.weight";
        const Bytes b = tensor_file({w}, 100);
        const size_t data_offset = b.size() - 100;
        REQUIRE(data_offset % 32 == 0);
        const std::string expect = "gguf: tensor 'blk.0.attn_q.weight' at offset 24: data [" + std::to_string(data_offset) +
                                   ", " + std::to_string(data_offset + 256) + ") extends past end of file (" +
                                   std::to_string(b.size()) + " bytes)";
        CHECK(error_of(b) == expect);
    }
    {
        // the second tensor's data starts inside the first's
        TensorSpec a, c;
        a.ne = {16};
        c.name = "c";
        c.ne = {8};
        c.offset = 32;
        a.offset = 0;
        CHECK(contains(error_of(tensor_file({a, c}, 1024)), "tensor 'c' at offset 57: data ["));
        CHECK(contains(error_of(tensor_file({a, c}, 1024)), "overlaps tensor 'w'"));
        c.offset = 64; // adjacent is fine
        auto l = load(tensor_file({a, c}, 1024));
        CHECK_MESSAGE(l->g != nullptr, l->err);
        // duplicate names
        c.name = "w";
        CHECK(contains(error_of(tensor_file({a, c}, 1024)), "tensor 'w' at offset 57: duplicate tensor name"));
    }
    {
        // a custom alignment is used for offsets and the data section
        TensorSpec a;
        a.ne = {4};
        a.offset = 16;
        auto l = load(tensor_file({a}, 64, 16));
        REQUIRE_MESSAGE(l->g, l->err);
        CHECK(gguf_get_alignment(l->g) == 16);
        CHECK(gguf_get_data_offset(l->g) % 16 == 0);
        a.offset = 8;
        CHECK(contains(error_of(tensor_file({a}, 64, 16)), "not a multiple of the alignment 16"));
    }
    {
        // tensors may be stored out of order; a tensor can be read at its file offset
        TensorSpec a, c;
        a.ne = {8};
        a.offset = 32;
        c.name = "c";
        c.ne = {8};
        c.offset = 0;
        Bytes b = tensor_file({a, c}, 0);
        const size_t data_offset = b.size();
        for (int i = 0; i < 16; ++i) {
            const float v = (float) i;
            b.raw(&v, 4);
        }
        auto l = load(b, true, false);
        REQUIRE_MESSAGE(l->g, l->err);
        CHECK(gguf_get_data_offset(l->g) == data_offset);
        ggml_tensor * ta = ggml_get_tensor(l->c, "w");
        ggml_tensor * tc = ggml_get_tensor(l->c, "c");
        REQUIRE(ta);
        REQUIRE(tc);
        CHECK(((float *) ta->data)[0] == 8.0f);
        CHECK(((float *) tc->data)[7] == 7.0f);
    }
}

TEST_CASE("randomly corrupted files never crash: they fail with an error or load consistently") {
    const std::vector<uint8_t> file = small_valid_file();
    std::mt19937 rng(42);
    const uint8_t edge[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x20, 0x09};
    int failed = 0, loaded = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::vector<uint8_t> m = file;
        const int n_mut = 1 + (int) (rng() % 4);
        for (int k = 0; k < n_mut; ++k) {
            const size_t pos = rng() % m.size();
            m[pos] = (rng() & 1) ? edge[rng() % sizeof(edge)] : (uint8_t) rng();
        }
        if (rng() % 8 == 0) m.resize(rng() % m.size());
        auto l = load(m.data(), m.size(), true, false);
        if (!l->g) {
            ++failed;
            CHECK(l->err.rfind("gguf: ", 0) == 0);
            continue;
        }
        ++loaded;
        // whatever loaded must be self-consistent and inside the buffer
        REQUIRE(l->c);
        ggml_tensor * t = ggml_get_first_tensor(l->c);
        for (int64_t i = 0; i < gguf_get_n_tensors(l->g); ++i) {
            REQUIRE(t);
            const size_t end = gguf_get_data_offset(l->g) + gguf_get_tensor_offset(l->g, i) + gguf_get_tensor_size(l->g, i);
            CHECK(end <= m.size());
            CHECK(gguf_get_tensor_size(l->g, i) == ggml_nbytes(t));
            CHECK(std::memcmp(t->data, m.data() + end - ggml_nbytes(t), ggml_nbytes(t)) == 0);
            t = ggml_get_next_tensor(l->c, t);
        }
    }
    CHECK(failed > 0);
    CHECK(loaded > 0);
}

TEST_CASE("fuzz corpus: named seeds load, every other input loads or fails with an error") {
    const std::filesystem::path dir = std::filesystem::path(KVG_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "gguf";
    REQUIRE(std::filesystem::is_directory(dir));
    int n_files = 0, n_seeds = 0;
    for (const auto & entry : std::filesystem::directory_iterator(dir)) {
        const std::vector<uint8_t> data = read_all(entry.path().string());
        CAPTURE(entry.path().string());
        auto l = load(data.data(), data.size(), true, false);
        ++n_files;
        if (entry.path().extension() == ".gguf") {
            ++n_seeds;
            CHECK_MESSAGE(l->g != nullptr, l->err);
        } else if (!l->g) {
            CHECK(l->err.rfind("gguf: ", 0) == 0);
        }
    }
    CHECK(n_seeds >= 4);
    CHECK(n_files > n_seeds);
}
