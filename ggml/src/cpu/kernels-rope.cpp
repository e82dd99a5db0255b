// Rotary position embedding with ggml's rope_ext parameters (YaRN, frequency factors).
//
// a is [head_dim, n_head, n_tokens, ne3]; token i2 has position pos[i2]. Pair k
// (0 <= k < n_dims/2) is rotated by theta_k = pos * freq_base^(-2k/n_dims) / ff[k],
// scaled by freq_scale (YaRN blends scaled and unscaled angles when ext_factor != 0).
// Mode 0 rotates (x[2k], x[2k+1]); NEOX rotates (x[k], x[k + n_dims/2]). Dimensions
// past n_dims are copied. cos/sin are computed once per token and shared by its heads.
#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

// YaRN: the dimension index at which a rotation makes n_rot turns over n_ctx_orig positions
double yarn_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * std::log(base));
}

// 1 below `low`, 0 above `high`, linear in between (pair index k)
double yarn_ramp(double low, double high, int64_t k) {
    const double y = (k - low) / std::max(0.001, high - low);
    return 1.0 - std::min(1.0, std::max(0.0, y));
}

struct rope_params {
    int n_dims;
    bool neox;
    float freq_scale, ext_factor, attn_factor;
    double corr_low, corr_high;
    std::vector<double> inv_freq; // per pair: freq_base^(-2k/n_dims) / ff[k]
};

// cos/sin (already multiplied by the magnitude scale) of every pair for one position
void rope_cache(const rope_params & p, double pos, float * cos_out, float * sin_out) {
    const int64_t half = p.n_dims / 2;
    double mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / p.freq_scale);
    for (int64_t k = 0; k < half; ++k) {
        const double theta_extrap = pos * p.inv_freq[k];
        double theta = p.freq_scale * theta_extrap;
        if (p.ext_factor != 0.0f) {
            const double mix = yarn_ramp(p.corr_low, p.corr_high, k) * p.ext_factor;
            theta = theta * (1.0 - mix) + theta_extrap * mix;
        }
        cos_out[k] = (float) (std::cos(theta) * mscale);
        sin_out[k] = (float) (std::sin(theta) * mscale);
    }
}

bool same_angles(const rope_params & a, const rope_params & b) {
    return a.n_dims == b.n_dims && a.freq_scale == b.freq_scale && a.ext_factor == b.ext_factor &&
           a.attn_factor == b.attn_factor && a.corr_low == b.corr_low && a.corr_high == b.corr_high && a.inv_freq == b.inv_freq;
}

// rope_cache through a per-thread memo of the last position: decoding ropes q and k of every
// layer at one position, so all but the first call per token reuse its cos/sin (same bits).
// Returns the cosines, then the sines (n_dims / 2 each), valid until this thread's next call.
const float * rope_cache_memo(const rope_params & p, double pos) {
    struct memo_t {
        rope_params p;
        double pos = 0.0;
        std::vector<float> cs;
        bool valid = false;
    };
    thread_local memo_t m;
    const int64_t half = p.n_dims / 2;
    if (!(m.valid && m.pos == pos && same_angles(m.p, p))) {
        m.cs.resize(2 * half);
        rope_cache(p, pos, m.cs.data(), m.cs.data() + half);
        m.p = p;
        m.pos = pos;
        m.valid = true;
    }
    return m.cs.data();
}

// rotates one row of floats in place
void rope_row(const rope_params & p, const float * c, const float * s, float * x) {
    const int64_t half = p.n_dims / 2;
    if (p.neox) {
        float * x0 = x;
        float * x1 = x + half;
        for (int64_t k = 0; k < half; ++k) {
            const float a = x0[k], b = x1[k];
            x0[k] = a * c[k] - b * s[k];
            x1[k] = a * s[k] + b * c[k];
        }
    } else {
        for (int64_t k = 0; k < half; ++k) {
            const float a = x[2 * k], b = x[2 * k + 1];
            x[2 * k] = a * c[k] - b * s[k];
            x[2 * k + 1] = a * s[k] + b * c[k];
        }
    }
}

void load_row(ggml_type t, const char * row, size_t nb0, int64_t n, float * out) {
    for (int64_t i = 0; i < n; ++i) {
        if (t == GGML_TYPE_F32) {
            std::memcpy(&out[i], row + i * nb0, sizeof(float));
        } else {
            ggml_fp16_t h;
            std::memcpy(&h, row + i * nb0, sizeof(h));
            out[i] = ggml_fp16_to_fp32(h);
        }
    }
}
void store_row(ggml_type t, char * row, size_t nb0, int64_t n, const float * in) {
    for (int64_t i = 0; i < n; ++i) {
        if (t == GGML_TYPE_F32) {
            std::memcpy(row + i * nb0, &in[i], sizeof(float));
        } else {
            const ggml_fp16_t h = ggml_fp32_to_fp16(in[i]);
            std::memcpy(row + i * nb0, &h, sizeof(h));
        }
    }
}

// Checks the op's inputs and derives its parameters: the YaRN correction range and the
// per-pair inverse frequencies. The result is this thread's, valid until its next call: a
// reused struct keeps its vector's capacity, so a warm decode allocates nothing here.
const rope_params & read_rope_params(const ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * ff = dst->src[2];

    if ((src0->type != GGML_TYPE_F32 && src0->type != GGML_TYPE_F16) || dst->type != src0->type) {
        GGML_ABORT("rope: '%s' must be f32 or f16 (got %s -> %s)", src0->name, ggml_type_name(src0->type), ggml_type_name(dst->type));
    }
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    if (pos == nullptr || pos->type != GGML_TYPE_I32 || pos->ne[0] < src0->ne[2]) {
        GGML_ABORT("rope: positions must be an i32 vector with one entry per token (%lld)", (long long) src0->ne[2]);
    }

    thread_local rope_params p;
    p.n_dims = ggml_get_op_params_i32(dst, 1);
    const int mode = ggml_get_op_params_i32(dst, 2);
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    const float freq_base = ggml_get_op_params_f32(dst, 5);
    p.freq_scale = ggml_get_op_params_f32(dst, 6);
    p.ext_factor = ggml_get_op_params_f32(dst, 7);
    p.attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast = ggml_get_op_params_f32(dst, 9);
    const float beta_slow = ggml_get_op_params_f32(dst, 10);
    if (mode != 0 && mode != GGML_ROPE_TYPE_NEOX) {
        GGML_ABORT("rope: mode %d is not supported (0 = normal, %d = neox)", mode, GGML_ROPE_TYPE_NEOX);
    }
    p.neox = mode == GGML_ROPE_TYPE_NEOX;
    if (p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_dims > dst->ne[0]) {
        GGML_ABORT("rope: n_dims %d must be even and in (0, %lld]", p.n_dims, (long long) dst->ne[0]);
    }
    const int64_t half = p.n_dims / 2;
    if (ff) {
        GGML_ASSERT(ff->type == GGML_TYPE_F32 && ff->ne[0] >= half);
    }

    p.corr_low = 0.0;
    p.corr_high = 0.0;
    if (p.ext_factor != 0.0f) {
        const double start = std::floor(yarn_corr_dim(p.n_dims, n_ctx_orig, beta_fast, freq_base));
        const double end = std::ceil(yarn_corr_dim(p.n_dims, n_ctx_orig, beta_slow, freq_base));
        p.corr_low = std::max(0.0, start);
        p.corr_high = std::min((double) (p.n_dims - 1), end);
    }
    // Without frequency factors every rope node of a model asks for the same powers: a
    // per-thread memo of the last (freq_base bits, n_dims) saves a pow per pair and node.
    struct inv_memo_t {
        uint32_t base_bits = 0;
        int n_dims = 0;
        std::vector<double> inv_freq;
    };
    thread_local inv_memo_t memo;
    uint32_t base_bits;
    std::memcpy(&base_bits, &freq_base, sizeof(base_bits));
    if (!ff && memo.n_dims == p.n_dims && memo.base_bits == base_bits) {
        p.inv_freq.assign(memo.inv_freq.begin(), memo.inv_freq.end());
        return p;
    }
    p.inv_freq.resize(half);
    for (int64_t k = 0; k < half; ++k) {
        double f = std::pow((double) freq_base, -2.0 * k / p.n_dims);
        if (ff) {
            float v;
            std::memcpy(&v, (const char *) ff->data + k * ff->nb[0], sizeof(v));
            f /= v;
        }
        p.inv_freq[k] = f;
    }
    if (!ff) {
        memo.base_bits = base_bits;
        memo.n_dims = p.n_dims;
        memo.inv_freq.assign(p.inv_freq.begin(), p.inv_freq.end());
    }
    return p;
}

} // namespace

void ggml_compute_forward_rope(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const rope_params & p = read_rope_params(dst);
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t half = p.n_dims / 2;

    const bool direct = src0->type == GGML_TYPE_F32 && src0->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    thread_local std::vector<float> buf; // f16 rows (kept: no allocation per call)
    if (!direct) buf.resize(ne0);
    const float * cs = nullptr;
    int64_t cached_token = -1; // (i2, i3) flattened; rows of one token are adjacent

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const int64_t token = r / ne1;
        if (token != cached_token) {
            int32_t pv;
            std::memcpy(&pv, (const char *) pos->data + i2 * pos->nb[0], sizeof(pv));
            cs = rope_cache_memo(p, (double) pv);
            cached_token = token;
        }
        const char * a = row_at(src0, i1, i2, i3);
        char * d = row_at(dst, i1, i2, i3);
        if (direct) {
            float * y = (float *) d;
            if (a != d) std::memmove(y, a, ne0 * sizeof(float));
            rope_row(p, cs, cs + half, y);
        } else {
            load_row(src0->type, a, src0->nb[0], ne0, buf.data());
            rope_row(p, cs, cs + half, buf.data());
            store_row(dst->type, d, dst->nb[0], ne0, buf.data());
        }
    }
}
