// kvgraph CPU compute: plans, the persistent thread pool, CPU type traits.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// Persistent worker threads, reused across computes; grows when a compute asks for more.
struct ggml_threadpool;
typedef struct ggml_threadpool * ggml_threadpool_t;

// ggml's CPU backend (ggml-backend.h): computes with n_threads (default
// GGML_DEFAULT_N_THREADS = 4, as ggml, whatever the hardware has; set_n_threads takes
// 1..GGML_MAX_N_THREADS and aborts otherwise) on the process-wide pool or the one set.
GGML_API ggml_backend_t ggml_backend_cpu_init(void);
GGML_API bool ggml_backend_is_cpu                (ggml_backend_t backend);
GGML_API void ggml_backend_cpu_set_n_threads     (ggml_backend_t backend_cpu, int n_threads);
// Reference mode for this backend (ggml's name): its computes run the scalar kernels on the
// barrier executor, the serial oracle an optimized run is compared against. The path and
// schedule are process-wide settings, so a reference compute holds a lock and other
// computes must not run at the same time (test-backend-ops runs one at a time).
GGML_API void ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref);
GGML_API void ggml_backend_cpu_set_threadpool    (ggml_backend_t backend_cpu, ggml_threadpool_t threadpool);
GGML_API void ggml_backend_cpu_set_abort_callback(
        ggml_backend_t      backend_cpu,
        ggml_abort_callback abort_callback,       // polled between nodes; true stops the compute
        void              * abort_callback_data);
// ggml's one-time CPU setup; nothing to do here (tables are built on first use).
GGML_API void ggml_cpu_init(void);

struct ggml_cplan {
    size_t    work_size; // bytes of scratch the graph needs
    uint8_t * work_data; // caller-provided, at least work_size bytes (may be NULL if work_size == 0)

    int n_threads;
    struct ggml_threadpool * threadpool; // NULL: the process-wide pool

    ggml_abort_callback abort_callback;
    void *              abort_callback_data;

    bool use_ref; // ggml: reference kernels only; kvgraph picks kernels by KVG_CPU_FEATURES instead
};

// The work buffer size and thread settings for computing cgraph; n_threads <= 0 means
// GGML_DEFAULT_N_THREADS, threadpool NULL the process-wide pool. The caller sets work_data.
GGML_API struct ggml_cplan ggml_graph_plan(
        const struct ggml_cgraph * cgraph,
        int                        n_threads,
        struct ggml_threadpool   * threadpool);
// Runs each node once (a node listed twice runs at its first place: a deliberate difference
// from ggml), after everything its data and control edges name, and after every earlier
// node of the list that touches bytes it touches (one of the two writing). Returns
// GGML_STATUS_FAILED, with a message, if the control edges form a cycle.
GGML_API enum ggml_status  ggml_graph_compute(struct ggml_cgraph * cgraph, struct ggml_cplan * cplan);
// Plans, allocates the work buffer in ctx and computes.
GGML_API enum ggml_status  ggml_graph_compute_with_ctx(
        struct ggml_context * ctx,
        struct ggml_cgraph  * cgraph,
        int                   n_threads);

// Thread priorities (ggml's values); kvgraph's pools run at the process's priority.
enum ggml_sched_priority {
    GGML_SCHED_PRIO_LOW = -1,
    GGML_SCHED_PRIO_NORMAL,
    GGML_SCHED_PRIO_MEDIUM,
    GGML_SCHED_PRIO_HIGH,
    GGML_SCHED_PRIO_REALTIME
};
// ggml's fields; kvgraph uses n_threads and keeps the others for ggml programs (no pinning,
// no polling, pools never start paused).
struct ggml_threadpool_params {
    bool cpumask[GGML_MAX_N_THREADS];
    int n_threads;
    enum ggml_sched_priority prio;
    uint32_t poll;
    bool strict_cpu;
    bool paused;
};
GGML_API struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads);
GGML_API struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params);
GGML_API void ggml_threadpool_free(struct ggml_threadpool * threadpool);

// kvgraph: how the executor orders work. DAG (default): a node starts once its data and
// control predecessors finished; independent nodes run at the same time. BARRIER: every
// node runs on all threads with a barrier after it (ggml's schedule; for benchmarks).
enum ggml_sched_mode {
    GGML_SCHED_DAG = 0,
    GGML_SCHED_BARRIER = 1,
};
GGML_API void ggml_cpu_set_sched_mode(enum ggml_sched_mode mode);
GGML_API enum ggml_sched_mode ggml_cpu_get_sched_mode(void);

// s[0] = dot(x, y) over n elements: x a row of the weight type, y a row of its
// vec_dot_type. ggml's row strides bs, bx, by are unused since nrc must be 1 (one row each).
typedef void (*ggml_vec_dot_t)(
        int          n,
        float      * s,
        size_t       bs,
        const void * x,
        size_t       bx,
        const void * y,
        size_t       by,
        int          nrc);

struct ggml_type_traits_cpu {
    ggml_from_float_t from_float;
    ggml_vec_dot_t    vec_dot;
    enum ggml_type    vec_dot_type; // the type the other operand of vec_dot is converted to
    int64_t           nrows;        // rows processed per vec_dot call
};
// As ggml: vec_dot_type is F32 for F32, F16 for F16, BF16 for BF16 (kvgraph's matmul dots f16
// and bf16 weights with f32 activations, except where docs/ggml-compat.md says), Q8_0 for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
// and IQ4_NL (ggml: Q8_1 for Q4_1/Q5_1), Q8_K for the k-quants, IQ4_XS, TQ1_0, TQ2_0, IQ3_XXS, IQ3_S, IQ2_* and IQ1_*; Q8_K also has a vec_dot
// (with itself). from_float is set for every type with a from_float_ref (not IQ2_*, IQ1_*: as in ggml,
// ggml_quantize_chunk encodes them with an importance matrix).
GGML_API const struct ggml_type_traits_cpu * ggml_get_type_traits_cpu(enum ggml_type type);

// CPU type conversion of n elements. x and y must not overlap, except y == x for fp32_to_fp32
// and fp32_to_i32 (the same element size). The values of ggml_fp16_to_fp32_row,
// ggml_fp32_to_bf16_row, ... (bf16: nearest even, subnormals kept; NaN stays NaN, its payload
// may not), on the vector path in use where it has one.
GGML_API void ggml_cpu_fp32_to_fp32(const float * x, float * y, int64_t n);
GGML_API void ggml_cpu_fp32_to_i32 (const float * x, int32_t * y, int64_t n); // truncated, as a C cast
GGML_API void ggml_cpu_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n);
GGML_API void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n);
GGML_API void ggml_cpu_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n);
GGML_API void ggml_cpu_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n);

GGML_API int ggml_cpu_has_avx2(void);
GGML_API int ggml_cpu_has_f16c(void);
GGML_API int ggml_cpu_has_fma(void);
GGML_API int ggml_cpu_has_avx512(void);
GGML_API int ggml_cpu_has_neon(void);
GGML_API int ggml_cpu_has_blas(void); // built with OpenBLAS for large f32 matmuls (KVG_OPENBLAS)

// kvgraph: SIMD paths of the CPU kernels, picked at run time from CPUID. The environment
// variable KVG_CPU_FEATURES=scalar|avx2|avx512|avx512vnni|avx512bf16 caps the path for the whole
// process; this call lowers it further (testing, benchmarks; not while a graph computes).
// Returns the path now in use: the lowest of `limit`, the environment's cap and what the
// CPU supports.
enum ggml_cpu_features {
    GGML_CPU_FEATURES_SCALAR = 0,
    GGML_CPU_FEATURES_AVX2   = 1, // AVX2 + FMA + F16C
    GGML_CPU_FEATURES_AVX512 = 2, // AVX-512 F/BW/VL
    GGML_CPU_FEATURES_AVX512_VNNI = 3, // and VNNI (vpdpbusd for q8_0/q4_0 weights)
    GGML_CPU_FEATURES_AVX512_BF16 = 4, // and BF16 (vdpbf16ps for bf16 weights, bf16-rounded activations)
    GGML_CPU_FEATURES_BEST   = 5,
};
GGML_API enum ggml_cpu_features ggml_cpu_set_features_limit(enum ggml_cpu_features limit);
// The path in use (work sizes of a plan depend on it).
GGML_API enum ggml_cpu_features ggml_cpu_get_features(void);

// kvgraph: rearranges a Q4_0, Q8_0, Q4_K, Q6_K, IQ4_NL or Q5_0 matrix in place into GGML_TYPE_Q4_0_R16
// / Q8_0_R16 / Q4_K_R16 / Q6_K_R16 / IQ4_NL_R16 / Q5_0_R16 (rows interleaved by 16; layouts in ggml/src/types.h) when the
// CPU path in use has a matrix-vector kernel for it (AVX-512 VNNI; AVX2: q4_0, q5_0) and the tensor is
// contiguous, with rows a multiple of 128 long and a multiple of 16 per matrix; returns
// whether it did (false: left as it was). t->data must be writable. The tensor may then only
// be the weights (src0) of ggml_mul_mat: one activation row runs the interleaved kernel (the
// same products, blocks summed in another order), batches of 8 or more rows of q4_0/q8_0 the
// panel tiles (the plain type's bits), q5_0_r16 on AVX2 its interleaved kernel for any number
// of rows, other products unpack blocks of rows as they go (the plain type's bits). Other ops, GGUF files and ggml_get_rows refuse the types.
GGML_API bool ggml_kvg_repack(struct ggml_tensor * t);
// Whether ggml_kvg_repack rearranges matrices of this type on the path in use.
GGML_API bool ggml_kvg_repacks(enum ggml_type type);
// The reverse, in place: an interleaved matrix back to the bytes of the one it came from.
GGML_API bool ggml_kvg_unrepack(struct ggml_tensor * t);

#ifdef __cplusplus
}
#endif
