// Reading llama.cpp's other weight formats: Q4_1, Q5_0, Q5_1, the k-quants Q2_K..Q6_K,
// IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0, bit-compatible with ggml's block layouts (little-endian, f16 scales). Only the
// decoding to f32 lives here (the encoders are in quants-encode.cpp); the loader widens
// such tensors to f32 when it loads them, so every kernel that takes f32 weights runs them
// (exactly the values the file encodes).
//
// Layouts (bytes, in order):
//   q4_1   d, m (f16) | 16 bytes of nibbles           32 values: d * q + m
//   q5_0   d (f16) | 4 bytes of 5th bits | 16 nibbles  32 values: d * (q - 16)
//   q5_1   d, m (f16) | 4 bytes of 5th bits | 16 nibbles      d * q + m
//   q2_K   16 scale/min bytes (4+4 bits) | 64 bytes of 2-bit quants | d, dmin (f16)
//   q3_K   32 bytes of high bits | 64 bytes of 2-bit quants | 12 bytes of 6-bit scales | d
//   q4_K   d, dmin | 12 bytes of 6-bit scales and mins | 128 bytes of nibbles
//   q5_K   d, dmin | 12 bytes of 6-bit scales and mins | 32 bytes of 5th bits | 128 nibbles
//   q6_K   128 bytes of low nibbles | 64 bytes of 2-bit highs | 16 int8 scales | d
//   iq4_nl d (f16) | 16 nibbles indexing a fixed non-linear table of 16 levels
//   iq4_xs d (f16) | 2 + 4 bytes of 6-bit sub-block scales | 128 nibbles into iq4_nl's table
//   tq2_0  64 bytes of 2-bit codes t | d                256 values: d * (t - 1)
//   tq1_0  48 bytes of 5 trits | 4 bytes of 4 trits | d 256 values: d * (t - 1)
// A k-quant super-block holds 256 values in sub-blocks of 16 (q2_K, q3_K, q6_K) or 32.
#include "ggml.h"
#include "quants-iq3.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// q4_K / q5_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in 12 bytes:
// sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7 in the
// nibbles of bytes 8..11 plus the top 2 bits of bytes 0..3 (scales) and 4..7 (mins). Also
// used by the r16 conversion (types.h).
void kvg::k4_scale_min(const uint8_t * p, int j, int * sc, int * mn) {
    if (j < 4) {
        *sc = p[j] & 63;
        *mn = p[j + 4] & 63;
    } else {
        *sc = (p[j + 4] & 0x0F) | (p[j - 4] >> 6) << 4;
        *mn = (p[j + 4] >> 4) | (p[j] >> 6) << 4;
    }
}

namespace {

float half_at(const uint8_t * p) {
    ggml_fp16_t h;
    std::memcpy(&h, p, sizeof h);
    return ggml_fp16_to_fp32(h);
}
uint32_t u32_at(const uint8_t * p) {
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

// q4_1 / q5_1 / q5_0 share one shape: 32 values from 16 nibble bytes, element j in the low
// nibble of byte j, element j + 16 in the high one, plus (q5) a 5th bit from a 32-bit mask.
void nibbles32(const uint8_t * qs, const uint8_t * qh, float d, float m, int offset, float * y) {
    const uint32_t high = qh ? u32_at(qh) : 0;
    for (int j = 0; j < 16; ++j) {
        const int lo = (qs[j] & 0x0F) | (int) ((high >> j) & 1) << 4;
        const int hi = (qs[j] >> 4) | (int) ((high >> (j + 16)) & 1) << 4;
        y[j] = d * (float) (lo - offset) + m;
        y[j + 16] = d * (float) (hi - offset) + m;
    }
}

void row_q4_1(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / 32; ++i, b += 20, y += 32) nibbles32(b + 4, nullptr, half_at(b), half_at(b + 2), 0, y);
}
void row_q5_0(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / 32; ++i, b += 22, y += 32) nibbles32(b + 6, b + 2, half_at(b), 0.0f, 16, y);
}
void row_q5_1(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / 32; ++i, b += 24, y += 32) nibbles32(b + 8, b + 4, half_at(b), half_at(b + 2), 0, y);
}

void row_iq4_nl(const void * x, float * y, int64_t k) {
    const int8_t * levels = kvg::iq4nl_levels;
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / 32; ++i, b += 18, y += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * levels[b[2 + j] & 0x0F];
            y[j + 16] = d * levels[b[2 + j] >> 4];
        }
    }
}

// iq4_xs: 8 runs of 32 values laid out as iq4_nl blocks, each scaled by d * (its scale)
void row_iq4_xs(const void * x, float * y, int64_t k) {
    const int8_t * levels = kvg::iq4nl_levels;
    const block_iq4_xs * b = (const block_iq4_xs *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = ggml_fp16_to_fp32(b->d);
        uint8_t sh[2];
        std::memcpy(sh, &b->scales_h, 2);
        for (int j = 0; j < 8; ++j, y += 32) {
            const float dj = d * (float) kvg::iq4xs_scale(sh, b->scales_l, j);
            const uint8_t * q = b->qs + 16 * j;
            for (int l = 0; l < 16; ++l) {
                y[l] = dj * levels[q[l] & 0x0F];
                y[l + 16] = dj * levels[q[l] >> 4];
            }
        }
    }
}

// tq2_0: each 32 bytes hold 128 values, 2 bits of every byte per run of 32
void row_tq2_0(const void * x, float * y, int64_t k) {
    const block_tq2_0 * b = (const block_tq2_0 *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = ggml_fp16_to_fp32(b->d);
        for (int n = 0; n < QK_K; ++n) {
            const int code = (b->qs[32 * (n / 128) + n % 32] >> (2 * ((n % 128) / 32))) & 3;
            *y++ = d * (float) (code - 1);
        }
    }
}

// tq1_0: runs of 32 (bytes 0..31), of 16 (bytes 32..47) and of 4 (qh), one trit of each byte per run
void row_tq1_0(const void * x, float * y, int64_t k) {
    const block_tq1_0 * b = (const block_tq1_0 *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = ggml_fp16_to_fp32(b->d);
        const auto runs = [&](const uint8_t * s, int width, int count) {
            for (int n = 0; n < count; ++n)
                for (int m = 0; m < width; ++m) *y++ = d * (float) (kvg::tq1_trit(s[m], n) - 1);
        };
        runs(b->qs, 32, 5);
        runs(b->qs + 32, 16, 5);
        runs(b->qh, 4, 4);
    }
}

// q2_K: each half (128 values) reads 32 quant bytes four times, 2 bits at a time; every
// 16 values have their own 4-bit scale (low) and 4-bit min (high).
void row_q2_k(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, b += 84) {
        const uint8_t * scales = b, * qs = b + 16;
        const float d = half_at(b + 80), dmin = half_at(b + 82);
        int s = 0;
        for (int half = 0; half < 2; ++half, qs += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * (scales[s] & 0x0F), ml = dmin * (scales[s] >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * (float) ((qs[part * 16 + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// q3_K: 16 signed 6-bit scales (minus 32): low 4 bits from bytes 0..7 (two per byte), high
// 2 bits from bytes 8..11 (four per byte).
void q3_k_scales(const uint8_t * p, int * out) {
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? p[j] & 0x0F : p[j - 8] >> 4;
        const int high = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (low | high << 4) - 32;
    }
}

void row_q3_k(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, b += 110) {
        const uint8_t * hmask = b, * qs = b + 32;
        int sc[16];
        q3_k_scales(b + 96, sc);
        const float d = half_at(b + 108);
        int s = 0;
        uint8_t bit = 1;
        for (int half = 0; half < 2; ++half, qs += 32) {
            for (int shift = 0; shift < 8; shift += 2, bit <<= 1) {
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * (float) sc[s];
                    for (int l = 0; l < 16; ++l) {
                        const int idx = part * 16 + l;
                        const int q = ((qs[idx] >> shift) & 3) - ((hmask[idx] & bit) ? 0 : 4);
                        *y++ = dl * (float) q;
                    }
                }
            }
        }
    }
}

// Shared by q4_K (qh == NULL) and q5_K: 64 values per step, low nibbles then high nibbles.
void k4_block(const uint8_t * b, const uint8_t * qh, const uint8_t * qs, float * y) {
    const float d = half_at(b), dmin = half_at(b + 2);
    for (int step = 0; step < 4; ++step, qs += 32) {
        int sc0, m0, sc1, m1;
        kvg::k4_scale_min(b + 4, 2 * step, &sc0, &m0);
        kvg::k4_scale_min(b + 4, 2 * step + 1, &sc1, &m1);
        for (int l = 0; l < 32; ++l) {
            const int h0 = qh ? ((qh[l] >> (2 * step)) & 1) << 4 : 0;
            const int h1 = qh ? ((qh[l] >> (2 * step + 1)) & 1) << 4 : 0;
            y[l] = d * sc0 * (float) ((qs[l] & 0x0F) | h0) - dmin * m0;
            y[32 + l] = d * sc1 * (float) ((qs[l] >> 4) | h1) - dmin * m1;
        }
        y += 64;
    }
}

void row_q4_k(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, b += 144, y += QK_K) k4_block(b, nullptr, b + 16, y);
}
void row_q5_k(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, b += 176, y += QK_K) k4_block(b, b + 16, b + 48, y);
}

// q6_K: per half of 128 values, 64 low-nibble bytes and 32 bytes of 2-bit highs give four
// runs of 32 values; every 16 values have an int8 scale.
void row_q6_k(const void * x, float * y, int64_t k) {
    const uint8_t * b = (const uint8_t *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, b += 210) {
        const uint8_t * ql = b, * qh = b + 128;
        const int8_t * sc = (const int8_t *) (b + 192);
        const float d = half_at(b + 208);
        for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
            for (int l = 0; l < 32; ++l) {
                const int s = l / 16;
                const int q1 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[s] * (float) q1;
                y[l + 32] = d * sc[s + 2] * (float) q2;
                y[l + 64] = d * sc[s + 4] * (float) q3;
                y[l + 96] = d * sc[s + 6] * (float) q4;
            }
        }
    }
}

} // namespace

// Nearest int8 grid with the scale set by the largest magnitude (0 for an all-zero block).
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        y[i].d = d;
        for (int j = 0; j < QK_K; ++j) y[i].qs[j] = (int8_t) std::max(-127.0f, std::min(127.0f, std::nearbyint(x[j] * id)));
        for (int s = 0; s < QK_K / 16; ++s) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * s + j];
            y[i].bsums[s] = (int16_t) sum;
        }
    }
}
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; ++i) {
        for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * (float) x[i].qs[j];
    }
}

namespace {
void row_q8_k(const void * x, float * y, int64_t k) { dequantize_row_q8_K((const block_q8_K *) x, y, k); }
void q8_k_from_float(const float * x, void * y, int64_t k) { quantize_row_q8_K_ref(x, (block_q8_K *) y, k); }
} // namespace

namespace kvg {

const block_type_info * extra_block_types(int * n) {
    static const block_type_info types[] = {
        {GGML_TYPE_Q4_1, "q4_1", 32, 20, row_q4_1, encode_unweighted<encode_q4_1>},
        {GGML_TYPE_Q5_0, "q5_0", 32, 22, row_q5_0, encode_unweighted<encode_q5_0>},
        {GGML_TYPE_Q5_1, "q5_1", 32, 24, row_q5_1, encode_unweighted<encode_q5_1>},
        {GGML_TYPE_Q2_K, "q2_K", QK_K, 84, row_q2_k, encode_unweighted<encode_q2_K>},
        {GGML_TYPE_Q3_K, "q3_K", QK_K, 110, row_q3_k, encode_unweighted<encode_q3_K>},
        {GGML_TYPE_Q4_K, "q4_K", QK_K, 144, row_q4_k, encode_unweighted<encode_q4_K>},
        {GGML_TYPE_Q5_K, "q5_K", QK_K, 176, row_q5_k, encode_unweighted<encode_q5_K>},
        {GGML_TYPE_Q6_K, "q6_K", QK_K, 210, row_q6_k, encode_unweighted<encode_q6_K>},
        {GGML_TYPE_IQ4_NL, "iq4_nl", 32, 18, row_iq4_nl, encode_unweighted<encode_iq4_nl>},
        {GGML_TYPE_IQ4_XS, "iq4_xs", QK_K, 136, row_iq4_xs, encode_unweighted<encode_iq4_xs>},
        {GGML_TYPE_TQ1_0, "tq1_0", QK_K, 54, row_tq1_0, encode_unweighted<encode_tq1_0>},
        {GGML_TYPE_TQ2_0, "tq2_0", QK_K, 66, row_tq2_0, encode_unweighted<encode_tq2_0>},
        {GGML_TYPE_IQ3_XXS, "iq3_xxs", QK_K, 98, row_iq3_xxs, encode_unweighted<encode_iq3_xxs>},
        {GGML_TYPE_IQ3_S, "iq3_s", QK_K, 110, row_iq3_s, encode_unweighted<encode_iq3_s>},
        {GGML_TYPE_Q8_K, "q8_K", QK_K, 292, row_q8_k, q8_k_from_float},
    };
    *n = (int) (sizeof(types) / sizeof(types[0]));
    return types;
}

} // namespace kvg
