// api-impl.h promises that decode allocates only when a batch is larger than any before:
// once warm, a decode loop makes no heap allocation (a pool worker: once, on first use). Checked by counting every
// operator new of the process (the library's C++ allocations all go through it). Not run
// under TSan, whose runtime owns operator new (hence no "alloc" in this test's name, which
// scripts/ci-sanitize.sh's TSan selection would match).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-runtime-common.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};
}

// The replacements pair malloc with free, as a replacement must; GCC's check cannot tell.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void * operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void * p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void * operator new[](std::size_t n) { return operator new(n); }
// ggml_init uses new (std::nothrow): counted, and paired with the free below like the rest.
void * operator new(std::size_t n, const std::nothrow_t &) noexcept {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n ? n : 1);
}
void * operator new[](std::size_t n, const std::nothrow_t & tag) noexcept { return operator new(n, tag); }
void operator delete(void * p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void * p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void * p) noexcept { std::free(p); }
void operator delete[](void * p) noexcept { std::free(p); }
void operator delete(void * p, std::size_t) noexcept { std::free(p); }
void operator delete[](void * p, std::size_t) noexcept { std::free(p); }

TEST_CASE("a warm decode loop allocates nothing") {
    kvg_model * m = load_shared_model("stories260K.bin");
    for (int n_threads : {1, 2}) {
        CAPTURE(n_threads);
        kvg_context * ctx = kvg_context_new(m, model_params(m, KVG_KV_F32, KVG_ATTN_FLASH, n_threads), nullptr, 0);
        REQUIRE(ctx != nullptr);
        char err[256] = "";
        const kvg_token prompt[4] = {1, 20, 30, 40};
        REQUIRE(kvg_decode(ctx, prompt, 4, 0, err, sizeof err) != nullptr);
        kvg_token t = 50;
        int32_t pos = 4;
        for (int i = 0; i < 8; ++i, ++pos) REQUIRE(kvg_decode(ctx, &t, 1, pos, err, sizeof err) != nullptr); // warm
        const long before = g_allocations.load();
        for (int i = 0; i < 32; ++i, ++pos) {
            const float * logits = kvg_decode(ctx, &t, 1, pos, err, sizeof err);
            REQUIRE(logits != nullptr);
            t = (kvg_token) (1 + (pos * 7) % 400);
        }
        // One thread: nothing. A pool worker allocates once, the first time it runs a kernel
        // with per-thread storage (rope), whenever the schedule first hands it one: a bound
        // that does not grow with the tokens.
        if (n_threads == 1) CHECK(g_allocations.load() - before == 0);
        else CHECK(g_allocations.load() - before <= 8 * (n_threads - 1));
        kvg_context_free(ctx);
    }
    kvg_model_free(m);
}
