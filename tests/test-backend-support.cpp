// The CPU backend's answers to ggml's test-backend-ops: supports_op from the support
// table, the executor refusing an op it does not compute (a status, no crash, nothing
// run), the registry's extra functions, reference mode through set_use_ref, the backend
// comparison, and ggml's sizes for the types kvgraph only names. Values are checked
// against naive loops written here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem = 16 << 20) {
        ggml_init_params p = {mem, nullptr, false};
        ctx = ggml_init(p);
    }
    ~ctx_guard() { ggml_free(ctx); }
};

void fill(ggml_tensor * t, float scale) {
    float * d = (float *) t->data;
    for (int64_t i = 0; i < ggml_nelements(t); ++i) d[i] = scale * (float) ((i * 37) % 17 - 8);
}

} // namespace

TEST_CASE("supports_op: computed ops and types yes, others no") {
    ctx_guard g;
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor * b = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 8, 4);
    CHECK(ggml_backend_supports_op(be, a)); // a leaf
    CHECK(ggml_backend_supports_op(be, ggml_add(g.ctx, a, b)));
    CHECK(ggml_backend_supports_op(be, ggml_scale(g.ctx, a, 2.0f)));
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_scale_bias(g.ctx, a, 2.0f, 1.0f)));
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_sin(g.ctx, a)));
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_clamp(g.ctx, a, -1.0f, 1.0f)));
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_pad_circular(g.ctx, a, 1, 1, 0, 0)));
    CHECK(ggml_backend_supports_op(be, ggml_pad(g.ctx, a, 1, 1, 0, 0)));
    ggml_tensor * i8 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, 8, 4);
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_add(g.ctx, i8, i8)));  // elementwise: floats only
    ggml_tensor * w = ggml_new_tensor_2d(g.ctx, GGML_TYPE_MXFP4, 32, 4); // named, no kernel
    ggml_tensor * x = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 32, 2);
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_mul_mat(g.ctx, w, x)));
    ggml_tensor * wq = ggml_new_tensor_2d(g.ctx, GGML_TYPE_Q4_0, 32, 4);
    CHECK(ggml_backend_supports_op(be, ggml_mul_mat(g.ctx, wq, x)));
    // iq2_xxs: decoded and multiplied, not encoded (no copies into it)
    ggml_tensor *w2 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_IQ2_XXS, 256, 4),
                *x2 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 256, 4);
    CHECK(ggml_backend_supports_op(be, ggml_mul_mat(g.ctx, w2, x2)));
    CHECK(ggml_backend_supports_op(be, ggml_cpy(g.ctx, w2, x2)));
    CHECK_FALSE(ggml_backend_supports_op(be, ggml_cpy(g.ctx, x2, w2)));
    ggml_backend_free(be);
}

TEST_CASE("the executor refuses a graph with an op it does not compute, before running any node") {
    ctx_guard g;
    ggml_tensor * a = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 16);
    fill(a, 0.25f);
    ggml_tensor * first = ggml_scale(g.ctx, a, 3.0f);
    std::memset(first->data, 0, ggml_nbytes(first));
    ggml_tensor * s = ggml_sin(g.ctx, first);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, s);
    CHECK(ggml_graph_compute_with_ctx(g.ctx, gf, 2) == GGML_STATUS_FAILED);
    for (int i = 0; i < 16; ++i) CHECK(((float *) first->data)[i] == 0.0f); // the scale did not run
    CHECK(std::strcmp(ggml_status_to_string(GGML_STATUS_FAILED), "GGML status: error") == 0);
}

TEST_CASE("new op constructors: ggml's shapes and params") {
    ctx_guard g;
    ggml_tensor * a = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 6, 1, 3, 2);
    ggml_tensor * d = ggml_diag(g.ctx, a);
    CHECK((d->ne[0] == 6 && d->ne[1] == 6 && d->ne[2] == 3 && d->ne[3] == 2 && d->op == GGML_OP_DIAG));
    ggml_tensor * c = ggml_clamp(g.ctx, a, -2.0f, 5.0f);
    float mm[2];
    std::memcpy(mm, c->op_params, sizeof(mm));
    CHECK((mm[0] == -2.0f && mm[1] == 5.0f && c->op == GGML_OP_CLAMP));
    ggml_tensor * cols = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 3 * 4, 10); // K = 3, OC = 4, T_in = 10
    ggml_tensor * im = ggml_col2im_1d(g.ctx, cols, 2, 4, 1);
    CHECK((im->ne[0] == (10 - 1) * 2 + 3 - 2 && im->ne[1] == 4));
    ggml_tensor * eq = ggml_count_equal(g.ctx, a, a);
    CHECK((eq->type == GGML_TYPE_I64 && ggml_nelements(eq) == 1));
    ggml_tensor * u = ggml_xielu(g.ctx, a, 0.8f, 0.8f, 0.5f, 1e-6f);
    CHECK((u->op == GGML_OP_UNARY && ggml_get_unary_op(u) == GGML_UNARY_OP_XIELU));
}

TEST_CASE("types kvgraph only names have ggml's sizes") {
    CHECK((ggml_blck_size(GGML_TYPE_MXFP4) == 32 && ggml_type_size(GGML_TYPE_MXFP4) == 17));
    CHECK((ggml_blck_size(GGML_TYPE_Q8_1) == 32 && ggml_type_size(GGML_TYPE_Q8_1) == 36));
    CHECK((ggml_blck_size(GGML_TYPE_IQ2_XXS) == 256 && ggml_type_size(GGML_TYPE_IQ2_XXS) == 66));
    CHECK((ggml_blck_size(GGML_TYPE_TQ1_0) == 256 && ggml_type_size(GGML_TYPE_TQ1_0) == 54));
    CHECK((ggml_blck_size(GGML_TYPE_F64) == 1 && ggml_type_size(GGML_TYPE_F64) == 8));
    const bool no_decoder = ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float == nullptr;
    CHECK(no_decoder);
}

TEST_CASE("registry: one CPU entry; proc addresses; reference mode restores the path") {
    REQUIRE(ggml_backend_reg_count() == 1);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_dev_get(0));
    REQUIRE(reg == ggml_backend_reg_get(0));
    CHECK(std::strcmp(ggml_backend_reg_name(reg), "CPU") == 0);
    CHECK(ggml_backend_reg_dev_get(reg, 0) == ggml_backend_dev_get(0));
    CHECK(ggml_backend_reg_get_proc_address(reg, "no_such_function") == nullptr);
    auto set_use_ref =
        (void (*)(ggml_backend_t, bool)) ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_use_ref");
    const bool has_use_ref = set_use_ref != nullptr;
    REQUIRE(has_use_ref);
    auto get_features =
        (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    const bool has_features = get_features != nullptr;
    REQUIRE(has_features);
    CHECK(get_features(reg)[0].name != nullptr);
    CHECK(get_features(reg)[1].name == nullptr);

    // q4_0 weights [64, 5] x f32 [64, 3] in reference mode against a naive loop over decoded weights
    ctx_guard g;
    const int K = 64, M = 5, N = 3;
    ggml_tensor * wf = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, K, M);
    fill(wf, 0.125f);
    ggml_tensor * w = ggml_new_tensor_2d(g.ctx, GGML_TYPE_Q4_0, K, M);
    ggml_quantize_chunk(GGML_TYPE_Q4_0, (const float *) wf->data, w->data, 0, M, K, nullptr);
    std::vector<float> wd(K * M);
    ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(w->data, wd.data(), K * M);
    ggml_tensor * x = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, K, N);
    fill(x, 0.5f);
    ggml_tensor * y = ggml_mul_mat(g.ctx, w, x);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, y);
    ggml_backend_t be = ggml_backend_cpu_init();
    set_use_ref(be, true);
    const ggml_cpu_features before = ggml_cpu_get_features();
    REQUIRE(ggml_backend_graph_compute(be, gf) == GGML_STATUS_SUCCESS);
    CHECK(ggml_cpu_get_features() == before);
    CHECK(ggml_cpu_get_sched_mode() == GGML_SCHED_DAG);
    for (int n = 0; n < N; ++n) {
        for (int m = 0; m < M; ++m) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += (double) wd[m * K + k] * ((float *) x->data)[n * K + k];
            // activations are rounded to q8_0 (steps of max/127): about 0.3% here
            CHECK(((float *) y->data)[n * M + m] == doctest::Approx(s).epsilon(1e-2));
        }
    }
    ggml_backend_free(be);
}

namespace {
struct seen {
    int calls = 0;
    double max_diff = 0;
};
bool record(int, ggml_tensor * t1, ggml_tensor * t2, void * ud) {
    seen * s = (seen *) ud;
    s->calls++;
    for (int64_t i = 0; i < ggml_nelements(t1); ++i) {
        s->max_diff = std::fmax(s->max_diff, std::fabs(ggml_get_f32_1d(t1, (int) i) - ggml_get_f32_1d(t2, (int) i)));
    }
    return true;
}
} // namespace

TEST_CASE("compare_graph_backend: node by node and by test nodes, on a copy") {
    ctx_guard g;
    ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 8, 3);
    fill(a, 0.5f);
    ggml_tensor * b = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 8, 3);
    fill(b, -0.25f);
    ggml_tensor * s = ggml_add(g.ctx, a, b);
    ggml_tensor * t = ggml_transpose(g.ctx, s); // a view: no callback
    ggml_tensor * r = ggml_cont(g.ctx, t);
    ggml_tensor * out = ggml_soft_max(g.ctx, r);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_t b1 = ggml_backend_cpu_init(), b2 = ggml_backend_cpu_init();
    ggml_backend_cpu_set_use_ref(b2, true);
    seen all;
    CHECK(ggml_backend_compare_graph_backend(b1, b2, gf, record, &all, nullptr, 0));
    CHECK(all.calls == ggml_graph_n_nodes(gf) - 1);
    CHECK(all.max_diff < 1e-6);
    // the first backend computed the original graph: the sum is a + b
    for (int i = 0; i < 24; ++i) CHECK(((float *) s->data)[i] == ((float *) a->data)[i] + ((float *) b->data)[i]);
    seen one;
    const ggml_tensor * nodes[] = {out};
    CHECK(ggml_backend_compare_graph_backend(b1, b2, gf, record, &one, nodes, 1));
    CHECK(one.calls == 1);
    CHECK(one.max_diff < 1e-6);
    ggml_backend_free(b1);
    ggml_backend_free(b2);
}
