// The encoders (quants-encode.cpp) and ggml's quantization API: round trips within a
// per-type error bound on random and structured data, kvgraph's decoders against naive
// decoders written here from the block structs, ggml_quantize_chunk by pieces and whole.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "quants-iq3.h"
#include "types.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// RMS error of a round trip relative to the data's largest magnitude. Bounds: measured
// (printed by the first test case) with about 25% headroom. For reference, a grid of L
// evenly spaced levels over [-A, A] rounds uniform data with RMS error 2A / (L - 1) / sqrt(12):
// L = 4 -> 0.19 A, 8 -> 0.082 A, 16 -> 0.038 A, 32 -> 0.019 A, 64 -> 0.0092 A, 255 -> 0.0023 A;
// affine types span only the block's [min, max], k-quants pay for coded sub-block scales.
struct type_bound {
    ggml_type type;
    double rel_rms;
};
const type_bound kTypes[] = {
    {GGML_TYPE_F16, 4e-4},    {GGML_TYPE_BF16, 3e-3},    {GGML_TYPE_Q8_0, 3e-3},    {GGML_TYPE_Q4_0, 0.047},
    {GGML_TYPE_Q4_1, 0.039},  {GGML_TYPE_Q5_0, 0.021},   {GGML_TYPE_Q5_1, 0.02},    {GGML_TYPE_IQ4_NL, 0.053},
    {GGML_TYPE_Q2_K, 0.17},   {GGML_TYPE_Q3_K, 0.091},   {GGML_TYPE_Q4_K, 0.039},   {GGML_TYPE_Q5_K, 0.02},
    {GGML_TYPE_Q6_K, 0.0093}, {GGML_TYPE_Q8_K, 3e-3},    {GGML_TYPE_IQ4_XS, 0.054}, {GGML_TYPE_TQ1_0, 0.24},
    {GGML_TYPE_TQ2_0, 0.24},  {GGML_TYPE_IQ3_XXS, 0.16}, {GGML_TYPE_IQ3_S, 0.12},
};

const int64_t N = 4096; // 16 k-quant super-blocks, 128 blocks of 32

std::vector<float> dataset(int kind, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(N);
    for (int64_t i = 0; i < N; ++i) {
        switch (kind) {
            case 0: x[i] = u(rng); break;                                   // uniform
            case 1: x[i] = g(rng); break;                                   // gaussian
            case 2: x[i] = 0.37f; break;                                    // constant
            case 3: x[i] = u(rng) * (i % 97 == 5 ? 40.0f : 1.0f); break;    // rare outliers
            case 4: x[i] = 1e-3f * g(rng); break;                           // small values
            case 5: x[i] = 2.0f + 0.5f * u(rng); break;                     // all positive, offset
            default: x[i] = 0.1f + 2.0f * std::cos((float) i); break;      // ggml's test data
        }
    }
    return x;
}
const char * kKinds[] = {"uniform", "gaussian", "constant", "outliers", "small", "offset", "cosine"};

std::vector<float> round_trip(ggml_type t, const std::vector<float> & x) {
    std::vector<uint8_t> q(ggml_row_size(t, (int64_t) x.size()));
    std::vector<float> y(x.size());
    ggml_get_type_traits(t)->from_float_ref(x.data(), q.data(), (int64_t) x.size());
    kvg::row_decoder(t)(q.data(), y.data(), (int64_t) x.size());
    return y;
}

double rel_rms(const std::vector<float> & x, const std::vector<float> & y) {
    double s = 0.0, amax = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        s += ((double) x[i] - y[i]) * ((double) x[i] - y[i]);
        amax = std::max(amax, std::fabs((double) x[i]));
    }
    return std::sqrt(s / (double) x.size()) / amax;
}

} // namespace

TEST_CASE("round trips of every encodable type stay within their error bound") {
    for (const type_bound & tb : kTypes) {
        const std::string name = ggml_type_name(tb.type);
        CAPTURE(name);
        std::string line = name + ":";
        for (int kind = 0; kind < 7; ++kind) {
            const std::string kind_name = kKinds[kind];
            CAPTURE(kind_name);
            const std::vector<float> x = dataset(kind, 100 + kind);
            const std::vector<float> y = round_trip(tb.type, x);
            const double e = rel_rms(x, y);
            line += " " + std::string(kKinds[kind]) + " " + std::to_string(e);
            // outliers: a block holding one shares its scale (a coarser grid for the rest)
            CHECK(e <= (kind == 3 ? 4.0 : 1.0) * tb.rel_rms);
        }
        MESSAGE(line);
        // zeros come back as zeros
        const std::vector<float> z(N, 0.0f);
        CHECK(round_trip(tb.type, z) == z);
    }
}

// ---- naive decoders, written from the block structs of types.h ----------------------------------

namespace {

float h2f(ggml_fp16_t h) { return ggml_fp16_to_fp32(h); }

// the 5th bit (q5_0) of element j of a 32-value block
int bit5(const uint8_t * qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }
// element j's 4 low bits of a 32-value block (j < 16 low nibbles, else high nibbles)
int nib(const uint8_t * qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

void naive_q4_1(const block_q4_1 & b, float * y) {
    for (int j = 0; j < 32; ++j) y[j] = h2f(b.d) * (float) nib(b.qs, j) + h2f(b.m);
}
void naive_q5_0(const block_q5_0 & b, float * y) {
    for (int j = 0; j < 32; ++j) y[j] = h2f(b.d) * (float) ((nib(b.qs, j) | bit5(b.qh, j) << 4) - 16);
}
void naive_q4_k(const block_q4_K & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const int j = n / 32, l = n % 32;                  // sub-block and position in it
        const uint8_t byte = b.qs[32 * (j / 2) + l];       // sub-blocks 2i (low) and 2i+1 (high)
        const int q = j % 2 ? byte >> 4 : byte & 15;
        int sc, mn;
        if (j < 4) {
            sc = b.scales[j] & 63;
            mn = b.scales[j + 4] & 63;
        } else {
            sc = (b.scales[j + 4] & 15) | (b.scales[j - 4] >> 6) << 4;
            mn = (b.scales[j + 4] >> 4) | (b.scales[j] >> 6) << 4;
        }
        y[n] = h2f(b.d) * (float) sc * (float) q - h2f(b.dmin) * (float) mn;
    }
}
void naive_q6_k(const block_q6_K & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const int h = n / 128, r = n % 128;                // half, position in it
        const uint8_t lo = b.ql[64 * h + r % 64];
        const int low = r < 64 ? lo & 15 : lo >> 4;
        const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        y[n] = h2f(b.d) * (float) b.scales[n / 16] * (float) ((low | high << 4) - 32);
    }
}

// iq4_nl's table, as ggml's format description gives it
const int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
void naive_iq4_xs(const block_iq4_xs & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const int j = n / 32, l = n % 32;           // sub-block and position in it
        const uint8_t byte = b.qs[16 * j + l % 16]; // values l < 16 low nibbles, then high
        const int q = l < 16 ? byte & 15 : byte >> 4;
        const int low = j % 2 ? b.scales_l[j / 2] >> 4 : b.scales_l[j / 2] & 15;
        const int ls = low | ((b.scales_h >> (2 * j)) & 3) << 4;
        y[n] = h2f(b.d) * (float) (ls - 32) * (float) kIq4Levels[q];
    }
}

// tq2_0: code of value n at byte 32 (n / 128) + n % 32, bits 2 ((n % 128) / 32); value d (code - 1)
void naive_tq2_0(const block_tq2_0 & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const int code = (b.qs[32 * (n / 128) + n % 32] >> (2 * ((n % 128) / 32))) & 3;
        y[n] = h2f(b.d) * (float) (code - 1);
    }
}
// tq1_0 by the format's arithmetic: a byte s stores the 5-trit number v (first trit most
// significant) as ceil(v * 256 / 243), so v = floor(s * 243 / 256) and trit n is a base-3 digit
int naive_trit(uint8_t s, int n) {
    int v = s * 243 / 256;
    for (int i = n; i < 4; ++i) v /= 3;
    return v % 3;
}
void naive_tq1_0(const block_tq1_0 & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        int t;
        if (n < 160) t = naive_trit(b.qs[n % 32], n / 32);
        else if (n < 240) t = naive_trit(b.qs[32 + (n - 160) % 16], (n - 160) / 16);
        else t = naive_trit(b.qh[(n - 240) % 4], (n - 240) / 4);
        y[n] = h2f(b.d) * (float) (t - 1);
    }
}

// iq3_xxs / iq3_s, value n of the block: magnitude byte n % 4 of the grid entry of group n / 4,
// the sub-block (n / 32) scale, the sign of n (iq3_xxs: 7 stored bits per 8 values, the 8th
// the parity of those 7), all read byte by byte
uint8_t grid_magnitude(const uint32_t * grid, int index, int n) { return (uint8_t) (grid[index] >> (8 * (n % 4))); }
void naive_iq3_xxs(const block_iq3_xxs & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const uint8_t * sas = b.sas + 4 * (n / 32);
        const uint32_t word = sas[0] | sas[1] << 8 | sas[2] << 16 | (uint32_t) sas[3] << 24;
        const uint32_t field = (word >> (7 * ((n % 32) / 8))) & 127;
        int neg = 0;
        if (n % 8 < 7) neg = (field >> (n % 8)) & 1;
        else
            for (int k = 0; k < 7; ++k) neg ^= (field >> k) & 1;
        const float db = h2f(b.d) * (0.5f + (float) (word >> 28)) * 0.5f;
        y[n] = db * (float) grid_magnitude(kvg::iq3xxs_grid, b.qs[n / 4], n) * (neg ? -1.0f : 1.0f);
    }
}
void naive_iq3_s(const block_iq3_s & b, float * y) {
    for (int n = 0; n < QK_K; ++n) {
        const int g = n / 4, j = n / 32;
        const int index = b.qs[g] + 256 * ((b.qh[g / 8] >> (g % 8)) & 1);
        const int scale = j % 2 ? b.scales[j / 2] >> 4 : b.scales[j / 2] & 15;
        const bool neg = (b.signs[n / 8] >> (n % 8)) & 1;
        y[n] = h2f(b.d) * (float) (1 + 2 * scale) * (float) grid_magnitude(kvg::iq3s_grid, index, n) *
               (neg ? -1.0f : 1.0f);
    }
}

template <class B>
void check_decoder(ggml_type t, int64_t bs, void (*naive)(const B &, float *)) {
    const int64_t n = 8 * bs;
    std::vector<B> blocks(8);
    std::mt19937 rng(7);
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 0) { // encoded blocks of random data
            const std::vector<float> x = dataset(1, 5);
            ggml_get_type_traits(t)->from_float_ref(x.data(), blocks.data(), n);
        } else {         // random bytes with finite f16 scales: every field exercised
            auto * p = (uint8_t *) blocks.data();
            for (size_t i = 0; i < blocks.size() * sizeof(B); ++i) p[i] = (uint8_t) rng();
            // the f16 scale(s): 1.0 (and 0.5); at the block's end for q6_K and the ternary types
            const size_t d_at = t == GGML_TYPE_Q6_K || t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0 ? sizeof(B) - 2 : 0;
            for (B & b : blocks) std::memcpy((uint8_t *) &b + d_at, "\x00\x3c\x00\x38", d_at ? 2 : 4);
        }
        std::vector<float> got(n), want(n);
        ggml_get_type_traits(t)->to_float(blocks.data(), got.data(), n);
        for (int64_t b = 0; b < 8; ++b) naive(blocks[b], want.data() + b * bs);
        CAPTURE(pass);
        for (int64_t i = 0; i < n; ++i) {
            CAPTURE(i);
            CAPTURE(got[i]); CAPTURE(want[i]);
            REQUIRE(got[i] == want[i]); // the same products (a zero's sign may differ: fused or not)
        }
    }
}

} // namespace

TEST_CASE("kvgraph's decoders agree with naive decoders on encoded and random blocks") {
    check_decoder<block_q4_1>(GGML_TYPE_Q4_1, 32, naive_q4_1);
    check_decoder<block_q5_0>(GGML_TYPE_Q5_0, 32, naive_q5_0);
    check_decoder<block_q4_K>(GGML_TYPE_Q4_K, QK_K, naive_q4_k);
    check_decoder<block_q6_K>(GGML_TYPE_Q6_K, QK_K, naive_q6_k);
    check_decoder<block_iq4_xs>(GGML_TYPE_IQ4_XS, QK_K, naive_iq4_xs);
    check_decoder<block_tq1_0>(GGML_TYPE_TQ1_0, QK_K, naive_tq1_0);
    check_decoder<block_tq2_0>(GGML_TYPE_TQ2_0, QK_K, naive_tq2_0);
    check_decoder<block_iq3_xxs>(GGML_TYPE_IQ3_XXS, QK_K, naive_iq3_xxs);
    check_decoder<block_iq3_s>(GGML_TYPE_IQ3_S, QK_K, naive_iq3_s);
}

// The grids are ggml's (ggml-common.h): FNV-1a 64 of their little-endian bytes and a few entries,
// taken from that file; every byte one of the format's 8 levels, no entry twice.
TEST_CASE("iq3 grids: ggml's tables") {
    auto fnv = [](const uint32_t * g, int n) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < 4; ++j) h = (h ^ ((g[i] >> (8 * j)) & 255)) * 0x100000001b3ull;
        return h;
    };
    CHECK(fnv(kvg::iq3xxs_grid, 256) == 0xdfa5dc83d6a155d5ull);
    CHECK(fnv(kvg::iq3s_grid, 512) == 0xfa37020c25b44829ull);
    CHECK(kvg::iq3xxs_grid[1] == 0x04040414u);
    CHECK(kvg::iq3xxs_grid[255] == 0x3e341c04u);
    CHECK(kvg::iq3s_grid[511] == 0x0f0f0101u);
    for (int t = 0; t < 2; ++t) {
        const uint32_t * g = t ? kvg::iq3s_grid : kvg::iq3xxs_grid;
        const int n = t ? 512 : 256;
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < 4; ++j) {
                const int v = (g[i] >> (8 * j)) & 255;
                CHECK((t ? v % 2 == 1 && v <= 15 : (v % 8 == 4 && v <= 52) || v == 62));
            }
            for (int k = 0; k < i; ++k) REQUIRE(g[k] != g[i]);
        }
    }
}

// iq3_xxs keeps an even count of negatives per 8 values: where x has an odd count, the one
// value of least magnitude takes the wrong sign (it decodes to the grid's smallest level or
// its opposite sign); every other value keeps its sign.
TEST_CASE("iq3_xxs: signs kept but for the least magnitude of an odd group of 8") {
    const std::vector<float> x = dataset(1, 21);
    const std::vector<float> y = round_trip(GGML_TYPE_IQ3_XXS, x);
    int flipped = 0;
    for (int64_t c = 0; c < N / 8; ++c) {
        int neg = 0;
        int64_t least = 8 * c;
        for (int64_t i = 8 * c; i < 8 * c + 8; ++i) {
            neg += x[i] < 0;
            if (std::fabs(x[i]) < std::fabs(x[least])) least = i;
        }
        for (int64_t i = 8 * c; i < 8 * c + 8; ++i) {
            CAPTURE(i);
            if (neg % 2 && i == least) flipped += (x[i] < 0) != (y[i] < 0);
            else CHECK((x[i] < 0) == (y[i] < 0));
        }
    }
    CHECK(flipped > 0);
}

// Ternary weights (s * {-1, 0, 1}, s exact in f16: a BitNet-style block) come back exactly from
// both ternary types, whatever else shares the row; on any data both types hold the same values.
TEST_CASE("tq1_0 / tq2_0: ternary blocks round trip exactly; both types encode the same values") {
    std::mt19937 rng(17);
    std::vector<float> x(N);
    for (int64_t i = 0; i < N; ++i) {
        const float s = (float) (1 + i / QK_K) * 0.0625f; // one scale per block
        x[i] = s * (float) ((int) (rng() % 3) - 1);
    }
    for (int64_t i = 0; i < QK_K; ++i) x[i] = 0.0f; // an all-zero block
    x[QK_K] = 0.0625f;                              // and ones with few nonzeros
    for (int64_t i = QK_K + 1; i < 2 * QK_K; ++i) x[i] = 0.0f;
    for (ggml_type t : {GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0}) {
        const std::string name = ggml_type_name(t);
        CAPTURE(name);
        CHECK(round_trip(t, x) == x);
    }
    for (int kind = 0; kind < 7; ++kind) {
        const std::vector<float> y = dataset(kind, 200 + kind);
        CHECK(round_trip(GGML_TYPE_TQ1_0, y) == round_trip(GGML_TYPE_TQ2_0, y));
    }
}

// iq4_xs is iq4_nl's table with 6-bit scales per 32 values under one f16 scale: on data whose
// sub-block scales are alike (not 'outliers', nor 'small', where d falls into f16's
// subnormals), its round trip costs little over iq4_nl's own f16 scale per block
TEST_CASE("iq4_xs round trips are close to iq4_nl's on the same data") {
    for (int kind : {0, 1, 5, 6}) {
        const std::string kind_name = kKinds[kind];
        CAPTURE(kind_name);
        const std::vector<float> x = dataset(kind, 300 + kind);
        const double xs = rel_rms(x, round_trip(GGML_TYPE_IQ4_XS, x)), nl = rel_rms(x, round_trip(GGML_TYPE_IQ4_NL, x));
        MESSAGE(kind_name, ": iq4_xs ", xs, ", iq4_nl ", nl);
        CHECK(xs <= 1.05 * nl);
    }
}

TEST_CASE("ggml_quantize_chunk: pieces at start offsets write the bytes of the whole, imatrix or not") {
    const int64_t n_per_row = 512, nrows = 6;
    const std::vector<float> x = dataset(1, 9);
    std::vector<float> imatrix(n_per_row);
    for (int64_t j = 0; j < n_per_row; ++j) imatrix[j] = 0.1f + (float) (j % 7);
    for (const type_bound & tb : kTypes) {
        const ggml_type t = tb.type;
        if (t == GGML_TYPE_Q8_K) continue; // not a ggml_quantize_chunk type in ggml (kvgraph encodes it anyway)
        const std::string name = ggml_type_name(t);
        CAPTURE(name);
        const size_t row = ggml_row_size(t, n_per_row);
        for (const float * im : {(const float *) nullptr, (const float *) imatrix.data()}) {
            std::vector<uint8_t> whole(row * nrows), parts(row * nrows, 0xAA);
            CHECK(ggml_quantize_chunk(t, x.data(), whole.data(), 0, nrows, n_per_row, im) == row * nrows);
            CHECK(ggml_quantize_chunk(t, x.data(), parts.data(), 0, 2, n_per_row, im) == row * 2);
            CHECK(ggml_quantize_chunk(t, x.data(), parts.data(), 2 * n_per_row, 3, n_per_row, im) == row * 3);
            CHECK(ggml_quantize_chunk(t, x.data(), parts.data(), 5 * n_per_row, 1, n_per_row, im) == row);
            CHECK(whole == parts);
        }
        // the unweighted chunk is the type's from_float_ref
        std::vector<uint8_t> a(row), b(row);
        ggml_quantize_chunk(t, x.data(), a.data(), 0, 1, n_per_row, nullptr);
        ggml_get_type_traits(t)->from_float_ref(x.data(), b.data(), n_per_row);
        CHECK(a == b);
    }
}

TEST_CASE("importance weights shift the error toward the unimportant columns") {
    const int64_t n = 1024;
    const std::vector<float> x = dataset(1, 11);
    std::vector<float> w(n);
    for (int64_t j = 0; j < n; ++j) w[j] = j % 4 == 0 ? 10.0f : 0.0f; // a zero weight must not break the fit
    for (ggml_type t :
         {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
          GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S}) {
        const std::string name = ggml_type_name(t);
        CAPTURE(name);
        auto weighted_err = [&](const float * im) {
            std::vector<uint8_t> q(ggml_row_size(t, n));
            std::vector<float> y(n);
            ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, n, im);
            ggml_get_type_traits(t)->to_float(q.data(), y.data(), n);
            double e = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                REQUIRE(std::isfinite(y[j]));
                e += w[j] * (x[j] - y[j]) * (x[j] - y[j]);
            }
            return e;
        };
        CHECK(weighted_err(w.data()) < weighted_err(nullptr));
    }
}

TEST_CASE("ggml_quantize_requires_imatrix, ggml_quantize_init/free") {
    for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
        const ggml_type t = (ggml_type) i;
        const bool want = t == GGML_TYPE_IQ2_XXS || t == GGML_TYPE_IQ2_XS || t == GGML_TYPE_IQ1_S || t == GGML_TYPE_IQ1_M;
        CHECK(ggml_quantize_requires_imatrix(t) == want);
        ggml_quantize_init(t); // no tables: nothing to do, for any type
    }
    ggml_quantize_free();
    // the CPU traits encode the new types with the same encoders
    for (ggml_type t : {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
                        GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_TQ1_0,
                        GGML_TYPE_TQ2_0, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S}) {
        CHECK(bool(ggml_get_type_traits_cpu(t)->from_float == ggml_get_type_traits(t)->from_float_ref));
    }
}

// ggml's rule for these types without an importance matrix (its from_float, cpy and set_rows):
// the scale from the block's range, levels rounded half up. Written out here per value, the
// decoded values must be those of kvgraph's encoder, bit for bit.
TEST_CASE("q4_1, q5_0, q5_1 without weights encode by ggml's rounding rule") {
    auto f16 = [](float v) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16(v)); };
    for (ggml_type t : {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1}) {
        const int nmax = t == GGML_TYPE_Q4_1 ? 15 : 31;
        for (int kind = 0; kind < 7; ++kind) {
            CAPTURE(ggml_type_name(t));
            CAPTURE(kKinds[kind]);
            const std::vector<float> x = dataset(kind, 11u + (unsigned) kind);
            const std::vector<float> y = round_trip(t, x);
            int wrong = 0;
            for (int64_t b = 0; b < N / 32; ++b) {
                const float * xb = &x[(size_t) (32 * b)];
                float lo = xb[0], hi = xb[0], peak = 0.0f;
                for (int i = 0; i < 32; ++i) {
                    lo = std::min(lo, xb[i]), hi = std::max(hi, xb[i]);
                    if (std::fabs(xb[i]) > std::fabs(peak)) peak = xb[i];
                }
                for (int i = 0; i < 32; ++i) {
                    float want;
                    if (t == GGML_TYPE_Q5_0) {
                        const float d = peak / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                        const int q = std::min(31, (int) (xb[i] * id + 16.5f));
                        want = f16(d) * (float) (q - 16);
                    } else {
                        const float d = (hi - lo) / (float) nmax, id = d != 0.0f ? 1.0f / d : 0.0f;
                        const int q = std::min(nmax, (int) ((xb[i] - lo) * id + 0.5f));
                        want = f16(d) * (float) q + f16(lo);
                    }
                    wrong += y[(size_t) (32 * b + i)] != want;
                }
            }
            CHECK(wrong == 0);
        }
    }
}
