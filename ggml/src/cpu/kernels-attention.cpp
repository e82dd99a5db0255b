// GGML_OP_FLASH_ATTN_EXT: softmax(q·K^T * scale [softcap] + slope * mask) · V, one pass
// over K/V per query row with an online softmax: a running maximum and sum, the
// accumulator rescaled when the maximum grows. Scores are computed a chunk of positions
// at a time (register tiles of several K rows against the query), so the rescale happens
// at most once per chunk. Positions whose mask is -inf cost no dot product.
#include "kernels.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kvg;

namespace {

constexpr int64_t CHUNK = 64; // K/V positions scored before they are folded into the sum

struct fa_info {
    const ggml_tensor * q, * k, * v, * mask;
    int64_t D, Dv, n_q, n_kv, n_head, n_head_kv, ne3;
};

fa_info inspect(const ggml_tensor * dst) {
    fa_info f;
    f.q = dst->src[0];
    f.k = dst->src[1];
    f.v = dst->src[2];
    f.mask = dst->src[3];
    if (!f.q || !f.k || !f.v) GGML_ABORT("flash_attn_ext: missing q, k or v");
    const ggml_tensor * q = f.q, * k = f.k, * v = f.v, * m = f.mask;
    if (q->type != GGML_TYPE_F32) GGML_ABORT("flash_attn_ext: q must be F32, got %s", ggml_type_name(q->type));
    for (const ggml_tensor * t : {k, v}) {
        if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16) {
            GGML_ABORT("flash_attn_ext: k and v must be F32 or F16, got %s", ggml_type_name(t->type));
        }
        if (t->nb[0] != ggml_type_size(t->type)) GGML_ABORT("flash_attn_ext: k and v rows must be contiguous");
    }
    f.D = q->ne[0];
    f.Dv = v->ne[0];
    f.n_q = q->ne[1];
    f.n_head = q->ne[2];
    f.ne3 = q->ne[3];
    f.n_kv = k->ne[1];
    f.n_head_kv = k->ne[2];
    if (k->ne[0] != f.D || v->ne[1] != f.n_kv || v->ne[2] != f.n_head_kv || k->ne[3] != f.ne3 || v->ne[3] != f.ne3 ||
        f.n_head_kv == 0 || f.n_head % f.n_head_kv != 0) {
        GGML_ABORT("flash_attn_ext: incompatible shapes q [%lld,%lld,%lld,%lld] k [%lld,%lld,%lld,%lld] v [%lld,%lld,%lld,%lld]",
                   (long long) q->ne[0], (long long) q->ne[1], (long long) q->ne[2], (long long) q->ne[3],
                   (long long) k->ne[0], (long long) k->ne[1], (long long) k->ne[2], (long long) k->ne[3],
                   (long long) v->ne[0], (long long) v->ne[1], (long long) v->ne[2], (long long) v->ne[3]);
    }
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float) || dst->ne[0] != f.Dv || dst->ne[1] != f.n_head ||
        dst->ne[2] != f.n_q || dst->ne[3] != f.ne3) {
        GGML_ABORT("flash_attn_ext: dst must be F32 [Dv, n_head, n_q, ne3] with dense rows");
    }
    if (m) {
        if (m->type != GGML_TYPE_F32 && m->type != GGML_TYPE_F16) GGML_ABORT("flash_attn_ext: mask must be F16 or F32");
        if (m->nb[0] != ggml_type_size(m->type) || m->ne[0] != f.n_kv || m->ne[1] < f.n_q || m->ne[2] == 0 ||
            m->ne[3] == 0 || f.n_head % m->ne[2] != 0 || f.ne3 % m->ne[3] != 0) {
            GGML_ABORT("flash_attn_ext: mask [%lld,%lld,%lld,%lld] does not fit n_kv %lld, n_q %lld",
                       (long long) m->ne[0], (long long) m->ne[1], (long long) m->ne[2], (long long) m->ne[3],
                       (long long) f.n_kv, (long long) f.n_q);
        }
    }
    return f;
}

// Per-task scratch: accumulator [Dv], scores [CHUNK], gathered query row [D].
int64_t scratch_floats(const fa_info & f) { return GGML_PAD(f.Dv, 16) + CHUNK + GGML_PAD(f.D, 16); }

// ALiBi slope of head h (1 when max_bias is 0).
float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const int64_t n_log2 = (int64_t) 1 << (int) std::floor(std::log2((double) n_head));
    const float m0 = std::pow(2.0f, -max_bias / n_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_log2);
    return h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
}

} // namespace

size_t ggml_flash_attn_ext_work_size(const ggml_tensor * dst, int n_tasks) {
    const fa_info f = inspect(dst);
    return (size_t) std::max(n_tasks, 1) * scratch_floats(f) * sizeof(float) + 64;
}

void ggml_compute_forward_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst) {
    const fa_info f = inspect(dst);
    if (params->ith < 0 || params->ith >= params->nth) GGML_ABORT("flash_attn_ext: task %d of %d", params->ith, params->nth);
    if (!params->wdata || params->wsize < ggml_flash_attn_ext_work_size(dst, params->nth)) {
        GGML_ABORT("flash_attn_ext: work buffer of %zu bytes, need %zu", params->wsize, ggml_flash_attn_ext_work_size(dst, params->nth));
    }
    float scale, max_bias, softcap;
    std::memcpy(&scale, (const float *) dst->op_params + 0, sizeof(float));
    std::memcpy(&max_bias, (const float *) dst->op_params + 1, sizeof(float));
    std::memcpy(&softcap, (const float *) dst->op_params + 2, sizeof(float));
    if (softcap != 0.0f) scale /= softcap; // s = softcap * tanh(qk * scale / softcap)

    const cpu_kernels & kern = cpu_active_kernels();
    const mm_kernel & kdot = kern.mm[f.k->type == GGML_TYPE_F16 ? MM_F16 : MM_F32];
    const int RN = kdot.rows;

    float * scratch = (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + params->ith * scratch_floats(f);
    float * acc = scratch;
    float * s = acc + GGML_PAD(f.Dv, 16);
    float * qbuf = s + CHUNK;

    const ggml_tensor * q = f.q, * k = f.k, * v = f.v, * m = f.mask;
    const int64_t group = f.n_head / f.n_head_kv;
    const int64_t rows = f.n_q * f.n_head * f.ne3;
    const int64_t r0 = rows * params->ith / params->nth, r1 = rows * (params->ith + 1) / params->nth;

    // rows ordered query-fastest so that consecutive rows reuse the same K/V head in cache
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t iq1 = r % f.n_q, h = (r / f.n_q) % f.n_head, iq3 = r / (f.n_q * f.n_head);
        const int64_t hk = h / group;
        const float slope = alibi_slope(max_bias, h, f.n_head);

        const char * qsrc = (const char *) q->data + iq1 * q->nb[1] + h * q->nb[2] + iq3 * q->nb[3];
        const float * qrow = (const float *) qsrc;
        if (q->nb[0] != sizeof(float)) {
            for (int64_t i = 0; i < f.D; ++i) qbuf[i] = *(const float *) (qsrc + i * q->nb[0]);
            qrow = qbuf;
        }
        const char * kbase = (const char *) k->data + hk * k->nb[2] + iq3 * k->nb[3];
        const char * vbase = (const char *) v->data + hk * v->nb[2] + iq3 * v->nb[3];
        const char * mrow = m ? (const char *) m->data + iq1 * m->nb[1] + (h % m->ne[2]) * m->nb[2] + (iq3 % m->ne[3]) * m->nb[3]
                              : nullptr;
        auto mask_at = [&](int64_t j) -> float {
            if (!mrow) return 0.0f;
            return m->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *) mrow)[j]) : ((const float *) mrow)[j];
        };

        float run_max = -INFINITY, run_sum = 0.0f;
        std::fill(acc, acc + f.Dv, 0.0f);
        for (int64_t c0 = 0; c0 < f.n_kv; c0 += CHUNK) {
            const int64_t cn = std::min(CHUNK, f.n_kv - c0);
            // mask (times slope) first; positions at -inf are skipped below
            for (int64_t j = 0; j < cn; ++j) {
                const float mv = mask_at(c0 + j);
                s[j] = mv == -INFINITY ? -INFINITY : slope * mv;
            }
            // dot products, RN K rows per register tile, skipping fully masked groups
            for (int64_t j = 0; j < cn; j += RN) {
                const int rn = (int) std::min<int64_t>(RN, cn - j);
                bool any = false;
                for (int t = 0; t < rn; ++t) any |= s[j + t] != -INFINITY;
                if (!any) continue;
                float dots[MM_MAX_ROWS];
                const mm_tile_args args = {f.D, kbase + (c0 + j) * k->nb[1], k->nb[1], (const char *) qrow, 0, dots, 1, false};
                kdot.tile[rn][1](args);
                for (int t = 0; t < rn; ++t) {
                    if (s[j + t] == -INFINITY) continue;
                    float x = dots[t] * scale;
                    if (softcap != 0.0f) x = softcap * std::tanh(x);
                    s[j + t] += x;
                }
            }
            float cmax = -INFINITY;
            for (int64_t j = 0; j < cn; ++j) cmax = std::max(cmax, s[j]);
            if (cmax == -INFINITY) continue; // whole chunk masked
            if (cmax > run_max) {
                // exp(-inf) = 0: the first unmasked chunk just zeroes the (empty) sum
                const float rescale = std::exp(run_max - cmax);
                if (run_sum != 0.0f) kern.scale_f32(f.Dv, rescale, acc);
                run_sum *= rescale;
                run_max = cmax;
            }
            for (int64_t j = 0; j < cn; ++j) {
                if (s[j] == -INFINITY) continue;
                const float p = std::exp(s[j] - run_max);
                run_sum += p;
                const char * vrow = vbase + (c0 + j) * v->nb[1];
                if (v->type == GGML_TYPE_F16) kern.axpy_f16(f.Dv, p, (const ggml_fp16_t *) vrow, acc);
                else kern.axpy_f32(f.Dv, p, (const float *) vrow, acc);
            }
        }
        float * out = (float *) ((char *) dst->data + h * dst->nb[1] + iq1 * dst->nb[2] + iq3 * dst->nb[3]);
        // a fully masked row has no weights at all: its output is zero, not 0/0
        const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
        for (int64_t i = 0; i < f.Dv; ++i) out[i] = acc[i] * inv;
    }
}
