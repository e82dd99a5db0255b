// mul_mat with iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m weights against the naive
// dequantize-then-dot reference (matmul-common.h) on every path (KVG_CPU_FEATURES caps them):
// random blocks, so every grid point, sign code, scale and delta occurs with activations up to
// +-127; odd weight row counts; every activation count the tiles switch on (1..8 columns,
// several tiles); K within one chunk and across several; 1..3 tasks and threads.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "matmul-common.h"

namespace {

const ggml_type kIqTypes[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M};

// random bytes with small finite f16 scales d (iq1_m: d's 16 bits in the top nibbles of its 4
// scale words, bytes 49, 51, 53, 55)
void random_iq_blocks(ggml_tensor * a, std::mt19937 & gen) {
    uint8_t * p = (uint8_t *) a->data;
    for (size_t i = 0; i < ggml_nbytes(a); ++i) p[i] = (uint8_t) gen();
    const size_t bs = ggml_type_size(a->type);
    for (size_t at = 0; at < ggml_nbytes(a); at += bs) {
        const ggml_fp16_t d = ggml_fp32_to_fp16(0.01f * frand());
        if (a->type != GGML_TYPE_IQ1_M) {
            std::memcpy(p + at, &d, sizeof d);
            continue;
        }
        for (int w = 0; w < 4; ++w)
            p[at + 49 + 2 * w] = (uint8_t) ((p[at + 49 + 2 * w] & 0x0F) | ((d >> (4 * w)) & 15) << 4);
    }
}

} // namespace

TEST_CASE("cpu traits: the iq2 / iq1 types dot with q8_K and have matmul kernels") {
    for (ggml_type t : kIqTypes) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        CHECK(ggml_get_type_traits_cpu(t)->vec_dot_type == GGML_TYPE_Q8_K);
        CHECK(bool(ggml_get_type_traits_cpu(t)->vec_dot));
        CHECK(!ggml_get_type_traits_cpu(t)->from_float); // no encoder
        CHECK(kvg::has_mm_kernel(t));
    }
}

TEST_CASE("mul_mat: iq2 / iq1 random blocks, odd rows, every activation count, every path") {
    std::mt19937 gen(23);
    for (ggml_type t : kIqTypes) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const auto fill = [&gen](ggml_tensor * a) { random_iq_blocks(a, gen); };
        for (int64_t K : {256, 4352}) {
            for (int64_t N : {7, 37}) {
                for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33}) check_product(t, K, N, M, fill);
            }
        }
    }
}

// the largest magnitudes: every weight at the grid's extreme with scale 15 (iq1: 7), every
// activation at +-127, so the int16 pairs and int32 super-block sums are at their bounds
TEST_CASE("mul_mat: iq2 / iq1 extreme blocks against the reference on every path") {
    for (ggml_type t : kIqTypes) {
        const std::string type_name = ggml_type_name(t);
        CAPTURE(type_name);
        const auto fill = [](ggml_tensor * a) {
            uint8_t * p = (uint8_t *) a->data;
            std::memset(p, 0xFF, ggml_nbytes(a)); // largest indices (grid points of 43s / 1s), scales, negative signs
            const size_t bs = ggml_type_size(a->type);
            const ggml_fp16_t d = ggml_fp32_to_fp16(0.5f);
            for (size_t at = 0; at < ggml_nbytes(a); at += bs) {
                if (a->type != GGML_TYPE_IQ1_M) std::memcpy(p + at, &d, sizeof d);
                else
                    for (int w = 0; w < 4; ++w) p[at + 49 + 2 * w] = (uint8_t) (0x0F | ((d >> (4 * w)) & 15) << 4);
            }
        };
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, 2 * QK_K, 5);
        ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 2 * QK_K, 3);
        fill(a);
        float * x = (float *) b->data;
        for (int64_t i = 0; i < 2 * QK_K * 3; ++i) x[i] = i % 3 == 0 ? 1.0f : -1.0f; // quantized to +-127
        check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
    }
}
