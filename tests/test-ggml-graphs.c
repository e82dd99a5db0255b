/* Programs written the way ggml users write them, checked against plain loops: several
 * graphs built in one context (a KV cache fed one token per graph through one reused input
 * tensor; a conversion in one graph, its use in the next; a host edit between graphs) and
 * hand-built graphs that do not list their views. Each runs on 1, 2 and 4 threads with
 * the DAG scheduler and on the barrier one. Exit code 0 = pass. */
#include "ggml-alloc.h"
#include "ggml-program-common.h"

#include <string.h>

enum { D = 16, STEPS = 6 };

/* One context, one new graph per step: k = W x is written into cache row s by a cpy that
 * is never expanded, and scores = cache[0..s] x read it. x is one input tensor overwritten
 * before every step. */
static void kv_cache_in_one_context(int run) {
    struct ggml_context * ctx = new_context(64 * 1024 * 1024, false);
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, D);
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, D);
    struct ggml_tensor * cache = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, STEPS);
    float ref_cache[STEPS][D], xs[D];
    int s, i, j, n_nodes_first = -1;
    fill_f32(w, 1);
    memset(cache->data, 0, ggml_nbytes(cache));
    for (s = 0; s < STEPS; ++s) {
        struct ggml_tensor *k, *kv, *scores;
        struct ggml_cgraph * gf;
        k = ggml_mul_mat(ctx, w, x);
        ggml_cpy(ctx, k, ggml_view_1d(ctx, cache, D, (size_t) s * cache->nb[1]));
        kv = ggml_view_2d(ctx, cache, D, s + 1, cache->nb[1], 0);
        scores = ggml_mul_mat(ctx, kv, x);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, scores);
        if (s == 0) n_nodes_first = ggml_graph_n_nodes(gf);
        EXPECT(ggml_graph_n_nodes(gf) == n_nodes_first, "run %d step %d: %d nodes, step 0 had %d", run, s,
               ggml_graph_n_nodes(gf), n_nodes_first);

        for (i = 0; i < D; ++i) xs[i] = value_at(100 + s, i);
        memcpy(x->data, xs, sizeof(xs));
        EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d step %d", run, s);

        for (i = 0; i < D; ++i) { /* the plain loop */
            float acc = 0;
            for (j = 0; j < D; ++j) acc += value_at(1, i * D + j) * xs[j];
            ref_cache[s][i] = acc;
        }
        for (j = 0; j <= s; ++j) {
            float dot = 0;
            for (i = 0; i < D; ++i) {
                const float got = ((const float *) cache->data)[j * D + i];
                EXPECT(close_enough(got, ref_cache[j][i]), "run %d step %d: cache[%d][%d] = %g, want %g", run, s, j, i, got,
                       ref_cache[j][i]);
                dot += ref_cache[j][i] * xs[i];
            }
            EXPECT(close_enough(ggml_get_f32_1d(scores, j), dot), "run %d step %d: score %d = %g, want %g", run, s, j,
                   ggml_get_f32_1d(scores, j), dot);
        }
    }
    ggml_free(ctx);
}

/* Graph 1 converts weights to f16 into a tensor of the context; graph 2 multiplies by
 * them. Graph 2 holds the matmul alone: the conversion ran with graph 1, and rerunning it
 * would pick up the host's later change to the f32 weights. Then the mask case: graph 1
 * converts a mask, the host edits the converted mask, graph 2 reads the edit. */
static void convert_then_use(int run) {
    enum { K = 64, N = 24 };
    struct ggml_context * ctx = new_context(16 * 1024 * 1024, false);
    struct ggml_tensor * w32 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    struct ggml_tensor * w16 = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, K, N);
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
    struct ggml_tensor *y, *mask32, *mask16, *mask_read;
    struct ggml_cgraph *g1, *g2;
    int n, k;
    fill_f32(w32, 2);
    fill_f32(x, 3);
    g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, ggml_cpy(ctx, w32, w16));
    EXPECT(compute_graph(g1, run) == GGML_STATUS_SUCCESS, "run %d", run);
    for (k = 0; k < K * N; ++k) ((float *) w32->data)[k] = 100.0f; /* must not reach w16 again */

    y = ggml_mul_mat(ctx, w16, x);
    g2 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g2, y);
    EXPECT(ggml_graph_n_nodes(g2) == 1, "run %d: graph 2 has %d nodes", run, ggml_graph_n_nodes(g2));
    EXPECT(compute_graph(g2, run) == GGML_STATUS_SUCCESS, "run %d", run);
    for (n = 0; n < N; ++n) {
        float want = 0;
        for (k = 0; k < K; ++k) want += ggml_fp16_to_fp32(ggml_fp32_to_fp16(value_at(2, n * K + k))) * value_at(3, k);
        EXPECT(fabsf(ggml_get_f32_1d(y, n) - want) < 1e-3f, "run %d: y[%d] = %g, want %g", run, n, ggml_get_f32_1d(y, n), want);
    }

    mask32 = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    mask16 = ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 8);
    ggml_set_f32(mask32, 0.0f);
    g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, ggml_cpy(ctx, mask32, mask16));
    EXPECT(compute_graph(g1, run) == GGML_STATUS_SUCCESS, "run %d", run);
    ggml_set_f32_1d(mask16, 2, -INFINITY); /* the host's edit */
    mask_read = ggml_cpy(ctx, mask16, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8));
    g2 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g2, mask_read);
    EXPECT(compute_graph(g2, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(isinf(ggml_get_f32_1d(mask_read, 2)) && ggml_get_f32_1d(mask_read, 2) < 0, "run %d: the edit was lost", run);
    EXPECT(ggml_get_f32_1d(mask_read, 3) == 0.0f, "run %d", run);
    ggml_free(ctx);
}

/* ggml_graph_add_node(b); ggml_graph_add_node(c) where c reads a view of b that the
 * graph does not list; with data from the context, then with the planner. */
static void hand_built_without_views(int run) {
    enum { N = 256, OFF = 64, M = 128 };
    struct ggml_context * data = new_context(1024 * 1024, false);
    struct ggml_tensor * a = ggml_new_tensor_1d(data, GGML_TYPE_F32, N);
    int planned, rep, i;
    fill_f32(a, 4);
    for (planned = 0; planned < 2; ++planned) {
        struct ggml_context * ctx = new_context(1024 * 1024, planned != 0);
        struct ggml_tensor * b = ggml_scale(ctx, ggml_sqr(ctx, a), 2.0f);
        struct ggml_tensor * c = ggml_scale(ctx, ggml_view_1d(ctx, b, M, OFF * sizeof(float)), 3.0f);
        struct ggml_tensor * d = ggml_add(ctx, ggml_view_1d(ctx, c, M / 2, 0), ggml_view_1d(ctx, b, M / 2, 0));
        struct ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_gallocr_t ga = NULL;
        ggml_graph_add_node(gf, b->src[0]);
        ggml_graph_add_node(gf, b);
        ggml_graph_add_node(gf, c);
        ggml_graph_add_node(gf, d);
        if (planned) {
            ga = ggml_gallocr_new(NULL);
            EXPECT(ggml_gallocr_alloc_graph(ga, gf), "run %d", run);
        }
        for (rep = 0; rep < 10; ++rep) {
            memset(b->data, 0xff, ggml_nbytes(b)); /* NaN until b runs */
            memset(c->data, 0xff, ggml_nbytes(c));
            EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
            for (i = 0; i < M / 2; ++i) {
                const float va = value_at(4, OFF + i), vb = value_at(4, i);
                const float want = 6.0f * va * va + 2.0f * vb * vb;
                EXPECT(close_enough(ggml_get_f32_1d(d, i), want), "run %d planned %d rep %d: d[%d] = %g, want %g", run, planned,
                       rep, i, ggml_get_f32_1d(d, i), want);
            }
        }
        ggml_gallocr_free(ga);
        ggml_free(ctx);
    }
    ggml_free(data);
}

/* f32 -> i32 as ggml's test-dup does it: ggml_cpy and the CPU type traits agree with C's
 * conversion (toward zero). */
static void f32_to_i32(int run) {
    static const float v[8] = {0.0f, 1.5f, -1.5f, 2.99f, -2.99f, 1000.25f, -7.0f, 123456.0f};
    struct ggml_context * ctx = new_context(1024 * 1024, false);
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    struct ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 8);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    const struct ggml_type_traits_cpu * tr = ggml_get_type_traits_cpu(GGML_TYPE_I32);
    int32_t conv[8];
    int i;
    memcpy(a->data, v, sizeof(v));
    ggml_build_forward_expand(gf, ggml_cpy(ctx, a, b));
    EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(tr->from_float != NULL, "no from_float for I32");
    if (tr->from_float) tr->from_float(v, conv, 8);
    for (i = 0; i < 8; ++i) {
        EXPECT(((const int32_t *) b->data)[i] == (int32_t) v[i], "run %d: cpy %g -> %d", run, v[i], ((const int32_t *) b->data)[i]);
        EXPECT(!tr->from_float || conv[i] == (int32_t) v[i], "from_float %g -> %d", v[i], conv[i]);
    }
    ggml_free(ctx);
}

int main(void) {
    int run;
    for (run = 0; run < N_RUNS; ++run) {
        kv_cache_in_one_context(run);
        convert_then_use(run);
        hand_built_without_views(run);
        f32_to_i32(run);
    }
    return report("test-ggml-graphs");
}
