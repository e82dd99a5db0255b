// kvg-bench: llama-bench-style speed of the runtime.
//
//   kvg-bench -m ../shared/models/stories260K.bin -t 1,2 --kv-type f32,f16 -r 5
//
// pp N: N prompt tokens decoded in one batch at position 0 (tok/s).
// tg N: N tokens decoded one per step from position 0 (tok/s).
// Each test runs once to warm up (graphs built, pages mapped), then -r times: mean ± stddev.
// KV write: the cost of writing one token's K and V rows (all layers) into the cache at
// positions 64, 256, 1024, ... up to n_ctx, timed alone with a graph of just the set_rows
// ops; it should not depend on the position. Next to it the whole decode step at that
// position, which does grow (attention reads all earlier rows).
#include "kvgraph.h"

#include "ggml-cpu.h"
#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    int reps = 5, n_pp = 128, n_tg = 128, n_ctx = 0;
    bool kv_write = true;
};

// tok/s of one run; -1 on error
static double run_pp(kvg_context * ctx, const std::vector<kvg_token> & toks) {
    char err[512];
    const double t0 = now_s();
    if (!kvg_decode(ctx, toks.data(), (int32_t) toks.size(), 0, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    return toks.size() / (now_s() - t0);
}
static double run_tg(kvg_context * ctx, const std::vector<kvg_token> & toks) {
    char err[512];
    const double t0 = now_s();
    for (size_t i = 0; i < toks.size(); ++i) {
        if (!kvg_decode(ctx, &toks[i], 1, (int32_t) i, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
    }
    return toks.size() / (now_s() - t0);
}

static void bench_kv_write(const std::string & path, kvg_model * model, kvg_kv_type kv_type, int n_threads,
                           int n_ctx, const Options & opt) {
    std::string e;
    kvg::LoadOptions lo;
    auto m = kvg::load_model(path, "", lo, &e);
    kvg::KvCache kv;
    if (!m || !kv.init(m->hp, n_ctx, kv_type == KVG_KV_F16 ? GGML_TYPE_F16 : GGML_TYPE_F32, &e)) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return;
    }
    auto wg = kvg::build_kv_write_graph(kv, &e);
    if (!wg) {
        fprintf(stderr, "error: %s\n", e.c_str());
        return;
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
        return;
    }
    std::vector<int> positions;
    for (int p = 64; p < n_ctx; p *= 4) positions.push_back(p);
    positions.push_back(n_ctx - 1);
    const std::vector<kvg_token> fill = random_tokens(n_ctx, kvg_model_n_vocab(model), 7);

    printf("\nKV write cost: %s, kv %s, %d thread(s), n_ctx %d (one token: K and V rows of %d layers)\n",
           path.c_str(), kv_type == KVG_KV_F16 ? "f16" : "f32", n_threads, n_ctx, (int) kv.k.size());
    printf("| %8s | %20s | %20s |\n", "position", "KV write us/token", "decode step ms");
    printf("| %8s | %20s | %20s |\n", "-------:", "-----------------:", "-----------------:");
    for (int pos : positions) {
        // the write alone
        *(int64_t *) wg->inp_idx->data = kv.slot(pos);
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
            break;
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
}

int main(int argc, char ** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "-m" && has) opt.models.push_back(argv[++i]);
        else if (a == "-t" && has) {
            opt.threads.clear();
            for (const std::string & s : split(argv[++i])) opt.threads.push_back(std::max(1, atoi(s.c_str())));
        } else if (a == "--kv-type" && has) {
            opt.kv_types.clear();
            for (const std::string & s : split(argv[++i])) {
                if (s == "f32") opt.kv_types.push_back(KVG_KV_F32);
                else if (s == "f16") opt.kv_types.push_back(KVG_KV_F16);
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
        else if (a == "--no-kv-write") opt.kv_write = false;
        else {
            fprintf(stderr,
                    "usage: %s -m MODEL [-m MODEL2 ...] [-t 1,2] [--kv-type f32,f16] [--attn flash|matmul]\n"
                    "          [-r REPS] [-p N_PROMPT] [-n N_GEN] [-c N_CTX] [--no-kv-write]\n",
                    argv[0]);
            return a == "-h" || a == "--help" ? 0 : 1;
        }
    }
    if (opt.models.empty()) {
        fprintf(stderr, "error: no model (-m)\n");
        return 1;
    }

    printf("| %-24s | %4s | %6s | %7s | %6s | %20s |\n", "model", "kv", "attn", "threads", "test", "t/s");
    printf("| %-24s | %4s | %6s | %7s | %6s | %20s |\n", "---", "---", "---", "------:", "---", "------------------:");
    for (const std::string & path : opt.models) {
        char err[1024];
        kvg_model * model = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        if (!model) {
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
        const int n_ctx = opt.n_ctx > 0 ? std::min(opt.n_ctx, kvg_model_n_ctx_train(model))
                                        : std::min(kvg_model_n_ctx_train(model), 4096);
        const int n_pp = std::min(opt.n_pp, n_ctx), n_tg = std::min(opt.n_tg, n_ctx);
        const std::vector<kvg_token> pp_toks = random_tokens(n_pp, kvg_model_n_vocab(model), 1);
        const std::vector<kvg_token> tg_toks = random_tokens(n_tg, kvg_model_n_vocab(model), 2);
        std::string name = path.substr(path.find_last_of('/') + 1);
        for (kvg_kv_type kt : opt.kv_types) {
            for (int nt : opt.threads) {
                kvg_context_params cp = kvg_context_default_params();
                cp.n_ctx = n_ctx;
                cp.n_threads = nt;
                cp.n_batch = n_pp;
                cp.kv_type = kt;
                cp.attn = opt.attn;
                kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
                if (!ctx) {
                    fprintf(stderr, "error: %s\n", err);
                    return 1;
                }
                for (int test = 0; test < 2; ++test) {
                    const bool pp = test == 0;
                    auto run = [&]() { return pp ? run_pp(ctx, pp_toks) : run_tg(ctx, tg_toks); };
                    if (run() < 0) return 1; // warm-up
                    std::vector<double> ts;
                    for (int r = 0; r < opt.reps; ++r) {
                        const double t = run();
                        if (t < 0) return 1;
                        ts.push_back(t);
                    }
                    double mean, sd;
                    mean_std(ts, &mean, &sd);
                    const std::string tname = (pp ? "pp" : "tg") + std::to_string(pp ? n_pp : n_tg);
                    printf("| %-24s | %4s | %6s | %7d | %6s | %11.2f ± %6.2f |\n", name.c_str(),
                           kt == KVG_KV_F16 ? "f16" : "f32", opt.attn == KVG_ATTN_FLASH ? "flash" : "matmul", nt,
                           tname.c_str(), mean, sd);
                    fflush(stdout);
                }
                kvg_context_free(ctx);
            }
        }
        kvg_model_free(model);
    }
    // after the table, so that it stays one table
    for (const std::string & path : opt.models) {
        if (!opt.kv_write) break;
        char err[1024];
        kvg_model * model = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        if (!model) return 1;
        const int n_ctx = opt.n_ctx > 0 ? std::min(opt.n_ctx, kvg_model_n_ctx_train(model))
                                        : std::min(kvg_model_n_ctx_train(model), 4096);
        for (kvg_kv_type kt : opt.kv_types) bench_kv_write(path, model, kt, opt.threads.front(), n_ctx, opt);
        kvg_model_free(model);
    }
    return 0;
}
