// SAM's windowed-attention ops (win_part, win_unpart, get_rel_pos, add_rel_pos and its
// in-place variant) against naive double-precision loops written here, with the harness
// of test-ops.cpp (1, 2 and 3 tasks, direct and through the executor, bit-identical).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "ops-common.h"

namespace {

// element (i0, i1, i2, i3) of the logical values v of shape ne
double at(const std::vector<float> & v, const int64_t * ne, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t c[4] = {i0, i1, i2, i3};
    return v[ravel(ne, c)];
}

std::vector<double> ref_win_part(const std::vector<float> & v, const int64_t * ne, int64_t w) {
    const int64_t npx = (ne[1] + w - 1) / w, npy = (ne[2] + w - 1) / w;
    std::vector<double> out;
    for (int64_t p = 0; p < npx * npy; ++p) {
        for (int64_t j = 0; j < w; ++j) {
            for (int64_t i = 0; i < w; ++i) {
                const int64_t x = (p % npx) * w + i, y = (p / npx) * w + j;
                for (int64_t c = 0; c < ne[0]; ++c) out.push_back(x < ne[1] && y < ne[2] ? at(v, ne, c, x, y, 0) : 0.0);
            }
        }
    }
    return out;
}

} // namespace

TEST_CASE("win_part against a naive loop (padding, f32 and f16, strided input), win_unpart inverts it") {
    struct Case { int64_t c, W, H; int w; };
    for (const Case & k : {Case{3, 7, 5, 3}, Case{4, 6, 6, 3}, Case{1, 2, 9, 4}, Case{5, 3, 3, 5}}) {
        for (int variant = 0; variant < 3; ++variant) {
            const ggml_type t = variant == 2 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 1 ? PERMUTED : CONTIG;
            CAPTURE(k.W); CAPTURE(k.H); CAPTURE(k.w); CAPTURE(variant);
            const int64_t ne[4] = {k.c, k.W, k.H, 1};
            const std::vector<float> v = random_values(count(ne), 7 + variant, -4.0f, 4.0f);
            std::vector<float> sv;
            const std::vector<float> parts = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, l, v);
                sv = values(a);
                ggml_tensor * r = ggml_win_part(ctx, a, k.w);
                const int64_t np = ((k.W + k.w - 1) / k.w) * ((k.H + k.w - 1) / k.w);
                REQUIRE((r->ne[0] == k.c && r->ne[1] == k.w && r->ne[2] == k.w && r->ne[3] == np && r->type == t));
                return r;
            });
            check_close(parts, ref_win_part(sv, ne, k.w), 0.0, 0.0);
            for (int threads = 1; threads <= 3; ++threads) { // a chain: through the executor
                Ctx c;
                ggml_tensor * back = ggml_win_unpart(c.ctx, ggml_win_part(c.ctx, make_input(c.ctx, t, ne, l, v), k.w), (int) k.W, (int) k.H, k.w);
                compute_graph(c.ctx, back, threads, GGML_SCHED_DAG);
                CHECK(bit_equal(values(back), sv));
            }
        }
    }
}

TEST_CASE("win_unpart against a naive loop on a strided input") {
    const int64_t C = 3, w = 4, w0 = 9, h0 = 6, npx = 3, np = 6;
    const int64_t ne[4] = {C, w, w, np};
    const std::vector<float> v = random_values(count(ne), 3);
    std::vector<float> sv;
    const std::vector<float> got = run_node([&](ggml_context * ctx) {
        ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, STRIDED_ROWS, v);
        sv = values(a);
        return ggml_win_unpart(ctx, a, (int) w0, (int) h0, (int) w);
    });
    std::vector<double> want;
    for (int64_t y = 0; y < h0; ++y) {
        for (int64_t x = 0; x < w0; ++x) {
            for (int64_t c = 0; c < C; ++c) want.push_back(at(sv, ne, c, x % w, y % w, (y / w) * npx + x / w));
        }
    }
    check_close(got, want, 0.0, 0.0);
}

TEST_CASE("get_rel_pos against a naive loop, f16 and f32") {
    for (int k : {1, 2, 3, 6}) {
        for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_F32}) {
            CAPTURE(k); CAPTURE(ggml_type_name(t));
            const int64_t ne[4] = {5, 2 * k - 1, 1, 1};
            const std::vector<float> v = random_values(count(ne), 11 + k);
            std::vector<float> sv;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, t == GGML_TYPE_F32 ? TRANSPOSED : CONTIG, v);
                sv = values(a);
                ggml_tensor * r = ggml_get_rel_pos(ctx, a, k, k);
                REQUIRE((r->type == t && r->ne[0] == 5 && r->ne[1] == k && r->ne[2] == k && r->ne[3] == 1));
                return r;
            });
            std::vector<double> want;
            for (int q = 0; q < k; ++q) {
                for (int key = 0; key < k; ++key) {
                    for (int c = 0; c < 5; ++c) want.push_back(at(sv, ne, c, k - 1 + q - key, 0, 0));
                }
            }
            check_close(got, want, 0.0, 0.0);
        }
    }
}

namespace {

// a [k*k, qw*qh, B] + ph[kh] + pw[kw] per row, in double
std::vector<double> ref_add_rel_pos(const std::vector<float> & a, const std::vector<float> & pw, const std::vector<float> & ph,
                                    const int64_t * pne) {
    const int64_t k = pne[0], rows = pne[1] * pne[2] * pne[3];
    std::vector<double> out(a.size());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t kh = 0; kh < k; ++kh) {
            for (int64_t kw = 0; kw < k; ++kw) {
                const int64_t i = r * k * k + kh * k + kw;
                out[i] = (double) a[i] + ph[r * k + kh] + pw[r * k + kw];
            }
        }
    }
    return out;
}

} // namespace

TEST_CASE("add_rel_pos and add_rel_pos_inplace against a naive loop, several shapes and layouts") {
    struct Case { int64_t k, qw, qh, B; };
    for (const Case & s : {Case{3, 2, 2, 1}, Case{4, 3, 2, 2}, Case{1, 5, 1, 3}, Case{7, 7, 7, 1}}) {
        for (int variant = 0; variant < 3; ++variant) {
            CAPTURE(s.k); CAPTURE(s.qw); CAPTURE(s.qh); CAPTURE(s.B); CAPTURE(variant);
            const int64_t ane[4] = {s.k * s.k, s.qw * s.qh, s.B, 1};
            const int64_t pne[4] = {s.k, s.qw, s.qh, s.B};
            const std::vector<float> av = random_values(count(ane), 1 + variant, -3.0f, 3.0f);
            const std::vector<float> wv = random_values(count(pne), 2 + variant), hv = random_values(count(pne), 3 + variant);
            const bool inplace = variant == 2;
            std::vector<float> sa, sw, sh;
            const std::vector<float> got = run_tasks([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ane, variant == 1 ? STRIDED_ROWS : CONTIG, av);
                ggml_tensor * pw = make_input(ctx, GGML_TYPE_F32, pne, variant == 1 ? PERMUTED : CONTIG, wv);
                ggml_tensor * ph = make_input(ctx, GGML_TYPE_F32, pne, CONTIG, hv);
                sa = values(a); sw = values(pw); sh = values(ph);
                ggml_tensor * r = inplace ? ggml_add_rel_pos_inplace(ctx, a, pw, ph) : ggml_add_rel_pos(ctx, a, pw, ph);
                REQUIRE(ggml_are_same_shape(r, a));
                if (inplace) CHECK((r->view_src == a && r->data == a->data));
                return Built{r, inplace ? a : r}; // in place: a itself holds the result
            });
            check_close(got, ref_add_rel_pos(sa, sw, sh, pne), 1e-6, 1e-6);
        }
    }
}

TEST_CASE("add_rel_pos_inplace is ordered after an earlier reader of its source (WAR edge)") {
    const int64_t ane[4] = {9, 4, 1, 1}, pne[4] = {3, 2, 2, 1};
    const std::vector<float> av = random_values(count(ane), 5), wv = random_values(count(pne), 6), hv = random_values(count(pne), 7);
    for (int run = 0; run < 4; ++run) {
        const int threads = run % 2 + 1;
        const bool writer_first = run >= 2;
        CAPTURE(threads); CAPTURE(writer_first);
        Ctx c;
        ggml_tensor * a = make_input(c.ctx, GGML_TYPE_F32, ane, CONTIG, av);
        ggml_tensor * pw = make_input(c.ctx, GGML_TYPE_F32, pne, CONTIG, wv);
        ggml_tensor * ph = make_input(c.ctx, GGML_TYPE_F32, pne, CONTIG, hv);
        ggml_tensor * before = ggml_scale(c.ctx, a, 2.0f);  // reads a's original values
        ggml_tensor * r = ggml_add_rel_pos_inplace(c.ctx, a, pw, ph);
        enum ggml_dep_kind kind = GGML_DEP_RAW;
        REQUIRE(ggml_n_control_deps(r) == 1);
        CHECK((ggml_get_control_dep(r, 0, &kind) == before && kind == GGML_DEP_WAR));
        ggml_cgraph * gf = ggml_new_graph(c.ctx);
        // the writer first in the node list: the edge still runs the reader before it
        ggml_build_forward_expand(gf, writer_first ? r : before);
        ggml_build_forward_expand(gf, writer_first ? before : r);
        if (!writer_first) CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == 0);
        REQUIRE(ggml_graph_compute_with_ctx(c.ctx, gf, threads) == GGML_STATUS_SUCCESS);
        std::vector<double> twice(av.begin(), av.end());
        for (double & x : twice) x *= 2;
        check_close(values(before), twice, 0.0, 0.0);
        check_close(values(a), ref_add_rel_pos(av, wv, hv, pne), 1e-6, 1e-6);
    }
}
