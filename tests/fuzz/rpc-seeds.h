// Seeds of the fuzz-rpc target: valid request streams (make-seeds.cpp writes them).
#pragma once

#include "../rpc-common.h"

#include <string>
#include <utility>
#include <vector>

namespace rpct {

// The first buffer of a session has handle 1 and base 1 << 40 (rpc-server.cpp).
constexpr uint64_t SEED_HANDLE = 1, SEED_BASE = 1ull << 40;

inline void append_frame(Bytes & s, uint8_t cmd, const Bytes & payload) {
    const Bytes f = frame(cmd, payload);
    s.insert(s.end(), f.begin(), f.end());
}
inline Bytes greeted() {
    Bytes s;
    append_frame(s, kvg::rpc::CMD_HELLO, hello());
    return s;
}
inline Bytes with_buffer(uint64_t size) {
    Bytes s = greeted();
    append_frame(s, kvg::rpc::CMD_ALLOC_BUFFER, alloc_buffer(size));
    append_frame(s, kvg::rpc::CMD_BUFFER_GET_BASE, u64_payload(SEED_HANDLE));
    return s;
}
inline void fill(Bytes & s, const WireTensor & t, uint32_t seed) {
    Bytes v(nbytes(t));
    for (size_t i = 0; i < v.size(); ++i) v[i] = (uint8_t) ((i * 37 + seed) % 61); // small floats, small indices
    append_frame(s, kvg::rpc::CMD_SET_TENSOR, set_tensor(t, 0, v.data(), v.size()));
}
template <class T> void fill_values(Bytes & s, const WireTensor & t, const std::vector<T> & v) {
    append_frame(s, kvg::rpc::CMD_SET_TENSOR, set_tensor(t, 0, v.data(), v.size() * sizeof(T)));
}

// A llama-like chain: rms_norm, mul, mul_mat, rope, soft_max, glu, unary, scale, cpy, get_rows.
inline Bytes llama_like() {
    const uint64_t h = SEED_HANDLE, B = SEED_BASE;
    Bytes s = with_buffer(1 << 16);
    const WireTensor x = tensor(1, GGML_TYPE_F32, {32, 4}, h, B), w = tensor(2, GGML_TYPE_F32, {32}, h, B + 1024);
    const WireTensor wq = tensor(3, GGML_TYPE_Q8_0, {32, 16}, h, B + 2048),
                     pos = tensor(4, GGML_TYPE_I32, {4}, h, B + 4096);
    const WireTensor ids = tensor(5, GGML_TYPE_I32, {2}, h, B + 4160);
    fill(s, x, 1), fill(s, w, 2), fill(s, pos, 4);
    fill_values(s, ids, std::vector<int32_t>{3, 1});
    Bytes q(nbytes(wq), 0);
    append_frame(s, kvg::rpc::CMD_SET_TENSOR, set_tensor(wq, 0, q.data(), q.size()));
    WireTensor n1 = node(10, GGML_OP_RMS_NORM, x, B + 8192, {1});
    const WireTensor n2 = node(11, GGML_OP_MUL, x, B + 9216, {10, 2});
    const WireTensor n3 = node(12, GGML_OP_MUL_MAT, tensor(0, GGML_TYPE_F32, {16, 4}, h), B + 10240, {3, 11});
    WireTensor r3 = tensor(13, GGML_TYPE_F32, {4, 4, 4}, h, B + 10240);
    r3.op = GGML_OP_RESHAPE, r3.src[0] = 12, r3.view_src = 12;
    WireTensor n4 = node(14, GGML_OP_ROPE, r3, B + 11264, {13, 4});
    n4.op_params[1] = 4, n4.op_params[2] = GGML_ROPE_TYPE_NEOX;
    const WireTensor n5 = node(15, GGML_OP_SOFT_MAX, n3, B + 12288, {12});
    WireTensor n6 = node(16, GGML_OP_GLU, tensor(0, GGML_TYPE_F32, {8, 4}, h), B + 13312, {15});
    n6.op_params[0] = 2; // swiglu
    WireTensor n7 = node(17, GGML_OP_UNARY, n6, B + 14336, {16});
    n7.op_params[0] = GGML_UNARY_OP_SILU;
    WireTensor n8 = node(18, GGML_OP_SCALE, n7, B + 15360, {17});
    const float half = 0.5f;
    std::memcpy(&n8.op_params[0], &half, 4);
    const WireTensor n9 = node(19, GGML_OP_CPY, tensor(0, GGML_TYPE_F16, {8, 4}, h), B + 16384, {18, 0});
    const WireTensor n10 = node(20, GGML_OP_GET_ROWS, tensor(0, GGML_TYPE_F32, {8, 2}, h), B + 17408, {18, 5});
    WireTensor cpy_dst = tensor(21, GGML_TYPE_F16, {8, 4}, h, B + 16384);
    WireTensor n9b = n9;
    n9b.src[1] = 21;
    append_frame(s, kvg::rpc::CMD_GRAPH_COMPUTE,
                 graph({10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
                       {x, w, wq, pos, ids, n1, n2, n3, r3, n4, n5, n6, n7, n8, cpy_dst, n9b, n10}));
    append_frame(s, kvg::rpc::CMD_GRAPH_RECOMPUTE, u32_payload(0));
    append_frame(s, kvg::rpc::CMD_GET_TENSOR, tensor_range(n10, 0, nbytes(n10)));
    return s;
}

inline std::vector<std::pair<std::string, Bytes>> rpc_seeds() {
    namespace r = kvg::rpc;
    const uint64_t h = SEED_HANDLE, B = SEED_BASE;
    std::vector<std::pair<std::string, Bytes>> seeds;
    seeds.push_back({"hello.bin", greeted()});
    Bytes q = greeted();
    append_frame(q, r::CMD_DEVICE_COUNT, {});
    for (uint8_t c : {r::CMD_GET_ALIGNMENT, r::CMD_GET_MAX_SIZE, r::CMD_GET_DEVICE_MEMORY})
        append_frame(q, c, u32_payload(0));
    seeds.push_back({"queries.bin", q});
    Bytes d = with_buffer(4096);
    const WireTensor t = tensor(1, GGML_TYPE_F32, {4, 3}, h, B + 64), u = tensor(2, GGML_TYPE_F32, {4, 3}, h, B + 1024);
    fill(d, t, 3);
    append_frame(d, r::CMD_GET_TENSOR, tensor_range(t, 0, nbytes(t)));
    Bytes ms = tensor_range(t, 4, 8);
    ms.push_back(7);
    append_frame(d, r::CMD_MEMSET_TENSOR, ms);
    Bytes cp;
    put_tensor(cp, t), put_tensor(cp, u);
    append_frame(d, r::CMD_COPY_TENSOR, cp);
    Bytes init;
    put_tensor(init, t);
    append_frame(d, r::CMD_INIT_TENSOR, init);
    Bytes as = u32_payload(0);
    for (int i = 0; i < 11; ++i) put_tensor(as, i == 0 ? t : WireTensor{});
    append_frame(d, r::CMD_GET_ALLOC_SIZE, as);
    append_frame(d, r::CMD_SET_TENSOR_HASH, tensor_range(t, 0, 99));
    Bytes clear = u64_payload(h);
    clear.push_back(1);
    append_frame(d, r::CMD_BUFFER_CLEAR, clear);
    append_frame(d, r::CMD_FREE_BUFFER, u64_payload(h));
    seeds.push_back({"tensors.bin", d});
    Bytes g = with_buffer(4096);
    const WireTensor a = tensor(1, GGML_TYPE_F32, {8, 5}, h, B), x = tensor(2, GGML_TYPE_F32, {8, 3}, h, B + 256);
    const WireTensor bias = tensor(3, GGML_TYPE_F32, {5}, h, B + 512), idx = tensor(6, GGML_TYPE_I64, {3}, h, B + 640);
    for (const WireTensor & v : {a, x, bias}) fill(g, v, (uint32_t) v.id);
    fill_values(g, idx, std::vector<int64_t>{4, 0, 2});
    const WireTensor mm = node(4, GGML_OP_MUL_MAT, tensor(0, GGML_TYPE_F32, {5, 3}, h), B + 1024, {1, 2});
    const WireTensor add = node(5, GGML_OP_ADD, mm, B + 2048, {4, 3});
    WireTensor set = node(7, GGML_OP_SET_ROWS, tensor(0, GGML_TYPE_F32, {8, 5}, h), B, {2, 6});
    set.src[0] = 2, set.view_src = 1; // rows of x into a, at the indices
    append_frame(g, r::CMD_GRAPH_COMPUTE, graph({4, 5, 7}, {a, x, bias, idx, mm, add, set}));
    append_frame(g, r::CMD_GRAPH_RECOMPUTE, u32_payload(0));
    append_frame(g, r::CMD_GET_TENSOR, tensor_range(add, 0, nbytes(add)));
    seeds.push_back({"graph.bin", g});
    seeds.push_back({"llama-like.bin", llama_like()});
    return seeds;
}

} // namespace rpct
