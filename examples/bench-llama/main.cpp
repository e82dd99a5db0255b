// kvg-bench: llama-bench-style speed of the runtime.
//
//   kvg-bench -m ../shared/models/stories260K.bin -t 1,2 --kv-type f32,f16 -r 5
//
// pp N: N prompt tokens decoded in one batch at position 0 (tok/s).
// tg N: N tokens decoded one per step from position 0 (tok/s); next to it the bytes one token
// reads (every matrix; the embedding table only when it is also the output; the cache rows
// attention reads, depth.h), the
// rate that makes (GB/s), and that rate as a share of the streaming-read bandwidth measured
// with the same thread count right after each repetition (mean of those; the limit token
// generation runs into), over
// 2 MiB pages where the kernel gives them (4 KiB pages read ~25% slower on Zen 4: --mmap 0
// copies the weights into such pages, a mapped file stays on 4 KiB ones).
// pp rows print GFLOP/s (pp_flops: the layer matrices for every token, the output matrix for
// the last one, causal attention) and that as a share of a compute peak measured in the same
// run with the same thread count (peak.h): f32 FMA for f32/f16/bf16 weights, int8 dot
// products for quantized ones (the kernels' own work: the activations go to 8 bits), bf16
// dot products (vdpbf16ps) for bf16 weights where the AVX-512 BF16 path runs them.
// -d N[,N...]: the pp and tg rows again after N tokens are in the cache ("pp512 @ d4096",
// depth.h); the context then holds the deepest N plus the longer test, within the model's
// context length (kvgraph refuses a longer one: use a file whose context_length is larger).
// Each test runs once to warm up (graphs built, pages mapped), then -r times: mean ± stddev.
// KV write: the cost of writing one token's K and V rows (all layers) into the cache at
// positions 64, 256, 1024, ... up to n_ctx, timed alone with a graph of just the set_rows
// ops; it should not depend on the position. Next to it the whole decode step at that
// position, which does grow (attention reads all earlier rows).
//
// --kv-modes: KV bytes and tok/s per cache mode (linear, ring past its window, N
// sequences decoded in one batch per step: aggregate tok/s), per KV type.
// --kv-scaling: one decode step at a fixed cache capacity (-c, default 4096) with valid
// lengths 64..capacity: padding-free attention (valid length as input) next to the same
// graph reading the whole capacity under the mask, and the bucketed graph (slots rounded
// up to 256, the mask hides the rest); median and minimum of -r samples.
// --stream-only: that streaming-read bandwidth alone, per -t (scripts/bench-vs-peers.sh reads
// it around each peer's tg run).
// --residency: resident memory (/proc/self/statm) of a long cache (--residency-ctx,
// default 32768) after 10%, 50% and 100% of it is written by the decode graph's write
// path (set_rows), next to a static cache that commits everything at creation.
#include "kvgraph.h"

#include "batched.h"
#include "depth.h"
#include "ggml-cpu.h"
#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"
#include "peak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <memory>
#include <thread>
#include <vector>

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static std::vector<std::string> split(const std::string & s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        const size_t e = s.find(',', b);
        out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
    }
    return out;
}

static void mean_std(const std::vector<double> & v, double * mean, double * sd) {
    double s = 0, s2 = 0;
    for (double x : v) s += x;
    *mean = s / v.size();
    for (double x : v) s2 += (x - *mean) * (x - *mean);
    *sd = v.size() > 1 ? std::sqrt(s2 / (v.size() - 1)) : 0.0;
}

static std::vector<kvg_token> random_tokens(int n, int n_vocab, uint32_t seed) {
    std::vector<kvg_token> t(n);
    for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (kvg_token) ((seed >> 8) % (uint32_t) n_vocab);
    }
    return t;
}

struct Options {
    std::vector<std::string> models;
    std::vector<int> threads = {1};
    std::vector<kvg_kv_type> kv_types = {KVG_KV_F32};
    std::vector<int> depths = {0}; // -d: tokens in the cache before the pp and tg rows
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    int reps = 5, n_pp = 128, n_tg = 128, n_ctx = 0;
    bool kv_write = true;
    bool use_mmap = true; // --mmap 0: weights read into (huge-page) memory, as llama-bench's -mmp 0
    bool repack = true;   // --repack 0: q4_0/q8_0 matrices kept as in the file (kvg_model_params.repack)
    bool f16_as_bf16 = false; // --f16-as-bf16 1: f16 matrices rounded to bf16 at load (kvg_model_params.f16_as_bf16)
    bool kv_modes = false, kv_scaling = false, residency = false, only_kv = false;
    bool stream_only = false; // --stream-only: the streaming-read yardstick alone, per -t
    int residency_ctx = 32768;
    bool kv_types_set = false; // --kv-type given (the batched table defaults to f16, as llama-batched-bench)
    BatchedOptions batched;    // -npl/-npp/-ntg/-pps: the batched table instead of the others (batched.h)
};

static const char * kv_name(kvg_kv_type t) { return t == KVG_KV_F16 ? "f16" : t == KVG_KV_Q8_0 ? "q8_0" : "f32"; }
static ggml_type kv_ggml_type(kvg_kv_type t) {
    return t == KVG_KV_F16 ? GGML_TYPE_F16 : t == KVG_KV_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32;
}

static bool bench_kv_write(const std::string & path, kvg_model * model, kvg_kv_type kv_type, int n_threads, int n_ctx,
                           const Options & opt) {
    std::string e;
    kvg::LoadOptions lo;
    auto m = kvg::load_model(path, "", lo, &e);
    kvg::KvCache kv;
    if (!m || !kv.init(m->hp, n_ctx, kv_ggml_type(kv_type), &e)) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    auto wg = kvg::build_kv_write_graph(kv, &e);
    if (!wg) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    for (int64_t i = 0; i < wg->inp_rows->ne[0]; ++i) ((float *) wg->inp_rows->data)[i] = 0.001f * (float) i;
    std::vector<uint8_t> work;

    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    cp.kv_type = kv_type;
    cp.attn = opt.attn;
    char err[512];
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err);
        return false;
    }
    std::vector<int> positions;
    for (int p = 64; p < n_ctx; p *= 4) positions.push_back(p);
    positions.push_back(n_ctx - 1);
    const std::vector<kvg_token> fill = random_tokens(n_ctx, kvg_model_n_vocab(model), 7);

    printf("\nKV write cost: %s, kv %s, %d thread(s), n_ctx %d (one token: K and V rows of %d layers)\n", path.c_str(),
           kv_name(kv_type), n_threads, n_ctx, (int) kv.n_layer());
    printf("| %8s | %20s | %20s |\n", "position", "KV write us/token", "decode step ms");
    printf("| %8s | %20s | %20s |\n", "-------:", "-----------------:", "-----------------:");
    for (int pos : positions) {
        // the write alone
        wg->set_positions(kv, pos);
        const int iters = 2000;
        std::vector<double> runs;
        for (int r = 0; r < opt.reps; ++r) {
            const double t0 = now_s();
            for (int it = 0; it < iters; ++it) {
                ggml_cplan plan = ggml_graph_plan(wg->gf, n_threads, nullptr);
                if (plan.work_size > work.size()) work.resize(plan.work_size);
                plan.work_data = work.data();
                ggml_graph_compute(wg->gf, &plan);
            }
            runs.push_back((now_s() - t0) / iters * 1e6);
        }
        double w_mean, w_sd;
        mean_std(runs, &w_mean, &w_sd);

        // a whole decode step with pos earlier positions in the cache
        if (kvg_n_past(ctx) < pos && !kvg_decode(ctx, fill.data() + kvg_n_past(ctx), pos - kvg_n_past(ctx),
                                                 kvg_n_past(ctx), err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            kvg_context_free(ctx);
            return false;
        }
        runs.clear();
        kvg_decode(ctx, &fill[pos], 1, pos, err, sizeof err); // warm-up (graph of this bucket)
        const int steps = 20; // per sample: single steps are too short to time alone
        for (int r = 0; r < opt.reps; ++r) {
            const double t0 = now_s();
            for (int it = 0; it < steps; ++it) kvg_decode(ctx, &fill[pos], 1, pos, err, sizeof err);
            runs.push_back((now_s() - t0) * 1e3 / steps);
        }
        double d_mean, d_sd;
        mean_std(runs, &d_mean, &d_sd);
        printf("| %8d | %11.3f ± %6.3f | %11.3f ± %6.3f |\n", pos, w_mean, w_sd, d_mean, d_sd);
    }
    kvg_context_free(ctx);
    return true;
}

// ---- KV modes: bytes and speed ----------------------------------------------------------------------------

// Aggregate tok/s of n_seq sequences generating n_gen tokens each, one batch per step; -1 on error.
static double run_batched(kvg_context * ctx, int n_seq, int n_gen, int n_vocab) {
    char err[512];
    std::vector<kvg_token> t = random_tokens(n_seq, n_vocab, 3);
    std::vector<int32_t> pos(n_seq), seq(n_seq);
    for (int s = 0; s < n_seq; ++s) seq[s] = s;
    const double t0 = now_s();
    for (int i = 0; i < n_gen; ++i) {
        std::fill(pos.begin(), pos.end(), i);
        if (!kvg_decode_batch(ctx, t.data(), pos.data(), seq.data(), n_seq, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
        for (int s = 0; s < n_seq; ++s) t[s] = kvg_argmax(kvg_get_logits(ctx, s), n_vocab);
    }
    return (double) n_seq * n_gen / (now_s() - t0);
}

static bool bench_kv_modes(const std::string & path, kvg_model * model, const Options & opt) {
    const int n_ctx = opt.n_ctx > 0 ? std::min(opt.n_ctx, kvg_model_n_ctx_train(model)) : std::min(kvg_model_n_ctx_train(model), 4096);
    const int n_tg = std::min(opt.n_tg, n_ctx), n_vocab = kvg_model_n_vocab(model);
    struct Mode {
        std::string name;
        kvg_kv_mode mode;
        int n_ctx, n_seq, n_window, n_sink, n_gen;
    };
    const int win = std::max(8, std::min(64, n_ctx / 4));
    const std::vector<Mode> modes = {
        {"linear", KVG_KV_LINEAR, n_ctx, 1, 0, 0, n_tg},
        {"ring W=" + std::to_string(win) + "+4 sinks", KVG_KV_RING, win + 4 + 16, 1, win, 4, 4 * n_tg},
        {"parallel 4", KVG_KV_LINEAR, n_ctx, 4, 0, 0, n_tg},
        {"parallel 8", KVG_KV_LINEAR, n_ctx, 8, 0, 0, n_tg},
    };
    printf("\nKV modes: %s, %d thread(s); tokens generated per sequence after one token, t/s aggregate over sequences\n",
           path.c_str(), opt.threads.front());
    printf("| %-22s | %4s | %12s | %12s | %6s | %20s |\n", "mode", "kv", "slots x seqs", "KV bytes", "tokens", "t/s");
    printf("| %-22s | %4s | %12s | %12s | %6s | %20s |\n", "---", "---", "---:", "---:", "---:", "---:");
    bool all_ok = true; // a failed mode is reported and the others still run
    for (kvg_kv_type kt : opt.kv_types) {
        for (const Mode & md : modes) {
            kvg_context_params cp = kvg_context_default_params();
            cp.n_ctx = md.n_ctx;
            cp.n_threads = opt.threads.front();
            cp.kv_type = kt;
            cp.attn = opt.attn;
            cp.n_seq_max = md.n_seq;
            cp.kv_mode = md.mode;
            cp.n_window = md.n_window;
            cp.n_sink = md.n_sink;
            char err[512];
            kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
            if (!ctx) {
                fprintf(stderr, "error: %s: %s\n", md.name.c_str(), err);
                all_ok = false;
                continue;
            }
            std::vector<double> ts;
            bool ok = run_batched(ctx, md.n_seq, md.n_gen, n_vocab) > 0; // warm-up
            for (int r = 0; ok && r < opt.reps; ++r) {
                ts.push_back(run_batched(ctx, md.n_seq, md.n_gen, n_vocab));
                ok = ts.back() > 0;
            }
            if (ok) {
                double mean, sd;
                mean_std(ts, &mean, &sd);
                const std::string shape = std::to_string(md.n_ctx) + " x " + std::to_string(md.n_seq);
                printf("| %-22s | %4s | %12s | %12zu | %6d | %11.2f ± %6.2f |\n", md.name.c_str(), kv_name(kt), shape.c_str(),
                       kvg_kv_cache_bytes(ctx), md.n_gen, mean, sd);
                fflush(stdout);
            }
            all_ok &= ok;
            kvg_context_free(ctx);
        }
    }
    return all_ok;
}

// ---- padding-free attention: time per token vs valid length at a fixed capacity -----------------

// Writes positions [first, last) of every K and V with the write graph (n rows per run; a
// range shorter than n writes n rows from first). Grouped K: whole groups from the one of
// `first`, so up to 31 positions past `last`.
static void write_rows(kvg::KvCache & kv, kvg::KvWriteGraph & wg, int64_t first, int64_t last, int n_threads,
                       std::vector<uint8_t> & work) {
    const int64_t n = wg.n_rows();
    if (kv.grouped()) first = first / n * n;
    for (int64_t r = first; r < last; r += n) {
        // last run: rewrite some rows, never pass `last`
        const int64_t b = kv.grouped() ? r : std::max<int64_t>(0, std::max(first, std::min(r, last - n)));
        wg.set_positions(kv, b);
        ggml_cplan plan = ggml_graph_plan(wg.gf, n_threads, nullptr);
        if (plan.work_size > work.size()) work.resize(plan.work_size);
        plan.work_data = work.data();
        ggml_graph_compute(wg.gf, &plan);
    }
}

static bool bench_kv_scaling(const std::string & path, kvg_kv_type kt, const Options & opt) {
    std::string e;
    auto m = kvg::load_model(path, "", kvg::LoadOptions(), &e);
    const int cap = opt.n_ctx > 0 ? opt.n_ctx : 4096, n_threads = opt.threads.front();
    kvg::KvCache kv;
    if (!m || !kv.init(m->hp, cap, kv_ggml_type(kt), &e)) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    auto wg = kvg::build_kv_write_graph(kv, &e, std::min(cap, 256));
    if (!wg) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    uint32_t seed = 9;
    for (int64_t i = 0; i < ggml_nelements(wg->inp_rows); ++i) { // rows of small varied values
        seed = seed * 1664525u + 1013904223u;
        ((float *) wg->inp_rows->data)[i] = (float) ((seed >> 9) % 2001) / 1000.0f - 1.0f;
    }
    std::vector<uint8_t> work;
    kvg::GraphShape shape;
    shape.n_tokens = 1;
    shape.n_kv = cap;
    auto padding_free = kvg::build_llama_graph(*m, kv, shape, &e);
    shape.kv_len = false;
    auto mask_only = kvg::build_llama_graph(*m, kv, shape, &e);
    if (!padding_free || !mask_only) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    // ms per decode step of g (one token at position pos): median and minimum over reps
    // samples (robust on a shared machine, where other work inflates the mean)
    auto time_step = [&](kvg::LlamaGraph & g, const kvg::Ubatch & ub, double * median, double * best) {
        g.set_inputs(0, ub, kv);
        std::vector<double> runs;
        const int steps = 20;
        for (int r = -1; r < opt.reps; ++r) { // r = -1: warm-up
            const double t0 = now_s();
            for (int i = 0; i < steps; ++i) {
                ggml_cplan plan = ggml_graph_plan(g.gf, n_threads, nullptr);
                if (plan.work_size > work.size()) work.resize(plan.work_size);
                plan.work_data = work.data();
                ggml_graph_compute(g.gf, &plan);
            }
            if (r >= 0) runs.push_back((now_s() - t0) * 1e3 / steps);
        }
        std::sort(runs.begin(), runs.end());
        *median = runs[runs.size() / 2];
        *best = runs.front();
    };
    printf("\nPadding-free attention: %s, kv %s, %d thread(s), capacity %d slots: ms per decoded token, median (min) of %d\n",
           path.c_str(), kv_name(kt), n_threads, cap, opt.reps);
    printf("| %12s | %20s | %20s | %20s |\n", "valid length", "padding-free", "mask-only (capacity)", "bucketed (256)");
    printf("| %12s | %20s | %20s | %20s |\n", "---:", "---:", "---:", "---:");
    std::vector<int> lengths;
    for (int l = 64; l < cap; l *= 4) lengths.push_back(l);
    lengths.push_back(cap);
    int filled = 0;
    for (int len : lengths) {
        write_rows(kv, *wg, filled, len - 1, n_threads, work); // earlier positions; the step writes len - 1
        for (int p = filled; p < len; ++p) kv.apply(0, p);
        filled = len - 1;
        kvg::Ubatch ub;
        ub.tokens = {5};
        ub.pos = {len - 1};
        ub.seq = {0};
        ub.output = {1};
        shape.n_kv = std::min(cap, GGML_PAD(len, 256));
        auto bucketed = kvg::build_llama_graph(*m, kv, shape, &e);
        if (!bucketed) {
            fprintf(stderr, "error: %s\n", e.c_str());
            return false;
        }
        double pf, pf_sd, mo, mo_sd, bu, bu_sd;
        time_step(*padding_free, ub, &pf, &pf_sd);
        time_step(*mask_only, ub, &mo, &mo_sd);
        time_step(*bucketed, ub, &bu, &bu_sd);
        printf("| %12d | %9.3f (%8.3f) | %9.3f (%8.3f) | %9.3f (%8.3f) |\n", len, pf, pf_sd, mo, mo_sd, bu, bu_sd);
        fflush(stdout);
    }
    return true;
}

// ---- residency -----------------------------------------------------------------------------------

static long resident_pages() {
    std::ifstream f("/proc/self/statm");
    long size = 0, resident = 0;
    f >> size >> resident;
    return resident;
}

static bool bench_residency(const std::string & path, const Options & opt) {
    std::string e;
    auto m = kvg::load_model(path, "", kvg::LoadOptions(), &e);
    if (!m) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return false;
    }
    const int n = opt.residency_ctx, n_threads = opt.threads.front();
    const double page = (double) sysconf(_SC_PAGESIZE), MiB = 1024.0 * 1024.0;
    printf("\nKV cache residency: %s, one sequence of %d positions; resident memory from /proc/self/statm (MiB)\n",
           path.c_str(), n);
    printf("| %4s | %10s | %14s | %16s | %10s | %10s | %10s |\n", "kv", "KV MiB", "static cache", "dynamic, empty", "10%",
           "50%", "100%");
    printf("| %4s | %10s | %14s | %16s | %10s | %10s | %10s |\n", "---", "---:", "---:", "---:", "---:", "---:", "---:");
    std::vector<uint8_t> work;
    for (kvg_kv_type kt : opt.kv_types) {
        kvg::KvCacheParams p;
        p.n_ctx = n;
        p.type = kv_ggml_type(kt);
        double static_mib;
        {
            p.commit = true;
            const long before = resident_pages();
            kvg::KvCache st;
            if (!st.init(m->hp, p, &e)) {
                fprintf(stderr, "error: %s\n", e.c_str());
                return false;
            }
            static_mib = (resident_pages() - before) * page / MiB;
        }
        p.commit = false;
        kvg::KvCache kv;
        const long before = resident_pages();
        const bool made = kv.init(m->hp, p, &e);
        const double created = (resident_pages() - before) * page / MiB; // before the write graph's buffers
        auto wg = made ? kvg::build_kv_write_graph(kv, &e, std::min(n, 256)) : nullptr;
        if (!wg) {
            fprintf(stderr, "error: %s\n", e.c_str());
            return false;
        }
        for (int64_t i = 0; i < ggml_nelements(wg->inp_rows); ++i) ((float *) wg->inp_rows->data)[i] = 0.5f;
        const long base = resident_pages(); // graph buffers touched, no row written yet
        double at[3];
        int filled = 0, k = 0;
        for (int pct : {10, 50, 100}) {
            const int target = (int) ((int64_t) n * pct / 100);
            write_rows(kv, *wg, filled, target, n_threads, work);
            filled = target;
            at[k++] = (resident_pages() - base) * page / MiB;
        }
        printf("| %4s | %10.2f | %14.2f | %16.2f | %10.2f | %10.2f | %10.2f |\n", kv_name(kt), kv.bytes() / MiB, static_mib,
               created, at[0], at[1], at[2]);
        fflush(stdout);
    }
    return true;
}

// Streaming-read bandwidth with n threads: each sums its share of a 1 GiB buffer, far larger
// than the caches; best of `passes` passes, GB/s. The yardstick of tg rows.
static double stream_gbps(int n_threads, int passes) {
    const size_t words = (size_t) 1 << 27; // 1 GiB
    static uint64_t * buf = nullptr;
    if (!buf) {
        void * p = mmap(nullptr, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 0;
        madvise(p, words * 8, MADV_HUGEPAGE); // a hint: without transparent huge pages, 4 KiB pages
        buf = (uint64_t *) p;
        std::fill(buf, buf + words, (uint64_t) 1);
    }
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) {
        std::vector<uint64_t> sums((size_t) n_threads * 8, 0);
        const double t0 = now_s();
        std::vector<std::thread> th;
        for (int t = 0; t < n_threads; ++t) {
            th.emplace_back([&, t] {
                const size_t b = words * t / n_threads, e = words * (t + 1) / n_threads;
                // 8 chains and a software prefetch 4 KiB ahead, as the matvec kernels stream
                uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (size_t i = b; i + 8 <= e; i += 8) {
                    __builtin_prefetch(&buf[std::min(i + 512, words - 1)]);
                    for (int k = 0; k < 8; ++k) acc[k] += buf[i + k];
                }
                uint64_t total = 0;
                for (uint64_t a : acc) total += a;
                sums[(size_t) t * 8] = total;
            });
        }
        for (auto & x : th) x.join();
        const double dt = now_s() - t0;
        uint64_t total = 0;
        for (uint64_t v : sums) total += v;
        if (total != words) fprintf(stderr, "stream: bad sum\n"); // keeps the reads alive
        best = std::max(best, (double) words * 8 / dt / 1e9);
    }
    return best;
}

// What one model's tokens cost, from its weights.
struct ModelWork {
    double bytes_per_token = 0; // tg: every matrix and norm, the embedding table only when it is
                                // also the output projection (else one row of it)
    double layer_weights = 0;   // elements of the layers' matrices (q k v o, gate up down)
    double output_weights = 0;  // elements of the output projection
    int n_embd = 0, n_layer = 0;
    double kv_elems = 0;        // K and V elements of one cached position, all layers
    bool quantized = false;     // a layer matrix in a block type (else f32, f16 or bf16)
    bool bf16 = true;           // every layer matrix bf16
};

// f16_as_bf16: the f16 matrices count as the bf16 they are rounded to (round_f16_weights).
static ModelWork model_work(const std::string & path, bool f16_as_bf16) {
    ModelWork w;
    std::string err;
    const auto m = kvg::load_model(path, "", kvg::LoadOptions(), &err);
    if (!m) return w;
    for (const ggml_tensor * t : m->tensors()) {
        if (t == m->tok_embd && m->output != m->tok_embd) w.bytes_per_token += (double) t->nb[1];
        else w.bytes_per_token += (double) ggml_nbytes(t);
    }
    for (const kvg::LayerWeights & l : m->layers) {
        for (const ggml_tensor * t : l.matrices()) {
            w.layer_weights += (double) ggml_nelements(t);
            w.quantized |= t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16;
            w.bf16 &= t->type == GGML_TYPE_BF16 || (t->type == GGML_TYPE_F16 && f16_as_bf16 && kvg::rounds_f16_to_bf16());
        }
    }
    w.output_weights = m->output ? (double) ggml_nelements(m->output) : 0.0;
    w.n_embd = m->hp.n_embd_q(); // the width attention works in (n_embd unless the head size is set apart)
    w.n_layer = m->hp.n_layer;
    w.kv_elems = 2.0 * (double) m->hp.n_embd_kv() * m->hp.n_layer;
    return w;
}

// FLOPs of one pp batch of n tokens from position 0: 2 per weight of every layer matrix and
// token, the output projection once (only the last token's logits are computed), and causal
// attention: QK^T and PV over the depth + i + 1 positions token i sees, 2 * n_embd * n *
// (n + 1 + 2 * depth) per layer. Norms, RoPE, softmax, SwiGLU and residual adds are not counted.
static double pp_flops(const ModelWork & w, int n, int depth) {
    return 2.0 * (w.layer_weights * n + w.output_weights) + 2.0 * w.n_embd * n * (n + 1.0 + 2.0 * depth) * w.n_layer;
}

// The cells after t/s. tg rows: the weight and cache (kv_bytes) bytes a token reads, GB/s, and that as a share of
// the streaming-read bandwidth. pp rows: GFLOP/s (pp_flops) and its share of the compute
// peak that bounds it (f32 FMA for float weights, int8 dot products for quantized ones, bf16
// dot products for bf16 weights on the AVX-512 BF16 path).
// Both yardsticks are measured in this run with the row's thread count.
static std::string limit_cells(bool pp, double tok_s, int n_tokens, int depth, double kv_bytes, const ModelWork & w,
                               int nt, double stream) {
    char b[160];
    if (!pp) {
        const double bytes = w.bytes_per_token + kv_bytes, gbps = bytes * tok_s / 1e9;
        snprintf(b, sizeof b, "| %10.1f | %10.1f | %7.0f%% | %8s | %16s | %6s |", bytes / 1e6, gbps,
                 stream > 0 ? 100.0 * gbps / stream : 0.0, "", "", "");
        return b;
    }
    const double gflops = pp_flops(w, n_tokens, depth) * tok_s / n_tokens / 1e9;
    const bool bf16_path = w.bf16 && ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST) >= GGML_CPU_FEATURES_AVX512_BF16;
    const Peak peak = w.quantized ? int8_dot_peak(nt) : bf16_path ? bf16_dot_peak(nt) : fma_f32_peak(nt);
    char pk[64];
    snprintf(pk, sizeof pk, "%s %.0f", peak.kind, peak.rate);
    snprintf(b, sizeof b, "| %10s | %10s | %8s | %8.1f | %16s | %5.1f%% |", "", "", "", gflops, pk,
             peak.rate > 0 ? 100.0 * gflops / peak.rate : 0.0);
    return b;
}

// Milliseconds to read a file through read() in 1 MiB pieces (from the page cache once warm).
static double plain_read_ms(const std::string & path) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) return -1;
    std::vector<char> buf((size_t) 1 << 20);
    const double t0 = now_s();
    while (fread(buf.data(), 1, buf.size(), f) == buf.size()) {}
    fclose(f);
    return (now_s() - t0) * 1e3;
}

// Loads a model and says what loading cost next to a plain read of the file (--mmap 1 maps it,
// --mmap 0 copies it into huge pages; q4_0 matrices are rearranged unless --repack 0, f16 ones
// rounded to bf16 with --f16-as-bf16 1) and the
// resident memory it added against the file's size.
static kvg_model * timed_load(const std::string & path, const kvg_model_params & mp, std::string * report, char * err,
                              size_t err_size) {
    plain_read_ms(path); // warm the page cache: both timings below read from it
    const long rss0 = resident_pages();
    const double t0 = now_s();
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, mp, err, err_size);
    const double load_ms = (now_s() - t0) * 1e3;
    if (!m) return nullptr;
    const double rss_mb = (double) (resident_pages() - rss0) * (double) sysconf(_SC_PAGESIZE) / 1e6;
    const double read_ms = plain_read_ms(path);
    FILE * f = fopen(path.c_str(), "rb");
    double file_mb = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) file_mb = (double) ftell(f) / 1e6;
    if (f) fclose(f);
    char b[256];
    snprintf(b, sizeof b, "load (--mmap %d): %.0f ms, a plain read of the file %.0f ms (%.2fx); resident memory +%.0f MB, file %.0f MB\n",
             mp.use_mmap ? 1 : 0, load_ms, read_ms, read_ms > 0 ? load_ms / read_ms : 0.0, rss_mb, file_mb);
    *report = b;
    return m;
}

// One model's rows of the pp/tg table; false (message printed) on an error. The model and
// contexts are owned by unique_ptrs, so no error path leaks them.
static bool bench_table(const std::string & path, const Options & opt) {
    using model_ptr = std::unique_ptr<kvg_model, void (*)(kvg_model *)>;
    using ctx_ptr = std::unique_ptr<kvg_context, void (*)(kvg_context *)>;
    char err[1024];
    kvg_model_params mp = kvg_model_default_params();
    mp.use_mmap = opt.use_mmap;
    mp.repack = opt.repack;
    mp.f16_as_bf16 = opt.f16_as_bf16;
    std::string load_report;
    model_ptr model(timed_load(path, mp, &load_report, err, sizeof err), kvg_model_free);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return false;
    }
    int n_ctx = opt.n_ctx > 0 ? std::min(opt.n_ctx, kvg_model_n_ctx_train(model.get()))
                              : std::min(kvg_model_n_ctx_train(model.get()), 4096);
    const int n_pp = std::min(opt.n_pp, n_ctx), n_tg = std::min(opt.n_tg, n_ctx);
    const int need = depth_ctx(opt.depths, n_pp, n_tg);
    if (need > kvg_model_n_ctx_train(model.get())) {
        fprintf(stderr,
                "error: depth %d needs a context of %d, the model's context length is %d (kvgraph refuses more)\n",
                need - std::max(n_pp, n_tg), need, kvg_model_n_ctx_train(model.get()));
        return false;
    }
    n_ctx = std::max(n_ctx, need);
    const std::vector<kvg_token> pp_toks = random_tokens(n_pp, kvg_model_n_vocab(model.get()), 1);
    const std::vector<kvg_token> tg_toks = random_tokens(n_tg, kvg_model_n_vocab(model.get()), 2);
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const ModelWork work = model_work(path, opt.f16_as_bf16);
    for (kvg_kv_type kt : opt.kv_types) {
        for (int nt : opt.threads) {
            kvg_context_params cp = kvg_context_default_params();
            cp.n_ctx = n_ctx;
            cp.n_threads = nt;
            cp.n_batch = need > std::max(n_pp, n_tg) ? std::max(n_pp, 512) : n_pp; // depth: fill in big chunks
            cp.kv_type = kt;
            cp.attn = opt.attn;
            ctx_ptr ctx(kvg_context_new(model.get(), cp, err, sizeof err), kvg_context_free);
            if (!ctx) {
                fprintf(stderr, "error: %s\n", err);
                return false;
            }
            for (size_t row = 0; row < 2 * opt.depths.size(); ++row) { // pp, tg at each depth
                const bool pp = row % 2 == 0;
                const int depth = opt.depths[row / 2];
                if (pp && !fill_to_depth(ctx.get(), depth, kvg_model_n_vocab(model.get()))) return false;
                auto run = [&]() {
                    return pp ? run_pp_at(ctx.get(), pp_toks, depth) : run_tg_at(ctx.get(), tg_toks, depth);
                };
                if (run() < 0) return false; // warm-up
                std::vector<double> ts, streams;
                for (int r = 0; r < opt.reps; ++r) {
                    const double t = run();
                    if (t < 0) return false;
                    ts.push_back(t);
                    // the yardstick read right after each repetition: a shared host's
                    // bandwidth drifts within a run (1 thread: 20-27 GB/s from one minute to the next)
                    if (!pp) streams.push_back(stream_gbps(nt, 2));
                }
                double mean, sd, stream = 0, stream_sd;
                mean_std(ts, &mean, &sd);
                if (!pp) mean_std(streams, &stream, &stream_sd);
                const std::string tname = test_name(pp, pp ? n_pp : n_tg, depth);
                const double kv_bytes = kv_read_bytes(kt, work.kv_elems, depth, n_tg);
                const std::string limit = limit_cells(pp, mean, pp ? n_pp : n_tg, depth, kv_bytes, work, nt, stream);
                printf("| %-24s | %4s | %6s | %7d | %6s | %11.2f ± %6.2f %s\n", name.c_str(), kv_name(kt),
                       opt.attn == KVG_ATTN_FLASH ? "flash" : "matmul", nt, tname.c_str(), mean, sd, limit.c_str());
                fflush(stdout);
            }
        }
    }
    printf("%s: %s", name.c_str(), load_report.c_str());
    return true;
}

// The command line into *opt; returns 0 to go on, else the exit status (1: error, 0: help).
static int parse_options(int argc, char ** argv, Options * out) {
    Options & opt = *out;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "-m" && has) opt.models.push_back(argv[++i]);
        else if (a == "-t" && has) {
            opt.threads.clear();
            for (const std::string & s : split(argv[++i])) opt.threads.push_back(std::max(1, atoi(s.c_str())));
        } else if (a == "--kv-type" && has) {
            opt.kv_types.clear();
            opt.kv_types_set = true;
            for (const std::string & s : split(argv[++i])) {
                if (s == "f32") opt.kv_types.push_back(KVG_KV_F32);
                else if (s == "f16") opt.kv_types.push_back(KVG_KV_F16);
                else if (s == "q8_0") opt.kv_types.push_back(KVG_KV_Q8_0);
                else {
                    fprintf(stderr, "error: unknown kv type '%s'\n", s.c_str());
                    return 1;
                }
            }
        } else if (a == "--attn" && has) {
            const std::string s = argv[++i];
            opt.attn = s == "matmul" ? KVG_ATTN_MATMUL : KVG_ATTN_FLASH;
        } else if (a == "-r" && has) opt.reps = std::max(1, atoi(argv[++i]));
        else if (a == "-p" && has) opt.n_pp = std::max(1, atoi(argv[++i]));
        else if (a == "-n" && has) opt.n_tg = std::max(1, atoi(argv[++i]));
        else if (a == "-c" && has) opt.n_ctx = std::max(1, atoi(argv[++i]));
        else if (a == "-d" && has) {
            opt.depths.clear();
            for (const std::string & s : split(argv[++i])) opt.depths.push_back(std::max(0, atoi(s.c_str())));
        } else if (a == "--no-kv-write") opt.kv_write = false;
        else if (a == "--mmap" && has) opt.use_mmap = atoi(argv[++i]) != 0;
        else if (a == "--repack" && has) opt.repack = atoi(argv[++i]) != 0;
        else if (a == "--f16-as-bf16" && has) opt.f16_as_bf16 = atoi(argv[++i]) != 0;
        else if (a == "--kv-modes") opt.kv_modes = true;
        else if (a == "--kv-scaling") opt.kv_scaling = true;
        else if (a == "--residency") opt.residency = true;
        else if (a == "--residency-ctx" && has) opt.residency_ctx = std::max(4096, atoi(argv[++i]));
        else if (a == "--only-kv") opt.only_kv = true;
        else if (a == "--stream-only") opt.stream_only = true;
        else if (const int used = parse_batched_arg(argc, argv, i, &opt.batched)) {
            if (used < 0) return 1;
            i += used - 1;
        } else {
            fprintf(
                stderr,
                "usage: %s -m MODEL [-m MODEL2 ...] [-t 1,2] [--kv-type f32,f16,q8_0] [--attn flash|matmul]\n"
                "          [-r REPS] [-p N_PROMPT] [-n N_GEN] [-c N_CTX] [-d DEPTH,...] [--no-kv-write]\n"
                "          [--mmap 0|1] [--repack 0|1] [--f16-as-bf16 0|1] [--kv-modes] [--kv-scaling]\n"
                "          [--residency [--residency-ctx N]] [--only-kv]\n"
                "       %s --stream-only [-t 1,2]\n"
                "  --only-kv: skip the pp/tg and KV write tables (run only the selected KV sections)\n"
                "  --stream-only: print the streaming-read bandwidth (GB/s, the tg rows' yardstick) per thread count\n",
                argv[0], argv[0]);
            fputs(BATCHED_USAGE, stderr);
            return a == "-h" || a == "--help" ? 0 : 1;
        }
    }
    return -1;
}

// The KV tables each model asked for; false when any of them failed (its message printed).
// Every section still runs: one failing does not hide the others' results.
static bool run_kv_sections(const Options & opt) {
    bool ok = true;
    for (const std::string & path : opt.models) {
        if (!opt.kv_write || opt.only_kv) break;
        char err[1024];
        kvg_model * model = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        if (!model) {
            fprintf(stderr, "error: %s\n", err);
            return false;
        }
        const int n_ctx = opt.n_ctx > 0 ? std::min(opt.n_ctx, kvg_model_n_ctx_train(model))
                                        : std::min(kvg_model_n_ctx_train(model), 4096);
        for (kvg_kv_type kt : opt.kv_types) ok &= bench_kv_write(path, model, kt, opt.threads.front(), n_ctx, opt);
        kvg_model_free(model);
    }
    for (const std::string & path : opt.models) {
        char err[1024];
        kvg_model * model = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        if (!model) {
            fprintf(stderr, "error: %s\n", err);
            return false;
        }
        if (opt.kv_modes) ok &= bench_kv_modes(path, model, opt);
        if (opt.kv_scaling) {
            for (kvg_kv_type kt : opt.kv_types) ok &= bench_kv_scaling(path, kt, opt);
        }
        if (opt.residency) ok &= bench_residency(path, opt);
        kvg_model_free(model);
    }
    return ok;
}

int main(int argc, char ** argv) {
    Options opt;
    const int status = parse_options(argc, argv, &opt);
    if (status >= 0) return status;
    if (opt.stream_only) {
        // the yardstick alone: a script measures it around a peer's run
        for (int nt : opt.threads) printf("stream %d threads: %.2f GB/s\n", nt, stream_gbps(nt, 3));
        return 0;
    }
    if (opt.models.empty()) {
        fprintf(stderr, "error: no model (-m)\n");
        return 1;
    }
    if (!opt.batched.npl.empty()) {
        opt.batched.repack = opt.repack;
        const std::vector<kvg_kv_type> kv = opt.kv_types_set ? opt.kv_types : std::vector<kvg_kv_type>{KVG_KV_F16};
        for (const std::string & path : opt.models) {
            if (!bench_batched(path, opt.batched, opt.threads, kv, opt.attn, opt.reps)) return 1;
        }
        return 0;
    }

    if (!opt.only_kv) {
        printf("| %-24s | %4s | %6s | %7s | %6s | %20s | %10s | %10s | %8s | %8s | %16s | %6s |\n", "model", "kv", "attn",
               "threads", "test", "t/s", "MB/token", "GB/s", "% stream", "GFLOP/s", "peak G(FL)OP/s", "% peak");
        printf("| %-24s | %4s | %6s | %7s | %6s | %20s | %10s | %10s | %8s | %8s | %16s | %6s |\n", "---", "---", "---",
               "------:", "---", "------------------:", "---------:", "---------:", "-------:", "-------:", "---------------:",
               "-----:");
    }
    for (const std::string & path : opt.models) {
        if (opt.only_kv) break;
        if (!bench_table(path, opt)) return 1;
    }
    if (!opt.only_kv) {
        printf("\npp GFLOP/s: 2 x layer matrix weights x tokens + the output matrix once + causal attention "
               "(QK, PV); peak: f32 FMA (float weights), bf16 dot products (bf16 weights on the AVX-512 BF16 path) or int8\n"
               "dot products (quantized), same threads, this run\n");
    }
    // after the table, so that it stays one table
    return run_kv_sections(opt) ? 0 : 1;
}
