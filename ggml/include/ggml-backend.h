// ggml's backend API for the one backend kvgraph has: the CPU. Buffers, buffer types,
// tensor set/get, graph compute and a single-backend scheduler, with ggml's names,
// arguments and meanings, so ggml programs written for the backend API build and run
// unchanged. Graph compute runs the same DAG executor and obeys the same dependency edges
// as ggml_graph_compute. Devices other than the CPU do not exist here: asking for one
// returns NULL.
#pragma once

#include "ggml.h"
#include "ggml-alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_event * ggml_backend_event_t;
typedef void * ggml_backend_graph_plan_t;
typedef struct ggml_backend_reg * ggml_backend_reg_t;
typedef struct ggml_backend_device * ggml_backend_dev_t;

// ---- buffer types ----
// The CPU buffer type (host memory, 64-byte alignment); a process-wide singleton.
GGML_API ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);
GGML_API const char *          ggml_backend_buft_name          (ggml_backend_buffer_type_t buft);
// NULL (with a message on stderr) if the memory cannot be allocated.
GGML_API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer  (ggml_backend_buffer_type_t buft, size_t size);
GGML_API size_t                ggml_backend_buft_get_alignment (ggml_backend_buffer_type_t buft);
GGML_API size_t                ggml_backend_buft_get_max_size  (ggml_backend_buffer_type_t buft);
// Bytes a tensor needs in a buffer of this type (ggml_nbytes on the CPU).
GGML_API size_t                ggml_backend_buft_get_alloc_size(
        ggml_backend_buffer_type_t buft,
        const struct ggml_tensor * tensor);
GGML_API bool                  ggml_backend_buft_is_host       (ggml_backend_buffer_type_t buft);

// ---- buffers ----
enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
};
GGML_API const char *     ggml_backend_buffer_name         (ggml_backend_buffer_t buffer);
GGML_API void             ggml_backend_buffer_free         (ggml_backend_buffer_t buffer); // NULL: nothing
GGML_API void *           ggml_backend_buffer_get_base     (ggml_backend_buffer_t buffer);
GGML_API size_t           ggml_backend_buffer_get_size     (ggml_backend_buffer_t buffer);
GGML_API enum ggml_status ggml_backend_buffer_init_tensor  (ggml_backend_buffer_t buffer, struct ggml_tensor * tensor);
GGML_API size_t           ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer);
GGML_API size_t           ggml_backend_buffer_get_max_size (ggml_backend_buffer_t buffer);
GGML_API size_t           ggml_backend_buffer_get_alloc_size(
        ggml_backend_buffer_t      buffer,
        const struct ggml_tensor * tensor);
// Sets every byte of the buffer to value.
GGML_API void             ggml_backend_buffer_clear        (ggml_backend_buffer_t buffer, uint8_t value);
GGML_API bool             ggml_backend_buffer_is_host      (ggml_backend_buffer_t buffer);
GGML_API void             ggml_backend_buffer_set_usage(
        ggml_backend_buffer_t          buffer,
        enum ggml_backend_buffer_usage usage);
GGML_API enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer);
GGML_API ggml_backend_buffer_type_t     ggml_backend_buffer_get_type (ggml_backend_buffer_t buffer);
GGML_API void                           ggml_backend_buffer_reset    (ggml_backend_buffer_t buffer);

// A tensor placed at addr inside buffer (tensor->data and tensor->buffer set), and a view
// given its root's address plus its offset.
GGML_API enum ggml_status ggml_backend_tensor_alloc(
        ggml_backend_buffer_t buffer,
        struct ggml_tensor  * tensor,
        void                * addr);     // inside buffer's memory
GGML_API enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor);

// ---- backends ----
GGML_API const char *               ggml_backend_name(ggml_backend_t backend);
GGML_API void                       ggml_backend_free(ggml_backend_t backend); // NULL: nothing
GGML_API ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
GGML_API ggml_backend_buffer_t      ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size);
GGML_API size_t                     ggml_backend_get_alignment(ggml_backend_t backend);
GGML_API size_t                     ggml_backend_get_max_size(ggml_backend_t backend);

// Copies between host memory and bytes [offset, offset + size) of a tensor that has
// memory; an out-of-range request aborts with a message (as ggml).
GGML_API void ggml_backend_tensor_set(
        struct ggml_tensor * tensor,
        const void         * data,    // size bytes to write
        size_t               offset,  // in bytes, into the tensor
        size_t               size);
GGML_API void ggml_backend_tensor_get(
        const struct ggml_tensor * tensor,
        void                     * data,    // size bytes to fill
        size_t                     offset,  // in bytes, into the tensor
        size_t                     size);
GGML_API void ggml_backend_tensor_memset(
        struct ggml_tensor * tensor,
        uint8_t              value,
        size_t               offset,
        size_t               size);
GGML_API void ggml_backend_tensor_copy(struct ggml_tensor * src, struct ggml_tensor * dst);

GGML_API void             ggml_backend_synchronize(ggml_backend_t backend); // computes are synchronous here
// Runs the graph with the backend's thread count (ggml_backend_cpu_set_n_threads): the DAG
// executor over the graph's edges, a work buffer kept by the backend.
GGML_API enum ggml_status ggml_backend_graph_compute      (ggml_backend_t backend, struct ggml_cgraph * cgraph);
GGML_API enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph);
GGML_API bool             ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op);
GGML_API bool             ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft);

// ---- devices and registry: the CPU only ----
enum ggml_backend_dev_type {
    GGML_BACKEND_DEVICE_TYPE_CPU,   // CPU device using system memory
    GGML_BACKEND_DEVICE_TYPE_GPU,   // (never present here)
    GGML_BACKEND_DEVICE_TYPE_IGPU,  // (never present here)
    GGML_BACKEND_DEVICE_TYPE_ACCEL, // (never present here)
};
GGML_API size_t                     ggml_backend_dev_count(void);                  // 1
GGML_API ggml_backend_dev_t         ggml_backend_dev_get(size_t index);            // NULL past the end
// NULL unless type is GGML_BACKEND_DEVICE_TYPE_CPU
GGML_API ggml_backend_dev_t         ggml_backend_dev_by_type(enum ggml_backend_dev_type type);
GGML_API const char *               ggml_backend_dev_name(ggml_backend_dev_t device);
GGML_API const char *               ggml_backend_dev_description(ggml_backend_dev_t device);
GGML_API enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
GGML_API ggml_backend_t             ggml_backend_dev_init(ggml_backend_dev_t device, const char * params);
GGML_API ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device);
GGML_API ggml_backend_dev_t         ggml_backend_get_device(ggml_backend_t backend);
// NULL unless type is GGML_BACKEND_DEVICE_TYPE_CPU; params is ignored
GGML_API ggml_backend_t             ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params);
GGML_API ggml_backend_t             ggml_backend_init_best(void); // the CPU backend
GGML_API void                       ggml_backend_load_all(void);  // nothing to load: the CPU is built in
GGML_API void                       ggml_backend_load_all_from_path(const char * dir_path);

// Free and total bytes of the device: the machine's available and physical memory
// (0 and 0 if they cannot be read).
GGML_API void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
GGML_API ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device); // the CPU registry

// ---- registry: one, "CPU", with one device ----
GGML_API size_t ggml_backend_reg_count(void);                            // 1
GGML_API ggml_backend_reg_t ggml_backend_reg_get(size_t index);          // NULL past the end
GGML_API ggml_backend_reg_t ggml_backend_reg_by_name(const char * name); // "CPU" (any case) or NULL
GGML_API const char * ggml_backend_reg_name(ggml_backend_reg_t reg);
GGML_API size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg);
GGML_API ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index);
// The CPU registry's extra functions by name, as ggml: "ggml_backend_set_n_threads"
// (ggml_backend_set_n_threads_t), "ggml_backend_get_features", "ggml_backend_set_abort_callback",
// "ggml_backend_cpu_set_use_ref" (void (*)(ggml_backend_t, bool)); NULL for other names.
GGML_API void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);
typedef void (*ggml_backend_set_n_threads_t)(ggml_backend_t backend, int n_threads);
typedef void (*ggml_backend_set_abort_callback_t)(ggml_backend_t backend, ggml_abort_callback abort_callback,
                                                  void * abort_callback_data);
struct ggml_backend_feature {
    const char * name;
    const char * value;
};
// A list ending with {NULL, NULL}: the CPU's SIMD path in use, static storage.
typedef struct ggml_backend_feature * (*ggml_backend_get_features_t)(ggml_backend_reg_t reg);

// ---- comparing two backends (ggml's test-backend-ops) ----
typedef bool (*ggml_backend_eval_callback)(int node_index, struct ggml_tensor * t1, struct ggml_tensor * t2,
                                           void * user_data);
// Copies graph (every tensor, with the bytes of those that own memory) into a buffer of
// backend2, then either computes node by node on both, calling callback(i, t1, t2) after
// each node that is not a view (stops when it returns false), or, when num_test_nodes > 0,
// computes each whole graph once and calls back for the listed nodes. false if the copy
// cannot be made or a compute fails (the failing node is logged).
GGML_API bool ggml_backend_compare_graph_backend(ggml_backend_t backend1, ggml_backend_t backend2,
                                                 struct ggml_cgraph * graph, ggml_backend_eval_callback callback,
                                                 void * user_data, struct ggml_tensor const * const * test_nodes,
                                                 size_t num_test_nodes);

// ---- scheduler: one backend ----
// A gallocr for the backend's buffer type plus compute: alloc_graph plans and places the
// graph's tensors, graph_compute allocates (if needed) and runs it. Graphs that span
// several backends do not exist here; only backends[0] is used (n_backends must be >= 1).
typedef struct ggml_backend_sched * ggml_backend_sched_t;
GGML_API ggml_backend_sched_t ggml_backend_sched_new(
        ggml_backend_t             * backends,
        ggml_backend_buffer_type_t * bufts,       // may be NULL (host memory is the one kind here)
        int                          n_backends,  // >= 1; only backends[0] is used
        size_t                       graph_size,  // (ggml: the largest graph; unused here)
        bool                         parallel,    // (ggml: pipeline parallelism; unused here)
        bool                         op_offload); // (ggml: offload to a GPU; unused here)
GGML_API void             ggml_backend_sched_free(ggml_backend_sched_t sched);
GGML_API bool             ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph);
GGML_API bool             ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
GGML_API enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
// the same as ggml_backend_sched_graph_compute (computes are synchronous here)
GGML_API enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, struct ggml_cgraph * g);
GGML_API void             ggml_backend_sched_synchronize(ggml_backend_sched_t sched);
GGML_API void             ggml_backend_sched_reset(ggml_backend_sched_t sched);
GGML_API int              ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched);
GGML_API ggml_backend_t   ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i); // NULL unless i == 0
GGML_API size_t           ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend);

// ---- whole contexts ----
// One buffer of the given type holding every tensor of a no_alloc context that has no
// memory yet; views get their root's address. NULL if there is nothing to allocate (or
// the memory cannot be had; a message says which).
// _size: the bytes that buffer would have, without allocating it.
GGML_API size_t ggml_backend_alloc_ctx_tensors_from_buft_size(
        struct ggml_context      * ctx,
        ggml_backend_buffer_type_t buft);
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors_from_buft(
        struct ggml_context      * ctx,
        ggml_backend_buffer_type_t buft);
GGML_API struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors(
        struct ggml_context * ctx,
        ggml_backend_t        backend);

#ifdef __cplusplus
}
#endif
