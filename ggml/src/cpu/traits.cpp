// CPU type traits: ggml_get_type_traits_cpu (vec_dot, activation conversion) and each
// weight type's matmul kernel and activation type. (Feature detection: features.cpp.)
//
// Activations for float weights stay F32: F16 and BF16 weights are widened in registers
// and dotted with F32 activations (f16·f32, bf16·f32). This avoids a conversion pass over
// the activations, keeps them exact, and in a register tile the widening of one weight
// vector is shared by all activation rows of the tile. Quantized weights use quantized
// activations (q8_0 for 32-value blocks, q8_K for the k-quants' 256-value super-blocks),
// quantized once per activation row, so the inner loop is integer.
#include "simd.h"
#include "types.h"

#include <algorithm>
#include <cstring>

namespace kvg {

static int mm_index(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: return MM_F32;
        case GGML_TYPE_F16: return MM_F16;
        case GGML_TYPE_BF16: return MM_BF16;
        case GGML_TYPE_Q8_0: return MM_Q8_0;
        case GGML_TYPE_Q4_0: return MM_Q4_0;
        case GGML_TYPE_Q4_1: return MM_Q4_1;
        case GGML_TYPE_Q5_0: return MM_Q5_0;
        case GGML_TYPE_Q5_1: return MM_Q5_1;
        case GGML_TYPE_IQ4_NL: return MM_IQ4_NL;
        case GGML_TYPE_Q2_K: return MM_Q2_K;
        case GGML_TYPE_Q3_K: return MM_Q3_K;
        case GGML_TYPE_Q4_K: return MM_Q4_K;
        case GGML_TYPE_Q5_K: return MM_Q5_K;
        case GGML_TYPE_Q6_K: return MM_Q6_K;
        case GGML_TYPE_IQ4_XS: return MM_IQ4_XS;
        case GGML_TYPE_TQ1_0: return MM_TQ1_0;
        case GGML_TYPE_TQ2_0: return MM_TQ2_0;
        case GGML_TYPE_IQ2_XXS: return MM_IQ2_XXS;
        case GGML_TYPE_IQ2_XS: return MM_IQ2_XS;
        case GGML_TYPE_IQ2_S: return MM_IQ2_S;
        case GGML_TYPE_IQ1_S: return MM_IQ1_S;
        case GGML_TYPE_IQ1_M: return MM_IQ1_M;
        case GGML_TYPE_IQ3_XXS: return MM_IQ3_XXS;
        case GGML_TYPE_IQ3_S: return MM_IQ3_S;
        case GGML_TYPE_Q4_0_R16: return MM_Q4_0_R16;
        case GGML_TYPE_Q8_0_R16: return MM_Q8_0_R16;
        case GGML_TYPE_Q4_K_R16: return MM_Q4_K_R16;
        case GGML_TYPE_Q6_K_R16: return MM_Q6_K_R16;
        case GGML_TYPE_IQ4_NL_R16: return MM_IQ4_NL_R16;
        case GGML_TYPE_Q5_0_R16: return MM_Q5_0_R16;
        default: return -1;
    }
}

bool has_mm_kernel(enum ggml_type type) { return mm_index(type) >= 0; }

mm_type mm_type_of(enum ggml_type type) {
    const int i = mm_index(type);
    if (i < 0) GGML_ABORT("no CPU matmul kernel for weight type %s", ggml_type_name(type));
    return (mm_type) i;
}

enum ggml_type mm_vec_dot_type(enum ggml_type type) {
    const int i = mm_index(type);
    if (i == MM_Q4_0_R16 || i == MM_Q8_0_R16 || i == MM_IQ4_NL_R16 || i == MM_Q5_0_R16) return GGML_TYPE_Q8_0;
    if (i >= MM_Q2_K) return GGML_TYPE_Q8_K; // the k-quants, iq4_xs, tq1_0, tq2_0, q4_K_r16, q6_K_r16
    if (i >= MM_Q8_0) return GGML_TYPE_Q8_0;
    return GGML_TYPE_F32;
}

} // namespace kvg

using namespace kvg;

// ---- vec_dot: x is a row of the weight type, y a row of its vec_dot_type -------------------
template <mm_type T>
static void vec_dot(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc) {
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    if (nrc != 1) GGML_ABORT("vec_dot: nrc = %d, only 1 row per call is supported", nrc);
    const int64_t blck = T >= MM_Q2_K ? QK_K : T >= MM_Q8_0 ? QK8_0 : 1;
    if (n % blck != 0) GGML_ABORT("vec_dot: n = %d is not a multiple of %lld", n, (long long) blck);
    mm_tile_args a = {n, (const char *) x, 0, (const char *) y, 0, s, 1, false};
    cpu_active_kernels().mm[T].tile[1][1](a);
}

static void from_f32(const float * x, void * y, int64_t k) { std::memcpy(y, x, k * sizeof(float)); }
static void from_f16(const float * x, void * y, int64_t k) { ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, k); }
static void from_bf16(const float * x, void * y, int64_t k) { ggml_fp32_to_bf16_row(x, (ggml_bf16_t *) y, k); }
static void from_q8_0(const float * x, void * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    cpu_active_kernels().quantize_q8_0(x, y, k);
}
static void from_q8_K(const float * x, void * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    cpu_active_kernels().quantize_q8_K(x, y, k);
}
static void from_q4_0(const float * x, void * y, int64_t k) { quantize_row_q4_0_ref(x, (block_q4_0 *) y, k); }

// ggml's conversion: C's float -> int (toward zero); f32 -> i32 ggml_cpy does the same
static void from_i32(const float * x, void * y, int64_t k) {
    for (int64_t i = 0; i < k; ++i) ((int32_t *) y)[i] = (int32_t) x[i];
}

// the type's encoder (quants-encode.cpp) is its from_float too
template <mm_type T> static void set_block_type(ggml_type_traits_cpu * t, ggml_type type) {
    t[type] = {ggml_get_type_traits(type)->from_float_ref, vec_dot<T>, mm_vec_dot_type(type), 1};
}

// The public traits of F16 and BF16 are ggml's: rows of the type dotted with rows of the
// same type (programs size their activation buffers by it). The matmul kernels dot them
// with f32 activations instead (mm_vec_dot_type).
template <typename T, float (*widen)(T)>
static void vec_dot_same(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc) {
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    if (nrc != 1) GGML_ABORT("vec_dot: nrc = %d, only 1 row per call is supported", nrc);
    const T * a = (const T *) x, * b = (const T *) y;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += (double) widen(a[i]) * (double) widen(b[i]);
    *s = (float) sum;
}

// kvgraph: q8_K rows dotted with q8_K rows (ggml has no vec_dot for q8_K; with one, programs
// that dot every encodable type with its vec_dot_type also run for q8_K).
static void vec_dot_q8_K(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc) {
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    if (nrc != 1) GGML_ABORT("vec_dot: nrc = %d, only 1 row per call is supported", nrc);
    if (n % QK_K != 0) GGML_ABORT("vec_dot: n = %d is not a multiple of %d", n, QK_K);
    const block_q8_K * a = (const block_q8_K *) x, * b = (const block_q8_K *) y;
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; ++i) {
        int32_t acc = 0;
        for (int j = 0; j < QK_K; ++j) acc += a[i].qs[j] * b[i].qs[j];
        sum += a[i].d * b[i].d * (float) acc;
    }
    *s = sum;
}

static const ggml_type_traits_cpu * make_cpu_traits() {
    static ggml_type_traits_cpu t[kvg::TYPE_COUNT] = {};
    t[GGML_TYPE_F32]  = {from_f32, vec_dot<MM_F32>, GGML_TYPE_F32, 1};
    t[GGML_TYPE_F16]  = {from_f16, vec_dot_same<ggml_fp16_t, ggml_fp16_to_fp32>, GGML_TYPE_F16, 1};
    t[GGML_TYPE_BF16] = {from_bf16, vec_dot_same<ggml_bf16_t, ggml_bf16_to_fp32>, GGML_TYPE_BF16, 1};
    t[GGML_TYPE_Q8_0] = {from_q8_0, vec_dot<MM_Q8_0>, GGML_TYPE_Q8_0, 1};
    t[GGML_TYPE_Q4_0] = {from_q4_0, vec_dot<MM_Q4_0>, GGML_TYPE_Q8_0, 1};
    set_block_type<MM_Q4_1>(t, GGML_TYPE_Q4_1);
    set_block_type<MM_Q5_0>(t, GGML_TYPE_Q5_0);
    set_block_type<MM_Q5_1>(t, GGML_TYPE_Q5_1);
    set_block_type<MM_IQ4_NL>(t, GGML_TYPE_IQ4_NL);
    set_block_type<MM_Q2_K>(t, GGML_TYPE_Q2_K);
    set_block_type<MM_Q3_K>(t, GGML_TYPE_Q3_K);
    set_block_type<MM_Q4_K>(t, GGML_TYPE_Q4_K);
    set_block_type<MM_Q5_K>(t, GGML_TYPE_Q5_K);
    set_block_type<MM_Q6_K>(t, GGML_TYPE_Q6_K);
    set_block_type<MM_IQ4_XS>(t, GGML_TYPE_IQ4_XS);
    set_block_type<MM_TQ1_0>(t, GGML_TYPE_TQ1_0);
    set_block_type<MM_TQ2_0>(t, GGML_TYPE_TQ2_0);
    set_block_type<MM_IQ2_XXS>(t, GGML_TYPE_IQ2_XXS);
    set_block_type<MM_IQ2_XS>(t, GGML_TYPE_IQ2_XS);
    set_block_type<MM_IQ2_S>(t, GGML_TYPE_IQ2_S);
    set_block_type<MM_IQ1_S>(t, GGML_TYPE_IQ1_S);
    set_block_type<MM_IQ1_M>(t, GGML_TYPE_IQ1_M);
    set_block_type<MM_IQ3_XXS>(t, GGML_TYPE_IQ3_XXS);
    set_block_type<MM_IQ3_S>(t, GGML_TYPE_IQ3_S);
    t[GGML_TYPE_Q8_K] = {from_q8_K, vec_dot_q8_K, GGML_TYPE_Q8_K, 1};
    t[GGML_TYPE_Q4_0_R16] = {nullptr, nullptr, GGML_TYPE_Q8_0, 1}; // ggml_mul_mat's weights only
    t[GGML_TYPE_Q8_0_R16] = {nullptr, nullptr, GGML_TYPE_Q8_0, 1};
    t[GGML_TYPE_Q4_K_R16] = {nullptr, nullptr, GGML_TYPE_Q8_K, 1};
    t[GGML_TYPE_Q6_K_R16] = {nullptr, nullptr, GGML_TYPE_Q8_K, 1};
    t[GGML_TYPE_IQ4_NL_R16] = {nullptr, nullptr, GGML_TYPE_Q8_0, 1};
    t[GGML_TYPE_Q5_0_R16] = {nullptr, nullptr, GGML_TYPE_Q8_0, 1};
    t[GGML_TYPE_I32]  = {from_i32, nullptr, GGML_TYPE_F32, 1};
    return t;
}

const ggml_type_traits_cpu * ggml_get_type_traits_cpu(enum ggml_type type) {
    static const ggml_type_traits_cpu * table = make_cpu_traits();
    if ((int) type < 0 || (int) type >= kvg::TYPE_COUNT) GGML_ABORT("ggml_get_type_traits_cpu: invalid type %d", (int) type);
    return &table[type];
}

// ---- conversion utilities (ggml-cpu.h) ------------------------------------------------------
// The vector paths' converters where the active table has them (whole groups of 16 for bf16),
// the scalar row functions of ggml.h for the rest: the same values either way.

void ggml_cpu_fp32_to_fp32(const float * x, float * y, int64_t n) {
    if (x != y) std::memmove(y, x, (size_t) n * sizeof(float));
}

void ggml_cpu_fp32_to_i32(const float * x, int32_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (int32_t) x[i];
}

void ggml_cpu_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n) { ggml_fp32_to_fp16_row(x, y, n); }

void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n) { kvg::cpu_active_kernels().f16_to_f32(x, y, n); }

void ggml_cpu_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n) {
    const auto pack = kvg::cpu_active_kernels().mm[kvg::MM_BF16].pack_mv;
    const int64_t whole = pack ? n / 16 * 16 : 0;
    if (whole > 0) pack(x, y, whole);
    ggml_fp32_to_bf16_row(x + whole, y + whole, n - whole);
}

void ggml_cpu_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n) { ggml_bf16_to_fp32_row(x, y, n); }
