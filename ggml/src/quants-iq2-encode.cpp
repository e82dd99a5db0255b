// Encoders of iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m (layouts: quants-iq2.h), for
// ggml_quantize_chunk with an importance matrix. Our own search, not ggml's algorithm: each value
// gets a weight (importance times its magnitude over the block's spread); per scale span (16 or 32
// values) a range of scales is tried, each group of 8 taking the grid point nearest in weighted
// squared error, and the span keeps the scale (refit by least squares) with the least error; the
// block's d then covers the largest span scale and the spans' scale codes are rounded to it.
#include "quants-iq2.h"

#include <cmath>
#include <cstring>

namespace {

constexpr int GROUP = 8;

struct grid_ref {
    const uint64_t * points;
    int n;
};
int8_t grid_value(uint64_t point, int j) { return (int8_t) (uint8_t) (point >> (8 * j)); }

// the grid point minimizing sum w (y - S g)^2 over a group; *err: that sum minus sum w y^2
int nearest(const grid_ref & g, const float * y, const float * w, float S, float * err) {
    int best = 0;
    float best_e = INFINITY;
    for (int p = 0; p < g.n; ++p) {
        float wyg = 0.0f, wgg = 0.0f;
        for (int j = 0; j < GROUP; ++j) {
            const float v = (float) grid_value(g.points[p], j);
            wyg += w[j] * y[j] * v;
            wgg += w[j] * v * v;
        }
        const float e = S * S * wgg - 2.0f * S * wyg;
        if (e < best_e) best_e = e, best = p;
    }
    *err = best_e;
    return best;
}

// value weights: importance (1 without) times sqrt(spread + x^2), so large values and the
// columns the importance matrix favours are kept closest
void value_weights(const float * x, const float * im, float * w) {
    float ss = 0.0f;
    for (int i = 0; i < QK_K; ++i) ss += x[i] * x[i];
    const float spread = 2.0f * ss / QK_K;
    for (int i = 0; i < QK_K; ++i) w[i] = (im ? im[i] : 1.0f) * std::sqrt(spread + x[i] * x[i]);
}

// A span of n groups (targets y, weights w; group q's values are S (g + delta[q])) at scale S:
// each group's nearest point into idx; returns the error (minus sum w y^2) and the least-squares
// scale of those points in *refit (0 if none)
float span_at(const grid_ref & g, const float * y, const float * w, int n, const float * delta, float S, int * idx,
              float * refit) {
    float e = 0.0f, num = 0.0f, den = 0.0f, shifted[GROUP];
    for (int q = 0; q < n; ++q) {
        for (int j = 0; j < GROUP; ++j) shifted[j] = y[GROUP * q + j] - S * delta[q];
        float eq;
        idx[q] = nearest(g, shifted, w + GROUP * q, S, &eq);
        e += eq;
        for (int j = 0; j < GROUP; ++j) {
            const float v = (float) grid_value(g.points[idx[q]], j) + delta[q];
            num += w[GROUP * q + j] * y[GROUP * q + j] * v;
            den += w[GROUP * q + j] * v * v;
        }
    }
    *refit = den > 0.0f ? num / den : 0.0f;
    return e;
}

// The span's scale: candidates around amax / top (top: the largest grid magnitude plus the
// offset), each also refit to its points; the least error wins (0 for an all-zero span).
float fit_span(const grid_ref & g, const float * y, const float * w, int n, const float * delta, float top, int * idx) {
    float amax = 0.0f;
    for (int i = 0; i < n * GROUP; ++i) amax = std::fmax(amax, std::fabs(y[i]));
    for (int q = 0; q < n; ++q) idx[q] = 0;
    float best_S = 0.0f, best_e = INFINITY;
    int trial[4];
    for (int c = 0; c < 8 && amax > 0.0f; ++c) {
        float S = amax / top * (0.6f + 0.075f * (float) c), refit;
        for (int pass = 0; pass < 2 && S > 0.0f; ++pass, S = refit) {
            const float e = span_at(g, y, w, n, delta, S, trial, &refit);
            if (e < best_e) {
                best_e = e, best_S = S;
                for (int q = 0; q < n; ++q) idx[q] = trial[q];
            }
        }
    }
    return best_S;
}

// points of every group for the final (coded) span scales
void final_points(const grid_ref & g, const float * y, const float * w, int groups_per_span, const float * S,
                  const float * delta, int * idx) {
    float shifted[GROUP], e;
    for (int q = 0; q < QK_K / GROUP; ++q) {
        const float s = S[q / groups_per_span];
        for (int j = 0; j < GROUP; ++j) shifted[j] = y[GROUP * q + j] - s * delta[q];
        idx[q] = s > 0.0f ? nearest(g, shifted, w + GROUP * q, s, &e) : 0;
    }
}

// ---- iq2: targets |x| with the signs stored apart ----------------------------------------------
struct iq2_block {
    float d;
    int scale[16]; // per span: s (0..15)
    int idx[32];
    uint8_t signs[32];
};

// spans of `span` values; parity: the sign codes hold 7 bits, so a group's count of minus signs
// must be even (the least important value of an odd group flips, its target becoming -|x|)
void plan_iq2(const float * x, const float * im, const grid_ref & g, int span, bool parity, iq2_block & b) {
    float w[QK_K], y[QK_K], S[16];
    const float zero[4] = {0, 0, 0, 0};
    value_weights(x, im, w);
    for (int q = 0; q < QK_K / GROUP; ++q) {
        unsigned s = 0;
        int least = 0;
        for (int j = 0; j < GROUP; ++j) {
            const int i = GROUP * q + j;
            s |= (unsigned) (x[i] < 0.0f) << j;
            y[i] = std::fabs(x[i]);
            if (w[i] * y[i] < w[GROUP * q + least] * y[GROUP * q + least]) least = j;
        }
        if (parity && __builtin_popcount(s) % 2) {
            s ^= 1u << least;
            y[GROUP * q + least] = -y[GROUP * q + least];
        }
        b.signs[q] = (uint8_t) s;
    }
    const int spans = QK_K / span, gps = span / GROUP;
    float smax = 0.0f;
    for (int k = 0; k < spans; ++k) {
        S[k] = fit_span(g, y + span * k, w + span * k, gps, zero, 43.0f, b.idx + gps * k);
        smax = std::fmax(smax, S[k]);
    }
    b.d = smax * 8.0f / 31.0f; // S = d (2 s + 1) / 8 with 2 s + 1 <= 31
    const float dq = ggml_fp16_to_fp32(ggml_fp32_to_fp16(b.d));
    float delta[32] = {};
    for (int k = 0; k < spans; ++k) {
        const int s = dq > 0.0f ? (int) std::lround((S[k] * 8.0f / dq - 1.0f) / 2.0f) : 0;
        b.scale[k] = s < 0 ? 0 : s > 15 ? 15 : s;
        S[k] = dq * (float) (2 * b.scale[k] + 1) / 8.0f;
    }
    final_points(g, y, w, gps, S, delta, b.idx);
}

// ---- iq1: signed grid points plus a +-1/8 offset -------------------------------------------------
struct iq1_block {
    float d;
    int scale[16]; // per span: s (0..7)
    int idx[32];
    bool neg[32]; // the group's delta is -1/8
};

// spans of `span` values; delta_span: values sharing one delta (32 for iq1_s, 8 for iq1_m)
void plan_iq1(const float * x, const float * im, int span, int delta_span, iq1_block & b) {
    const grid_ref g = {kvg::iq1s_grid(), 2048};
    float w[QK_K], S[16], delta[32];
    value_weights(x, im, w);
    const int spans = QK_K / span, gps = span / GROUP;
    float smax = 0.0f;
    for (int k = 0; k < spans; ++k) { // each span's delta signs: the sign of its values' mean
        for (int q = gps * k; q < gps * (k + 1); ++q) {
            const int first = q / (delta_span / GROUP) * delta_span;
            float sum = 0.0f;
            for (int i = first; i < first + delta_span; ++i) sum += x[i];
            delta[q] = sum < 0.0f ? -0.125f : 0.125f;
            b.neg[q] = sum < 0.0f;
        }
        S[k] = fit_span(g, x + span * k, w + span * k, gps, delta + gps * k, 1.125f, b.idx + gps * k);
        smax = std::fmax(smax, S[k]);
    }
    b.d = smax / 15.0f; // S = d (2 s + 1) with 2 s + 1 <= 15
    const float dq = ggml_fp16_to_fp32(ggml_fp32_to_fp16(b.d));
    for (int k = 0; k < spans; ++k) {
        const int s = dq > 0.0f ? (int) std::lround((S[k] / dq - 1.0f) / 2.0f) : 0;
        b.scale[k] = s < 0 ? 0 : s > 7 ? 7 : s;
        S[k] = dq * (float) (2 * b.scale[k] + 1);
    }
    final_points(g, x, w, gps, S, delta, b.idx);
}

void put_u16(uint8_t * p, unsigned v) {
    p[0] = (uint8_t) v;
    p[1] = (uint8_t) (v >> 8);
}

} // namespace

void kvg::encode_iq2_xxs(const float * x, void * y, int64_t k, const float * im) {
    block_iq2_xxs * out = (block_iq2_xxs *) y;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, im = im ? im + QK_K : im) {
        iq2_block b;
        plan_iq2(x, im, {iq2xxs_grid(), 256}, 32, true, b);
        out[i].d = ggml_fp32_to_fp16(b.d);
        uint8_t * q = (uint8_t *) out[i].qs;
        for (int j = 0; j < 8; ++j) {
            uint32_t aux = (uint32_t) b.scale[j] << 28;
            for (int l = 0; l < 4; ++l) {
                q[8 * j + l] = (uint8_t) b.idx[4 * j + l];
                aux |= (uint32_t) (b.signs[4 * j + l] & 127) << (7 * l);
            }
            std::memcpy(q + 8 * j + 4, &aux, 4);
        }
    }
}

void kvg::encode_iq2_xs(const float * x, void * y, int64_t k, const float * im) {
    block_iq2_xs * out = (block_iq2_xs *) y;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, im = im ? im + QK_K : im) {
        iq2_block b;
        plan_iq2(x, im, {iq2xs_grid(), 512}, 16, true, b);
        out[i].d = ggml_fp32_to_fp16(b.d);
        for (int q = 0; q < 32; ++q) out[i].qs[q] = (uint16_t) (b.idx[q] | (b.signs[q] & 127) << 9);
        for (int j = 0; j < 8; ++j) out[i].scales[j] = (uint8_t) (b.scale[2 * j] | b.scale[2 * j + 1] << 4);
    }
}

void kvg::encode_iq2_s(const float * x, void * y, int64_t k, const float * im) {
    block_iq2_s * out = (block_iq2_s *) y;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, im = im ? im + QK_K : im) {
        iq2_block b;
        plan_iq2(x, im, {iq2s_grid(), 1024}, 16, false, b);
        out[i].d = ggml_fp32_to_fp16(b.d);
        std::memset(out[i].qh, 0, sizeof out[i].qh);
        for (int q = 0; q < 32; ++q) {
            out[i].qs[q] = (uint8_t) b.idx[q];
            out[i].qs[32 + q] = b.signs[q];
            out[i].qh[q / 4] |= (uint8_t) ((b.idx[q] >> 8) << (2 * (q % 4)));
        }
        for (int j = 0; j < 8; ++j) out[i].scales[j] = (uint8_t) (b.scale[2 * j] | b.scale[2 * j + 1] << 4);
    }
}

void kvg::encode_iq1_s(const float * x, void * y, int64_t k, const float * im) {
    block_iq1_s * out = (block_iq1_s *) y;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, im = im ? im + QK_K : im) {
        iq1_block b;
        plan_iq1(x, im, 32, 32, b);
        out[i].d = ggml_fp32_to_fp16(b.d);
        for (int j = 0; j < 8; ++j) {
            unsigned h = (unsigned) b.scale[j] << 12 | (unsigned) b.neg[4 * j] << 15;
            for (int l = 0; l < 4; ++l) {
                out[i].qs[4 * j + l] = (uint8_t) b.idx[4 * j + l];
                h |= (unsigned) (b.idx[4 * j + l] >> 8) << (3 * l);
            }
            out[i].qh[j] = (uint16_t) h;
        }
    }
}

void kvg::encode_iq1_m(const float * x, void * y, int64_t k, const float * im) {
    block_iq1_m * out = (block_iq1_m *) y;
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, im = im ? im + QK_K : im) {
        iq1_block b;
        plan_iq1(x, im, 16, 8, b);
        const unsigned d = ggml_fp32_to_fp16(b.d);
        for (int q = 0; q < 32; ++q) {
            out[i].qs[q] = (uint8_t) b.idx[q];
            const unsigned nib = (unsigned) (b.idx[q] >> 8) | (unsigned) b.neg[q] << 3;
            if (q % 2 == 0) out[i].qh[q / 2] = (uint8_t) nib;
            else out[i].qh[q / 2] |= (uint8_t) (nib << 4);
        }
        for (int w = 0; w < 4; ++w) { // scales of the 16-value spans 4 w .. 4 w + 3, d's bits 4 w .. 4 w + 3 on top
            unsigned v = (d >> (4 * w) & 15) << 12;
            for (int s = 0; s < 4; ++s) v |= (unsigned) b.scale[4 * w + s] << (3 * s);
            put_u16(out[i].scales + 2 * w, v);
        }
    }
}
