// Matmul kernel benchmark against this machine's measured limits.
//
//   kvg-bench-matmul [--quick] [--reps N] [--threads 1,2] [--matvec-only] [--cpu-time]
//                    [--shape K,N,M ...] [--types f32,f16,q8_0,...]
//
// Measures, for each thread count: streaming read bandwidth and the FMA peak (probes
// written here), matrix-vector products 4096x14336 per weight type in GB/s of weights
// read (fraction of the read bandwidth for reads of the same size), and 4096x4096 weights times N activation rows
// (N = 32, 128, 512) in GFLOP/s (fraction of the FMA peak). Products run through the
// library's graph executor. With OpenBLAS available it also prints sgemm's own rate at
// 2048^3 and on the 4096x4096x512 shape, and our f32 result as a fraction of it.
// Matvec weights are rotated over several copies so each run reads them from DRAM.
// --shape (repeatable) times only the given products (K x N weights times M rows) for
// --types (default f32,f16,bf16,q8_0,q4_0): quick before/after comparisons of kernels. Without
// --shape, --types adds rows to the matvec table (e.g. --matvec-only --types tq2_0).
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#ifdef KVG_BENCH_OPENBLAS
#include <cblas.h>
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BENCH_X86 1
// GCC 12 flags the undefined-value placeholders inside its own intrinsics when they are
// inlined into target-attributed functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace {

// --cpu-time: time by the process's CPU time divided by the threads in use, which a
// busy machine's preemptions do not inflate (spinning waits still count, so it stays
// conservative). Default: wall-clock time.
bool g_cpu_time = false;
int g_timed_threads = 1;

double now_s() {
    if (g_cpu_time) {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (ts.tv_sec + ts.tv_nsec * 1e-9) / g_timed_threads;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs f(ith) on n threads at once, returns the wall time.
template <typename F>
double run_threads(int n, F f) {
    g_timed_threads = n;
    const double t0 = now_s();
    std::vector<std::thread> th;
    for (int i = 1; i < n; ++i) th.emplace_back(f, i);
    f(0);
    for (auto & t : th) t.join();
    return now_s() - t0;
}

// ---- machine limits ----------------------------------------------------------------------------
#ifdef BENCH_X86
__attribute__((target("avx512f"))) float read_avx512(const float * p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
__attribute__((target("avx2"))) float read_avx2(const float * p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
// 12 independent FMA chains per thread: enough to fill both FMA pipes despite latency.
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
    __m512 a[12];
    for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
    }
    __m512 s = a[0];
    for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]);
    return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
    __m256 a[12];
    for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
    const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
    }
    __m256 s = a[0];
    for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, a[j]);
    float t[8];
    _mm256_storeu_ps(t, s);
    return t[0] + t[4];
}
#endif

float read_scalar(const float * p, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; ++i) s += p[i];
    return s;
}

volatile float g_sink;

// Streaming reads of `bytes` at a time, rotating through a pool far larger than the caches
// so that every read comes from DRAM, split over n_threads threads. Best of reps, GB/s.
// Matvec results are compared with reads of the same size: on a busy machine short runs
// are less often interrupted, so only like-sized runs compare fairly.
struct read_pool {
    size_t n = 0; // floats
    float * buf = nullptr;
    size_t next = 0;
    explicit read_pool(size_t bytes) : n(bytes / 4) {
        buf = (float *) std::aligned_alloc(64, n * sizeof(float));
        for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
    }
    ~read_pool() { std::free(buf); }
};

double measure_read_bw(read_pool & pool, size_t bytes, int n_threads, int reps) {
    const size_t per = bytes / 4 / n_threads / 64 * 64; // floats per thread
    const bool has512 = ggml_cpu_has_avx512(), has2 = ggml_cpu_has_avx2();
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        if (pool.next + per * n_threads > pool.n) pool.next = 0;
        const float * base = pool.buf + pool.next;
        pool.next += per * n_threads;
        const double t = run_threads(n_threads, [&](int ith) {
            const float * p = base + ith * per;
            float s;
#ifdef BENCH_X86
            if (has512) s = read_avx512(p, per);
            else if (has2) s = read_avx2(p, per);
            else s = read_scalar(p, per);
#else
            (void) has512; (void) has2;
            s = read_scalar(p, per);
#endif
            g_sink = s;
        });
        best = std::max(best, per * n_threads * 4.0 / t / 1e9);
    }
    return best;
}

// Best of reps: GFLOP/s of dependent-free FMA chains on n_threads threads.
double measure_fma_peak(int n_threads, int reps) {
    const int64_t iters = 2000000; // a few ms: short bursts often run undisturbed on a shared machine
    const bool has512 = ggml_cpu_has_avx512(), has2 = ggml_cpu_has_avx2() && ggml_cpu_has_fma();
    const double lanes = has512 ? 16 : has2 ? 8 : 1;
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        const double t = run_threads(n_threads, [&](int) {
#ifdef BENCH_X86
            if (has512) g_sink = fma_avx512(iters);
            else if (has2) g_sink = fma_avx2(iters);
            else g_sink = 0;
#endif
        });
        best = std::max(best, iters * 12.0 * lanes * 2.0 * n_threads / t / 1e9);
    }
    return best;
}

// ---- library products ------------------------------------------------------------------------------
uint64_t g_state = 0x9E3779B97F4A7C15ull;
float frand() {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (float) ((g_state >> 40) * (1.0 / (1 << 24)) * 2.0 - 1.0);
}
// a row of k values of type t as random bytes, each block's first 2 bytes a small f16 (its scale d
// in most layouts)
void random_blocks(ggml_type t, char * dst, int64_t k) {
    const size_t bytes = ggml_row_size(t, k), bs = ggml_type_size(t);
    for (size_t i = 0; i < bytes; ++i) dst[i] = (char) (frand() * 127.0f);
    const ggml_fp16_t d = ggml_fp32_to_fp16(0.01f);
    for (size_t at = 0; at < bytes; at += bs) std::memcpy(dst + at, &d, sizeof d);
}

struct mm_result {
    double seconds;      // best time per product
    size_t weight_bytes;
    double read_seconds; // best time to stream as many bytes (when asked for)
};

// Times dst = W (K x N, type t) * X (K x M, f32) through the executor; rotates over
// `copies` weight matrices so that they are read from memory each time. With a pool,
// each product is followed by a streaming read of the same size (interleaved, so both
// see the same machine load).
mm_result time_mul_mat(ggml_type t, int64_t K, int64_t N, int64_t M, int n_threads, int copies, int reps,
                       read_pool * pool = nullptr) {
    const size_t wbytes = ggml_row_size(t, K) * N;
    const size_t mem = copies * (wbytes + 4096) + (size_t) (K * M + N * M) * 4 + copies * ggml_graph_overhead() + (16 << 20);
    ggml_context * ctx = ggml_init({mem, nullptr, false});
    if (!ctx) {
        std::fprintf(stderr, "out of memory (%zu MiB)\n", mem >> 20);
        std::exit(1);
    }
    std::vector<ggml_tensor *> w(copies);
    // kvgraph's interleaved types (past ggml's): rows of the plain type, rearranged below
    const bool interleave = t >= GGML_TYPE_COUNT;
    const ggml_type plain_of[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,   GGML_TYPE_Q4_K,
                                  GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0}; // as ggml.h orders them
    if (interleave) t = plain_of[t - GGML_TYPE_Q4_0_R16];
    for (int c = 0; c < copies; ++c) w[c] = ggml_new_tensor_2d(ctx, t, K, N);
    {
        std::vector<float> row(K);
        for (int64_t r = 0; r < N; ++r) {
            for (auto & v : row) v = frand();
            char * dst = (char *) w[0]->data + r * w[0]->nb[1];
            if (t == GGML_TYPE_F32) std::memcpy(dst, row.data(), K * 4);
            else if (ggml_get_type_traits(t)->from_float_ref)
                ggml_get_type_traits(t)->from_float_ref(row.data(), dst, K);
            else random_blocks(t, dst, K); // types kvgraph decodes but does not encode (iq2_*, iq1_*)
        }
        for (int c = 1; c < copies; ++c) std::memcpy(w[c]->data, w[0]->data, wbytes);
        for (int c = 0; c < copies && interleave; ++c) {
            if (!ggml_kvg_repack(w[c])) {
                std::fprintf(stderr, "%s_r16: this path has no kernel for it, or K %% 128 / N %% 16 is not 0\n", ggml_type_name(t));
                std::exit(1);
            }
        }
    }
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    for (int64_t i = 0; i < K * M; ++i) ((float *) x->data)[i] = frand();
    std::vector<ggml_cgraph *> g(copies);
    for (int c = 0; c < copies; ++c) {
        g[c] = ggml_new_graph(ctx);
        ggml_build_forward_expand(g[c], ggml_mul_mat(ctx, w[c], x));
    }
    ggml_cplan plan = ggml_graph_plan(g[0], n_threads, nullptr);
    std::vector<uint8_t> work(plan.work_size + 64);
    plan.work_data = work.data();
    ggml_graph_compute(g[0], &plan); // warm up: threads, page faults
    mm_result res = {1e30, wbytes, 1e30};
    for (int r = 0; r < reps; ++r) {
        g_timed_threads = n_threads;
        const double t0 = now_s();
        ggml_graph_compute(g[r % copies], &plan);
        res.seconds = std::min(res.seconds, now_s() - t0);
        if (pool) res.read_seconds = std::min(res.read_seconds, wbytes / 1e9 / measure_read_bw(*pool, wbytes, n_threads, 1));
    }
    ggml_free(ctx);
    return res;
}

// ---- flash attention of a prompt at depth ------------------------------------------------------
// A 1.1B-shaped layer (32 query heads, 4 KV heads of 64): 512 query rows after `depth` cached
// positions, causal, over an f16 cache (K and V rows) or a q8_0 one (K by channel in groups,
// the open group in f32, V rows). FLOPs: 2 x 2 x 64 per (query head, visible position).
double time_attention(ggml_type kv, int64_t depth, int n_threads, int reps, double * flops) {
    const int64_t D = 64, n_head = 32, n_head_kv = 4, n_q = 512, n_kv = depth + n_q, C = D * n_head_kv;
    const size_t mem = (size_t) (n_kv * C * 2 * 4 + n_kv * n_q * 4 + 2 * D * n_q * n_head * 4) + (32 << 20);
    ggml_context * ctx = ggml_init({mem, nullptr, false});
    if (!ctx) std::exit(1);
    auto random_rows = [&](ggml_tensor * t, int64_t width, int64_t rows) {
        std::vector<float> x(width * rows);
        for (float & e : x) e = frand();
        ggml_quantize_chunk(t->type, x.data(), t->data, 0, rows, width, nullptr);
    };
    ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, n_q, n_head);
    random_rows(q, D, n_q * n_head);
    ggml_tensor * v = ggml_new_tensor_2d(ctx, kv, C, n_kv);
    random_rows(v, C, n_kv);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_q);
    for (int64_t i = 0; i < n_q; ++i)
        for (int64_t j = 0; j < n_kv; ++j)
            ((ggml_fp16_t *) mask->data)[i * n_kv + j] = ggml_fp32_to_fp16(j <= depth + i ? 0.0f : -INFINITY);
    const size_t hb = ggml_row_size(kv, D);
    ggml_tensor * vh = ggml_view_3d(ctx, v, D, n_kv, n_head_kv, v->nb[1], hb, 0);
    ggml_tensor * out;
    if (kv == GGML_TYPE_Q8_0) {
        const int64_t n_grp = (n_kv + GGML_KV_GROUP - 1) / GGML_KV_GROUP;
        ggml_tensor * kg = ggml_new_tensor_3d(ctx, kv, GGML_KV_GROUP, C, n_grp);
        random_rows(kg, GGML_KV_GROUP, C * n_grp);
        ggml_tensor * kr = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, C, GGML_KV_GROUP);
        random_rows(kr, C, GGML_KV_GROUP);
        ggml_tensor * krg = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
        ((int32_t *) krg->data)[0] = (int32_t) (n_grp - 1);
        out = ggml_flash_attn_ext_grouped(ctx, q, kg, kr, krg, vh, mask, 0.125f, 0.0f, 0.0f);
    } else {
        ggml_tensor * k = ggml_new_tensor_2d(ctx, kv, C, n_kv);
        random_rows(k, C, n_kv);
        out = ggml_flash_attn_ext(ctx, q, ggml_view_3d(ctx, k, D, n_kv, n_head_kv, k->nb[1], hb, 0), vh, mask, 0.125f,
                                  0.0f, 0.0f);
    }
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    ggml_cplan plan = ggml_graph_plan(g, n_threads, nullptr);
    std::vector<uint8_t> work(plan.work_size + 64);
    plan.work_data = work.data();
    ggml_graph_compute(g, &plan); // warm up
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        g_timed_threads = n_threads;
        const double t0 = now_s();
        ggml_graph_compute(g, &plan);
        best = std::min(best, now_s() - t0);
    }
    ggml_free(ctx);
    *flops = 4.0 * n_head * D * (double) (n_q * depth + n_q * (n_q + 1) / 2);
    return best;
}

#ifdef KVG_BENCH_OPENBLAS
// sgemm C[M x N] = A[M x K] * B[N x K]^T (the shape of our products), best GFLOP/s.
double time_sgemm(int M, int N, int K, int n_threads, int reps) {
    std::vector<float> A((size_t) M * K), B((size_t) N * K), C((size_t) M * N);
    for (auto & v : A) v = frand();
    for (auto & v : B) v = frand();
    openblas_set_num_threads(n_threads);
    double best = 1e30;
    for (int r = 0; r < reps + 1; ++r) {
        g_timed_threads = n_threads;
        const double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
        if (r > 0) best = std::min(best, now_s() - t0);
    }
    openblas_set_num_threads(1);
    return 2.0 * M * N * K / best / 1e9;
}
#endif

const char * pct(double f, char * buf) {
    std::snprintf(buf, 16, "%3.0f%%", f * 100);
    return buf;
}

ggml_type type_by_name(const std::string & s) {
    for (ggml_type t : {GGML_TYPE_Q4_0_R16, GGML_TYPE_Q8_0_R16, GGML_TYPE_Q4_K_R16, GGML_TYPE_Q6_K_R16,
                        GGML_TYPE_IQ4_NL_R16, GGML_TYPE_Q5_0_R16}) {
        if (s == ggml_type_name(t)) return t; // past ggml's types
    }
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name((ggml_type) t);
        if (n && s == n && ggml_type_size((ggml_type) t) > 0) return (ggml_type) t;
    }
    std::fprintf(stderr, "unknown type %s\n", s.c_str());
    std::exit(1);
}

struct shape { int64_t K, N, M; };

// The --shape products: GFLOP/s (and GB/s of weights for M = 1, read from DRAM as in the
// matvec table), per thread count.
void run_shapes(const std::vector<shape> & shapes, const std::vector<ggml_type> & types, const std::vector<int> & threads,
                int reps) {
    for (const shape & s : shapes) {
        for (const ggml_type t : types) {
            const size_t wbytes = ggml_row_size(t, s.K) * s.N;
            const int copies = s.M == 1 ? (int) std::max<size_t>(1, ((size_t) 256 << 20) / wbytes) : 1;
            std::printf("  %-5s K=%-5lld N=%-5lld M=%-4lld:", ggml_type_name(t), (long long) s.K, (long long) s.N, (long long) s.M);
            for (const int nt : threads) {
                const mm_result r = time_mul_mat(t, s.K, s.N, s.M, nt, copies, s.M == 1 ? std::max(reps * 6, copies * 3) : reps);
                const double gf = 2.0 * s.K * s.N * s.M / r.seconds / 1e9;
                std::printf("   %d thr %7.1f GFLOP/s", nt, gf);
                if (s.M == 1) std::printf(" %5.1f GB/s", wbytes / r.seconds / 1e9);
            }
            std::printf("\n");
            std::fflush(stdout);
        }
    }
}

} // namespace

struct bench_options {
    int reps = 6;
    bool matvec_only = false;
    std::vector<int> threads = {1, 2};
    std::vector<shape> shapes;
    std::vector<ggml_type> types;
    std::vector<int> attn_depths; // --attention
};

// The comma-separated items of s ("a,,b": three; a trailing comma adds none).
static std::vector<std::string> comma_items(const char * s) {
    std::vector<std::string> out;
    for (const char * p = s; *p;) {
        const char * e = p;
        while (*e && *e != ',') ++e;
        out.emplace_back(p, e);
        p = *e ? e + 1 : e;
    }
    return out;
}

// The command line into *o; false (after a message) on a bad one.
static bool parse_options(int argc, char ** argv, bench_options * o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") o->reps = 2;
        else if (a == "--matvec-only") o->matvec_only = true;
        else if (a == "--cpu-time") g_cpu_time = true;
        else if (a == "--reps" && i + 1 < argc) o->reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--attention" && i + 1 < argc) {
            for (const std::string & t : comma_items(argv[++i]))
                o->attn_depths.push_back(std::max(0, std::atoi(t.c_str())));
        } else if (a == "--shape" && i + 1 < argc) {
            long long k, n, m;
            if (std::sscanf(argv[++i], "%lld,%lld,%lld", &k, &n, &m) != 3 || k < 1 || n < 1 || m < 1) {
                std::fprintf(stderr, "--shape wants K,N,M\n");
                return false;
            }
            o->shapes.push_back({k, n, m});
        } else if (a == "--types" && i + 1 < argc) {
            for (const std::string & t : comma_items(argv[++i])) o->types.push_back(type_by_name(t));
        } else if (a == "--threads" && i + 1 < argc) {
            o->threads.clear();
            for (const std::string & t : comma_items(argv[++i])) o->threads.push_back(std::max(1, std::atoi(t.c_str())));
        } else {
            std::fprintf(stderr,
                         "usage: %s [--quick] [--reps N] [--threads 1,2] [--matvec-only] [--cpu-time] "
                         "[--shape K,N,M ...] [--types f32,f16,...] [--attention DEPTH,...]\n",
                         argv[0]);
            return false;
        }
    }
    return true;
}

// The kernel path, the load average and the clock: what the figures below depend on.
static void print_conditions() {
    static const char * const path_names[] = {"scalar", "avx2", "avx512", "avx512vnni", "avx512bf16"};
    const ggml_cpu_features path = ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    std::printf("kernels: %s (KVG_CPU_FEATURES caps it)%s\n", path_names[path],
#ifdef KVG_BENCH_ROUTED_BLAS
                "; built with KVG_OPENBLAS: f32 products with >= 32 rows go through OpenBLAS"
#else
                ""
#endif
    );
    double load[3] = {0, 0, 0};
    if (FILE * f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = 0;
        std::fclose(f);
    }
    const unsigned n_cpu = std::thread::hardware_concurrency();
    std::printf("load average %.1f on %u CPUs%s\n", load[0], n_cpu,
                load[0] > n_cpu ? " -- machine busy: every figure is the best of many short runs, and still noisy" : "");
    std::printf("timing: %s\n", g_cpu_time ? "process CPU time / threads (--cpu-time)" : "wall clock");
}

static const ggml_type section_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
static const int64_t section_K = 4096, section_N = 14336;

// Matrix-vector products of each type (section_types, then --types) from DRAM, as a share of
// the streaming read.
static void matvec_section(const bench_options & o, read_pool & pool) {
    std::vector<ggml_type> types(std::begin(section_types), std::end(section_types));
    for (ggml_type t : o.types)
        if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    const int nt = (int) o.threads.size();
    char b1[16];
    std::printf("\n== matvec: %lld x %lld weights times one vector: GB/s of weights, as a fraction of streaming\n"
                "   reads of the same size (weights rotate over copies so that every run reads them from DRAM)\n",
                (long long) section_K, (long long) section_N);
    const int n_types = (int) types.size();
    std::vector<std::vector<double>> mv_time(nt, std::vector<double>(n_types));
    for (int ti = 0; ti < n_types; ++ti) {
        const ggml_type t = types[ti];
        const size_t wbytes = ggml_row_size(t, section_K) * section_N;
        const int copies = (int) std::max<size_t>(1, ((size_t) 256 << 20) / wbytes); // >= 256 MiB streamed per cycle
        std::printf("  %-5s %6.1f MiB:", ggml_type_name(t), wbytes / 1048576.0);
        for (int i = 0; i < nt; ++i) {
            const mm_result r = time_mul_mat(t, section_K, section_N, 1, o.threads[i], copies, std::max(o.reps * 6, copies * 3), &pool);
            const double rd = wbytes / r.read_seconds / 1e9;
            mv_time[i][ti] = r.seconds;
            const double gbs = r.weight_bytes / r.seconds / 1e9;
            std::printf("   %d thr %5.1f GB/s %s of %5.1f (%.2f ms)", o.threads[i], gbs, pct(gbs / rd, b1), rd, r.seconds * 1e3);
        }
        std::printf("\n");
    }
    for (int i = 0; i < nt; ++i) {
        std::printf("  %d thr: q4_0 matvec %.2fx faster than f32, q8_0 %.2fx, f16 %.2fx\n", o.threads[i],
                    mv_time[i][0] / mv_time[i][3], mv_time[i][0] / mv_time[i][2], mv_time[i][0] / mv_time[i][1]);
    }
}

// Products with 32-512 activation rows against the FMA peak; returns f32's GFLOP/s at 512 rows per thread count.
static std::vector<double> matmul_section(const bench_options & o, const std::vector<double> & peak) {
    const int nt = (int) o.threads.size();
    const int64_t K = section_K;
    char b1[16];
    std::printf("\n== matmul: %lld x %lld weights times N rows (GFLOP/s, fraction of FMA peak)\n", (long long) K, (long long) K);
    std::vector<double> f32_512(nt, 0);
    for (const ggml_type t : section_types) {
        for (const int64_t M : {32, 128, 512}) {
            std::printf("  %-5s N=%-4lld:", ggml_type_name(t), (long long) M);
            for (int i = 0; i < nt; ++i) {
                const mm_result r = time_mul_mat(t, K, K, M, o.threads[i], 1, std::max(2, o.reps / 2 + 1));
                const double gf = 2.0 * K * K * M / r.seconds / 1e9;
                if (t == GGML_TYPE_F32 && M == 512) f32_512[i] = gf;
                std::printf("   %d thr %7.1f GFLOP/s %s", o.threads[i], gf, pct(gf / peak[i], b1));
            }
            std::printf("\n");
        }
    }
    return f32_512;
}

// OpenBLAS's sgemm beside our f32 products, where the build found it.
static void blas_section(const bench_options & o, const std::vector<double> & peak, const std::vector<double> & f32_512) {
#ifdef KVG_BENCH_OPENBLAS
    char b1[16], b2[16];
    std::printf("\n== OpenBLAS sgemm (GFLOP/s)\n");
    for (size_t i = 0; i < o.threads.size(); ++i) {
        const double g2048 = time_sgemm(2048, 2048, 2048, o.threads[i], std::max(2, o.reps / 2 + 1));
        const double gshape = time_sgemm(512, 4096, 4096, o.threads[i], std::max(2, o.reps / 2 + 1));
        std::printf("  %d thr: 2048^3 %7.1f (%s of peak)   4096x4096x512 %7.1f   ours f32 N=512 / OpenBLAS = %s\n",
                    o.threads[i], g2048, pct(g2048 / peak[i], b1), gshape, pct(f32_512[i] / gshape, b2));
    }
#else
    (void) o, (void) peak, (void) f32_512;
    std::printf("\n(OpenBLAS not found at build time: no sgemm reference)\n");
#endif
}

// --attention: a prompt's flash attention at each depth, f16 and q8_0 caches, against the FMA peak.
static void attention_section(const bench_options & o) {
    std::printf(
        "\n== flash_attn_ext: 512 query rows (32 heads, 4 KV heads of 64), causal, after DEPTH cached positions:\n"
        "   GFLOP/s (2 x 2 x 64 per head and visible position) and the fraction of the FMA peak\n");
    char b1[16];
    for (int t : o.threads) {
        const double peak = measure_fma_peak(t, o.reps * 10);
        std::printf("  %d thread(s): FMA peak %7.1f GFLOP/s\n", t, peak);
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
            for (int d : o.attn_depths) {
                double flops = 0;
                const double s = time_attention(kv, d, t, o.reps, &flops);
                std::printf("    %-4s depth %5d: %8.2f ms %7.1f GFLOP/s %s\n", ggml_type_name(kv), d, s * 1e3,
                            flops / s / 1e9, pct(flops / s / 1e9 / peak, b1));
            }
        }
    }
}

int main(int argc, char ** argv) {
    bench_options o;
    if (!parse_options(argc, argv, &o)) return 1;
    print_conditions();
    if (!o.shapes.empty()) {
        if (o.types.empty()) o.types = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
        run_shapes(o.shapes, o.types, o.threads, o.reps);
        return 0;
    }
    if (!o.attn_depths.empty()) {
        attention_section(o);
        return 0;
    }
    read_pool pool((size_t) 768 << 20);
    std::vector<double> peak;
    std::printf("\n== machine limits\n");
    for (int t : o.threads) {
        const double bw = measure_read_bw(pool, (size_t) 256 << 20, t, o.reps * 3);
        peak.push_back(measure_fma_peak(t, o.reps * 10));
        std::printf("  %d thread(s): streaming read %6.1f GB/s   FMA peak %7.1f GFLOP/s\n", t, bw, peak.back());
    }
    matvec_section(o, pool);
    if (o.matvec_only) return 0;
    const std::vector<double> f32_512 = matmul_section(o, peak);
    blas_section(o, peak, f32_512);
    return 0;
}
