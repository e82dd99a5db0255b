// Fuzz target: byte streams of ggml RPC requests fed to a fresh kvg-rpc-server session
// (ggml/src/rpc-server.h, feed_stream: what a socket would deliver). Seeds (make-seeds,
// corpus/rpc) are valid conversations: HELLO, buffers, tensor data, graphs of every op the
// server runs; mutations then reach each check.
//
// Invariants besides "no crash, leak, UB or hang":
//  - a refused stream says why;
//  - the replies are well-framed (size prefixes add up to the output);
//  - the buffers never hold more than the memory limit.
#include "fuzz-common.h"
#include "rpc-server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    kvg::rpc::Options opt;
    opt.n_threads = 1;
    opt.mem_limit = 1 << 20; // bounds every tensor, so every graph's work
    kvg::rpc::Session s(opt);
    std::vector<uint8_t> out;
    const bool ok = kvg::rpc::feed_stream(s, data, size, &out);
    FUZZ_CHECK(ok || !s.error().empty(), "refused without a message");
    size_t pos = 0;
    while (pos < out.size()) {
        FUZZ_CHECK(out.size() - pos >= 8, "reply prefix cut at %zu of %zu", pos, out.size());
        uint64_t n;
        std::memcpy(&n, out.data() + pos, 8);
        FUZZ_CHECK(n <= out.size() - pos - 8, "reply of %llu bytes at %zu overruns %zu", (unsigned long long) n, pos,
                   out.size());
        pos += 8 + n;
    }
    FUZZ_CHECK(s.bytes_allocated() <= opt.mem_limit, "%llu bytes allocated", (unsigned long long) s.bytes_allocated());
    return 0;
}
