// CPU feature detection and the choice of the SIMD path: what the CPU runs (CPUID), the
// cap from KVG_CPU_FEATURES and ggml_cpu_set_features_limit, the active kernel table, and
// ggml's ggml_cpu_has_* queries.
#include "simd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace kvg {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// CPUID leaf 1 directly: clang 14's __builtin_cpu_supports does not know "f16c".
static bool cpuid_f16c() {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

static bool cpu_supports(cpu_path p) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    switch (p) {
        case PATH_SCALAR: return true;
        // CPUID first: the kernel tables are only touched on CPUs that can run them
        case PATH_AVX2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && kvg::cpuid_f16c() &&
                   kernels_avx2();
        case PATH_AVX512:
            return cpu_supports(PATH_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && kernels_avx512();
        case PATH_AVX512_VNNI:
            return cpu_supports(PATH_AVX512) && __builtin_cpu_supports("avx512vnni") && kernels_avx512_vnni();
        case PATH_AVX512_BF16:
            return cpu_supports(PATH_AVX512_VNNI) && __builtin_cpu_supports("avx512bf16") && kernels_avx512_bf16();
        default: return false;
    }
#else
    return p == PATH_SCALAR;
#endif
}

cpu_path cpu_best_path() {
    static const cpu_path best = [] {
        int p = PATH_COUNT - 1;
        while (p > PATH_SCALAR && !cpu_supports((cpu_path) p)) --p;
        return (cpu_path) p;
    }();
    return best;
}

static const char * const g_path_names[] = {"scalar", "avx2", "avx512", "avx512vnni", "avx512bf16"};
static_assert(sizeof(g_path_names) / sizeof(g_path_names[0]) == PATH_COUNT, "one name per cpu_path");

// The cap from KVG_CPU_FEATURES, read once.
static int env_limit() {
    const char * s = std::getenv("KVG_CPU_FEATURES");
    if (!s || !*s) return PATH_COUNT - 1;
    for (int p = 0; p < PATH_COUNT; ++p) {
        if (std::strcmp(s, g_path_names[p]) == 0) return p;
    }
    GGML_LOG_WARN("kvgraph: ignoring KVG_CPU_FEATURES=%s (expected scalar, avx2, avx512, avx512vnni or avx512bf16)\n", s);
    return PATH_COUNT - 1;
}

// What the CPU supports, capped by the environment (a hard cap: tests can run a whole
// program on a lower path).
static int allowed_path() {
    static const int allowed = std::min<int>(env_limit(), cpu_best_path());
    return allowed;
}

static std::atomic<int> & active_slot() {
    static std::atomic<int> slot{allowed_path()};
    return slot;
}

cpu_path cpu_active_path() { return (cpu_path) active_slot().load(std::memory_order_relaxed); }

const cpu_kernels * cpu_path_kernels(cpu_path p) {
    switch (p) {
        case PATH_AVX512_BF16: return kernels_avx512_bf16();
        case PATH_AVX512_VNNI: return kernels_avx512_vnni();
        case PATH_AVX512: return kernels_avx512();
        case PATH_AVX2: return kernels_avx2();
        default: return &kernels_scalar();
    }
}

// The active path's table, kept beside the path: kernels ask for it several times per node, and
// the path's switch and each table's initialization guard cost 1.5% of a tiny model's token.
// nullptr until the first question or the first ggml_cpu_set_features_limit.
static std::atomic<const cpu_kernels *> g_active_table{nullptr};

const cpu_kernels & cpu_active_kernels() {
    const cpu_kernels * k = g_active_table.load(std::memory_order_acquire);
    if (k) return *k;
    const cpu_kernels * first = cpu_path_kernels(cpu_active_path());
    // a limit set meanwhile stored its own table: that one stands
    return g_active_table.compare_exchange_strong(k, first, std::memory_order_acq_rel) ? *first : *k;
}

} // namespace kvg

using namespace kvg;

enum ggml_cpu_features ggml_cpu_set_features_limit(enum ggml_cpu_features limit) {
    if ((int) limit < 0 || (int) limit > GGML_CPU_FEATURES_BEST) {
        GGML_ABORT("ggml_cpu_set_features_limit: invalid limit %d", (int) limit);
    }
    const int p = std::min<int>((int) limit, allowed_path());
    active_slot().store(p, std::memory_order_relaxed);
    g_active_table.store(cpu_path_kernels((cpu_path) p), std::memory_order_release);
    return (enum ggml_cpu_features) p;
}

enum ggml_cpu_features ggml_cpu_get_features(void) { return (enum ggml_cpu_features) cpu_active_path(); }

// ---- ggml_cpu_has_* ---------------------------------------------------------------------------
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int has(bool v) { return v ? 1 : 0; }
int ggml_cpu_has_avx2(void) { __builtin_cpu_init(); return has(__builtin_cpu_supports("avx2")); }
int ggml_cpu_has_f16c(void) { return has(kvg::cpuid_f16c()); }
int ggml_cpu_has_fma(void) { __builtin_cpu_init(); return has(__builtin_cpu_supports("fma")); }
int ggml_cpu_has_avx512(void) { __builtin_cpu_init(); return has(__builtin_cpu_supports("avx512f")); }
#else
int ggml_cpu_has_avx2(void) { return 0; }
int ggml_cpu_has_f16c(void) { return 0; }
int ggml_cpu_has_fma(void) { return 0; }
int ggml_cpu_has_avx512(void) { return 0; }
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
int ggml_cpu_has_neon(void) { return 1; }
#else
int ggml_cpu_has_neon(void) { return 0; }
#endif
#ifdef KVG_USE_OPENBLAS
int ggml_cpu_has_blas(void) { return 1; }
#else
int ggml_cpu_has_blas(void) { return 0; }
#endif
