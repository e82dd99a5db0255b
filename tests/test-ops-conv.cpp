// Convolution, pooling, resampling and padding ops (ops-conv.cpp, cpu/kernels-conv.cpp)
// against naive double-precision loops written here from ggml.h's definitions: several
// shapes, strides, paddings and dilations, F32 and F16 kernels, strided inputs, 1-3 tasks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "ops-common.h"

namespace {

// A reference tensor: logical values, ne[0] fastest.
struct Ref {
    int64_t ne[4];
    std::vector<double> v;
    Ref(int64_t n0, int64_t n1, int64_t n2, int64_t n3) : ne{n0, n1, n2, n3}, v((size_t) (n0 * n1 * n2 * n3), 0.0) {}
    double & at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return v[(size_t) (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0)]; }
};
// Logical values of t as a Ref.
Ref ref_of(const ggml_tensor * t) {
    Ref r(t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    const std::vector<float> v = values(t);
    for (size_t i = 0; i < v.size(); ++i) r.v[i] = v[i];
    return r;
}

// Computes the graph of `build`'s result with 1, 2 and 3 threads under both schedules (for
// composite ops, whose inner nodes a single-node run would skip); all runs bit-identical.
// Returns the values; *a and *b get the logical values of the inputs, *ne the result shape.
struct Run {
    std::vector<float> got;
    int64_t ne[4];
    Ref a{0, 0, 0, 0}, b{0, 0, 0, 0};
};
using Builder = std::function<ggml_tensor *(ggml_context *, ggml_tensor ** a, ggml_tensor ** b)>;
Run run_graph(const Builder & build) {
    Run out;
    for (int run = 0; run < 6; ++run) {
        Ctx c;
        ggml_tensor * a = nullptr, * b = nullptr;
        ggml_tensor * r = build(c.ctx, &a, &b);
        compute_graph(c.ctx, r, run % 3 + 1, run < 3 ? GGML_SCHED_DAG : GGML_SCHED_BARRIER);
        const std::vector<float> v = values(r);
        if (run > 0) {
            CAPTURE(run);
            CHECK(bit_equal(v, out.got));
            continue;
        }
        out.got = v;
        for (int i = 0; i < 4; ++i) out.ne[i] = r->ne[i];
        if (a) out.a = ref_of(a);
        if (b) out.b = ref_of(b);
    }
    return out;
}
// The same for a single-op node, also run directly by its kernel with 1-3 tasks (run_node).
Run run_op(const Builder & build) {
    Run out = run_graph(build);
    const std::vector<float> direct = run_node([&](ggml_context * ctx) {
        ggml_tensor * a = nullptr, * b = nullptr;
        return build(ctx, &a, &b);
    });
    CHECK(bit_equal(direct, out.got));
    return out;
}

void check_result(const Run & r, const Ref & want, double atol, double rtol) {
    for (int i = 0; i < 4; ++i) REQUIRE(r.ne[i] == want.ne[i]);
    check_close(r.got, want.v, atol, rtol);
}

int64_t out_size(int64_t n, int64_t k, int s, int p, int d) { return (n + 2 * p - d * (k - 1) - 1) / s + 1; }

// ---- references -------------------------------------------------------------------------------

// out[ow, oh, oc, n] = sum a[kw, kh, ic, oc] * b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n]
// (depthwise: a[kw, kh, 0, c] with ic = oc = c)
Ref ref_conv_2d(Ref & a, Ref & b, int s0, int s1, int p0, int p1, int d0, int d1, bool dw) {
    const int64_t OC = dw ? b.ne[2] : a.ne[3];
    Ref o(out_size(b.ne[0], a.ne[0], s0, p0, d0), out_size(b.ne[1], a.ne[1], s1, p1, d1), OC, b.ne[3]);
    for (int64_t n = 0; n < o.ne[3]; ++n)
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t oh = 0; oh < o.ne[1]; ++oh)
                for (int64_t ow = 0; ow < o.ne[0]; ++ow)
                    for (int64_t ic = 0; ic < b.ne[2]; ++ic) {
                        if (dw && ic != oc) continue;
                        for (int64_t kh = 0; kh < a.ne[1]; ++kh)
                            for (int64_t kw = 0; kw < a.ne[0]; ++kw) {
                                const int64_t x = ow * s0 + kw * d0 - p0, y = oh * s1 + kh * d1 - p1;
                                if (x >= 0 && x < b.ne[0] && y >= 0 && y < b.ne[1])
                                    o.at(ow, oh, oc, n) += a.at(kw, kh, dw ? 0 : ic, oc) * b.at(x, y, ic, n);
                            }
                    }
    return o;
}

// a [K, IC, OC] (depthwise: [K, 1, C]), b [L, IC, N] -> [OL, OC, N]
Ref ref_conv_1d(Ref & a, Ref & b, int s, int p, int d, bool dw) {
    const int64_t OC = dw ? b.ne[1] : a.ne[2];
    Ref o(out_size(b.ne[0], a.ne[0], s, p, d), OC, b.ne[2], 1);
    for (int64_t n = 0; n < b.ne[2]; ++n)
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t ol = 0; ol < o.ne[0]; ++ol)
                for (int64_t k = 0; k < a.ne[0]; ++k) {
                    const int64_t x = ol * s + k * d - p;
                    if (x < 0 || x >= b.ne[0]) continue;
                    if (dw) o.at(ol, oc, n, 0) += a.at(k, 0, oc, 0) * b.at(x, oc, n, 0);
                    else for (int64_t ic = 0; ic < b.ne[1]; ++ic) o.at(ol, oc, n, 0) += a.at(k, ic, oc, 0) * b.at(x, ic, n, 0);
                }
    return o;
}

// scatter: b[l, ic, n] * a[k, oc, ic] lands at l*s + k*d - p
Ref ref_conv_transpose_1d(Ref & a, Ref & b, int s, int p, int d) {
    Ref o((b.ne[0] - 1) * s - 2 * p + d * (a.ne[0] - 1) + 1, a.ne[1], b.ne[2], 1);
    for (int64_t n = 0; n < b.ne[2]; ++n)
        for (int64_t ic = 0; ic < b.ne[1]; ++ic)
            for (int64_t l = 0; l < b.ne[0]; ++l)
                for (int64_t oc = 0; oc < a.ne[1]; ++oc)
                    for (int64_t k = 0; k < a.ne[0]; ++k) {
                        const int64_t x = l * s + k * d - p;
                        if (x >= 0 && x < o.ne[0]) o.at(x, oc, n, 0) += b.at(l, ic, n, 0) * a.at(k, oc, ic, 0);
                    }
    return o;
}

// scatter: b[x, y, ic, n] * a[kw, kh, oc, ic] lands at (x*s + kw, y*s + kh)
Ref ref_conv_transpose_2d(Ref & a, Ref & b, int s) {
    Ref o((b.ne[0] - 1) * s + a.ne[0], (b.ne[1] - 1) * s + a.ne[1], a.ne[2], b.ne[3]);
    for (int64_t n = 0; n < b.ne[3]; ++n)
        for (int64_t ic = 0; ic < b.ne[2]; ++ic)
            for (int64_t y = 0; y < b.ne[1]; ++y)
                for (int64_t x = 0; x < b.ne[0]; ++x)
                    for (int64_t oc = 0; oc < a.ne[2]; ++oc)
                        for (int64_t kh = 0; kh < a.ne[1]; ++kh)
                            for (int64_t kw = 0; kw < a.ne[0]; ++kw)
                                o.at(x * s + kw, y * s + kh, oc, n) += b.at(x, y, ic, n) * a.at(kw, kh, oc, ic);
    return o;
}

} // namespace

TEST_CASE("im2col: 2-D and 1-D, F32 and F16 results, strided and F16 data") {
    struct Case { int64_t kw, kh, ic, w, h, n; int s0, s1, p0, p1, d0, d1; };
    const Case cases[] = {{3, 3, 2, 7, 5, 2, 1, 1, 1, 1, 1, 1}, {2, 3, 3, 9, 6, 1, 2, 1, 0, 2, 2, 1}, {1, 1, 4, 4, 3, 2, 1, 2, 0, 0, 1, 1},
                          {3, 2, 1, 8, 8, 1, 3, 2, 2, 1, 1, 3}};
    for (const Case & c : cases) {
        for (int variant = 0; variant < 8; ++variant) {
            const ggml_type dt = variant % 2 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const ggml_type bt = variant % 4 == 3 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant % 4 == 2 ? PERMUTED : variant % 4 == 1 ? TRANSPOSED : CONTIG;
            const bool is_2D = variant < 4;
            CAPTURE(variant); CAPTURE(c.kw);
            const int64_t nb[4] = {c.w, is_2D ? c.h : c.ic, is_2D ? c.ic : c.n, is_2D ? c.n : 1};
            const std::vector<float> bv = random_values(count(nb), 40 + variant);
            const Run r = run_op([&](ggml_context * ctx, ggml_tensor **, ggml_tensor ** b) {
                ggml_tensor * k = is_2D ? ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c.kw, c.kh, c.ic, 3) : ggml_new_tensor_3d(ctx, GGML_TYPE_F16, c.kw, c.ic, 3);
                *b = make_input(ctx, bt, nb, l, bv);
                return ggml_im2col(ctx, k, *b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, is_2D, dt);
            });
            Ref b = r.b;
            const int64_t KH = is_2D ? c.kh : 1, OW = out_size(c.w, c.kw, c.s0, c.p0, c.d0);
            const int64_t OH = is_2D ? out_size(c.h, c.kh, c.s1, c.p1, c.d1) : 1;
            Ref want(c.ic * KH * c.kw, OW, is_2D ? OH : c.n, is_2D ? c.n : 1);
            for (int64_t n = 0; n < c.n; ++n)
                for (int64_t oh = 0; oh < OH; ++oh)
                    for (int64_t ow = 0; ow < OW; ++ow)
                        for (int64_t ic = 0; ic < c.ic; ++ic)
                            for (int64_t kh = 0; kh < KH; ++kh)
                                for (int64_t kw = 0; kw < c.kw; ++kw) {
                                    const int64_t x = ow * c.s0 + kw * c.d0 - c.p0, y = is_2D ? oh * c.s1 + kh * c.d1 - c.p1 : 0;
                                    const bool in = x >= 0 && x < c.w && y >= 0 && y < (is_2D ? c.h : 1);
                                    const double v = !in ? 0.0 : is_2D ? b.at(x, y, ic, n) : b.at(x, ic, n, 0);
                                    const int64_t j = (ic * KH + kh) * c.kw + kw;
                                    if (is_2D) want.at(j, ow, oh, n) = ref_store(dt, v);
                                    else want.at(j, ow, n, 0) = ref_store(dt, v);
                                }
            check_result(r, want, 0, 0);
        }
    }
}

TEST_CASE("conv_1d and conv_2d (im2col + mul_mat), F32 and F16 kernels, strides, padding, dilation") {
    struct Case { int64_t k0, k1, ic, oc, w, h, n; int s0, s1, p0, p1, d0, d1; };
    const Case cases[] = {{3, 3, 2, 4, 8, 6, 1, 1, 1, 1, 1, 1, 1}, {3, 2, 3, 5, 10, 7, 2, 2, 1, 0, 1, 2, 1}, {1, 1, 4, 3, 5, 5, 3, 1, 1, 0, 0, 1, 1},
                          {5, 3, 1, 2, 12, 9, 2, 3, 2, 2, 2, 1, 2}};
    for (const Case & c : cases) {
        for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            const std::string type = ggml_type_name(kt);
            CAPTURE(c.k0); CAPTURE(c.s0); CAPTURE(type);
            const int64_t na[4] = {c.k0, c.k1, c.ic, c.oc}, nb[4] = {c.w, c.h, c.ic, c.n};
            const std::vector<float> av = random_values(count(na), 50), bv = random_values(count(nb), 51);
            Run r = run_graph([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, na, CONTIG, av);
                *b = make_input(ctx, GGML_TYPE_F32, nb, CONTIG, bv);
                return ggml_conv_2d(ctx, *a, *b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            });
            check_result(r, ref_conv_2d(r.a, r.b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, false), 1e-5, 1e-5);
            // 1-D: kernel [K, IC, OC], data [L, IC, N]
            const int64_t na1[4] = {c.k0, c.ic, c.oc, 1}, nb1[4] = {c.w, c.ic, c.n, 1};
            const std::vector<float> av1 = random_values(count(na1), 52), bv1 = random_values(count(nb1), 53);
            r = run_graph([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, na1, CONTIG, av1);
                *b = make_input(ctx, GGML_TYPE_F32, nb1, CONTIG, bv1);
                return ggml_conv_1d(ctx, *a, *b, c.s0, c.p0, c.d0);
            });
            check_result(r, ref_conv_1d(r.a, r.b, c.s0, c.p0, c.d0, false), 1e-5, 1e-5);
        }
    }
}

TEST_CASE("depthwise convolutions: conv_1d_dw, conv_2d_dw and conv_2d_dw_direct; conv_2d_direct on strided inputs") {
    struct Case { int64_t k, c, w, h, n; int s, p, d; };
    const Case cases[] = {{3, 4, 8, 6, 2, 1, 1, 1}, {3, 5, 9, 7, 1, 2, 1, 1}, {5, 3, 11, 8, 2, 1, 2, 2}, {1, 6, 4, 4, 3, 1, 0, 1}};
    for (const Case & c : cases) {
        for (int variant = 0; variant < 3; ++variant) {
            const ggml_type kt = variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 2 ? PERMUTED : CONTIG; // direct ops only
            CAPTURE(c.k); CAPTURE(c.c); CAPTURE(variant);
            const int64_t na[4] = {c.k, c.k, 1, c.c}, nb[4] = {c.w, c.h, c.c, c.n};
            const std::vector<float> av = random_values(count(na), 60), bv = random_values(count(nb), 61);
            Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, na, l, av);
                *b = make_input(ctx, GGML_TYPE_F32, nb, l, bv);
                return ggml_conv_2d_dw_direct(ctx, *a, *b, c.s, c.s + 1, c.p, c.p, c.d, c.d);
            });
            check_result(r, ref_conv_2d(r.a, r.b, c.s, c.s + 1, c.p, c.p, c.d, c.d, true), 1e-5, 1e-5);
            if (l == CONTIG) {
                r = run_graph([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                    *a = make_input(ctx, kt, na, CONTIG, av);
                    *b = make_input(ctx, GGML_TYPE_F32, nb, CONTIG, bv);
                    return ggml_conv_2d_dw(ctx, *a, *b, c.s, c.s, c.p, c.p + 1, c.d, 1);
                });
                check_result(r, ref_conv_2d(r.a, r.b, c.s, c.s, c.p, c.p + 1, c.d, 1, true), 1e-5, 1e-5);
                const int64_t na1[4] = {c.k, 1, c.c, 1}, nb1[4] = {c.w, c.c, c.n, 1};
                const std::vector<float> av1 = random_values(count(na1), 63), bv1 = random_values(count(nb1), 64);
                r = run_graph([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                    *a = make_input(ctx, kt, na1, CONTIG, av1);
                    *b = make_input(ctx, GGML_TYPE_F32, nb1, CONTIG, bv1);
                    return ggml_conv_1d_dw(ctx, *a, *b, c.s, c.p, c.d);
                });
                check_result(r, ref_conv_1d(r.a, r.b, c.s, c.p, c.d, true), 1e-5, 1e-5);
            }
            // full convolution in one op: kernel [K, K, C, 2], strided data
            const int64_t nf[4] = {c.k, c.k, c.c, 2};
            const std::vector<float> fv = random_values(count(nf), 62);
            r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, nf, l == CONTIG ? CONTIG : TRANSPOSED, fv);
                *b = make_input(ctx, GGML_TYPE_F32, nb, l == CONTIG ? CONTIG : STRIDED_ROWS, bv);
                return ggml_conv_2d_direct(ctx, *a, *b, c.s, 1, c.p, c.p, c.d, c.d);
            });
            check_result(r, ref_conv_2d(r.a, r.b, c.s, 1, c.p, c.p, c.d, c.d, false), 1e-5, 1e-5);
        }
    }
}

TEST_CASE("conv_transpose_1d (stride, padding, dilation) and conv_transpose_2d_p0, F32 and F16 kernels") {
    struct Case { int64_t k, ic, oc, l, n; int s, p, d; };
    const Case cases[] = {{3, 1, 1, 2, 1, 1, 0, 1}, {2, 2, 3, 3, 1, 2, 0, 1}, {4, 3, 2, 5, 2, 3, 1, 1}, {3, 2, 2, 6, 1, 2, 2, 2},
                          {16, 4, 3, 9, 1, 8, 0, 1}};
    for (const Case & c : cases) {
        for (int variant = 0; variant < 3; ++variant) {
            const ggml_type kt = variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 2 ? TRANSPOSED : CONTIG;
            CAPTURE(c.k); CAPTURE(c.s); CAPTURE(variant);
            const int64_t na[4] = {c.k, c.oc, c.ic, 1}, nb[4] = {c.l, c.ic, c.n, 1};
            const std::vector<float> av = random_values(count(na), 70), bv = random_values(count(nb), 71);
            Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, na, l, av);
                *b = make_input(ctx, GGML_TYPE_F32, nb, l, bv);
                return ggml_conv_transpose_1d(ctx, *a, *b, c.s, c.p, c.d);
            });
            check_result(r, ref_conv_transpose_1d(r.a, r.b, c.s, c.p, c.d), 1e-5, 1e-5);
            // 2-D: kernel [K, K-1, OC, IC], data [L, L-1, IC, N]
            const int64_t na2[4] = {c.k, std::max<int64_t>(1, c.k - 1), c.oc, c.ic}, nb2[4] = {c.l, c.l + 1, c.ic, c.n};
            const std::vector<float> av2 = random_values(count(na2), 72), bv2 = random_values(count(nb2), 73);
            r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor ** b) {
                *a = make_input(ctx, kt, na2, l == CONTIG ? CONTIG : PERMUTED, av2);
                *b = make_input(ctx, GGML_TYPE_F32, nb2, l == CONTIG ? CONTIG : PERMUTED_ROWS, bv2);
                return ggml_conv_transpose_2d_p0(ctx, *a, *b, c.s);
            });
            check_result(r, ref_conv_transpose_2d(r.a, r.b, c.s), 1e-5, 1e-5);
        }
    }
}

TEST_CASE("pool_1d and pool_2d: max and avg, padding, F32 and F16 inputs, strided inputs") {
    struct Case { int k0, k1, s0, s1, p0, p1; };
    const Case cases[] = {{3, 4, 3, 4, 0, 0}, {2, 2, 1, 1, 0, 0}, {3, 3, 2, 2, 1, 1}, {5, 2, 2, 3, 2, 0}};
    const int64_t ne[4] = {11, 10, 3, 2};
    for (const Case & c : cases) {
        for (int variant = 0; variant < 6; ++variant) {
            const ggml_op_pool op = variant % 2 ? GGML_OP_POOL_AVG : GGML_OP_POOL_MAX;
            const ggml_type t = variant / 2 == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant / 2 == 2 ? TRANSPOSED : CONTIG;
            const std::vector<float> v = random_values(count(ne), 80 + variant, -4.0f, 4.0f);
            for (bool two_d : {false, true}) {
                CAPTURE(c.k0); CAPTURE(variant); CAPTURE(two_d);
                const Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor **) {
                    *a = make_input(ctx, t, ne, l, v);
                    return two_d ? ggml_pool_2d(ctx, *a, op, c.k0, c.k1, c.s0, c.s1, (float) c.p0, (float) c.p1)
                                 : ggml_pool_1d(ctx, *a, op, c.k0, c.s0, c.p0);
                });
                Ref a = r.a;
                const int k1 = two_d ? c.k1 : 1, s1 = two_d ? c.s1 : 1, p1 = two_d ? c.p1 : 0;
                Ref want((ne[0] + 2 * c.p0 - c.k0) / c.s0 + 1, (ne[1] + 2 * p1 - k1) / s1 + 1, ne[2], ne[3]);
                for (int64_t i3 = 0; i3 < ne[3]; ++i3)
                    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                        for (int64_t oy = 0; oy < want.ne[1]; ++oy)
                            for (int64_t ox = 0; ox < want.ne[0]; ++ox) {
                                double sum = 0, mx = -INFINITY;
                                for (int64_t y = oy * s1 - p1; y < oy * s1 - p1 + k1; ++y)
                                    for (int64_t x = ox * c.s0 - c.p0; x < ox * c.s0 - c.p0 + c.k0; ++x) {
                                        if (x < 0 || y < 0 || x >= ne[0] || y >= ne[1]) continue;
                                        sum += a.at(x, y, i2, i3);
                                        mx = std::max(mx, a.at(x, y, i2, i3));
                                    }
                                want.at(ox, oy, i2, i3) = op == GGML_OP_POOL_MAX ? mx : sum / (c.k0 * k1);
                            }
                check_result(r, want, 1e-6, 1e-6);
            }
        }
    }
}

TEST_CASE("interpolate: nearest and bilinear (half-pixel and align-corners), up and down, every dim; upscale") {
    const int64_t ne[4] = {5, 4, 3, 2};
    const int64_t outs[][4] = {{10, 8, 3, 2}, {3, 2, 3, 2}, {7, 9, 6, 1}, {1, 1, 3, 4}, {5, 4, 3, 2}};
    const uint32_t modes[] = {GGML_SCALE_MODE_NEAREST, GGML_SCALE_MODE_BILINEAR, GGML_SCALE_MODE_BILINEAR | GGML_SCALE_FLAG_ALIGN_CORNERS};
    const std::vector<float> v = random_values(count(ne), 90);
    for (const auto & o : outs) {
        for (uint32_t mode : modes) {
            for (Layout l : {CONTIG, PERMUTED}) {
                CAPTURE(o[0]); CAPTURE(o[1]); CAPTURE(mode); CAPTURE(layout_name(l));
                const Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor **) {
                    *a = make_input(ctx, GGML_TYPE_F32, ne, l, v);
                    return ggml_interpolate(ctx, *a, o[0], o[1], o[2], o[3], mode);
                });
                Ref a = r.a;
                Ref want(o[0], o[1], o[2], o[3]);
                // nearest: floor(i * n_in / n_out); bilinear source coordinate per dim 0/1
                auto near = [&](int64_t i, int d) { return i * ne[d] / o[d]; };
                auto coord = [&](int64_t i, int d) {
                    if (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) return o[d] == 1 ? 0.0 : (double) i * (ne[d] - 1) / (o[d] - 1);
                    return std::min(std::max((i + 0.5) * ne[d] / o[d] - 0.5, 0.0), (double) ne[d] - 1);
                };
                for (int64_t i3 = 0; i3 < o[3]; ++i3)
                    for (int64_t i2 = 0; i2 < o[2]; ++i2)
                        for (int64_t i1 = 0; i1 < o[1]; ++i1)
                            for (int64_t i0 = 0; i0 < o[0]; ++i0) {
                                const int64_t j2 = near(i2, 2), j3 = near(i3, 3);
                                if (mode == GGML_SCALE_MODE_NEAREST) {
                                    want.at(i0, i1, i2, i3) = a.at(near(i0, 0), near(i1, 1), j2, j3);
                                    continue;
                                }
                                const double x = coord(i0, 0), y = coord(i1, 1);
                                const int64_t x0 = (int64_t) std::floor(x), y0 = (int64_t) std::floor(y);
                                const int64_t x1 = std::min(x0 + 1, ne[0] - 1), y1 = std::min(y0 + 1, ne[1] - 1);
                                const double wx = x - x0, wy = y - y0;
                                want.at(i0, i1, i2, i3) = (1 - wy) * ((1 - wx) * a.at(x0, y0, j2, j3) + wx * a.at(x1, y0, j2, j3)) +
                                                          wy * ((1 - wx) * a.at(x0, y1, j2, j3) + wx * a.at(x1, y1, j2, j3));
                            }
                check_result(r, want, 1e-6, 1e-6);
            }
        }
    }
    // upscale multiplies dims 0 and 1
    const Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor **) {
        *a = make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v);
        return ggml_upscale(ctx, *a, 3, GGML_SCALE_MODE_NEAREST);
    });
    Ref a = r.a;
    Ref want(15, 12, 3, 2);
    for (int64_t i = 0; i < (int64_t) want.v.size(); ++i) {
        int64_t c[4];
        unravel(want.ne, i, c);
        want.v[i] = a.at(c[0] / 3, c[1] / 3, c[2], c[3]);
    }
    check_result(r, want, 0, 0);
}

TEST_CASE("pad and pad_ext: zeros around, F32 and F16, strided inputs") {
    const int64_t ne[4] = {6, 5, 3, 2};
    const std::vector<float> v = random_values(count(ne), 95);
    const int pads[][8] = {{0, 2, 0, 1, 0, 0, 0, 1}, {3, 1, 2, 0, 1, 1, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1}};
    for (const auto & p : pads) {
        for (int variant = 0; variant < 3; ++variant) {
            const ggml_type t = variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 2 ? PERMUTED : CONTIG;
            const bool only_right = p[0] == 0 && p[2] == 0 && p[4] == 0 && p[6] == 0;
            CAPTURE(p[0]); CAPTURE(p[1]); CAPTURE(variant);
            const Run r = run_op([&](ggml_context * ctx, ggml_tensor ** a, ggml_tensor **) {
                *a = make_input(ctx, t, ne, l, v);
                ggml_tensor * out = only_right ? ggml_pad(ctx, *a, p[1], p[3], p[5], p[7]) : ggml_pad_ext(ctx, *a, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
                REQUIRE(out->type == t);
                return out;
            });
            Ref a = r.a;
            Ref want(ne[0] + p[0] + p[1], ne[1] + p[2] + p[3], ne[2] + p[4] + p[5], ne[3] + p[6] + p[7]);
            for (int64_t i = 0; i < (int64_t) a.v.size(); ++i) {
                int64_t c[4];
                unravel(a.ne, i, c);
                want.at(c[0] + p[0], c[1] + p[2], c[2] + p[4], c[3] + p[6]) = a.v[i];
            }
            check_result(r, want, 0, 0);
        }
    }
}
