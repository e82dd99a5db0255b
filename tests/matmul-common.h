// Helpers of the matmul tests (test-matmul.cpp, test-matmul-panels.cpp): random rows of every
// weight type, naive double-precision products, and mul_mat run task by task or through the
// executor on every path. Include after doctest.
#pragma once

#include "ops-common.h"

#include "ggml.h"
#include "ggml-cpu.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "types.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

const ggml_type ALL_TYPES[] = {GGML_TYPE_F32,   GGML_TYPE_F16,   GGML_TYPE_BF16,    GGML_TYPE_Q8_0,   GGML_TYPE_Q4_0,
                               GGML_TYPE_Q4_1,  GGML_TYPE_Q5_0,  GGML_TYPE_Q5_1,    GGML_TYPE_IQ4_NL, GGML_TYPE_Q2_K,
                               GGML_TYPE_Q3_K,  GGML_TYPE_Q4_K,  GGML_TYPE_Q5_K,    GGML_TYPE_Q6_K,   GGML_TYPE_IQ4_XS,
                               GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S};

inline const char * path_name(ggml_cpu_features p) {
    return p == GGML_CPU_FEATURES_SCALAR ? "scalar" : p == GGML_CPU_FEATURES_AVX2 ? "avx2"
         : p == GGML_CPU_FEATURES_AVX512 ? "avx512" : p == GGML_CPU_FEATURES_AVX512_VNNI ? "avx512vnni" : "avx512bf16";
}

std::mt19937 rng(1234);
inline float frand() { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng); }

// Byte offsets of the f16 scales in a block (ggml's layouts): for the types kvgraph reads but
// does not encode, and random-block tests.
inline std::vector<size_t> scale_offsets(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: return {0, 2};
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S: return {0};
        case GGML_TYPE_Q2_K: return {80, 82};
        case GGML_TYPE_Q3_K: return {108};
        case GGML_TYPE_Q6_K: return {208};
        case GGML_TYPE_TQ1_0: return {52};
        case GGML_TYPE_TQ2_0: return {64};
        default: FAIL("no scale layout for " << ggml_type_name(t)); return {};
    }
}

// A row of n values of type t: x itself, its reference encoding, or, for the types without
// an encoder, random blocks (every bit pattern of the quants and packed scales is a valid
// block) whose f16 scales are set to small finite values.
inline void encode_row(ggml_type t, const float * x, void * dst, int64_t n) {
    if (t == GGML_TYPE_F32) {
        std::memcpy(dst, x, n * sizeof(float));
        return;
    }
    if (ggml_get_type_traits(t)->from_float_ref) {
        ggml_get_type_traits(t)->from_float_ref(x, dst, n);
        return;
    }
    const size_t bs = ggml_type_size(t);
    const int64_t nb = n / ggml_blck_size(t);
    uint8_t * p = (uint8_t *) dst;
    for (size_t i = 0; i < (size_t) nb * bs; ++i) p[i] = (uint8_t) (rng() & 0xFF);
    for (int64_t b = 0; b < nb; ++b) {
        for (size_t off : scale_offsets(t)) {
            const ggml_fp16_t h = ggml_fp32_to_fp16(0.01f * frand());
            std::memcpy(p + b * bs + off, &h, sizeof h);
        }
    }
}

// Values of a row of type t (f32 as is).
inline void decode_row(ggml_type t, const void * src, float * y, int64_t n) {
    if (t == GGML_TYPE_F32) std::memcpy(y, src, n * sizeof(float));
    else ggml_get_type_traits(t)->to_float(src, y, n);
}

// Fills every row of a (root, contiguous) tensor with random values in its type.
inline void fill_random(ggml_tensor * t) {
    REQUIRE(ggml_is_contiguous(t));
    const int64_t n0 = t->ne[0];
    std::vector<float> row(n0);
    for (int64_t r = 0; r < ggml_nrows(t); ++r) {
        for (auto & v : row) v = frand();
        encode_row(t->type, row.data(), (char *) t->data + r * t->nb[1], n0);
    }
}

// Row (i1, i2, i3) of any tensor as floats, via strides (dequantizing if needed).
inline std::vector<float> read_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    const char * p = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    std::vector<float> out(t->ne[0]);
    if (t->type == GGML_TYPE_F32) {
        for (int64_t i = 0; i < t->ne[0]; ++i) out[i] = *(const float *) (p + i * t->nb[0]);
    } else {
        REQUIRE(t->nb[0] == ggml_type_size(t->type));
        ggml_get_type_traits(t->type)->to_float(p, out.data(), t->ne[0]);
    }
    return out;
}

// What the kernels see of an activation row: a round trip through the activation type vt
// (f32 for float weights, q8_0 or q8_K for block types).
inline std::vector<float> as_activation(std::vector<float> x, ggml_type vt) {
    if (vt != GGML_TYPE_F32) {
        std::vector<uint8_t> q(ggml_row_size(vt, (int64_t) x.size()));
        encode_row(vt, x.data(), q.data(), (int64_t) x.size());
        decode_row(vt, q.data(), x.data(), (int64_t) x.size());
    }
    return x;
}

struct RefResult {
    std::vector<double> val, mag; // exact product and sum |w*x| per output, [i13][i12][i11][i01]
};

// Naive mul_mat in double: weight row (i01, i12/r2, i13/r3) against activation row (i11, i12, i13)
// rounded through the activation type vt.
inline RefResult ref_mul_mat(const ggml_tensor * a, const ggml_tensor * b, ggml_type vt) {
    const int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    RefResult r;
    for (int64_t i13 = 0; i13 < b->ne[3]; ++i13)
        for (int64_t i12 = 0; i12 < b->ne[2]; ++i12)
            for (int64_t i11 = 0; i11 < M; ++i11) {
                const std::vector<float> x = as_activation(read_row(b, i11, i12, i13), vt);
                for (int64_t i01 = 0; i01 < N; ++i01) {
                    const std::vector<float> w = read_row(a, i01, i12 / r2, i13 / r3);
                    double s = 0, m = 0;
                    for (int64_t k = 0; k < K; ++k) {
                        s += (double) w[k] * x[k];
                        m += std::fabs((double) w[k] * x[k]);
                    }
                    r.val.push_back(s);
                    r.mag.push_back(m);
                }
            }
    return r;
}

inline std::vector<float> read_dst(const ggml_tensor * d) {
    std::vector<float> out;
    for (int64_t i3 = 0; i3 < d->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < d->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < d->ne[1]; ++i1) {
                const std::vector<float> row = read_row(d, i1, i2, i3);
                out.insert(out.end(), row.begin(), row.end());
            }
    return out;
}

// Runs every task of every phase of a mul_mat node in turn, as the executor would with nth
// threads. `claimed`: the tasks share a work counter (as under the DAG scheduler) and run last
// to first, so the last task takes every chunk beyond the tasks' first ones.
inline void run_mul_mat(ggml_tensor * node, int nth, bool claimed = false) {
    const int phases = ggml_mul_mat_n_phases(node);
    std::vector<uint8_t> work(ggml_mul_mat_work_size(node, nth) + 1);
    std::atomic<int> claim{0};
    for (int ph = 0; ph < phases; ++ph) {
        claim.store(0);
        for (int k = 0; k < nth; ++k) {
            const int ith = claimed ? nth - 1 - k : k;
            ggml_compute_params p = {ith, nth, ph, work.data(), work.size(), claimed ? &claim : nullptr};
            ggml_compute_forward_mul_mat(&p, node);
        }
    }
}

inline void check_close(const std::vector<float> & got, const RefResult & ref, double rel) {
    REQUIRE(got.size() == ref.val.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double tol = rel * ref.mag[i] + 1e-6;
        if (!(std::fabs(got[i] - ref.val[i]) <= tol)) {
            if (bad++ < 5) FAIL_CHECK("element " << i << ": got " << got[i] << " want " << ref.val[i] << " tol " << tol);
        }
    }
    CHECK(bad == 0);
}

// Float sums of up to a few thousand terms: a few ulps per term relative to sum |w*x|.
inline double tolerance(ggml_type) { return 2e-5; }

// Computes `node` through the executor (real threads) and returns dst.
inline std::vector<float> compute_graph(ggml_context * ctx, ggml_tensor * node, int n_threads) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, node);
    std::memset(node->data, 0xff, ggml_nbytes(node));
    REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
    return read_dst(node);
}

// Computes `node` with 1, 2 and 3 tasks on every path; checks the reference (on the
// activations as that path quantizes them: panels take q8_0 for every block type) and that
// neither the task count nor the chunks the tasks claim change a single bit, then the same
// through the executor's threads.
inline void check_mul_mat(ggml_context * ctx, ggml_tensor * node) {
    std::map<ggml_type, RefResult> refs;
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        const std::string path_str = path_name(path);
        CAPTURE(path_str);
        const ggml_type vt = kvg::mm_activation_type(node->src[0]->type, node->src[1]->ne[1], node->src[1]->ne[0]);
        if (!refs.count(vt)) refs[vt] = ref_mul_mat(node->src[0], node->src[1], vt);
        const RefResult & ref = refs[vt];
        std::vector<float> first;
        for (int nth = 1; nth <= 3; ++nth) {
            CAPTURE(nth);
            std::memset(node->data, 0xff, ggml_nbytes(node)); // NaN: unwritten outputs show up
            run_mul_mat(node, nth);
            const std::vector<float> got = read_dst(node);
            if (nth == 1) {
                check_close(got, ref, tolerance(node->src[0]->type));
                first = got;
            } else {
                CHECK(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0);
                std::memset(node->data, 0xff, ggml_nbytes(node));
                run_mul_mat(node, nth, true);
                CHECK(std::memcmp(read_dst(node).data(), first.data(), got.size() * sizeof(float)) == 0);
            }
        }
        for (int n_threads = 1; n_threads <= 3; ++n_threads) {
            CAPTURE(n_threads);
            const std::vector<float> got = compute_graph(ctx, node, n_threads);
            CHECK(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0);
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

inline int64_t k_unit(ggml_type t) { return ggml_blck_size(t); }

// M random activation rows times N weight rows of K values of type t (random values, or what
// fill_weights writes), checked as above.
inline void check_product(ggml_type t, int64_t K, int64_t N, int64_t M,
                          const std::function<void(ggml_tensor *)> & fill_weights = fill_random) {
    CAPTURE(K);
    CAPTURE(N);
    CAPTURE(M);
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, K, N);
    ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K, M);
    fill_weights(a);
    fill_random(b);
    check_mul_mat(c.ctx, ggml_mul_mat(c.ctx, a, b));
}
inline void check_matvec(ggml_type t, int64_t K, int64_t N) { check_product(t, K, N, 1); }



// Random weights of type wt [K, N] times M random f32 rows: mul_mat with one task must match
// `refs(a, b).first` (activations rounded as the kernel rounds them) within rel, and 2 or 3
// tasks and the executor's threads must give the same bits. Returns how many outputs the
// unrounded product (`refs(a, b).second`) would have failed by.
using RefPair = std::pair<RefResult, RefResult>;
inline int check_rounded_mul_mat(ggml_type wt, int64_t K, int64_t N, int64_t M, double rel,
                          const std::function<RefPair(const ggml_tensor *, const ggml_tensor *)> & refs) {
    CAPTURE(K); CAPTURE(M); CAPTURE(N);
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, wt, K, N);
    ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, K, M);
    fill_random(a);
    fill_random(b);
    ggml_tensor * d = ggml_mul_mat(c.ctx, a, b);
    const RefPair r = refs(a, b);
    run_mul_mat(d, 1);
    const std::vector<float> got = read_dst(d);
    check_close(got, r.first, rel);
    int sensitive = 0;
    for (size_t i = 0; i < got.size(); ++i) sensitive += std::fabs(r.second.val[i] - r.first.val[i]) > rel * r.first.mag[i] + 1e-6;
    for (int nth = 2; nth <= 3; ++nth) {
        for (bool claimed : {false, true}) {
            std::memset(d->data, 0xff, ggml_nbytes(d));
            run_mul_mat(d, nth, claimed);
            CHECK(std::memcmp(read_dst(d).data(), got.data(), got.size() * sizeof(float)) == 0);
        }
    }
    const std::vector<float> threaded = compute_graph(c.ctx, d, 2);
    CHECK(std::memcmp(threaded.data(), got.data(), got.size() * sizeof(float)) == 0);
    return sensitive;
}

} // namespace
