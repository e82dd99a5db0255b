// The ggml RPC server (ggml/src/rpc-server.h): every command once with a valid message
// (results against naive loops), every refusal (truncation, ids, ranges, overflow, views,
// ops, graph size, row indices), the byte-stream framing, and a loopback round trip over
// a real socket with a client of its own (a refused connection does not stop the server).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "fuzz/rpc-seeds.h"
#include "rpc-common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

using namespace rpct;
namespace rpc = kvg::rpc;

namespace {

rpc::Options options(int threads) {
    rpc::Options o;
    o.n_threads = threads;
    o.mem_limit = 64ull << 20;
    return o;
}

// A session driven through dispatch, greeted.
struct Client {
    rpc::Session s;
    Bytes reply;
    bool has_reply = false;
    explicit Client(int threads = 1) : Client(options(threads)) {}
    explicit Client(const rpc::Options & o) : s(o) { REQUIRE(call(rpc::CMD_HELLO, hello())); }
    bool call(uint8_t cmd, const Bytes & p) { return s.dispatch(cmd, p.data(), p.size(), &reply, &has_reply); }
    uint64_t u64() const { return read_at<uint64_t>(reply, 0); }
    // a buffer of size bytes: (handle, base)
    std::pair<uint64_t, uint64_t> buffer(uint64_t size) {
        REQUIRE(call(rpc::CMD_ALLOC_BUFFER, alloc_buffer(size)));
        const uint64_t h = u64();
        REQUIRE(h != 0);
        REQUIRE(call(rpc::CMD_BUFFER_GET_BASE, u64_payload(h)));
        return {h, u64()};
    }
    template <class T> void set(const WireTensor & t, const std::vector<T> & v) {
        REQUIRE(call(rpc::CMD_SET_TENSOR, set_tensor(t, 0, v.data(), v.size() * sizeof(T))));
    }
    template <class T> std::vector<T> get(const WireTensor & t) {
        REQUIRE(call(rpc::CMD_GET_TENSOR, tensor_range(t, 0, nbytes(t))));
        REQUIRE(reply.size() == nbytes(t));
        std::vector<T> v(reply.size() / sizeof(T));
        std::memcpy(v.data(), reply.data(), reply.size());
        return v;
    }
    // the command is refused with a message containing what
    void refused(uint8_t cmd, const Bytes & p, const char * what) {
        CHECK_FALSE(call(cmd, p));
        INFO("error: ", s.error());
        CHECK(s.error().find(what) != std::string::npos);
    }
};

std::vector<float> ramp(size_t n, float scale, float shift) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::sin(scale * (float) i + shift);
    return v;
}

// out[n][m] = sum_k a[m][k] x[n][k] + bias[m]
std::vector<float> matmul_add_ref(const std::vector<float> & a, const std::vector<float> & x,
                                  const std::vector<float> & bias, int K, int M, int N) {
    std::vector<float> out((size_t) M * N);
    for (int n = 0; n < N; ++n)
        for (int m = 0; m < M; ++m) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += (double) a[(size_t) m * K + k] * x[(size_t) n * K + k];
            out[(size_t) n * M + m] = (float) s + bias[m];
        }
    return out;
}

// mul_mat + add over one buffer: the tensors, in the client's order
struct MatmulGraph {
    static constexpr int K = 8, M = 5, N = 3;
    WireTensor a, x, bias, mm, out;
    MatmulGraph(uint64_t h, uint64_t base) {
        a = tensor(1, GGML_TYPE_F32, {K, M}, h, base);
        x = tensor(2, GGML_TYPE_F32, {K, N}, h, base + 256);
        bias = tensor(3, GGML_TYPE_F32, {M, 1}, h, base + 512);
        mm = node(4, GGML_OP_MUL_MAT, tensor(0, GGML_TYPE_F32, {M, N}, h), base + 1024, {1, 2});
        out = node(5, GGML_OP_ADD, mm, base + 2048, {4, 3});
    }
    Bytes message() const { return graph({4, 5}, {a, x, bias, mm, out}); }
};

void check_close(const std::vector<float> & got, const std::vector<float> & want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element ", i);
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    }
}

} // namespace

TEST_CASE("hello comes first, once, with 24 bytes of capabilities") {
    rpc::Session s(options(1));
    Bytes reply;
    bool has = false;
    const Bytes alloc = alloc_buffer(64);
    CHECK_FALSE(s.dispatch(rpc::CMD_ALLOC_BUFFER, alloc.data(), alloc.size(), &reply, &has));
    CHECK(s.error().find("first command must be HELLO") != std::string::npos);
    const Bytes short_hello(23, 0);
    CHECK_FALSE(s.dispatch(rpc::CMD_HELLO, short_hello.data(), short_hello.size(), &reply, &has));
    const Bytes h = hello();
    REQUIRE(s.dispatch(rpc::CMD_HELLO, h.data(), h.size(), &reply, &has));
    CHECK(has);
    REQUIRE(reply.size() == 28);
    CHECK(reply[0] == 7);
    CHECK(reply[1] == 0);
    CHECK(reply[2] == 0);
    for (size_t i = 4; i < 28; ++i) CHECK(reply[i] == 0); // no transport upgrade
    CHECK_FALSE(s.dispatch(rpc::CMD_HELLO, h.data(), h.size(), &reply, &has));
}

TEST_CASE("device queries and buffer commands") {
    Client c;
    REQUIRE(c.call(rpc::CMD_DEVICE_COUNT, {}));
    CHECK(read_at<uint32_t>(c.reply, 0) == 1);
    REQUIRE(c.call(rpc::CMD_GET_ALIGNMENT, u32_payload(0)));
    CHECK(c.u64() == 64);
    REQUIRE(c.call(rpc::CMD_GET_MAX_SIZE, u32_payload(0)));
    CHECK(c.u64() == 64ull << 20);
    const auto [h, base] = c.buffer(1000);
    CHECK(base % 64 == 0);
    REQUIRE(c.call(rpc::CMD_GET_DEVICE_MEMORY, u32_payload(0)));
    CHECK(read_at<uint64_t>(c.reply, 0) == (64ull << 20) - 1000);
    CHECK(read_at<uint64_t>(c.reply, 8) == 64ull << 20);
    // larger than the limit: a null buffer, not an error
    REQUIRE(c.call(rpc::CMD_ALLOC_BUFFER, alloc_buffer(65ull << 20)));
    CHECK(c.u64() == 0);
    // clear sets every byte
    Bytes clear = u64_payload(h);
    clear.push_back(0xAB);
    REQUIRE(c.call(rpc::CMD_BUFFER_CLEAR, clear));
    CHECK_FALSE(c.has_reply);
    const WireTensor all = tensor(1, GGML_TYPE_I8, {1000}, h, base);
    for (int8_t v : c.get<int8_t>(all)) CHECK((uint8_t) v == 0xAB);
    REQUIRE(c.call(rpc::CMD_FREE_BUFFER, u64_payload(h)));
    CHECK(c.s.n_buffers() == 0);
    CHECK(c.s.bytes_allocated() == 0);
    c.refused(rpc::CMD_FREE_BUFFER, u64_payload(h), "unknown buffer");
}

TEST_CASE("tensor data: set, get, memset, copy, init, alloc size, hash") {
    Client c;
    const auto [h, base] = c.buffer(4096);
    const WireTensor t = tensor(7, GGML_TYPE_F32, {4, 3}, h, base + 128);
    const std::vector<float> v = ramp(12, 0.3f, 0.1f);
    c.set(t, v);
    CHECK(c.get<float>(t) == v);
    // a part: 2 floats at byte 8
    REQUIRE(c.call(rpc::CMD_GET_TENSOR, tensor_range(t, 8, 8)));
    CHECK(read_at<float>(c.reply, 0) == v[2]);
    Bytes ms = tensor_range(t, 4, 8);
    ms.push_back(0);
    REQUIRE(c.call(rpc::CMD_MEMSET_TENSOR, ms));
    std::vector<float> want = v;
    want[1] = want[2] = 0.0f;
    CHECK(c.get<float>(t) == want);
    Bytes cp;
    const WireTensor dst = tensor(8, GGML_TYPE_F32, {4, 3}, h, base + 1024);
    put_tensor(cp, t);
    put_tensor(cp, dst);
    REQUIRE(c.call(rpc::CMD_COPY_TENSOR, cp));
    CHECK(c.reply == Bytes{1});
    CHECK(c.get<float>(dst) == want);
    Bytes init;
    put_tensor(init, t);
    REQUIRE(c.call(rpc::CMD_INIT_TENSOR, init));
    CHECK_FALSE(c.has_reply);
    Bytes as = u32_payload(0);
    put_tensor(as, tensor(9, GGML_TYPE_Q8_0, {64, 3}));
    for (int i = 0; i < 10; ++i) put_tensor(as, WireTensor{});
    REQUIRE(c.call(rpc::CMD_GET_ALLOC_SIZE, as));
    CHECK(c.u64() == 3 * 2 * 34);
    REQUIRE(c.call(rpc::CMD_SET_TENSOR_HASH, tensor_range(t, 0, 0x1234)));
    CHECK(c.reply == Bytes{0}); // no cache: always a miss
}

TEST_CASE("tensor cache (-c): marked bytes kept by FNV-1a hash, served to a later session, checked") {
    CHECK(rpc::fnv1a64(nullptr, 0) == 0xcbf29ce484222325ull); // FNV-1a's published answers
    CHECK(rpc::fnv1a64((const uint8_t *) "a", 1) == 0xaf63dc4c8601ec8cull);
    char tmpl[] = "/tmp/kvg-rpc-cache-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    const std::string dir = std::string(tmpl) + "/a/rpc";
    std::string why;
    REQUIRE(rpc::make_dirs(dir, &why));
    rpc::Options o = options(1);
    o.cache_dir = dir;
    const std::vector<float> v = ramp(64, 0.7f, 0.2f);
    const uint64_t hash = rpc::fnv1a64((const uint8_t *) v.data(), v.size() * 4);
    char name[17];
    snprintf(name, sizeof name, "%016llx", (unsigned long long) hash);
    const std::string entry = dir + "/" + name;
    auto set_marked = [&](Client & c, const WireTensor & t, uint8_t flag) {
        Bytes m = set_tensor(t, 0, v.data(), v.size() * 4);
        m[rpc::WIRE_TENSOR_SIZE] = flag;
        REQUIRE(c.call(rpc::CMD_SET_TENSOR, m));
    };
    {
        Client first(o);
        const auto [h, base] = first.buffer(1024);
        const WireTensor t = tensor(1, GGML_TYPE_F32, {64}, h, base);
        set_marked(first, t, 0);
        CHECK(access(entry.c_str(), F_OK) != 0); // not marked: not kept
        set_marked(first, t, 1);
    }
    FILE * f = fopen(entry.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::vector<float> kept(65);
    CHECK(fread(kept.data(), 4, 65, f) == 64);
    fclose(f);
    kept.resize(64);
    CHECK(kept == v);

    Client c(o); // a later session (a model reload) on the same directory
    const auto [h, base] = c.buffer(1024);
    const WireTensor t = tensor(2, GGML_TYPE_F32, {64}, h, base + 512);
    REQUIRE(c.call(rpc::CMD_SET_TENSOR_HASH, tensor_range(t, 0, hash)));
    CHECK(c.reply == Bytes{1});
    CHECK(c.get<float>(t) == v);
    REQUIRE(c.call(rpc::CMD_SET_TENSOR_HASH, tensor_range(t, 0, hash ^ 1)));
    CHECK(c.reply == Bytes{0}); // unknown hash: the client sends the bytes
    // an entry that does not fit where it is asked for: refused like any range outside its buffer
    c.refused(rpc::CMD_SET_TENSOR_HASH, tensor_range(t, 400, hash), "outside its buffer");
    // a damaged entry is a miss, never wrong bytes
    f = fopen(entry.c_str(), "r+b");
    REQUIRE(f != nullptr);
    fputc(0x5a, f);
    fclose(f);
    Client d(o);
    const auto [h2, base2] = d.buffer(1024);
    REQUIRE(d.call(rpc::CMD_SET_TENSOR_HASH, tensor_range(tensor(3, GGML_TYPE_F32, {64}, h2, base2), 0, hash)));
    CHECK(d.reply == Bytes{0});
    std::remove(entry.c_str());
    rmdir(dir.c_str());
    rmdir((std::string(tmpl) + "/a").c_str());
    rmdir(tmpl);
}

TEST_CASE("graph: mul_mat + add against a naive loop, then recompute with new input") {
    Client c(2);
    const auto [h, base] = c.buffer(1 << 16);
    const MatmulGraph g(h, base);
    const std::vector<float> a = ramp(g.K * g.M, 0.37f, 0.2f), bias = ramp(g.M, 1.1f, 0.5f);
    std::vector<float> x = ramp(g.K * g.N, 0.71f, -0.3f);
    c.set(g.a, a), c.set(g.x, x), c.set(g.bias, bias);
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, g.message()));
    CHECK_FALSE(c.has_reply);
    check_close(c.get<float>(g.out), matmul_add_ref(a, x, bias, g.K, g.M, g.N));
    x = ramp(g.K * g.N, 0.13f, 0.9f);
    c.set(g.x, x);
    REQUIRE(c.call(rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0)));
    check_close(c.get<float>(g.out), matmul_add_ref(a, x, bias, g.K, g.M, g.N));
    // a node without ggml's compute flag is not run (as ggml's CPU backend): out keeps its values
    const std::vector<float> before = c.get<float>(g.out);
    WireTensor idle = g.out;
    idle.flags = 0;
    c.set(g.x, ramp(g.K * g.N, 0.5f, 0.5f));
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, idle})));
    CHECK(c.get<float>(g.out) == before);
    // freeing a buffer drops the stored graph (its tensors pointed into it)
    const auto [h2, base2] = c.buffer(64);
    (void) base2;
    REQUIRE(c.call(rpc::CMD_FREE_BUFFER, u64_payload(h2)));
    c.refused(rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0), "without a stored graph");
}

// ggml's allocator reuses the bytes of a dead intermediate: n3 overwrites n1's bytes after
// n2 read them. The server must keep that order (n1 and n3 are otherwise independent).
TEST_CASE("graph: a node reusing a dead intermediate's bytes runs after its last reader") {
    Client c(2);
    const uint32_t E = 256 * 64;
    const auto [h, base] = c.buffer(8 * E * 4);
    const uint64_t X = base + 2 * E * 4, Y = base + 3 * E * 4, Z = base + 4 * E * 4;
    const WireTensor a = tensor(1, GGML_TYPE_F32, {256, 64}, h, base),
                     b = tensor(2, GGML_TYPE_F32, {256, 64}, h, base + E * 4);
    WireTensor n1 = node(3, GGML_OP_SCALE, a, X, {1}), n2 = node(4, GGML_OP_ADD, a, Y, {3, 1});
    WireTensor n3 = node(5, GGML_OP_SCALE, a, X, {2}), n4 = node(6, GGML_OP_ADD, a, Z, {4, 5});
    float two = 2.0f, five = 5.0f;
    std::memcpy(&n1.op_params[0], &two, 4);
    std::memcpy(&n3.op_params[0], &five, 4);
    const std::vector<float> av = ramp(E, 0.01f, 0.0f), bv = ramp(E, 0.02f, 1.0f);
    c.set(a, av), c.set(b, bv);
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({3, 4, 5, 6}, {a, b, n1, n2, n3, n4})));
    for (int rep = 0; rep < 20; ++rep) {
        REQUIRE(c.call(rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0)));
        const std::vector<float> z = c.get<float>(n4);
        int bad = 0;
        for (uint32_t i = 0; i < E; ++i) bad += std::fabs(z[i] - (3 * av[i] + 5 * bv[i])) > 1e-5f;
        CHECK(bad == 0);
    }
}

TEST_CASE("graph: get_rows, and set_rows through a view of the destination") {
    Client c;
    const auto [h, base] = c.buffer(4096);
    const WireTensor w = tensor(1, GGML_TYPE_F32, {4, 6}, h, base), idx = tensor(2, GGML_TYPE_I32, {3}, h, base + 256);
    const WireTensor rows = node(3, GGML_OP_GET_ROWS, tensor(0, GGML_TYPE_F32, {4, 3}, h), base + 512, {1, 2});
    const std::vector<float> wv = ramp(24, 0.5f, 0.0f);
    c.set(w, wv), c.set(idx, std::vector<int32_t>{5, 0, 2});
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({3}, {w, idx, rows})));
    const std::vector<float> got = c.get<float>(rows);
    const int picked[3] = {5, 0, 2};
    for (int r = 0; r < 3; ++r)
        for (int i = 0; i < 4; ++i) CHECK(got[r * 4 + i] == wv[picked[r] * 4 + i]);

    const WireTensor cache = tensor(4, GGML_TYPE_F32, {4, 8}, h, base + 1024),
                     vals = tensor(5, GGML_TYPE_F32, {4, 2}, h, base + 1536);
    const WireTensor sidx = tensor(6, GGML_TYPE_I64, {2}, h, base + 1664);
    WireTensor set = node(7, GGML_OP_SET_ROWS, cache, cache.data, {5, 6, 4}); // ggml: src[2] = destination
    set.view_src = 4;
    const std::vector<float> vv = ramp(8, 0.9f, 0.4f);
    c.set(cache, std::vector<float>(32, -1.0f)), c.set(vals, vv), c.set(sidx, std::vector<int64_t>{7, 1});
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({7}, {cache, vals, sidx, set})));
    const std::vector<float> cv = c.get<float>(cache);
    for (int r = 0; r < 8; ++r)
        for (int i = 0; i < 4; ++i) CHECK(cv[r * 4 + i] == (r == 7 ? vv[i] : r == 1 ? vv[4 + i] : -1.0f));
    // an index out of range is refused before anything runs
    c.set(sidx, std::vector<int64_t>{8, 0});
    c.refused(rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0), "row index 8 is outside [0, 8)");
    CHECK(c.get<float>(cache) == cv);
}

TEST_CASE("refused: truncated or oversized fixed-size messages, unknown commands and devices") {
    Client c;
    const struct {
        uint8_t cmd;
        size_t size;
    } fixed[] = {{rpc::CMD_ALLOC_BUFFER, 12},     {rpc::CMD_GET_ALIGNMENT, 4},     {rpc::CMD_GET_MAX_SIZE, 4},
                 {rpc::CMD_BUFFER_GET_BASE, 8},   {rpc::CMD_FREE_BUFFER, 8},       {rpc::CMD_BUFFER_CLEAR, 9},
                 {rpc::CMD_GET_TENSOR, 312},      {rpc::CMD_SET_TENSOR_HASH, 312}, {rpc::CMD_COPY_TENSOR, 592},
                 {rpc::CMD_GET_DEVICE_MEMORY, 4}, {rpc::CMD_INIT_TENSOR, 296},     {rpc::CMD_GET_ALLOC_SIZE, 3260},
                 {rpc::CMD_GRAPH_RECOMPUTE, 4},   {rpc::CMD_MEMSET_TENSOR, 313},   {rpc::CMD_DEVICE_COUNT, 0}};
    for (const auto & f : fixed) {
        CAPTURE((int) f.cmd);
        if (f.size > 0) c.refused(f.cmd, Bytes(f.size - 1, 0), "bytes");
        c.refused(f.cmd, Bytes(f.size + 1, 0), "bytes");
    }
    c.refused(rpc::CMD_SET_TENSOR, Bytes(304, 0), "at least 305");
    c.refused(18, {}, "unknown command 18");
    c.refused(rpc::CMD_COUNT, {}, "unknown command");
    c.refused(255, {}, "unknown command 255");
    c.refused(rpc::CMD_GET_ALIGNMENT, u32_payload(1), "device 1");
    c.refused(rpc::CMD_ALLOC_BUFFER, Bytes{1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0}, "device 1");
    c.refused(rpc::CMD_BUFFER_GET_BASE, u64_payload(12345), "unknown buffer");
}

TEST_CASE("refused: tensors with bad types, shapes, strides or ranges") {
    Client c;
    const auto [h, base] = c.buffer(1024);
    const float f[4] = {1, 2, 3, 4};
    WireTensor t = tensor(1, GGML_TYPE_F32, {4}, h, base + 1024 - 8); // 16 bytes, 8 left
    c.refused(rpc::CMD_SET_TENSOR, set_tensor(t, 0, f, 16), "outside its buffer");
    t = tensor(1, GGML_TYPE_F32, {4}, h, base);
    c.refused(rpc::CMD_SET_TENSOR, set_tensor(t, 1016, f, 16), "outside its buffer");
    c.refused(rpc::CMD_SET_TENSOR, set_tensor(t, UINT64_MAX - 4, f, 16), "outside its buffer");
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 8, 1020), "outside its buffer");
    Bytes ms = tensor_range(t, 8, 16); // inside the buffer, past the tensor
    ms.push_back(1);
    c.refused(rpc::CMD_MEMSET_TENSOR, ms, "outside the tensor");
    t.data = base - 4;
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "outside its buffer");
    t.data = base + 2; // misaligned f32
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "aligned");
    t = tensor(1, GGML_TYPE_F32, {4}, h, base);
    t.type = 99;
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "type 99");
    t.type = GGML_TYPE_Q8_1; // a ggml type kvgraph only names
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "not supported");
    t = tensor(1, GGML_TYPE_IQ4_XS, {256}, h, base); // read from the type traits: a type kvgraph decodes
    CHECK(c.call(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4)));
    t = tensor(1, GGML_TYPE_F32, {4}, h, base);
    for (uint32_t r16 : {43u, 48u}) { // kvgraph's own q4_0_r16, q5_0_r16: not on the wire
        t.type = r16;
        c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "not supported");
    }
    // ne x nb overflowing 64 bits: refused, never wrapped
    t = tensor(1, GGML_TYPE_F32, {4}, h, base);
    for (int i = 0; i < 4; ++i) t.ne[i] = 0xFFFFFFFFu, t.nb[i] = 0xFFFFFFFCu;
    t.nb[0] = 4;
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "too large");
    t.buffer = 0, t.data = 0;
    Bytes as = u32_payload(0);
    put_tensor(as, t);
    for (int i = 0; i < 10; ++i) put_tensor(as, WireTensor{});
    c.refused(rpc::CMD_GET_ALLOC_SIZE, as, "too large");
    // empty, but its other dimensions' product overflows ggml_nelements' int64 (found by fuzz-rpc)
    t = tensor(1, GGML_TYPE_F32, {4}, h, base);
    t.ne[0] = 0, t.ne[1] = t.ne[2] = 0x7FFFFFFFu, t.ne[3] = 4;
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "overflows int64");
    t = tensor(1, GGML_TYPE_F32, {4, 4}, h, base);
    t.nb[1] = 0; // rows on top of each other
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "overlap");
    t = tensor(1, GGML_TYPE_Q8_0, {33}, h, base);
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "multiple of 32");
    t = tensor(1, GGML_TYPE_F32, {4}, 77, base);
    c.refused(rpc::CMD_GET_TENSOR, tensor_range(t, 0, 4), "unknown buffer");
    Bytes cp; // copy whose source does not fit at the destination
    put_tensor(cp, tensor(1, GGML_TYPE_F32, {64}, h, base));
    put_tensor(cp, tensor(2, GGML_TYPE_F32, {4}, h, base + 1008));
    c.refused(rpc::CMD_COPY_TENSOR, cp, "do not fit");
}

TEST_CASE("refused: graphs with bad ids, views, ops, parameters, sizes or indices") {
    Client c;
    const auto [h, base] = c.buffer(1 << 16);
    const MatmulGraph g(h, base);
    const Bytes good = g.message();
    c.refused(rpc::CMD_GRAPH_COMPUTE, Bytes(good.begin(), good.end() - 1), "expected");
    c.refused(rpc::CMD_GRAPH_COMPUTE, Bytes(good.begin(), good.begin() + 20), "truncated");
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, g.out}, 1), "device 1");
    Bytes huge = u32_payload(0);
    push<uint32_t>(huge, rpc::MAX_GRAPH_NODES + 1);
    push<uint32_t>(huge, 0);
    c.refused(rpc::CMD_GRAPH_COMPUTE, huge, "at most");
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 99}, {g.a, g.x, g.bias, g.mm, g.out}), "not among");
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 4}, {g.a, g.x, g.bias, g.mm, g.out}), "listed twice");
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.a, g.x, g.bias, g.mm, g.out}), "repeated");
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.mm, g.a, g.x, g.bias, g.out}), "not an earlier tensor");
    WireTensor bad = g.out;
    bad.src[1] = 42; // no such tensor
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "not an earlier tensor");
    bad = g.out, bad.op = 200;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "unknown op 200");
    bad = g.out, bad.op = GGML_OP_CONV_TRANSPOSE_1D;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "not supported");
    bad = g.out, bad.op = GGML_OP_UNARY, bad.src[1] = 0, bad.op_params[0] = 99;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "unary op not supported");
    bad = g.mm, bad.src[1] = 3; // x replaced by bias: K does not match
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, bad, g.out}), "shapes do not match");
    bad = g.out, bad.src[0] = 0;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "missing");
    bad = g.out, bad.src[2] = 1;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), "too many sources");
    WireTensor empty = g.bias;
    empty.ne[0] = 0; // a result from an empty source: refused
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, empty, g.mm, g.out}), "empty tensors");
    bad = g.out, bad.ne[1] = 0; // an empty result: nothing to compute, accepted
    CHECK(c.call(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad})));
    WireTensor rope = node(6, GGML_OP_ROPE, g.x, base + 4096, {2, 1});
    rope.op_params[1] = 3; // odd n_dims
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({6}, {g.a, g.x, rope}), "positions must be i32");
    // views: inside their source at the offset they claim, or refused
    WireTensor view = tensor(6, GGML_TYPE_F32, {4}, h, g.a.data + 8);
    view.op = GGML_OP_VIEW, view.src[0] = 1, view.view_src = 1, view.view_offs = 8;
    const WireTensor neg = node(7, GGML_OP_SCALE, view, base + 4096, {6});
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({6, 7}, {g.a, view, neg})));
    view.view_offs = 12;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({6, 7}, {g.a, view, neg}), "outside its source");
    view.data = g.a.data + 148, view.view_offs = 148; // a is 160 bytes: 16 do not fit
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({6, 7}, {g.a, view, neg}), "outside its source");
    view.view_src = 0;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({6}, {g.a, view}), "without a view source");
    WireTensor nobuf = g.a;
    nobuf.buffer = 0, nobuf.data = 0;
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {nobuf, g.x, g.bias, g.mm, g.out}), "no buffer");
}

TEST_CASE("refused: row indices out of range, or written earlier in the same graph") {
    Client c;
    const auto [h, base] = c.buffer(4096);
    const WireTensor w = tensor(1, GGML_TYPE_F32, {4, 6}, h, base), idx = tensor(2, GGML_TYPE_I32, {3}, h, base + 256);
    const WireTensor rows = node(3, GGML_OP_GET_ROWS, tensor(0, GGML_TYPE_F32, {4, 3}, h), base + 512, {1, 2});
    c.set(w, ramp(24, 0.5f, 0.0f));
    c.set(idx, std::vector<int32_t>{5, 6, 0});
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({3}, {w, idx, rows}), "row index 6 is outside [0, 6)");
    c.set(idx, std::vector<int32_t>{5, -1, 0});
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({3}, {w, idx, rows}), "row index -1");
    // a copy writes the indices before get_rows reads them: their values are unknown now
    const WireTensor other = tensor(4, GGML_TYPE_I32, {3}, h, base + 1024);
    const WireTensor cpy = node(5, GGML_OP_CPY, idx, idx.data, {4, 2});
    c.set(idx, std::vector<int32_t>{0, 1, 2});
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({5, 3}, {w, idx, other, cpy, rows}), "written by an earlier node");
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({3, 5}, {w, idx, other, cpy, rows}))); // after: fine
}

TEST_CASE("feed_stream: frames in, framed replies out; a refusal stops the stream") {
    rpc::Session s(options(1));
    Bytes in = frame(rpc::CMD_HELLO, hello());
    const Bytes more = frame(rpc::CMD_DEVICE_COUNT, {});
    in.insert(in.end(), more.begin(), more.end());
    const Bytes alloc = frame(rpc::CMD_ALLOC_BUFFER, alloc_buffer(100));
    in.insert(in.end(), alloc.begin(), alloc.end());
    Bytes out;
    REQUIRE(rpc::feed_stream(s, in.data(), in.size(), &out));
    REQUIRE(out.size() == 8 + 28 + 8 + 4 + 8 + 16);
    CHECK(read_at<uint64_t>(out, 0) == 28);
    CHECK(read_at<uint64_t>(out, 36) == 4);
    CHECK(read_at<uint32_t>(out, 44) == 1);
    CHECK(read_at<uint64_t>(out, 48) == 16);
    CHECK(s.n_buffers() == 1);
    const Bytes bad = frame(18, {});
    out.clear();
    CHECK_FALSE(rpc::feed_stream(s, bad.data(), bad.size(), &out));
    CHECK(out.empty());
    CHECK(rpc::feed_stream(s, more.data(), more.size() - 1, &out)); // incomplete: nothing yet
    CHECK(out.empty());
}

namespace {

// A minimal client of the wire protocol over a TCP socket.
struct SocketClient {
    int fd = -1;
    explicit SocketClient(int port) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons((uint16_t) port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(connect(fd, (sockaddr *) &addr, sizeof addr) == 0);
        timeval tv{10, 0}; // a server that never answers fails the test instead of hanging it
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    struct Adopt {
        int fd;
    };
    explicit SocketClient(Adopt a) : fd(a.fd) {} // an already connected socket
    ~SocketClient() { close(fd); }
    void send_bytes(const Bytes & b) const {
        size_t done = 0;
        while (done < b.size()) {
            const ssize_t n = send(fd, b.data() + done, b.size() - done, MSG_NOSIGNAL);
            if (n <= 0) return; // the server closed: the next read says so
            done += (size_t) n;
        }
    }
    bool recv_bytes(void * p, size_t n) const {
        uint8_t * d = (uint8_t *) p;
        while (n > 0) {
            const ssize_t got = recv(fd, d, n, 0);
            if (got <= 0) return false;
            d += got, n -= (size_t) got;
        }
        return true;
    }
    // sends a request; with a reply expected, returns it (false: connection closed)
    bool request(uint8_t cmd, const Bytes & payload, Bytes * reply) const {
        send_bytes(frame(cmd, payload));
        if (!reply) return true;
        uint64_t n = 0;
        if (!recv_bytes(&n, 8)) return false;
        reply->resize(n);
        return recv_bytes(reply->data(), n);
    }
    bool closed_by_server() const {
        uint8_t b;
        return recv(fd, &b, 1, 0) <= 0; // FIN (or a reset)
    }
};

} // namespace

TEST_CASE("loopback: a client over TCP computes mul_mat + add; bad clients do not stop the server") {
    std::atomic<bool> stop{false};
    std::mutex m;
    std::condition_variable cv;
    int port = 0;
    auto set_port = [&](int p) {
        std::lock_guard<std::mutex> lock(m);
        port = p;
        cv.notify_all();
    };
    std::thread server([&] {
        if (rpc::serve("127.0.0.1", 0, options(2), &stop, set_port) != 0) set_port(-1);
    });
    struct Joiner { // stops and joins the server however the test ends
        std::atomic<bool> & stop;
        std::thread & t;
        ~Joiner() {
            stop = true;
            t.join();
        }
    } joiner{stop, server};
    {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return port != 0; });
    }
    REQUIRE(port > 0);
    Bytes r;
    { // a bad client: unknown command after HELLO
        SocketClient bad(port);
        REQUIRE(bad.request(rpc::CMD_HELLO, hello(), &r));
        bad.send_bytes(frame(200, {}));
        CHECK(bad.closed_by_server());
    }
    { // a frame promising far more bytes than any message: closed without allocating them
        SocketClient bad(port);
        Bytes f = {rpc::CMD_HELLO};
        push<uint64_t>(f, 1ull << 62);
        bad.send_bytes(f);
        CHECK(bad.closed_by_server());
    }
    // two clients at once, sharing the 64 MiB pool: the first holds 48 MiB while the second computes
    auto free_bytes = [&r](const SocketClient & c) {
        REQUIRE(c.request(rpc::CMD_GET_DEVICE_MEMORY, u32_payload(0), &r));
        return read_at<uint64_t>(r, 0);
    };
    auto first = std::make_unique<SocketClient>(port);
    REQUIRE(first->request(rpc::CMD_HELLO, hello(), &r));
    REQUIRE(first->request(rpc::CMD_ALLOC_BUFFER, alloc_buffer(48ull << 20), &r));
    CHECK(read_at<uint64_t>(r, 8) == 48ull << 20);
    {
        SocketClient c(port);
        REQUIRE(c.request(rpc::CMD_HELLO, hello(), &r));
        REQUIRE(r.size() == 28);
        CHECK(r[0] == rpc::PROTO_MAJOR);
        CHECK(free_bytes(c) == 16ull << 20);
        REQUIRE(c.request(rpc::CMD_ALLOC_BUFFER, alloc_buffer(32ull << 20), &r));
        CHECK(read_at<uint64_t>(r, 0) == 0); // does not fit beside the first client's buffer
        REQUIRE(c.request(rpc::CMD_ALLOC_BUFFER, alloc_buffer(1 << 16), &r));
        const uint64_t h = read_at<uint64_t>(r, 0);
        REQUIRE(c.request(rpc::CMD_BUFFER_GET_BASE, u64_payload(h), &r));
        const MatmulGraph g(h, read_at<uint64_t>(r, 0));
        const std::vector<float> a = ramp(g.K * g.M, 0.37f, 0.2f), x = ramp(g.K * g.N, 0.71f, -0.3f),
                                 bias = ramp(g.M, 1.1f, 0.5f);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.a, 0, a.data(), a.size() * 4), nullptr);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.x, 0, x.data(), x.size() * 4), nullptr);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.bias, 0, bias.data(), bias.size() * 4), nullptr);
        c.request(rpc::CMD_GRAPH_COMPUTE, g.message(), nullptr);
        REQUIRE(c.request(rpc::CMD_GET_TENSOR, tensor_range(g.out, 0, nbytes(g.out)), &r));
        std::vector<float> out(r.size() / 4);
        std::memcpy(out.data(), r.data(), r.size());
        check_close(out, matmul_add_ref(a, x, bias, g.K, g.M, g.N));
        first.reset(); // its session ends on the server's thread: its 48 MiB come back
        uint64_t avail = 0;
        for (int i = 0; i < 200 && avail != (64ull << 20) - (1 << 16); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            avail = free_bytes(c);
        }
        CHECK(avail == (64ull << 20) - (1 << 16));
    }
}

TEST_CASE("--skip-refused-graphs: a refused graph is skipped, the stored one dropped, the connection kept") {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    rpc::Options o = options(1);
    o.skip_refused_graphs = true;
    std::string why = "not ended";
    std::thread server([&] { why = rpc::serve_connection(fds[1], o); });
    {
        SocketClient c(SocketClient::Adopt{fds[0]});
        Bytes r;
        REQUIRE(c.request(rpc::CMD_HELLO, hello(), &r));
        REQUIRE(c.request(rpc::CMD_ALLOC_BUFFER, alloc_buffer(1 << 16), &r));
        const uint64_t h = read_at<uint64_t>(r, 0);
        REQUIRE(c.request(rpc::CMD_BUFFER_GET_BASE, u64_payload(h), &r));
        const MatmulGraph g(h, read_at<uint64_t>(r, 0));
        const std::vector<float> a = ramp(g.K * g.M, 0.37f, 0.2f), x = ramp(g.K * g.N, 0.71f, -0.3f),
                                 bias = ramp(g.M, 1.1f, 0.5f), zeros(g.M * g.N, 0.0f);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.a, 0, a.data(), a.size() * 4), nullptr);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.x, 0, x.data(), x.size() * 4), nullptr);
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.bias, 0, bias.data(), bias.size() * 4), nullptr);
        c.request(rpc::CMD_GRAPH_COMPUTE, g.message(), nullptr); // stored for recompute
        c.request(rpc::CMD_SET_TENSOR, set_tensor(g.out, 0, zeros.data(), zeros.size() * 4), nullptr);
        WireTensor bad = g.out;
        bad.op = GGML_OP_CONV_TRANSPOSE_1D; // not run by this server
        c.request(rpc::CMD_GRAPH_COMPUTE, graph({4, 5}, {g.a, g.x, g.bias, g.mm, bad}), nullptr);
        // the good graph is no longer stored: recomputing is refused (skipped) and writes nothing
        c.request(rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0), nullptr);
        REQUIRE(c.request(rpc::CMD_GET_TENSOR, tensor_range(g.out, 0, nbytes(g.out)), &r));
        std::vector<float> out(r.size() / 4);
        std::memcpy(out.data(), r.data(), r.size());
        CHECK(out == zeros);
        c.request(rpc::CMD_GRAPH_COMPUTE, g.message(), nullptr); // the connection still computes
        REQUIRE(c.request(rpc::CMD_GET_TENSOR, tensor_range(g.out, 0, nbytes(g.out)), &r));
        std::memcpy(out.data(), r.data(), r.size());
        check_close(out, matmul_add_ref(a, x, bias, g.K, g.M, g.N));
    } // closes the client's end: the server's loop ends normally
    server.join();
    CHECK(why.empty());
}

TEST_CASE("graph: flash_attn_ext against a naive softmax attention; sinks refused") {
    Client c;
    const auto [h, base] = c.buffer(1 << 14);
    const int D = 4, NQ = 2, NH = 2, NKV = 3;
    const WireTensor q = tensor(1, GGML_TYPE_F32, {D, NQ, NH}, h, base),
                     k = tensor(2, GGML_TYPE_F32, {D, NKV, 1}, h, base + 256);
    const WireTensor v = tensor(3, GGML_TYPE_F32, {D, NKV, 1}, h, base + 512);
    WireTensor fa = node(4, GGML_OP_FLASH_ATTN_EXT, tensor(0, GGML_TYPE_F32, {D, NH, NQ}, h), base + 1024, {1, 2, 3});
    const float scale = 0.5f;
    std::memcpy(&fa.op_params[0], &scale, 4);
    const std::vector<float> qv = ramp(D * NQ * NH, 0.7f, 0.1f), kv = ramp(D * NKV, 0.3f, 0.2f),
                             vv = ramp(D * NKV, 0.9f, 0.3f);
    c.set(q, qv), c.set(k, kv), c.set(v, vv);
    REQUIRE(c.call(rpc::CMD_GRAPH_COMPUTE, graph({4}, {q, k, v, fa})));
    const std::vector<float> got = c.get<float>(fa);
    for (int hd = 0; hd < NH; ++hd)
        for (int i = 0; i < NQ; ++i) {
            double w[NKV], sum = 0;
            for (int j = 0; j < NKV; ++j) {
                double dot = 0;
                for (int d = 0; d < D; ++d) dot += (double) qv[(hd * NQ + i) * D + d] * kv[j * D + d];
                w[j] = std::exp(scale * dot);
                sum += w[j];
            }
            for (int d = 0; d < D; ++d) {
                double o = 0;
                for (int j = 0; j < NKV; ++j) o += w[j] / sum * vv[j * D + d];
                CHECK(got[(i * NH + hd) * D + d] == doctest::Approx(o).epsilon(1e-4));
            }
        }
    fa.src[4] = 1; // ggml's sinks: kvgraph's kernel would read them as something else
    c.refused(rpc::CMD_GRAPH_COMPUTE, graph({4}, {q, k, v, fa}), "too many sources");
}

TEST_CASE("the fuzzer's seeds are accepted conversations (every op the server runs, once)") {
    for (const auto & seed : rpc_seeds()) {
        CAPTURE(seed.first);
        rpc::Session s(options(1));
        Bytes out;
        CHECK(rpc::feed_stream(s, seed.second.data(), seed.second.size(), &out));
        CHECK(s.error() == "");
        CHECK(!out.empty());
    }
}
