// The 2-bit and 1-bit grid types of llama.cpp (ggml's type ids and block layouts): iq2_xxs,
// iq2_xs, iq2_s, iq1_s and iq1_m. Each holds 256 values as 32 groups of 8; a group is a point
// of a fixed grid (ggml's tables, quants-iq2-grids.inc) times signs and a scale:
//   iq2_*:  value = d * (2 s + 1) / 8 * g * sign, g in {8, 25, 43}
//   iq1_*:  value = d * (2 s + 1) * (g + delta), g in {-1, 0, 1}, delta = +-1/8 per group
// with s a 4-bit (iq2) or 3-bit (iq1) sub-block scale. Both forms are d / 8 * (2 s + 1) times an
// integer of at most 43 in magnitude (iq1: 8 g + 8 delta, i.e. -9..9), which the integer
// kernels (cpu/quants-x86-iq2.cpp) use.
#pragma once

#include "types.h"

#include <cstdint>

// ggml's layouts, little-endian. Group l (< 4) of the 32-value sub-block j (< 8) is values
// 32 j + 8 l .. 32 j + 8 l + 7.
struct block_iq2_xxs {
    ggml_fp16_t d;
    uint16_t qs[32]; // sub-block j: bytes 8 j .. 8 j + 3 the 4 groups' grid indices; the 32-bit
                     // word at 8 j + 4: 7-bit sign codes of group l at bit 7 l, the scale s in bits 28..31
};
struct block_iq2_xs {
    ggml_fp16_t d;
    uint16_t qs[32];   // group 4 j + l: grid index in bits 0..8 (512 points), sign code in 9..15
    uint8_t scales[8]; // sub-block j: s of values 0..15 in the low nibble, 16..31 in the high one
};
struct block_iq2_s {
    ggml_fp16_t d;
    uint8_t qs[64];    // 0..31: low 8 bits of group 4 j + l's index; 32..63: its 8 sign bits
    uint8_t qh[8];     // sub-block j: bits 2 l, 2 l + 1 are index bits 8, 9 of group l (1024 points)
    uint8_t scales[8]; // as iq2_xs
};
struct block_iq1_s {
    ggml_fp16_t d;
    uint8_t qs[32]; // low 8 bits of group 4 j + l's index (2048 points)
    uint16_t qh[8]; // sub-block j: index bits 8..10 of group l at bit 3 l, s in bits 12..14,
                    // bit 15 set: delta = -1/8 (else +1/8) for all its groups
};
struct block_iq1_m {
    uint8_t qs[32];    // as iq1_s
    uint8_t qh[16];    // byte 2 j + h: groups 2 h (low nibble) and 2 h + 1 (high nibble): index bits
                       // 8..10 in the nibble's bits 0..2, bit 3 set: delta = -1/8
    uint8_t scales[8]; // 4 little-endian 16-bit words; word w: 3-bit s of the 16 values 64 w + 16 i at
                       // bits 3 i (i < 4); the top nibbles of words 0..3 are d's f16 bits 0..3 .. 12..15
};
static_assert(sizeof(block_iq2_xxs) == 66 && sizeof(block_iq2_xs) == 74 && sizeof(block_iq2_s) == 82 &&
                  sizeof(block_iq1_s) == 50 && sizeof(block_iq1_m) == 56,
              "iq2/iq1 block sizes");

namespace kvg {

// The grids, 8 bytes per point (value j of a point in byte j): iq2 points hold 8, 25 or 43;
// iq1 points -1, 0 or 1 (iq1s_grid8: those times 8, for the integer kernels).
const uint64_t * iq2xxs_grid(); // 256 points
const uint64_t * iq2xs_grid();  // 512 points
const uint64_t * iq2s_grid();   // 1024 points
const uint64_t * iq1s_grid();   // 2048 points
const uint64_t * iq1s_grid8();  // 2048 points

// iq2_xxs / iq2_xs store 8 signs in 7 bits: the 8th makes the count of minus signs even.
// Bit j set: value j of the group is negative.
inline uint8_t iq2_signs(unsigned code7) {
    const unsigned c = code7 & 127;
    return (uint8_t) (c | (__builtin_popcount(c) & 1) << 7);
}

// iq1_m's f16 super-block scale, gathered from the top nibbles of its 4 scale words
inline ggml_fp16_t iq1m_d(const block_iq1_m & b) {
    unsigned d = 0;
    for (int w = 0; w < 4; ++w) d |= (unsigned) (b.scales[2 * w + 1] >> 4) << (4 * w);
    return (ggml_fp16_t) d;
}

// iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m, registered by types.cpp after extra_block_types: decoded,
// no from_float (as ggml: they are encoded through ggml_quantize_chunk, with an importance matrix)
const block_type_info * iq2_block_types(int * n);

// Encoders (quants-iq2-encode.cpp): k values (a multiple of 256) of x into blocks at y, the
// squared error weighted by im (k importance weights; NULL: all 1) and the values' magnitudes.
// Slow (every grid point tried per group and scale: iq1 ~ 2048 x 8 per group): for
// ggml_quantize_chunk on test-size tensors, not for converting models.
void encode_iq2_xxs(const float * x, void * y, int64_t k, const float * im);
void encode_iq2_xs(const float * x, void * y, int64_t k, const float * im);
void encode_iq2_s(const float * x, void * y, int64_t k, const float * im);
void encode_iq1_s(const float * x, void * y, int64_t k, const float * im);
void encode_iq1_m(const float * x, void * y, int64_t k, const float * im);

} // namespace kvg
