// kvg-rpc-server: a worker for llama.cpp's RPC backend (--rpc HOST:PORT), computing with
// kvgraph's CPU executor. Binds to 127.0.0.1 unless -H says otherwise: the protocol has no
// authentication, so listen on other interfaces only inside a trusted network.
#include "rpc-server.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

void usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s [-H HOST] [-p PORT] [-t THREADS] [-m MEM_MIB] [-c] [--skip-refused-graphs]\n"
                 "  -H HOST     address to listen on (default 127.0.0.1; the protocol has no authentication)\n"
                 "  -p PORT     port (default 50052)\n"
                 "  -t THREADS  compute threads (default: half the cores, at least 1)\n"
                 "  -m MEM_MIB  memory the buffers of all clients may hold together (default: the machine's memory)\n"
                 "  -c, --cache keep the weights clients mark for caching on disk, so a reload sends only hashes\n"
                 "              (llama.cpp's directory: $LLAMA_CACHE/rpc, $XDG_CACHE_HOME/llama.cpp/rpc or\n"
                 "              ~/.cache/llama.cpp/rpc)\n"
                 "  --skip-refused-graphs  log and skip a graph the server refuses, keeping the connection\n"
                 "              (conformance runs with test-backend-ops only: its outputs are left unwritten)\n",
                 argv0);
}

// A whole decimal number in [lo, hi], or false.
bool parse_int(const char * s, long long lo, long long hi, long long * out) {
    char * end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    std::string host = "127.0.0.1";
    long long port = 50052, threads = std::max(1u, std::thread::hardware_concurrency() / 2);
    bool skip_refused = false, use_cache = false;
    long long mem_mib = (long long) ((uint64_t) sysconf(_SC_PHYS_PAGES) * (uint64_t) sysconf(_SC_PAGESIZE) >> 20);
    for (int i = 1; i < argc; ++i) {
        const char * a = argv[i];
        if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
            usage(argv[0]);
            return 0;
        }
        if (!std::strcmp(a, "--skip-refused-graphs")) {
            skip_refused = true;
            continue;
        }
        if (!std::strcmp(a, "-c") || !std::strcmp(a, "--cache")) {
            use_cache = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "error: %s needs a value (or is unknown)\n", a);
            usage(argv[0]);
            return 1;
        }
        const char * v = argv[++i];
        bool ok = true;
        if (!std::strcmp(a, "-H") || !std::strcmp(a, "--host")) host = v;
        else if (!std::strcmp(a, "-p") || !std::strcmp(a, "--port")) ok = parse_int(v, 1, 65535, &port);
        else if (!std::strcmp(a, "-t") || !std::strcmp(a, "--threads")) ok = parse_int(v, 1, 512, &threads);
        else if (!std::strcmp(a, "-m") || !std::strcmp(a, "--mem")) ok = parse_int(v, 1, 1 << 20, &mem_mib);
        else {
            std::fprintf(stderr, "error: unknown option %s\n", a);
            usage(argv[0]);
            return 1;
        }
        if (!ok) {
            std::fprintf(stderr, "error: invalid value '%s' for %s\n", v, a);
            return 1;
        }
    }
    kvg::rpc::Options opt;
    opt.n_threads = (int) threads;
    opt.mem_limit = (uint64_t) mem_mib << 20;
    opt.skip_refused_graphs = skip_refused;
    if (use_cache) {
        std::string why;
        opt.cache_dir = kvg::rpc::default_cache_dir();
        if (opt.cache_dir.empty()) why = "none of LLAMA_CACHE, XDG_CACHE_HOME and HOME is set";
        if (!why.empty() || !kvg::rpc::make_dirs(opt.cache_dir, &why)) {
            std::fprintf(stderr, "error: -c: %s\n", why.c_str());
            return 1;
        }
        std::fprintf(stderr, "kvg-rpc-server: tensor cache in %s\n", opt.cache_dir.c_str());
    }
    std::fprintf(stderr, "kvg-rpc-server: ggml RPC protocol %d.%d.%d, %d threads, %lld MiB\n", kvg::rpc::PROTO_MAJOR,
                 kvg::rpc::PROTO_MINOR, kvg::rpc::PROTO_PATCH, opt.n_threads, mem_mib);
    return kvg::rpc::serve(host.c_str(), (int) port, opt, nullptr, [&](int bound) {
        std::fprintf(stderr, "kvg-rpc-server: listening on %s:%d\n", host.c_str(), bound);
    });
}
