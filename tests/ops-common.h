// Harness of the op tests (test-ops*.cpp, test-matmul.cpp, test-attention.cpp): building one
// node over inputs in any layout, running it with 1, 2 and 3 tasks, the SIMD paths of this
// CPU, reference number formats and comparisons.
#pragma once

#include <doctest/doctest.h>

#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "cpu/cpu-impl.h"
#include "ggml.h"
#include "types.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

// ---- harness ---------------------------------------------------------------------------------

// A context of mb MiB with its own memory, freed at the end of the scope.
struct Ctx {
    ggml_context * ctx;
    explicit Ctx(size_t mb = 64) {
        ggml_init_params p = {mb << 20, nullptr, false};
        ctx = ggml_init(p);
        REQUIRE(ctx != nullptr);
    }
    ~Ctx() { ggml_free(ctx); }
};

// The SIMD paths this CPU runs (scalar always); leaves the best one active.
inline std::vector<ggml_cpu_features> available_paths() {
    std::vector<ggml_cpu_features> paths;
    for (int p = GGML_CPU_FEATURES_SCALAR; p < GGML_CPU_FEATURES_BEST; ++p) {
        if (ggml_cpu_set_features_limit((ggml_cpu_features) p) == p) paths.push_back((ggml_cpu_features) p);
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    return paths;
}

// Runs every task of every phase of one node, in order (the kernels' contract with the executor).
inline void compute(ggml_tensor * node, int nth) {
    for (int ph = 0; ph < ggml_op_n_phases(node); ++ph) {
        for (int ith = 0; ith < nth; ++ith) {
            ggml_compute_params p = {ith, nth, ph, nullptr, 0};
            ggml_compute_forward(&p, node);
        }
    }
}

inline char * row_ptr(const ggml_tensor * t, int64_t r) {
    const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// logical (row-major, ne[0] fastest) values of any tensor
inline std::vector<float> values(const ggml_tensor * t) {
    std::vector<float> v(ggml_nelements(t));
    const int64_t ne0 = t->ne[0];
    if (ggml_is_quantized(t->type)) {
        for (int64_t r = 0; r < ggml_nrows(t); ++r) ggml_get_type_traits(t->type)->to_float(row_ptr(t, r), v.data() + r * ne0, ne0);
        return v;
    }
    for (int64_t i = 0; i < (int64_t) v.size(); ++i) {
        int64_t i0, i1, i2, i3;
        ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
        v[i] = ggml_get_f32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3);
    }
    return v;
}

inline void set_values(ggml_tensor * t, const std::vector<float> & v) {
    REQUIRE((int64_t) v.size() == ggml_nelements(t));
    const int64_t ne0 = t->ne[0];
    if (ggml_is_quantized(t->type)) {
        for (int64_t r = 0; r < ggml_nrows(t); ++r) ggml_get_type_traits(t->type)->from_float_ref(v.data() + r * ne0, row_ptr(t, r), ne0);
        return;
    }
    for (int64_t i = 0; i < (int64_t) v.size(); ++i) {
        int64_t i0, i1, i2, i3;
        ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
        ggml_set_f32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3, v[i]);
    }
}

inline std::vector<float> random_values(int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto & x : v) x = d(rng);
    return v;
}

inline int64_t count(const int64_t * ne) { return ne[0] * ne[1] * ne[2] * ne[3]; }

enum Layout { CONTIG, TRANSPOSED, PERMUTED, PERMUTED_ROWS, STRIDED_ROWS };
inline const char * layout_name(Layout l) {
    static const char * n[] = {"contig", "transposed", "permuted", "permuted_rows", "strided_rows"};
    return n[l];
}

// A tensor of logical shape ne holding v, laid out as asked (a view for non-CONTIG layouts).
inline ggml_tensor * make_input(ggml_context * ctx, ggml_type type, const int64_t * ne, Layout layout, const std::vector<float> & v) {
    ggml_tensor * t = nullptr;
    switch (layout) {
        case CONTIG: t = ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]); break;
        case TRANSPOSED: t = ggml_transpose(ctx, ggml_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3])); break;
        case PERMUTED: t = ggml_permute(ctx, ggml_new_tensor_4d(ctx, type, ne[1], ne[2], ne[0], ne[3]), 1, 2, 0, 3); break;
        case PERMUTED_ROWS: t = ggml_permute(ctx, ggml_new_tensor_4d(ctx, type, ne[0], ne[2], ne[1], ne[3]), 0, 2, 1, 3); break;
        case STRIDED_ROWS: {
            const int64_t bs = ggml_blck_size(type);
            const int64_t pad = bs > 1 ? bs : 3;
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[0] + pad, ne[1], ne[2], ne[3]);
            const size_t offs = bs > 1 ? base->nb[1] - ggml_row_size(type, ne[0]) : ggml_type_size(type);
            t = ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3], offs);
            break;
        }
    }
    for (int i = 0; i < 4; ++i) REQUIRE(t->ne[i] == ne[i]);
    set_values(t, v);
    return t;
}

inline bool bit_equal(const std::vector<float> & a, const std::vector<float> & b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0); // no memcmp of NULL
}

// Computes a node through the executor (graph of the node and its ancestors).
inline void compute_graph(ggml_context * ctx, ggml_tensor * node, int n_threads, ggml_sched_mode mode) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, node);
    const ggml_sched_mode old = ggml_cpu_get_sched_mode();
    ggml_cpu_set_sched_mode(mode);
    const ggml_status st = ggml_graph_compute_with_ctx(ctx, gf, n_threads);
    ggml_cpu_set_sched_mode(old);
    REQUIRE(st == GGML_STATUS_SUCCESS);
}

// Builds in a fresh context and computes (a) by calling the kernel with 1, 2 and 3 tasks,
// (b) through the executor with 1, 2 and 3 threads, DAG and barrier schedules; all results
// (values of the tensor `build` returns as second element) must be bit-identical.
using Built = std::pair<ggml_tensor *, ggml_tensor *>; // (node to compute, tensor to read)
inline std::vector<float> run_tasks(const std::function<Built(ggml_context *)> & build) {
    std::vector<float> first;
    for (int run = 0; run < 9; ++run) {
        const int n = run % 3 + 1;
        const int how = run / 3; // 0 direct, 1 DAG, 2 barrier
        Ctx c;
        Built b = build(c.ctx);
        if (how == 0) compute(b.first, n);
        else compute_graph(c.ctx, b.first, n, how == 1 ? GGML_SCHED_DAG : GGML_SCHED_BARRIER);
        std::vector<float> v = values(b.second);
        if (run == 0) {
            first = v;
        } else {
            CAPTURE(n); CAPTURE(how);
            CHECK(bit_equal(v, first));
        }
    }
    return first;
}

inline std::vector<float> run_node(const std::function<ggml_tensor *(ggml_context *)> & build) {
    return run_tasks([&](ggml_context * ctx) { ggml_tensor * t = build(ctx); return Built{t, t}; });
}

// ---- reference number formats ------------------------------------------------------------

// nearest-even rounding to a format with `mant` fraction bits, smallest normal exponent emin
inline double ref_round(double x, int mant, int emin, double max_finite) {
    if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
    int e;
    std::frexp(std::fabs(x), &e);
    const double ulp = std::ldexp(1.0, std::max(e - 1, emin) - mant);
    const double q = std::nearbyint(x / ulp) * ulp;
    return std::fabs(q) > max_finite ? std::copysign(INFINITY, x) : q;
}
inline float ref_store(ggml_type type, double x) {
    switch (type) {
        case GGML_TYPE_F16: return (float) ref_round(x, 10, -14, 65504.0);
        case GGML_TYPE_BF16: return (float) ref_round(x, 7, -126, std::ldexp(255.0 / 128.0, 127));
        case GGML_TYPE_I32: return (float) (int32_t) x;
        default: return (float) x;
    }
}

// Per-block error bound of the quantized formats for source values x, checked on y.
inline void check_quantized(ggml_type type, const std::vector<float> & x, const std::vector<float> & y) {
    REQUIRE(x.size() == y.size());
    REQUIRE(x.size() % 32 == 0);
    int bad = 0;
    for (size_t b = 0; b < x.size(); b += 32) {
        double amax = 0.0, vmax = 0.0;
        for (size_t j = b; j < b + 32; ++j) {
            if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); vmax = x[j]; }
        }
        const double slack = 1e-5 * amax + 1e-30;
        for (size_t j = b; j < b + 32; ++j) {
            double bound;
            if (type == GGML_TYPE_Q8_0) {
                const double d = amax / 127.0; // q*d16 - x = (q*d - x) + q*(d16 - d)
                bound = d / 2 + 127.0 * std::fabs(ref_store(GGML_TYPE_F16, d) - d);
            } else {
                const double d = vmax / -8.0; // q = min(15, x/d + 8.5): |err| <= |d|/2 except at the clamp
                const double t = d != 0.0 ? x[j] / d : 0.0;
                bound = std::fabs(d) / 2 + std::max(0.0, t - 7.5) * std::fabs(d) + 8.0 * std::fabs(ref_store(GGML_TYPE_F16, d) - d);
            }
            if (!(std::fabs((double) y[j] - x[j]) <= bound + slack)) {
                if (++bad < 5) MESSAGE("element " << j << ": " << x[j] << " -> " << y[j] << " bound " << bound);
            }
        }
    }
    CHECK(bad == 0);
}

// dst values after converting src values to dst's type
inline void check_converted(ggml_type src_type, ggml_type dst_type, const std::vector<float> & sv, const std::vector<float> & dv) {
    REQUIRE(sv.size() == dv.size());
    if (ggml_is_quantized(dst_type) && dst_type != src_type) {
        check_quantized(dst_type, sv, dv);
        return;
    }
    int bad = 0;
    for (size_t i = 0; i < sv.size(); ++i) {
        const float want = ggml_is_quantized(dst_type) ? sv[i] : ref_store(dst_type, sv[i]);
        if (!(dv[i] == want)) {
            if (++bad < 5) MESSAGE("element " << i << ": got " << dv[i] << " want " << want);
        }
    }
    CHECK(bad == 0);
}

inline void check_close(const std::vector<float> & got, const std::vector<double> & want, double atol, double rtol) {
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool ok = (std::isinf(want[i]) && got[i] == want[i]) || std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]);
        if (!ok && ++bad < 5) MESSAGE("element " << i << ": got " << got[i] << " want " << want[i]);
    }
    CHECK(bad == 0);
}

inline void unravel(const int64_t * ne, int64_t i, int64_t * c) {
    c[0] = i % ne[0];
    c[1] = (i / ne[0]) % ne[1];
    c[2] = (i / (ne[0] * ne[1])) % ne[2];
    c[3] = i / (ne[0] * ne[1] * ne[2]);
}
inline int64_t ravel(const int64_t * ne, const int64_t * c) { return ((c[3] * ne[2] + c[2]) * ne[1] + c[1]) * ne[0] + c[0]; }

const ggml_type kFloatTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};


} // namespace
