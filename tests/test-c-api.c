/* The library used from plain C99, the way a ggml program does: a context with a
 * memory size, tensors, a view, mul_mat + add, a graph computed on 2 threads, results
 * read back element by element and compared with naive loops; then kvgraph.h's sampler
 * chain, so the header is checked as C. Exit code 0 = pass. */
#include "ggml.h"
#include "ggml-cpu.h"
#include "kvgraph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { K = 37, N = 13, M = 9, ROWS = 20, FIRST_ROW = 5 };

static float value_a(int n, int k) { return (float) ((n * 7 + k * 3) % 11) * 0.125f - 0.5f; }
static float value_x(int r, int k) { return (float) ((r * 5 + k) % 13) * 0.0625f - 0.25f; }
static float value_bias(int n) { return 0.5f * (float) n - 2.0f; }

/* A chain of top-k 2 and a seeded draw: only the two best logits come out, both of them, and
 * apply on a token data array selects one of the two it keeps. Returns the number of failures. */
static int check_sampler_chain(void) {
    const float logits[5] = {0.5f, 3.0f, -1.0f, 2.5f, 1.0f};
    struct kvg_token_data data[5];
    struct kvg_token_data_array arr;
    struct kvg_sampler * chain = kvg_sampler_chain_new();
    int i, failures = 0, seen1 = 0, seen3 = 0;

    if (!chain || !kvg_sampler_chain_add(chain, kvg_sampler_init_top_k(2)) ||
        !kvg_sampler_chain_add(chain, kvg_sampler_init_temp(1.0f)) ||
        !kvg_sampler_chain_add(chain, kvg_sampler_init_dist(1234))) {
        printf("building the sampler chain failed\n");
        kvg_sampler_free(chain);
        return 1;
    }
    if (kvg_sampler_chain_n(chain) != 3 || kvg_sampler_chain_add(NULL, NULL) || kvg_sampler_chain_n(NULL) != -1) {
        printf("kvg_sampler_chain_n / _add on NULL: unexpected results\n");
        ++failures;
    }
    for (i = 0; i < 200; ++i) {
        const kvg_token t = kvg_sampler_sample(chain, logits, 5);
        seen1 += t == 1;
        seen3 += t == 3;
        if (t != 1 && t != 3) {
            printf("chain sampled %d, outside the top 2\n", (int) t);
            ++failures;
        }
    }
    if (!seen1 || !seen3) {
        printf("chain never sampled one of the top 2 (%d, %d)\n", seen1, seen3);
        ++failures;
    }
    for (i = 0; i < 5; ++i) {
        data[i].id = i;
        data[i].logit = logits[i];
        data[i].p = 0.0f;
    }
    arr.data = data;
    arr.size = 5;
    arr.selected = -1;
    arr.sorted = false;
    if (!kvg_sampler_apply(chain, &arr) || arr.size != 2 || arr.selected < 0 || arr.selected >= 2 || !arr.sorted) {
        printf("kvg_sampler_apply: size %d selected %d\n", (int) arr.size, (int) arr.selected);
        ++failures;
    }
    kvg_sampler_free(chain);
    return failures;
}

int main(void) {
    struct ggml_init_params params;
    struct ggml_context * ctx;
    struct ggml_tensor *a, *x, *xv, *bias, *prod, *out, *corner;
    struct ggml_cgraph * gf;
    enum ggml_status status;
    int n, m, k, failures = 0, checked = 0;

    params.mem_size = 16 * 1024 * 1024;
    params.mem_buffer = NULL;
    params.no_alloc = false;
    ctx = ggml_init(params);
    if (!ctx) {
        printf("ggml_init failed\n");
        return 1;
    }

    a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);    /* N rows of K */
    x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ROWS); /* ROWS rows of K */
    bias = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, 1); /* broadcast over rows */
    for (n = 0; n < N; ++n) {
        for (k = 0; k < K; ++k) ggml_set_f32_1d(a, n * K + k, value_a(n, k));
        ggml_set_f32_1d(bias, n, value_bias(n));
    }
    for (m = 0; m < ROWS; ++m) {
        for (k = 0; k < K; ++k) ggml_set_f32_1d(x, m * K + k, value_x(m, k));
    }

    /* rows FIRST_ROW .. FIRST_ROW+M-1 of x, as a view */
    xv = ggml_view_2d(ctx, x, K, M, x->nb[1], FIRST_ROW * x->nb[1]);
    prod = ggml_mul_mat(ctx, a, xv); /* [N, M] */
    out = ggml_add(ctx, prod, bias);
    /* a 2x3 corner of the result read through a strided view */
    corner = ggml_view_2d(ctx, out, 2, 3, out->nb[1], out->nb[0] * 1);

    gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_build_forward_expand(gf, corner);

    status = ggml_graph_compute_with_ctx(ctx, gf, 2);
    if (status != GGML_STATUS_SUCCESS) {
        printf("ggml_graph_compute_with_ctx returned %d\n", (int) status);
        ggml_free(ctx);
        return 1;
    }

    if (out->ne[0] != N || out->ne[1] != M) {
        printf("result shape [%lld, %lld], expected [%d, %d]\n", (long long) out->ne[0], (long long) out->ne[1], N, M);
        ggml_free(ctx);
        return 1;
    }

    for (m = 0; m < M; ++m) {
        for (n = 0; n < N; ++n) {
            double expect = value_bias(n);
            float got;
            for (k = 0; k < K; ++k) expect += (double) value_a(n, k) * value_x(FIRST_ROW + m, k);
            got = ggml_get_f32_1d(out, m * N + n);
            ++checked;
            if (fabs(got - expect) > 1e-4 * (1.0 + fabs(expect))) {
                if (failures < 10) printf("out[%d][%d] = %f, expected %f\n", m, n, got, expect);
                ++failures;
            }
        }
    }
    /* corner[r][c] = out[r][c + 1] */
    for (m = 0; m < 3; ++m) {
        for (n = 0; n < 2; ++n) {
            const float got = ggml_get_f32_1d(corner, m * 2 + n);
            const float want = ggml_get_f32_1d(out, m * N + n + 1);
            ++checked;
            if (got != want) {
                printf("corner[%d][%d] = %f, expected %f\n", m, n, got, want);
                ++failures;
            }
        }
    }

    ggml_free(ctx);
    failures += check_sampler_chain();
    ++checked;
    /* C may pass any int where an enum is expected: a value kvg_status does not name reads as unknown */
    if (strcmp(kvg_status_name((enum kvg_status) 99), "unknown") != 0 || strcmp(kvg_status_name(KVG_STATUS_IO), "i/o error") != 0) {
        printf("kvg_status_name: wrong names\n");
        ++failures;
    }
    ++checked;
    printf("test-c-api: %d checks, %d mismatches\n", checked, failures);
    return failures == 0 ? 0 : 1;
}
