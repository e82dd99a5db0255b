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

namespace kvg {
// Formats kvgraph reads but computes with only after widening to f32 (quants-dequant.cpp):
// llama.cpp's Q4_1, Q5_0, Q5_1, Q2_K..Q6_K and IQ4_NL, with ggml's type ids and layouts.
struct read_only_type {
    ggml_type type;
    const char * name;   // ggml's type name
    int64_t blck_size;   // values per block
    size_t type_size;    // bytes per block
    void (*to_float)(const void * x, float * y, int64_t k); // k: a multiple of blck_size
};
const read_only_type * read_only_types(int * n);
} // namespace kvg
