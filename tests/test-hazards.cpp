// Dependency edges (RAW/WAR/WAW recorded at op creation), build_forward_expand following
// them, the graph validator and the DOT dump. References are plain loops over floats.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include "edges-common.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem = 16u << 20) {
        ggml_init_params p = {mem, nullptr, false};
        ctx = ggml_init(p);
        REQUIRE(ctx != nullptr);
    }
    ~ctx_guard() { ggml_free(ctx); }
    operator ggml_context *() const { return ctx; }
};

float * f32(ggml_tensor * t) { return (float *) t->data; }

// deterministic, distinct-looking values
void fill(ggml_tensor * t, float seed) {
    const int64_t n = ggml_nelements(t);
    for (int64_t i = 0; i < n; ++i) f32(t)[i] = std::sin(seed + 0.37f * (float) i) + 0.01f * (float) (i % 5);
}

std::string read_text(FILE * f) {
    std::string s;
    rewind(f);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
    return s;
}

// ---- the KV-cache pattern ---------------------------------------------------------------
// k_cache [D, n_ctx] holds n_ctx rows; this step writes n rows starting at p0 and then
// attends over rows [0, p0 + n). Only the attention result is expanded.
constexpr int D = 8, N_CTX = 16, N_NEW = 4, P0 = 5, N_Q = 3;

struct kv_program {
    ggml_tensor * k_cache, * x, * k_cur, * k_write, * k_view, * q, * kq;
};

kv_program build_kv_cpy(ggml_context * ctx) {
    kv_program p;
    p.k_cache = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_CTX), "k_cache");
    p.x = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_NEW), "x");
    p.q = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_Q), "q");
    fill(p.k_cache, 1.0f);
    fill(p.x, 2.0f);
    fill(p.q, 3.0f);
    p.k_cur = ggml_set_name(ggml_scale(ctx, p.x, 0.5f), "k_cur");
    p.k_write = ggml_cpy(ctx, p.k_cur, ggml_view_1d(ctx, p.k_cache, D * N_NEW, P0 * p.k_cache->nb[1]));
    ggml_set_name(p.k_write, "k_write");
    p.k_view = ggml_view_2d(ctx, p.k_cache, D, P0 + N_NEW, p.k_cache->nb[1], 0);
    p.kq = ggml_set_name(ggml_mul_mat(ctx, p.k_view, p.q), "kq");
    return p;
}

// kq[l, j] = dot(cache row l, q column j) over the given cache contents
std::vector<float> ref_kq(const std::vector<float> & cache, int n_rows, const float * q) {
    std::vector<float> r((size_t) n_rows * N_Q);
    for (int j = 0; j < N_Q; ++j) {
        for (int l = 0; l < n_rows; ++l) {
            double s = 0;
            for (int k = 0; k < D; ++k) s += (double) cache[(size_t) l * D + k] * q[(size_t) j * D + k];
            r[(size_t) j * n_rows + l] = (float) s;
        }
    }
    return r;
}

void check_close(const float * got, const std::vector<float> & want, float tol) {
    for (size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        REQUIRE(std::fabs(got[i] - want[i]) <= tol * (1.0f + std::fabs(want[i])));
    }
}

} // namespace

TEST_CASE("kv cache: cpy into a view is pulled in before the attention that reads the cache") {
    for (int n_threads : {1, 2, 4}) {
        CAPTURE(n_threads);
        ctx_guard ctx;
        kv_program p = build_kv_cpy(ctx);
        std::vector<float> cache(f32(p.k_cache), f32(p.k_cache) + D * N_CTX);

        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, p.kq);

        const int iw = node_index(gf, p.k_write), ir = node_index(gf, p.kq);
        REQUIRE(iw >= 0);
        REQUIRE(ir >= 0);
        CHECK(iw < ir);
        CHECK(node_index(gf, p.k_cur) < iw);
        CHECK(dep_kind(p.kq, p.k_write) == GGML_DEP_RAW);
        CHECK(ggml_n_control_deps(p.kq) == 1);
        CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == 0);

        REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);

        for (int i = 0; i < D * N_NEW; ++i) cache[(size_t) P0 * D + i] = 0.5f * f32(p.x)[i];
        check_close(f32(p.k_cache), cache, 0.0f); // cpy and scale are exact
        check_close(f32(p.kq), ref_kq(cache, P0 + N_NEW, f32(p.q)), 1e-4f);
    }
}

TEST_CASE("kv cache: set_rows with an index tensor") {
    const int rows[N_NEW] = {9, 2, 14, 5};
    for (ggml_type itype : {GGML_TYPE_I64, GGML_TYPE_I32}) {
        for (int n_threads : {1, 3}) {
            CAPTURE(n_threads);
            ctx_guard ctx;
            ggml_tensor * k_cache = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_CTX), "k_cache");
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_NEW);
            ggml_tensor * q = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, N_Q);
            ggml_tensor * idx = ggml_new_tensor_1d(ctx, itype, N_NEW);
            fill(k_cache, 4.0f);
            fill(x, 5.0f);
            fill(q, 6.0f);
            for (int i = 0; i < N_NEW; ++i) ggml_set_i32_1d(idx, i, rows[i]);
            std::vector<float> cache(f32(k_cache), f32(k_cache) + D * N_CTX);

            ggml_tensor * k_cur = ggml_scale(ctx, x, -1.5f);
            ggml_tensor * k_write = ggml_set_rows(ctx, k_cache, k_cur, idx);
            ggml_tensor * k_view = ggml_view_2d(ctx, k_cache, D, N_CTX, k_cache->nb[1], 0);
            ggml_tensor * kq = ggml_mul_mat(ctx, k_view, q);

            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, kq);
            REQUIRE(node_index(gf, k_write) >= 0);
            CHECK(node_index(gf, k_write) < node_index(gf, kq));
            CHECK(dep_kind(kq, k_write) == GGML_DEP_RAW);
            CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == 0);

            REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
            for (int i = 0; i < N_NEW; ++i) {
                for (int k = 0; k < D; ++k) cache[(size_t) rows[i] * D + k] = -1.5f * f32(x)[i * D + k];
            }
            check_close(f32(k_cache), cache, 0.0f);
            check_close(f32(kq), ref_kq(cache, N_CTX, f32(q)), 1e-4f);
        }
    }
}

TEST_CASE("ring buffer: the overwrite waits for the read of the old contents") {
    // buf has 4 slots of D floats; slots 1..2 are read, written (w1), read, written again
    // (w2). Only w2 is expanded: edges pull in everything else.
    for (int n_threads : {1, 2, 4}) {
        for (int rep = 0; rep < 10; ++rep) {
            CAPTURE(n_threads);
            ctx_guard ctx;
            ggml_tensor * buf = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, 4), "ring");
            ggml_tensor * xa = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, 2);
            ggml_tensor * xb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, 2);
            fill(buf, 7.0f);
            fill(xa, 8.0f);
            fill(xb, 9.0f);
            const size_t slot = buf->nb[1];
            std::vector<float> init(f32(buf), f32(buf) + 4 * D);

            auto slots = [&] { return ggml_view_2d(ctx, buf, D, 2, slot, slot); };
            ggml_tensor * r0 = ggml_scale(ctx, slots(), 2.0f); // old contents
            ggml_tensor * w1 = ggml_cpy(ctx, ggml_scale(ctx, xa, 1.0f), slots());
            ggml_tensor * r1 = ggml_scale(ctx, slots(), 3.0f); // what w1 wrote
            ggml_tensor * w2 = ggml_cpy(ctx, ggml_scale(ctx, xb, -2.0f), slots());

            CHECK(dep_kind(w1, r0) == GGML_DEP_WAR);
            CHECK(dep_kind(r1, w1) == GGML_DEP_RAW);
            CHECK(dep_kind(w2, r1) == GGML_DEP_WAR);
            CHECK(dep_kind(w2, w1) >= 0);
            CHECK(dep_kind(w2, r0) == -1); // ordered through w1 already

            // a ggml program expands every result it wants; WAR/WAW edges order, never pull
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, r0);
            ggml_build_forward_expand(gf, r1);
            ggml_build_forward_expand(gf, w2);
            const int i0 = node_index(gf, r0), i1 = node_index(gf, w1), i2 = node_index(gf, r1), i3 = node_index(gf, w2);
            REQUIRE(i0 >= 0);
            REQUIRE(i2 >= 0);
            CHECK(i0 < i1);
            CHECK(i1 < i2);
            CHECK(i2 < i3);
            CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == 0);

            REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
            std::vector<float> want_r0(2 * D), want_r1(2 * D), want_buf = init;
            for (int i = 0; i < 2 * D; ++i) {
                want_r0[i] = 2.0f * init[D + i];
                want_r1[i] = 3.0f * f32(xa)[i];
                want_buf[D + i] = -2.0f * f32(xb)[i];
            }
            check_close(f32(r0), want_r0, 0.0f);
            check_close(f32(r1), want_r1, 0.0f);
            check_close(f32(buf), want_buf, 0.0f);
        }
    }
}

// ---- edge kinds ---------------------------------------------------------------------------
TEST_CASE("edges: RAW, WAR and WAW appear exactly when the accesses call for them") {
    ctx_guard ctx;
    ggml_tensor * buf = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 32);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    auto v = [&](int64_t n, int64_t off) { return ggml_view_1d(ctx, buf, n, off * sizeof(float)); };

    SUBCASE("RAW: a read after a write") {
        ggml_tensor * w = ggml_cpy(ctx, a, v(4, 0));
        ggml_tensor * r = ggml_scale(ctx, v(4, 0), 2.0f);
        CHECK(ggml_n_control_deps(w) == 0);
        CHECK(ggml_n_control_deps(r) == 1);
        CHECK(dep_kind(r, w) == GGML_DEP_RAW);
    }
    SUBCASE("WAR: a write after a read") {
        ggml_tensor * r = ggml_scale(ctx, v(4, 0), 2.0f);
        ggml_tensor * w = ggml_cpy(ctx, a, v(4, 0));
        CHECK(ggml_n_control_deps(r) == 0);
        CHECK(ggml_n_control_deps(w) == 1);
        CHECK(dep_kind(w, r) == GGML_DEP_WAR);
    }
    SUBCASE("reads after reads: nothing") {
        ggml_tensor * r1 = ggml_scale(ctx, v(4, 0), 2.0f);
        ggml_tensor * r2 = ggml_add(ctx, v(4, 0), v(4, 2));
        CHECK(ggml_n_control_deps(r1) == 0);
        CHECK(ggml_n_control_deps(r2) == 0);
    }
    SUBCASE("set_rows after set_rows, and after cpy: RAW, since it keeps the rows it does not write") {
        ggml_tensor * m = ggml_view_2d(ctx, buf, 4, 8, 4 * sizeof(float), 0);
        ggml_tensor * rows = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 1);
        ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
        ggml_tensor * w1 = ggml_set_rows(ctx, m, rows, idx);
        ggml_tensor * w2 = ggml_set_rows(ctx, m, rows, idx);
        CHECK(dep_kind(w2, w1) == GGML_DEP_RAW);
        CHECK(ggml_n_control_deps(w2) == 1);
        ggml_tensor * w3 = ggml_cpy(ctx, a, v(4, 8));
        ggml_tensor * w4 = ggml_set_rows(ctx, m, rows, idx);
        CHECK(dep_kind(w4, w3) == GGML_DEP_RAW);
        CHECK(dep_kind(w4, w2) == GGML_DEP_RAW); // w2 is the last write covering m
        CHECK(ggml_n_control_deps(w4) == 2);
        // a plain cpy over all of m after them needs none of their bytes: WAW
        ggml_tensor * all = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8);
        ggml_tensor * w5 = ggml_cpy(ctx, all, m);
        CHECK(dep_kind(w5, w4) == GGML_DEP_WAW);
    }
    SUBCASE("cpy over cpy: the later copy is ordered after the earlier one") {
        ggml_tensor * w1 = ggml_cpy(ctx, a, v(4, 4));
        ggml_tensor * w2 = ggml_cpy(ctx, a, v(4, 4));
        CHECK(dep_kind(w2, w1) >= 0);
        CHECK(ggml_n_control_deps(w2) == 1);
    }
    SUBCASE("a covering write hides the writes before it") {
        ggml_tensor * a8 = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
        ggml_tensor * w1 = ggml_cpy(ctx, a8, v(8, 0));
        ggml_tensor * w2 = ggml_cpy(ctx, a8, v(8, 0));
        ggml_tensor * r = ggml_scale(ctx, v(8, 0), 1.0f);
        CHECK(dep_kind(r, w2) == GGML_DEP_RAW);
        CHECK(dep_kind(r, w1) == -1);
        // a partial write after the covering one: a read of the whole range needs both
        ggml_tensor * w3 = ggml_cpy(ctx, a, v(4, 2));
        ggml_tensor * r2 = ggml_scale(ctx, v(8, 0), 1.0f);
        CHECK(dep_kind(r2, w3) == GGML_DEP_RAW);
        CHECK(dep_kind(r2, w2) == GGML_DEP_RAW);
        CHECK(dep_kind(r2, w1) == -1);
    }
    SUBCASE("writing into an op's own result waits for that op") {
        ggml_tensor * t = ggml_scale(ctx, v(8, 0), 2.0f);
        // through a view op: the data edge (cpy's src[1]) orders it; no control edge repeats it
        ggml_tensor * w = ggml_cpy(ctx, a, ggml_view_1d(ctx, t, 4, 0));
        CHECK(w->src[1]->src[0] == t);
        CHECK(dep_kind(w, t) == -1);
        // through ggml_view_tensor, which has no data edge: a control edge
        ggml_tensor * t2 = ggml_scale(ctx, v(8, 0), 3.0f);
        ggml_tensor * w2 = ggml_cpy(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8), ggml_view_tensor(ctx, t2));
        CHECK(dep_kind(w2, t2) == GGML_DEP_WAW);
    }
}

TEST_CASE("edges: non-overlapping views of one buffer are independent; partial overlaps are not") {
    ctx_guard ctx;
    ggml_tensor * buf = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 32);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * a8 = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    auto v = [&](int64_t n, int64_t off) { return ggml_view_1d(ctx, buf, n, off * sizeof(float)); };

    // adjacent ranges [0,4) [4,8) [8,12) [12,16): touching is not overlapping
    ggml_tensor * w1 = ggml_cpy(ctx, a, v(4, 0));
    ggml_tensor * w2 = ggml_cpy(ctx, a, v(4, 4));
    ggml_tensor * r1 = ggml_scale(ctx, v(4, 8), 2.0f);
    ggml_tensor * w3 = ggml_cpy(ctx, a, v(4, 12));
    ggml_tensor * r2 = ggml_scale(ctx, v(4, 4), 2.0f);
    CHECK(ggml_n_control_deps(w1) == 0);
    CHECK(ggml_n_control_deps(w2) == 0);
    CHECK(ggml_n_control_deps(r1) == 0);
    CHECK(ggml_n_control_deps(w3) == 0);
    CHECK(ggml_n_control_deps(r2) == 1);
    CHECK(dep_kind(r2, w2) == GGML_DEP_RAW);

    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r1);
    CHECK(node_index(gf, w1) == -1);
    CHECK(node_index(gf, w2) == -1);

    // partial overlap: write [16, 24), read [20, 28) and [23, 31), not [24, 32)
    ggml_tensor * w4 = ggml_cpy(ctx, a8, v(8, 16));
    ggml_tensor * r3 = ggml_scale(ctx, v(8, 20), 2.0f);
    ggml_tensor * r4 = ggml_scale(ctx, v(8, 23), 2.0f);
    ggml_tensor * r5 = ggml_scale(ctx, v(8, 24), 2.0f);
    CHECK(dep_kind(r3, w4) == GGML_DEP_RAW);
    CHECK(dep_kind(r4, w4) == GGML_DEP_RAW);
    CHECK(ggml_n_control_deps(r5) == 0);
    // a write over [18, 22) must follow the overlapping reads r3, and w4 (not r4, r5)
    ggml_tensor * w5 = ggml_cpy(ctx, a, v(4, 18));
    CHECK(dep_kind(w5, r3) == GGML_DEP_WAR);
    CHECK(dep_kind(w5, w4) >= 0);
    CHECK(dep_kind(w5, r4) == -1);
    CHECK(dep_kind(w5, r5) == -1);
}

TEST_CASE("edges: strided and permuted views are conservative (hull of the touched bytes)") {
    ctx_guard ctx;
    // 8 rows of 4 floats; a column view of rows 0..3 touches floats 0,4,8,12 -> hull [0, 13)
    ggml_tensor * buf = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8);
    const size_t row = buf->nb[1];
    ggml_tensor * col = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 4);
    ggml_tensor * w_col0 = ggml_cpy(ctx, col, ggml_view_2d(ctx, buf, 1, 4, row, 0));
    // column 1 shares no byte with column 0, but the hulls overlap: an edge, never a miss
    ggml_tensor * r_col1 = ggml_scale(ctx, ggml_view_2d(ctx, buf, 1, 4, row, sizeof(float)), 2.0f);
    CHECK(dep_kind(r_col1, w_col0) == GGML_DEP_RAW);
    // row 6 lies beyond the hull
    ggml_tensor * r_row6 = ggml_scale(ctx, ggml_view_1d(ctx, buf, 4, 6 * row), 2.0f);
    CHECK(ggml_n_control_deps(r_row6) == 0);
    // a transposed read of rows 0..1 overlaps the column write
    ggml_tensor * top = ggml_view_2d(ctx, buf, 4, 2, row, 0);
    ggml_tensor * r_t = ggml_cont(ctx, ggml_transpose(ctx, top));
    CHECK(dep_kind(r_t, w_col0) == GGML_DEP_RAW);
    // a permuted 3-d view of the whole buffer, written in place, follows every earlier access
    ggml_tensor * b3 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 4);
    ggml_tensor * r_b3 = ggml_scale(ctx, ggml_view_1d(ctx, b3, 2, 10 * sizeof(float)), 1.0f);
    ggml_tensor * w_b3 = ggml_scale_inplace(ctx, ggml_permute(ctx, b3, 1, 0, 2, 3), 3.0f);
    CHECK(dep_kind(w_b3, r_b3) == GGML_DEP_WAR);
}

TEST_CASE("edges: only a dense write hides the earlier writes inside its span") {
    ctx_guard ctx;
    // 8 rows of 4 floats, zero; a write of floats 1..2, then a column write (floats 0, 4,
    // 8, 12: its span holds 1..2 but it does not write them)
    ggml_tensor * buf = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8);
    std::memset(buf->data, 0, ggml_nbytes(buf));
    const size_t row = buf->nb[1];
    ggml_tensor * two = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2), * col = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 4);
    for (int i = 0; i < 2; ++i) f32(two)[i] = 1.0f;
    for (int i = 0; i < 4; ++i) f32(col)[i] = 5.0f;
    ggml_tensor * w_mid = ggml_cpy(ctx, two, ggml_view_1d(ctx, buf, 2, sizeof(float)));
    ggml_tensor * w_col = ggml_cpy(ctx, col, ggml_view_2d(ctx, buf, 1, 4, row, 0));
    ggml_tensor * r = ggml_scale(ctx, ggml_view_1d(ctx, buf, 16, 0), 1.0f);
    CHECK(dep_kind(r, w_col) == GGML_DEP_RAW);
    CHECK(dep_kind(r, w_mid) == GGML_DEP_RAW); // the bytes the column skips
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, 2) == GGML_STATUS_SUCCESS);
    for (int i = 0; i < 16; ++i) CHECK(f32(r)[i] == (i % 4 == 0 ? 5.0f : (i == 1 || i == 2) ? 1.0f : 0.0f));
    CHECK(node_index(gf, w_mid) < node_index(gf, w_col)); // the node list follows the WAW edge
    CHECK(ggml_graph_validate(gf, nullptr, 0, stderr) == 0);

    // a dense write (a permuted view of all of a tensor, no gaps) still hides what it covers
    ggml_tensor * b3 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 4);
    ggml_tensor * w_part = ggml_cpy(ctx, two, ggml_view_1d(ctx, b3, 2, 4 * sizeof(float)));
    ggml_tensor * w_all = ggml_scale_inplace(ctx, ggml_permute(ctx, b3, 1, 0, 2, 3), 3.0f);
    ggml_tensor * r_b3 = ggml_scale(ctx, ggml_view_1d(ctx, b3, 2, 4 * sizeof(float)), 1.0f);
    CHECK(dep_kind(w_all, w_part) == GGML_DEP_RAW); // in place: it reads what it scales
    CHECK(dep_kind(r_b3, w_all) == GGML_DEP_RAW);
    CHECK(dep_kind(r_b3, w_part) == -1);
}

TEST_CASE("edges: a manual edge into another context is dropped when that context goes") {
    ctx_guard keep;
    ggml_tensor * cache = ggml_new_tensor_1d(keep, GGML_TYPE_F32, 8);
    std::memset(cache->data, 0, ggml_nbytes(cache));
    ggml_tensor * wv = ggml_view_1d(keep, cache, 4, 0);
    for (int step = 0; step < 3; ++step) { // a per-step context, freed after each step
        ggml_init_params p = {1u << 20, nullptr, false};
        ggml_context * sc = ggml_init(p);
        ggml_tensor * x = ggml_new_tensor_1d(sc, GGML_TYPE_F32, 4);
        for (int i = 0; i < 4; ++i) f32(x)[i] = (float) (step + i);
        ggml_tensor * prep = ggml_scale(sc, x, 2.0f);
        ggml_add_control_dep(sc, wv, prep);
        CHECK(ggml_n_control_deps(wv) == 1); // the previous step's edge went with its context
        ggml_tensor * w = ggml_cpy(sc, prep, wv);
        ggml_cgraph * gf = ggml_new_graph(sc);
        ggml_build_forward_expand(gf, w);
        REQUIRE(ggml_graph_compute_with_ctx(sc, gf, 1) == GGML_STATUS_SUCCESS);
        ggml_free(sc);
        CHECK(ggml_n_control_deps(wv) == 0);
        for (int i = 0; i < 4; ++i) CHECK(f32(cache)[i] == 2.0f * (float) (step + i));
    }
    // the other way round: the context holding the edge goes first, then its target's
    ggml_init_params p = {1u << 20, nullptr, false};
    ggml_context * holder = ggml_init(p), * target = ggml_init(p);
    ggml_tensor * t = ggml_scale(holder, ggml_new_tensor_1d(holder, GGML_TYPE_F32, 4), 1.0f);
    ggml_add_control_dep(holder, t, ggml_scale(target, ggml_new_tensor_1d(target, GGML_TYPE_F32, 4), 1.0f));
    CHECK(ggml_n_control_deps(t) == 1);
    ggml_free(holder);
    ggml_free(target); // must not touch the freed holder (ASan)
}

TEST_CASE("edges: reads of a leaf that is never written produce none") {
    ctx_guard ctx;
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 8);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);
    ggml_tensor * r1 = ggml_mul_mat(ctx, w, x);
    ggml_tensor * r2 = ggml_add(ctx, ggml_view_1d(ctx, w, 8, 0), ggml_view_1d(ctx, w, 8, 32));
    ggml_tensor * r3 = ggml_scale(ctx, ggml_transpose(ctx, w), 2.0f);
    ggml_tensor * r4 = ggml_mul_mat(ctx, w, x);
    for (ggml_tensor * t : {r1, r2, r3, r4}) CHECK(ggml_n_control_deps(t) == 0);
}

TEST_CASE("edges: ggml_add_control_dep is followed by build_forward_expand") {
    ctx_guard ctx;
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * y = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * b = ggml_scale(ctx, y, 3.0f);
    CHECK(ggml_n_control_deps(b) == 0);

    ggml_cgraph * g0 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g0, b);
    CHECK(node_index(g0, a) == -1);

    ggml_add_control_dep(ctx, b, a);
    ggml_add_control_dep(ctx, b, a); // one edge per pair
    CHECK(ggml_n_control_deps(b) == 1);
    CHECK(dep_kind(b, a) == GGML_DEP_MANUAL);
    CHECK(std::string(ggml_dep_kind_name(GGML_DEP_MANUAL)) == "MANUAL");

    ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, b);
    REQUIRE(node_index(g1, a) >= 0);
    CHECK(node_index(g1, a) < node_index(g1, b));
    CHECK(ggml_get_control_dep(b, 1, nullptr) == nullptr);
    CHECK(ggml_get_control_dep(b, -1, nullptr) == nullptr);
}

TEST_CASE("edges: ggml_hazards_reset starts an independent program") {
    ctx_guard ctx;
    ggml_tensor * buf = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * r0 = ggml_scale(ctx, ggml_view_1d(ctx, buf, 4, 0), 2.0f);
    ggml_tensor * w = ggml_cpy(ctx, a, ggml_view_1d(ctx, buf, 4, 0));
    CHECK(dep_kind(w, r0) == GGML_DEP_WAR);
    ggml_hazards_reset(ctx);
    ggml_tensor * r = ggml_scale(ctx, ggml_view_1d(ctx, buf, 4, 0), 2.0f);
    ggml_tensor * w2 = ggml_cpy(ctx, a, ggml_view_1d(ctx, buf, 4, 0));
    CHECK(ggml_n_control_deps(r) == 0);
    CHECK(dep_kind(w2, r) == GGML_DEP_WAR); // ordering resumes after the reset
    CHECK(dep_kind(w2, w) == -1);
    CHECK(dep_kind(w2, r0) == -1);

    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    CHECK(node_index(gf, w) == -1);
}

TEST_CASE("edges: in-place ops on views record writes") {
    ctx_guard ctx;
    ggml_tensor * buf = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_tensor * y = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    auto v = [&](int64_t off) { return ggml_view_1d(ctx, buf, 4, off * sizeof(float)); };
    ggml_tensor * r0 = ggml_scale(ctx, v(0), 2.0f);
    ggml_tensor * ip = ggml_add_inplace(ctx, v(2), y); // [2, 6) overlaps r0's [0, 4)
    CHECK(dep_kind(ip, r0) == GGML_DEP_WAR);
    ggml_tensor * r1 = ggml_scale(ctx, v(4), 2.0f);
    CHECK(dep_kind(r1, ip) == GGML_DEP_RAW);
    ggml_tensor * sp = ggml_scale_inplace(ctx, v(5), 0.5f);
    CHECK(dep_kind(sp, ip) == GGML_DEP_RAW); // it reads what ip wrote, then overwrites it
    CHECK(dep_kind(sp, r1) == GGML_DEP_WAR);
    ggml_tensor * r2 = ggml_scale(ctx, v(12), 2.0f);
    CHECK(ggml_n_control_deps(r2) == 0);

    // in place on an op's own result: later readers of that result follow the in-place op
    ggml_tensor * t = ggml_scale(ctx, y, 2.0f);
    ggml_tensor * r_before = ggml_scale(ctx, t, 1.0f);
    ggml_tensor * t2 = ggml_scale_inplace(ctx, t, 3.0f);
    ggml_tensor * r_after = ggml_add(ctx, t, y);
    CHECK(dep_kind(t2, r_before) == GGML_DEP_WAR);
    CHECK(dep_kind(r_after, t2) == GGML_DEP_RAW);
}

// ---- validator ---------------------------------------------------------------------------
TEST_CASE("validate: a hand-built order that reads the cache before writing it is reported") {
    ctx_guard ctx;
    kv_program p = build_kv_cpy(ctx);

    ggml_cgraph * good = ggml_new_graph(ctx);
    ggml_build_forward_expand(good, p.kq);
    CHECK(ggml_graph_validate(good, nullptr, 0, nullptr) == 0);

    ggml_cgraph * same = ggml_new_graph(ctx); // by hand, in a correct order, views left out
    ggml_graph_add_node(same, p.k_cur);
    ggml_graph_add_node(same, p.k_write);
    ggml_graph_add_node(same, p.kq);
    CHECK(ggml_graph_validate(same, nullptr, 0, nullptr) == 0);

    ggml_cgraph * bad = ggml_new_graph(ctx);
    ggml_graph_add_node(bad, p.k_cur);
    ggml_graph_add_node(bad, p.k_view);
    ggml_graph_add_node(bad, p.kq);
    ggml_graph_add_node(bad, p.k_write);

    FILE * log = tmpfile();
    REQUIRE(log != nullptr);
    ggml_hazard h[4];
    const int n = ggml_graph_validate(bad, h, 4, log);
    const std::string text = read_text(log);
    fclose(log);
    INFO(text);
    REQUIRE(n == 1);
    CHECK(h[0].first == p.kq);
    CHECK(h[0].second == p.k_write);
    CHECK(h[0].root == p.k_cache);
    CHECK(h[0].kind == GGML_DEP_RAW);
    CHECK(h[0].first_begin == 0);
    CHECK(h[0].first_end == (size_t) (P0 + N_NEW) * D * sizeof(float));
    CHECK(h[0].second_begin == (size_t) P0 * D * sizeof(float));
    CHECK(h[0].second_end == (size_t) (P0 + N_NEW) * D * sizeof(float));
    CHECK(text.find("RAW") != std::string::npos);
    CHECK(text.find("'kq'") != std::string::npos);
    CHECK(text.find("'k_write'") != std::string::npos);
    CHECK(text.find("'k_cache'") != std::string::npos);

    // the count does not depend on how many reports fit
    CHECK(ggml_graph_validate(bad, nullptr, 0, nullptr) == 1);
    CHECK(ggml_graph_validate(bad, h, 0, nullptr) == 1);
}

TEST_CASE("validate: a missing edge (two contexts, or a reset) is reported as unordered") {
    SUBCASE("two contexts") {
        ctx_guard ctx_a, ctx_b;
        ggml_tensor * cache = ggml_set_name(ggml_new_tensor_1d(ctx_a, GGML_TYPE_F32, 64), "cache");
        ggml_tensor * x = ggml_new_tensor_1d(ctx_a, GGML_TYPE_F32, 16);
        ggml_tensor * w = ggml_set_name(ggml_cpy(ctx_a, ggml_scale(ctx_a, x, 2.0f), ggml_view_1d(ctx_a, cache, 16, 32 * sizeof(float))), "w");
        ggml_tensor * r = ggml_set_name(ggml_scale(ctx_b, ggml_view_1d(ctx_b, cache, 40, 0), 1.0f), "r");
        CHECK(ggml_n_control_deps(r) == 0); // each context keeps its own log

        ggml_cgraph * g1 = ggml_new_graph(ctx_b);
        ggml_build_forward_expand(g1, w);
        ggml_build_forward_expand(g1, r);
        ggml_hazard h;
        REQUIRE(ggml_graph_validate(g1, &h, 1, nullptr) == 1);
        CHECK(h.first == w);
        CHECK(h.second == r);
        CHECK(h.kind == GGML_DEP_RAW);
        CHECK(h.root == cache);
        CHECK(h.first_begin == 32 * sizeof(float));
        CHECK(h.first_end == 48 * sizeof(float));
        CHECK(h.second_begin == 0);
        CHECK(h.second_end == 40 * sizeof(float));

        ggml_cgraph * g2 = ggml_new_graph(ctx_b);
        ggml_build_forward_expand(g2, r);
        ggml_build_forward_expand(g2, w);
        REQUIRE(ggml_graph_validate(g2, &h, 1, nullptr) == 1);
        CHECK(h.first == r);
        CHECK(h.second == w);
        CHECK(h.kind == GGML_DEP_WAR);
    }
    SUBCASE("after ggml_hazards_reset") {
        ctx_guard ctx;
        ggml_tensor * cache = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64);
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
        ggml_tensor * w1 = ggml_cpy(ctx, x, ggml_view_1d(ctx, cache, 16, 0));
        ggml_hazards_reset(ctx);
        ggml_tensor * w2 = ggml_cpy(ctx, x, ggml_view_1d(ctx, cache, 16, 8 * sizeof(float)));
        ggml_tensor * r = ggml_scale(ctx, ggml_view_1d(ctx, cache, 4, 20 * sizeof(float)), 1.0f); // only w2's bytes
        CHECK(dep_kind(r, w2) == GGML_DEP_RAW);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, w1);
        ggml_build_forward_expand(gf, r);
        ggml_hazard h;
        REQUIRE(ggml_graph_validate(gf, &h, 1, nullptr) == 1);
        CHECK(h.first == w1);
        CHECK(h.second == w2);
        CHECK(h.kind == GGML_DEP_WAW);
        CHECK(h.first_begin == 0);
        CHECK(h.second_begin == 8 * sizeof(float));
    }
}

TEST_CASE("validate: a read of a computed tensor that bypasses its data edge") {
    // ggml_view_tensor makes a leaf without src[]: unless an edge orders the read after
    // t's op (hazards.cpp adds none today), listing it first is a hazard either way
    ctx_guard ctx;
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_tensor * t = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * r = ggml_scale(ctx, ggml_view_tensor(ctx, t), 3.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_graph_add_node(gf, r);
    ggml_graph_add_node(gf, t);
    ggml_hazard h;
    REQUIRE(ggml_graph_validate(gf, &h, 1, nullptr) == 1);
    CHECK(h.first == r);
    CHECK(h.second == t);
    CHECK(h.root == t);
    CHECK(h.kind == (ggml_n_control_deps(r) > 0 ? GGML_DEP_RAW : GGML_DEP_WAR));
}

TEST_CASE("validate: large graphs (39k computing nodes) stay exact") {
    // A chain of cache writes and reads over 64 slots; every write keeps reading its slot.
    for (int n_iter : {3000, 13000}) {
        CAPTURE(n_iter);
        const int slots = 64, W = 4;
        ctx_guard ctx((size_t) n_iter * 4 * 600 + (16u << 20));
        ggml_tensor * cache = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, slots * W);
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, W);
        ggml_cgraph * gf = ggml_new_graph_custom(ctx, (size_t) n_iter * 6 + 64, false);
        int target_writes = 0;
        const int target = 7;
        for (int i = 0; i < n_iter; ++i) {
            const int s = (i * 13) % slots;
            ggml_tensor * r = ggml_scale(ctx, ggml_view_1d(ctx, cache, 2 * W, (size_t) ((s + slots - 2) % (slots - 1)) * W * sizeof(float)), 0.5f);
            ggml_tensor * w = ggml_cpy(ctx, ggml_add(ctx, ggml_view_1d(ctx, r, W, 0), x), ggml_view_1d(ctx, cache, W, (size_t) s * W * sizeof(float)));
            if (s == target) ++target_writes;
            ggml_build_forward_expand(gf, w);
        }
        CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == 0);
        // an op created after a reset is unordered against every earlier write of its slot
        ggml_hazards_reset(ctx);
        ggml_build_forward_expand(gf, ggml_scale(ctx, ggml_view_1d(ctx, cache, W, (size_t) target * W * sizeof(float)), 1.0f));
        CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == target_writes);
    }
}

TEST_CASE("dot: control edges are dashed and labelled with their kind") {
    ctx_guard ctx;
    kv_program p = build_kv_cpy(ctx);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * m = ggml_set_name(ggml_scale(ctx, x, 1.0f), "manual_dep");
    ggml_add_control_dep(ctx, p.kq, m);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, p.kq);

    const std::string path = (std::filesystem::temp_directory_path() / "kvg-test-hazards.dot").string();
    ggml_graph_dump_dot(nullptr, gf, path.c_str());
    std::ifstream f(path);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string dot = ss.str();
    std::filesystem::remove(path);
    INFO(dot);
    CHECK(dot.rfind("digraph", 0) == 0);
    CHECK(dot.find("kq\\nMUL_MAT") != std::string::npos);
    CHECK(dot.find("k_write\\nCPY") != std::string::npos);
    CHECK(dot.find("k_cache\\n[8, 16] f32") != std::string::npos);
    CHECK(dot.find("style = dashed, color = red, fontcolor = red, label = \"RAW\"") != std::string::npos);
    CHECK(dot.find("label = \"MANUAL\"") != std::string::npos);
    CHECK(dot.find("label = \"WAR\"") == std::string::npos);
    CHECK(dot.rfind("}\n") == dot.size() - 2);
}
