// Building ggml RPC messages for the server's tests and fuzzer seeds (ggml/src/rpc-server.h).
#pragma once

#include "ggml.h"
#include "rpc-server.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace rpct {

using kvg::rpc::WireTensor;
using Bytes = std::vector<uint8_t>;

template <class T> void push(Bytes & b, T v) {
    const size_t n = b.size();
    b.resize(n + sizeof v);
    std::memcpy(b.data() + n, &v, sizeof v);
}
template <class T> T read_at(const Bytes & b, size_t off) {
    T v{};
    if (off + sizeof v <= b.size()) std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

// A dense tensor of shape ne at address data of buffer (0: none), op NONE.
inline WireTensor tensor(uint64_t id, ggml_type type, std::initializer_list<uint32_t> shape, uint64_t buffer = 0,
                         uint64_t data = 0) {
    WireTensor t;
    t.id = id;
    t.type = type;
    t.buffer = buffer;
    t.data = data;
    int i = 0;
    for (uint32_t v : shape) t.ne[i++] = v;
    for (; i < 4; ++i) t.ne[i] = 1;
    t.nb[0] = (uint32_t) ggml_type_size(type);
    t.nb[1] = (uint32_t) (t.nb[0] * (t.ne[0] / ggml_blck_size(type)));
    for (i = 2; i < 4; ++i) t.nb[i] = t.nb[i - 1] * t.ne[i - 1];
    std::snprintf(t.name, sizeof t.name, "t%llu", (unsigned long long) id);
    return t;
}
// An op node: result of shape like `like`, at data, with sources.
inline WireTensor node(uint64_t id, ggml_op op, const WireTensor & like, uint64_t data,
                       std::initializer_list<uint64_t> srcs) {
    WireTensor t =
        tensor(id, (ggml_type) like.type, {like.ne[0], like.ne[1], like.ne[2], like.ne[3]}, like.buffer, data);
    t.op = op;
    t.flags = GGML_TENSOR_FLAG_COMPUTE; // as ggml_build_forward_expand marks nodes
    int i = 0;
    for (uint64_t s : srcs) t.src[i++] = s;
    return t;
}
inline size_t nbytes(const WireTensor & t) { return (size_t) t.nb[3] * t.ne[3]; } // dense tensors only

inline void put_tensor(Bytes & b, const WireTensor & t) {
    const size_t n = b.size();
    b.resize(n + kvg::rpc::WIRE_TENSOR_SIZE);
    kvg::rpc::encode_tensor(t, b.data() + n);
}

// ---- payloads ----
inline Bytes hello() { return Bytes(kvg::rpc::CONN_CAPS_SIZE, 0); }
inline Bytes u32_payload(uint32_t v) {
    Bytes b;
    push(b, v);
    return b;
}
inline Bytes u64_payload(uint64_t v) {
    Bytes b;
    push(b, v);
    return b;
}
inline Bytes alloc_buffer(uint64_t size) {
    Bytes b;
    push<uint32_t>(b, 0);
    push(b, size);
    return b;
}
inline Bytes set_tensor(const WireTensor & t, uint64_t offset, const void * data, size_t size) {
    Bytes b;
    put_tensor(b, t);
    push<uint8_t>(b, 0);
    push(b, offset);
    b.insert(b.end(), (const uint8_t *) data, (const uint8_t *) data + size);
    return b;
}
// GET_TENSOR / SET_TENSOR_HASH (offset, size-or-hash) and MEMSET_TENSOR (plus the value)
inline Bytes tensor_range(const WireTensor & t, uint64_t offset, uint64_t size) {
    Bytes b;
    put_tensor(b, t);
    push(b, offset);
    push(b, size);
    return b;
}
inline Bytes graph(const std::vector<uint64_t> & nodes, const std::vector<WireTensor> & tensors, uint32_t device = 0) {
    Bytes b;
    push(b, device);
    push<uint32_t>(b, (uint32_t) nodes.size());
    for (uint64_t id : nodes) push(b, id);
    push<uint32_t>(b, (uint32_t) tensors.size());
    for (const WireTensor & t : tensors) put_tensor(b, t);
    return b;
}
// | cmd | size | payload |, as on the wire
inline Bytes frame(uint8_t cmd, const Bytes & payload) {
    Bytes b;
    b.push_back(cmd);
    push<uint64_t>(b, payload.size());
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

} // namespace rpct
