/* The memory planner and the executor keep ggml's contracts, tried with programs written
 * the way ggml users write them and checked against plain loops, on 1, 2 and 4 threads,
 * DAG and barrier: output views and sinks are kept, one allocator serves two graphs,
 * reserve-then-allocate re-plans a rewired graph, edges outlive a freed context, the node
 * list is left alone, a write and a read from two contexts run in node order, a write no
 * graph needs is not run, argmax ties pick the last index, an edge added late is
 * honoured and a cycle of edges is refused. Exit code 0 = pass. */
#include "ggml-alloc.h"
#include "ggml-program-common.h"

#include <string.h>

enum { N = 64 };

/* 1. Results the program reads after compute, each followed by a chain whose last node
 * (a cont, which cannot run in place) would fit in their bytes: a reshape flagged
 * output, an in-place result flagged output, and a sink ordered before that chain by a
 * control edge. */
static void outputs_and_sinks_are_kept(int run) {
    struct ggml_context * data = new_context(1024 * 1024, false);
    struct ggml_context * ctx = new_context(1024 * 1024, true);
    struct ggml_tensor * x = ggml_new_tensor_1d(data, GGML_TYPE_F32, N);
    struct ggml_tensor *h, *hv, *h2, *cur, *c2, *sink, *t, *u;
    struct ggml_cgraph * gf;
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    int inplace, i;
    fill_f32(x, 5);
    for (inplace = 0; inplace < 2; ++inplace) {
        ggml_gallocr_set_inplace(ga, inplace != 0);
        h = ggml_scale(ctx, x, 2.0f);
        hv = ggml_reshape_2d(ctx, h, 8, 8);
        ggml_set_output(hv);
        h2 = ggml_cont(ctx, ggml_sqr(ctx, h));
        cur = ggml_scale(ctx, x, 3.0f);
        cur = ggml_add_inplace(ctx, cur, x); /* 4 x */
        ggml_set_output(cur);
        c2 = ggml_cont(ctx, ggml_sqr(ctx, cur));
        sink = ggml_scale(ctx, x, 5.0f); /* nothing reads it */
        t = ggml_cont(ctx, x);
        u = ggml_cont(ctx, ggml_sqr(ctx, t));
        ggml_add_control_dep(ctx, t, sink);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, hv);
        ggml_build_forward_expand(gf, h2);
        ggml_build_forward_expand(gf, cur);
        ggml_build_forward_expand(gf, c2);
        ggml_build_forward_expand(gf, sink);
        ggml_build_forward_expand(gf, u);
        EXPECT(ggml_gallocr_alloc_graph(ga, gf), "run %d", run);
        EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
        for (i = 0; i < N; ++i) {
            const float v = value_at(5, i);
            EXPECT(ggml_get_f32_1d(hv, i) == 2.0f * v, "run %d inplace %d: hv[%d] = %g", run, inplace, i, ggml_get_f32_1d(hv, i));
            EXPECT(close_enough(ggml_get_f32_1d(cur, i), 4.0f * v), "run %d inplace %d: cur[%d] = %g", run, inplace, i,
                   ggml_get_f32_1d(cur, i));
            EXPECT(ggml_get_f32_1d(sink, i) == 5.0f * v, "run %d inplace %d: sink[%d] = %g", run, inplace, i, ggml_get_f32_1d(sink, i));
            EXPECT(close_enough(ggml_get_f32_1d(h2, i), 4.0f * v * v), "run %d inplace %d: h2[%d]", run, inplace, i);
            EXPECT(close_enough(ggml_get_f32_1d(c2, i), 16.0f * v * v), "run %d inplace %d: c2[%d]", run, inplace, i);
            EXPECT(close_enough(ggml_get_f32_1d(u, i), v * v), "run %d inplace %d: u[%d]", run, inplace, i);
        }
    }
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_free(data);
}

/* 2. Graph A (small) and graph B (large) on one allocator: A computes correctly after B
 * grew the buffer, without being allocated again (ASan: no use after free). */
static void one_allocator_two_graphs(int run) {
    struct ggml_context * data = new_context(1024 * 1024, false);
    struct ggml_context * ctx = new_context(1024 * 1024, true);
    struct ggml_tensor * x = ggml_new_tensor_1d(data, GGML_TYPE_F32, N);
    struct ggml_tensor * big = ggml_new_tensor_1d(data, GGML_TYPE_F32, 64 * N);
    struct ggml_tensor * a = ggml_scale(ctx, ggml_scale(ctx, x, 2.0f), 3.0f);
    struct ggml_tensor * b = ggml_scale(ctx, ggml_scale(ctx, big, 2.0f), 0.5f);
    struct ggml_cgraph * ga_graph = ggml_new_graph(ctx);
    struct ggml_cgraph * gb_graph = ggml_new_graph(ctx);
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    int i;
    fill_f32(x, 6);
    fill_f32(big, 7);
    ggml_build_forward_expand(ga_graph, a);
    ggml_build_forward_expand(gb_graph, b);
    EXPECT(ggml_gallocr_alloc_graph(ga, ga_graph), "run %d", run);
    EXPECT(compute_graph(ga_graph, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(ggml_gallocr_alloc_graph(ga, gb_graph), "run %d", run);
    EXPECT(compute_graph(gb_graph, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(compute_graph(ga_graph, run) == GGML_STATUS_SUCCESS, "run %d", run);
    for (i = 0; i < N; ++i) EXPECT(close_enough(ggml_get_f32_1d(a, i), 6.0f * value_at(6, i)), "run %d: a[%d]", run, i);
    for (i = 0; i < 64 * N; ++i) EXPECT(ggml_get_f32_1d(b, i) == value_at(7, i), "run %d: b[%d]", run, i);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_free(data);
}

/* 3. Reserve with one graph, reset the context, build the same shapes with other wiring
 * (swapped sources; a KV write into another row) at the same addresses, allocate. */
static struct ggml_cgraph * build_wired(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * y,
                                        struct ggml_tensor * cache, int swap, int row, struct ggml_tensor ** out) {
    struct ggml_tensor * p = ggml_scale(ctx, swap ? y : x, 2.0f);
    struct ggml_tensor * q = ggml_sqr(ctx, swap ? x : y);
    struct ggml_tensor * s = ggml_sub(ctx, p, q);
    struct ggml_tensor * r;
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_cpy(ctx, s, ggml_view_1d(ctx, cache, N, (size_t) row * cache->nb[1]));
    r = ggml_scale(ctx, ggml_view_2d(ctx, cache, N, 4, cache->nb[1], 0), 1.0f);
    ggml_build_forward_expand(gf, r);
    *out = r;
    return gf;
}

static void reserve_then_allocate(int run) {
    struct ggml_context * data = new_context(1024 * 1024, false);
    struct ggml_context * ctx = new_context(1024 * 1024, true);
    struct ggml_tensor * x = ggml_new_tensor_1d(data, GGML_TYPE_F32, N);
    struct ggml_tensor * y = ggml_new_tensor_1d(data, GGML_TYPE_F32, N);
    struct ggml_tensor * cache = ggml_new_tensor_2d(data, GGML_TYPE_F32, N, 4);
    struct ggml_tensor * r;
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    int i, j;
    fill_f32(x, 8);
    fill_f32(y, 9);
    ggml_set_zero(cache);
    EXPECT(ggml_gallocr_reserve(ga, build_wired(ctx, x, y, cache, 0, 1, &r)), "run %d", run);
    ggml_reset(ctx);
    {
        struct ggml_cgraph * gf = build_wired(ctx, x, y, cache, 1, 3, &r);
        EXPECT(ggml_gallocr_alloc_graph(ga, gf), "run %d", run);
        EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    }
    for (j = 0; j < 4; ++j) {
        for (i = 0; i < N; ++i) {
            const float want = j == 3 ? 2.0f * value_at(9, i) - value_at(8, i) * value_at(8, i) : 0.0f;
            EXPECT(close_enough(ggml_get_f32_1d(r, j * N + i), want), "run %d: r[%d][%d] = %g, want %g", run, j, i,
                   ggml_get_f32_1d(r, j * N + i), want);
        }
    }
    /* same nodes, leafs, ops and shapes; c reads a instead of y, so b may no longer overwrite a */
    ggml_reset(ctx);
    {
        int v;
        for (v = 0; v < 2; ++v) {
            struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
            struct ggml_tensor * b = ggml_sqr(ctx, a);
            struct ggml_tensor * c = ggml_mul(ctx, v == 0 ? y : a, y);
            struct ggml_tensor * out = ggml_add(ctx, b, c);
            struct ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, out);
            if (v == 0) {
                EXPECT(ggml_gallocr_reserve(ga, gf), "run %d", run);
                ggml_reset(ctx);
                continue;
            }
            EXPECT(ggml_gallocr_alloc_graph(ga, gf), "run %d", run);
            EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
            for (i = 0; i < N; ++i) {
                const float av = 2.0f * value_at(8, i), want = av * av + av * value_at(9, i);
                EXPECT(close_enough(ggml_get_f32_1d(out, i), want), "run %d: rewired out[%d] = %g, want %g", run, i,
                       ggml_get_f32_1d(out, i), want);
            }
        }
    }
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_free(data);
}

/* 4. A control edge added through a short-lived context lives with its tensor. 5. The
 * node list, and ggml_graph_node(gf, -1), are what the program built. */
static void edges_outlive_their_context(int run) {
    struct ggml_context * model = new_context(1024 * 1024, false);
    struct ggml_context * step = new_context(1024 * 1024, false);
    struct ggml_tensor * x = ggml_new_tensor_1d(model, GGML_TYPE_F32, N);
    struct ggml_tensor * t = ggml_scale(model, x, 2.0f);
    struct ggml_tensor * dep = ggml_scale(model, x, 3.0f);
    struct ggml_tensor *last, *last_after;
    struct ggml_cgraph * gf;
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    int i;
    fill_f32(x, 10);
    ggml_add_control_dep(step, t, dep);
    ggml_free(step);
    gf = ggml_new_graph(model);
    ggml_build_forward_expand(gf, t);
    EXPECT(ggml_graph_n_nodes(gf) == 2, "run %d: %d nodes", run, ggml_graph_n_nodes(gf));
    last = ggml_graph_node(gf, -1);
    EXPECT(ggml_gallocr_alloc_graph(ga, gf), "run %d", run);
    last_after = ggml_graph_node(gf, -1);
    EXPECT(last == t && last_after == t, "run %d: the last node changed", run);
    EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    for (i = 0; i < N; ++i) EXPECT(ggml_get_f32_1d(t, i) == 2.0f * value_at(10, i), "run %d", run);
    ggml_gallocr_free(ga);
    ggml_free(model);
}

/* 6. The KV write is created in the model's context, the read in the step's: no edge
 * joins them, both are expanded in ggml's order, and the read must see the write.
 * 7. A write created but never expanded does not run, even when a later write to the
 * same bytes is expanded. */
static void two_contexts_and_dead_writes(int run) {
    enum { ROWS = 8, LEN = 4096 };
    struct ggml_context * model = new_context(4 * 1024 * 1024, false);
    struct ggml_context * step = new_context(4 * 1024 * 1024, false);
    struct ggml_tensor * cache = ggml_new_tensor_2d(model, GGML_TYPE_F32, LEN, ROWS);
    struct ggml_tensor * x = ggml_new_tensor_1d(model, GGML_TYPE_F32, LEN);
    struct ggml_tensor *w, *dead, *w2, *r;
    struct ggml_cgraph * gf;
    int rep, i;
    fill_f32(x, 11);
    for (rep = 0; rep < 8; ++rep) {
        ggml_set_zero(cache);
        w = ggml_cpy(model, ggml_sqr(model, ggml_scale(model, x, 2.0f)), ggml_view_1d(model, cache, LEN, 2 * cache->nb[1]));
        r = ggml_scale(step, ggml_view_1d(step, cache, LEN, 2 * cache->nb[1]), 1.0f);
        gf = ggml_new_graph(step);
        ggml_build_forward_expand(gf, w);
        ggml_build_forward_expand(gf, r);
        EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
        for (i = 0; i < LEN; i += 97) {
            const float v = 2.0f * value_at(11, i);
            EXPECT(ggml_get_f32_1d(r, i) == v * v, "run %d rep %d: r[%d] = %g", run, rep, i, ggml_get_f32_1d(r, i));
        }
    }
    dead = ggml_cpy(step, ggml_scale(step, x, -1.0f), ggml_view_1d(step, cache, LEN, 5 * cache->nb[1]));
    w2 = ggml_cpy(step, ggml_scale(step, ggml_view_1d(step, x, LEN / 2, 0), 4.0f), ggml_view_1d(step, cache, LEN / 2, 5 * cache->nb[1]));
    gf = ggml_new_graph(step);
    ggml_build_forward_expand(gf, w2);
    EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    for (i = 0; i < LEN; i += 97) {
        const float want = i < LEN / 2 ? 4.0f * value_at(11, i) : 0.0f;
        EXPECT(ggml_get_f32_1d(cache, 5 * LEN + i) == want, "run %d: row 5 [%d] = %g, want %g (dead write %s)", run, i,
               ggml_get_f32_1d(cache, 5 * LEN + i), want, dead->name);
    }
    ggml_free(step);
    ggml_free(model);
}

/* 8. argmax: the last of tied maxima, as ggml's vector argmax. */
static void argmax_ties(int run) {
    struct ggml_context * ctx = new_context(1024 * 1024, false);
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
    const float v[15] = {1, 3, 3, 2, 0, -1, -1, -1, -1, -1, 7, 0, 7, 7, 6};
    struct ggml_tensor * am;
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    memcpy(a->data, v, sizeof(v));
    am = ggml_argmax(ctx, a);
    ggml_build_forward_expand(gf, am);
    EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(ggml_get_i32_1d(am, 0) == 2 && ggml_get_i32_1d(am, 1) == 4 && ggml_get_i32_1d(am, 2) == 3, "run %d: %d %d %d", run,
           ggml_get_i32_1d(am, 0), ggml_get_i32_1d(am, 1), ggml_get_i32_1d(am, 2));
    ggml_free(ctx);
}

/* 9. An edge added after both nodes are in the graph, against the node list, is honoured;
 * a cycle of edges is refused. */
static int g_order[4], g_n_order;
static void log_order(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) {
    (void) dst; (void) a; (void) nth;
    if (ith == 0) g_order[g_n_order++] = *(const int *) ud;
}

static void late_edges(int run) {
    static const int ids[3] = {0, 1, 2};
    struct ggml_context * ctx = new_context(1024 * 1024, false);
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    struct ggml_tensor * a = ggml_map_custom1(ctx, x, log_order, 1, (void *) &ids[0]);
    struct ggml_tensor * b = ggml_map_custom1(ctx, x, log_order, 1, (void *) &ids[1]);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, a);
    ggml_build_forward_expand(gf, b);
    ggml_add_control_dep(ctx, a, b); /* a after b, against the list */
    g_n_order = 0;
    EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "run %d", run);
    EXPECT(g_n_order == 2 && g_order[0] == 1 && g_order[1] == 0, "run %d: order %d %d", run, g_order[0], g_order[1]);
    ggml_add_control_dep(ctx, b, a); /* now a cycle */
    g_n_order = 0;
    EXPECT(compute_graph(gf, run) == GGML_STATUS_FAILED, "run %d: a cycle of edges ran", run);
    EXPECT(g_n_order == 0, "run %d", run);
    ggml_free(ctx);
}

int main(void) {
    int run;
    setvbuf(stdout, NULL, _IONBF, 0); /* failures stay visible if a bug crashes the program */
    for (run = 0; run < N_RUNS; ++run) {
        outputs_and_sinks_are_kept(run);
        one_allocator_two_graphs(run);
        reserve_then_allocate(run);
        edges_outlive_their_context(run);
        two_contexts_and_dead_writes(run);
        argmax_ties(run);
        late_edges(run);
    }
    return report("test-ggml-alloc");
}
