// Type traits, fp16/bf16 conversion and the GGUF block formats Q8_0 and Q4_0.
#include "types.h"
#include "quants-iq2.h"

#include <cmath>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <cstddef>
#include <cstring>
#include <utility>

// ---- fp16 / bf16 (IEEE half, bfloat16 = top half of a float) -----------------------------
static inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

float ggml_fp16_to_fp32(ggml_fp16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        // zero or subnormal: value = mant * 2^-24
        const float v = (float) mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13)); // inf / nan
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

ggml_fp16_t ggml_fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000) return (ggml_fp16_t) (sign | 0x7e00); // nan
    if (absx >= 0x477ff000) return (ggml_fp16_t) (sign | 0x7c00); // rounds to inf
    if (absx < 0x38800000) {
        // subnormal half: round-to-nearest-even of absx * 2^24
        const float v = bits_f32(absx) * 16777216.0f;
        const float r = std::nearbyint(v); // default rounding mode is to-nearest-even
        return (ggml_fp16_t) (sign | (uint32_t) r);
    }
    // normal: rebias the exponent, round mantissa to 10 bits (nearest even)
    uint32_t m = absx + 0xc8000fff + ((absx >> 13) & 1); // -(112<<23) + rounding bias
    return (ggml_fp16_t) (sign | (m >> 13));
}

void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_fp16_to_fp32(x[i]);
}
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_fp32_to_fp16(x[i]);
}

ggml_bf16_t ggml_fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    ggml_bf16_t h;
    if ((u & 0x7fffffff) > 0x7f800000) { h.bits = (uint16_t) ((u >> 16) | 64); return h; } // quiet nan
    h.bits = (uint16_t) ((u + (0x7fff + ((u >> 16) & 1))) >> 16); // nearest even
    return h;
}
float ggml_bf16_to_fp32(ggml_bf16_t h) { return bits_f32((uint32_t) h.bits << 16); }
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_bf16_to_fp32(x[i]);
}
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ggml_fp32_to_bf16(x[i]);
}

// ---- Q8_0: d = max|x|/127, q = round(x/d) ----------------------------------------------------
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        const float * xb = x + b * QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ggml_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = (int8_t) std::lround(xb[j] * id);
    }
}
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        const float d = ggml_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_0; ++j) y[b * QK8_0 + j] = x[b].qs[j] * d;
    }
}

// ---- Q4_0: d = (value of largest magnitude)/-8, q = x/d + 8 in [0,15]; value = (q-8)*d ---------
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k) {
    GGML_ASSERT(k % QK4_0 == 0);
    for (int64_t b = 0; b < k / QK4_0; ++b) {
        const float * xb = x + b * QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; ++j) {
            if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); max = xb[j]; }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ggml_fp32_to_fp16(d);
        // low nibbles hold elements 0..15, high nibbles 16..31
        // clamped as floats before the cast: a NaN/inf block (inf * 0 = NaN) must not reach
        // an undefined float-to-int conversion; it becomes nibble 0
        auto nibble = [&](float x) {
            const float v = x * id + 8.5f;
            return v >= 15.0f ? 15 : v >= 0.0f ? (int) v : 0;
        };
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const int q0 = nibble(xb[j]);
            const int q1 = nibble(xb[j + QK4_0 / 2]);
            y[b].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k) {
    for (int64_t b = 0; b < k / QK4_0; ++b) {
        const float d = ggml_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[b * QK4_0 + j] = ((x[b].qs[j] & 0x0f) - 8) * d;
            y[b * QK4_0 + j + QK4_0 / 2] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

// ---- traits table ---------------------------------------------------------------------------
static void f32_to_float(const void * x, float * y, int64_t k) { std::memcpy(y, x, k * sizeof(float)); }
static void f32_from_float(const float * x, void * y, int64_t k) { std::memcpy(y, x, k * sizeof(float)); }
static void f16_to_float(const void * x, float * y, int64_t k) { ggml_fp16_to_fp32_row((const ggml_fp16_t *) x, y, k); }
static void f16_from_float(const float * x, void * y, int64_t k) { ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, k); }
static void bf16_to_float(const void * x, float * y, int64_t k) { ggml_bf16_to_fp32_row((const ggml_bf16_t *) x, y, k); }
static void bf16_from_float(const float * x, void * y, int64_t k) { ggml_fp32_to_bf16_row(x, (ggml_bf16_t *) y, k); }
static void q8_0_to_float(const void * x, float * y, int64_t k) { dequantize_row_q8_0((const block_q8_0 *) x, y, k); }
static void q8_0_from_float(const float * x, void * y, int64_t k) { quantize_row_q8_0_ref(x, (block_q8_0 *) y, k); }
static void q4_0_to_float(const void * x, float * y, int64_t k) { dequantize_row_q4_0((const block_q4_0 *) x, y, k); }
static void q4_0_from_float(const float * x, void * y, int64_t k) { quantize_row_q4_0_ref(x, (block_q4_0 *) y, k); }

static ggml_type_traits g_traits[kvg::TYPE_COUNT];
static bool g_named_only[kvg::TYPE_COUNT]; // sized for tensors, not read or computed
// The names come from init_traits (named_only, the entries below it, extra_block_types): a
// ggml_type added to the enum must be named there too, and this count updated.
static_assert(GGML_TYPE_COUNT == 43 && kvg::TYPE_COUNT == 49, "ggml_type changed: name the new types in init_traits");

static bool init_traits() {
    for (auto & t : g_traits) t = {"unsupported", 0, 0, 0, false, nullptr, nullptr};
    // ggml's formats that kvgraph neither reads nor encodes: ggml's block and byte sizes (so
    // tensors of them can be made and copied as bytes), no conversions
    struct named_type {
        ggml_type type;
        const char * name;
        int64_t blck;
        size_t size;
    };
    static const named_type named_only[] = {
        {GGML_TYPE_Q8_1, "q8_1", 32, 36},      {GGML_TYPE_IQ2_XXS, "iq2_xxs", 256, 66},
        {GGML_TYPE_IQ2_XS, "iq2_xs", 256, 74}, {GGML_TYPE_IQ1_S, "iq1_s", 256, 50},
        {GGML_TYPE_IQ2_S, "iq2_s", 256, 82},   {GGML_TYPE_F64, "f64", 1, 8},
        {GGML_TYPE_IQ1_M, "iq1_m", 256, 56},   {GGML_TYPE_MXFP4, "mxfp4", 32, 17},
        {GGML_TYPE_NVFP4, "nvfp4", 64, 36},    {GGML_TYPE_Q1_0, "q1_0", 128, 18},
        {GGML_TYPE_Q2_0, "q2_0", 64, 18},
    };
    for (const named_type & n : named_only) {
        g_traits[n.type] = {n.name, n.blck, 0, n.size, n.type != GGML_TYPE_F64, nullptr, nullptr};
        g_named_only[n.type] = true;
    }
    // as ggml: no to_float for f32 (programs written for ggml skip f32 on it); kvg::row_decoder has one
    g_traits[GGML_TYPE_F32]  = {"f32", 1, 0, sizeof(float), false, nullptr, f32_from_float};
    g_traits[GGML_TYPE_F16]  = {"f16", 1, 0, sizeof(ggml_fp16_t), false, f16_to_float, f16_from_float};
    g_traits[GGML_TYPE_BF16] = {"bf16", 1, 0, sizeof(ggml_bf16_t), false, bf16_to_float, bf16_from_float};
    g_traits[GGML_TYPE_Q8_0] = {"q8_0", QK8_0, 0, sizeof(block_q8_0), true, q8_0_to_float, q8_0_from_float};
    g_traits[GGML_TYPE_Q4_0] = {"q4_0", QK4_0, 0, sizeof(block_q4_0), true, q4_0_to_float, q4_0_from_float};
    // no row conversions: a row is spread over its group of 16 (types.h)
    g_traits[GGML_TYPE_Q4_0_R16] = {"q4_0_r16", QK4_0, 0, sizeof(block_q4_0), true, nullptr, nullptr};
    g_traits[GGML_TYPE_Q8_0_R16] = {"q8_0_r16", QK8_0, 0, sizeof(block_q8_0), true, nullptr, nullptr};
    g_traits[GGML_TYPE_Q4_K_R16] = {"q4_K_r16", QK_K, 0, sizeof(block_q4_K), true, nullptr, nullptr};
    g_traits[GGML_TYPE_Q6_K_R16] = {"q6_K_r16", QK_K, 0, sizeof(block_q6_K), true, nullptr, nullptr};
    g_traits[GGML_TYPE_IQ4_NL_R16] = {"iq4_nl_r16", 32, 0, sizeof(block_iq4_nl), true, nullptr, nullptr};
    g_traits[GGML_TYPE_Q5_0_R16] = {"q5_0_r16", 32, 0, sizeof(block_q5_0), true, nullptr, nullptr};
    g_traits[GGML_TYPE_I8]   = {"i8", 1, 0, 1, false, nullptr, nullptr};
    g_traits[GGML_TYPE_I16]  = {"i16", 1, 0, 2, false, nullptr, nullptr};
    g_traits[GGML_TYPE_I32]  = {"i32", 1, 0, 4, false, nullptr, nullptr};
    g_traits[GGML_TYPE_I64]  = {"i64", 1, 0, 8, false, nullptr, nullptr};
    // read (and maybe encoded) types: not named only
    const auto add = [](const kvg::block_type_info * ex, int n) {
        for (int i = 0; i < n; ++i) {
            g_traits[ex[i].type] = {ex[i].name,     ex[i].blck_size, 0, ex[i].type_size, true,
                                    ex[i].to_float, ex[i].from_float};
            g_named_only[ex[i].type] = false;
        }
    };
    int n = 0;
    const kvg::block_type_info * ex = kvg::extra_block_types(&n);
    add(ex, n);
    ex = kvg::iq2_block_types(&n); // iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m (quants-iq2.cpp)
    add(ex, n);
    return true;
}
static const bool g_traits_ready = init_traits();

const ggml_type_traits * ggml_get_type_traits(enum ggml_type type) {
    (void) g_traits_ready;
    GGML_ASSERT(type >= 0 && type < kvg::TYPE_COUNT);
    return &g_traits[type];
}

// 4 x 4 matrix of 32-bit words transposed: out word i of t[j] = in word j of s[i].
namespace {
#ifdef __SSE2__
void transpose_words(const uint8_t * const s[4], uint8_t * const t[4]) {
    const __m128i a0 = _mm_loadu_si128((const __m128i *) s[0]), a1 = _mm_loadu_si128((const __m128i *) s[1]);
    const __m128i a2 = _mm_loadu_si128((const __m128i *) s[2]), a3 = _mm_loadu_si128((const __m128i *) s[3]);
    const __m128i lo01 = _mm_unpacklo_epi32(a0, a1), lo23 = _mm_unpacklo_epi32(a2, a3);
    const __m128i hi01 = _mm_unpackhi_epi32(a0, a1), hi23 = _mm_unpackhi_epi32(a2, a3);
    _mm_storeu_si128((__m128i *) t[0], _mm_unpacklo_epi64(lo01, lo23));
    _mm_storeu_si128((__m128i *) t[1], _mm_unpackhi_epi64(lo01, lo23));
    _mm_storeu_si128((__m128i *) t[2], _mm_unpacklo_epi64(hi01, hi23));
    _mm_storeu_si128((__m128i *) t[3], _mm_unpackhi_epi64(hi01, hi23));
}
#else
void transpose_words(const uint8_t * const s[4], uint8_t * const t[4]) {
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) std::memcpy(t[j] + 4 * i, s[i] + 4 * j, 4);
}
#endif
} // namespace

namespace {
template <bool PACK> void copy_to(uint8_t * group_at, uint8_t * blk_at, size_t n) {
    if (PACK) std::memcpy(group_at, blk_at, n);
    else std::memcpy(blk_at, group_at, n);
}

// Where a plain block keeps its quants (the bytes transposed as words), and how many.
struct r16_quants {
    size_t at, bytes;
};
r16_quants quants_of(ggml_type plain) {
    switch (plain) {
        case GGML_TYPE_Q4_K: return {4 + 12, QK_K / 2};
        case GGML_TYPE_Q6_K: return {0, QK_K / 2 + QK_K / 4};
        case GGML_TYPE_Q5_0: return {offsetof(block_q5_0, qs), QK8_0 / 2};
        default: return {2, ggml_type_size(plain) - 2};
    }
}
// The group word that holds a row's quant word w (types.h: q6_K's in reading order).
size_t word_pos(ggml_type plain, size_t w) {
    if (plain != GGML_TYPE_Q6_K) return w;
    if (w >= 32) return 24 * ((w - 32) / 8) + 3 * ((w - 32) % 8);  // qh
    return 24 * (w / 16) + 3 * (w % 8) + 1 + (w % 16) / 8;           // ql
}

// q5_0's 5th bits (bit v: value v) <-> q5_0_r16's order (types.h). Within each 16-bit half,
// a 4 x 4 bit transposition (bit 4j + i <-> 4i + j, its own inverse) makes nibble i hold the
// bits of values 4j + i; spread_nibbles moves nibble i of 16 bits to the low half of byte i.
uint32_t transpose_4x4_bits(uint32_t x) {
    uint32_t t = (x ^ (x >> 3)) & 0x0A0A0A0Au;
    x ^= t ^ (t << 3);
    t = (x ^ (x >> 6)) & 0x00CC00CCu;
    return x ^ t ^ (t << 6);
}
uint32_t spread_nibbles(uint32_t x) {
    x = (x & 0xFFu) | (x & 0xFF00u) << 8;
    return (x & 0x000F000Fu) | (x & 0x00F000F0u) << 4;
}
uint32_t gather_nibbles(uint32_t x) {
    x = (x & 0x000F000Fu) | (x >> 4 & 0x00F000F0u);
    return (x & 0xFFu) | (x >> 8 & 0xFF00u);
}
template <bool PACK> void q5_fifth_bits(uint8_t * group_at, uint8_t * blk_at) {
    uint32_t v;
    std::memcpy(&v, PACK ? blk_at : group_at, 4);
    if (PACK) {
        const uint32_t t = transpose_4x4_bits(v);
        v = spread_nibbles(t & 0xFFFFu) << 4 | spread_nibbles(t >> 16);
    } else {
        v = transpose_4x4_bits(gather_nibbles(v >> 4 & 0x0F0F0F0Fu) | gather_nibbles(v & 0x0F0F0F0Fu) << 16);
    }
    std::memcpy(PACK ? group_at : blk_at, &v, 4);
}

// Row r's other bytes (q4_0, q8_0: d; q5_0: d, qh; q4_K: d, dmin, scales; q6_K: scales, d) <-> their
// places in the group's block (types.h).
template <bool PACK>
void r16_head(ggml_type plain, uint8_t * group, uint8_t * blk, int r) {
    if (plain == GGML_TYPE_Q6_K) {
        copy_to<PACK>(group + 2 * r, blk + offsetof(block_q6_K, d), 2);
        for (int i = 0; i < 16; ++i) copy_to<PACK>(group + 32 + 16 * i + r, blk + offsetof(block_q6_K, scales) + i, 1);
        return;
    }
    if (plain == GGML_TYPE_Q5_0) q5_fifth_bits<PACK>(group + 32 + 4 * r, blk + offsetof(block_q5_0, qh));
    const bool k4 = plain == GGML_TYPE_Q4_K;
    for (int i = 0; i < (k4 ? 2 : 1); ++i) copy_to<PACK>(group + 32 * i + 2 * r, blk + 2 * i, 2); // f16 scales
}

#ifdef __SSE2__
// 16 x 16 bytes transposed: four perfect shuffles (v[i] with v[i + 8], byte-interleaved).
void transpose_bytes(__m128i v[16]) {
    for (int round = 0; round < 4; ++round) {
        __m128i o[16];
        for (int i = 0; i < 8; ++i) {
            o[2 * i] = _mm_unpacklo_epi8(v[i], v[i + 8]);
            o[2 * i + 1] = _mm_unpackhi_epi8(v[i], v[i + 8]);
        }
        for (int i = 0; i < 16; ++i) v[i] = o[i];
    }
}
// bytes shifted right / left by n, with SSE2's 16-bit shifts
template <int N> __m128i srl8(__m128i x) { return _mm_and_si128(_mm_srli_epi16(x, N), _mm_set1_epi8((char) (0xFF >> N))); }
template <int N> __m128i sll8(__m128i x) { return _mm_and_si128(_mm_slli_epi16(x, N), _mm_set1_epi8((char) ((0xFF << N) & 0xFF))); }
#endif

// The 16 rows' q4_K scales and mins (ggml's 12 bytes at blk[r]) <-> the group's sc[12][16] at
// col, all rows at once where SSE2 is there (the row-at-a-time form was ~10% of a pp128
// product over unpacked rows).
template <bool PACK>
void q4k_scales_16(uint8_t * col, uint8_t * const blk[16]) {
#ifdef __SSE2__
    const __m128i m63 = _mm_set1_epi8(63), m15 = _mm_set1_epi8(15), m3 = _mm_set1_epi8(3);
    __m128i v[16], sc[8], mn[8];
    if (PACK) {
        for (int r = 0; r < 16; ++r) v[r] = _mm_loadu_si128((const __m128i *) blk[r]); // bytes 12-15: quants, unused
        transpose_bytes(v); // v[i]: byte i of the 16 rows
        for (int j = 0; j < 4; ++j) {
            sc[j] = _mm_and_si128(v[j], m63);
            mn[j] = _mm_and_si128(v[j + 4], m63);
            sc[j + 4] = _mm_or_si128(_mm_and_si128(v[j + 8], m15), sll8<4>(srl8<6>(v[j])));
            mn[j + 4] = _mm_or_si128(srl8<4>(v[j + 8]), sll8<4>(srl8<6>(v[j + 4])));
        }
        for (int j = 0; j < 8; ++j) _mm_storeu_si128((__m128i *) (col + 16 * j), _mm_or_si128(sc[j], sll8<6>(_mm_and_si128(mn[j], m3))));
        for (int i = 0; i < 4; ++i) {
            const __m128i b = _mm_or_si128(srl8<2>(mn[2 * i]), sll8<4>(srl8<2>(mn[2 * i + 1])));
            _mm_storeu_si128((__m128i *) (col + 16 * (8 + i)), b);
        }
        return;
    }
    for (int j = 0; j < 8; ++j) {
        const __m128i b = _mm_loadu_si128((const __m128i *) (col + 16 * j));
        __m128i hi = _mm_loadu_si128((const __m128i *) (col + 16 * (8 + j / 2)));
        if (j % 2) hi = srl8<4>(hi);
        sc[j] = _mm_and_si128(b, m63);
        mn[j] = _mm_or_si128(srl8<6>(b), sll8<2>(_mm_and_si128(hi, m15)));
    }
    for (int j = 0; j < 4; ++j) {
        v[j] = _mm_or_si128(sc[j], sll8<6>(srl8<4>(sc[j + 4])));
        v[j + 4] = _mm_or_si128(mn[j], sll8<6>(srl8<4>(mn[j + 4])));
        v[j + 8] = _mm_or_si128(_mm_and_si128(sc[j + 4], m15), sll8<4>(mn[j + 4]));
        v[j + 12] = _mm_setzero_si128();
    }
    transpose_bytes(v); // v[r]: row r's 12 bytes
    for (int r = 0; r < 16; ++r) {
        _mm_storel_epi64((__m128i *) blk[r], v[r]);
        const int last = _mm_cvtsi128_si32(_mm_srli_si128(v[r], 8));
        std::memcpy(blk[r] + 8, &last, 4);
    }
#else
    for (int r = 0; r < 16; ++r) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) {
            if (PACK) {
                int s, m;
                kvg::k4_scale_min(blk[r], j, &s, &m);
                sc[j] = (uint8_t) s, mn[j] = (uint8_t) m;
            } else {
                sc[j] = col[16 * j + r] & 63;
                mn[j] = (uint8_t) (col[16 * j + r] >> 6 | ((col[16 * (8 + j / 2) + r] >> (4 * (j % 2))) & 0x0F) << 2);
            }
        }
        if (!PACK) {
            kvg::pack_scale_min_6bit(sc, mn, blk[r]);
            continue;
        }
        for (int j = 0; j < 8; ++j) col[16 * j + r] = (uint8_t) (sc[j] | (mn[j] & 3) << 6);
        for (int i = 0; i < 4; ++i) col[16 * (8 + i) + r] = (uint8_t) (mn[2 * i] >> 2 | (mn[2 * i + 1] >> 2) << 4);
    }
#endif
}

// Block b of 16 rows <-> block b of a group: per 4 rows and 16 bytes of quants, one
// transposition of 4 x 4 words (its own inverse).
template <bool PACK>
void r16_convert(ggml_type plain, uint8_t * group, uint8_t * rows, size_t row_stride, int64_t k) {
    const size_t bb = ggml_type_size(plain);
    const r16_quants qs = quants_of(plain);
    const size_t chunks = qs.bytes / 16, group_head = kvg::R16_ROWS * (bb - qs.bytes); // bytes before the group's quants
    for (int64_t b = 0; b < k / ggml_blck_size(plain); ++b, group += kvg::R16_ROWS * bb) {
        if (plain == GGML_TYPE_Q4_K) {
            uint8_t * scales[16];
            for (int r = 0; r < 16; ++r) scales[r] = rows + r * row_stride + b * bb + 4;
            q4k_scales_16<PACK>(group + 64, scales);
        }
        for (int r0 = 0; r0 < kvg::R16_ROWS; r0 += 4) {
            uint8_t * blk[4];
            for (int i = 0; i < 4; ++i) {
                blk[i] = rows + (r0 + i) * row_stride + b * bb;
                r16_head<PACK>(plain, group, blk[i], r0 + i);
            }
            for (size_t c = 0; c < chunks; ++c) {
                uint8_t * q[4] = {blk[0] + qs.at + 16 * c, blk[1] + qs.at + 16 * c, blk[2] + qs.at + 16 * c, blk[3] + qs.at + 16 * c};
                uint8_t * g[4];
                for (int j = 0; j < 4; ++j) g[j] = group + group_head + 64 * word_pos(plain, 4 * c + j) + 4 * r0;
                if (PACK) transpose_words(q, g);
                else transpose_words(g, q);
            }
        }
    }
}
} // namespace

size_t kvg::r16_block_bytes(ggml_type t) { return R16_ROWS * ggml_type_size(r16_plain(t)); }

void kvg::r16_pack(ggml_type plain, const void * rows, size_t row_stride, void * group, int64_t k) {
    r16_convert<true>(plain, (uint8_t *) group, (uint8_t *) const_cast<void *>(rows), row_stride, k);
}

void kvg::r16_unpack(ggml_type plain, const void * group, void * rows, size_t row_stride, int64_t k) {
    r16_convert<false>(plain, (uint8_t *) const_cast<void *>(group), (uint8_t *) rows, row_stride, k);
}

ggml_to_float_t kvg::row_decoder(enum ggml_type type) {
    return type == GGML_TYPE_F32 ? f32_to_float : ggml_get_type_traits(type)->to_float;
}

bool ggml_type_is_supported(enum ggml_type type) {
    return type >= 0 && type < kvg::TYPE_COUNT && g_traits[type].blck_size > 0 && !g_named_only[type];
}
int64_t ggml_blck_size(enum ggml_type type) { return ggml_get_type_traits(type)->blck_size; }
size_t ggml_type_size(enum ggml_type type) { return ggml_get_type_traits(type)->type_size; }
// Tensor sizes read the table directly: the planner and the schedule call them per access.
size_t ggml_nbytes(const ggml_tensor * t) {
    // straight-line: planners and the access model ask for it several times per node
    const int64_t * ne = t->ne;
    if ((ne[0] <= 0) | (ne[1] <= 0) | (ne[2] <= 0) | (ne[3] <= 0)) return 0;
    const size_t * nb = t->nb;
    const size_t rest = (ne[1] - 1) * nb[1] + (ne[2] - 1) * nb[2] + (ne[3] - 1) * nb[3];
    const int64_t blck = g_traits[t->type].blck_size;
    if (blck == 1) return g_traits[t->type].type_size + (ne[0] - 1) * nb[0] + rest;
    return ne[0] * nb[0] / blck + rest;
}
bool ggml_is_contiguous(const ggml_tensor * t) {
    size_t next = g_traits[t->type].type_size;
    if (t->ne[0] != g_traits[t->type].blck_size && t->nb[0] != next) return false;
    next *= t->ne[0] / g_traits[t->type].blck_size;
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] != 1) {
            if (t->nb[i] != next) return false;
            next *= t->ne[i];
        }
    }
    return true;
}
const char * ggml_type_name(enum ggml_type type) {
    return type >= 0 && type < kvg::TYPE_COUNT ? g_traits[type].type_name : "invalid";
}
bool ggml_is_quantized(enum ggml_type type) { return ggml_get_type_traits(type)->is_quantized; }
