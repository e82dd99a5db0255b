// kvgraph tensor library: ggml's context API (names, structs and semantics of the
// subset we implement) plus explicit dependency edges between ops that touch the
// same memory. Header compiles as C99 and as C++.
//
// Notation, as in ggml: a shape is written [ne0, ne1, ne2, ne3], innermost dimension first
// (ne[0] counts the elements of a row, adjacent in memory in a contiguous tensor); nb[i]
// are strides in bytes. "Op conventions" below has the rest. kvgraph's own additions
// (dependency edges, the graph validator, flash attention's kv_len, packed heads and
// grouped keys, the scheduler mode) are marked "kvgraph".
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// A shared build compiles with hidden visibility: what is declared GGML_API is what the library
// exports (a static build or a program using the headers is unaffected).
#if defined(__GNUC__)
#define GGML_API __attribute__((visibility("default")))
#else
#define GGML_API
#endif

#define GGML_MAX_DIMS 4
#define GGML_MAX_PARAMS 2048
#define GGML_MAX_SRC 10
#define GGML_MAX_N_THREADS 512
#define GGML_MAX_OP_PARAMS 64
#define GGML_MAX_NAME 64
#define GGML_DEFAULT_N_THREADS 4
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN 16

// rope modes (ggml's values); kvgraph's CPU computes NORMAL and NEOX (see ggml-ops-ext.h)
#define GGML_ROPE_TYPE_NORMAL 0
#define GGML_ROPE_TYPE_NEOX 2
#define GGML_ROPE_TYPE_MROPE 8
#define GGML_ROPE_TYPE_VISION 24
#define GGML_ROPE_TYPE_IMROPE 40
#define GGML_MROPE_SECTIONS 4

// Declares locals prefix0..prefix3 = pointer->array[0..3] (ggml's helper for kernels).
#define GGML_TENSOR_LOCALS_1(type, prefix, pointer, array)      \
    const type prefix##0 = (pointer) ? (pointer)->array[0] : 0; \
    GGML_UNUSED(prefix##0);
#define GGML_TENSOR_LOCALS_2(type, prefix, pointer, array)      \
    GGML_TENSOR_LOCALS_1(type, prefix, pointer, array)          \
    const type prefix##1 = (pointer) ? (pointer)->array[1] : 0; \
    GGML_UNUSED(prefix##1);
#define GGML_TENSOR_LOCALS_3(type, prefix, pointer, array)      \
    GGML_TENSOR_LOCALS_2(type, prefix, pointer, array)          \
    const type prefix##2 = (pointer) ? (pointer)->array[2] : 0; \
    GGML_UNUSED(prefix##2);
#define GGML_TENSOR_LOCALS(type, prefix, pointer, array)        \
    GGML_TENSOR_LOCALS_3(type, prefix, pointer, array)          \
    const type prefix##3 = (pointer) ? (pointer)->array[3] : 0; \
    GGML_UNUSED(prefix##3);
#define GGML_TENSOR_UNARY_OP_LOCALS                                                    \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne)                                         \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb) GGML_TENSOR_LOCALS(int64_t, ne, dst, ne) \
        GGML_TENSOR_LOCALS(size_t, nb, dst, nb)
#define GGML_TENSOR_BINARY_OP_LOCALS \
    GGML_TENSOR_UNARY_OP_LOCALS      \
    GGML_TENSOR_LOCALS(int64_t, ne1, src1, ne) GGML_TENSOR_LOCALS(size_t, nb1, src1, nb)

#define GGML_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))

// For programming errors (bad shapes, ids out of range): one line on stderr, "kvgraph fatal
// error: <message> [<file> line <n>]", then abort().
#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x) \
    do { if (!(x)) ggml_abort(__FILE__, __LINE__, "assertion failed: %s", #x); } while (0)
#define GGML_UNUSED(x) (void)(x)

#ifdef __GNUC__
__attribute__((noreturn, format(printf, 3, 4)))
#endif
GGML_API void ggml_abort(const char * file, int line, const char * fmt, ...);

enum ggml_status {
    GGML_STATUS_ALLOC_FAILED = -2,
    GGML_STATUS_FAILED = -1,
    GGML_STATUS_SUCCESS = 0,
    GGML_STATUS_ABORTED = 1,
};

typedef uint16_t ggml_fp16_t;
typedef struct { uint16_t bits; } ggml_bf16_t;

GGML_API float       ggml_fp16_to_fp32(ggml_fp16_t x);
GGML_API ggml_fp16_t ggml_fp32_to_fp16(float x);
GGML_API void        ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
GGML_API void        ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
GGML_API ggml_bf16_t ggml_fp32_to_bf16(float x);
GGML_API float       ggml_bf16_to_fp32(ggml_bf16_t x);
GGML_API void        ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n);
GGML_API void        ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n);

// Values are part of the GGUF file format.
enum ggml_type {
    GGML_TYPE_F32  = 0,
    GGML_TYPE_F16  = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,  // ggml's; kvgraph neither reads nor encodes it
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15, // activations for the k-quants (not a file weight type)
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_I8   = 24,
    GGML_TYPE_I16  = 25,
    GGML_TYPE_I32  = 26,
    GGML_TYPE_I64  = 27,
    GGML_TYPE_BF16 = 30,
    // ggml 0.21's other formats, named so that programs written for ggml build; kvgraph
    // neither reads nor encodes them (ggml_get_type_traits: ggml's block and byte sizes, so
    // tensors of them can be made; no conversions, no kernels, GGUF files refused)
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS  = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S   = 19,
    GGML_TYPE_IQ3_S   = 21,
    GGML_TYPE_IQ2_S   = 22,
    GGML_TYPE_IQ4_XS  = 23,
    GGML_TYPE_F64     = 28,
    GGML_TYPE_IQ1_M   = 29,
    GGML_TYPE_TQ1_0   = 34,
    GGML_TYPE_TQ2_0   = 35,
    GGML_TYPE_MXFP4   = 39,
    GGML_TYPE_NVFP4   = 40,
    GGML_TYPE_Q1_0    = 41,
    GGML_TYPE_Q2_0    = 42,
    GGML_TYPE_COUNT = 43,
    // kvgraph: q4_0, q8_0, q4_K, q6_K, iq4_nl and q5_0 matrices with their rows interleaved by 16 (ggml_kvg_repack
    // in ggml-cpu.h), in-memory layouts only: past ggml's count, so programs looping over
    // ggml's types do not meet them, and GGUF readers and writers refuse them (kvgraph's own
    // included)
    GGML_TYPE_Q4_0_R16 = 43,
    GGML_TYPE_Q8_0_R16 = 44,
    GGML_TYPE_Q4_K_R16 = 45,
    GGML_TYPE_Q6_K_R16 = 46,
    GGML_TYPE_IQ4_NL_R16 = 47,
    GGML_TYPE_Q5_0_R16 = 48,
};

#define QK4_0 32
#define QK8_0 32
#define QK_K 256 // values per k-quant super-block (q2_K..q6_K, q8_K, iq4_xs, tq1_0, tq2_0, iq3_xxs, iq3_s)

enum ggml_op { // ggml 0.21's values, in ggml's order; kvgraph implements the ones with a constructor below
    GGML_OP_NONE, GGML_OP_DUP, GGML_OP_ADD, GGML_OP_ADD_ID, GGML_OP_ADD1, GGML_OP_ACC, GGML_OP_SUB,
    GGML_OP_MUL, GGML_OP_DIV, GGML_OP_SQR, GGML_OP_SQRT, GGML_OP_LOG, GGML_OP_SIN, GGML_OP_COS, GGML_OP_SUM,
    GGML_OP_SUM_ROWS, GGML_OP_CUMSUM, GGML_OP_MEAN, GGML_OP_ARGMAX, GGML_OP_COUNT_EQUAL, GGML_OP_REPEAT,
    GGML_OP_REPEAT_BACK, GGML_OP_CONCAT, GGML_OP_SILU_BACK, GGML_OP_NORM, GGML_OP_RMS_NORM,
    GGML_OP_RMS_NORM_BACK, GGML_OP_GROUP_NORM, GGML_OP_L2_NORM, GGML_OP_MUL_MAT, GGML_OP_MUL_MAT_ID,
    GGML_OP_OUT_PROD, GGML_OP_SCALE, GGML_OP_SET, GGML_OP_CPY, GGML_OP_CONT, GGML_OP_RESHAPE, GGML_OP_VIEW,
    GGML_OP_PERMUTE, GGML_OP_TRANSPOSE, GGML_OP_GET_ROWS, GGML_OP_GET_ROWS_BACK, GGML_OP_SET_ROWS,
    GGML_OP_DIAG, GGML_OP_DIAG_MASK_INF, GGML_OP_DIAG_MASK_ZERO, GGML_OP_SOFT_MAX, GGML_OP_SOFT_MAX_BACK,
    GGML_OP_ROPE, GGML_OP_ROPE_BACK, GGML_OP_CLAMP, GGML_OP_CONV_TRANSPOSE_1D, GGML_OP_IM2COL,
    GGML_OP_IM2COL_BACK, GGML_OP_IM2COL_3D, GGML_OP_COL2IM_1D, GGML_OP_CONV_2D, GGML_OP_CONV_3D,
    GGML_OP_CONV_2D_DW, GGML_OP_CONV_TRANSPOSE_2D, GGML_OP_POOL_1D, GGML_OP_POOL_2D, GGML_OP_POOL_2D_BACK,
    GGML_OP_UPSCALE, GGML_OP_PAD, GGML_OP_PAD_REFLECT_1D, GGML_OP_ROLL, GGML_OP_ARANGE,
    GGML_OP_TIMESTEP_EMBEDDING, GGML_OP_ARGSORT, GGML_OP_TOP_K, GGML_OP_LEAKY_RELU, GGML_OP_TRI,
    GGML_OP_FILL, GGML_OP_FLASH_ATTN_EXT, GGML_OP_FLASH_ATTN_BACK, GGML_OP_SSM_CONV, GGML_OP_SSM_SCAN,
    GGML_OP_WIN_PART, GGML_OP_WIN_UNPART, GGML_OP_GET_REL_POS, GGML_OP_ADD_REL_POS, GGML_OP_RWKV_WKV6,
    GGML_OP_GATED_LINEAR_ATTN, GGML_OP_RWKV_WKV7, GGML_OP_SOLVE_TRI, GGML_OP_GATED_DELTA_NET,
    GGML_OP_LIGHTNING_INDEXER, GGML_OP_DSV4_HC_COMB, GGML_OP_DSV4_HC_PRE, GGML_OP_DSV4_HC_POST,
    GGML_OP_UNARY, GGML_OP_MAP_CUSTOM1, GGML_OP_MAP_CUSTOM2, GGML_OP_MAP_CUSTOM3, GGML_OP_CUSTOM,
    GGML_OP_CROSS_ENTROPY_LOSS, GGML_OP_CROSS_ENTROPY_LOSS_BACK, GGML_OP_OPT_STEP_ADAMW,
    GGML_OP_OPT_STEP_SGD, GGML_OP_GLU, GGML_OP_COUNT,
};

enum ggml_unary_op { // ggml 0.21's values
    GGML_UNARY_OP_ABS, GGML_UNARY_OP_SGN, GGML_UNARY_OP_NEG, GGML_UNARY_OP_STEP, GGML_UNARY_OP_TANH,
    GGML_UNARY_OP_ELU, GGML_UNARY_OP_RELU, GGML_UNARY_OP_SIGMOID, GGML_UNARY_OP_GELU,
    GGML_UNARY_OP_GELU_QUICK, GGML_UNARY_OP_SILU, GGML_UNARY_OP_HARDSWISH, GGML_UNARY_OP_HARDSIGMOID,
    GGML_UNARY_OP_EXP, GGML_UNARY_OP_EXPM1, GGML_UNARY_OP_SOFTPLUS, GGML_UNARY_OP_GELU_ERF,
    GGML_UNARY_OP_XIELU, GGML_UNARY_OP_FLOOR, GGML_UNARY_OP_CEIL, GGML_UNARY_OP_ROUND, GGML_UNARY_OP_TRUNC,
    GGML_UNARY_OP_COUNT,
};

enum ggml_tensor_flag {
    GGML_TENSOR_FLAG_INPUT  = 1,
    GGML_TENSOR_FLAG_OUTPUT = 2,
    GGML_TENSOR_FLAG_PARAM  = 4,
    GGML_TENSOR_FLAG_LOSS   = 8,
    GGML_TENSOR_FLAG_COMPUTE = 16, // (ggml's; kvgraph computes every node of a graph)
};

// Why an op must run after another one (see "Dependency edges" below).
enum ggml_dep_kind {
    GGML_DEP_RAW    = 0, // reads bytes an earlier op wrote
    GGML_DEP_WAR    = 1, // writes bytes an earlier op still has to read
    GGML_DEP_WAW    = 2, // writes bytes an earlier op wrote
    GGML_DEP_MANUAL = 3, // added by ggml_add_control_dep (side effects we cannot see)
};

struct ggml_tensor;

// A control edge: the owning tensor's op runs after `tensor`'s op.
struct ggml_dep {
    struct ggml_tensor * tensor;
    enum ggml_dep_kind   kind;
};

struct ggml_tensor {
    enum ggml_type type;
    struct ggml_backend_buffer * buffer; // the backend buffer holding data (ggml-backend.h), or NULL

    int64_t ne[GGML_MAX_DIMS]; // number of elements per dim, ne[0] innermost
    size_t  nb[GGML_MAX_DIMS]; // stride in bytes: nb[0] = type_size, nb[i] = nb[i-1]*ne[i-1] when contiguous

    enum ggml_op op;
    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;

    struct ggml_tensor * src[GGML_MAX_SRC]; // data edges

    struct ggml_tensor * view_src;  // always the root tensor that owns the bytes
    size_t               view_offs; // byte offset inside view_src

    void * data;
    char name[GGML_MAX_NAME];
    void * extra;

    // Control edges: this op runs after each deps[i].tensor that is in the same graph.
    // Recorded at op creation (and by ggml_add_control_dep); the array is owned by the
    // context that created this tensor, whatever context recorded the edge, and lives
    // until that context is freed or reset.
    struct ggml_dep * deps;
    int32_t           n_deps;
    void *            impl; // library-internal per-tensor state; do not touch
};

static const size_t GGML_TENSOR_SIZE = sizeof(struct ggml_tensor);

typedef bool (*ggml_abort_callback)(void * data);

// ---- logging (ggml's levels and callback) ----
// Every message of the library (errors it returns, warnings) goes through the callback;
// the default writes the text to stderr. Aborts (GGML_ABORT) print directly.
enum ggml_log_level {
    GGML_LOG_LEVEL_NONE  = 0,
    GGML_LOG_LEVEL_DEBUG = 1,
    GGML_LOG_LEVEL_INFO  = 2,
    GGML_LOG_LEVEL_WARN  = 3,
    GGML_LOG_LEVEL_ERROR = 4,
    GGML_LOG_LEVEL_CONT  = 5, // continues the previous message
};
typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
// NULL restores the default. Not thread-safe against messages being logged at the same time.
GGML_API void ggml_log_set(ggml_log_callback log_callback, void * user_data);
GGML_API void ggml_log_get(ggml_log_callback * log_callback, void ** user_data);

struct ggml_init_params {
    size_t mem_size;   // arena size in bytes (tensor structs, their data, graphs)
    void * mem_buffer; // an arena of the caller's, kept alive by it; NULL: ggml_init makes one
    bool   no_alloc;   // tensors get their struct only; their data is placed later
};

struct ggml_context;
struct ggml_cgraph;

// ---- type traits -------------------------------------------------------------
typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k);

struct ggml_type_traits {
    const char * type_name;
    int64_t      blck_size;
    int64_t      blck_size_interleave;
    size_t       type_size;
    bool         is_quantized;
    ggml_to_float_t   to_float;
    ggml_from_float_t from_float_ref;
};

// As ggml, F32 has no to_float (and from_float_ref copies); types kvgraph cannot read have
// ggml's sizes and no conversions.
GGML_API const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);

// ---- quantization ------------------------------------------------------------
// Encoding f32 into a type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, IQ3_XXS, IQ3_S and Q8_K (bit-compatible with ggml's block layouts). The same
// encoders are the types' from_float_ref (ggml_get_type_traits) and from_float
// (ggml_get_type_traits_cpu; Q8_0 and Q8_K use a SIMD path there). They choose each block's
// scale (and min) by least squares over candidate scales, not by ggml's algorithms: bytes
// differ from ggml's, values decode the same way in both.
// kvgraph's encoders keep no tables: init and free do nothing (safe from any thread).
GGML_API void ggml_quantize_init(enum ggml_type type);
GGML_API void ggml_quantize_free(void);
// true for the types that ggml cannot encode without an importance matrix: IQ2_XXS, IQ2_XS,
// IQ1_S, IQ1_M (ggml answers false for IQ1_M but its encoder asserts one); ggml_quantize_chunk
// refuses them without one
GGML_API bool ggml_quantize_requires_imatrix(enum ggml_type type);
// Encodes nrows rows of n_per_row values (a multiple of the block size) starting at value
// `start` of src (a multiple of n_per_row) into dst, at the rows' place in a tensor of such
// rows (dst + start / n_per_row * ggml_row_size(type, n_per_row)); returns the bytes
// written, nrows * ggml_row_size(type, n_per_row). imatrix: n_per_row importance weights
// (the error of column j counts imatrix[j] times; NULL: all 1), used by Q4_1, Q5_0, Q5_1,
// IQ4_NL, IQ4_XS, the k-quants, IQ3_XXS/IQ3_S, TQ1_0/TQ2_0 (ggml ignores it for those two) and IQ2_XXS, IQ2_XS,
// IQ2_S, IQ1_S, IQ1_M (required but for IQ2_S; their encoders are a slow grid search, for
// test-size tensors), ignored by the others. A type kvgraph cannot encode (MXFP4, ...), or
// one requiring an importance matrix given none, aborts with a message naming it (ggml aborts too).
// Thread-safe: chunks of one tensor may be encoded in parallel.
GGML_API size_t ggml_quantize_chunk(
        enum ggml_type   type,
        const float    * src,
        void           * dst,
        int64_t          start,      // first value of src to encode (a multiple of n_per_row)
        int64_t          nrows,
        int64_t          n_per_row,
        const float    * imatrix);   // n_per_row weights, or NULL

// ---- misc --------------------------------------------------------------------
GGML_API void    ggml_time_init(void);
GGML_API int64_t ggml_time_ms(void);
GGML_API int64_t ggml_time_us(void);

GGML_API int64_t ggml_nelements(const struct ggml_tensor * tensor);
GGML_API int64_t ggml_nrows(const struct ggml_tensor * tensor);
GGML_API size_t  ggml_nbytes(const struct ggml_tensor * tensor);
GGML_API int64_t ggml_blck_size(enum ggml_type type);
GGML_API size_t  ggml_type_size(enum ggml_type type);
GGML_API size_t  ggml_row_size(enum ggml_type type, int64_t ne); // bytes of ne elements
GGML_API const char * ggml_type_name(enum ggml_type type);
GGML_API const char * ggml_op_name(enum ggml_op op);
GGML_API const char * ggml_op_desc(const struct ggml_tensor * t); // unary ops show their kind
GGML_API const char * ggml_unary_op_name(enum ggml_unary_op op);
GGML_API size_t  ggml_element_size(const struct ggml_tensor * tensor);
GGML_API bool    ggml_is_quantized(enum ggml_type type);

GGML_API bool ggml_is_transposed(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_permuted(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_empty(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_scalar(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_vector(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_matrix(const struct ggml_tensor * tensor);
GGML_API int  ggml_n_dims(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_rows(const struct ggml_tensor * tensor); // rows dense, rows may be strided
GGML_API bool ggml_are_same_shape(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_are_same_stride(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1);

GGML_API size_t ggml_tensor_overhead(void);

// ---- context -----------------------------------------------------------------
GGML_API struct ggml_context * ggml_init(struct ggml_init_params params); // NULL on failure
GGML_API void   ggml_reset(struct ggml_context * ctx);
GGML_API void   ggml_free(struct ggml_context * ctx);
GGML_API size_t ggml_used_mem(const struct ggml_context * ctx);
GGML_API bool   ggml_get_no_alloc(struct ggml_context * ctx);
GGML_API void   ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc);
GGML_API void * ggml_get_mem_buffer(const struct ggml_context * ctx);
GGML_API size_t ggml_get_mem_size(const struct ggml_context * ctx);
GGML_API size_t ggml_get_max_tensor_size(const struct ggml_context * ctx);

// Tensors of a context, in creation order.
GGML_API struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
GGML_API struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);

// ---- tensors -----------------------------------------------------------------
// A new tensor of the given type and shape [ne0, ...] (n_dims 1..4; the missing dims are
// 1), contiguous: nb[0] = the type's size, nb[i] = nb[i-1]*ne[i-1] (in whole blocks for
// quantized types, so ne0 must be a multiple of the block size). Its data lives in the
// context's memory, or is NULL in a no_alloc context until a buffer is assigned.
GGML_API struct ggml_tensor * ggml_new_tensor(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int                   n_dims,
        const int64_t       * ne);
GGML_API struct ggml_tensor * ggml_new_tensor_1d(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int64_t               ne0);
GGML_API struct ggml_tensor * ggml_new_tensor_2d(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int64_t               ne0,
        int64_t               ne1);
GGML_API struct ggml_tensor * ggml_new_tensor_3d(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2);
GGML_API struct ggml_tensor * ggml_new_tensor_4d(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3);
GGML_API struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value);
GGML_API struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value);
GGML_API struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src);
GGML_API struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);

GGML_API const char *         ggml_get_name(const struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name);
#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
GGML_API struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...);

GGML_API void ggml_set_input(struct ggml_tensor * tensor);
GGML_API void ggml_set_output(struct ggml_tensor * tensor);

GGML_API struct ggml_tensor * ggml_set_zero(struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_set_i32(struct ggml_tensor * tensor, int32_t value);
GGML_API struct ggml_tensor * ggml_set_f32(struct ggml_tensor * tensor, float value);
// The indices (i0, i1, i2, i3) of the i-th element in logical order (ne[0] fastest).
GGML_API void ggml_unravel_index(
        const struct ggml_tensor * tensor,
        int64_t                    i,
        int64_t                  * i0,
        int64_t                  * i1,
        int64_t                  * i2,
        int64_t                  * i3);
// *_1d index over the elements in logical (row-major, ne[0] fastest) order, honouring strides.
GGML_API int32_t ggml_get_i32_1d(const struct ggml_tensor * tensor, int i);
GGML_API void    ggml_set_i32_1d(const struct ggml_tensor * tensor, int i, int32_t value);
GGML_API int32_t ggml_get_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_API void    ggml_set_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value);
GGML_API float   ggml_get_f32_1d(const struct ggml_tensor * tensor, int i);
GGML_API void    ggml_set_f32_1d(const struct ggml_tensor * tensor, int i, float value);
GGML_API float   ggml_get_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_API void    ggml_set_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value);
GGML_API void *  ggml_get_data(const struct ggml_tensor * tensor);
GGML_API float * ggml_get_data_f32(const struct ggml_tensor * tensor);

// ---- ops -----------------------------------------------------------------------
// Op conventions, used by every op below:
// - Shapes are written [ne0, ne1, ne2, ne3] with ne[0] the innermost dimension (the
//   elements of one row, adjacent in memory for a contiguous tensor); trailing dims of
//   size 1 may be left out. x[i0, i1, i2, i3] is the element at those indices.
// - A "row" is the ne[0] elements with the same (i1, i2, i3).
// - Unless said otherwise an op returns a new tensor (fresh memory, contiguous). An
//   _inplace variant returns a view of a with the same shape and writes the result into
//   a's bytes.
// - Broadcasting "b over a": every a->ne[i] is a multiple of b->ne[i], and index i of a
//   reads index i % b->ne[i] of b. mul_mat and flash attention broadcast differently
//   (consecutive blocks, see there).
// - Shape and type errors are programming errors: the constructor (or the kernel, when the
//   graph runs) aborts with a message naming the tensors.
// - An op whose result is a view of an existing tensor writes into that tensor's bytes
//   (cpy, set_rows, *_inplace): the context records dependency edges for it (see
//   "dependency edges" below; a kvgraph extension).

// A copy of a: same type and shape, contiguous. _inplace: a view of a (copies nothing).
GGML_API struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Elementwise a + b, a - b, a * b, a / b, computed in f32:
//   a:      [ne0, ne1, ne2, ne3]   F32, F16 or BF16, any strides
//   b:      broadcast over a       F32, F16 or BF16, any strides
//   result: a's shape and type
GGML_API struct ggml_tensor * ggml_add(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_add_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_sub(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_sub_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_mul(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_mul_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_div(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);
GGML_API struct ggml_tensor * ggml_div_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);

// Elementwise maps: a (F32, F16 or BF16, any shape and strides) -> a's shape and type.
// sqr: x^2, sqrt: sqrt(x), scale: x * s.
GGML_API struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
GGML_API struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s);

// Unary activations (GGML_OP_UNARY), elementwise: a (F32, F16 or BF16, any shape and
// strides) -> a's shape and type. ggml_unary(a, op) applies any enum ggml_unary_op that has
// a constructor below. relu: max(x, 0); gelu: the tanh approximation
// 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); silu: x sigmoid(x).
GGML_API struct ggml_tensor * ggml_unary(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_unary_op    op);
GGML_API struct ggml_tensor * ggml_unary_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_unary_op    op);
GGML_API struct ggml_tensor * ggml_relu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_relu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// ggml's other unary ops, same rules, ggml's definitions:
// abs, sgn (-1/0/1), neg, step (x > 0), tanh, elu (x > 0 ? x : e^x - 1), sigmoid, gelu_quick
// (x sigmoid(1.702x)), hardswish (x min(1, max(0, (x+3)/6))), hardsigmoid, exp, expm1,
// softplus (log(1 + e^x), x above 20 as is), gelu_erf (0.5x(1 + erf(x/sqrt 2))), floor,
// ceil, round (half away from zero), trunc.
#define GGML_KVG_UNARY_DECL(name)                                                                \
    GGML_API struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a); \
    GGML_API struct ggml_tensor * ggml_##name##_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_KVG_UNARY_DECL(abs)
GGML_KVG_UNARY_DECL(sgn)
GGML_KVG_UNARY_DECL(neg)
GGML_KVG_UNARY_DECL(step)
GGML_KVG_UNARY_DECL(tanh)
GGML_KVG_UNARY_DECL(elu)
GGML_KVG_UNARY_DECL(sigmoid)
GGML_KVG_UNARY_DECL(gelu_quick)
GGML_KVG_UNARY_DECL(hardswish)
GGML_KVG_UNARY_DECL(hardsigmoid)
GGML_KVG_UNARY_DECL(exp)
GGML_KVG_UNARY_DECL(expm1)
GGML_KVG_UNARY_DECL(softplus)
GGML_KVG_UNARY_DECL(gelu_erf)
GGML_KVG_UNARY_DECL(floor)
GGML_KVG_UNARY_DECL(ceil)
GGML_KVG_UNARY_DECL(round)
GGML_KVG_UNARY_DECL(trunc)
#undef GGML_KVG_UNARY_DECL

// ---- reductions (a F32, F16 or BF16, any strides) ----
// sum_rows: the sum of each row, [ne0, ne1, ne2, ne3] -> [1, ne1, ne2, ne3], a's type.
GGML_API struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a);
// argmax: a F32 matrix [n, r] -> I32 [r], the index of each row's maximum; of tied maxima
// the last (as ggml); NaNs never win.
GGML_API struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a);
// sum: all elements -> [1], a's type. mean: the mean of each row -> F32 [1, ne1, ne2, ne3].
GGML_API struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a);
// a tiled to b's shape (only b's shape is used; each b->ne[i] a multiple of a->ne[i]):
// result[i0, i1, i2, i3] = a[i0 % a->ne[0], ...], a's type. Returns a itself when the
// shapes are equal (as ggml).
GGML_API struct ggml_tensor * ggml_repeat(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);  // only its shape is used

// ---- generators and rearrangements (F32) ----
// [start, start + step, ...) below stop: ceil((stop - start) / step) values (step != 0).
GGML_API struct ggml_tensor * ggml_arange(struct ggml_context * ctx, float start, float stop, float step);
// timesteps [N] -> [dim, N]: for j < dim/2, cos(t f_j) at j and sin(t f_j) at dim/2 + j, with
// f_j = max_period^(-j / (dim/2)); an odd dim's last value is 0.
GGML_API struct ggml_tensor * ggml_timestep_embedding(
        struct ggml_context * ctx,
        struct ggml_tensor  * timesteps,
        int                   dim,
        int                   max_period);
// dim 0 padded by reflection, p0 in front and p1 behind (each < ne0): [a b c d] -> [b a b c d c].
GGML_API struct ggml_tensor * ggml_pad_reflect_1d(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1);
// Element i of dim d moves to (i + shift_d) mod ne_d (shifts may be negative, |shift| <= ne).
GGML_API struct ggml_tensor * ggml_roll(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   shift0,
        int                   shift1,
        int                   shift2,
        int                   shift3);
// Concatenation along dim (0..3):
//   a:      [ne0, ne1, ne2, ne3]   any type (quantized: dense rows)
//   b:      a's type, every ne[i] equal to a's except ne[dim]
//   result: a's shape with ne[dim] = a->ne[dim] + b->ne[dim], a's type; a's elements first
//           (index i < a->ne[dim] of dim reads a, the rest b at i - a->ne[dim])
GGML_API struct ggml_tensor * ggml_concat(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   dim);

// Convolution, pooling, resampling, padding and windowed attention: ggml-image.h (included at
// the end of this file).

// ---- views: tensors that share a's bytes (no copy, a's type) ----
// reshape: a contiguous -> [ne0, ne1, ...] with the same element count, contiguous.
// ggml_reshape(a, b) takes b's shape (only b's shape is used).
GGML_API struct ggml_tensor * ggml_reshape(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b);  // only its shape is used
GGML_API struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_reshape_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1);
GGML_API struct ggml_tensor * ggml_reshape_3d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2);
GGML_API struct ggml_tensor * ggml_reshape_4d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3);

// view_Nd: the view [ne0, ..] whose element (i0, i1, i2, i3) is at byte
//   offset + i0*nb0 + i1*nb1 + i2*nb2 + i3*nb3   from a's first byte,
// with nb0 = a's element size (elements of a row stay adjacent) and nb1..nb3 given in
// bytes (dims past N get contiguous strides). offset is in bytes too. a may have any
// strides; the view's byte extent must lie inside the bytes of a's root tensor (a itself,
// or the tensor a is a view of), or the call aborts. For a quantized type ne0 must be a
// multiple of the block size.
GGML_API struct ggml_tensor * ggml_view_1d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_view_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        size_t                nb1,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_view_3d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        size_t                nb1,
        size_t                nb2,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_view_4d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3,
        size_t                nb1,
        size_t                nb2,
        size_t                nb3,
        size_t                offset);

// Reorders the dims of a: dim i of a becomes dim axis_i of the result (ne and nb move
// together; axis0..axis3 a permutation of 0..3). Example: a [D, H, T, 1] permuted with
// (0, 2, 1, 3) is [D, T, H, 1]. The result is usually not contiguous (ggml_cont copies it).
GGML_API struct ggml_tensor * ggml_permute(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        int                   axis0,
        int                   axis1,
        int                   axis2,
        int                   axis3);
// Swaps dims 0 and 1: [ne0, ne1, ne2, ne3] -> [ne1, ne0, ne2, ne3] (permute(1, 0, 2, 3)).
GGML_API struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a);

// ---- rows ----
// Gather rows of a at the indices b:
//   a:      [ne0, n_rows, ne2, ne3]   any type kvgraph reads: F32, F16, BF16, I8, I16, I32 or
//                                     a quantized type with dense rows
//   b:      I32 [n, ne2, ne3]         indices into dim 1 of a, each in [0, n_rows)
//   result: [ne0, n, ne2, ne3]        I32 when a is I32, else F32 (converted or dequantized)
// result[:, i, j, k] = a[:, b[i, j, k], j, k]. No broadcasting: b->ne[1] == a->ne[2] and
// b->ne[2] == a->ne[3]. An index out of range aborts when the graph runs.
GGML_API struct ggml_tensor * ggml_get_rows(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // data
        struct ggml_tensor  * b);  // row indices
// Scatter the rows of b into a at the indices c (a[c[i]] = b[i]):
//   a:      [ne0, n_rows, ne2, ne3]   destination: F32, F16, BF16, I8, I16, I32, or a type
//                                     kvgraph encodes (see ggml_quantize_chunk; dense rows)
//   b:      F32 [ne0, n, ne2, ne3]    the rows to write
//   c:      I32 or I64 [n, ne12, ne13]   indices into dim 1 of a, each in [0, n_rows);
//                                     broadcast over b: ne2 % ne12 == 0, ne3 % ne13 == 0
//   result: a view of a (a's shape and type)
// a[:, c[i, j % ne12, k % ne13], j, k] = b[:, i, j, k], converted to a's type; the other
// rows of a keep their bytes. An index out of range aborts when the graph runs.
GGML_API struct ggml_tensor * ggml_set_rows(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // destination
        struct ggml_tensor  * b,   // source rows
        struct ggml_tensor  * c);  // row indices

// ---- masks, softmax, rope ----
// Causal mask: a F32 [n, m, ne2, ne3] -> a's shape; element (i0, i1) of every matrix
// becomes -INF where i0 > n_past + i1, the others are copied.
GGML_API struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
GGML_API struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);

// Softmax of each row: softmax_ext(a, NULL, 1.0f, 0.0f).
GGML_API struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// Softmax of each row of a * scale + slope * mask:
//   a:      F32 [n_kv, n_q, n_head, ne3], dense rows
//   mask:   F16 or F32 [n_kv, >= n_q, ne2m, ne3m], or NULL; row i1 of the mask goes with row
//           i1 of a (rows past n_q unused); broadcast over dims 2 and 3 (n_head % ne2m == 0,
//           ne3 % ne3m == 0)
//   result: a's shape, F32
//   scale:    multiplies a before the mask is added
//   max_bias: 0: slope = 1. Otherwise ALiBi: dim 2 of a is the head h and
//             slope = m0^(h + 1) for h < n2, m1^(2(h - n2) + 1) after, where n2 is the
//             largest power of 2 <= n_head, m0 = 2^(-max_bias / n2), m1 = 2^(-max_bias / (2 n2))
// kvgraph: a row that is -INF everywhere becomes all zeros (not NaN).
GGML_API struct ggml_tensor * ggml_soft_max_ext(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * mask,
        float                 scale,
        float                 max_bias);

// Rotary position embedding: pairs of elements of each row rotated by an angle that grows
// with the token's position.
//   a:      F32 or F16 [head_dim, n_head, n_tokens, ne3]
//   b:      I32 [n_tokens], the position of each token (dim 2 of a)
//   c:      F32 [>= n_dims/2] frequency factors, or NULL (rope_ext only)
//   result: a's shape and type
// Pair k (0 <= k < n_dims/2) of a row of token t turns by theta_k = b[t] * freq_base^(-2k/n_dims)
// / c[k] (c[k] = 1 without c), then scaled as the parameters below say. ggml_rope is
// rope_ext with c NULL, freq_base 10000, freq_scale 1, ext_factor 0, attn_factor 1.
GGML_API struct ggml_tensor * ggml_rope(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   n_dims,
        int                   mode);
GGML_API struct ggml_tensor * ggml_rope_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        int                   n_dims,
        int                   mode);
// rope_ext's parameters are listed one per line. YaRN (Peng et al., 2023), on when
// ext_factor != 0: with r_k = 1 for the pairs below the one that turns beta_fast times
// over n_ctx_orig positions, 0 for the pairs above the one that turns beta_slow times and
// linear in between, pair k turns by (1 - e)*freq_scale*theta_k + e*theta_k, e = r_k *
// ext_factor (fast pairs keep their angle, slow pairs are interpolated), and cos and sin
// are also multiplied by 1 + 0.1*ln(1/freq_scale). Typical YaRN values: ext_factor 1,
// beta_fast 32, beta_slow 1. Without YaRN, freq_scale alone interpolates every pair.
GGML_API struct ggml_tensor * ggml_rope_ext(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,            // positions
        struct ggml_tensor  * c,            // frequency factors, or NULL
        int                   n_dims,       // leading elements of a row that rotate (even, <= head_dim);
                                            // the rest are copied
        int                   mode,         // 0: pairs (x[2k], x[2k+1]); GGML_ROPE_TYPE_NEOX: pairs
                                            // (x[k], x[k + n_dims/2]); other modes abort
        int                   n_ctx_orig,   // the context the model was trained for (YaRN only)
        float                 freq_base,    // base of the frequencies (e.g. 10000)
        float                 freq_scale,   // angles times freq_scale: 1 / the context
                                            // extension factor (linear interpolation), 1 = none
        float                 ext_factor,   // YaRN's blend; 0 disables YaRN (then n_ctx_orig,
                                            // beta_fast and beta_slow are unused)
        float                 attn_factor,  // cos and sin multiplied by it (1 = none)
        float                 beta_fast,    // YaRN: pairs turning more than beta_fast times
        float                 beta_slow);   // over n_ctx_orig keep their angle, pairs turning
                                            // fewer than beta_slow times are interpolated
GGML_API struct ggml_tensor * ggml_rope_ext_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        struct ggml_tensor  * c,
        int                   n_dims,
        int                   mode,
        int                   n_ctx_orig,
        float                 freq_base,
        float                 freq_scale,
        float                 ext_factor,
        float                 attn_factor,
        float                 beta_fast,
        float                 beta_slow);

// ---- attention ----
// Fused attention: softmax(q k^T * scale [softcap] + slope * mask) v, per query row and head.
//   q:      F32 [D, n_q, n_head, ne3]
//   k:      F32, F16 or Q8_0 [D, n_kv, n_head_kv, ne3]; n_head % n_head_kv == 0
//   v:      F32, F16 or Q8_0 [Dv, n_kv, n_head_kv, ne3]   not transposed: one row per position
//   mask:   F16 or F32 [n_kv, >= n_q, ne2m, ne3m], or NULL; added to the scores (times the
//           ALiBi slope); broadcast over dims 2 and 3 (n_head % ne2m == 0, ne3 % ne3m == 0);
//           -INF positions are skipped
//   result: F32 [Dv, n_head, n_q, ne3]   permuted against q: heads in dim 1, queries in dim 2
// Query head h reads KV head h / (n_head / n_head_kv) (grouped-query attention). Each ne3
// slice is independent (one sequence each). The scores are s = (q . k) * scale; with
// logit_softcap != 0, s = logit_softcap * tanh(s / logit_softcap). max_bias: ALiBi slopes
// as ggml_soft_max_ext (0: slope 1).
#define GGML_KQ_MASK_PAD 1 // mask rows need no padding past n_q
GGML_API struct ggml_tensor * ggml_flash_attn_ext(
        struct ggml_context * ctx,
        struct ggml_tensor  * q,
        struct ggml_tensor  * k,
        struct ggml_tensor  * v,
        struct ggml_tensor  * mask,
        float                 scale,
        float                 max_bias,
        float                 logit_softcap);
// Accumulation precision hints (ggml's values). kvgraph's CPU kernels always accumulate in
// f32, so the hint is stored and read back but changes nothing.
enum ggml_prec {
    GGML_PREC_UNDEFINED = 0,
    GGML_PREC_DEFAULT = 0,
    GGML_PREC_F32 = 10,
    GGML_PREC_BF16 = 15,
    GGML_PREC_F16 = 20,
    GGML_PREC_Q8 = 30,
    GGML_PREC_Q4 = 40,
};
GGML_API void ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
GGML_API enum ggml_prec ggml_flash_attn_ext_get_prec(const struct ggml_tensor * a);
GGML_API void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
// kvgraph extension, packed heads: k and v rows may pack P = k->ne[0] / q->ne[0] KV heads
// side by side (a KV cache row holding all heads of a position, e.g. q8_0 rows whose heads
// are shorter than a block): k [D*P, n_kv, n_head_kv/P, ne3], v [Dv*P, ...]; KV head h is
// elements [(h % P)*D, (h % P + 1)*D) of row slice h / P.
// kvgraph extension, padding-free attention (ONNX Attention's nonpad_kv_seqlen). kv_len:
// I32 [ne3], one entry per ne3 slice of q/k/v (one sequence each): the query rows of slice
// s attend K/V positions [0, kv_len[s]) only; positions past it are never read (no work,
// mask ignored there). Values are clamped to [0, n_kv]. Stored as src[4]; the read is
// registered with the dependency rules like any source.
GGML_API void ggml_flash_attn_ext_set_kv_len(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,        // a ggml_flash_attn_ext result without kv_len
        struct ggml_tensor  * kv_len);
// kvgraph extension, grouped keys: K stored by channel in groups of GGML_KV_GROUP
// positions, so that a quantized block spans one channel of 32 positions (per-channel
// scales, as KIVI quantizes keys: key channels differ in range far more than positions
// do), with the group still being filled kept unquantized:
//   k_groups: [GGML_KV_GROUP, D*H, n_groups, ne3] (F32, F16 or Q8_0): row (c, g, s)
//             holds channel c of positions [32g, 32g + 32) of slice s; KV head h owns
//             channels [h*D, (h+1)*D)
//   k_recent: F32 [D*H, GGML_KV_GROUP, ne3]: the positions of group k_recent_group[s]
//             (I32 [ne3]) of slice s, row = position - 32 * group; read instead of k_groups
//   v, mask, result as in ggml_flash_attn_ext (n_kv = v->ne[1] <= 32 * n_groups).
#define GGML_KV_GROUP 32
GGML_API struct ggml_tensor * ggml_flash_attn_ext_grouped(
        struct ggml_context * ctx,
        struct ggml_tensor  * q,
        struct ggml_tensor  * k_groups,
        struct ggml_tensor  * k_recent,
        struct ggml_tensor  * k_recent_group,
        struct ggml_tensor  * v,
        struct ggml_tensor  * mask,
        float                 scale,
        float                 max_bias,
        float                 logit_softcap);

// ---- custom ops ----
// fun(dst, a, [b, [c,]] ith, nth, userdata) runs on n_tasks tasks (GGML_N_TASKS_MAX: all
// threads), task ith of nth; it must write dst, a new tensor of a's shape and type (a view
// of a for _inplace).
#define GGML_N_TASKS_MAX (-1)
typedef void (*ggml_custom1_op_t)(
        struct ggml_tensor       * dst,
        const struct ggml_tensor * a,
        int                        ith,
        int                        nth,
        void                     * userdata);
typedef void (*ggml_custom2_op_t)(
        struct ggml_tensor       * dst,
        const struct ggml_tensor * a,
        const struct ggml_tensor * b,
        int                        ith,
        int                        nth,
        void                     * userdata);
typedef void (*ggml_custom3_op_t)(
        struct ggml_tensor       * dst,
        const struct ggml_tensor * a,
        const struct ggml_tensor * b,
        const struct ggml_tensor * c,
        int                        ith,
        int                        nth,
        void                     * userdata);
GGML_API struct ggml_tensor * ggml_map_custom1(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        ggml_custom1_op_t     fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_map_custom1_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        ggml_custom1_op_t     fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        ggml_custom2_op_t     fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        ggml_custom2_op_t     fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        struct ggml_tensor  * c,
        ggml_custom3_op_t     fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        struct ggml_tensor  * c,
        ggml_custom3_op_t     fun,
        int                   n_tasks,
        void                * userdata);
// GGML_OP_CUSTOM: fun(dst, ith, nth, userdata) on n_tasks tasks (GGML_N_TASKS_MAX: all
// threads); the sources are dst->src[0..]. custom_4d makes a new tensor of the given type
// and shape from n_args (<= GGML_MAX_SRC) sources; custom_inplace writes over a, with the
// n_args (<= GGML_MAX_SRC - 1) others after it. Like every op, it gets edges for what it
// reads (its sources) and writes (its result).
typedef void (*ggml_custom_op_t)(struct ggml_tensor * dst, int ith, int nth, void * userdata);
GGML_API struct ggml_tensor * ggml_custom_4d(
        struct ggml_context * ctx,
        enum ggml_type        type,
        int64_t               ne0,
        int64_t               ne1,
        int64_t               ne2,
        int64_t               ne3,
        struct ggml_tensor ** args,
        int                   n_args,
        ggml_custom_op_t      fun,
        int                   n_tasks,
        void                * userdata);
GGML_API struct ggml_tensor * ggml_custom_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor ** args,
        int                   n_args,
        ggml_custom_op_t      fun,
        int                   n_tasks,
        void                * userdata);

// ---- LLM ops: set/acc, gated linear units, sorting, mixture of experts ----------------
// (ggml 0.21's names, signatures, enum values and op params; constructors in
// ggml/src/ops-llm.cpp, kernels in ggml/src/cpu/kernels-llm.cpp)

// Write (set) or add (acc) b into a region of a. The region is a view with b's shape,
// element stride a's type size, strides nb1, nb2, nb3 and `offset`, all in bytes from
// the first byte of the result. op params (int32): {nb1, nb2, nb3, offset, inplace}.
//   ggml_set / ggml_acc: a new tensor, a copy of a (contiguous, a's shape and type) with
//     the region replaced by b / incremented by b. Reads all of a and b.
//   *_inplace: a view of a (view_src = a's root) whose region is written; the rest of a
//     keeps its bytes. set_inplace reads b and writes the region of a's bytes (nothing
//     else); acc_inplace also reads the region. Readers of a created later get a RAW
//     edge to it, readers created earlier a WAR edge from it (see "Dependency edges").
// set: a and b of any non-quantized types (b converted to a's); acc: F32, F16 or BF16.
// b may have any strides; the region must lie inside the result and its elements must
// not overlap one another. _1d: nb1.. = the result's strides; _2d: nb2, nb3 likewise.
GGML_API struct ggml_tensor * ggml_set(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                nb2,
        size_t                nb3,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_set_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                nb2,
        size_t                nb3,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_set_1d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_set_1d_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_set_2d(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_set_2d_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_acc(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                nb2,
        size_t                nb3,
        size_t                offset);
GGML_API struct ggml_tensor * ggml_acc_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        size_t                nb1,
        size_t                nb2,
        size_t                nb3,
        size_t                offset);

// Gated linear units (GGML_OP_GLU): y = act(x) * g, elementwise.
//   ggml_glu(a, op, swapped): a [n, r...] (F32/F16/BF16, dense rows) -> [n/2, r...] of a's
//     type; x = elements [0, n/2) of each row, g = [n/2, 2(n/2)) (swapped: the other way).
//   ggml_glu_split(a, b, op): x = a, g = b, same shape and type -> a's shape.
// act: REGLU relu, GEGLU gelu (tanh approximation, as ggml_gelu), SWIGLU silu, GEGLU_ERF
// gelu_erf, GEGLU_QUICK gelu_quick; SWIGLU_OAI: x' = min(x, limit), g' = clamp(g, -limit,
// limit), y = x' sigmoid(alpha x') (g' + 1). op params (int32): {op, swapped[, alpha, limit
// as float]}.
enum ggml_glu_op {
    GGML_GLU_OP_REGLU,
    GGML_GLU_OP_GEGLU,
    GGML_GLU_OP_SWIGLU,
    GGML_GLU_OP_SWIGLU_OAI,
    GGML_GLU_OP_GEGLU_ERF,
    GGML_GLU_OP_GEGLU_QUICK,
    GGML_GLU_OP_SWIGLU_CLAMP, // named, not computed by kvgraph's CPU
    GGML_GLU_OP_COUNT,
};
GGML_API const char * ggml_glu_op_name(enum ggml_glu_op op);
GGML_API enum ggml_glu_op ggml_get_glu_op(const struct ggml_tensor * tensor); // tensor->op must be GGML_OP_GLU
GGML_API struct ggml_tensor * ggml_glu(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_glu_op      op,
        bool                  swapped);
GGML_API struct ggml_tensor * ggml_glu_split(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * b,
        enum ggml_glu_op      op);
#define GGML_KVG_GLU_DECL(name)                                                                            \
    GGML_API struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a);           \
    GGML_API struct ggml_tensor * ggml_##name##_swapped(struct ggml_context * ctx, struct ggml_tensor * a); \
    GGML_API struct ggml_tensor * ggml_##name##_split(                                                     \
        struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_KVG_GLU_DECL(reglu)
GGML_KVG_GLU_DECL(geglu)
GGML_KVG_GLU_DECL(swiglu)
GGML_KVG_GLU_DECL(geglu_erf)
GGML_KVG_GLU_DECL(geglu_quick)
#undef GGML_KVG_GLU_DECL
GGML_API struct ggml_tensor * ggml_swiglu_oai(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,   // x
        struct ggml_tensor  * b,   // g
        float                 alpha,
        float                 limit);

// Sorting rows (a F32, F16 or BF16, any strides). argsort: I32 of a's shape, row i holds
// the indices that sort row i of a, ties in index order (a stable sort); NaNs go last in
// either order. top_k: I32 [k, ne1, ne2, ne3], the indices of each row's k largest values
// (ggml: "in no particular order"; kvgraph gives them largest first, ties in index order,
// i.e. the first k of a descending argsort). argsort_top_k: that same argsort + view.
enum ggml_sort_order {
    GGML_SORT_ORDER_ASC,
    GGML_SORT_ORDER_DESC,
};
GGML_API struct ggml_tensor * ggml_argsort(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        enum ggml_sort_order  order);
GGML_API struct ggml_tensor * ggml_argsort_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);
GGML_API struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// Mixture-of-experts matmul: as [K, N, n_as] (n_as expert matrices, any ggml_mul_mat
// weight type, dense rows), b F32 [K, ne11, ne12] (ne11 = 1 or n_expert_used),
// ids I32 [n_expert_used, ne12] (any strides) -> F32 [N, n_expert_used, ne12]:
// result[:, e, t] = as[:, :, ids[e, t]] x b[:, e % ne11, t] (as ggml_mul_mat's rows).
GGML_API struct ggml_tensor * ggml_mul_mat_id(
        struct ggml_context * ctx,
        struct ggml_tensor  * as,   // expert weights
        struct ggml_tensor  * b,    // activations
        struct ggml_tensor  * ids); // expert index per (slot, token)

// ggml_soft_max_ext writing over a (the result is a view of a)
GGML_API struct ggml_tensor * ggml_soft_max_ext_inplace(
        struct ggml_context * ctx,
        struct ggml_tensor  * a,
        struct ggml_tensor  * mask,
        float                 scale,
        float                 max_bias);

// Copies src's nodes and leafs into dst (ggml_graph_size(dst) must hold them); dst then holds the nodes.
GGML_API void ggml_graph_cpy(struct ggml_cgraph * src, struct ggml_cgraph * dst);
// ggml: zero the gradients; kvgraph has no autograd, so it does nothing.
GGML_API void ggml_graph_reset(struct ggml_cgraph * cgraph);

// ggml's legacy model-file constants and file types (values of ggml 0.21)
#define GGML_FILE_MAGIC   0x67676d6c // "ggml"
#define GGML_FILE_VERSION 2
#define GGML_QNT_VERSION        2    // changes whenever a quantized block layout does
#define GGML_QNT_VERSION_FACTOR 1000
enum ggml_ftype {
    GGML_FTYPE_UNKNOWN        = -1,
    GGML_FTYPE_ALL_F32        = 0,
    GGML_FTYPE_MOSTLY_F16     = 1,  // vectors (norm weights, biases) stay F32
    GGML_FTYPE_MOSTLY_Q4_0    = 2,
    GGML_FTYPE_MOSTLY_Q4_1    = 3,
    GGML_FTYPE_MOSTLY_Q4_1_SOME_F16 = 4, // Q4_1, but the token embedding and output matrices in F16
    GGML_FTYPE_MOSTLY_Q8_0    = 7,
    GGML_FTYPE_MOSTLY_Q5_0    = 8,
    GGML_FTYPE_MOSTLY_Q5_1    = 9,
    GGML_FTYPE_MOSTLY_Q2_K    = 10,
    GGML_FTYPE_MOSTLY_Q3_K    = 11,
    GGML_FTYPE_MOSTLY_Q4_K    = 12,
    GGML_FTYPE_MOSTLY_Q5_K    = 13,
    GGML_FTYPE_MOSTLY_Q6_K    = 14,
    GGML_FTYPE_MOSTLY_IQ2_XXS = 15,
    GGML_FTYPE_MOSTLY_IQ2_XS  = 16,
    GGML_FTYPE_MOSTLY_IQ3_XXS = 17,
    GGML_FTYPE_MOSTLY_IQ1_S   = 18,
    GGML_FTYPE_MOSTLY_IQ4_NL  = 19,
    GGML_FTYPE_MOSTLY_IQ3_S   = 20,
    GGML_FTYPE_MOSTLY_IQ2_S   = 21,
    GGML_FTYPE_MOSTLY_IQ4_XS  = 22,
    GGML_FTYPE_MOSTLY_IQ1_M   = 23,
    GGML_FTYPE_MOSTLY_BF16    = 24,
    GGML_FTYPE_MOSTLY_MXFP4   = 25,
    GGML_FTYPE_MOSTLY_NVFP4   = 26,
    GGML_FTYPE_MOSTLY_Q1_0    = 27,
    GGML_FTYPE_MOSTLY_Q2_0    = 28,
};
// The weight type of a file type; aborts for UNKNOWN (as ggml) and for the file types
// whose weight type kvgraph does not implement (IQ formats other than IQ4_NL and IQ4_XS, MXFP4, ...).
GGML_API enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype);

// ---- dependency edges ------------------------------------------------------------
// Every tensor's bytes are (root buffer = view_src or itself, byte extent). When an op is
// created, its reads (sources; set_rows also reads its destination, whose other rows it
// keeps) and its write (its result) are compared with earlier accesses to the same root
// in this context, in creation order, and the new tensor gets control edges:
//   RAW: it reads bytes written earlier -> after the latest overlapping writers
//   WAR: it writes bytes read earlier   -> after the overlapping readers since then
//   WAW: it writes bytes written earlier -> after the latest overlapping writer
// ggml_build_forward_expand follows data edges (src[]) always and a control edge only if
// it is RAW or MANUAL and its target is not held by another graph: a KV-cache write that
// nothing expanded is pulled into the graph before the attention that reads the cache,
// while an op an earlier graph holds is never pulled into a new one (one context may hold
// many graphs, as in ggml). When a graph is computed, nodes that touch overlapping bytes
// (one writing) with no edge between them run in node-list order, and an edge the node
// list contradicts is honoured. Only a dense write (every byte of its span) hides earlier
// writes: a strided write leaves the bytes it skips to their earlier writers. Expansion
// keeps the node list a topological order of the edges among its nodes (it sorts the list
// again when a later expansion adds an op an earlier node must follow), also through ops
// that run in no graph. Rules and reasoning: ggml/src/hazards.cpp.

// Order `tensor`'s op after `dep`'s op (for side effects the library cannot see). The
// edge is stored with `tensor`, in the context that created it (ctx is not used for
// storage, and may be freed right after); it pulls `dep` into a graph that `tensor` joins
// unless another graph holds `dep`. `dep` may live in another context than `tensor`: the
// edge is then dropped when either of the two contexts is freed or reset. An edge that closes a cycle makes ggml_graph_compute
// and ggml_gallocr_* refuse the graph with a message. NULL tensor or dep: message, no edge.
GGML_API void ggml_add_control_dep(struct ggml_context * ctx, struct ggml_tensor * tensor, struct ggml_tensor * dep);
GGML_API int  ggml_n_control_deps(const struct ggml_tensor * tensor);
// The i-th control edge of tensor (NULL if i is out of range); its kind in *kind if not NULL.
GGML_API struct ggml_tensor * ggml_get_control_dep(const struct ggml_tensor * tensor, int i, enum ggml_dep_kind * kind);
GGML_API const char * ggml_dep_kind_name(enum ggml_dep_kind kind);
// Forget earlier accesses: ops created after this call get no edges to earlier ones. Not
// needed for several graphs in one context; a tool for programs that want no edges.
GGML_API void ggml_hazards_reset(struct ggml_context * ctx);

// One pair of conflicting accesses that no path of edges orders.
struct ggml_hazard {
    const struct ggml_tensor * first;  // earlier in graph order
    const struct ggml_tensor * second;
    const struct ggml_tensor * root;   // the buffer both touch
    size_t first_begin, first_end;     // byte ranges inside root
    size_t second_begin, second_end;
    enum ggml_dep_kind kind;           // what the missing edge would be
};
// Checks a finished graph. Counts every pair of conflicting accesses to overlapping bytes
// that no path of edges orders, and every edge whose predecessor comes after its consumer
// in the node list (a sequential run would read stale bytes); stores up to max_out of them
// in out (may be NULL), prints each to `log` if not NULL, returns the count (-1 for a NULL
// graph or one too large to check).
GGML_API int ggml_graph_validate(const struct ggml_cgraph * cgraph, struct ggml_hazard * out, int max_out, FILE * log);

// ---- graphs ----------------------------------------------------------------------
GGML_API size_t ggml_graph_overhead(void);
GGML_API size_t ggml_graph_overhead_custom(size_t size, bool grads);
GGML_API struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx); // size = GGML_DEFAULT_GRAPH_SIZE
GGML_API struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
GGML_API void   ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);
GGML_API int    ggml_graph_size(struct ggml_cgraph * cgraph);
GGML_API int    ggml_graph_n_nodes(struct ggml_cgraph * cgraph);
GGML_API struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * cgraph, int i); // i < 0 counts from the end
GGML_API struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * cgraph);
GGML_API void   ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);
GGML_API void   ggml_graph_clear(struct ggml_cgraph * cgraph);
GGML_API struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * cgraph, const char * name);
GGML_API void   ggml_graph_print(const struct ggml_cgraph * cgraph);
// Graphviz: data edges solid, control edges dashed and labelled with their kind. gb may be NULL.
GGML_API void   ggml_graph_dump_dot(
        const struct ggml_cgraph * gb,
        const struct ggml_cgraph * gf,
        const char               * filename);

#ifdef __cplusplus
}
#endif

#include "ggml-image.h" // image ops, split off to keep this header readable
#include "ggml-ops-ext.h" // the rest of ggml.h's names: mostly ops the CPU does not compute
