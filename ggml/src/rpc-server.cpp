// The RPC server's session: message decoding, buffers and the tensor data commands. Graph
// commands are in rpc-graph.cpp, sockets in rpc-socket.cpp.
//
// Buffers are anonymous mappings (zeroed: a client never sees another client's bytes).
// Each gets a handle and a virtual base address (handle << 40) that the client adds its
// offsets to; the server's own addresses never go over the wire, and every address a client
// sends is checked against the buffer it names.
#include "rpc-server.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kvg::rpc {

Buffer::~Buffer() {
    if (host) munmap(host, mapped);
}

namespace {

constexpr uint64_t BASE_SHIFT = 40; // a buffer's addresses: [handle << 40, + size)
constexpr uint64_t MAX_BUFFER = 1ull << BASE_SHIFT;
constexpr uint64_t MAX_HANDLE = 1ull << 23;
constexpr uint64_t ALIGNMENT = 64;

// Little-endian field writes at a byte offset.
template <class T> void put(uint8_t * p, size_t off, T v) { std::memcpy(p + off, &v, sizeof v); }
template <class T> void append(std::vector<uint8_t> * out, T v) {
    const size_t n = out->size();
    out->resize(n + sizeof v);
    std::memcpy(out->data() + n, &v, sizeof v);
}

// Offsets of the wire tensor's fields.
enum : size_t {
    T_ID = 0,
    T_TYPE = 8,
    T_BUFFER = 12,
    T_NE = 20,
    T_NB = 36,
    T_OP = 52,
    T_PARAMS = 56,
    T_FLAGS = 120,
    T_SRC = 124,
    T_VIEW_SRC = 204,
    T_VIEW_OFFS = 212,
    T_DATA = 220,
    T_NAME = 228,
    T_USE_COUNT = 292,
};
static_assert(T_USE_COUNT + 4 == WIRE_TENSOR_SIZE, "wire tensor layout");

} // namespace

WireTensor decode_tensor(const uint8_t * p) {
    WireTensor t;
    t.id = load<uint64_t>(p, T_ID);
    t.type = load<uint32_t>(p, T_TYPE);
    t.buffer = load<uint64_t>(p, T_BUFFER);
    for (int i = 0; i < 4; ++i) {
        t.ne[i] = load<uint32_t>(p, T_NE + 4 * i);
        t.nb[i] = load<uint32_t>(p, T_NB + 4 * i);
    }
    t.op = load<uint32_t>(p, T_OP);
    std::memcpy(t.op_params, p + T_PARAMS, sizeof t.op_params);
    t.flags = load<int32_t>(p, T_FLAGS);
    for (int i = 0; i < 10; ++i) t.src[i] = load<uint64_t>(p, T_SRC + 8 * i);
    t.view_src = load<uint64_t>(p, T_VIEW_SRC);
    t.view_offs = load<uint64_t>(p, T_VIEW_OFFS);
    t.data = load<uint64_t>(p, T_DATA);
    std::memcpy(t.name, p + T_NAME, sizeof t.name - 1);
    t.name[sizeof t.name - 1] = '\0';
    return t;
}

void encode_tensor(const WireTensor & t, uint8_t * p) {
    std::memset(p, 0, WIRE_TENSOR_SIZE);
    put(p, T_ID, t.id);
    put(p, T_TYPE, t.type);
    put(p, T_BUFFER, t.buffer);
    for (int i = 0; i < 4; ++i) {
        put(p, T_NE + 4 * i, t.ne[i]);
        put(p, T_NB + 4 * i, t.nb[i]);
    }
    put(p, T_OP, t.op);
    std::memcpy(p + T_PARAMS, t.op_params, sizeof t.op_params);
    put(p, T_FLAGS, t.flags);
    for (int i = 0; i < 10; ++i) put(p, T_SRC + 8 * i, t.src[i]);
    put(p, T_VIEW_SRC, t.view_src);
    put(p, T_VIEW_OFFS, t.view_offs);
    put(p, T_DATA, t.data);
    std::memcpy(p + T_NAME, t.name, sizeof t.name);
}

// ---- tensor checks ----

namespace {

// The types a client may send: ggml's types that kvgraph stores and decodes (a block size,
// and a decoder for the block types), read from the type traits so a type kvgraph learns is
// accepted here too; not kvgraph's r16 layouts, which llama.cpp does not know.
bool type_supported(uint32_t type) {
    if (type >= GGML_TYPE_COUNT) return false;
    const ggml_type_traits * traits = ggml_get_type_traits((ggml_type) type);
    return traits->blck_size > 0 && (!traits->is_quantized || traits->to_float);
}

typedef unsigned __int128 u128;

// Bytes from the first to the last element, as ggml_nbytes (0 for an empty tensor); no
// overflow: 128-bit sums of 32-bit products. *n_elem: the element count.
u128 extent_of(const WireTensor & t, u128 * n_elem) {
    const ggml_type type = (ggml_type) t.type;
    const uint64_t bs = (uint64_t) ggml_blck_size(type), ts = ggml_type_size(type);
    const bool quant = ggml_is_quantized(type);
    *n_elem = 1;
    for (int i = 0; i < 4; ++i) *n_elem *= t.ne[i];
    if (*n_elem == 0) return 0;
    u128 extent = quant ? (u128) t.ne[0] / bs * t.nb[0] : (u128) ts;
    for (int i = quant ? 1 : 0; i < 4; ++i) extent += (u128) (t.ne[i] - 1) * t.nb[i];
    return extent;
}

// ggml_nbytes of a checked wire tensor
uint64_t nbytes_of(const WireTensor & t) {
    u128 n_elem;
    return (uint64_t) extent_of(t, &n_elem);
}

} // namespace

bool Session::fail(const char * fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    err_ = buf;
    return false;
}

Buffer * Session::find_buffer(uint64_t handle) {
    auto it = buffers_.find(handle);
    return it == buffers_.end() ? nullptr : it->second.get();
}

// Type, block layout, stride alignment; the bytes from the first to the last element (no
// overflow: 128-bit sums of 32-bit products), and at least as many bytes as the elements
// need (no aliasing strides, so the work is bounded by the memory); then the buffer range.
bool Session::check_tensor(const WireTensor & t, bool need_buffer, uint8_t ** host, uint64_t * extent_out) {
    if (!type_supported(t.type)) return fail("tensor '%s': type %u is not supported", t.name, t.type);
    const ggml_type type = (ggml_type) t.type;
    const uint64_t bs = (uint64_t) ggml_blck_size(type), ts = ggml_type_size(type);
    const bool quant = ggml_is_quantized(type);
    if (quant && (t.ne[0] % bs != 0 || t.nb[0] != ts)) {
        return fail("tensor '%s': %s needs ne[0] (%u) a multiple of %llu and nb[0] = %llu (got %u)", t.name,
                    ggml_type_name(type), t.ne[0], (unsigned long long) bs, (unsigned long long) ts, t.nb[0]);
    }
    const uint64_t align = quant ? 2 : ts;
    for (int i = 0; i < 4; ++i) {
        if (t.nb[i] % align != 0)
            return fail("tensor '%s': nb[%d] = %u is not a multiple of %llu", t.name, i, t.nb[i],
                        (unsigned long long) align);
    }
    u128 n_elem;
    const u128 extent = extent_of(t, &n_elem);
    if (extent > MAX_BUFFER) {
        return fail("tensor '%s' is too large (%llu bytes or more)", t.name, (unsigned long long) MAX_BUFFER);
    }
    if (n_elem / bs > extent / ts) return fail("tensor '%s': strides make its elements overlap", t.name);
    // an empty tensor's other dimensions still meet ggml_nelements' and ggml_nrows' partial
    // products: bound them as if the zeros were ones
    u128 shape_product = 1;
    for (int i = 0; i < 4; ++i) shape_product *= std::max<uint32_t>(t.ne[i], 1);
    if (shape_product > (u128) INT64_MAX) return fail("tensor '%s': its shape's product overflows int64", t.name);
    if (extent_out) *extent_out = (uint64_t) extent;
    if (t.buffer == 0) {
        if (need_buffer) return fail("tensor '%s' has no buffer", t.name);
        if (t.data != 0) return fail("tensor '%s' has data 0x%llx but no buffer", t.name, (unsigned long long) t.data);
        if (host) *host = nullptr;
        return true;
    }
    Buffer * b = find_buffer(t.buffer);
    if (!b) return fail("tensor '%s': unknown buffer 0x%llx", t.name, (unsigned long long) t.buffer);
    if (t.data < b->base || t.data - b->base > b->size || extent > b->size - (t.data - b->base)) {
        return fail("tensor '%s': bytes [0x%llx, +%llu) are outside its buffer [0x%llx, +%zu)", t.name,
                    (unsigned long long) t.data, (unsigned long long) extent, (unsigned long long) b->base, b->size);
    }
    if ((t.data - b->base) % align != 0)
        return fail("tensor '%s': data is not aligned to %llu bytes", t.name, (unsigned long long) align);
    if (host) *host = b->host + (t.data - b->base);
    return true;
}

// ---- the session ----

bool MemoryPool::take(uint64_t n) {
    uint64_t used = used_.load();
    do {
        if (n > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    return true;
}

void MemoryPool::give(uint64_t n) { used_ -= n; }

Session::Session(const Options & opt) : opt_(opt) {
    if (opt_.mem_limit > MAX_BUFFER) opt_.mem_limit = MAX_BUFFER;
    if (!opt_.pool) opt_.pool = std::make_shared<MemoryPool>(opt_.mem_limit);
    if (opt_.n_threads < 1) opt_.n_threads = 1;
    backend_ = ggml_backend_cpu_init();
    if (backend_) ggml_backend_cpu_set_n_threads(backend_, std::min(opt_.n_threads, GGML_MAX_N_THREADS));
}

Session::~Session() {
    graph_.reset(); // before the buffers it points into
    buffers_.clear();
    opt_.pool->give(used_);
    ggml_backend_free(backend_);
}

bool Session::dispatch(uint8_t cmd, const uint8_t * p, size_t n, std::vector<uint8_t> * reply, bool * has_reply) {
    reply->clear();
    *has_reply = false;
    err_.clear();
    if (!greeted_) {
        if (cmd != CMD_HELLO) return fail("the first command must be HELLO (%d), got %u", CMD_HELLO, cmd);
        *has_reply = true;
        return hello(p, n, reply);
    }
    switch (cmd) {
        case CMD_HELLO: return fail("HELLO sent twice");
        case CMD_SET_TENSOR:
        case CMD_SET_TENSOR_HASH:
        case CMD_GET_TENSOR:
        case CMD_COPY_TENSOR:
        case CMD_INIT_TENSOR:
        case CMD_GET_ALLOC_SIZE:
        case CMD_MEMSET_TENSOR: return tensor_command(cmd, p, n, reply, has_reply);
        case CMD_GRAPH_COMPUTE: return graph_compute(p, n);
        case CMD_GRAPH_RECOMPUTE: return graph_recompute(p, n);
        default:
            if (cmd >= CMD_COUNT || cmd == 18) return fail("unknown command %u", cmd);
            return buffer_command(cmd, p, n, reply, has_reply);
    }
}

bool Session::hello(const uint8_t *, size_t n, std::vector<uint8_t> * reply) {
    if (n != CONN_CAPS_SIZE) {
        return fail("HELLO carries %zu bytes, expected %zu (a client of protocol %d.x)", n, CONN_CAPS_SIZE,
                    PROTO_MAJOR);
    }
    reply->assign(4 + CONN_CAPS_SIZE, 0); // version, padding, no transport upgrade
    (*reply)[0] = PROTO_MAJOR, (*reply)[1] = PROTO_MINOR, (*reply)[2] = PROTO_PATCH;
    greeted_ = true;
    return true;
}

namespace {
// Payload size of the fixed-size commands (SIZE_MAX: variable).
size_t fixed_size(uint8_t cmd) {
    switch (cmd) {
        case CMD_ALLOC_BUFFER: return 12;
        case CMD_GET_ALIGNMENT:
        case CMD_GET_MAX_SIZE:
        case CMD_GET_DEVICE_MEMORY:
        case CMD_GRAPH_RECOMPUTE: return 4;
        case CMD_BUFFER_GET_BASE:
        case CMD_FREE_BUFFER: return 8;
        case CMD_BUFFER_CLEAR: return 9;
        case CMD_DEVICE_COUNT: return 0;
        case CMD_SET_TENSOR_HASH:
        case CMD_GET_TENSOR: return WIRE_TENSOR_SIZE + 16;
        case CMD_COPY_TENSOR: return 2 * WIRE_TENSOR_SIZE;
        case CMD_INIT_TENSOR: return WIRE_TENSOR_SIZE;
        case CMD_GET_ALLOC_SIZE: return 4 + 11 * WIRE_TENSOR_SIZE;
        case CMD_MEMSET_TENSOR: return WIRE_TENSOR_SIZE + 17;
        default: return SIZE_MAX;
    }
}
} // namespace

bool Session::buffer_command(uint8_t cmd, const uint8_t * p, size_t n, std::vector<uint8_t> * reply, bool * has_reply) {
    if (n != fixed_size(cmd)) return fail("command %u carries %zu bytes, expected %zu", cmd, n, fixed_size(cmd));
    if (n == 4 && load<uint32_t>(p, 0) != 0)
        return fail("device %u does not exist (one device: 0)", load<uint32_t>(p, 0));
    *has_reply = cmd != CMD_FREE_BUFFER && cmd != CMD_BUFFER_CLEAR;
    switch (cmd) {
        case CMD_ALLOC_BUFFER: return alloc_buffer(p, n, reply);
        case CMD_GET_ALIGNMENT: append<uint64_t>(reply, ALIGNMENT); return true;
        case CMD_GET_MAX_SIZE: append<uint64_t>(reply, std::min(opt_.mem_limit, opt_.pool->limit())); return true;
        case CMD_GET_DEVICE_MEMORY: // free: what all sessions together leave
            append<uint64_t>(reply, opt_.pool->available());
            append<uint64_t>(reply, opt_.pool->limit());
            return true;
        case CMD_DEVICE_COUNT: append<uint32_t>(reply, 1); return true;
        case CMD_FREE_BUFFER: return free_buffer(load<uint64_t>(p, 0));
        default: break;
    }
    Buffer * b = find_buffer(load<uint64_t>(p, 0));
    if (!b) return fail("unknown buffer 0x%llx", (unsigned long long) load<uint64_t>(p, 0));
    if (cmd == CMD_BUFFER_GET_BASE) {
        append<uint64_t>(reply, b->base);
    } else { // CMD_BUFFER_CLEAR
        std::memset(b->host, p[8], b->size);
    }
    return true;
}

// A buffer that does not fit the memory limit is not an error: the reply says 0, as when
// ggml cannot allocate, and the client reports it.
bool Session::alloc_buffer(const uint8_t * p, size_t, std::vector<uint8_t> * reply) {
    if (load<uint32_t>(p, 0) != 0) return fail("device %u does not exist (one device: 0)", load<uint32_t>(p, 0));
    const uint64_t size = load<uint64_t>(p, 4);
    uint64_t handle = 0;
    if (size <= opt_.mem_limit && next_handle_ < MAX_HANDLE && opt_.pool->take(size)) {
        const size_t page = (size_t) sysconf(_SC_PAGESIZE);
        const size_t mapped = size == 0 ? page : (size + page - 1) / page * page;
        void * m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) opt_.pool->give(size);
        else {
            auto b = std::make_unique<Buffer>();
            b->host = (uint8_t *) m, b->size = size, b->mapped = mapped;
            handle = next_handle_++;
            b->base = handle << BASE_SHIFT;
            buffers_[handle] = std::move(b);
            used_ += size;
        }
    }
    append<uint64_t>(reply, handle);
    append<uint64_t>(reply, handle ? size : 0);
    return true;
}

bool Session::free_buffer(uint64_t handle) {
    auto it = buffers_.find(handle);
    if (it == buffers_.end()) return fail("FREE_BUFFER: unknown buffer 0x%llx", (unsigned long long) handle);
    graph_.reset(); // its tensors may point into this buffer
    used_ -= it->second->size;
    opt_.pool->give(it->second->size);
    buffers_.erase(it);
    return true;
}

// ---- tensor data commands ----

namespace {
// [addr + offset, + size) inside the buffer of t? (t itself was checked)
bool in_buffer(const Buffer & b, uint64_t addr, uint64_t offset, uint64_t size) {
    if (addr < b.base || addr - b.base > b.size) return false;
    const uint64_t rel = addr - b.base;
    return offset <= b.size - rel && size <= b.size - rel - offset;
}
} // namespace

bool Session::tensor_command(uint8_t cmd, const uint8_t * p, size_t n, std::vector<uint8_t> * reply, bool * has_reply) {
    if (cmd == CMD_SET_TENSOR) return set_tensor(p, n);
    if (n != fixed_size(cmd)) return fail("command %u carries %zu bytes, expected %zu", cmd, n, fixed_size(cmd));
    *has_reply = cmd != CMD_INIT_TENSOR && cmd != CMD_MEMSET_TENSOR;
    switch (cmd) {
        case CMD_GET_TENSOR: return get_tensor(p, n, reply);
        case CMD_COPY_TENSOR: return copy_tensor(p, n, reply);
        case CMD_MEMSET_TENSOR: return memset_tensor(p, n);
        case CMD_GET_ALLOC_SIZE: return alloc_size(p, n, reply);
        case CMD_INIT_TENSOR: return check_tensor(decode_tensor(p), false, nullptr); // nothing to prepare
        default: break;
    }
    return set_tensor_hash(p, reply);
}

// | tensor | offset (8) | hash (8) |  ->  | 1: set from the cache, 0: not cached (the client
// then sends the bytes) |. The entry's size is the size set, within the tensor's buffer.
bool Session::set_tensor_hash(const uint8_t * p, std::vector<uint8_t> * reply) {
    const WireTensor t = decode_tensor(p);
    if (!check_tensor(t, true, nullptr)) return false;
    const uint64_t offset = load<uint64_t>(p, WIRE_TENSOR_SIZE), hash = load<uint64_t>(p, WIRE_TENSOR_SIZE + 8);
    const int64_t size = opt_.cache_dir.empty() ? -1 : cache_size(opt_.cache_dir, hash);
    bool hit = false;
    if (size >= 0) {
        const Buffer & b = *find_buffer(t.buffer);
        if (!in_buffer(b, t.data, offset, (uint64_t) size)) {
            return fail("SET_TENSOR_HASH '%s': the cached %lld bytes at +%llu are outside its buffer (%zu bytes)",
                        t.name, (long long) size, (unsigned long long) offset, b.size);
        }
        hit = cache_load(opt_.cache_dir, hash, b.host + (t.data - b.base) + offset, (size_t) size);
        std::fprintf(stderr, "kvg-rpc-server: '%s' (%lld bytes) %s\n", t.name, (long long) size,
                     hit ? "set from the cache" : "not set: its cache entry is damaged");
    }
    reply->push_back(hit ? 1 : 0);
    return true;
}

// | tensor | cache flag (1) | offset (8) | data |: with the flag, the bytes are also cached (-c)
bool Session::set_tensor(const uint8_t * p, size_t n) {
    const size_t head = WIRE_TENSOR_SIZE + 9;
    if (n < head) return fail("SET_TENSOR carries %zu bytes, at least %zu needed", n, head);
    const WireTensor t = decode_tensor(p);
    if (!check_tensor(t, true, nullptr)) return false;
    const uint64_t offset = load<uint64_t>(p, WIRE_TENSOR_SIZE + 1), size = n - head;
    const Buffer & b = *find_buffer(t.buffer);
    if (!in_buffer(b, t.data, offset, size)) {
        return fail("SET_TENSOR '%s': bytes [+%llu, +%llu) are outside its buffer (%zu bytes)", t.name,
                    (unsigned long long) offset, (unsigned long long) (offset + size), b.size);
    }
    if (size) std::memcpy(b.host + (t.data - b.base) + offset, p + head, size);
    std::string why;
    if (p[WIRE_TENSOR_SIZE] != 0 && !opt_.cache_dir.empty() && size > 0) {
        if (cache_store(opt_.cache_dir, p + head, size, &why))
            std::fprintf(stderr, "kvg-rpc-server: '%s' (%llu bytes) cached\n", t.name, (unsigned long long) size);
        else std::fprintf(stderr, "kvg-rpc-server: not cached: %s\n", why.c_str()); // the data is set all the same
    }
    return true;
}

// | tensor | offset (8) | size (8) |  ->  | the bytes |
bool Session::get_tensor(const uint8_t * p, size_t, std::vector<uint8_t> * reply) {
    const WireTensor t = decode_tensor(p);
    if (!check_tensor(t, true, nullptr)) return false;
    const uint64_t offset = load<uint64_t>(p, WIRE_TENSOR_SIZE), size = load<uint64_t>(p, WIRE_TENSOR_SIZE + 8);
    const Buffer & b = *find_buffer(t.buffer);
    if (!in_buffer(b, t.data, offset, size)) {
        return fail("GET_TENSOR '%s': bytes [+%llu, +%llu) are outside its buffer (%zu bytes)", t.name,
                    (unsigned long long) offset, (unsigned long long) size, b.size);
    }
    const uint8_t * at = b.host + (t.data - b.base) + offset;
    reply->assign(at, at + size);
    return true;
}

// | src | dst |  ->  | 1: copied |. ggml copies nbytes(src) bytes to dst's address.
bool Session::copy_tensor(const uint8_t * p, size_t, std::vector<uint8_t> * reply) {
    const WireTensor src = decode_tensor(p), dst = decode_tensor(p + WIRE_TENSOR_SIZE);
    uint8_t *s = nullptr, *d = nullptr;
    if (!check_tensor(src, true, &s) || !check_tensor(dst, true, &d)) return false;
    const uint64_t bytes = nbytes_of(src);
    const Buffer & bd = *find_buffer(dst.buffer);
    if (!in_buffer(bd, dst.data, 0, bytes)) {
        return fail("COPY_TENSOR: %llu bytes of '%s' do not fit in the buffer of '%s' at its address",
                    (unsigned long long) bytes, src.name, dst.name);
    }
    if (bytes) std::memmove(d, s, bytes);
    reply->push_back(1);
    return true;
}

// | tensor | offset (8) | size (8) | value (1) |: within the tensor and its buffer.
bool Session::memset_tensor(const uint8_t * p, size_t) {
    const WireTensor t = decode_tensor(p);
    uint8_t * host = nullptr;
    if (!check_tensor(t, true, &host)) return false;
    const uint64_t offset = load<uint64_t>(p, WIRE_TENSOR_SIZE), size = load<uint64_t>(p, WIRE_TENSOR_SIZE + 8);
    const uint64_t nbytes = nbytes_of(t);
    if (offset > nbytes || size > nbytes - offset) {
        return fail("MEMSET_TENSOR '%s': bytes [+%llu, +%llu) are outside the tensor (%llu bytes)", t.name,
                    (unsigned long long) offset, (unsigned long long) (offset + size), (unsigned long long) nbytes);
    }
    if (size) std::memset(host + offset, p[WIRE_TENSOR_SIZE + 16], size);
    return true;
}

// | device (4) | tensor | its 10 sources |  ->  | bytes (8) |: ggml_nbytes on the CPU.
bool Session::alloc_size(const uint8_t * p, size_t, std::vector<uint8_t> * reply) {
    if (load<uint32_t>(p, 0) != 0) return fail("device %u does not exist (one device: 0)", load<uint32_t>(p, 0));
    WireTensor t = decode_tensor(p + 4);
    t.buffer = t.data = 0; // only type and shape matter (the client may ask before placing it)
    if (!check_tensor(t, false, nullptr)) return false;
    append<uint64_t>(reply, nbytes_of(t));
    return true;
}

// ---- framing ----

bool feed_stream(Session & s, const uint8_t * data, size_t size, std::vector<uint8_t> * out) {
    std::vector<uint8_t> reply;
    size_t pos = 0;
    while (size - pos >= 9) {
        const uint8_t cmd = data[pos];
        const uint64_t n = load<uint64_t>(data, pos + 1);
        if (n > size - pos - 9) return true; // incomplete frame: the peer would still be sending
        bool has_reply = false;
        if (!s.dispatch(cmd, data + pos + 9, (size_t) n, &reply, &has_reply)) return false;
        if (has_reply) {
            append<uint64_t>(out, reply.size());
            out->insert(out->end(), reply.begin(), reply.end());
        }
        pos += 9 + n;
    }
    return true;
}

} // namespace kvg::rpc
