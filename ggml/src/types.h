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

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
bool ggml_type_is_supported(enum ggml_type type);

namespace kvg {
// llama.cpp's other block formats (quants-dequant.cpp), with ggml's type ids and layouts:
// the weights Q4_1, Q5_0, Q5_1, Q2_K..Q6_K and IQ4_NL (decoded; the CPU kernels read them
// directly) and the activation format Q8_K (also encoded).
struct block_type_info {
    ggml_type type;
    const char * name;   // ggml's type name
    int64_t blck_size;   // values per block
    size_t type_size;    // bytes per block
    void (*to_float)(const void * x, float * y, int64_t k);   // k: a multiple of blck_size
    void (*from_float)(const float * x, void * y, int64_t k); // nullptr: not encoded
};
const block_type_info * extra_block_types(int * n);
} // namespace kvg
