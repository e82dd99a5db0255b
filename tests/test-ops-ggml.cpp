// ggml's other ops in kvgraph (the unary ops after silu, generators, rearrangements,
// reductions) against naive references written here, with the harness of test-ops.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "ops-common.h"

TEST_CASE("ggml's other unary ops against double-precision definitions, every layout, f16, in place") {
    const int64_t ne[4] = {33, 7, 3, 1};
    std::vector<float> v = random_values(count(ne), 31, -6.0f, 6.0f);
    for (size_t i = 0; i < v.size(); i += 17) v[i] = std::round(v[i]) + (i % 2 ? 0.5f : 0.0f); // ties and integers
    v[3] = 0.0f;
    v[5] = 25.0f; // softplus above its threshold
    struct U { const char * name; ggml_tensor * (*make)(ggml_context *, ggml_tensor *); ggml_tensor * (*make_in)(ggml_context *, ggml_tensor *);
               double (*ref)(double); };
    const U ops[] = {
        {"abs", ggml_abs, ggml_abs_inplace, [](double x) { return std::fabs(x); }},
        {"sgn", ggml_sgn, ggml_sgn_inplace, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }},
        {"neg", ggml_neg, ggml_neg_inplace, [](double x) { return -x; }},
        {"step", ggml_step, ggml_step_inplace, [](double x) { return x > 0 ? 1.0 : 0.0; }},
        {"tanh", ggml_tanh, ggml_tanh_inplace, [](double x) { return std::tanh(x); }},
        {"elu", ggml_elu, ggml_elu_inplace, [](double x) { return x > 0 ? x : std::exp(x) - 1; }},
        {"sigmoid", ggml_sigmoid, ggml_sigmoid_inplace, [](double x) { return 1 / (1 + std::exp(-x)); }},
        {"gelu_quick", ggml_gelu_quick, ggml_gelu_quick_inplace, [](double x) { return x / (1 + std::exp(-1.702 * x)); }},
        {"hardswish", ggml_hardswish, ggml_hardswish_inplace, [](double x) { return x * std::min(1.0, std::max(0.0, (x + 3) / 6)); }},
        {"hardsigmoid", ggml_hardsigmoid, ggml_hardsigmoid_inplace, [](double x) { return std::min(1.0, std::max(0.0, (x + 3) / 6)); }},
        {"exp", ggml_exp, ggml_exp_inplace, [](double x) { return std::exp(x); }},
        {"expm1", ggml_expm1, ggml_expm1_inplace, [](double x) { return std::expm1(x); }},
        {"softplus", ggml_softplus, ggml_softplus_inplace, [](double x) { return x > 20 ? x : std::log(1 + std::exp(x)); }},
        {"gelu_erf", ggml_gelu_erf, ggml_gelu_erf_inplace, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
        {"floor", ggml_floor, ggml_floor_inplace, [](double x) { return std::floor(x); }},
        {"ceil", ggml_ceil, ggml_ceil_inplace, [](double x) { return std::ceil(x); }},
        {"round", ggml_round, ggml_round_inplace, [](double x) { return x < 0 ? -std::floor(-x + 0.5) : std::floor(x + 0.5); }},
        {"trunc", ggml_trunc, ggml_trunc_inplace, [](double x) { return x < 0 ? -std::floor(-x) : std::floor(x); }},
    };
    for (const U & u : ops) {
        for (int variant = 0; variant < 4; ++variant) {
            const ggml_type t = variant == 3 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 1 ? TRANSPOSED : variant == 2 ? PERMUTED_ROWS : CONTIG;
            const bool inpl = variant == 2;
            const std::string name = u.name;
            CAPTURE(name); CAPTURE(variant);
            std::vector<float> sv;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, l, v);
                sv = values(a);
                return inpl ? u.make_in(ctx, a) : u.make(ctx, a);
            });
            std::vector<double> want(sv.size());
            for (size_t i = 0; i < sv.size(); ++i) { // an f16 result is the f16 nearest (inf past its range)
                want[i] = u.ref(sv[i]);
                if (t == GGML_TYPE_F16 && std::fabs(want[i]) > 65504) want[i] = ref_store(t, (float) want[i]);
            }
            check_close(got, want, 1e-6, t == GGML_TYPE_F16 ? 1e-3 : 2e-6);
        }
    }
}

TEST_CASE("arange, timestep_embedding, pad_reflect_1d and roll against naive loops") {
    // arange: the count is ceil((stop - start) / step), values start + i * step
    for (auto a : std::vector<std::array<float, 3>>{{0, 3, 1}, {-1.5f, 2, 0.5f}, {5, -1, -1.5f}, {0, 0, 1}}) {
        const std::vector<float> got = run_node([&](ggml_context * ctx) { return ggml_arange(ctx, a[0], a[1], a[2]); });
        const size_t n = (size_t) std::ceil((a[1] - a[0]) / a[2]);
        REQUIRE(got.size() == n);
        for (size_t i = 0; i < n; ++i) CHECK(got[i] == doctest::Approx(a[0] + a[2] * i));
    }
    // timestep embedding: cos then sin of t * period^(-j / half); odd dims end in 0
    const std::vector<float> ts = {0.0f, 1.0f, 12.0f, 999.0f};
    for (int dim : {8, 15}) {
        const int64_t ne[4] = {4, 1, 1, 1};
        const std::vector<float> got = run_node([&](ggml_context * ctx) {
            return ggml_timestep_embedding(ctx, make_input(ctx, GGML_TYPE_F32, ne, CONTIG, ts), dim, 10000);
        });
        REQUIRE(got.size() == (size_t) dim * 4);
        const int half = dim / 2;
        std::vector<double> want;
        for (float t : ts) {
            for (int j = 0; j < dim; ++j) {
                const int k = j % half;
                const double arg = t * std::pow(10000.0, -(double) k / half);
                want.push_back(j >= 2 * half ? 0.0 : j < half ? std::cos(arg) : std::sin(arg));
            }
        }
        check_close(got, want, 2e-4, 0);
    }
    // pad_reflect_1d over rows of a permuted input; roll in every dimension
    const int64_t ne[4] = {6, 3, 2, 2};
    const std::vector<float> v = random_values(count(ne), 33);
    for (Layout l : {CONTIG, TRANSPOSED}) {
        std::vector<float> sv;
        const std::vector<float> pad = run_node([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, l, v);
            sv = values(a);
            return ggml_pad_reflect_1d(ctx, a, 3, 5);
        });
        std::vector<double> want;
        for (int64_t r = 0; r < ne[1] * ne[2] * ne[3]; ++r) {
            for (int64_t i = 0; i < ne[0] + 8; ++i) {
                const int64_t k = i - 3, src = k < 0 ? -k : k >= ne[0] ? 2 * ne[0] - 2 - k : k;
                want.push_back(sv[r * ne[0] + src]);
            }
        }
        check_close(pad, want, 0, 0);
        const int sh[4] = {-2, 1, 2, -1};
        const std::vector<float> rolled = run_node([&](ggml_context * ctx) {
            return ggml_roll(ctx, make_input(ctx, GGML_TYPE_F32, ne, l, v), sh[0], sh[1], sh[2], sh[3]);
        });
        want.assign(sv.size(), 0.0);
        for (int64_t i3 = 0; i3 < ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                        const int64_t d[4] = {(i0 + sh[0] + ne[0]) % ne[0], (i1 + sh[1] + ne[1]) % ne[1],
                                              (i2 + sh[2] + ne[2]) % ne[2], (i3 + sh[3] + ne[3]) % ne[3]};
                        want[((d[3] * ne[2] + d[2]) * ne[1] + d[1]) * ne[0] + d[0]] = sv[((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0];
                    }
        check_close(rolled, want, 0, 0);
    }
}

TEST_CASE("sum, mean and repeat against naive loops") {
    const int64_t ne[4] = {29, 5, 3, 2};
    const std::vector<float> v = random_values(count(ne), 35);
    for (Layout l : {CONTIG, TRANSPOSED, STRIDED_ROWS}) {
        CAPTURE(layout_name(l));
        std::vector<float> sv;
        const std::vector<float> sum = run_node([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, l, v);
            sv = values(a);
            return ggml_sum(ctx, a);
        });
        double total = 0;
        for (float x : sv) total += x;
        REQUIRE(sum.size() == 1);
        CHECK(sum[0] == doctest::Approx(total).epsilon(1e-5));
        const std::vector<float> mean = run_node([&](ggml_context * ctx) { return ggml_mean(ctx, make_input(ctx, GGML_TYPE_F32, ne, l, v)); });
        REQUIRE(mean.size() == (size_t) (ne[1] * ne[2] * ne[3]));
        std::vector<double> want;
        for (int64_t r = 0; r < ne[1] * ne[2] * ne[3]; ++r) {
            double s = 0;
            for (int64_t i = 0; i < ne[0]; ++i) s += sv[r * ne[0] + i];
            want.push_back(s / ne[0]);
        }
        check_close(mean, want, 1e-6, 1e-5);
    }
    // repeat [3, 2, 1, 1] to [6, 4, 3, 1]: element (i0, i1, i2) = a(i0 % 3, i1 % 2)
    const int64_t na[4] = {3, 2, 1, 1};
    const std::vector<float> av = random_values(count(na), 36);
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        std::vector<float> sa;
        const std::vector<float> got = run_node([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, t, na, CONTIG, av);
            sa = values(a);
            return ggml_repeat(ctx, a, ggml_new_tensor_3d(ctx, t, 6, 4, 3));
        });
        std::vector<double> want;
        for (int64_t i2 = 0; i2 < 3; ++i2)
            for (int64_t i1 = 0; i1 < 4; ++i1)
                for (int64_t i0 = 0; i0 < 6; ++i0) want.push_back(sa[(i1 % 2) * 3 + i0 % 3]);
        check_close(got, want, 0, 0);
    }
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 4);
    CHECK(ggml_repeat(c.ctx, a, ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 4)) == a); // same shape: a itself
}
