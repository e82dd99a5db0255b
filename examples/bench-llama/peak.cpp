// Compute peaks for kvg-bench (peak.h). Each kernel runs independent chains of one
// instruction in registers, enough of them to cover its latency; the functions carry their
// own target attributes, so the file builds with the project's flags and a CPU without the
// instructions never runs them.
#include "peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PEAK_X86 1
// GCC 12 flags the undefined-value placeholders inside its own intrinsics when they are
// inlined into target-attributed functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace {

constexpr int kChains = 12;        // per thread on zmm (32 registers)
constexpr int kChainsYmm = 6;      // on ymm: chains, operands and a temporary fit 16 registers
constexpr int64_t kIters = 1 << 17; // loop steps of one burst: about half a millisecond, shorter
constexpr int kBursts = 40;         // than a scheduler time slice

std::atomic<int64_t> g_sink{0}; // keeps the results alive

#ifdef PEAK_X86
__attribute__((target("avx512f"))) int64_t fma_zmm(int64_t iters) {
    __m512 a[kChains];
    for (int j = 0; j < kChains; ++j) a[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < kChains; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
    }
    for (int j = 1; j < kChains; ++j) a[0] = _mm512_add_ps(a[0], a[j]);
    return (int64_t) _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2,fma"))) int64_t fma_ymm(int64_t iters) {
    __m256 a[kChains];
    for (int j = 0; j < kChains; ++j) a[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
    const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < kChains; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
    }
    for (int j = 1; j < kChains; ++j) a[0] = _mm256_add_ps(a[0], a[j]);
    float t[8];
    _mm256_storeu_ps(t, a[0]);
    return (int64_t) t[0];
}

// acc += four u8 x s8 products per i32 lane, one instruction.
__attribute__((target("avx512f,avx512vnni"))) int64_t vnni_zmm(int64_t iters) {
    __m512i acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_epi32(j);
    const __m512i x = _mm512_set1_epi8(3);
    __m512i w = _mm512_set1_epi8(-2);
    __asm__ volatile("" : "+v"(w)); // not a known constant
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], x, w);
    }
    for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
    return _mm512_reduce_add_epi32(acc[0]);
}

// acc += two bf16 products per f32 lane (vdpbf16ps), one instruction.
__attribute__((target("avx512f,avx512bf16"))) int64_t dpbf16_zmm(int64_t iters) {
    __m512 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
    __m512i w = _mm512_set1_epi32(0x3f803f80); // bf16 pairs of 1.0
    __asm__ volatile("" : "+v"(w));            // not a known constant
    const __m512bh x = (__m512bh) _mm512_set1_epi32(0x33d633d6), wb = (__m512bh) w; // x: 1e-7
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, wb);
    }
    for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    return (int64_t) _mm512_reduce_add_ps(acc[0]);
}

// The same without VNNI: u8 x s8 pairs to i16, pairs of those to i32, added to acc. The
// empty asm makes w unknown at each step, so the products are not hoisted out of the loop.
__attribute__((target("avx512f,avx512bw"))) int64_t maddubs_zmm(int64_t iters) {
    __m512i acc[kChains], x[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_setzero_si512(), x[j] = _mm512_set1_epi8((char) (1 + j));
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i w = _mm512_set1_epi8(-2);
    for (int64_t i = 0; i < iters; ++i) {
        __asm__ volatile("" : "+v"(w));
        for (int j = 0; j < kChains; ++j)
            acc[j] = _mm512_add_epi32(acc[j], _mm512_madd_epi16(_mm512_maddubs_epi16(x[j], w), ones));
    }
    for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
    return _mm512_reduce_add_epi32(acc[0]);
}

__attribute__((target("avx2"))) int64_t maddubs_ymm(int64_t iters) {
    __m256i acc[kChainsYmm], x[kChainsYmm];
    for (int j = 0; j < kChainsYmm; ++j) acc[j] = _mm256_setzero_si256(), x[j] = _mm256_set1_epi8((char) (1 + j));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i w = _mm256_set1_epi8(-2);
    for (int64_t i = 0; i < iters; ++i) {
        __asm__ volatile("" : "+x"(w));
        for (int j = 0; j < kChainsYmm; ++j)
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(x[j], w), ones));
    }
    for (int j = 1; j < kChainsYmm; ++j) acc[0] = _mm256_add_epi32(acc[0], acc[j]);
    return _mm256_extract_epi32(acc[0], 0);
}
#endif

// Seconds of kern(kIters) run on n threads at once: the threads start together (a spin
// barrier), each times its own call, the slowest counts.
double on_threads(int n, int64_t (*kern)(int64_t)) {
    std::atomic<int> arrived{0};
    std::vector<double> secs((size_t) n);
    auto body = [&](int i) {
        arrived.fetch_add(1);
        while (arrived.load() < n) {
        }
        const auto t0 = std::chrono::steady_clock::now();
        g_sink.fetch_add(kern(kIters), std::memory_order_relaxed);
        secs[(size_t) i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<std::thread> th;
    for (int i = 1; i < n; ++i) th.emplace_back(body, i);
    body(0);
    for (auto & t : th) t.join();
    return *std::max_element(secs.begin(), secs.end());
}

// G(FL)OP/s of kern on n threads, ops per loop step and thread: best of kBursts short bursts
// (on a shared machine some of them run undisturbed).
Peak best_rate(int n, int64_t (*kern)(int64_t), double ops_per_step, const char * kind) {
    double best = 0;
    for (int r = 0; r < kBursts; ++r) best = std::max(best, ops_per_step * (double) kIters * n / on_threads(n, kern) / 1e9);
    return Peak{best, kind};
}

Peak measure_fma(int n) {
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return best_rate(n, fma_zmm, kChains * 16 * 2.0, "fma512");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return best_rate(n, fma_ymm, kChains * 8 * 2.0, "fma256");
    }
#endif
    (void) n;
    return Peak{};
}

Peak measure_int8(int n) {
#ifdef PEAK_X86
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512 && __builtin_cpu_supports("avx512vnni")) return best_rate(n, vnni_zmm, kChains * 64 * 2.0, "vnni512");
    if (avx512 && __builtin_cpu_supports("avx512bw")) return best_rate(n, maddubs_zmm, kChains * 64 * 2.0, "maddubs512");
    if (__builtin_cpu_supports("avx2")) return best_rate(n, maddubs_ymm, kChainsYmm * 32 * 2.0, "maddubs256");
#endif
    (void) n;
    return Peak{};
}

Peak measure_bf16(int n) {
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) {
        return best_rate(n, dpbf16_zmm, kChains * 16 * 4.0, "dpbf16_512");
    }
#endif
    (void) n;
    return Peak{};
}

// Measured once per thread count per run.
Peak cached(std::map<int, Peak> & cache, int n, Peak (*measure)(int)) {
    auto it = cache.find(n);
    if (it == cache.end()) it = cache.emplace(n, measure(n)).first;
    return it->second;
}

} // namespace

Peak fma_f32_peak(int n_threads) {
    static std::map<int, Peak> cache;
    return cached(cache, n_threads, measure_fma);
}

Peak int8_dot_peak(int n_threads) {
    static std::map<int, Peak> cache;
    return cached(cache, n_threads, measure_int8);
}

Peak bf16_dot_peak(int n_threads) {
    static std::map<int, Peak> cache;
    return cached(cache, n_threads, measure_bf16);
}
