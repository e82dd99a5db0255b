// A server for ggml's RPC protocol (llama.cpp's ggml-rpc, protocol 7.0.0): a llama.cpp
// client (--rpc HOST:PORT, test-backend-ops -b RPC) sees one device whose buffers are host
// memory owned here and whose graphs run on kvgraph's CPU executor.
//
// Wire format (little-endian): a request is | command (1 byte) | size (u64) | payload |, a
// reply (for the commands that have one) is | size (u64) | payload |. HELLO must come first.
// Every payload is checked before use (docs/robustness.md lists the checks); a message that
// fails one is refused: the connection is closed, the protocol having no error reply. A
// refusal leaves the session's buffers and stored graph as they were.
//
// Internal (not installed): kvg-rpc-server, the tests and the fuzzer use it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct ggml_context;
struct ggml_cgraph;
struct ggml_tensor;
struct ggml_backend;

namespace kvg::rpc {

constexpr uint8_t PROTO_MAJOR = 7, PROTO_MINOR = 0, PROTO_PATCH = 0;

enum Command : uint8_t {
    CMD_ALLOC_BUFFER = 0,
    CMD_GET_ALIGNMENT = 1,
    CMD_GET_MAX_SIZE = 2,
    CMD_BUFFER_GET_BASE = 3,
    CMD_FREE_BUFFER = 4,
    CMD_BUFFER_CLEAR = 5,
    CMD_SET_TENSOR = 6,
    CMD_SET_TENSOR_HASH = 7,
    CMD_GET_TENSOR = 8,
    CMD_COPY_TENSOR = 9,
    CMD_GRAPH_COMPUTE = 10,
    CMD_GET_DEVICE_MEMORY = 11,
    CMD_INIT_TENSOR = 12,
    CMD_GET_ALLOC_SIZE = 13,
    CMD_HELLO = 14,
    CMD_DEVICE_COUNT = 15,
    CMD_GRAPH_RECOMPUTE = 16,
    CMD_MEMSET_TENSOR = 17,
    CMD_COUNT = 19, // 18 (ggml's NONE) is client-internal and refused here
};

// Byte sizes of the wire structures.
constexpr size_t WIRE_TENSOR_SIZE = 296; // ggml's serialized tensor (packed)
constexpr size_t CONN_CAPS_SIZE = 24;    // HELLO's transport capabilities (all zero: plain TCP)
constexpr uint32_t MAX_GRAPH_NODES = 1u << 20;
constexpr uint32_t MAX_GRAPH_TENSORS = 1u << 22;

// The serialized tensor, decoded field by field (layout: ggml-rpc's rpc_tensor).
struct WireTensor {
    uint64_t id = 0;
    uint32_t type = 0;
    uint64_t buffer = 0; // a buffer handle of this session, or 0
    uint32_t ne[4] = {}, nb[4] = {};
    uint32_t op = 0;
    int32_t op_params[16] = {};
    int32_t flags = 0;
    uint64_t src[10] = {};
    uint64_t view_src = 0, view_offs = 0;
    uint64_t data = 0; // an address the client got from BUFFER_GET_BASE plus an offset
    char name[64] = {};
};
// A little-endian field at byte offset off of p (the caller checked the length).
template <class T> T load(const uint8_t * p, size_t off) {
    T v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
}

// Decodes WIRE_TENSOR_SIZE bytes at p (the name is always NUL-terminated).
WireTensor decode_tensor(const uint8_t * p);
// The inverse (tests and the fuzzer's seeds build messages with it).
void encode_tensor(const WireTensor & t, uint8_t * p);

// The memory the sessions of one server share: a buffer is granted only while the sum of
// all sessions' buffers stays within the limit. Thread-safe.
class MemoryPool {
public:
    explicit MemoryPool(uint64_t limit) : limit_(limit) {}
    bool take(uint64_t n); // false (nothing taken) if n does not fit
    void give(uint64_t n); // returns what take granted
    uint64_t limit() const { return limit_; }
    uint64_t available() const { return limit_ - used_.load(); }

private:
    const uint64_t limit_;
    std::atomic<uint64_t> used_{0};
};

struct Options {
    int n_threads = 1;
    uint64_t mem_limit = 1ull << 30; // bytes all buffers may hold together (at most 2^40)
    // shared by the sessions of one server (serve() makes it); null: the session has its own
    std::shared_ptr<MemoryPool> pool;
    // conformance runs only (test-backend-ops, whose client aborts when a connection closes):
    // a refused GRAPH_COMPUTE / RECOMPUTE is logged and skipped (its outputs keep their old
    // bytes, the stored graph is dropped) and the connection stays open
    bool skip_refused_graphs = false;
    // the tensor cache's directory (rpc-cache.cpp); empty: no cache, SET_TENSOR_HASH always misses
    std::string cache_dir;
};

// A buffer: host memory mapped for the client, addressed by the client as [base, base + size).
struct Buffer {
    uint8_t * host = nullptr;
    size_t size = 0;   // what the client asked for
    size_t mapped = 0; // what was mapped (size rounded up to pages, at least one)
    uint64_t base = 0; // the client's address of host[0]
    ~Buffer();         // unmaps
};
// The last graph, kept for GRAPH_RECOMPUTE: kvgraph tensors in their own context, and the
// row-index checks to run before each compute (rpc-graph.cpp).
struct StoredGraph {
    struct IndexCheck {
        const struct ggml_tensor * node;
        const struct ggml_tensor * idx; // I32 or I64 values that must lie in [0, limit)
        int64_t limit;
    };
    struct ggml_context * ctx = nullptr;
    struct ggml_cgraph * graph = nullptr;
    std::vector<IndexCheck> index_checks;
    StoredGraph() = default;
    StoredGraph(const StoredGraph &) = delete;
    StoredGraph & operator=(const StoredGraph &) = delete;
    ~StoredGraph(); // frees ctx
};

// One client's state: its buffers and its last graph. Not thread-safe: one connection (one
// thread) per session; sessions share only their memory pool.
class Session {
public:
    explicit Session(const Options & opt);
    ~Session();
    Session(const Session &) = delete;
    Session & operator=(const Session &) = delete;

    // Handles one request. Returns false if it is refused (error() says why; the caller
    // closes the connection). On success *has_reply tells whether the command has a reply
    // and *reply holds its payload (without the size prefix).
    bool dispatch(uint8_t cmd, const uint8_t * payload, size_t size, std::vector<uint8_t> * reply, bool * has_reply);
    const std::string & error() const { return err_; }

    uint64_t bytes_allocated() const { return used_; }
    void forget_graph(); // a later GRAPH_RECOMPUTE is refused
    size_t n_buffers() const { return buffers_.size(); }

    // Below: used by the command handlers (rpc-server.cpp, rpc-graph.cpp).
    // The buffer behind a handle, or null.
    Buffer * find_buffer(uint64_t handle);
    // Checks a tensor's type and shape; with a buffer, that its bytes lie inside it, and
    // sets *host to the tensor's first byte (null without a buffer) and *extent to the bytes
    // from its first to its last element. Fails with a message in error().
    bool check_tensor(const WireTensor & t, bool need_buffer, uint8_t ** host, uint64_t * extent = nullptr);
    bool fail(const char * fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 2, 3)))
#endif
        ;
    const Options & options() const { return opt_; }
    struct ggml_backend * backend() {
        return backend_;
    }

private:
    bool hello(const uint8_t * p, size_t n, std::vector<uint8_t> * reply);
    bool buffer_command(uint8_t cmd, const uint8_t * p, size_t n, std::vector<uint8_t> * reply, bool * has_reply);
    bool tensor_command(uint8_t cmd, const uint8_t * p, size_t n, std::vector<uint8_t> * reply, bool * has_reply);
    bool alloc_buffer(const uint8_t * p, size_t n, std::vector<uint8_t> * reply);
    bool free_buffer(uint64_t handle);
    bool set_tensor(const uint8_t * p, size_t n);
    bool set_tensor_hash(const uint8_t * p, std::vector<uint8_t> * reply);
    bool get_tensor(const uint8_t * p, size_t n, std::vector<uint8_t> * reply);
    bool copy_tensor(const uint8_t * p, size_t n, std::vector<uint8_t> * reply);
    bool memset_tensor(const uint8_t * p, size_t n);
    bool alloc_size(const uint8_t * p, size_t n, std::vector<uint8_t> * reply);
    bool graph_compute(const uint8_t * p, size_t n);
    bool graph_recompute(const uint8_t * p, size_t n);
    bool run_graph();

    Options opt_;
    std::string err_;
    bool greeted_ = false;
    uint64_t next_handle_ = 1;
    uint64_t used_ = 0;
    std::map<uint64_t, std::unique_ptr<Buffer>> buffers_;
    std::unique_ptr<StoredGraph> graph_;
    struct ggml_backend * backend_ = nullptr;
};

// Reads request frames from a byte stream (what a socket delivers) and dispatches them;
// replies are appended to *out with their size prefix. Stops at the first refusal (returns
// false) or at the end of the input (an incomplete last frame is ignored: returns true).
bool feed_stream(Session & s, const uint8_t * data, size_t size, std::vector<uint8_t> * out);

// ---- the tensor cache (rpc-cache.cpp) ----
// FNV-1a, 64 bits: the hash ggml's client sends in SET_TENSOR_HASH.
uint64_t fnv1a64(const uint8_t * data, size_t n);
// llama.cpp's: $LLAMA_CACHE/rpc, else $XDG_CACHE_HOME/llama.cpp/rpc, else
// $HOME/.cache/llama.cpp/rpc ("" if none of them is set).
std::string default_cache_dir();
// Creates path and its parents; false with a message if that fails or path is no directory.
bool make_dirs(const std::string & path, std::string * why);
// Keeps the bytes in dir under their hash (atomically: a temporary file renamed into place).
bool cache_store(const std::string & dir, const uint8_t * data, size_t size, std::string * why);
// The byte size of the entry for hash, or -1 if there is none.
int64_t cache_size(const std::string & dir, uint64_t hash);
// Reads the entry of size bytes into out; false if it cannot be read or its bytes do not
// hash to its name (out may then hold part of it: the caller treats it as a miss).
bool cache_load(const std::string & dir, uint64_t hash, uint8_t * out, size_t size);

// ---- POSIX sockets (rpc-socket.cpp) ----
constexpr int MAX_CLIENTS = 8; // connections served at once; more are closed on arrival
// Listens on host:port (port 0: any free port) and serves up to MAX_CLIENTS connections at
// once, each on its own thread with its own session, all sharing one memory pool of
// opt.mem_limit bytes, until *stop becomes true (checked every 100 ms; open connections are
// then closed). A refused message closes its connection only. on_listening gets the bound
// port once the socket listens. Returns 0, or 1 with a message on stderr if the socket
// cannot be set up.
int serve(const char * host, int port, const Options & opt, const std::atomic<bool> * stop,
          const std::function<void(int)> & on_listening);
// Serves one connected socket until the peer closes it, a message is refused or *stop
// (if given) becomes true; closes fd. Returns the refusal's message, or "" after a normal end.
std::string serve_connection(int fd, const Options & opt, const std::atomic<bool> * stop = nullptr);

} // namespace kvg::rpc
