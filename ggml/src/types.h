// Block formats (GGUF-exact layouts) and reference (de)quantizers.
#pragma once

#include "ggml.h"

#include <algorithm>

struct block_q8_0 {
    ggml_fp16_t d;      // scale
    int8_t qs[QK8_0];   // value = qs[i] * d
};
static_assert(sizeof(block_q8_0) == 34, "q8_0 block must be 34 bytes");

struct block_q4_0 {
    ggml_fp16_t d;          // scale
    uint8_t qs[QK4_0 / 2];  // nibbles: element j in the low half of byte j, element j+16 in the high half
};
static_assert(sizeof(block_q4_0) == 18, "q4_0 block must be 18 bytes");

// Activations for k-quant weights: one float scale per 256 values, and the sums of every
// 16 quants (the k-quants' sub-block minimums are applied through them).
struct block_q8_K {
    float d;                   // value = qs[i] * d
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  // bsums[j] = sum of qs[16 j .. 16 j + 15]
};
static_assert(sizeof(block_q8_K) == 292, "q8_K block must be 292 bytes");

// llama.cpp's other block formats, field by field (ggml's layouts; f16 scales, little-endian).
// Encoders: quants-encode.cpp; decoders: quants-dequant.cpp.
struct block_q4_1 {
    ggml_fp16_t d, m;       // value = q * d + m, q in [0, 15]
    uint8_t qs[16];         // element j in the low nibble of byte j, element j + 16 in the high one
};
struct block_q5_0 {
    ggml_fp16_t d;          // value = (q - 16) * d, q in [0, 31]
    uint8_t qh[4];          // 5th bits: bit j of this little-endian word for element j
    uint8_t qs[16];         // low 4 bits, as q4_1
};
struct block_q5_1 {
    ggml_fp16_t d, m;       // value = q * d + m, q in [0, 31]
    uint8_t qh[4];
    uint8_t qs[16];
};
struct block_iq4_nl {
    ggml_fp16_t d;          // value = d * kvg::iq4nl_levels[q]
    uint8_t qs[16];         // table indices, nibbles as q4_1
};
// k-quants: super-blocks of QK_K = 256 values in sub-blocks of 16 or 32, each with its own
// integer scale (and min) times the super-block's f16 scale d (and dmin).
struct block_q2_K {
    uint8_t scales[16];     // sub-block j (16 values): scale in the low nibble, min in the high one
    uint8_t qs[64];         // 2-bit quants: value n at byte 32 (n / 128) + n % 32, bits 2 ((n % 128) / 32)
    ggml_fp16_t d, dmin;    // value = d * scale * q - dmin * min
};
struct block_q3_K {
    uint8_t hmask[32];      // 3rd bit of value n: bit (n / 32) of byte n % 32
    uint8_t qs[64];         // low 2 bits, placed as q2_K's
    uint8_t scales[12];     // 16 6-bit scales + 32: low 4 bits in nibbles of bytes 0..7
                            // (j < 8 low, else high of byte j - 8), high 2 bits in bytes 8..11
                            // (byte 8 + j % 4, bits 2 (j / 4))
    ggml_fp16_t d;          // value = d * (scale - 32) * (q - 4), q the 3-bit code
};
struct block_q4_K {
    ggml_fp16_t d, dmin;    // value = d * scale * q - dmin * min for sub-block j (32 values)
    uint8_t scales[12];     // 6-bit scales and mins: j < 4 in the low 6 bits of bytes j (scale) and
                            // j + 4 (min); j >= 4 in the nibbles of byte j + 4 (scale low, min high)
                            // with the top 2 bits of bytes j - 4 (scale) and j (min)
    uint8_t qs[128];        // per 64 values: byte 32 i + l holds value 64 i + l (low nibble) and 64 i + 32 + l
};
struct block_q5_K {
    ggml_fp16_t d, dmin;
    uint8_t scales[12];     // as q4_K
    uint8_t qh[32];         // 5th bit of value 32 j + l: bit j of byte l
    uint8_t qs[128];        // as q4_K
};
struct block_q6_K {
    uint8_t ql[128];        // low 4 bits: per half h (128 values) byte 64 h + l holds value 128 h + l
                            // (low nibble, l < 64) and 128 h + 64 + l (high nibble)
    uint8_t qh[64];         // high 2 bits: per half, byte 32 h + l, bits 2 k for value 128 h + 32 k + l
    int8_t scales[16];      // one per 16 values
    ggml_fp16_t d;          // value = d * scale * (q - 32), q the 6-bit code
};
// iq4_xs: 256 values in 8 sub-blocks of 32, each with a 6-bit scale ls (stored + 32) times d,
// values looked up in iq4_nl's table.
struct block_iq4_xs {
    ggml_fp16_t d;       // value = d * (ls_j - 32) * kvg::iq4nl_levels[q], j the sub-block
    uint16_t scales_h;   // high 2 bits of ls_j: bits 2j, 2j + 1
    uint8_t scales_l[4]; // low 4 bits of ls_j: low nibble of byte j / 2 for even j, high for odd
    uint8_t qs[128];     // sub-block j: 16 bytes at 16 j, nibbles as iq4_nl's
};
// Ternary types (BitNet b1.58-style weights): 256 values, each d * (t - 1) for a code t.
// tq2_0: 2-bit codes (0..2 written; 3, i.e. +2d, decodes too).
struct block_tq2_0 {
    uint8_t qs[64]; // value 128 g + 32 l + m: bits 2 l of byte 32 g + m (g < 2, l < 4, m < 32)
    ggml_fp16_t d;
};
// tq1_0: 5 trits per byte, base 3, first trit most significant, stored as ceil(v * 256 / 243)
// for the 5-trit number v (qh: 4 trits and a 0); trit n of byte s is ((s * 3^n) mod 256) * 3 / 256.
struct block_tq1_0 {
    uint8_t qs[48]; // value 32 n + m (< 160): trit n of byte m < 32; 160 + 16 n + m: trit n of byte 32 + m
    uint8_t qh[4];  // value 240 + 4 n + j: trit n (< 4) of byte j
    ggml_fp16_t d;
};
static_assert(sizeof(block_tq2_0) == 66 && sizeof(block_tq1_0) == 54, "ternary block sizes");
static_assert(sizeof(block_q4_1) == 20 && sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24 && sizeof(block_iq4_nl) == 18,
              "32-value block sizes");
static_assert(sizeof(block_q2_K) == 84 && sizeof(block_q3_K) == 110 && sizeof(block_q4_K) == 144 &&
                  sizeof(block_q5_K) == 176 && sizeof(block_q6_K) == 210 && sizeof(block_iq4_xs) == 136,
              "k-quant block sizes");

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
bool ggml_type_is_supported(enum ggml_type type);

namespace kvg {
// llama.cpp's other block formats (quants-dequant.cpp), with ggml's type ids and layouts:
// the weights Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0 (the CPU kernels read
// them directly)
// and the activation format Q8_K; all decoded and encoded (quants-encode.cpp).
struct block_type_info {
    ggml_type type;
    const char * name;   // ggml's type name
    int64_t blck_size;   // values per block
    size_t type_size;    // bytes per block
    void (*to_float)(const void * x, float * y, int64_t k);   // k: a multiple of blck_size
    void (*from_float)(const float * x, void * y, int64_t k); // nullptr: not encoded
};
const block_type_info * extra_block_types(int * n);
// q4_K / q5_K's 12 bytes of 6-bit scales and mins: sub-block j's (j < 8) from p, and all 8 into p.
void k4_scale_min(const uint8_t * p, int j, int * sc, int * mn);
void pack_scale_min_6bit(const uint8_t * sc, const uint8_t * mn, uint8_t * p);
// GGML_TYPE_Q4_0_R16 / GGML_TYPE_Q8_0_R16: a q4_0 / q8_0 matrix whose rows are interleaved by
// 16, so one vpdpbusd multiplies 4 bytes of 16 rows by the same 4 activation bytes and each
// 32-bit lane ends a block with one row's exact integer dot (no reduction across lanes, no
// per-block scale shuffles). The matrix-vector kernel then streams weights at the memory's
// rate where the q4_0 one is bound by its shuffles (Zen 4, 1 thread: 34.8 vs 24.6 GB/s). A
// group of 16 rows takes the bytes of those 16 rows, and holds per block b of 32 values
// (16 times the plain block: 288 / 544 bytes, blocks in order):
//   d[16]          row r's f16 scale
//   qs[G][16][4]   qs[j][r] = bytes 4j..4j+3 of row r's qs (G = 4 for q4_0: values 4j.. in the
//                  low nibbles, 16 + 4j.. in the high ones; G = 8 for q8_0: values 4j..4j+3)
// GGML_TYPE_Q4_K_R16: a q4_K matrix the same way, per super-block b of 256 values (16 times the
// plain block: 2304 bytes, super-blocks in order):
//   d[16], dmin[16]  row r's f16 scales
//   sc[12][16]       row r's 8 sub-block scales s_j and 8 mins m_j (6 bits each), re-encoded so
//                    each takes few vector steps: byte j < 8 = s_j | (m_j & 3) << 6; byte 8 + i
//                    = (m_2i >> 2) | (m_2i+1 >> 2) << 4
//   qs[32][16][4]    qs[g][r] = bytes 4g..4g+3 of row r's qs (plain q4_K order: low nibbles of
//                    bytes 32c.. hold sub-block 2c, high ones sub-block 2c + 1)
// GGML_TYPE_Q6_K_R16: a q6_K matrix, per super-block (3360 bytes):
//   d[16]            row r's f16 scale
//   sc[16][16]       sc[i][r] = row r's int8 scale i
//   q[48][16][4]     row r's words of quants (4 bytes of q6_K's ql or qh), in the order the
//                    kernel reads them, one stream: for half h < 2 and k < 8, q[24 h + 3 k] = qh
//                    word 8 h + k, q[24 h + 3 k + 1 + s] = ql word 16 h + 8 s + k (s < 2)
// GGML_TYPE_IQ4_NL_R16: an iq4_nl matrix, laid out as q4_0_r16 (the same block: d, 16 bytes of
// nibbles).
// GGML_TYPE_Q5_0_R16: a q5_0 matrix, per block of 32 values (352 bytes):
//   d[16]          row r's f16 scale
//   qh[16][4]      row r's 32 5th bits re-ordered so that a shift and a mask put those of 4
//                  values in bit 4 of 4 bytes: byte i holds, for j < 4, the bit of value 4j + i
//                  in bit 4 + j and that of value 16 + 4j + i in bit j
//   qs[4][16][4]   as q4_0_r16
// Rows are a multiple of 16; row r of the matrix is row r % 16 of group r / 16.
constexpr int64_t R16_ROWS = 16;
// ggml's types and kvgraph's own (past GGML_TYPE_COUNT): the size of tables indexed by type
constexpr int TYPE_COUNT = GGML_TYPE_Q5_0_R16 + 1;
inline bool is_r16(ggml_type t) { return t >= GGML_TYPE_Q4_0_R16 && t <= GGML_TYPE_Q5_0_R16; }
// the plain type of an interleaved one, and the interleaved type of a plain one (t itself: none;
// GGML_TYPE_COUNT is q4_0_r16's value, no sentinel)
constexpr ggml_type R16_PLAIN[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,   GGML_TYPE_Q4_K,
                                   GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0}; // in the r16 types' order
static_assert(sizeof(R16_PLAIN) / sizeof(R16_PLAIN[0]) == TYPE_COUNT - GGML_TYPE_Q4_0_R16, "one plain type per r16 type");
inline ggml_type r16_plain(ggml_type t) { return R16_PLAIN[t - GGML_TYPE_Q4_0_R16]; }
inline ggml_type r16_of(ggml_type t) {
    for (int i = 0; i < TYPE_COUNT - GGML_TYPE_Q4_0_R16; ++i) if (R16_PLAIN[i] == t) return (ggml_type) (GGML_TYPE_Q4_0_R16 + i);
    return t;
}
// bytes of one block of a group
size_t r16_block_bytes(ggml_type t);
// Group of 16 rows of plain type (q4_0, q8_0, q4_K, q6_K, iq4_nl or q5_0; k values each, the first at rows,
// row_stride bytes apart) -> group, and back.
void r16_pack(ggml_type plain, const void * rows, size_t row_stride, void * group, int64_t k);
void r16_unpack(ggml_type plain, const void * group, void * rows, size_t row_stride, int64_t k);
// Row decoder of a type: its to_float, and for F32 a copy (ggml's traits, and so
// ggml_get_type_traits, have no to_float for F32). NULL for types kvgraph cannot read.
ggml_to_float_t row_decoder(ggml_type type);
// IQ4_NL's 16 non-linear levels (ggml's table), ascending
inline constexpr int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// iq4_xs's sub-block j (< 8) scale ls_j - 32, in [-32, 31]
inline int iq4xs_scale(const uint8_t * scales_h, const uint8_t * scales_l, int j) {
    const int high = ((scales_h[j / 4] >> (2 * (j % 4))) & 3) << 4;
    return (((scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | high) - 32;
}
// tq1_0: trit n (< 5) of byte s, 0..2 (the format's digit extraction: the byte is a fraction of
// 256 that times 3^n, modulo 1, times 3 gives the trit)
inline int tq1_trit(uint8_t s, int n) {
    constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    return ((int) (uint8_t) (s * pow3[n]) * 3) >> 8;
}

// Encoders (quants-encode.cpp): k values of x (a multiple of the block size) into blocks at
// y, each block's scales and codes chosen to minimize the squared error weighted by w (one
// weight per value, aligned with x; NULL: all 1). Deterministic; no state.
typedef void (*encode_fn)(const float * x, void * y, int64_t k, const float * w);
void encode_q4_1(const float * x, void * y, int64_t k, const float * w);
void encode_q5_0(const float * x, void * y, int64_t k, const float * w);
void encode_q5_1(const float * x, void * y, int64_t k, const float * w);
void encode_iq4_nl(const float * x, void * y, int64_t k, const float * w);
void encode_iq4_xs(const float * x, void * y, int64_t k, const float * w);
void encode_q2_K(const float * x, void * y, int64_t k, const float * w);
void encode_q3_K(const float * x, void * y, int64_t k, const float * w);
void encode_q4_K(const float * x, void * y, int64_t k, const float * w);
void encode_q5_K(const float * x, void * y, int64_t k, const float * w);
void encode_q6_K(const float * x, void * y, int64_t k, const float * w);
void encode_tq1_0(const float * x, void * y, int64_t k, const float * w);
void encode_tq2_0(const float * x, void * y, int64_t k, const float * w);
// The weighted encoder of type, or NULL (F32, F16, BF16, Q8_0, Q4_0 and Q8_K encode through
// their traits' from_float_ref, without weights; other types cannot be encoded).
encode_fn weighted_encoder(ggml_type type);
// an encoder as a ggml_from_float_t (no weights)
template <encode_fn F> void encode_unweighted(const float * x, void * y, int64_t k) { F(x, y, k, nullptr); }
} // namespace kvg
