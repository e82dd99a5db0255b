// Panel tiles (simd.h) against naive double-precision loops: the activation panels' layouts,
// and products that take them (f32 weights on the AVX-512 paths, bf16 weights on the AVX-512
// BF16 path), with the bits independent of the number of tasks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "matmul-common.h"

namespace {

// ---- bf16 weights on the AVX-512 BF16 path (vdpbf16ps panels) ----------------------------------

// ggml's rounding of a float to bf16, written again here: nearest even on the bits, NaN quiet.
uint16_t bf16_round_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((u >> 16) | 0x40);
    const uint32_t lsb = (u >> 16) & 1;
    return (uint16_t) ((u + 0x7fffu + lsb) >> 16);
}
float bf16_round(float f) {
    const uint32_t u = (uint32_t) bf16_round_bits(f) << 16;
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}

// Naive product of 2-d weights [K, N] and f32 activations [K, M] in double, the activations
// rounded to bf16 first when `round`.
RefResult ref_bf16(const ggml_tensor * a, const ggml_tensor * b, bool round) {
    RefResult r;
    for (int64_t m = 0; m < b->ne[1]; ++m) {
        std::vector<float> x = read_row(b, m, 0, 0);
        if (round) for (float & v : x) v = bf16_round(v);
        for (int64_t n = 0; n < a->ne[1]; ++n) {
            const std::vector<float> w = read_row(a, n, 0, 0);
            double s = 0, mag = 0;
            for (size_t k = 0; k < x.size(); ++k) {
                s += (double) w[k] * x[k];
                mag += std::fabs((double) w[k] * x[k]);
            }
            r.val.push_back(s);
            r.mag.push_back(mag);
        }
    }
    return r;
}

} // namespace

TEST_CASE("BF16 activation panels: values rounded as ggml_fp32_to_bf16 (bit for bit), pairs interleaved, tails zero") {
    if (kvg::cpu_best_path() < kvg::PATH_AVX512_BF16) return;
    const kvg::cpu_kernels * kb = kvg::kernels_avx512_bf16();
    // ties to even both ways, near-ties, subnormals (kept, not flushed), infinities, NaNs, overflow
    const uint32_t special[] = {0x00000000, 0x80000000, 0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,
                                0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xff800001, 0x7f7fffff, 0xff7fffff,
                                0x00000001, 0x00008000, 0x00018000, 0x807fffff, 0x00800000, 0x3380c000};
    std::mt19937 gen(99);
    for (int64_t k : {1, 2, 15, 31, 32, 33, 64, 100}) {
        for (int n : {1, 5, 16}) {
            CAPTURE(k); CAPTURE(n);
            std::vector<std::vector<float>> rows(n, std::vector<float>(k));
            const void * ptrs[kvg::MM_PANEL_COLS];
            size_t s = 0;
            for (int c = 0; c < n; ++c) {
                for (float & v : rows[c]) {
                    const uint32_t u = s < sizeof(special) / 4 ? special[s++] : (uint32_t) gen();
                    std::memcpy(&v, &u, 4);
                }
                ptrs[c] = rows[c].data();
            }
            const int64_t pairs = (k + 1) / 2;
            std::vector<uint16_t> panel((pairs + 1) * 32, 0xAAAA);
            kb->pack_panel_bf16(ptrs, n, panel.data(), k);
            for (int64_t i = 0; i < pairs; ++i) {
                for (int c = 0; c < kvg::MM_PANEL_COLS; ++c) {
                    for (int h = 0; h < 2; ++h) {
                        const int64_t e = 2 * i + h;
                        const uint16_t want = c < n && e < k ? ggml_fp32_to_bf16(rows[c][e]).bits : 0;
                        if (c < n && e < k) REQUIRE(want == bf16_round_bits(rows[c][e]));
                        CHECK(panel[(i * kvg::MM_PANEL_COLS + c) * 2 + h] == want);
                    }
                }
            }
            for (int j = 0; j < 32; ++j) CHECK(panel[pairs * 32 + j] == 0xAAAA); // nothing past the panel
        }
    }
}

TEST_CASE("mul_mat: bf16 weights on the AVX-512 BF16 path round the activations to bf16 and sum in f32") {
    if (ggml_cpu_set_features_limit(GGML_CPU_FEATURES_AVX512_BF16) != GGML_CPU_FEATURES_AVX512_BF16) {
        MESSAGE("no AVX-512 BF16 path here (CPU or KVG_CPU_FEATURES): skipped");
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
        return;
    }
    const int pmin = kvg::kernels_avx512_bf16()->mm[kvg::MM_BF16].panel_min;
    CHECK(pmin > 1);
    CHECK(kvg::mm_activation_type(GGML_TYPE_BF16, pmin, 4096) == GGML_TYPE_BF16);
    CHECK(kvg::mm_activation_type(GGML_TYPE_BF16, pmin - 1, 4096) == GGML_TYPE_F32); // few rows: the f32 tiles
    CHECK(kvg::mm_activation_type(GGML_TYPE_F16, 100, 4096) == GGML_TYPE_F32);      // f16 weights unchanged
    // one row: bf16 too (the matrix-vector kernel), unless K is not a multiple of its group
    CHECK(kvg::mm_activation_type(GGML_TYPE_BF16, 1, 4096) == GGML_TYPE_BF16);
    CHECK(kvg::mm_activation_type(GGML_TYPE_BF16, 1, 4096 + 64) == GGML_TYPE_F32);
    CHECK(kvg::mm_activation_type(GGML_TYPE_F16, 1, 4096) == GGML_TYPE_F16); // f16 weights' own kernel
    // K: below a pair, odd tails, long rows, two K chunks (accumulated); M: partial and whole
    // panels and pairs of them
    // (M = 1 takes the matrix-vector kernel for K a multiple of 128: 128, 2048, 8192)
    const int64_t Ks[] = {1, 2, 31, 32, 33, 64, 100, 128, 1027, 2048, 4161, 8192, 8195};
    const int64_t Ms[] = {1, pmin, 15, 16, 17, 32, 33, 64, 65, 100};
    const int64_t Ns[] = {1, 7, 13, 37};
    int sensitive = 0; // outputs where unrounded activations would have failed the check
    for (size_t ik = 0; ik < sizeof(Ks) / sizeof(Ks[0]); ++ik) {
        for (size_t im = 0; im < sizeof(Ms) / sizeof(Ms[0]); ++im) {
            const int64_t K = Ks[ik], M = Ms[im], N = Ns[(ik + im) % 4];
            if (M == 1 && K % 128 != 0) continue; // the f32 tiles (unrounded): tested above
            sensitive += check_rounded_mul_mat(GGML_TYPE_BF16, K, N, M, 1e-5, [](const ggml_tensor * a, const ggml_tensor * b) {
                return RefPair(ref_bf16(a, b, true), ref_bf16(a, b, false));
            });
        }
    }
    CHECK(sensitive > 1000);
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

// ---- f32 weights on the AVX-512 paths (F32 panels) ----------------------------------------------

TEST_CASE("F32 activation panels: rows interleaved by element, bits kept, missing rows zero") {
    const kvg::cpu_kernels * k5 = kvg::kernels_avx512();
    if (!k5 || kvg::cpu_best_path() < kvg::PATH_AVX512) return;
    std::mt19937 gen(7);
    for (int64_t k : {1, 15, 16, 17, 33, 100}) {
        for (int n : {1, 5, 16}) {
            CAPTURE(k); CAPTURE(n);
            std::vector<std::vector<uint32_t>> rows(n, std::vector<uint32_t>(k));
            const void * ptrs[kvg::MM_PANEL_COLS];
            for (int c = 0; c < n; ++c) {
                for (uint32_t & v : rows[c]) v = (uint32_t) gen(); // any bits, NaNs included: copied, not computed
                ptrs[c] = rows[c].data();
            }
            std::vector<uint32_t> panel((k + 1) * kvg::MM_PANEL_COLS, 0xAAAAAAAAu);
            k5->pack_panel_f32(ptrs, n, panel.data(), k);
            for (int64_t e = 0; e < k; ++e) {
                for (int c = 0; c < kvg::MM_PANEL_COLS; ++c) CHECK(panel[e * kvg::MM_PANEL_COLS + c] == (c < n ? rows[c][e] : 0u));
            }
            for (int c = 0; c < kvg::MM_PANEL_COLS; ++c) CHECK(panel[k * kvg::MM_PANEL_COLS + c] == 0xAAAAAAAAu); // nothing past it
        }
    }
}

// Products of f32 and f16 weights with enough activation rows take the F32 panel tiles on the AVX-512
// paths (and sgemm under OpenBLAS from 32 rows); every path is checked against the double loop,
// and 1-3 tasks and threads give the same bits (check_mul_mat).
TEST_CASE("mul_mat: f32 and f16 weights through the F32 panel tiles (partial panels and tiles, K chunks, gathered rows)") {
    const kvg::cpu_kernels * k5 = kvg::kernels_avx512();
    if (k5 && kvg::cpu_best_path() >= kvg::PATH_AVX512) {
        const int pmin = k5->mm[kvg::MM_F32].panel_min;
        CHECK(pmin > 1);
        CHECK(k5->mm[kvg::MM_F32].panel_rows >= 1);
        for (int t : {kvg::MM_F32, kvg::MM_F16}) {
            CHECK(k5->mm[t].panel_kind == kvg::MM_PANEL_F32);
            for (int r = 1; r <= k5->mm[t].panel_rows; ++r) CHECK(bool(k5->mm[t].panel[r]));
        }
        CHECK(k5->mm[kvg::MM_BF16].panel_rows == 0); // bf16: the BF16 path's vdpbf16ps panels only
        CHECK((kvg::kernels_avx512_vnni()->mm[kvg::MM_F32].panel[1] == k5->mm[kvg::MM_F32].panel[1])); // shared
    }
    if (const kvg::cpu_kernels * k2 = kvg::kernels_avx2()) CHECK(k2->mm[kvg::MM_F32].panel_rows == 0);
    // K: below a vector, odd tails, two K chunks (accumulated: 2048 + the rest); M: from the
    // panel_min, a lone panel, pairs and partial pairs; N: every panel tile height up to 8 and past it
    const int64_t Ks[] = {1, 15, 17, 100, 768, 3100};
    const int64_t Ms[] = {12, 16, 17, 32, 40, 70};
    const int64_t Ns[] = {1, 3, 7, 13, 37};
    for (size_t ik = 0; ik < sizeof(Ks) / sizeof(Ks[0]); ++ik) {
        for (size_t im = 0; im < sizeof(Ms) / sizeof(Ms[0]); ++im) {
            for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) check_product(t, Ks[ik], Ns[(ik + im) % 5], Ms[im]);
        }
    }
    // activations whose elements are not adjacent (gathered into the panels), two batches with
    // the weights broadcast over them
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 37, 11, 1);
    ggml_tensor * bt = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 20, 37, 2);
    fill_random(a);
    fill_random(bt);
    ggml_tensor * b = ggml_transpose(c.ctx, bt); // [37, 20, 2], rows 20 floats apart
    REQUIRE(b->nb[0] != sizeof(float));
    check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
}
