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

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
bool ggml_type_is_supported(enum ggml_type type);
