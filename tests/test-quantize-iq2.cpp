// iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m: kvgraph's grids against ggml's published tables
// (FNV-1a of ggml-common.h's values and a few points), and its decoders against naive ones
// written here from the format's description as bit fields at fixed offsets of a block
// (not from quants-iq2.h's structs), on random blocks; ggml_quantize_requires_imatrix; the
// encoders' round-trip error and use of the importance matrix.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "quants-iq2.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

uint64_t fnv1a(const uint64_t * points, int n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < 8; ++j) h = (h ^ ((points[i] >> (8 * j)) & 0xFF)) * 0x100000001b3ULL;
    }
    return h;
}

// nbits (<= 16) of the block starting at bit `at`, least significant first (little-endian)
unsigned bits(const uint8_t * p, int at, int nbits) {
    unsigned v = 0;
    for (int i = 0; i < nbits; ++i) v |= (unsigned) ((p[(at + i) / 8] >> ((at + i) % 8)) & 1) << i;
    return v;
}
float f16_at_bits(const uint8_t * p, int at) { return ggml_fp16_to_fp32((ggml_fp16_t) bits(p, at, 16)); }

// group g (< 32) of 8 values: grid point `point`, sign bits (bit j: value j negative), written
// as scale * (+-value + delta)
void put_group(float * y, int g, uint64_t point, unsigned signs, float scale, float delta) {
    for (int j = 0; j < 8; ++j) {
        float v = (float) (int8_t) (uint8_t) (point >> (8 * j));
        if ((signs >> j) & 1) v = -v;
        y[8 * g + j] = scale * (v + delta);
    }
}
// 7 stored sign bits and the 8th that makes the number of minus signs even
unsigned even_signs(unsigned code) {
    int n = 0;
    for (int j = 0; j < 7; ++j) n += (code >> j) & 1;
    return code | (unsigned) (n % 2) << 7;
}
float iq2_scale(float d, unsigned s) { return d * (float) (2 * s + 1) / 8.0f; }

// iq2_xxs (66 bytes): d; sub-block j at byte 2 + 8 j: 4 index bytes, then 4 x 7 sign bits and a 4-bit scale
void naive_iq2_xxs(const uint8_t * b, float * y) {
    const float d = f16_at_bits(b, 0);
    for (int g = 0; g < 32; ++g) {
        const int sub = 8 * (2 + 8 * (g / 4));
        const unsigned idx = bits(b, sub + 8 * (g % 4), 8), code = bits(b, sub + 32 + 7 * (g % 4), 7);
        put_group(y, g, kvg::iq2xxs_grid()[idx], even_signs(code), iq2_scale(d, bits(b, sub + 60, 4)), 0.0f);
    }
}
// iq2_xs (74 bytes): d; group g: 16-bit word at byte 2 + 2 g (9-bit index, 7 sign bits); 4-bit
// scales of each 16 values from byte 66
void naive_iq2_xs(const uint8_t * b, float * y) {
    const float d = f16_at_bits(b, 0);
    for (int g = 0; g < 32; ++g) {
        const unsigned idx = bits(b, 8 * (2 + 2 * g), 9), code = bits(b, 8 * (2 + 2 * g) + 9, 7);
        put_group(y, g, kvg::iq2xs_grid()[idx], even_signs(code), iq2_scale(d, bits(b, 8 * 66 + 4 * (g / 2), 4)), 0.0f);
    }
}
// iq2_s (82 bytes): d; index low bytes from 2, sign bytes from 34, 2 high index bits per group
// from byte 66, 4-bit scales of each 16 values from byte 74
void naive_iq2_s(const uint8_t * b, float * y) {
    const float d = f16_at_bits(b, 0);
    for (int g = 0; g < 32; ++g) {
        const unsigned idx = bits(b, 8 * (2 + g), 8) | bits(b, 8 * 66 + 2 * g, 2) << 8;
        put_group(y, g, kvg::iq2s_grid()[idx], bits(b, 8 * (34 + g), 8), iq2_scale(d, bits(b, 8 * 74 + 4 * (g / 2), 4)),
                  0.0f);
    }
}
// iq1_s (50 bytes): d; index low bytes from 2; per sub-block a 16-bit word from byte 34: 3 high
// index bits per group, a 3-bit scale at bit 12, the delta's sign at bit 15
void naive_iq1_s(const uint8_t * b, float * y) {
    const float d = f16_at_bits(b, 0);
    for (int g = 0; g < 32; ++g) {
        const int word = 8 * (34 + 2 * (g / 4));
        const unsigned idx = bits(b, 8 * (2 + g), 8) | bits(b, word + 3 * (g % 4), 3) << 8;
        const float delta = bits(b, word + 15, 1) ? -0.125f : 0.125f;
        put_group(y, g, kvg::iq1s_grid()[idx], 0, d * (float) (2 * bits(b, word + 12, 3) + 1), delta);
    }
}
// iq1_m (56 bytes): index low bytes from 0; a nibble per group from byte 32 (3 high index bits,
// the delta's sign); 3-bit scales of each 16 values from byte 48, 4 per 16-bit word at bits
// 0, 3, 6, 9; d's f16 bits in the words' top nibbles
void naive_iq1_m(const uint8_t * b, float * y) {
    unsigned dbits = 0;
    for (int w = 0; w < 4; ++w) dbits |= bits(b, 8 * 48 + 16 * w + 12, 4) << (4 * w);
    const float d = ggml_fp16_to_fp32((ggml_fp16_t) dbits);
    for (int g = 0; g < 32; ++g) {
        const unsigned idx = bits(b, 8 * g, 8) | bits(b, 8 * 32 + 4 * g, 3) << 8;
        const float delta = bits(b, 8 * 32 + 4 * g + 3, 1) ? -0.125f : 0.125f;
        const int s16 = g / 2; // 16-value group
        const unsigned s = bits(b, 8 * 48 + 16 * (s16 / 4) + 3 * (s16 % 4), 3);
        put_group(y, g, kvg::iq1s_grid()[idx], 0, d * (float) (2 * s + 1), delta);
    }
}

struct iq_type {
    ggml_type type;
    size_t bytes;
    void (*naive)(const uint8_t *, float *);
};
const iq_type kTypes[] = {
    {GGML_TYPE_IQ2_XXS, 66, naive_iq2_xxs}, {GGML_TYPE_IQ2_XS, 74, naive_iq2_xs}, {GGML_TYPE_IQ2_S, 82, naive_iq2_s},
    {GGML_TYPE_IQ1_S, 50, naive_iq1_s},     {GGML_TYPE_IQ1_M, 56, naive_iq1_m},
};

// random bytes with the f16 d set to `d` (iq1_m: in its nibbles)
void random_block(ggml_type t, uint8_t * b, size_t bytes, std::mt19937 & rng, ggml_fp16_t d) {
    for (size_t i = 0; i < bytes; ++i) b[i] = (uint8_t) rng();
    if (t != GGML_TYPE_IQ1_M) {
        std::memcpy(b, &d, 2);
        return;
    }
    for (int w = 0; w < 4; ++w) b[49 + 2 * w] = (uint8_t) ((b[49 + 2 * w] & 0x0F) | ((d >> (4 * w)) & 15) << 4);
}

} // namespace

TEST_CASE("iq2 / iq1 grids are ggml's (ggml-common.h: iq2xxs_grid, iq2xs_grid, iq2s_grid, iq1s_grid)") {
    CHECK(fnv1a(kvg::iq2xxs_grid(), 256) == 0xbb4ee025b5ac6e8eULL);
    CHECK(fnv1a(kvg::iq2xs_grid(), 512) == 0xc9b1ee61e79909bdULL);
    CHECK(fnv1a(kvg::iq2s_grid(), 1024) == 0x123edd38a3b62b90ULL);
    CHECK(fnv1a(kvg::iq1s_grid(), 2048) == 0x6703ed863501ae2eULL);
    CHECK(kvg::iq2xxs_grid()[0] == 0x0808080808080808ULL);
    CHECK(kvg::iq2xxs_grid()[1] == 0x080808080808082bULL);
    CHECK(kvg::iq2xxs_grid()[255] == 0x2b2b2b1908081908ULL);
    CHECK(kvg::iq2s_grid()[1023] == 0x2b2b2b2b2b2b2b2bULL);
    CHECK(kvg::iq1s_grid()[1] == 0xffffffffffffff01ULL);
    CHECK(kvg::iq1s_grid()[2047] == 0x0101010101010101ULL);
    for (int i = 0; i < 2048; ++i) { // the kernels' table: the same points times 8
        for (int j = 0; j < 8; ++j) {
            CHECK((int8_t) (kvg::iq1s_grid8()[i] >> (8 * j)) == 8 * (int8_t) (kvg::iq1s_grid()[i] >> (8 * j)));
        }
    }
    // ggml's ksigns_iq2xs starts 0, 129, 130, 3, 132
    CHECK(kvg::iq2_signs(1) == 129);
    CHECK(kvg::iq2_signs(3) == 3);
    CHECK(kvg::iq2_signs(127) == 255);
}

TEST_CASE("iq2 / iq1 decoders agree with naive decoders on random blocks") {
    std::mt19937 rng(21);
    for (const iq_type & t : kTypes) {
        const std::string name = ggml_type_name(t.type);
        CAPTURE(name);
        REQUIRE(ggml_type_size(t.type) == t.bytes);
        REQUIRE(ggml_blck_size(t.type) == QK_K);
        REQUIRE(bool(ggml_get_type_traits(t.type)->to_float));
        CHECK(!ggml_get_type_traits(t.type)->from_float_ref);
        CHECK(ggml_get_type_traits(t.type)->is_quantized);
        const int nb = 64;
        std::vector<uint8_t> blocks(nb * t.bytes);
        for (int b = 0; b < nb; ++b) {
            const ggml_fp16_t d = ggml_fp32_to_fp16(b % 2 ? 1.0f : -0.0371f * (float) (b + 1));
            random_block(t.type, blocks.data() + b * t.bytes, t.bytes, rng, d);
        }
        std::vector<float> got(nb * QK_K), want(nb * QK_K);
        ggml_get_type_traits(t.type)->to_float(blocks.data(), got.data(), nb * QK_K);
        for (int b = 0; b < nb; ++b) t.naive(blocks.data() + b * t.bytes, want.data() + b * QK_K);
        int bad = 0;
        for (int i = 0; i < nb * QK_K; ++i) {
            if (got[i] != want[i] && bad++ < 5) FAIL_CHECK("value " << i << ": got " << got[i] << " want " << want[i]);
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("ggml_quantize_requires_imatrix: ggml's answer for the iq2 / iq1 types") {
    CHECK(ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_XXS));
    CHECK(ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_XS));
    CHECK(ggml_quantize_requires_imatrix(GGML_TYPE_IQ1_S));
    CHECK(!ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_S));
}

namespace {
// relative RMS error of ggml_quantize_chunk's encoding (with importance im) decoded
double rel_rms_round_trip(ggml_type t, const std::vector<float> & x, int64_t n_per_row, const float * im) {
    std::vector<uint8_t> q(ggml_row_size(t, (int64_t) x.size()));
    const int64_t rows = (int64_t) x.size() / n_per_row;
    CHECK(ggml_quantize_chunk(t, x.data(), q.data(), 0, rows, n_per_row, im) == q.size());
    std::vector<float> y(x.size());
    ggml_get_type_traits(t)->to_float(q.data(), y.data(), (int64_t) x.size());
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) e += (x[i] - y[i]) * (x[i] - y[i]), s += x[i] * x[i];
    return std::sqrt(e / s);
}
} // namespace

// The encoders: on Gaussian data the round trip's relative RMS error stays at what was measured
// (iq2_xxs 0.33, iq2_xs 0.29, iq2_s 0.24, iq1_s 0.47, iq1_m 0.44) plus ~15%, and the importance
// matrix moves the error to the columns it favours.
TEST_CASE("iq2 / iq1 encoders: round-trip error, importance weights") {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t n_per_row = 512, rows = 4;
    std::vector<float> x(n_per_row * rows), ones(n_per_row, 1.0f), im(n_per_row);
    for (float & v : x) v = nd(rng);
    for (int64_t j = 0; j < n_per_row; ++j) im[j] = j % 4 == 0 ? 20.0f : 0.05f;
    const struct {
        ggml_type t;
        double bound;
    } cases[] = {{GGML_TYPE_IQ2_XXS, 0.38},
                 {GGML_TYPE_IQ2_XS, 0.33},
                 {GGML_TYPE_IQ2_S, 0.28},
                 {GGML_TYPE_IQ1_S, 0.54},
                 {GGML_TYPE_IQ1_M, 0.51}};
    for (const auto & c : cases) {
        const std::string name = ggml_type_name(c.t);
        CAPTURE(name);
        const double e = rel_rms_round_trip(c.t, x, n_per_row, ones.data());
        MESSAGE(name, ": relative RMS ", e);
        CHECK(e < c.bound);
        // weighted: the error of the important columns (every 4th) drops below the unweighted one's
        std::vector<float> q(ggml_row_size(c.t, n_per_row * rows)), yw(x.size()), yu(x.size());
        ggml_quantize_chunk(c.t, x.data(), q.data(), 0, rows, n_per_row, im.data());
        ggml_get_type_traits(c.t)->to_float(q.data(), yw.data(), (int64_t) x.size());
        ggml_quantize_chunk(c.t, x.data(), q.data(), 0, rows, n_per_row, ones.data());
        ggml_get_type_traits(c.t)->to_float(q.data(), yu.data(), (int64_t) x.size());
        double ew = 0, eu = 0;
        for (size_t i = 0; i < x.size(); i += 4)
            ew += (x[i] - yw[i]) * (x[i] - yw[i]), eu += (x[i] - yu[i]) * (x[i] - yu[i]);
        CHECK(ew < 0.8 * eu);
    }
}
