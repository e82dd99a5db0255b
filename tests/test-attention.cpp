// flash_attn_ext against a naive softmax(q·K^T * scale [softcap] + slope * mask) · V in
// double precision (reference-llama.h's attend), on every SIMD path this machine has.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ops-common.h"
#include "reference-llama.h"

#include "ggml.h"
#include "ggml-cpu.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "types.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

std::mt19937 rng(77);
float frand(float amp = 1.0f) { return std::uniform_real_distribution<float>(-amp, amp)(rng); }

void fill(ggml_tensor * t, float amp) {
    REQUIRE(ggml_is_contiguous(t));
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        const float v = frand(amp);
        if (t->type == GGML_TYPE_F32) ((float *) t->data)[i] = v;
        else ((ggml_fp16_t *) t->data)[i] = ggml_fp32_to_fp16(v);
    }
}

// Element (i0..i3) of an F32/F16/Q8_0 tensor through its strides (Q8_0: rows of blocks).
double at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char * row = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    if (t->type == GGML_TYPE_Q8_0) {
        const block_q8_0 & b = ((const block_q8_0 *) row)[i0 / QK8_0];
        return (double) ggml_fp16_to_fp32(b.d) * b.qs[i0 % QK8_0];
    }
    const char * p = row + i0 * t->nb[0];
    return t->type == GGML_TYPE_F32 ? *(const float *) p : ggml_fp16_to_fp32(*(const ggml_fp16_t *) p);
}

void set_mask(ggml_tensor * m, int64_t i0, int64_t i1, int64_t i2, float v) {
    char * p = (char *) m->data + i0 * m->nb[0] + i1 * m->nb[1] + i2 * m->nb[2];
    if (m->type == GGML_TYPE_F32) *(float *) p = v;
    else *(ggml_fp16_t *) p = ggml_fp32_to_fp16(v);
}

double slope_of(double max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0) return 1.0;
    int64_t n = 1;
    while (n * 2 <= n_head) n *= 2;
    return h < n ? std::pow(2.0, -max_bias / n * (h + 1)) : std::pow(2.0, -max_bias / 2 / n * (2 * (h - n) + 1));
}

// Naive attention; result laid out like dst: [Dv, n_head, n_q, ne3].
std::vector<double> reference(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v, const ggml_tensor * mask,
                              double scale, double max_bias, double softcap) {
    const int64_t D = q->ne[0], n_q = q->ne[1], n_head = q->ne[2], ne3 = q->ne[3];
    const int64_t n_kv = k->ne[1], Dv = v->ne[0], group = n_head / k->ne[2];
    std::vector<double> out;
    for (int64_t i3 = 0; i3 < ne3; ++i3)
        for (int64_t iq = 0; iq < n_q; ++iq)
            for (int64_t h = 0; h < n_head; ++h) {
                std::vector<double> s(n_kv);
                for (int64_t j = 0; j < n_kv; ++j) {
                    double d = 0;
                    for (int64_t i = 0; i < D; ++i) d += at(q, i, iq, h, i3) * at(k, i, j, h / group, i3);
                    d *= scale;
                    if (softcap > 0) d = softcap * std::tanh(d / softcap);
                    if (mask) d += slope_of(max_bias, h, n_head) * at(mask, j, iq, h % mask->ne[2], i3 % mask->ne[3]);
                    s[j] = d;
                }
                const std::vector<double> o = ref::attend(s, (int) Dv, [&](int j) {
                    std::vector<double> row(Dv);
                    for (int64_t i = 0; i < Dv; ++i) row[i] = at(v, i, j, h / group, i3);
                    return row;
                });
                out.insert(out.end(), o.begin(), o.end());
            }
    return out;
}

// Runs the node's nth tasks in turn. `claimed`: they share a work counter (as under the DAG
// scheduler) and run last to first, so the last task takes every chunk beyond the first ones.
void run(ggml_tensor * node, int nth, bool claimed = false) {
    std::vector<uint8_t> work(ggml_flash_attn_ext_work_size(node, nth));
    for (int ph = 0; ph < ggml_flash_attn_ext_n_phases(node); ++ph) {
        std::atomic<int> claim{0};
        for (int k = 0; k < nth; ++k) {
            const int ith = claimed ? nth - 1 - k : k;
            ggml_compute_params p = {ith, nth, ph, work.data(), work.size(), claimed ? &claim : nullptr};
            ggml_compute_forward_flash_attn_ext(&p, node);
        }
    }
}

void check(ggml_context * ctx, ggml_tensor * node, double tol) {
    REQUIRE(ggml_is_contiguous(node));
    const float * p = (const float *) node->op_params; // scale, max_bias, softcap
    const std::vector<double> want = reference(node->src[0], node->src[1], node->src[2], node->src[3], p[0], p[1], p[2]);
    REQUIRE((int64_t) want.size() == ggml_nelements(node));
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        CAPTURE((int) path);
        std::vector<float> first;
        for (int nth = 1; nth <= 3; ++nth) {
            CAPTURE(nth);
            std::memset(node->data, 0xff, ggml_nbytes(node));
            run(node, nth);
            const float * got = (const float *) node->data;
            if (nth == 1) {
                int bad = 0;
                for (size_t i = 0; i < want.size(); ++i) {
                    if (!(std::fabs(got[i] - want[i]) <= tol)) {
                        if (bad++ < 5) FAIL_CHECK("element " << i << ": got " << got[i] << " want " << want[i]);
                    }
                }
                CHECK(bad == 0);
                first.assign(got, got + want.size());
            } else {
                CHECK(std::memcmp(got, first.data(), first.size() * sizeof(float)) == 0);
                std::memset(node->data, 0xff, ggml_nbytes(node));
                run(node, nth, true);
                CHECK(std::memcmp(got, first.data(), first.size() * sizeof(float)) == 0);
            }
        }
        // the executor's real threads give the same bits
        for (int n_threads = 1; n_threads <= 3; ++n_threads) {
            CAPTURE(n_threads);
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, node);
            std::memset(node->data, 0xff, ggml_nbytes(node));
            REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
            CHECK(std::memcmp(node->data, first.data(), first.size() * sizeof(float)) == 0);
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

// Causal mask [n_kv, n_q_pad] for queries at positions n_kv - n_q .. n_kv - 1; padding rows -inf.
ggml_tensor * causal_mask(ggml_context * ctx, ggml_type type, int64_t n_kv, int64_t n_q, int64_t n_q_pad, int64_t ne2 = 1) {
    ggml_tensor * m = ggml_new_tensor_3d(ctx, type, n_kv, n_q_pad, ne2);
    for (int64_t h = 0; h < ne2; ++h)
        for (int64_t i = 0; i < n_q_pad; ++i)
            for (int64_t j = 0; j < n_kv; ++j) {
                const bool visible = i < n_q && j <= n_kv - n_q + i;
                set_mask(m, j, i, h, visible ? 0.0f : -INFINITY);
            }
    return m;
}

} // namespace

TEST_CASE("flash_attn_ext: f32 and f16 K/V, GQA, causal mask, odd n_kv") {
    for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (ggml_type mt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            CAPTURE((int) kv); CAPTURE((int) mt);
            Ctx c;
            const int64_t D = 40, Dv = 24, n_q = 5, n_kv = 37, n_head = 6, n_head_kv = 2;
            ggml_tensor * q = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_q, n_head);
            ggml_tensor * k = ggml_new_tensor_3d(c.ctx, kv, D, n_kv, n_head_kv);
            ggml_tensor * v = ggml_new_tensor_3d(c.ctx, kv, Dv, n_kv, n_head_kv);
            fill(q, 1.0f); fill(k, 1.0f); fill(v, 1.0f);
            ggml_tensor * m = causal_mask(c.ctx, mt, n_kv, n_q, 8);
            check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 1.0f / std::sqrt((float) D), 0.0f, 0.0f), 2e-5);
        }
    }
}

// Random cache rows of n_head_kv heads of D values (F16 or Q8_0), [D * n_head_kv, n_kv, 1, ne3].
ggml_tensor * cache_rows(ggml_context * ctx, ggml_type type, int64_t D, int64_t n_head_kv, int64_t n_kv, int64_t ne3) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx, type, D * n_head_kv, n_kv, 1, ne3);
    std::vector<float> x(D * n_head_kv * n_kv * ne3);
    for (float & e : x) e = frand(1.0f);
    ggml_quantize_chunk(type, x.data(), t->data, 0, n_kv * ne3, D * n_head_kv, nullptr);
    return t;
}

// Per-head views [D, n_kv, n_head_kv, ne3] of random cache rows (cache_rows).
ggml_tensor * cache_heads(ggml_context * ctx, ggml_type type, int64_t D, int64_t n_head_kv, int64_t n_kv, int64_t ne3) {
    ggml_tensor * t = cache_rows(ctx, type, D, n_head_kv, n_kv, ne3);
    return ggml_view_4d(ctx, t, D, n_kv, n_head_kv, ne3, t->nb[1], ggml_row_size(type, D), t->nb[3], 0);
}

TEST_CASE(
    "flash_attn_ext at depth: few query rows over long f16/q8_0 caches, GQA 1/4/8, ragged kv_len, segments merged") {
    for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        for (int64_t ratio : {1, 4, 8}) {
            for (int64_t n_q : {1, 3}) {
                CAPTURE((int) kv);
                CAPTURE(ratio);
                CAPTURE(n_q);
                Ctx c;
                // 2 KV heads of 64 packed in a cache row (per-head views); 1300 slots: two whole
                // segments of 512 and a partial one; sequence 1 holds only 777 positions
                const int64_t D = 64, n_head_kv = 2, n_head = n_head_kv * ratio, n_kv = 1300, ne3 = 2;
                ggml_tensor * q = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, D, n_q, n_head, ne3);
                fill(q, 2.0f);
                ggml_tensor * k = cache_heads(c.ctx, kv, D, n_head_kv, n_kv, ne3);
                ggml_tensor * v = cache_heads(c.ctx, kv, D, n_head_kv, n_kv, ne3);
                ggml_tensor * m = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F16, n_kv, 4, 1, ne3);
                const int64_t len[ne3] = {n_kv, 777};
                for (int64_t s = 0; s < ne3; ++s) // causal rows ending at len[s]; slots past it hidden
                    for (int64_t i = 0; i < 4; ++i)
                        for (int64_t j = 0; j < n_kv; ++j) {
                            const bool visible = i < n_q && j <= len[s] - n_q + i;
                            ((ggml_fp16_t *) m->data)[(s * 4 + i) * n_kv + j] =
                                ggml_fp32_to_fp16(visible ? 0.0f : -INFINITY);
                        }
                ggml_tensor * lens = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, ne3);
                for (int64_t s = 0; s < ne3; ++s) ((int32_t *) lens->data)[s] = (int32_t) len[s];
                ggml_tensor * out = ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.125f, 0.0f, 0.0f);
                ggml_flash_attn_ext_set_kv_len(c.ctx, out, lens);
                CHECK(ggml_flash_attn_ext_n_phases(out) == 2);
                check(c.ctx, out, 5e-5);
            }
        }
    }
}

TEST_CASE(
    "flash_attn_ext prompts: many query rows in tiles, f32/f16/q8_0 caches, GQA 1/4/8, ragged kv_len, masked tails") {
    for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        for (int64_t ratio : {1, 4, 8}) {
            CAPTURE((int) kv);
            CAPTURE(ratio);
            Ctx c;
            // 37 query rows (blocks of FA_TILE_Q pairs end mid-row), 2 KV heads of 64 packed in a cache row; sequence 0
            // sees 230 of 240 slots (a partial tile), sequence 1 holds 131 and its mask adds a finite bias
            const int64_t D = 64, n_head_kv = 2, n_head = n_head_kv * ratio, n_kv = 240, ne3 = 2, n_q = 37,
                          n_q_pad = 40;
            ggml_tensor * q = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, D, n_q, n_head, ne3);
            fill(q, 2.0f);
            ggml_tensor * k = cache_heads(c.ctx, kv, D, n_head_kv, n_kv, ne3);
            ggml_tensor * v = cache_heads(c.ctx, kv, D, n_head_kv, n_kv, ne3);
            ggml_tensor * m = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F16, n_kv, n_q_pad, 1, ne3);
            const int64_t len[ne3] = {230, 131};
            for (int64_t s = 0; s < ne3; ++s) // causal rows ending at len[s]; slots past it hidden
                for (int64_t i = 0; i < n_q_pad; ++i)
                    for (int64_t j = 0; j < n_kv; ++j) {
                        const bool visible = i < n_q && j <= len[s] - n_q + i;
                        const float bias = s == 1 && j % 7 == 3 ? -0.75f : 0.0f;
                        set_mask(m, j, s * n_q_pad + i, 0, visible ? bias : -INFINITY);
                    }
            ggml_tensor * lens = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, ne3);
            for (int64_t s = 0; s < ne3; ++s) ((int32_t *) lens->data)[s] = (int32_t) len[s];
            ggml_tensor * out = ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.125f, 0.0f, 0.0f);
            ggml_flash_attn_ext_set_kv_len(c.ctx, out, lens);
            check(c.ctx, out, 5e-5);
        }
    }
}

TEST_CASE("flash_attn_ext: small heads (f32 K scored by dots_f32) as per-head views of cache rows, causal mask over several chunks") {
    for (int64_t D : {8, 12, 32}) {
        CAPTURE(D);
        Ctx c;
        const int64_t n_q = 3, n_kv = 150, n_head = 8, n_head_kv = 4;
        ggml_tensor * q = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_q, n_head);
        // a cache row holds every KV head (as the runtime stores it); per-head views
        ggml_tensor * kc = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, D * n_head_kv, n_kv);
        ggml_tensor * vc = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, D * n_head_kv, n_kv);
        fill(q, 2.0f); fill(kc, 2.0f); fill(vc, 1.0f);
        ggml_tensor * k = ggml_view_3d(c.ctx, kc, D, n_kv, n_head_kv, kc->nb[1], D * 4, 0);
        ggml_tensor * v = ggml_view_3d(c.ctx, vc, D, n_kv, n_head_kv, vc->nb[1], D * 4, 0);
        ggml_tensor * m = causal_mask(c.ctx, GGML_TYPE_F32, n_kv, n_q, 4);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 1.0f / std::sqrt((float) D), 0.0f, 0.0f), 2e-5);
    }
}

TEST_CASE("flash_attn_ext: no mask, long K/V with large scores (online rescaling), ne3 = 2") {
    for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Ctx c;
        const int64_t D = 17, n_q = 3, n_kv = 301, n_head = 4;
        ggml_tensor * q = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, D, n_q, n_head, 2);
        ggml_tensor * k = ggml_new_tensor_4d(c.ctx, kv, D, n_kv, n_head, 2);
        ggml_tensor * v = ggml_new_tensor_4d(c.ctx, kv, D, n_kv, n_head, 2);
        fill(q, 3.0f); fill(k, 3.0f); fill(v, 1.0f);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, nullptr, 1.0f, 0.0f, 0.0f), 2e-5);
    }
}

TEST_CASE("flash_attn_ext prompts: no mask or an F32 causal one, large scores (online rescaling), Dv != D") {
    for (bool masked : {false, true}) {
        CAPTURE(masked);
        Ctx c;
        const int64_t D = 64, Dv = 32, n_q = 20, n_kv = 301, n_head = 4, n_head_kv = 2;
        ggml_tensor * q = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, D, n_q, n_head, 2);
        ggml_tensor * k = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head_kv, 2);
        ggml_tensor * v = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F16, Dv, n_kv, n_head_kv, 2);
        fill(q, 3.0f);
        fill(k, 3.0f);
        fill(v, 1.0f);
        ggml_tensor * m = masked ? causal_mask(c.ctx, GGML_TYPE_F32, n_kv, n_q, 24) : nullptr;
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.25f, 0.0f, 0.0f), 5e-5);
    }
}

TEST_CASE("flash_attn_ext: softcap and ALiBi with per-head masks") {
    for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Ctx c;
        const int64_t D = 32, n_q = 4, n_kv = 71, n_head = 6, n_head_kv = 3;
        ggml_tensor * q = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_q, n_head);
        ggml_tensor * k = ggml_new_tensor_3d(c.ctx, kv, D, n_kv, n_head_kv);
        ggml_tensor * v = ggml_new_tensor_3d(c.ctx, kv, D, n_kv, n_head_kv);
        fill(q, 2.0f); fill(k, 2.0f); fill(v, 1.0f);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, causal_mask(c.ctx, GGML_TYPE_F16, n_kv, n_q, n_q), 0.5f, 0.0f, 5.0f), 2e-5);
        // ALiBi: mask holds -distance for visible keys, per head (ne2 = n_head)
        ggml_tensor * m = causal_mask(c.ctx, GGML_TYPE_F32, n_kv, n_q, n_q, n_head);
        for (int64_t h = 0; h < n_head; ++h)
            for (int64_t i = 0; i < n_q; ++i)
                for (int64_t j = 0; j <= n_kv - n_q + i; ++j) set_mask(m, j, i, h, -(float) (n_kv - n_q + i - j) * (h + 1) / 8);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.2f, 8.0f, 0.0f), 2e-5);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.2f, 8.0f, 3.0f), 2e-5);
    }
}

TEST_CASE("flash_attn_ext: fully masked rows give zeros, sparse masks skip positions") {
    Ctx c;
    const int64_t D = 16, n_q = 4, n_kv = 150, n_head = 2;
    ggml_tensor * q = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_q, n_head);
    ggml_tensor * k = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head);
    ggml_tensor * v = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head);
    fill(q, 1.0f); fill(k, 1.0f); fill(v, 1.0f);
    ggml_tensor * m = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F16, n_kv, n_q);
    for (int64_t i = 0; i < n_q; ++i)
        for (int64_t j = 0; j < n_kv; ++j) {
            bool visible = false;
            if (i == 1) visible = j == 149;               // one key, in the last chunk
            if (i == 2) visible = j % 7 == 3 || j == 0;   // scattered keys
            if (i == 3) visible = j >= 60 && j < 70;      // a run spanning a chunk border
            set_mask(m, j, i, 0, visible ? 0.0f : -INFINITY);
        }
    ggml_tensor * r = ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.25f, 0.0f, 0.0f);
    check(c.ctx, r, 2e-5);
    for (int64_t h = 0; h < n_head; ++h)
        for (int64_t i = 0; i < D; ++i) CHECK(((float *) r->data)[(0 * n_head + h) * D + i] == 0.0f); // row 0: all -inf
}

TEST_CASE("flash_attn_ext: windows that start past whole chunks and end before the cache does") {
    for (ggml_type mt : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        CAPTURE((int) mt);
        Ctx c;
        // 9 queries (GQA 3): query i sees [70 + 5i, 101 + 5i); the rest of the 203 slots is -inf
        const int64_t D = 16, n_q = 9, n_kv = 203, n_head = 6, n_head_kv = 2;
        ggml_tensor * q = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_q, n_head);
        ggml_tensor * k = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head_kv);
        ggml_tensor * v = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head_kv);
        fill(q, 1.0f); fill(k, 1.0f); fill(v, 1.0f);
        ggml_tensor * m = ggml_new_tensor_2d(c.ctx, mt, n_kv, 16);
        for (int64_t i = 0; i < 16; ++i)
            for (int64_t j = 0; j < n_kv; ++j) set_mask(m, j, i, 0, i < n_q && j >= 70 + 5 * i && j < 101 + 5 * i ? 0.0f : -INFINITY);
        check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, m, 0.25f, 0.0f, 0.0f), 2e-5);
    }
}

TEST_CASE("flash_attn_ext: permuted q (heads interleaved as produced by a projection)") {
    Ctx c;
    const int64_t D = 24, n_q = 7, n_kv = 33, n_head = 4, n_head_kv = 1;
    ggml_tensor * qraw = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, D, n_head, n_q);
    fill(qraw, 1.0f);
    ggml_tensor * q = ggml_permute(c.ctx, qraw, 0, 2, 1, 3);
    ggml_tensor * k = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head_kv);
    ggml_tensor * v = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, D, n_kv, n_head_kv);
    fill(k, 1.0f); fill(v, 1.0f);
    check(c.ctx, ggml_flash_attn_ext(c.ctx, q, k, v, causal_mask(c.ctx, GGML_TYPE_F16, n_kv, n_q, 8), 0.3f, 0.0f, 0.0f), 2e-5);
}

TEST_CASE("attention helper kernels on every path match plain loops") {
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (int64_t dv : {1, 7, 16, 37, 130}) {
            CAPTURE(dv);
            const int64_t n_max = 15, ps = 16, as = dv + 3;
            std::vector<float> rows32(n_max * (dv + 1)), p(kvg::MM_MAX_COLS * ps);
            std::vector<ggml_fp16_t> rows16(n_max * (dv + 1));
            for (size_t i = 0; i < rows32.size(); ++i) {
                rows16[i] = ggml_fp32_to_fp16(frand());
                rows32[i] = ggml_fp16_to_fp32(rows16[i]); // same values in both types
            }
            for (auto & x : p) x = frand();
            std::vector<uint8_t> active(n_max);
            for (int64_t j = 0; j < n_max; ++j) active[j] = j % 5 != 1;
            // n past a multiple of 4 by 1, 2 and 3 active rows (the vector paths' four chains)
            for (int64_t n = 13; n <= n_max; ++n) {
                for (int C = 1; C <= kvg::MM_MAX_COLS; ++C) {
                    CAPTURE(n);
                    CAPTURE(C);
                    std::vector<float> want(C * as);
                    for (auto & x : want) x = frand();
                    std::vector<float> got32 = want, got16 = want;
                    for (int c = 0; c < C; ++c)
                        for (int64_t j = 0; j < n; ++j)
                            for (int64_t i = 0; i < dv && active[j]; ++i) want[c * as + i] += p[c * ps + j] * rows32[j * (dv + 1) + i];
                    kern.accum_f32(C, n, p.data(), ps, active.data(), (const char *) rows32.data(), (dv + 1) * 4, dv, got32.data(), as);
                    kern.accum_f16(C, n, p.data(), ps, active.data(), (const char *) rows16.data(), (dv + 1) * 2, dv, got16.data(), as);
                    for (size_t i = 0; i < want.size(); ++i) {
                        CHECK(std::fabs(got32[i] - want[i]) <= 1e-5);
                        CHECK(std::fabs(got16[i] - want[i]) <= 1e-5);
                    }
                }
            }
            std::vector<float> y(dv + 1, 2.0f);
            kern.scale_f32(dv, 0.5f, y.data());
            for (int64_t i = 0; i <= dv; ++i) CHECK(y[i] == (i < dv ? 1.0f : 2.0f));
            std::vector<float> f(dv + 1, -3.0f);
            kern.f16_to_f32(rows16.data(), f.data(), dv);
            for (int64_t i = 0; i <= dv; ++i) CHECK(f[i] == (i < dv ? rows32[i] : -3.0f));
            // q8_0 rows of dv blocks: exactly the reference's values, nothing written past them
            std::vector<float> src(32 * dv), want_q(32 * dv), got_q(32 * dv + 1, -3.0f);
            for (auto & x : src) x = 4.0f * frand();
            std::vector<block_q8_0> blocks(dv);
            quantize_row_q8_0_ref(src.data(), blocks.data(), 32 * dv);
            dequantize_row_q8_0(blocks.data(), want_q.data(), 32 * dv);
            kern.dequantize_q8_0(blocks.data(), got_q.data(), 32 * dv);
            CHECK(std::memcmp(got_q.data(), want_q.data(), want_q.size() * sizeof(float)) == 0);
            CHECK(got_q.back() == -3.0f);
        }
    }
}

TEST_CASE("add_scores on the paths that have it: the plain loop's bits, masked scores kept, the maximum") {
    for (int pi = 0; pi <= (int) kvg::cpu_best_path(); ++pi) {
        const kvg::cpu_kernels & kern = *kvg::cpu_path_kernels((kvg::cpu_path) pi);
        if (!kern.add_scores) continue;
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (int64_t n : {1, 5, 16, 17, 64}) {
            CAPTURE(n);
            std::vector<float> s(n + 1, 9.0f), dots(n), want(n);
            float want_max = -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
                s[j] = j % 4 == 1 ? -INFINITY : frand(3.0f);
                dots[j] = frand(5.0f);
                // volatile: the reference rounds the product and the sum separately
                volatile float prod = dots[j] * 0.37f;
                want[j] = s[j] == -INFINITY ? -INFINITY : s[j] + prod;
                want_max = std::max(want_max, want[j]);
            }
            // from a separate source (the mask read in place), then in place
            std::vector<float> out(n + 1, 9.0f);
            CHECK(kern.add_scores(n, s.data(), dots.data(), 0.37f, out.data()) == want_max);
            CHECK(std::memcmp(out.data(), want.data(), n * sizeof(float)) == 0);
            CHECK(out[n] == 9.0f);
            const float got_max = kern.add_scores(n, s.data(), dots.data(), 0.37f, s.data());
            CHECK(std::memcmp(s.data(), want.data(), n * sizeof(float)) == 0);
            CHECK(s[n] == 9.0f);
            CHECK(got_max == want_max);
        }
        std::vector<float> all_masked(20, -INFINITY), d(20, 1.0f);
        CHECK(kern.add_scores(20, all_masked.data(), d.data(), 1.0f, all_masked.data()) == -INFINITY);
        CHECK(all_masked[7] == -INFINITY);
    }
}

// The scalar, AVX2 and AVX-512 tables this CPU runs (index = path), for the tests below.
static std::vector<const kvg::cpu_kernels *> float_paths() {
    const kvg::cpu_kernels * all[] = {&kvg::kernels_scalar(), kvg::kernels_avx2(), kvg::kernels_avx512()};
    return std::vector<const kvg::cpu_kernels *>(all, all + std::min<int>(kvg::cpu_best_path(), 2) + 1);
}

TEST_CASE("softmax weights on every path: exp within 2 ulp of expf, masked positions zero") {
    for (const kvg::cpu_kernels * path : float_paths()) {
        const kvg::cpu_kernels & kern = *path;
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (int64_t n : {1, 5, 8, 16, 17, 64}) {
            CAPTURE(n);
            // scores from 0 down to -100 (past expf's normal range), every third masked
            std::vector<float> s(n), want(n);
            std::vector<uint8_t> active(n + 1, 0);
            const float max = 3.5f;
            double want_sum = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                s[j] = j % 3 == 2 ? -INFINITY : max - (float) j * 1.6f - (float) (j % 5) * 0.137f;
                want[j] = s[j] == -INFINITY ? 0.0f : std::exp(s[j] - max);
                want_sum += want[j];
            }
            const float sum = kern.softmax_weights(n, s.data(), max, active.data());
            for (int64_t j = 0; j < n; ++j) {
                CAPTURE(j);
                CHECK(active[j] == (j % 3 == 2 ? 0 : 1));
                // 2 ulp of the result, or below FLT_MIN where the vector paths flush to 0
                CHECK(std::fabs(s[j] - want[j]) <= std::max(2.0f * 1.2e-7f * want[j], 1.2e-38f));
            }
            CHECK(active[n] == 0);
            CHECK(std::fabs(sum - want_sum) <= 1e-6 * want_sum);
        }
    }
}

// (silu shares the vector paths' exp; it sits here beside the softmax test of the same tables)
TEST_CASE("silu on every path: within 4 ulp of x / (1 + exp(-x)), the two vector paths bit-identical") {
    const std::vector<const kvg::cpu_kernels *> paths = float_paths();
    std::vector<float> by_path[3];
    for (size_t pi = 0; pi < paths.size(); ++pi) {
        const kvg::cpu_kernels & kern = *paths[pi];
        const std::string path_str = kern.name;
        CAPTURE(path_str);
        for (int64_t n : {1, 7, 8, 16, 21, 64}) {
            CAPTURE(n);
            // -100 .. 100 (exp(-|x|) below FLT_MIN at both ends), zero and tiny values
            std::vector<float> x(n), y(n, 123.0f);
            for (int64_t j = 0; j < n; ++j) x[j] = j % 9 == 4 ? 1e-30f * (float) (j - 30) : (float) (j * 37 % 41 - 20) * 5.03f * (j % 2 ? 1 : 0.013f);
            kern.silu_f32(n, x.data(), y.data());
            for (int64_t j = 0; j < n; ++j) {
                CAPTURE(x[j]);
                const double want = (double) x[j] / (1.0 + std::exp(-(double) x[j]));
                // 4 ulp, or 1e-35 absolute: past x = -87, exp(-|x|) leaves float's normal range
                // (the vector paths flush it to 0, expf overflows 1 + exp(-x)), and silu is 0 there
                CHECK(std::fabs(y[j] - want) <= std::max(4.0 * 1.2e-7 * std::fabs(want), 1e-35));
            }
            if (n == 64) by_path[pi] = y;
            std::vector<float> in_place = x; // y may be x
            kern.silu_f32(n, in_place.data(), in_place.data());
            CHECK(std::memcmp(in_place.data(), y.data(), n * sizeof(float)) == 0);
        }
    }
    if (!by_path[1].empty() && !by_path[2].empty()) CHECK(std::memcmp(by_path[1].data(), by_path[2].data(), 64 * sizeof(float)) == 0);
}
