// Executor benchmark: the DAG scheduler vs the barrier scheduler (ggml's classic
// schedule) on graphs of many small ops shaped like tiny llama layers, plus the
// per-node overhead on graphs of ~1000 trivial nodes.
//
//   kvg-bench-executor [--reps N] [--layers L] [--quick]
//
// For each graph and thread count it prints the median time per graph compute for both
// schedules and barrier/dag (> 1: the DAG scheduler is faster). Results of the two
// schedules are compared bit for bit.
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct layer_shape {
    int d = 128;        // embedding
    int hd = 32;        // head size
    int n_tokens = 1;
    int n_past = 32;    // cached positions attended to
    int n_layers = 4;
    int n_vocab = 512;
    bool split_heads = false; // one node chain per head instead of batched heads
    ggml_type wtype = GGML_TYPE_F32;
};

std::mt19937 g_rng(1);

ggml_tensor * rand_tensor(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, float scale = 0.1f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> f((size_t) (ne0 * ne1 * ne2));
    for (float & v : f) v = u(g_rng);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, type, ne0, ne1, ne2);
    if (type == GGML_TYPE_F32) std::memcpy(t->data, f.data(), f.size() * sizeof(float));
    else ggml_get_type_traits(type)->from_float_ref(f.data(), t->data, (int64_t) f.size());
    return t;
}

// Attention for all heads at once (batched mul_mat over heads).
ggml_tensor * attention_batched(ggml_context * ctx, const layer_shape & s, ggml_tensor * q, ggml_tensor * k,
                                ggml_tensor * v, ggml_tensor * k_cache, ggml_tensor * v_cache_t) {
    const int nh = s.d / s.hd, T = s.n_tokens;
    ggml_tensor * qh = ggml_permute(ctx, q, 0, 2, 1, 3);                                    // [hd, T, nh]
    ggml_tensor * kh = ggml_cont(ctx, ggml_permute(ctx, k, 0, 2, 1, 3));                    // [hd, T, nh]
    ggml_tensor * vt = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, v, s.hd, nh, T), 1, 2, 0, 3)); // [T, hd, nh]
    ggml_tensor * k_all = ggml_concat(ctx, k_cache, kh, 1);                                 // [hd, n_kv, nh]
    ggml_tensor * v_all = ggml_concat(ctx, v_cache_t, vt, 0);                               // [n_kv, hd, nh]
    ggml_tensor * kq = ggml_mul_mat(ctx, k_all, qh);                                        // [n_kv, T, nh]
    kq = ggml_soft_max(ctx, ggml_diag_mask_inf(ctx, ggml_scale(ctx, kq, 1.0f / 8), s.n_past));
    ggml_tensor * o = ggml_mul_mat(ctx, v_all, kq);                                         // [hd, T, nh]
    return ggml_cont_2d(ctx, ggml_permute(ctx, o, 0, 2, 1, 3), s.d, T);
}

// The same attention with every head as its own small chain of nodes.
ggml_tensor * attention_split(ggml_context * ctx, const layer_shape & s, ggml_tensor * q, ggml_tensor * k,
                              ggml_tensor * v, ggml_tensor * k_cache, ggml_tensor * v_cache_t) {
    const int nh = s.d / s.hd, T = s.n_tokens;
    ggml_tensor * out = nullptr;
    for (int h = 0; h < nh; ++h) {
        ggml_tensor * qh = ggml_view_2d(ctx, q, s.hd, T, q->nb[2], h * q->nb[1]);           // [hd, T]
        ggml_tensor * kh = ggml_cont(ctx, ggml_view_2d(ctx, k, s.hd, T, k->nb[2], h * k->nb[1]));
        ggml_tensor * vh = ggml_view_2d(ctx, v, s.hd, T, v->nb[1], h * s.hd * sizeof(float)); // [hd, T]
        ggml_tensor * kc = ggml_view_2d(ctx, k_cache, s.hd, s.n_past, k_cache->nb[1], h * k_cache->nb[2]);
        ggml_tensor * vc = ggml_view_2d(ctx, v_cache_t, s.n_past, s.hd, v_cache_t->nb[1], h * v_cache_t->nb[2]);
        ggml_tensor * k_all = ggml_concat(ctx, kc, kh, 1);                                 // [hd, n_kv]
        ggml_tensor * v_all = ggml_concat(ctx, vc, ggml_cont(ctx, ggml_transpose(ctx, vh)), 0); // [n_kv, hd]
        ggml_tensor * kq = ggml_mul_mat(ctx, k_all, qh);                                   // [n_kv, T]
        kq = ggml_soft_max(ctx, ggml_diag_mask_inf(ctx, ggml_scale(ctx, kq, 1.0f / 8), s.n_past));
        ggml_tensor * oh = ggml_mul_mat(ctx, v_all, kq);                                   // [hd, T]
        out = out ? ggml_concat(ctx, out, oh, 0) : oh;                                     // [hd*(h+1), T]
    }
    return out;
}

ggml_cgraph * build_llama(ggml_context * ctx, const layer_shape & s, ggml_tensor ** result) {
    const int nh = s.d / s.hd, T = s.n_tokens, ff = (s.d * 11 / 4 + 31) / 32 * 32;
    ggml_tensor * x = rand_tensor(ctx, GGML_TYPE_F32, s.d, T, 1, 1.0f);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
    for (int i = 0; i < T; ++i) ggml_set_i32_1d(pos, i, s.n_past + i);
    for (int l = 0; l < s.n_layers; ++l) {
        ggml_tensor * k_cache = rand_tensor(ctx, GGML_TYPE_F32, s.hd, s.n_past, nh, 1.0f);
        ggml_tensor * v_cache_t = rand_tensor(ctx, GGML_TYPE_F32, s.n_past, s.hd, nh, 1.0f);
        ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), rand_tensor(ctx, GGML_TYPE_F32, s.d, 1, 1, 1.0f));
        ggml_tensor * q = ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, s.d), h);
        ggml_tensor * k = ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, s.d), h);
        ggml_tensor * v = ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, s.d), h);
        q = ggml_rope(ctx, ggml_reshape_3d(ctx, q, s.hd, nh, T), pos, s.hd, 0);          // [hd, nh, T]
        k = ggml_rope(ctx, ggml_reshape_3d(ctx, k, s.hd, nh, T), pos, s.hd, 0);
        ggml_tensor * a = s.split_heads ? attention_split(ctx, s, q, k, v, k_cache, v_cache_t)
                                        : attention_batched(ctx, s, q, k, v, k_cache, v_cache_t);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, s.d), a));
        h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), rand_tensor(ctx, GGML_TYPE_F32, s.d, 1, 1, 1.0f));
        ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, ff), h));
        ggml_tensor * up = ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, ff), h);
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, ff, s.d), ggml_mul(ctx, gate, up)));
    }
    x = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), rand_tensor(ctx, GGML_TYPE_F32, s.d, 1, 1, 1.0f));
    ggml_tensor * logits = ggml_mul_mat(ctx, rand_tensor(ctx, s.wtype, s.d, s.n_vocab), x);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 8192, false);
    ggml_build_forward_expand(gf, logits);
    *result = logits;
    return gf;
}

// ~1000 trivial nodes: a chain (no parallelism) or independent ones (all parallel).
ggml_cgraph * build_tiny(ggml_context * ctx, bool chain, int n, ggml_tensor ** result) {
    ggml_tensor * x = rand_tensor(ctx, GGML_TYPE_F32, 16);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 2 * n + 16, false);
    ggml_tensor * t = x;
    for (int i = 0; i < n; ++i) {
        t = chain ? ggml_scale(ctx, t, 1.0001f) : ggml_scale(ctx, x, 1.0f + 1e-4f * (float) i);
        if (!chain) ggml_build_forward_expand(gf, t);
    }
    ggml_build_forward_expand(gf, t);
    *result = t;
    return gf;
}

struct timing {
    double median_us, min_us;
};

timing time_compute(ggml_cgraph * gf, int n_threads, ggml_sched_mode mode, int reps, std::vector<uint8_t> & work) {
    ggml_cpu_set_sched_mode(mode);
    ggml_cplan cp = ggml_graph_plan(gf, n_threads, nullptr);
    if (work.size() < cp.work_size) work.resize(cp.work_size);
    cp.work_data = work.data();
    std::vector<double> t;
    const int warmup = std::max(3, reps / 10);
    for (int r = 0; r < warmup + reps; ++r) {
        const int64_t t0 = ggml_time_us();
        if (ggml_graph_compute(gf, &cp) != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "compute failed\n");
            exit(1);
        }
        if (r >= warmup) t.push_back((double) (ggml_time_us() - t0));
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t[0]};
}

std::vector<uint8_t> bytes_of(const ggml_tensor * t) {
    const uint8_t * p = (const uint8_t *) t->data;
    return std::vector<uint8_t>(p, p + ggml_nbytes(t));
}

// false when the two schedules' outputs differ (a wrong result, not a timing)
bool bench(const char * name, ggml_cgraph * gf, ggml_tensor * result, int reps) {
    std::vector<uint8_t> work;
    bool all_same = true;
    for (int nt : {1, 2}) {
        const timing dag = time_compute(gf, nt, GGML_SCHED_DAG, reps, work);
        const std::vector<uint8_t> out_dag = bytes_of(result);
        const timing bar = time_compute(gf, nt, GGML_SCHED_BARRIER, reps, work);
        const bool same = bytes_of(result) == out_dag;
        all_same &= same;
        printf("%-34s %5d nodes  %d thr   dag %9.1f us   barrier %9.1f us   barrier/dag %5.2f   (min %.1f / %.1f)%s\n", name,
               ggml_graph_n_nodes(gf), nt, dag.median_us, bar.median_us, bar.median_us / dag.median_us, dag.min_us,
               bar.min_us, same ? "" : "   OUTPUTS DIFFER");
        fflush(stdout);
    }
    return all_same;
}

} // namespace

int main(int argc, char ** argv) {
    int reps = 200, layers = 4;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--layers L] [--quick]\n", argv[0]);
            return 1;
        }
    }
    if (reps < 1 || layers < 1) {
        fprintf(stderr, "--reps and --layers must be >= 1\n");
        return 1;
    }
    if (quick) reps = std::min(reps, 20);
    ggml_time_init();
    printf("median time per graph compute over %d runs; 1 thread always runs in graph order\n", reps);
    // the barrier schedule stalls whenever any thread is descheduled: say how busy the machine is
    if (FILE * f = fopen("/proc/loadavg", "r")) {
        char buf[128] = {0};
        if (fgets(buf, sizeof(buf), f)) printf("load average at start: %s", buf);
        fclose(f);
    }
    printf("\n");

    bool ok = true;
    for (bool chain : {true, false}) {
        ggml_context * ctx = ggml_init({64 << 20, nullptr, false});
        ggml_tensor * res;
        ggml_cgraph * gf = build_tiny(ctx, chain, 1000, &res);
        ok &= bench(chain ? "1000 tiny scales, chain" : "1000 tiny scales, independent", gf, res, reps);
        ggml_free(ctx);
    }
    printf("\n");

    const int dims[] = {64, 128, 256};
    for (int d : dims) {
        for (int n_tokens : {1, 8}) {
            for (bool split : {false, true}) {
                for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_Q8_0}) {
                    if (quick && (wt != GGML_TYPE_F32 || d != 128)) continue;
                    layer_shape s;
                    s.d = d;
                    s.n_tokens = n_tokens;
                    s.n_layers = layers;
                    s.split_heads = split;
                    s.wtype = wt;
                    ggml_context * ctx = ggml_init({256 << 20, nullptr, false});
                    ggml_tensor * res;
                    ggml_cgraph * gf = build_llama(ctx, s, &res);
                    char name[96];
                    snprintf(name, sizeof(name), "llama d=%d T=%d %s %s", d, n_tokens, split ? "split-heads" : "batched", ggml_type_name(wt));
                    ok &= bench(name, gf, res, reps);
                    ggml_free(ctx);
                }
            }
        }
    }
    return ok ? 0 : 1;
}
