// fp16/bf16 conversion (the scalar functions and ggml-cpu.h's row converters on every CPU path)
// and the GGUF block layouts of Q8_0 and Q4_0, checked against
// references written here from the format definitions.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// Nearest-even rounding of x to a binary format with `mant` fraction bits, smallest
// normal exponent emin and largest finite value max_finite (overflow -> inf).
double ref_round(double x, int mant, int emin, double max_finite) {
    if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
    int e;
    std::frexp(std::fabs(x), &e);
    const int exp = std::max(e - 1, emin); // below emin the spacing stays that of subnormals
    const double ulp = std::ldexp(1.0, exp - mant);
    const double q = std::nearbyint(x / ulp) * ulp; // default rounding: ties to even
    if (std::fabs(q) > max_finite) return std::copysign(INFINITY, x);
    return q;
}
double ref_f16(double x) { return ref_round(x, 10, -14, 65504.0); }
double ref_bf16(double x) { return ref_round(x, 7, -126, std::ldexp(255.0 / 128.0, 127)); }

// IEEE half decoded from its fields
double ref_decode_f16(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0) v = std::ldexp((double) mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
    return sign ? -v : v;
}

bool is_nan_f16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

} // namespace

TEST_CASE("fp16: decoding every half matches the IEEE definition") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const double want = ref_decode_f16((uint16_t) h);
        const float got = ggml_fp16_to_fp32((ggml_fp16_t) h);
        if (std::isnan(want)) {
            CHECK(std::isnan(got));
        } else {
            CHECK((double) got == want);
            CHECK(std::signbit(got) == ((h & 0x8000) != 0)); // -0 stays -0
        }
    }
}

TEST_CASE("fp16: every non-NaN half round-trips exactly; NaNs stay NaN") {
    int failures = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = ggml_fp16_to_fp32((ggml_fp16_t) h);
        const ggml_fp16_t back = ggml_fp32_to_fp16(f);
        if (is_nan_f16((uint16_t) h)) {
            failures += !is_nan_f16(back);
        } else {
            failures += back != h;
        }
    }
    CHECK(failures == 0);
}

TEST_CASE("fp16: rounding of known floats") {
    struct { float x; uint16_t h; } cases[] = {
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.1f, 0x2e66},
        {65504.0f, 0x7bff},
        {65519.0f, 0x7bff},                   // just below the halfway point to 65536
        {65520.0f, 0x7c00},                   // halfway: ties to even = inf
        {1e6f, 0x7c00},
        {1.0f + std::ldexp(1.0f, -11), 0x3c00},     // tie between 1 and 1+2^-10: even is 1
        {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02}, // tie between 0x3c01 and 0x3c02: even
        {std::ldexp(1.0f, -24), 0x0001},            // smallest subnormal
        {std::ldexp(1.0f, -25), 0x0000},            // tie with 0: even
        {3 * std::ldexp(1.0f, -26), 0x0001},        // above the tie
        {std::ldexp(1.0f, -14), 0x0400},            // smallest normal
        {std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25), 0x0400}, // tie 0x3ff / 0x400: even
        {-0.0f, 0x8000},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
    };
    for (const auto & c : cases) {
        CAPTURE(c.x);
        CHECK(ggml_fp32_to_fp16(c.x) == c.h);
    }
    CHECK(is_nan_f16(ggml_fp32_to_fp16(NAN)));
    CHECK(is_nan_f16(ggml_fp32_to_fp16(-NAN)));
    CHECK(is_nan_f16(ggml_fp32_to_fp16(bits_f32(0x7f800001u)))); // signalling-NaN payload must not become inf
}

TEST_CASE("fp16/bf16: rounding matches nearest-even over a sweep of float bit patterns") {
    int bad16 = 0, badbf = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) { // ~1M patterns covering all exponents
        const float x = bits_f32((uint32_t) u);
        if (std::isnan(x)) continue;
        const double w16 = ref_f16(x);
        const double wbf = ref_bf16(x);
        bad16 += (double) ggml_fp16_to_fp32(ggml_fp32_to_fp16(x)) != w16;
        badbf += (double) ggml_bf16_to_fp32(ggml_fp32_to_bf16(x)) != wbf;
    }
    CHECK(bad16 == 0);
    CHECK(badbf == 0);
}

TEST_CASE("bf16: known values, round trip of every bf16, inf and nan") {
    CHECK(ggml_fp32_to_bf16(1.0f).bits == 0x3f80);
    CHECK(ggml_fp32_to_bf16(-2.0f).bits == 0xc000);
    CHECK(ggml_fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);     // tie: even
    CHECK(ggml_fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82); // tie: even
    CHECK(ggml_fp32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)).bits == 0x3f81);
    CHECK(ggml_fp32_to_bf16(INFINITY).bits == 0x7f80);
    CHECK(ggml_fp32_to_bf16(-INFINITY).bits == 0xff80);
    CHECK(ggml_fp32_to_bf16(std::numeric_limits<float>::max()).bits == 0x7f80); // overflows to inf
    const ggml_bf16_t n = ggml_fp32_to_bf16(bits_f32(0x7f800001u)); // NaN with a low payload
    CHECK(std::isnan(ggml_bf16_to_fp32(n)));
    int failures = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const ggml_bf16_t b = {(uint16_t) h};
        const float f = ggml_bf16_to_fp32(b);
        failures += f32_bits(f) != (h << 16);
        if (!std::isnan(f)) failures += ggml_fp32_to_bf16(f).bits != h;
        else failures += !std::isnan(ggml_bf16_to_fp32(ggml_fp32_to_bf16(f)));
    }
    CHECK(failures == 0);
}

TEST_CASE("row conversion helpers agree with the scalar ones") {
    std::vector<float> x = {0.0f, 1.5f, -3.25f, 1e-6f, 70000.0f, -0.1f, 12345.678f};
    std::vector<ggml_fp16_t> h(x.size());
    std::vector<ggml_bf16_t> b(x.size());
    std::vector<float> y(x.size());
    ggml_fp32_to_fp16_row(x.data(), h.data(), (int64_t) x.size());
    ggml_fp16_to_fp32_row(h.data(), y.data(), (int64_t) x.size());
    for (size_t i = 0; i < x.size(); ++i) CHECK((double) y[i] == ref_f16(x[i]));
    ggml_fp32_to_bf16_row(x.data(), b.data(), (int64_t) x.size());
    ggml_bf16_to_fp32_row(b.data(), y.data(), (int64_t) x.size());
    for (size_t i = 0; i < x.size(); ++i) CHECK((double) y[i] == ref_bf16(x[i]));
}

TEST_CASE("ggml_cpu_fp16_to_fp32 / ggml_cpu_fp32_to_bf16 on every CPU path: the IEEE values, any length") {
    // every half; every 4093rd float bit pattern plus ties, subnormals, inf and NaN
    std::vector<ggml_fp16_t> halves(65536);
    for (uint32_t h = 0; h < 65536; ++h) halves[h] = (ggml_fp16_t) h;
    std::vector<float> floats;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) floats.push_back(bits_f32((uint32_t) u));
    for (float f : {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), std::ldexp(1.5f, -140), -std::ldexp(1.0f, -149),
                    INFINITY, -INFINITY, NAN, bits_f32(0x7f800001u), std::numeric_limits<float>::max()}) floats.push_back(f);
    for (int path = GGML_CPU_FEATURES_SCALAR; path < GGML_CPU_FEATURES_BEST; ++path) {
        if (ggml_cpu_set_features_limit((ggml_cpu_features) path) != path) continue; // not on this CPU
        CAPTURE(path);
        // lengths with and without a tail past the vector width, from an odd offset
        for (size_t n : {floats.size(), (size_t) 37, (size_t) 15}) {
            CAPTURE(n);
            const size_t nh = std::min(n, halves.size() - 1);
            std::vector<float> y(nh);
            ggml_cpu_fp16_to_fp32(halves.data() + 1, y.data(), (int64_t) nh);
            int bad = 0;
            for (size_t i = 0; i < nh; ++i) {
                const double want = ref_decode_f16((uint16_t) (i + 1));
                bad += std::isnan(want) ? !std::isnan(y[i]) : (double) y[i] != want;
            }
            CHECK(bad == 0);
            std::vector<ggml_bf16_t> b(n + 1, ggml_bf16_t{0x1234});
            ggml_cpu_fp32_to_bf16(floats.data() + 1, b.data(), (int64_t) n);
            for (size_t i = 0; i < n; ++i) {
                const float x = floats[i + 1], got = ggml_bf16_to_fp32(b[i]);
                bad += std::isnan(x) ? !std::isnan(got) : (double) got != ref_bf16(x);
            }
            CHECK(bad == 0);
            CHECK(b[n].bits == 0x1234); // nothing written past n
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    const float x[3] = {-2.75f, 0.5f, 70000.0f};
    int32_t i32[3];
    ggml_cpu_fp32_to_i32(x, i32, 3);
    CHECK(i32[0] == -2);
    CHECK(i32[1] == 0);
    CHECK(i32[2] == 70000);
    ggml_fp16_t h[3];
    ggml_cpu_fp32_to_fp16(x, h, 3);
    CHECK((double) ggml_fp16_to_fp32(h[0]) == -2.75);
    CHECK(std::isinf(ggml_fp16_to_fp32(h[2]))); // past 65504
    const ggml_bf16_t bb[2] = {{0x3f80}, {0xc040}};
    float f[2];
    ggml_cpu_bf16_to_fp32(bb, f, 2);
    CHECK(f[0] == 1.0f);
    CHECK(f[1] == -3.0f);
}

TEST_CASE("type traits of the supported types") {
    CHECK(ggml_blck_size(GGML_TYPE_F32) == 1);
    CHECK(ggml_type_size(GGML_TYPE_F32) == 4);
    CHECK(ggml_type_size(GGML_TYPE_F16) == 2);
    CHECK(ggml_type_size(GGML_TYPE_BF16) == 2);
    CHECK(ggml_blck_size(GGML_TYPE_Q8_0) == 32);
    CHECK(ggml_type_size(GGML_TYPE_Q8_0) == 34);
    CHECK(ggml_blck_size(GGML_TYPE_Q4_0) == 32);
    CHECK(ggml_type_size(GGML_TYPE_Q4_0) == 18);
    CHECK(ggml_is_quantized(GGML_TYPE_Q8_0));
    CHECK(ggml_is_quantized(GGML_TYPE_Q4_0));
    CHECK_FALSE(ggml_is_quantized(GGML_TYPE_F16));
    CHECK(ggml_row_size(GGML_TYPE_Q4_0, 64) == 36);
    CHECK(ggml_row_size(GGML_TYPE_Q8_0, 96) == 102);
}

// ---- block layouts -------------------------------------------------------------------------

TEST_CASE("q8_0: byte-exact block for d = 1") {
    // amax = 127 -> d = 1 (fp16 0x3c00), q = round(x) (halves away from zero)
    float x[32];
    const float vals[32] = {127, -127, 0, 1, -1, 2.4f, -2.6f, 63.5f, -63.5f, 0.49f, -0.5f, 100, -100, 5, 6, 7,
                            8, 9, 10, -11, 12, -13, 14, 15.5f, 16, 17, 18, 19, 20, 21, 22, 23};
    std::memcpy(x, vals, sizeof(x));
    const int8_t q[32] = {127, -127, 0, 1, -1, 2, -3, 64, -64, 0, -1, 100, -100, 5, 6, 7,
                          8, 9, 10, -11, 12, -13, 14, 16, 16, 17, 18, 19, 20, 21, 22, 23};
    uint8_t want[34] = {0x00, 0x3c}; // little-endian fp16 scale first
    std::memcpy(want + 2, q, 32);

    uint8_t got[34];
    ggml_get_type_traits(GGML_TYPE_Q8_0)->from_float_ref(x, got, 32);
    CHECK(std::memcmp(got, want, 34) == 0);

    float y[32];
    ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(got, y, 32);
    for (int j = 0; j < 32; ++j) CHECK(y[j] == (float) q[j]);
}

TEST_CASE("q8_0: scale 0.5, zero block, two blocks") {
    float x[64];
    for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 0.25f; // amax 4 -> d = 4/127
    x[5] = 63.5f;                                         // amax 63.5 -> d = 0.5 exactly (0x3800)
    for (int j = 32; j < 64; ++j) x[j] = 0.0f;
    block_q8_0 b[2];
    quantize_row_q8_0_ref(x, b, 64);
    CHECK(b[0].d == 0x3800);
    for (int j = 0; j < 32; ++j) {
        const int want = j == 5 ? 127 : (int) std::lround((j - 16) * 0.5);
        CHECK(b[0].qs[j] == want);
    }
    CHECK(b[1].d == 0);
    for (int j = 0; j < 32; ++j) CHECK(b[1].qs[j] == 0);
    // layout: block 1 starts at byte 34
    const uint8_t * bytes = (const uint8_t *) b;
    CHECK(bytes[34] == 0);
    CHECK(bytes[35] == 0);
}

TEST_CASE("q4_0: byte-exact block, low nibbles = elements 0..15, high = 16..31") {
    // largest magnitude is -8 -> d = -8 / -8 = 1 (0x3c00); q = min(15, (int)(x/d + 8.5)); value = (q-8)*d
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = (float) ((j % 15) - 7); // -7..7
    x[0] = -8.0f;
    x[3] = 3.4f;   // q = 11
    x[20] = -2.5f; // q = (int)6.0 = 6
    x[31] = 7.9f;  // q = min(15, 16) = 15
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = (j % 15) - 7 + 8;
    q[0] = 0;
    q[3] = 11;
    q[20] = 6;
    q[31] = 15;
    uint8_t want[18] = {0x00, 0x3c};
    for (int j = 0; j < 16; ++j) want[2 + j] = (uint8_t) (q[j] | (q[j + 16] << 4));

    uint8_t got[18];
    ggml_get_type_traits(GGML_TYPE_Q4_0)->from_float_ref(x, got, 32);
    CHECK(std::memcmp(got, want, 18) == 0);

    float y[32];
    ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(got, y, 32);
    for (int j = 0; j < 32; ++j) CHECK(y[j] == (float) (q[j] - 8));
}

TEST_CASE("q4_0: positive extreme gives a negative scale") {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = 0.0f;
    x[7] = 8.0f;   // d = 8 / -8 = -1 (0xbc00), q = 0
    x[8] = -7.0f;  // x/d = 7 -> q = 15
    x[25] = 1.0f;  // x/d = -1 -> q = 7
    block_q4_0 b;
    quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == 0xbc00);
    CHECK((b.qs[7] & 0x0f) == 0);
    CHECK((b.qs[8] & 0x0f) == 15);
    CHECK((b.qs[9] >> 4) == 7);  // element 25 = high nibble of byte 9
    CHECK((b.qs[0] & 0x0f) == 8); // zeros -> 8
    float y[32];
    dequantize_row_q4_0(&b, y, 32);
    CHECK(y[7] == 8.0f);
    CHECK(y[8] == -7.0f);
    CHECK(y[25] == 1.0f);
    CHECK(y[0] == 0.0f);
}

TEST_CASE("q4_0: NaN and inf blocks quantize to defined nibbles (no float-to-int overflow)") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (float bad : {nan, inf, -inf}) {
        float x[32];
        for (int j = 0; j < 32; ++j) x[j] = 0.25f * (float) (j - 16); // -4 .. 3.75
        x[5] = bad;
        block_q4_0 b;
        quantize_row_q4_0_ref(x, &b, 32);
        CHECK((b.qs[5] & 0x0f) == 0); // the bad element: NaN (x * id or inf * 0) -> nibble 0
        if (std::isnan(bad)) {
            // NaN never wins the max: d = -4 / -8 = 0.5 from the finite elements, which keep their nibbles
            CHECK(ggml_fp16_to_fp32(b.d) == 0.5f);
            CHECK((b.qs[0] & 0x0f) == 0); // -4 / 0.5 + 8.5 = 0.5
            CHECK((b.qs[0] >> 4) == 8);   // element 16 is 0
        } else {
            // an infinite scale: every finite element lands at 8 (x * 0 + 8.5)
            CHECK((b.qs[1] & 0x0f) == 8);
            CHECK((b.qs[1] >> 4) == 8);
        }
    }
}
