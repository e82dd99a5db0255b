// IQ3_XXS and IQ3_S (ggml types 18 and 21): 256 values per super-block in groups of 4, each
// group one entry of a fixed grid of 4-byte magnitude patterns, with a sign per value and a
// 4-bit scale per 32 values under the block's f16 d. Layouts as ggml's (little-endian):
//   iq3_xxs d | 64 grid indices (8 bits) | 8 x u32: 4 x 7 sign bits, then the scale in bits 28..31
//            value = d * (2 scale + 1) / 4 * grid byte * sign; the 8th sign of every 8 values
//            makes their count of negatives even
//   iq3_s    d | 64 low index bytes | 8 bytes of 9th index bits | 32 sign bytes | 4 scale bytes
//            value = d * (2 scale + 1) * grid byte * sign
// Decoding (to_float) and the encoders (ggml_quantize_chunk) live in quants-iq3.cpp, the SIMD
// matmul tiles in cpu/quants-x86-iq3.cpp.
#pragma once

#include "ggml.h"

#include <cstdint>

struct block_iq3_xxs {
    ggml_fp16_t d;
    uint8_t qs[64];  // group g (values 4 g .. 4 g + 3): iq3xxs_grid[qs[g]]
    uint8_t sas[32]; // sub-block j (values 32 j ..): u32 at 4 j; bits 7 l..7 l + 6: signs of values 32 j + 8 l + (0..6)
};
struct block_iq3_s {
    ggml_fp16_t d;
    uint8_t qs[64]; // group g: iq3s_grid[qs[g] | bit g % 8 of qh[g / 8] << 8]
    uint8_t qh[8];
    uint8_t signs[32]; // value n negative: bit n % 8 of signs[n / 8]
    uint8_t scales[4]; // sub-block j: nibble j % 2 (low first) of scales[j / 2]
};
static_assert(sizeof(block_iq3_xxs) == 98 && sizeof(block_iq3_s) == 110, "iq3 block sizes");

namespace kvg {

// The formats' grids: entry i's byte j is the magnitude of the group's value j
// (iq3_xxs: 4, 12, ..., 52, 62; iq3_s: 1, 3, ..., 15).
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];

// iq3_xxs: the sign byte of 8 values from its 7 stored bits (bit 7: their parity)
struct iq3_sign_table {
    uint8_t v[128];
};
constexpr iq3_sign_table make_iq3_sign_table() {
    iq3_sign_table t{};
    for (int i = 0; i < 128; ++i) {
        int parity = 0;
        for (int b = 0; b < 7; ++b) parity ^= (i >> b) & 1;
        t.v[i] = (uint8_t) (i | parity << 7);
    }
    return t;
}
inline constexpr iq3_sign_table iq3_signs = make_iq3_sign_table();

// iq3_s: the grid index of group g
inline int iq3s_index(const block_iq3_s & b, int g) { return b.qs[g] | ((b.qh[g / 8] >> (g % 8)) & 1) << 8; }

void row_iq3_xxs(const void * x, float * y, int64_t k);
void row_iq3_s(const void * x, float * y, int64_t k);
// Encoders (k a multiple of 256; w: one importance weight per value or NULL for all 1), as the
// encoders of types.h: each block minimizes its weighted squared error by a grid search.
void encode_iq3_xxs(const float * x, void * y, int64_t k, const float * w);
void encode_iq3_s(const float * x, void * y, int64_t k, const float * w);

} // namespace kvg
