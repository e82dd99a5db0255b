// Portable matmul tiles for the block types after q4_0 (q4_1, q5_0, q5_1, iq4_nl with
// q8_0 activations; q2_K..q6_K, iq4_xs, tq1_0 and tq2_0 with q8_K activations): each weight block and activation
// block is decoded to floats (the types' own to_float, exactly the values they encode) and
// dotted. The SIMD paths compute the same sums in integers; this is their reference and
// the path for CPUs without one.
#include "simd.h"
#include "types.h"

namespace {

using namespace kvg;

constexpr int MAX_BLOCK = QK_K;

template <ggml_type W, int R, int C> struct tile_decoded {
    static void run(const mm_tile_args & a) {
        const ggml_type_traits * wt = ggml_get_type_traits(W);
        const ggml_type_traits * xt = ggml_get_type_traits(mm_vec_dot_type(W));
        const int64_t B = wt->blck_size; // the activation type has the same block size
        float acc[R][C] = {};
        float wv[R][MAX_BLOCK], xv[MAX_BLOCK];
        for (int64_t b = 0; b < a.k / B; ++b) {
            for (int r = 0; r < R; ++r) wt->to_float(a.w + r * a.w_stride + b * wt->type_size, wv[r], B);
            for (int c = 0; c < C; ++c) {
                xt->to_float(a.x + c * a.x_stride + b * xt->type_size, xv, B);
                for (int r = 0; r < R; ++r) {
                    float sum = 0.0f;
                    for (int64_t i = 0; i < B; ++i) sum += wv[r][i] * xv[i];
                    acc[r][c] += sum;
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            float * o = a.out + c * a.out_stride;
            for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + acc[r][c] : acc[r][c];
        }
    }
};

template <int R, int C> struct t_q4_1 : tile_decoded<GGML_TYPE_Q4_1, R, C> {};
template <int R, int C> struct t_q5_0 : tile_decoded<GGML_TYPE_Q5_0, R, C> {};
template <int R, int C> struct t_q5_1 : tile_decoded<GGML_TYPE_Q5_1, R, C> {};
template <int R, int C> struct t_iq4_nl : tile_decoded<GGML_TYPE_IQ4_NL, R, C> {};
template <int R, int C> struct t_q2_k : tile_decoded<GGML_TYPE_Q2_K, R, C> {};
template <int R, int C> struct t_q3_k : tile_decoded<GGML_TYPE_Q3_K, R, C> {};
template <int R, int C> struct t_q4_k : tile_decoded<GGML_TYPE_Q4_K, R, C> {};
template <int R, int C> struct t_q5_k : tile_decoded<GGML_TYPE_Q5_K, R, C> {};
template <int R, int C> struct t_q6_k : tile_decoded<GGML_TYPE_Q6_K, R, C> {};
template <int R, int C> struct t_iq4_xs : tile_decoded<GGML_TYPE_IQ4_XS, R, C> {};
template <int R, int C> struct t_tq1_0 : tile_decoded<GGML_TYPE_TQ1_0, R, C> {};
template <int R, int C> struct t_tq2_0 : tile_decoded<GGML_TYPE_TQ2_0, R, C> {};
template <int R, int C> struct t_iq2_xxs : tile_decoded<GGML_TYPE_IQ2_XXS, R, C> {};
template <int R, int C> struct t_iq2_xs : tile_decoded<GGML_TYPE_IQ2_XS, R, C> {};
template <int R, int C> struct t_iq2_s : tile_decoded<GGML_TYPE_IQ2_S, R, C> {};
template <int R, int C> struct t_iq1_s : tile_decoded<GGML_TYPE_IQ1_S, R, C> {};
template <int R, int C> struct t_iq1_m : tile_decoded<GGML_TYPE_IQ1_M, R, C> {};
template <int R, int C> struct t_iq3_xxs : tile_decoded<GGML_TYPE_IQ3_XXS, R, C> {};
template <int R, int C> struct t_iq3_s : tile_decoded<GGML_TYPE_IQ3_S, R, C> {};

void quantize_q8_K(const float * x, void * y, int64_t k) { quantize_row_q8_K_ref(x, (block_q8_K *) y, k); }

} // namespace

void kvg::add_block_quant_kernels_scalar(cpu_kernels & k) {
    mm_fill<t_q4_1, 2, 2>(k.mm[MM_Q4_1]);
    mm_fill<t_q5_0, 2, 2>(k.mm[MM_Q5_0]);
    mm_fill<t_q5_1, 2, 2>(k.mm[MM_Q5_1]);
    mm_fill<t_iq4_nl, 2, 2>(k.mm[MM_IQ4_NL]);
    mm_fill<t_q2_k, 2, 2>(k.mm[MM_Q2_K]);
    mm_fill<t_q3_k, 2, 2>(k.mm[MM_Q3_K]);
    mm_fill<t_q4_k, 2, 2>(k.mm[MM_Q4_K]);
    mm_fill<t_q5_k, 2, 2>(k.mm[MM_Q5_K]);
    mm_fill<t_q6_k, 2, 2>(k.mm[MM_Q6_K]);
    mm_fill<t_iq4_xs, 2, 2>(k.mm[MM_IQ4_XS]);
    mm_fill<t_tq1_0, 2, 2>(k.mm[MM_TQ1_0]);
    mm_fill<t_tq2_0, 2, 2>(k.mm[MM_TQ2_0]);
    mm_fill<t_iq2_xxs, 2, 2>(k.mm[MM_IQ2_XXS]);
    mm_fill<t_iq2_xs, 2, 2>(k.mm[MM_IQ2_XS]);
    mm_fill<t_iq2_s, 2, 2>(k.mm[MM_IQ2_S]);
    mm_fill<t_iq1_s, 2, 2>(k.mm[MM_IQ1_S]);
    mm_fill<t_iq1_m, 2, 2>(k.mm[MM_IQ1_M]);
    mm_fill<t_iq3_xxs, 2, 2>(k.mm[MM_IQ3_XXS]);
    mm_fill<t_iq3_s, 2, 2>(k.mm[MM_IQ3_S]);
    k.quantize_q8_K = quantize_q8_K;
}
