// Encoders of llama.cpp's other weight formats (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K..Q6_K,
// TQ1_0, TQ2_0) into
// ggml's block layouts (types.h), and ggml's quantization API (ggml_quantize_chunk & co).
//
// Method. Every format approximates a run of values x by scale * level (+ offset), levels
// from a fixed grid (integers, or IQ4_NL's 16 non-linear levels). A run's scale (and offset)
// is chosen by trying candidate scales spread around "largest value on the grid's edge",
// giving each value its nearest level, refitting scale (and offset) by weighted least
// squares for those levels, and keeping the candidate with the lowest weighted squared
// error. The k-quants then code the sub-blocks' scales (and mins) as small integers times
// the super-block's f16 scale, and re-pick every level for the scale actually stored.
// Weights are the caller's importance matrix (ggml_quantize_chunk's imatrix) or 1.
// Q2_K's last step trades a little squared error for unbiased dot products: least squares
// leaves an error orthogonal to the approximation, so x . x' is short of x . x by the
// whole squared error (at 2 bits about 4% of it); Q2_K's final d and dmin make the error
// orthogonal to x instead.
#include "quants-iq2.h"
#include "quants-iq3.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// q4_K/q5_K's 12 bytes of 6-bit scales and mins.
void kvg::pack_scale_min_6bit(const uint8_t * sc, const uint8_t * mn, uint8_t * p) {
    for (int j = 0; j < 4; ++j) {
        p[j] = (uint8_t) (sc[j] | (sc[j + 4] >> 4) << 6);
        p[j + 4] = (uint8_t) (mn[j] | (mn[j + 4] >> 4) << 6);
        p[j + 8] = (uint8_t) ((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
    }
}

namespace {

float f16_round(float x) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16(x)); }

// nearest integer to v in [lo, hi], ties to even; NaN gives lo (never an undefined
// float-to-int conversion). Clamped, |v| < 2^22: adding and removing 1.5 * 2^23 rounds as
// nearbyint does in the default mode, without its library call (the encoders' inner loops).
int nearest(float v, int lo, int hi) {
    constexpr float shift = 12582912.0f;
    v = v > (float) lo ? v : (float) lo; // NaN: lo; selects, not branches (unpredictable here)
    v = v < (float) hi ? v : (float) hi;
    return (int) ((v + shift) - shift);
}

float weight(const float * w, int i) { return w ? w[i] : 1.0f; }

// ---- grids: code -> level, value -> nearest code ----------------------------------------------

struct int_grid {   // levels lo..hi, code = level - lo
    int lo, hi;
    int size() const { return hi - lo + 1; }
    float level(int code) const { return (float) (code + lo); }
    int code(float v) const { return nearest(v, lo, hi) - lo; }
};

struct nl_grid {    // IQ4_NL's ascending table
    int size() const { return 16; }
    float level(int code) const { return (float) kvg::iq4nl_levels[code]; }
    // the midpoints below v (a tie goes to the lower level; NaN gives 0), without branches
    int code(float v) const {
        int c = 0;
        for (int k = 0; k < 15; ++k) c += v > mid[k];
        return c;
    }
    float mid[15];
    nl_grid() {
        for (int k = 0; k < 15; ++k) mid[k] = 0.5f * (level(k) + level(k + 1));
    }
};

// A candidate (its parameters v and codes tmp) replaces the best so far if its error is lower.
template <class T> void keep_better(float err, const T & v, const uint8_t * tmp, int n, float * best_err, T * best, uint8_t * q) {
    if (!(err < *best_err)) return;
    *best_err = err;
    *best = v;
    std::memcpy(q, tmp, (size_t) n);
}

// Levels for x at scale d (0: the level nearest 0); returns the weighted squared error.
template <class G> float assign_scaled(const float * x, const float * w, int n, const G & g, float d, uint8_t * q) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
        q[i] = (uint8_t) g.code(x[i] * id);
        const float e = x[i] - d * g.level(q[i]);
        err += weight(w, i) * e * e;
    }
    return err;
}

// Levels for x at scale d, and the least-squares scale for those levels: *err is that
// scale's error, sum w x^2 - (sum w x l)^2 / sum w l^2 (one pass per candidate scale).
template <class G>
float assign_refit(const float * x, const float * w, int n, const G & g, float d, uint8_t * q, float * err) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float sxl = 0.0f, sll = 0.0f, sxx = 0.0f;
    for (int i = 0; i < n; ++i) {
        q[i] = (uint8_t) g.code(x[i] * id);
        const float l = g.level(q[i]), wi = weight(w, i);
        sxl += wi * x[i] * l;
        sll += wi * l * l;
        sxx += wi * x[i] * x[i];
    }
    if (!(sll > 0.0f)) {
        *err = sxx;
        return d;
    }
    *err = std::max(0.0f, sxx - sxl * sxl / sll);
    return sxl / sll;
}

// x ~ d * level(q): returns d (0 for an all-zero run), codes in q. Candidates put the value
// of largest magnitude near the lowest or the highest level, at 70% .. 110% of it; each is
// refit by least squares, the best is refined twice, and the levels re-picked for it.
template <class G> float fit_scale(const float * x, const float * w, int n, const G & g, uint8_t * q) {
    float vmax = 0.0f; // the value of largest magnitude, with its sign
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
    }
    if (vmax == 0.0f || !std::isfinite(vmax)) {
        assign_scaled(x, w, n, g, 0.0f, q);
        return 0.0f;
    }
    uint8_t tmp[32];
    float best_d = 0.0f, best_err = INFINITY;
    auto consider = [&](float d) {
        float err;
        d = assign_refit(x, w, n, g, d, tmp, &err);
        keep_better(err, d, tmp, n, &best_err, &best_d, q);
    };
    for (const float edge : {g.level(0), g.level(g.size() - 1)}) {
        for (int i = 0; i <= 16; ++i) consider(vmax / (edge * (0.7f + 0.025f * (float) i)));
    }
    for (int it = 0; it < 2; ++it) consider(best_d);
    assign_scaled(x, w, n, g, best_d, q);
    return best_d;
}

// ---- affine runs: x ~ d * q + m, q in [0, nmax] ------------------------------------------------

struct affine {
    float d, m;
};

float assign_affine(const float * x, const float * w, int n, affine a, int nmax, uint8_t * q) {
    const float id = a.d > 0.0f ? 1.0f / a.d : 0.0f;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
        q[i] = (uint8_t) nearest((x[i] - a.m) * id, 0, nmax);
        const float e = x[i] - (a.d * (float) q[i] + a.m);
        err += weight(w, i) * e * e;
    }
    return err;
}

// Weighted sums of a run for fixed levels q: what the least-squares (d, m) and the error of
// any (d, m) with those levels need, so a candidate costs one pass over the values.
struct level_sums {
    double s = 0, sq = 0, sqq = 0, sx = 0, sqx = 0, sxx = 0;
    // sum w (x - d q - m)^2
    double error(affine a) const {
        const double d = a.d, m = a.m;
        return sxx - 2 * d * sqx - 2 * m * sx + d * d * sqq + 2 * d * m * sq + m * m * s;
    }
};

// levels for a (as assign_affine) and their sums
level_sums assign_affine_sums(const float * x, const float * w, int n, affine a, int nmax, uint8_t * q) {
    const float id = a.d > 0.0f ? 1.0f / a.d : 0.0f;
    level_sums t;
    for (int i = 0; i < n; ++i) {
        q[i] = (uint8_t) nearest((x[i] - a.m) * id, 0, nmax);
        const double wi = weight(w, i), qi = q[i], xi = x[i];
        t.s += wi;
        t.sq += wi * qi;
        t.sqq += wi * qi * qi;
        t.sx += wi * xi;
        t.sqx += wi * qi * xi;
        t.sxx += wi * xi * xi;
    }
    return t;
}

// Weighted least squares (d, m) for the levels behind t; with nonpos_m the offset is kept <= 0.
affine refit_affine(const level_sums & t, affine a, bool nonpos_m) {
    if (t.s <= 0.0) return a;
    const double det = t.s * t.sqq - t.sq * t.sq;
    affine r = a;
    if (det > 1e-12 * t.s * t.sqq) {
        r.d = (float) ((t.s * t.sqx - t.sq * t.sx) / det);
        r.m = (float) ((t.sqq * t.sx - t.sq * t.sqx) / det);
    } else {
        r.m = (float) ((t.sx - a.d * t.sq) / t.s); // all q equal: only the offset is determined
    }
    if (nonpos_m && r.m > 0.0f) {
        r.m = 0.0f;
        r.d = t.sqq > 0.0 ? (float) (t.sqx / t.sqq) : a.d;
    }
    return r.d >= 0.0f ? r : a;
}

// Starts from the range [lo, hi] and from it cut by 10% at either end (outliers clipped for a
// finer step), each refined twice by "nearest levels, then least squares"; a candidate's error
// comes from its sums (its levels stay those of the step before, the next step can only do
// better). Four starts and two steps: the search of 25 x 3 lowered q4_K's error by 0.4% on
// normal data at 5x the time.
affine fit_affine(const float * x, const float * w, int n, int nmax, bool nonpos_m, uint8_t * q) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (nonpos_m) lo = std::min(lo, 0.0f);
    if (!(hi > lo) || !std::isfinite(hi - lo)) { // constant run (or not finite): q = 0
        const affine a = {0.0f, std::isfinite(lo) ? lo : 0.0f};
        assign_affine(x, w, n, a, nmax, q);
        return a;
    }
    uint8_t tmp[32];
    affine best = {(hi - lo) / (float) nmax, lo};
    float best_err = INFINITY;
    const float range = hi - lo;
    for (int i = 0; i < 4; ++i) {
        const float l = lo + 0.1f * (float) (i % 2) * range, h = hi - 0.1f * (float) (i / 2) * range;
        affine a = {(h - l) / (float) nmax, nonpos_m ? std::min(l, 0.0f) : l};
        for (int it = 0; it < 2; ++it) {
            const level_sums t = assign_affine_sums(x, w, n, a, nmax, tmp);
            a = refit_affine(t, a, nonpos_m);
            keep_better((float) t.error(a), a, tmp, n, &best_err, &best, q);
        }
    }
    return best;
}

// ---- super-block scales: sub-block scales as integer codes times one f16 scale -----------------

// Non-negative v[0..n) as codes in [0, maxcode] times the returned (f16-exact) scale.
float code_unsigned(const float * v, int n, int maxcode, uint8_t * codes) {
    float vmax = 0.0f;
    for (int i = 0; i < n; ++i) vmax = std::max(vmax, v[i]);
    const float d = f16_round(vmax / (float) maxcode);
    for (int i = 0; i < n; ++i) codes[i] = (uint8_t) (d > 0.0f ? nearest(v[i] / d, 0, maxcode) : 0);
    return d;
}

// Signed v[0..n) as codes in [lo, hi] (lo < 0 < hi, |lo| >= hi) times the returned scale:
// the value of largest magnitude maps to lo.
float code_signed(const float * v, int n, int lo, int hi, int * codes) {
    float vmax = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(v[i]) > std::fabs(vmax)) vmax = v[i];
    }
    const float d = f16_round(vmax / (float) lo);
    for (int i = 0; i < n; ++i) codes[i] = d != 0.0f ? nearest(v[i] / d, lo, hi) : 0;
    return d;
}

// ---- bit packing ------------------------------------------------------------------------------

// 32 codes as nibbles (element j low in byte j, j + 16 high) and, if qh, their 5th bits.
void pack32(const uint8_t * q, uint8_t * qs, uint8_t * qh) {
    uint32_t high = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = (uint8_t) ((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
    }
    for (int j = 0; j < 32; ++j) high |= (uint32_t) (q[j] >> 4 & 1) << j;
    if (qh) {
        for (int b = 0; b < 4; ++b) qh[b] = (uint8_t) (high >> (8 * b));
    }
}

// 256 2-bit codes in q2_K/q3_K order (value n: byte 32 (n / 128) + n % 32, bits 2 ((n % 128) / 32)).
void pack_2bit(const uint8_t * q, uint8_t * qs) {
    std::memset(qs, 0, 64);
    for (int n = 0; n < QK_K; ++n) qs[32 * (n / 128) + n % 32] |= (uint8_t) ((q[n] & 3) << (2 * ((n % 128) / 32)));
}


// q3_K's 12 bytes of 16 6-bit codes (scale + 32).
void pack_scales_q3_k(const int * sc, uint8_t * p) {
    std::memset(p, 0, 12);
    for (int j = 0; j < 16; ++j) {
        const int u = sc[j] + 32;
        p[j % 8] |= (uint8_t) ((u & 0x0F) << (j < 8 ? 0 : 4));
        p[8 + j % 4] |= (uint8_t) ((u >> 4) << (2 * (j / 4)));
    }
}

} // namespace

// ---- 32-value blocks ------------------------------------------------------------------------------

namespace {

// a fitted run with its scale (and offset) rounded to f16 as stored, levels re-picked for them
affine fit_affine_f16(const float * x, const float * w, int n, int nmax, uint8_t * q) {
    const affine a = fit_affine(x, w, n, nmax, false, q);
    const affine s = {f16_round(a.d), f16_round(a.m)};
    assign_affine(x, w, n, s, nmax, q);
    return s;
}
template <class G> float fit_scale_f16(const float * x, const float * w, int n, const G & g, uint8_t * q) {
    const float d = f16_round(fit_scale(x, w, n, g, q));
    assign_scaled(x, w, n, g, d, q);
    return d;
}

// ggml's rule for q4_1, q5_0 and q5_1 without an importance matrix (its from_float, what
// ggml's cpy and set_rows write, and ggml_quantize_chunk's unweighted path): the scale from the
// block's range, every value rounded half up to its level. Kept bit for bit so a ggml graph
// that converts to these types computes what ggml computes; with weights, a fit (below).
affine nearest_affine(const float * x, int nmax, uint8_t * q) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    const float d = (hi - lo) / (float) nmax, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i) q[i] = (uint8_t) std::min(nmax, (int) ((x[i] - lo) * id + 0.5f));
    return {d, lo};
}
float nearest_signed(const float * x, uint8_t * q) { // q5_0: the largest magnitude maps to -16
    float peak = 0.0f;
    for (int i = 0; i < 32; ++i) {
        if (std::fabs(x[i]) > std::fabs(peak)) peak = x[i];
    }
    const float d = peak / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i) q[i] = (uint8_t) std::min(31, (int) (x[i] * id + 16.5f));
    return d;
}

void block_q4_1_of(const float * x, const float * w, block_q4_1 * b) {
    uint8_t q[32];
    const affine a = w ? fit_affine_f16(x, w, 32, 15, q) : nearest_affine(x, 15, q);
    b->d = ggml_fp32_to_fp16(a.d);
    b->m = ggml_fp32_to_fp16(a.m);
    pack32(q, b->qs, nullptr);
}
void block_q5_1_of(const float * x, const float * w, block_q5_1 * b) {
    uint8_t q[32];
    const affine a = w ? fit_affine_f16(x, w, 32, 31, q) : nearest_affine(x, 31, q);
    b->d = ggml_fp32_to_fp16(a.d);
    b->m = ggml_fp32_to_fp16(a.m);
    pack32(q, b->qs, b->qh);
}
void block_q5_0_of(const float * x, const float * w, block_q5_0 * b) {
    uint8_t q[32];
    b->d = ggml_fp32_to_fp16(w ? fit_scale_f16(x, w, 32, int_grid{-16, 15}, q) : nearest_signed(x, q));
    pack32(q, b->qs, b->qh);
}
void block_iq4_nl_of(const float * x, const float * w, block_iq4_nl * b) {
    uint8_t q[32];
    b->d = ggml_fp32_to_fp16(fit_scale_f16(x, w, 32, nl_grid{}, q));
    pack32(q, b->qs, nullptr);
}

// ---- k-quants (256-value super-blocks) --------------------------------------------------------

const float * sub_weights(const float * w, int offset) { return w ? w + offset : nullptr; }

// Sub-blocks with a scale and a min each (q2_K, q4_K, q5_K): codes q in [0, nmax] per value,
// scale and min codes in [0, maxcode] per sub-block, the super-block's d and dmin.
struct affine_super {
    uint8_t q[QK_K], sc[16], mn[16];
    float d, dmin;
};
// levels for the coded scales and mins; the weighted squared error
float assign_affine_super(const float * x, const float * w, int sub, int nmax, affine_super * r) {
    float err = 0.0f;
    for (int j = 0; j < QK_K / sub; ++j) {
        const affine a = {r->d * (float) r->sc[j], -r->dmin * (float) r->mn[j]};
        err += assign_affine(x + sub * j, sub_weights(w, sub * j), sub, a, nmax, r->q + sub * j);
    }
    return err;
}

// d and dmin (f16-rounded) for fixed codes, x ~ d a - dmin b: least squares (the error
// orthogonal to a and b), or unbiased (the error orthogonal to x and b, so that dot
// products with vectors like x are not shrunk); false if degenerate.
bool refit_super(const float * x, const float * w, int sub, affine_super * r, bool unbiased = false) {
    double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0, sxx = 0;
    for (int i = 0; i < QK_K; ++i) {
        const double wi = weight(w, i), a = (double) r->sc[i / sub] * r->q[i], b = -(double) r->mn[i / sub];
        saa += wi * a * a; sab += wi * a * b; sbb += wi * b * b; sax += wi * a * x[i]; sbx += wi * b * x[i]; sxx += wi * x[i] * x[i];
    }
    // rows: [p q] [d dmin]' = s (first equation), [sab sbb] [d dmin]' = sbx
    const double p = unbiased ? sax : saa, q = unbiased ? sbx : sab, s = unbiased ? sxx : sax;
    if (sbb == 0.0) { // no mins in use: d alone
        if (p <= 0.0) return false;
        r->d = f16_round((float) (s / p));
        return r->d > 0.0f;
    }
    const double det = p * sbb - q * sab;
    if (!(std::fabs(det) > 1e-12 * std::fabs(p) * sbb)) return false;
    const float d = f16_round((float) ((sbb * s - q * sbx) / det)), dmin = f16_round((float) ((p * sbx - sab * s) / det));
    if (!(d > 0.0f) || !(dmin >= 0.0f)) return false;
    r->d = d;
    r->dmin = dmin;
    return true;
}

// Each sub-block's scale and min codes moved by -1..1 where that lowers its error.
void tune_codes(const float * x, const float * w, int sub, int nmax, int maxcode, affine_super * r) {
    uint8_t tmp[32];
    for (int j = 0; j < QK_K / sub; ++j) {
        const float * xj = x + sub * j, * wj = sub_weights(w, sub * j);
        int best_sc = r->sc[j], best_mn = r->mn[j];
        float best = INFINITY;
        for (int sc = std::max(0, r->sc[j] - 1); sc <= std::min(maxcode, r->sc[j] + 1); ++sc) {
            for (int mn = std::max(0, r->mn[j] - 1); mn <= std::min(maxcode, r->mn[j] + 1); ++mn) {
                const float e = assign_affine(xj, wj, sub, affine{r->d * (float) sc, -r->dmin * (float) mn}, nmax, tmp);
                if (e < best) { best = e; best_sc = sc; best_mn = mn; }
            }
        }
        r->sc[j] = (uint8_t) best_sc;
        r->mn[j] = (uint8_t) best_mn;
    }
}

void fit_affine_super(const float * x, const float * w, int sub, int nmax, int maxcode, bool unbiased, affine_super * r) {
    const int nsub = QK_K / sub;
    float scale[16], min[16];
    for (int j = 0; j < nsub; ++j) {
        const affine a = fit_affine(x + sub * j, sub_weights(w, sub * j), sub, nmax, true, r->q + sub * j);
        scale[j] = a.d;
        min[j] = -a.m;
    }
    r->d = code_unsigned(scale, nsub, maxcode, r->sc);
    r->dmin = code_unsigned(min, nsub, maxcode, r->mn);
    tune_codes(x, w, sub, nmax, maxcode, r);
    float err = assign_affine_super(x, w, sub, nmax, r);
    // the coded scales are off by up to half a code: refit d and dmin over the whole
    // super-block (x ~ d * (sc q) - dmin * mn, least squares) and re-pick the levels
    for (int it = 0; it < 2; ++it) {
        affine_super t = *r;
        if (!refit_super(x, w, sub, &t)) break;
        const float e = assign_affine_super(x, w, sub, nmax, &t);
        if (!(e < err)) break;
        err = e;
        *r = t;
    }
    affine_super t = *r;
    if (unbiased && refit_super(x, w, sub, &t, true)) {
        assign_affine_super(x, w, sub, nmax, &t);
        *r = t;
    }
}

// Sub-blocks with a signed scale each (q3_K, q6_K: 16 values; iq4_xs: 32): grid codes per
// value, scale codes in [lo, hi] per sub-block, the super-block's d.
struct scaled_super {
    uint8_t q[QK_K];
    int sc[16];
    float d;
};
template <class G> float assign_scaled_super(const float * x, const float * w, const G & g, int sub, scaled_super * r) {
    float err = 0.0f;
    for (int j = 0; j < QK_K / sub; ++j) {
        err += assign_scaled(x + sub * j, sub_weights(w, sub * j), sub, g, r->d * (float) r->sc[j], r->q + sub * j);
    }
    return err;
}

template <class G>
void fit_scaled_super(const float * x, const float * w, const G & g, int sub, int lo, int hi, scaled_super * r) {
    float scale[16];
    const int nsub = QK_K / sub;
    for (int j = 0; j < nsub; ++j) scale[j] = fit_scale(x + sub * j, sub_weights(w, sub * j), sub, g, r->q + sub * j);
    r->d = code_signed(scale, nsub, lo, hi, r->sc);
    float err = assign_scaled_super(x, w, g, sub, r);
    for (int it = 0; it < 2; ++it) { // as fit_affine_super: refit d for the coded scales
        double saa = 0, sax = 0;
        for (int i = 0; i < QK_K; ++i) {
            const double a = (double) r->sc[i / sub] * g.level(r->q[i]);
            saa += weight(w, i) * a * a;
            sax += weight(w, i) * a * x[i];
        }
        if (!(saa > 0.0)) break;
        scaled_super t = *r;
        t.d = f16_round((float) (sax / saa));
        const float e = assign_scaled_super(x, w, g, sub, &t);
        if (!(e < err)) break;
        err = e;
        *r = t;
    }
}

void block_q2_k_of(const float * x, const float * w, block_q2_K * b) {
    affine_super r;
    fit_affine_super(x, w, 16, 3, 15, true, &r); // unbiased: see the note at the top
    for (int j = 0; j < 16; ++j) b->scales[j] = (uint8_t) (r.sc[j] | r.mn[j] << 4);
    pack_2bit(r.q, b->qs);
    b->d = ggml_fp32_to_fp16(r.d);
    b->dmin = ggml_fp32_to_fp16(r.dmin);
}

void block_q3_k_of(const float * x, const float * w, block_q3_K * b) {
    scaled_super r;
    fit_scaled_super(x, w, int_grid{-4, 3}, 16, -32, 31, &r);
    pack_2bit(r.q, b->qs);
    std::memset(b->hmask, 0, sizeof b->hmask);
    for (int n = 0; n < QK_K; ++n) b->hmask[n % 32] |= (uint8_t) ((r.q[n] >> 2) << (n / 32));
    pack_scales_q3_k(r.sc, b->scales);
    b->d = ggml_fp32_to_fp16(r.d);
}

// q4_K/q5_K's d, dmin, scales and low nibbles (value 64 i + l low in byte 32 i + l, + 32 high)
template <class B> void pack_k4(const affine_super & r, B * b) {
    b->d = ggml_fp32_to_fp16(r.d);
    b->dmin = ggml_fp32_to_fp16(r.dmin);
    kvg::pack_scale_min_6bit(r.sc, r.mn, b->scales);
    for (int i = 0; i < 4; ++i) {
        for (int l = 0; l < 32; ++l) b->qs[32 * i + l] = (uint8_t) ((r.q[64 * i + l] & 0x0F) | (r.q[64 * i + 32 + l] & 0x0F) << 4);
    }
}

void block_q4_k_of(const float * x, const float * w, block_q4_K * b) {
    affine_super r;
    fit_affine_super(x, w, 32, 15, 63, false, &r);
    pack_k4(r, b);
}

void block_q5_k_of(const float * x, const float * w, block_q5_K * b) {
    affine_super r;
    fit_affine_super(x, w, 32, 31, 63, false, &r);
    pack_k4(r, b);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int n = 0; n < QK_K; ++n) b->qh[n % 32] |= (uint8_t) ((r.q[n] >> 4) << (n / 32));
}

void block_q6_k_of(const float * x, const float * w, block_q6_K * b) {
    scaled_super r;
    fit_scaled_super(x, w, int_grid{-32, 31}, 16, -128, 127, &r);
    for (int h = 0; h < 2; ++h) {
        const uint8_t * u = r.q + 128 * h;
        for (int l = 0; l < 64; ++l) b->ql[64 * h + l] = (uint8_t) ((u[l] & 0x0F) | (u[l + 64] & 0x0F) << 4);
        for (int l = 0; l < 32; ++l) {
            int bits = 0;
            for (int k = 0; k < 4; ++k) bits |= (u[32 * k + l] >> 4) << (2 * k);
            b->qh[32 * h + l] = (uint8_t) bits;
        }
    }
    for (int j = 0; j < 16; ++j) b->scales[j] = (int8_t) r.sc[j];
    b->d = ggml_fp32_to_fp16(r.d);
}

// iq4_xs: iq4_nl's levels, a signed 6-bit scale per 32 values (stored + 32)
void block_iq4_xs_of(const float * x, const float * w, block_iq4_xs * b) {
    scaled_super r;
    const nl_grid g{};
    fit_scaled_super(x, w, g, 32, -32, 31, &r);
    // each sub-block's scale code moved by one where that lowers its error (for the final d)
    uint8_t tmp[32];
    for (int j = 0; j < 8; ++j) {
        const float * xj = x + 32 * j;
        const float * wj = sub_weights(w, 32 * j);
        float best = assign_scaled(xj, wj, 32, g, r.d * (float) r.sc[j], r.q + 32 * j);
        const int sc0 = r.sc[j];
        for (const int sc : {sc0 - 1, sc0 + 1}) {
            if (sc < -32 || sc > 31) continue;
            const float e = assign_scaled(xj, wj, 32, g, r.d * (float) sc, tmp);
            if (e < best) {
                best = e;
                r.sc[j] = sc;
                std::memcpy(r.q + 32 * j, tmp, 32);
            }
        }
    }
    b->d = ggml_fp32_to_fp16(r.d);
    uint16_t high = 0;
    std::memset(b->scales_l, 0, sizeof b->scales_l);
    for (int j = 0; j < 8; ++j) {
        const int u = r.sc[j] + 32;
        b->scales_l[j / 2] |= (uint8_t) ((u & 0x0F) << (4 * (j % 2)));
        high |= (uint16_t) ((u >> 4) << (2 * j));
    }
    const uint8_t h[2] = {(uint8_t) high, (uint8_t) (high >> 8)}; // little-endian, as the file
    std::memcpy(&b->scales_h, h, 2);
    for (int j = 0; j < 8; ++j) pack32(r.q + 32 * j, b->qs + 16 * j, nullptr);
}

// Ternary types: values d * (t - 1), codes t in {0, 1, 2}. With the nonzero codes on the n
// largest magnitudes, the weighted least-squares d is sum w|x| / sum w over them and lowers the
// error by (sum w|x|)^2 / sum w: the best n gives d, then each code is the nearest for the f16 d
// (no worse than that n's). Exact for blocks that are ternary already; returns d.
float fit_ternary(const float * x, const float * w, uint8_t * t) {
    float mag[QK_K];
    int order[QK_K];
    for (int i = 0; i < QK_K; ++i) {
        mag[i] = std::fabs(x[i]) < INFINITY ? std::fabs(x[i]) : 0.0f; // NaN, inf: 0
        order[i] = i;
    }
    std::sort(order, order + QK_K, [&mag](int a, int b) { return mag[a] > mag[b]; });
    double swx = 0, sw = 0, best = 0, d = 0;
    for (int n = 0; n < QK_K; ++n) {
        swx += weight(w, order[n]) * mag[order[n]];
        sw += weight(w, order[n]);
        if (sw > 0 && swx * swx / sw > best) {
            best = swx * swx / sw;
            d = swx / sw;
        }
    }
    const float dh = f16_round((float) d);
    for (int i = 0; i < QK_K; ++i) t[i] = (uint8_t) (dh > 0.0f && mag[i] > 0.5f * dh ? (x[i] > 0.0f ? 2 : 0) : 1);
    return dh;
}

void block_tq2_0_of(const float * x, const float * w, block_tq2_0 * b) {
    uint8_t t[QK_K];
    b->d = ggml_fp32_to_fp16(fit_ternary(x, w, t));
    std::memset(b->qs, 0, sizeof b->qs);
    for (int n = 0; n < QK_K; ++n) b->qs[32 * (n / 128) + n % 32] |= (uint8_t) (t[n] << (2 * ((n % 128) / 32)));
}

// tq1_0's byte of trits t[0], t[stride], ... (count of them, then zeros up to 5; first most
// significant): the 5-trit number v as ceil(v * 256 / 243)
uint8_t tq1_byte(const uint8_t * t, int stride, int count) {
    int v = 0;
    for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? t[n * stride] : 0);
    return (uint8_t) ((v * 256 + 242) / 243);
}

void block_tq1_0_of(const float * x, const float * w, block_tq1_0 * b) {
    uint8_t t[QK_K];
    b->d = ggml_fp32_to_fp16(fit_ternary(x, w, t));
    for (int m = 0; m < 32; ++m) b->qs[m] = tq1_byte(t + m, 32, 5);
    for (int m = 0; m < 16; ++m) b->qs[32 + m] = tq1_byte(t + 160 + m, 16, 5);
    for (int j = 0; j < 4; ++j) b->qh[j] = tq1_byte(t + 240 + j, 4, 4);
}

template <class B, int BS, void (*F)(const float *, const float *, B *)>
void encode_rows(const float * x, void * y, int64_t k, const float * w) {
    GGML_ASSERT(k % BS == 0);
    B * blocks = (B *) y;
    for (int64_t i = 0; i < k / BS; ++i) F(x + i * BS, w ? w + i * BS : nullptr, blocks + i);
}

} // namespace

namespace kvg {

void encode_q4_1(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q4_1, 32, block_q4_1_of>(x, y, k, w); }
void encode_q5_0(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q5_0, 32, block_q5_0_of>(x, y, k, w); }
void encode_q5_1(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q5_1, 32, block_q5_1_of>(x, y, k, w); }
void encode_iq4_nl(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_iq4_nl, 32, block_iq4_nl_of>(x, y, k, w); }
void encode_iq4_xs(const float * x, void * y, int64_t k, const float * w) {
    encode_rows<block_iq4_xs, QK_K, block_iq4_xs_of>(x, y, k, w);
}
void encode_q2_K(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q2_K, QK_K, block_q2_k_of>(x, y, k, w); }
void encode_q3_K(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q3_K, QK_K, block_q3_k_of>(x, y, k, w); }
void encode_q4_K(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q4_K, QK_K, block_q4_k_of>(x, y, k, w); }
void encode_q5_K(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q5_K, QK_K, block_q5_k_of>(x, y, k, w); }
void encode_q6_K(const float * x, void * y, int64_t k, const float * w) { encode_rows<block_q6_K, QK_K, block_q6_k_of>(x, y, k, w); }
void encode_tq1_0(const float * x, void * y, int64_t k, const float * w) {
    encode_rows<block_tq1_0, QK_K, block_tq1_0_of>(x, y, k, w);
}
void encode_tq2_0(const float * x, void * y, int64_t k, const float * w) {
    encode_rows<block_tq2_0, QK_K, block_tq2_0_of>(x, y, k, w);
}

encode_fn weighted_encoder(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_1: return encode_q4_1;
        case GGML_TYPE_Q5_0: return encode_q5_0;
        case GGML_TYPE_Q5_1: return encode_q5_1;
        case GGML_TYPE_IQ4_NL: return encode_iq4_nl;
        case GGML_TYPE_IQ4_XS: return encode_iq4_xs;
        case GGML_TYPE_Q2_K: return encode_q2_K;
        case GGML_TYPE_Q3_K: return encode_q3_K;
        case GGML_TYPE_Q4_K: return encode_q4_K;
        case GGML_TYPE_Q5_K: return encode_q5_K;
        case GGML_TYPE_Q6_K: return encode_q6_K;
        case GGML_TYPE_TQ1_0: return encode_tq1_0;
        case GGML_TYPE_IQ2_XXS: return encode_iq2_xxs; // quants-iq2-encode.cpp
        case GGML_TYPE_IQ2_XS: return encode_iq2_xs;
        case GGML_TYPE_IQ2_S: return encode_iq2_s;
        case GGML_TYPE_IQ1_S: return encode_iq1_s;
        case GGML_TYPE_IQ1_M: return encode_iq1_m;
        case GGML_TYPE_TQ2_0: return encode_tq2_0;
        case GGML_TYPE_IQ3_XXS: return encode_iq3_xxs;
        case GGML_TYPE_IQ3_S: return encode_iq3_s;
        default: return nullptr;
    }
}

} // namespace kvg

// ---- ggml's quantization API ----------------------------------------------------------------------

// kvgraph's encoders keep no tables: init and free have nothing to do.
void ggml_quantize_init(enum ggml_type type) { GGML_UNUSED(type); }
void ggml_quantize_free(void) {}

bool ggml_quantize_requires_imatrix(enum ggml_type type) {
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S || type == GGML_TYPE_IQ1_M;
}

size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float * imatrix) {
    if ((int) type < 0 || (int) type >= GGML_TYPE_COUNT) GGML_ABORT("ggml_quantize_chunk: invalid type %d", (int) type);
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    if (ggml_quantize_requires_imatrix(type) && !imatrix) // as ggml (which asserts imatrix != NULL)
        GGML_ABORT("ggml_quantize_chunk: type %s requires an importance matrix (imatrix is NULL)",
                   ggml_type_name(type));
    const kvg::encode_fn weighted = kvg::weighted_encoder(type);
    if (!weighted && !tt->from_float_ref) GGML_ABORT("ggml_quantize_chunk: kvgraph cannot encode type %s", ggml_type_name(type));
    GGML_ASSERT(n_per_row > 0 && nrows >= 0 && start >= 0);
    if (n_per_row % tt->blck_size != 0 || start % n_per_row != 0) {
        GGML_ABORT("ggml_quantize_chunk: %s: n_per_row %lld must be a multiple of %lld and start %lld a multiple of n_per_row", ggml_type_name(type),
                   (long long) n_per_row, (long long) tt->blck_size, (long long) start);
    }
    const size_t row_size = ggml_row_size(type, n_per_row);
    char * out = (char *) dst + (size_t) (start / n_per_row) * row_size;
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + start + r * n_per_row;
        if (weighted) weighted(x, out + r * row_size, n_per_row, imatrix);
        else tt->from_float_ref(x, out + r * row_size, n_per_row);
    }
    return (size_t) nrows * row_size;
}
