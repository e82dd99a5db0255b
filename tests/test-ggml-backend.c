/* ggml's backend API driven as ggml's own tests and simple-backend do it, in C: tensors of a
 * no_alloc context placed in a CPU buffer, inputs set with ggml_backend_tensor_set, graphs
 * planned by a gallocr made for the backend's buffer type or by a scheduler, computed by
 * ggml_backend_graph_compute, results read back with ggml_backend_tensor_get and compared
 * with plain loops; plus the tensor allocator, bounds, devices and the log callback. */
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "ggml-program-common.h"

#include <string.h>

enum { K = 37, N = 11, M = 5 };

/* y[n][m] = sum_k w[n][k] x[m][k] + b[n], then relu(y) * 2 via views and in-place ops */
static void reference(const float * w, const float * x, const float * b, float * y) {
    int n, m, k;
    for (m = 0; m < M; ++m)
        for (n = 0; n < N; ++n) {
            double s = b[n];
            for (k = 0; k < K; ++k) s += (double) w[n * K + k] * x[m * K + k];
            y[m * N + n] = (float) (s > 0 ? 2 * s : 0);
        }
}

static struct ggml_cgraph * build(struct ggml_context * ctx, struct ggml_tensor * w, struct ggml_tensor * x, struct ggml_tensor * b) {
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    struct ggml_tensor * y = ggml_add(ctx, ggml_mul_mat(ctx, w, x), b);
    y = ggml_scale_inplace(ctx, ggml_relu(ctx, y), 2.0f);
    ggml_set_name(y, "y");
    ggml_set_output(y);
    ggml_build_forward_expand(gf, y);
    return gf;
}

static void check_y(struct ggml_tensor * y, const float * want, const char * how) {
    float got[M * N];
    int i, bad = 0;
    ggml_backend_tensor_get(y, got, 0, sizeof got);
    for (i = 0; i < M * N; ++i) bad += !close_enough(got[i], want[i]);
    EXPECT(bad == 0, "%s: %d of %d values wrong", how, bad, M * N);
}

static void test_gallocr_and_sched(void) {
    float w[N * K], x[M * K], b[N], want[M * N];
    int run;
    struct ggml_context * model = new_context(4 * ggml_tensor_overhead(), true);
    struct ggml_tensor * tw = ggml_new_tensor_2d(model, GGML_TYPE_F32, K, N);
    struct ggml_tensor * tx = ggml_new_tensor_2d(model, GGML_TYPE_F32, K, M);
    struct ggml_tensor * tb = ggml_new_tensor_1d(model, GGML_TYPE_F32, N);
    ggml_backend_t backend = ggml_backend_cpu_init();
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(model, backend);
    EXPECT(buf != NULL && ggml_backend_is_cpu(backend), "no buffer");
    EXPECT(ggml_backend_buffer_get_size(buf) >= sizeof w + sizeof x + sizeof b, "buffer of %zu bytes", ggml_backend_buffer_get_size(buf));
    EXPECT(tw->buffer == buf && tw->data != NULL && ggml_backend_buffer_is_host(buf), "weights not placed in the buffer");
    /* inputs written through the tensors (ggml_set_f32_1d needs memory, which the buffer gave) */
    fill_f32(tw, 1);
    fill_f32(tx, 2);
    fill_f32(tb, 3);
    ggml_backend_tensor_get(tw, w, 0, sizeof w);
    ggml_backend_tensor_get(tx, x, 0, sizeof x);
    ggml_backend_tensor_get(tb, b, 0, sizeof b);
    ggml_backend_tensor_set(tb, b, 0, sizeof b); /* a round trip changes nothing */
    reference(w, x, b, want);

    for (run = 0; run < N_RUNS; ++run) {
        /* gallocr made for the backend's buffer type, graph in its own context (as ggml's tests) */
        struct ggml_context * gctx = new_context(ggml_tensor_overhead() * 16 + ggml_graph_overhead(), true);
        struct ggml_cgraph * gf = build(gctx, tw, tx, tb);
        ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
        ggml_backend_cpu_set_n_threads(backend, RUN_THREADS[run]);
        ggml_cpu_set_sched_mode(RUN_MODE[run]);
        EXPECT(ggml_gallocr_alloc_graph(galloc, gf), "alloc_graph");
        EXPECT(ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS, "compute");
        check_y(ggml_graph_node(gf, -1), want, "gallocr");
        check_y(ggml_graph_get_tensor(gf, "y"), want, "by name");
        ggml_gallocr_free(galloc);
        ggml_free(gctx);
        ggml_cpu_set_sched_mode(GGML_SCHED_DAG);
    }
    {
        /* the scheduler, as simple-backend: reserve, then compute (allocating) twice */
        ggml_backend_t backends[1];
        ggml_backend_sched_t sched;
        struct ggml_context * gctx = new_context(ggml_tensor_overhead() * 16 + ggml_graph_overhead(), true);
        struct ggml_cgraph * gf = build(gctx, tw, tx, tb);
        backends[0] = backend;
        sched = ggml_backend_sched_new(backends, NULL, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
        EXPECT(sched != NULL && ggml_backend_sched_get_n_backends(sched) == 1, "sched_new");
        EXPECT(ggml_backend_sched_reserve(sched, gf), "reserve");
        EXPECT(ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS, "sched compute");
        check_y(ggml_graph_node(gf, -1), want, "sched");
        ggml_backend_sched_reset(sched);
        EXPECT(ggml_backend_sched_alloc_graph(sched, gf), "sched alloc");
        EXPECT(ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS, "compute after sched alloc");
        check_y(ggml_graph_node(gf, -1), want, "sched alloc + backend compute");
        ggml_backend_sched_free(sched);
        ggml_free(gctx);
    }
    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    ggml_free(model);
}

/* ggml_tallocr in a buffer of ggml_backend_alloc_buffer, views initialized from roots, memset */
static void test_tallocr(void) {
    ggml_backend_t backend = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
    struct ggml_context * ctx = new_context(8 * ggml_tensor_overhead(), true);
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10);
    struct ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    struct ggml_tensor * v = ggml_view_1d(ctx, a, 4, 3 * sizeof(float));
    ggml_backend_buffer_t buf = ggml_backend_alloc_buffer(backend, 2 * 64);
    struct ggml_tallocr ta = ggml_tallocr_new(buf);
    float vals[10], got[4];
    int i;
    EXPECT(ggml_tallocr_alloc(&ta, a) == GGML_STATUS_SUCCESS, "a");
    EXPECT(ggml_tallocr_alloc(&ta, b) == GGML_STATUS_SUCCESS, "b");
    EXPECT(((uintptr_t) a->data) % 64 == 0 && ((uintptr_t) b->data) % 64 == 0 && a->data != b->data, "alignment");
    EXPECT(ggml_tallocr_alloc(&ta, a) == GGML_STATUS_ALLOC_FAILED, "a third tensor does not fit");
    EXPECT(ggml_backend_view_init(v) == GGML_STATUS_SUCCESS && v->data == (char *) a->data + 12, "view");
    for (i = 0; i < 10; ++i) vals[i] = (float) i;
    ggml_backend_tensor_set(a, vals, 0, sizeof vals);
    ggml_backend_tensor_memset(a, 0, 8 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get(v, got, 0, sizeof got);
    EXPECT(got[0] == 3 && got[3] == 6, "view reads %g %g", got[0], got[3]);
    ggml_backend_tensor_get(a, vals, 0, sizeof vals);
    EXPECT(vals[7] == 7 && vals[8] == 0 && vals[9] == 0, "memset");
    EXPECT(ggml_backend_dev_count() == 1 && ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) == NULL, "devices");
    EXPECT(ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_GPU, NULL) == NULL, "no GPU backend");
    EXPECT(strcmp(ggml_backend_name(backend), "CPU") == 0, "name");
    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    ggml_free(ctx);
}

/* the library's messages reach the callback; NULL restores the default */
static int g_logged_errors;
static char g_last[256];
static void capture(enum ggml_log_level level, const char * text, void * user) {
    if (level == GGML_LOG_LEVEL_ERROR) ++g_logged_errors;
    strncpy(g_last, text, sizeof g_last - 1);
    *(int *) user += 1;
}
static void test_log(void) {
    int calls = 0;
    ggml_log_callback cb;
    void * ud;
    struct ggml_context * ctx = new_context(4 * ggml_tensor_overhead(), true);
    struct ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 100);
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64);
    struct ggml_tallocr ta = ggml_tallocr_new(buf);
    ggml_log_set(capture, &calls);
    ggml_log_get(&cb, &ud);
    EXPECT(cb == capture && ud == &calls, "log_get");
    EXPECT(ggml_tallocr_alloc(&ta, t) == GGML_STATUS_ALLOC_FAILED, "400 bytes in 64");
    EXPECT(calls == 1 && g_logged_errors == 1 && strstr(g_last, "the buffer has") != NULL, "calls %d: %s", calls,
           g_last);
    ggml_log_set(NULL, NULL);
    ggml_log_get(&cb, &ud);
    EXPECT(cb != capture && cb != NULL, "default restored");
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

/* ggml 0.21's numbering (its public ggml.h / ggml-backend.h): a program built against ggml's
 * headers, or one that stores these values, sees the same numbers here */
static void test_enum_values(void) {
    static const struct { int got, want; const char * name; } v[] = {
        {GGML_OP_DUP, 1, "GGML_OP_DUP"},
        {GGML_OP_ADD, 2, "GGML_OP_ADD"},
        {GGML_OP_SUB, 6, "GGML_OP_SUB"},
        {GGML_OP_MUL, 7, "GGML_OP_MUL"},
        {GGML_OP_DIV, 8, "GGML_OP_DIV"},
        {GGML_OP_SQR, 9, "GGML_OP_SQR"},
        {GGML_OP_SQRT, 10, "GGML_OP_SQRT"},
        {GGML_OP_SUM_ROWS, 15, "GGML_OP_SUM_ROWS"},
        {GGML_OP_ARGMAX, 18, "GGML_OP_ARGMAX"},
        {GGML_OP_CONCAT, 22, "GGML_OP_CONCAT"},
        {GGML_OP_NORM, 24, "GGML_OP_NORM"},
        {GGML_OP_RMS_NORM, 25, "GGML_OP_RMS_NORM"},
        {GGML_OP_MUL_MAT, 29, "GGML_OP_MUL_MAT"},
        {GGML_OP_SCALE, 32, "GGML_OP_SCALE"},
        {GGML_OP_CPY, 34, "GGML_OP_CPY"},
        {GGML_OP_CONT, 35, "GGML_OP_CONT"},
        {GGML_OP_RESHAPE, 36, "GGML_OP_RESHAPE"},
        {GGML_OP_VIEW, 37, "GGML_OP_VIEW"},
        {GGML_OP_PERMUTE, 38, "GGML_OP_PERMUTE"},
        {GGML_OP_TRANSPOSE, 39, "GGML_OP_TRANSPOSE"},
        {GGML_OP_GET_ROWS, 40, "GGML_OP_GET_ROWS"},
        {GGML_OP_SET_ROWS, 42, "GGML_OP_SET_ROWS"},
        {GGML_OP_DIAG_MASK_INF, 44, "GGML_OP_DIAG_MASK_INF"},
        {GGML_OP_SOFT_MAX, 46, "GGML_OP_SOFT_MAX"},
        {GGML_OP_ROPE, 48, "GGML_OP_ROPE"},
        {GGML_OP_FLASH_ATTN_EXT, 74, "GGML_OP_FLASH_ATTN_EXT"},
        {GGML_OP_UNARY, 91, "GGML_OP_UNARY"},
        {GGML_OP_MAP_CUSTOM1, 92, "GGML_OP_MAP_CUSTOM1"},
        {GGML_OP_MAP_CUSTOM2, 93, "GGML_OP_MAP_CUSTOM2"},
        {GGML_OP_MAP_CUSTOM3, 94, "GGML_OP_MAP_CUSTOM3"},
        {GGML_OP_COUNT, 101, "GGML_OP_COUNT"},
        {GGML_UNARY_OP_RELU, 6, "GGML_UNARY_OP_RELU"},
        {GGML_UNARY_OP_GELU, 8, "GGML_UNARY_OP_GELU"},
        {GGML_UNARY_OP_SILU, 10, "GGML_UNARY_OP_SILU"},
        {GGML_UNARY_OP_COUNT, 22, "GGML_UNARY_OP_COUNT"},
        {GGML_TYPE_Q4_K, 12, "GGML_TYPE_Q4_K"},
        {GGML_TYPE_Q8_K, 15, "GGML_TYPE_Q8_K"},
        {GGML_TYPE_IQ4_NL, 20, "GGML_TYPE_IQ4_NL"},
        {GGML_TYPE_BF16, 30, "GGML_TYPE_BF16"},
        {GGML_TYPE_COUNT, 43, "GGML_TYPE_COUNT"},
        {GGML_STATUS_ALLOC_FAILED, -2, "GGML_STATUS_ALLOC_FAILED"},
        {GGML_STATUS_ABORTED, 1, "GGML_STATUS_ABORTED"},
        {GGML_TENSOR_FLAG_OUTPUT, 2, "GGML_TENSOR_FLAG_OUTPUT"},
        {GGML_LOG_LEVEL_ERROR, 4, "GGML_LOG_LEVEL_ERROR"},
        {GGML_BACKEND_BUFFER_USAGE_COMPUTE, 2, "GGML_BACKEND_BUFFER_USAGE_COMPUTE"},
        {GGML_BACKEND_DEVICE_TYPE_ACCEL, 3, "GGML_BACKEND_DEVICE_TYPE_ACCEL"},
        {GGML_PREC_F32, 10, "GGML_PREC_F32"},
        {GGML_SCHED_PRIO_LOW, -1, "GGML_SCHED_PRIO_LOW"},
        {GGML_SCHED_PRIO_REALTIME, 3, "GGML_SCHED_PRIO_REALTIME"},
    };
    size_t i;
    for (i = 0; i < sizeof v / sizeof v[0]; ++i) EXPECT(v[i].got == v[i].want, "%s = %d, ggml has %d", v[i].name, v[i].got, v[i].want);
    EXPECT(strcmp(ggml_op_name(GGML_OP_FLASH_ATTN_EXT), "FLASH_ATTN_EXT") == 0 && strcmp(ggml_op_name(GGML_OP_ARANGE), "ARANGE") == 0, "names");
    EXPECT(strcmp(ggml_unary_op_name(GGML_UNARY_OP_SILU), "SILU") == 0, "unary names");
}

/* ggml_custom_4d: dst[i] = sum over the args of arg[i] * (k + 1), rows split over the tasks;
 * ggml_custom_inplace: a += 1, read afterwards by an add that must see the new values */
static void weighted_sum(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    int64_t r, i;
    int k, n_args = 0;
    *(int *) userdata = 1;
    while (n_args < GGML_MAX_SRC && dst->src[n_args]) ++n_args;
    for (r = ith; r < ggml_nrows(dst); r += nth) {
        for (i = 0; i < dst->ne[0]; ++i) {
            float s = 0;
            for (k = 0; k < n_args; ++k) s += ggml_get_f32_1d(dst->src[k], r * dst->ne[0] + i) * (float) (k + 1);
            ggml_set_f32_1d(dst, r * dst->ne[0] + i, s);
        }
    }
}
static void add_one(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    int64_t i;
    (void) userdata;
    for (i = ith; i < ggml_nelements(dst); i += nth) ggml_set_f32_1d(dst, i, ggml_get_f32_1d(dst, i) + 1.0f);
}
static void test_custom(void) {
    int run;
    for (run = 0; run < N_RUNS; ++run) {
        struct ggml_context * ctx = new_context(16 << 20, false);
        struct ggml_tensor * args[3];
        struct ggml_tensor * c, * a, * inpl, * sum;
        struct ggml_cgraph * gf = ggml_new_graph(ctx);
        int called = 0, i, k;
        for (k = 0; k < 3; ++k) {
            args[k] = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4);
            fill_f32(args[k], 10 + k);
        }
        c = ggml_custom_4d(ctx, GGML_TYPE_F32, 5, 4, 1, 1, args, 3, weighted_sum, GGML_N_TASKS_MAX, &called);
        a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6);
        fill_f32(a, 20);
        inpl = ggml_custom_inplace(ctx, a, NULL, 0, add_one, 2, NULL);
        sum = ggml_add(ctx, a, a); /* reads a after the in-place write: a RAW edge orders them */
        ggml_build_forward_expand(gf, c);
        ggml_build_forward_expand(gf, inpl);
        ggml_build_forward_expand(gf, sum);
        EXPECT(compute_graph(gf, run) == GGML_STATUS_SUCCESS, "compute");
        EXPECT(called == 1 && c->src[2] == args[2] && c->op == GGML_OP_CUSTOM, "custom_4d wiring");
        for (i = 0; i < 20; ++i) {
            const float want = ggml_get_f32_1d(args[0], i) + 2 * ggml_get_f32_1d(args[1], i) + 3 * ggml_get_f32_1d(args[2], i);
            EXPECT(close_enough(ggml_get_f32_1d(c, i), want), "custom_4d[%d]", i);
        }
        for (i = 0; i < 6; ++i) EXPECT(ggml_get_f32_1d(sum, i) == 2 * (value_at(20, i) + 1), "in place then read [%d], run %d", i, run);
        ggml_free(ctx);
    }
}

/* ggml's signatures where kvgraph once had its own: they compile as ggml programs use them */
static void test_signatures(void) {
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(2);
    struct ggml_threadpool * pool;
    struct ggml_context * ctx = new_context(16 * ggml_tensor_overhead(), true);
    struct ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 2, 1);
    struct ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 4, 1);
    struct ggml_tensor * fa = ggml_flash_attn_ext(ctx, q, k, k, NULL, 1.0f, 0.0f, 0.0f);
    struct gguf_init_params gp = {true, NULL};
    const char not_gguf[8] = "GGUX";
    EXPECT(tpp.n_threads == 2 && tpp.prio == GGML_SCHED_PRIO_NORMAL && !tpp.paused, "threadpool params defaults");
    pool = ggml_threadpool_new(&tpp);
    EXPECT(pool != NULL, "threadpool from ggml's params");
    ggml_threadpool_free(pool);
    EXPECT(ggml_flash_attn_ext_get_prec(fa) == GGML_PREC_DEFAULT, "default precision");
    ggml_flash_attn_ext_set_prec(fa, GGML_PREC_F32);
    EXPECT(ggml_flash_attn_ext_get_prec(fa) == GGML_PREC_F32, "precision hint kept");
    EXPECT(gguf_init_from_buffer(not_gguf, sizeof not_gguf, gp) == NULL, "gguf_init_from_buffer refuses a bad magic");
    ggml_free(ctx);
}

int main(void) {
    ggml_cpu_init();
    test_signatures();
    test_enum_values();
    test_custom();
    test_gallocr_and_sched();
    test_tallocr();
    test_log();
    {
        /* compute_graph of the common helpers on a backend-allocated graph: same executor */
        ggml_backend_t backend = ggml_backend_cpu_init();
        struct ggml_context * ctx = new_context(8 * ggml_tensor_overhead() + ggml_graph_overhead(), true);
        struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
        struct ggml_tensor * s = ggml_sqr(ctx, a);
        struct ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_backend_buffer_t buf;
        int i;
        ggml_set_output(s);
        ggml_build_forward_expand(gf, s);
        buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
        for (i = 0; i < 8; ++i) ggml_set_f32_1d(a, i, (float) i - 3);
        EXPECT(compute_graph(gf, 0) == GGML_STATUS_SUCCESS, "compute");
        for (i = 0; i < 8; ++i) EXPECT(ggml_get_f32_1d(s, i) == (float) ((i - 3) * (i - 3)), "sqr %d", i);
        ggml_backend_buffer_free(buf);
        ggml_backend_free(backend);
        ggml_free(ctx);
    }
    return report("test-ggml-backend");
}
