// mul_mat and the CPU vec_dot kernels against naive double-precision loops written here,
// on every SIMD path this machine has (the panel tiles: test-matmul-panels.cpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "matmul-common.h"


TEST_CASE("cpu traits: vec_dot types and activation conversion") {
    CHECK(ggml_get_type_traits_cpu(GGML_TYPE_F32)->vec_dot_type == GGML_TYPE_F32);
    // f16 and bf16: ggml's traits (same-type vec_dot); the matmul kernels take f32 activations
    CHECK(ggml_get_type_traits_cpu(GGML_TYPE_F16)->vec_dot_type == GGML_TYPE_F16);
    CHECK(ggml_get_type_traits_cpu(GGML_TYPE_BF16)->vec_dot_type == GGML_TYPE_BF16);
    CHECK(kvg::mm_vec_dot_type(GGML_TYPE_F16) == GGML_TYPE_F32);
    CHECK(kvg::mm_vec_dot_type(GGML_TYPE_BF16) == GGML_TYPE_F32);
    CHECK(ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->vec_dot_type == GGML_TYPE_Q8_0);
    CHECK(ggml_get_type_traits_cpu(GGML_TYPE_Q4_0)->vec_dot_type == GGML_TYPE_Q8_0);
    for (ggml_type t : {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL}) {
        CHECK(ggml_get_type_traits_cpu(t)->vec_dot_type == GGML_TYPE_Q8_0);
    }
    for (ggml_type t : {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                        GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S}) {
        CHECK(ggml_get_type_traits_cpu(t)->vec_dot_type == GGML_TYPE_Q8_K);
    }
    for (ggml_type t : ALL_TYPES) {
        const ggml_type_traits_cpu * tr = ggml_get_type_traits_cpu(t);
        REQUIRE(bool(tr->vec_dot));
        if (t != GGML_TYPE_F32 && !ggml_get_type_traits(t)->from_float_ref) { // read, not written
            CHECK(!tr->from_float);
            continue;
        }
        REQUIRE(bool(tr->from_float));
        CHECK(tr->nrows == 1);
        // from_float must agree with the reference conversion of the type
        const int64_t n = std::max<int64_t>(64, ggml_blck_size(t)); // a whole block of the k-quants
        std::vector<float> x(n);
        for (auto & v : x) v = frand();
        std::vector<uint8_t> a(ggml_row_size(t, n)), b(a.size());
        tr->from_float(x.data(), a.data(), n);
        if (t == GGML_TYPE_F32) std::memcpy(b.data(), x.data(), b.size());
        else ggml_get_type_traits(t)->from_float_ref(x.data(), b.data(), n);
        CHECK(a == b);
    }
    CHECK(ggml_cpu_has_neon() == 0);
    if (ggml_cpu_has_avx512()) CHECK(ggml_cpu_has_avx2());
}

TEST_CASE("q8_0 activation quantizer matches the reference bit for bit on every path (ties included)") {
    std::vector<float> x(32 * 64);
    for (auto & v : x) v = frand();
    // blocks whose scale is exactly 1: values k + 0.5 are rounding ties, plus values just below 0.5
    for (int b = 0; b < 8; ++b) {
        float * xb = x.data() + 32 * b;
        xb[0] = 127.0f;
        for (int j = 1; j < 32; ++j) xb[j] = (float) ((j * 7 + b) % 200 - 100) + 0.5f;
        xb[5] = 0.49999997f;
        xb[6] = -0.49999997f;
        xb[7] = -0.5f;
    }
    std::vector<block_q8_0> want(64), got(64);
    quantize_row_q8_0_ref(x.data(), want.data(), (int64_t) x.size());
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        CAPTURE((int) path);
        std::memset(got.data(), 0, got.size() * sizeof(block_q8_0));
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(x.data(), got.data(), (int64_t) x.size());
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(block_q8_0)) == 0);
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

TEST_CASE("q8_K activation quantizer matches the reference bit for bit on every path") {
    std::vector<float> x(QK_K * 6);
    for (auto & v : x) v = frand();
    // super-block 0: scale exactly 1 (ties and near-ties); 1: all zero; 2: one huge value
    x[0] = 127.0f;
    for (int j = 1; j < QK_K; ++j) x[j] = (float) ((j * 7) % 200 - 100) + 0.5f;
    x[5] = 0.49999997f;
    x[6] = -0.5f;
    std::fill(x.begin() + QK_K, x.begin() + 2 * QK_K, 0.0f);
    x[2 * QK_K + 17] = -3e4f;
    std::vector<block_q8_K> want(6), got(6);
    quantize_row_q8_K_ref(x.data(), want.data(), (int64_t) x.size());
    // the reference itself: bsums are the sums of 16 quants, values within half a step
    for (int b = 0; b < 6; ++b) {
        for (int s = 0; s < QK_K / 16; ++s) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += want[b].qs[16 * s + j];
            CHECK(want[b].bsums[s] == sum);
        }
        for (int j = 0; j < QK_K; ++j) CHECK(std::fabs(want[b].d * want[b].qs[j] - x[b * QK_K + j]) <= 0.5f * want[b].d + 1e-6f);
    }
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        CAPTURE((int) path);
        std::memset(got.data(), 0, got.size() * sizeof(block_q8_K));
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data(), got.data(), (int64_t) x.size());
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(block_q8_K)) == 0);
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

TEST_CASE("each path's kernel table holds its own functions") {
    // GCC once gave the table fillers weak symbols, so unoptimized builds merged them and
    // the scalar table ran AVX-512 tiles; distinct tables must hold distinct functions
    const kvg::cpu_kernels * paths[] = {&kvg::kernels_scalar(), kvg::kernels_avx2(), kvg::kernels_avx512()};
    for (int a = 0; a < 3; ++a) {
        for (int b = a + 1; b < 3; ++b) {
            if (!paths[a] || !paths[b]) continue;
            CAPTURE(a); CAPTURE(b);
            CHECK(paths[a]->mm[kvg::MM_Q8_0].panel_rows == 0); // panel tiles: the VNNI table only
            for (int t = 0; t < kvg::MM_Q4_0_R16; ++t) {       // (q4_0_r16: mv kernels on the AVX2 and VNNI paths only)
                // the 32-value block types after q4_0 but iq4_nl have AVX2 tiles only, which the AVX-512 table shares
                if (a == 1 && b == 2 && t >= kvg::MM_Q4_1 && t < kvg::MM_Q2_K && t != kvg::MM_IQ4_NL) {
                    CHECK((paths[a]->mm[t].tile[1][1] == paths[b]->mm[t].tile[1][1]));
                    continue;
                }
                CHECK((paths[a]->mm[t].tile[1][1] != paths[b]->mm[t].tile[1][1]));
                CHECK((paths[a]->mm[t].tile[paths[a]->mm[t].rows][paths[a]->mm[t].cols] !=
                       paths[b]->mm[t].tile[paths[b]->mm[t].rows][paths[b]->mm[t].cols]));
            }
            CHECK((paths[a]->quantize_q8_0 != paths[b]->quantize_q8_0));
            CHECK((paths[a]->dequantize_q8_0 != paths[b]->dequantize_q8_0));
        }
    }
    // the VNNI table is the AVX-512 one plus panel tiles for q8_0, q4_0, the k-quants and iq4_nl
    if (const kvg::cpu_kernels * v = kvg::kernels_avx512_vnni()) {
        for (int t : {kvg::MM_Q8_0, kvg::MM_Q4_0, kvg::MM_Q2_K, kvg::MM_Q3_K, kvg::MM_Q4_K, kvg::MM_Q5_K, kvg::MM_Q6_K, kvg::MM_IQ4_NL}) {
            CHECK(v->mm[t].panel_rows >= 1);
            for (int r = 1; r <= v->mm[t].panel_rows; ++r) CHECK(bool(v->mm[t].panel[r]));
        }
        CHECK(v->mm[kvg::MM_F32].panel_kind == kvg::MM_PANEL_F32);
        CHECK(v->mm[kvg::MM_BF16].panel_rows == 0);
        CHECK(bool(v->pack_panel));
    }
    // the BF16 table is the VNNI one plus BF16 panel tiles for bf16 weights (f16 keeps the F32 panels)
    if (const kvg::cpu_kernels * b = kvg::kernels_avx512_bf16()) {
        const kvg::cpu_kernels * v = kvg::kernels_avx512_vnni();
        CHECK(b->mm[kvg::MM_BF16].panel_kind == kvg::MM_PANEL_BF16);
        CHECK(b->mm[kvg::MM_BF16].panel_rows >= 1);
        for (int r = 1; r <= b->mm[kvg::MM_BF16].panel_rows; ++r) CHECK(bool(b->mm[kvg::MM_BF16].panel[r]));
        CHECK(b->mm[kvg::MM_F16].panel_kind == kvg::MM_PANEL_F32); // f16 keeps the AVX-512 table's F32 panels
        CHECK((b->mm[kvg::MM_Q4_K].panel[1] == v->mm[kvg::MM_Q4_K].panel[1]));
        CHECK(bool(b->pack_panel_bf16));
        CHECK(v->mm[kvg::MM_Q8_0].panel_kind == kvg::MM_PANEL_Q8_0);
    }
    // with panels, k-quant weights take q8_0 activations from the kernel's panel_min rows on
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    if (kvg::cpu_active_path() >= kvg::PATH_AVX512_VNNI) { // not under KVG_CPU_FEATURES=avx512 or lower
        const int min_q4k = kvg::kernels_avx512_vnni()->mm[kvg::MM_Q4_K].panel_min;
        const int min_q6k = kvg::kernels_avx512_vnni()->mm[kvg::MM_Q6_K].panel_min;
        CHECK(min_q4k > 1);
        CHECK(kvg::mm_activation_type(GGML_TYPE_Q4_K, min_q4k, 4096) == GGML_TYPE_Q8_0);
        CHECK(kvg::mm_activation_type(GGML_TYPE_Q6_K, min_q6k - 1, 4096) == GGML_TYPE_Q8_K);
        CHECK(kvg::mm_activation_type(GGML_TYPE_IQ4_NL, 100, 4096) == GGML_TYPE_Q8_0);
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_AVX512);
        CHECK(kvg::mm_activation_type(GGML_TYPE_Q4_K, 100, 4096) == GGML_TYPE_Q8_K);
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    }
}

TEST_CASE("every register tile shape of every type on every path matches the scalar kernels") {
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (ggml_type t : ALL_TYPES) {
            const kvg::mm_type mt = kvg::mm_type_of(t);
            const std::string type_name = ggml_type_name(t);
            CAPTURE(type_name);
            const bool quant = ggml_is_quantized(t);
            const int64_t u = ggml_blck_size(t);
            const ggml_type vt = kvg::mm_vec_dot_type(t);
            const kvg::mm_kernel & mk = kern.mm[mt];
            REQUIRE(mk.rows >= 1);
            REQUIRE(mk.cols >= 1);
            for (int64_t K : quant ? std::vector<int64_t>{u, 3 * u, 5 * u} : std::vector<int64_t>{5, 16, 37, 100, 200}) {
                CAPTURE(K);
                // rows padded so the strides are not multiples of the vector width
                const size_t ws = ggml_row_size(t, K) + ggml_type_size(t), xs = ggml_row_size(vt, K) + 4;
                std::vector<uint8_t> w(ws * mk.rows), x(xs * mk.cols);
                std::vector<float> row(K);
                std::vector<std::vector<float>> wv(mk.rows, std::vector<float>(K)), xv(mk.cols, std::vector<float>(K));
                for (int r = 0; r < mk.rows; ++r) {
                    for (auto & v : row) v = frand();
                    encode_row(t, row.data(), &w[r * ws], K);
                    decode_row(t, &w[r * ws], wv[r].data(), K);
                }
                for (int c = 0; c < mk.cols; ++c) {
                    for (auto & v : row) v = frand();
                    encode_row(vt, row.data(), &x[c * xs], K);
                    decode_row(vt, &x[c * xs], xv[c].data(), K);
                }
                // sum |w * x| of each pair: float rounding is relative to it
                auto mag = [&](int r, int c) {
                    double m = 0;
                    for (int64_t i = 0; i < K; ++i) m += std::fabs((double) wv[r][i] * xv[c][i]);
                    return m;
                };
                for (int R = 1; R <= mk.rows; ++R) {
                    for (int C = 1; C <= mk.cols; ++C) {
                        CAPTURE(R); CAPTURE(C);
                        REQUIRE(bool(mk.tile[R][C]));
                        // out stride 11, accumulating onto 1.0 so both store modes are checked
                        std::vector<float> got(11 * C, 1.0f), want(11 * C, 1.0f);
                        const char * wp = (const char *) w.data(), * xp = (const char *) x.data();
                        mk.tile[R][C]({K, wp, ws, xp, xs, got.data(), 11, true});
                        for (int r = 0; r < R; ++r) {
                            for (int c = 0; c < C; ++c) {
                                const kvg::mm_kernel & ref = kvg::kernels_scalar().mm[mt];
                                ref.tile[1][1]({K, wp + r * ws, ws, xp + c * xs, xs, &want[c * 11 + r], 11, true});
                            }
                        }
                        for (int r = 0; r < R; ++r) {
                            for (int c = 0; c < C; ++c) {
                                const size_t i = c * 11 + r;
                                CHECK(std::fabs(got[i] - want[i]) <= 1e-4 * (1.0 + std::fabs(want[i])) + 1e-5 * mag(r, c));
                            }
                        }
                        // overwrite mode leaves the other entries alone
                        std::vector<float> got2(11 * C, -7.0f);
                        mk.tile[R][C]({K, wp, ws, xp, xs, got2.data(), 11, false});
                        for (int c = 0; c < C; ++c) {
                            for (int r = 0; r < 11; ++r) {
                                if (r >= R) CHECK(got2[c * 11 + r] == -7.0f);
                                else CHECK(std::fabs(got2[c * 11 + r] + 1.0f - got[c * 11 + r]) <= 1e-4 * (1.0 + std::fabs(got[c * 11 + r])) + 1e-5 * mag(r, c));
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("dots_f32 (short rows) matches a double-precision loop and the bits of the f32 tiles") {
    int tested = 0;
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        if (!kern.dots_f32) continue;
        ++tested;
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (int64_t k : {1, 8, 15, 16, 17, 37, 64, 100}) {
            for (int64_t n : {1, 5, 16, 17, 40}) {
                CAPTURE(k); CAPTURE(n);
                // padded strides: rows and queries not on vector boundaries
                const int64_t rs = k + 3, xs = k + 1, os = n + 2;
                std::vector<float> rows(n * rs), x(kvg::MM_MAX_COLS * xs);
                for (auto & v : rows) v = frand();
                for (auto & v : x) v = frand();
                for (int C = 1; C <= kvg::MM_MAX_COLS; ++C) {
                    CAPTURE(C);
                    std::vector<float> got(C * os, -7.0f);
                    kern.dots_f32(C, n, x.data(), xs, (const char *) rows.data(), rs * 4, k, got.data(), os);
                    for (int c = 0; c < C; ++c) {
                        for (int64_t j = 0; j < os; ++j) {
                            if (j >= n) { CHECK(got[c * os + j] == -7.0f); continue; }
                            double want = 0, mag = 0;
                            for (int64_t i = 0; i < k; ++i) {
                                want += (double) x[c * xs + i] * rows[j * rs + i];
                                mag += std::fabs((double) x[c * xs + i] * rows[j * rs + i]);
                            }
                            CHECK(std::fabs(got[c * os + j] - want) <= 1e-6 * mag + 1e-30);
                            // a 1 x 2 tile (the query twice) sums in the same order
                            float tile_out[2];
                            kern.mm[kvg::MM_F32].tile[1][2]({k, (const char *) &rows[j * rs], 0, (const char *) &x[c * xs], 0,
                                                             tile_out, 1, false});
                            CHECK(std::memcmp(&tile_out[0], &got[c * os + j], sizeof(float)) == 0);
                        }
                    }
                }
            }
        }
    }
    if (kvg::cpu_best_path() >= kvg::PATH_AVX512) CHECK(tested > 0);
}

TEST_CASE("float matrix-vector tiles (mv_float) match a double-precision loop and the bits of tile[1][1]") {
    int tested = 0;
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            const kvg::mm_kernel & mk = kern.mm[kvg::mm_type_of(t)];
            if (!mk.mv_float) continue;
            ++tested;
            const std::string type_name = ggml_type_name(t);
            CAPTURE(type_name);
            for (int64_t K : {5, 16, 37, 64, 100, 129, 200, 1031, 4133}) {
                CAPTURE(K);
                // rows padded so the stride is not a multiple of the vector width; one spare
                // row past the tile (its prefetch target)
                const size_t ws = ggml_row_size(t, K) + ggml_type_size(t);
                const int n = mk.mv_rows;
                std::vector<uint8_t> w(ws * (n + 1));
                std::vector<float> x(K), row(K);
                std::vector<std::vector<float>> wv(n, std::vector<float>(K));
                for (auto & v : x) v = frand();
                for (int r = 0; r <= n; ++r) {
                    for (auto & v : row) v = frand();
                    encode_row(t, row.data(), &w[r * ws], K);
                    if (r < n) decode_row(t, &w[r * ws], wv[r].data(), K);
                }
                for (int rows = 1; rows <= n; ++rows) {
                    CAPTURE(rows);
                    std::vector<float> got(n + 1, -7.0f);
                    mk.mv_float({K, (const char *) w.data(), ws, (const char *) x.data(), 0, got.data(), 1, false, rows});
                    CHECK(got[rows] == -7.0f);
                    for (int r = 0; r < rows; ++r) {
                        double want = 0, mag = 0;
                        for (int64_t i = 0; i < K; ++i) {
                            want += (double) wv[r][i] * x[i];
                            mag += std::fabs((double) wv[r][i] * x[i]);
                        }
                        CHECK(std::fabs(got[r] - want) <= 1e-5 * mag + 1e-30);
                        float one = 0;
                        mk.tile[1][1]({K, (const char *) &w[r * ws], ws, (const char *) x.data(), 0, &one, 1, false});
                        CHECK(std::memcmp(&one, &got[r], sizeof(float)) == 0);
                    }
                    // accumulate mode adds to the outputs
                    std::vector<float> acc(n + 1, 1.0f);
                    mk.mv_float({K, (const char *) w.data(), ws, (const char *) x.data(), 0, acc.data(), 1, true, rows});
                    for (int r = 0; r < rows; ++r) CHECK(acc[r] == 1.0f + got[r]);
                    CHECK(acc[rows] == 1.0f);
                }
            }
        }
    }
    if (kvg::cpu_best_path() >= kvg::PATH_AVX512) CHECK(tested > 0);
}

TEST_CASE("mul_mat: f16 and bf16 matrix-vector products (two-row tiles, lone last rows, several K chunks)") {
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (int64_t K : {7, 64, 200, 2048, 4160}) {
            for (int64_t N : {1, 2, 17, 37}) check_matvec(t, K, N);
        }
    }
}

TEST_CASE("mul_mat: f32 matrix-vector products of tiny-model shapes (dots_f32 blocks and lone last rows)") {
    for (int64_t K : {8, 64, 172, 512, 513}) {
        for (int64_t N : {1, 16, 17, 33, 64, 172}) check_matvec(GGML_TYPE_F32, K, N);
    }
}

TEST_CASE("vec_dot of every type matches a double-precision loop on every path") {
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        const std::string path_str = path_name(path);
        CAPTURE(path_str);
        for (ggml_type t : ALL_TYPES) {
            const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
            const ggml_type_traits_cpu * tr = ggml_get_type_traits_cpu(t);
            const bool quant = ggml_is_quantized(t);
            for (int n : {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 127, 255, 257, 1000, 1023, 4096, 4128}) {
                if (quant && n % ggml_blck_size(t) != 0) continue;
                CAPTURE(n);
                std::vector<float> xf(n), yf(n);
                for (auto & v : xf) v = frand();
                for (auto & v : yf) v = frand();
                std::vector<uint8_t> x(ggml_row_size(t, n)), y(ggml_row_size(tr->vec_dot_type, n));
                encode_row(t, xf.data(), x.data(), n);
                encode_row(tr->vec_dot_type, yf.data(), y.data(), n);
                // reference on the values the kernel sees
                std::vector<float> xv(n), yv(n);
                decode_row(t, x.data(), xv.data(), n);
                decode_row(tr->vec_dot_type, y.data(), yv.data(), n);
                double want = 0, mag = 0;
                for (int i = 0; i < n; ++i) {
                    want += (double) xv[i] * yv[i];
                    mag += std::fabs((double) xv[i] * yv[i]);
                }
                float got = NAN;
                tr->vec_dot(n, &got, 0, x.data(), 0, y.data(), 0, 1);
                CHECK(std::fabs(got - want) <= 2e-5 * mag + 1e-6);
            }
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

TEST_CASE("mul_mat: every weight type, matrix-vector and matrix-matrix, odd sizes") {
    for (ggml_type t : ALL_TYPES) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const bool quant = ggml_is_quantized(t);
        // K in blocks; the large K spans several K chunks of the tiles (2048 values)
        const int64_t u = k_unit(t), big = u == 32 ? 4160 : 17 * u;
        struct Shape { int64_t K, N, M; };
        const std::vector<Shape> shapes = quant
            ? std::vector<Shape>{{u, 5, 1}, {3 * u, 13, 1}, {5 * u, 7, 3}, {3 * u, 71, 5}, {2 * u, 9, 70}, {big, 9, 6}, {big, 37, 1},
                                 // panels (VNNI path): exactly one; K chunks; one row past a pair; a pair and a partial one
                                 {big, 19, 16}, {3 * u, 67, 33}, {2 * u, 11, 50},
                                 {8 * u, 21, 1}, // packed matrix-vector row (VNNI path: K a multiple of 128)
                                 {4 * u, 21, 10}} // a single partial panel
            : std::vector<Shape>{{1, 3, 1}, {67, 13, 1}, {67, 5, 3}, {33, 71, 5}, {17, 9, 70}, {1100, 9, 6}, {1031, 37, 1},
                                 {65, 67, 33}}; // the last one is large enough for the OpenBLAS route (KVG_OPENBLAS)
        for (const Shape & s : shapes) check_product(t, s.K, s.N, s.M);
    }
}

// The executor keeps each graph's per-node facts (tasks, phases, scratch) between computes:
// a graph computed again after its thread count or the CPU path changed must follow (q4_0
// panels on the VNNI path need a conversion phase and more scratch than the scalar path's
// q8_0 rows; a stale fact would abort on the work buffer or give wrong values).
TEST_CASE("mul_mat: one graph computed again on other thread counts and paths") {
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_0, 256, 37);
    ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 256, 8);
    fill_random(a);
    fill_random(b);
    ggml_tensor * node = ggml_mul_mat(c.ctx, a, b);
    ggml_cgraph * gf = ggml_new_graph(c.ctx);
    ggml_build_forward_expand(gf, node);
    std::vector<ggml_cpu_features> order = available_paths();
    order.insert(order.end(), order.rbegin(), order.rend()); // up, then down again
    std::vector<uint8_t> work;
    for (ggml_cpu_features path : order) {
        ggml_cpu_set_features_limit(path);
        const std::string path_str = path_name(path);
        CAPTURE(path_str);
        const RefResult ref = ref_mul_mat(a, b, kvg::mm_activation_type(a->type, b->ne[1], b->ne[0]));
        for (int n_threads : {2, 1, 2}) {
            CAPTURE(n_threads);
            ggml_cplan plan = ggml_graph_plan(gf, n_threads, nullptr);
            work.assign(plan.work_size, 0);
            plan.work_data = work.empty() ? nullptr : work.data();
            std::memset(node->data, 0xff, ggml_nbytes(node));
            REQUIRE(ggml_graph_compute(gf, &plan) == GGML_STATUS_SUCCESS);
            check_close(read_dst(node), ref, tolerance(a->type));
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

TEST_CASE("VNNI matrix-vector kernels give the bits of the AVX-512 tiles") {
    if (kvg::cpu_best_path() < kvg::PATH_AVX512_VNNI) return;
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, 1024, 13);
        ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 1024, 1);
        fill_random(a);
        fill_random(b);
        // k-quants: any quant and scale bits (largest products included), the f16 scales kept
        const size_t bs = ggml_type_size(t), f16_at = t == GGML_TYPE_Q6_K ? 208 : 0, f16_len = t == GGML_TYPE_Q6_K ? 2 : 4;
        std::mt19937 gen(7);
        for (size_t i = 0; ggml_is_quantized(t) && ggml_blck_size(t) == QK_K && i < ggml_nbytes(a); ++i) {
            if (i % bs < f16_at || i % bs >= f16_at + f16_len) ((uint8_t *) a->data)[i] = (uint8_t) gen();
        }
        ggml_tensor * d = ggml_mul_mat(c.ctx, a, b);
        std::vector<float> got[2];
        const ggml_cpu_features paths[2] = {GGML_CPU_FEATURES_AVX512, GGML_CPU_FEATURES_AVX512_VNNI};
        for (int i = 0; i < 2; ++i) {
            ggml_cpu_set_features_limit(paths[i]);
            run_mul_mat(d, 1);
            got[i] = read_dst(d);
        }
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
        CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
    }
}

TEST_CASE("mul_mat: one activation row (matrix-vector kernels) against the reference on every path") {
    for (ggml_type t :
         {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0,
          GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        for (int64_t K : {256, 768, 2048}) {
            for (int64_t N : {1, 7, 37}) check_matvec(t, K, N);
        }
    }
}

// iq4_xs (signed table values, q8_K activations) and the ternary types: random blocks, so every
// scale code and the largest products (iq4_xs: level -127, scale -32, activations at +-127;
// tq2_0: code 3, which the encoder never writes; tq1_0: every byte, 243..255 too) occur; odd
// weight row counts; every activation count the tiles switch on (1..8 columns, several tiles,
// panels' sizes on other types); K within one chunk and across several. iq3_xxs / iq3_s: every
// grid index, sign pattern (iq3_xxs's parity bit too) and scale code occur.
TEST_CASE("mul_mat: iq4_xs, tq1_0, tq2_0, iq3_xxs, iq3_s random blocks, odd rows, every activation count, every path") {
    std::mt19937 gen(11);
    for (ggml_type t : {GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const auto random_blocks = [&gen, t](ggml_tensor * a) {
            uint8_t * p = (uint8_t *) a->data;
            for (size_t i = 0; i < ggml_nbytes(a); ++i) p[i] = (uint8_t) gen();
            for (size_t at = 0; at < ggml_nbytes(a); at += ggml_type_size(t)) {
                const ggml_fp16_t d = ggml_fp32_to_fp16(0.01f * frand());
                std::memcpy(p + at + scale_offsets(t)[0], &d, sizeof d);
            }
        };
        for (int64_t K : {256, 4352}) {
            for (int64_t N : {7, 37}) {
                for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33}) check_product(t, K, N, M, random_blocks);
            }
        }
    }
}

// Batched decoding multiplies the weights by a few activation rows: every row count a kernel
// switches on (one row, the multi-row matrix-vector kernels up to their mv_max, the tiles and
// the panels past them) for every weight type on every path, against the reference.
TEST_CASE("mul_mat: every activation row count 1..17 and past the panels, every weight type, every path") {
    for (ggml_type t : ALL_TYPES) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const int64_t u = k_unit(t);
        // whole packed groups of 128 (matrix-vector kernels), and 5 blocks (the tiles)
        for (int64_t K : {std::max<int64_t>(256, u), 5 * u}) {
            for (int64_t M = 1; M <= 17; ++M) check_product(t, K, 9, M);
            for (int64_t M : {24, 33}) check_product(t, K, 9, M);
        }
    }
}

TEST_CASE("mul_mat: q4_0 and q8_0 times 2..16 rows over several K chunks (multi-row matrix-vector kernels)") {
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        for (int64_t M : {2, 3, 5, 8, 9, 15, 16}) check_product(t, 6272, 21, M);
    }
}

// The multi-row matrix-vector kernels (mv_cols > 1) give every output the bits of tile[1][1] on
// the same q8_0 rows, and leave the outputs of rows past n_x alone.
TEST_CASE("multi-row matrix-vector kernels give the bits of tile[1][1]") {
    int tested = 0;
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
            const std::string type_name = ggml_type_name(t);
            CAPTURE(type_name);
            const kvg::mm_kernel & mk = kern.mm[kvg::mm_type_of(t)];
            if (!mk.mv || mk.mv_cols <= 1) continue;
            ++tested;
            for (int64_t K : {128, 1152}) {
                CAPTURE(K);
                const int R = 3, C = mk.mv_cols;
                const size_t ws = ggml_row_size(t, K), qs = ggml_row_size(GGML_TYPE_Q8_0, K);
                const size_t ps = (size_t) (K / kvg::MM_MV_GROUP) * mk.mv_group_bytes + 32; // not a multiple of 64
                std::vector<uint8_t> w(ws * R), q(qs * C), packed(ps * C);
                std::vector<float> row(K), want(C * R);
                for (int r = 0; r < R; ++r) {
                    for (auto & v : row) v = frand();
                    encode_row(t, row.data(), &w[r * ws], K);
                }
                for (int c = 0; c < C; ++c) {
                    for (auto & v : row) v = frand();
                    encode_row(GGML_TYPE_Q8_0, row.data(), &q[c * qs], K);
                    mk.pack_mv(&q[c * qs], &packed[c * ps], K);
                    for (int r = 0; r < R; ++r) {
                        mk.tile[1][1]({K, (const char *) &w[r * ws], ws, (const char *) &q[c * qs], qs,
                                       &want[c * R + r], R, false});
                    }
                }
                for (int n_x = 1; n_x <= C; ++n_x) {
                    for (bool acc : {false, true}) {
                        CAPTURE(n_x);
                        CAPTURE(acc);
                        std::vector<float> got(C * R, 0.5f);
                        mk.mv({K, (const char *) w.data(), ws, (const char *) packed.data(), ps, got.data(), R, acc, R,
                               0, n_x});
                        for (int i = 0; i < C * R; ++i) {
                            const float expect = i >= n_x * R ? 0.5f : acc ? 0.5f + want[i] : want[i];
                            CHECK(std::memcmp(&got[i], &expect, sizeof(float)) == 0);
                        }
                    }
                }
            }
        }
    }
    if (kvg::cpu_best_path() >= kvg::PATH_AVX2) CHECK(tested > 0);
}

// A sequence's logits do not depend on the sequences batched with it: row m of an M-row
// product has the bits of the one-row product of row m (within one K chunk, on paths without
// panel tiles for the type: those round M rows as q8_0 panels from their panel_min on).
TEST_CASE("mul_mat: q4_0 and q8_0, each row of an M-row product has the bits of that row alone") {
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        for (int64_t M : {2, 4, 7, 8, 9, 16, 17}) {
            CAPTURE(M);
            Ctx c;
            const int64_t K = 1024, N = 13;
            ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, K, N);
            ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K, M);
            fill_random(a);
            fill_random(b);
            ggml_tensor * d = ggml_mul_mat(c.ctx, a, b);
            for (ggml_cpu_features path : available_paths()) {
                ggml_cpu_set_features_limit(path);
                const std::string path_str = path_name(path);
                CAPTURE(path_str);
                if (kvg::cpu_active_kernels().mm[kvg::mm_type_of(t)].panel_rows > 0) continue;
                run_mul_mat(d, 2);
                const std::vector<float> all = read_dst(d);
                for (int64_t m = 0; m < M; ++m) {
                    ggml_tensor * dm = ggml_mul_mat(c.ctx, a, ggml_view_2d(c.ctx, b, K, 1, b->nb[1], m * b->nb[1]));
                    run_mul_mat(dm, 1);
                    CHECK(std::memcmp(read_dst(dm).data(), all.data() + m * N, N * sizeof(float)) == 0);
                }
            }
            ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
        }
    }
}

TEST_CASE("mul_mat: broadcasting the weights over dims 2 and 3") {
    for (ggml_type t : ALL_TYPES) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const int64_t K = 3 * k_unit(t) + (ggml_is_quantized(t) ? 0 : 2);
        Ctx c;
        // ne02 = 2, ne12 = 6 (3 activation batches per weight matrix); ne03 = 1, ne13 = 2
        ggml_tensor * a = ggml_new_tensor_4d(c.ctx, t, K, 11, 2, 1);
        for (int64_t M : {1, 5, 20}) { // 20: every type's panel tiles where a path has them
            CAPTURE(M);
            ggml_tensor * b = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, K, M, 6, 2);
            fill_random(a);
            fill_random(b);
            check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
        }
        // ne03 = 2, ne13 = 4 with ne02 = ne12
        ggml_tensor * a2 = ggml_new_tensor_4d(c.ctx, t, K, 7, 3, 2);
        ggml_tensor * b2 = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, K, 4, 3, 4);
        fill_random(a2);
        fill_random(b2);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a2, b2));
    }
}

TEST_CASE("mul_mat: non-contiguous weights (row-strided and per-head views of a cache)") {
    for (ggml_type t : ALL_TYPES) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const int64_t u = k_unit(t);
        const int64_t K = ggml_is_quantized(t) ? 2 * u : 19;
        Ctx c;
        // a cache [K + pad, n_ctx, n_head]: view the first K elements of 9 rows of each head, starting at row 2
        ggml_tensor * cache = ggml_new_tensor_3d(c.ctx, t, K + 2 * u, 16, 4);
        fill_random(cache);
        ggml_tensor * a = ggml_view_3d(c.ctx, cache, K, 9, 4, cache->nb[1], cache->nb[2], 2 * cache->nb[1] + ggml_row_size(t, u));
        REQUIRE(!ggml_is_contiguous(a));
        for (int64_t M : {1, 6, 20}) { // 20: every type's panel tiles where a path has them
            CAPTURE(M);
            ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, M, 8); // ne12 = 8, ne02 = 4
            fill_random(b);
            check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
        }
        // heads interleaved in the cache: [K, n_head, n_ctx] permuted to [K, n_ctx, n_head]
        ggml_tensor * cache2 = ggml_new_tensor_3d(c.ctx, t, K, 3, 10);
        fill_random(cache2);
        ggml_tensor * a2 = ggml_permute(c.ctx, cache2, 0, 2, 1, 3);
        for (int64_t M : {5, 20}) {
            CAPTURE(M);
            ggml_tensor * b2 = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, M, 3);
            fill_random(b2);
            check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a2, b2));
        }
    }
}

TEST_CASE("mul_mat: non-contiguous activations (transposed, permuted, strided rows)") {
    for (ggml_type t : ALL_TYPES) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const int64_t K = ggml_is_quantized(t) ? 2 * k_unit(t) : 23;
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_3d(c.ctx, t, K, 10, 2);
        fill_random(a);
        // transposed: [M, K] seen as [K, M], elements of a row are M floats apart
        for (int64_t M : {2, 7}) {
            CAPTURE(M);
            ggml_tensor * bt = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, M, K, 4);
            fill_random(bt);
            ggml_tensor * b = ggml_transpose(c.ctx, bt);
            REQUIRE(b->nb[0] != sizeof(float));
            check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
        }
        // permuted dims 1 <-> 2 (rows dense, batches interleaved)
        ggml_tensor * bp = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, 4, 5);
        fill_random(bp);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, ggml_permute(c.ctx, bp, 0, 2, 1, 3)));
        // fully permuted: [4, 5, K] -> [K, 4, 5]-ish
        ggml_tensor * bq = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 4, 6, K);
        fill_random(bq);
        ggml_tensor * bperm = ggml_permute(c.ctx, bq, 1, 2, 0, 3); // ne = [K, 4, 6]
        REQUIRE(bperm->ne[0] == K);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, bperm));
        // row-strided view of a wider tensor
        ggml_tensor * wide = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K + 5, 9);
        fill_random(wide);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, ggml_view_3d(c.ctx, a, K, 10, 1, a->nb[1], a->nb[2], 0),
                                   ggml_view_2d(c.ctx, wide, K, 9, wide->nb[1], 4 * sizeof(float))));
    }
}

// The one-row kernels of f16/bf16 weights (K a multiple of 128, activations rounded to the
// weights' type) on the shapes attention gives them: per-head views of a cache, broadcast
// over heads, and an activation row whose elements are not adjacent.
TEST_CASE("mul_mat: one activation row times f16/bf16 weight views (cache heads, broadcast, strided row)") {
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const int64_t K = 128;
        Ctx c;
        ggml_tensor * cache = ggml_new_tensor_3d(c.ctx, t, K + 16, 16, 4);
        fill_random(cache);
        ggml_tensor * a = ggml_view_3d(c.ctx, cache, K, 9, 4, cache->nb[1], cache->nb[2], 2 * cache->nb[1] + 8 * ggml_type_size(t));
        ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, 1, 8); // two heads of queries per cache head
        fill_random(b);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
        // the activation row: column 1 of a [3, K] tensor, elements 12 bytes apart
        ggml_tensor * cols = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 3, K);
        fill_random(cols);
        ggml_tensor * x = ggml_transpose(c.ctx, ggml_view_2d(c.ctx, cols, 1, K, cols->nb[1], sizeof(float)));
        REQUIRE(x->ne[0] == K);
        REQUIRE(x->ne[1] == 1);
        REQUIRE(x->nb[0] == 3 * sizeof(float));
        ggml_tensor * w = ggml_new_tensor_2d(c.ctx, t, K, 37);
        fill_random(w);
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, w, x));
    }
}

TEST_CASE("mul_mat: tasks write disjoint outputs that cover dst") {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_Q4_0}) {
        Ctx c;
        const int64_t K = 64;
        for (int64_t M : {1, 9}) {
            ggml_tensor * a = ggml_new_tensor_3d(c.ctx, t, K, 37, 2);
            ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, M, 4);
            fill_random(a);
            fill_random(b);
            ggml_tensor * d = ggml_mul_mat(c.ctx, a, b);
            const int nth = 3;
            std::vector<uint8_t> work(ggml_mul_mat_work_size(d, nth));
            const int phases = ggml_mul_mat_n_phases(d);
            for (int ph = 0; ph + 1 < phases; ++ph) {
                for (int ith = 0; ith < nth; ++ith) {
                    ggml_compute_params p = {ith, nth, ph, work.data(), work.size()};
                    ggml_compute_forward_mul_mat(&p, d);
                }
            }
            std::vector<int> writers(ggml_nelements(d), 0);
            for (int ith = 0; ith < nth; ++ith) {
                std::memset(d->data, 0xff, ggml_nbytes(d));
                ggml_compute_params p = {ith, nth, phases - 1, work.data(), work.size()};
                ggml_compute_forward_mul_mat(&p, d);
                const float * o = (const float *) d->data;
                for (size_t i = 0; i < writers.size(); ++i) writers[i] += !std::isnan(o[i]);
            }
            for (size_t i = 0; i < writers.size(); ++i) REQUIRE(writers[i] == 1);
        }
    }
}

// One activation row times f16 or bf16 weights (K a multiple of 128) on the SIMD paths: the
// row is rounded to the weights' type once, as ggml's vec_dot_type, and the products are summed
// in f32. The scalar path keeps the f32 row.
TEST_CASE("mul_mat: one activation row times f16/bf16 weights is rounded to their type on the SIMD paths") {
    int tested = 0;
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        const std::string path_str = path_name(path);
        CAPTURE(path_str);
        for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
            const std::string type_name = ggml_type_name(t);
            CAPTURE(type_name);
            if (path == GGML_CPU_FEATURES_SCALAR) {
                CHECK(kvg::mm_activation_type(t, 1, 4096) == GGML_TYPE_F32);
                continue;
            }
            ++tested;
            CHECK(kvg::mm_activation_type(t, 1, 4096) == t);
            CHECK(kvg::mm_activation_type(t, 1, 4096 + 64) == GGML_TYPE_F32); // mv_float or the tiles
            CHECK(kvg::mm_activation_type(t, 2, 4096) == GGML_TYPE_F32);       // the f32 tiles
            int sensitive = 0, outputs = 0; // outputs where unrounded activations would have failed
            for (int64_t K : {128, 2048, 5632}) {
                for (int64_t N : {1, 2, 3, 17, 64}) {
                    sensitive += check_rounded_mul_mat(t, K, N, 1, 2e-6, [t](const ggml_tensor * a, const ggml_tensor * b) {
                        return RefPair(ref_mul_mat(a, b, t), ref_mul_mat(a, b, GGML_TYPE_F32));
                    });
                    outputs += (int) N;
                }
            }
            MESSAGE(path_str << " " << type_name << ": rounding-sensitive outputs " << sensitive << " of " << outputs);
            CHECK(sensitive * 2 > outputs);
        }
    }
    if (available_paths().size() > 1) CHECK(tested > 0); // a SIMD path besides the scalar one
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

TEST_CASE("feature cap") {
    const ggml_cpu_features best = ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    CHECK(ggml_cpu_set_features_limit(GGML_CPU_FEATURES_SCALAR) == GGML_CPU_FEATURES_SCALAR);
    CHECK(ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST) == best);
    // the best path follows CPUID unless KVG_CPU_FEATURES caps it
    const char * env = std::getenv("KVG_CPU_FEATURES");
    if (!env || std::string(env) == "avx512" || std::string(env) == "avx512vnni" || std::string(env) == "avx512bf16") {
        if (ggml_cpu_has_avx2() && ggml_cpu_has_fma() && ggml_cpu_has_f16c()) CHECK(best >= GGML_CPU_FEATURES_AVX2);
        if (ggml_cpu_has_avx512()) CHECK(best >= GGML_CPU_FEATURES_AVX512);
    } else if (std::string(env) == "scalar") {
        CHECK(best == GGML_CPU_FEATURES_SCALAR);
    }
    MESSAGE("SIMD paths tested: " << available_paths().size());
}
