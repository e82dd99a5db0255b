// kvgraph graph memory planner (CPU): ggml's gallocr names, one compute buffer per
// allocator, liveness-based reuse and in-place execution that obey dependency edges.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer * ggml_backend_buffer_t;
typedef struct ggml_backend * ggml_backend_t;

// Tensor allocator: tensors placed one after another in a buffer (ggml-backend.h).
struct ggml_tallocr {
    ggml_backend_buffer_t buffer;
    void * base;
    size_t alignment;
    size_t offset;
};
GGML_API struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer);
// GGML_STATUS_ALLOC_FAILED (with a message) when the tensor does not fit in what is left.
GGML_API enum ggml_status    ggml_tallocr_alloc(struct ggml_tallocr * talloc, struct ggml_tensor * tensor);

typedef struct ggml_gallocr * ggml_gallocr_t;

// buft: the memory the compute buffer comes from; kvgraph has one kind (CPU memory:
// ggml_backend_cpu_buffer_type(), or NULL for the same).
GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
// Several buffer types are one here: the first is used.
GGML_API ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs);
GGML_API void           ggml_gallocr_free(ggml_gallocr_t galloc);

// Plans the graph and grows the buffer to fit it (call with the largest graph shape).
// Returns false if the buffer cannot be allocated or the graph's edges form a cycle.
GGML_API bool   ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
// Assigns every tensor of the graph that has no data an address in the buffer. The last
// plan is replayed only for the graph it was made for (same nodes, sources, edges, shapes
// and view offsets); any other graph is planned again. The node list and the tensors'
// edges are never changed. Kept for the whole graph, never reused: leafs, inputs,
// outputs (and the roots of output views), and sinks (results no node reads). When the
// buffer grows, the old one is kept until ggml_gallocr_free, so a graph placed earlier by
// this allocator still computes correctly.
GGML_API bool   ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id);
GGML_API void * ggml_gallocr_get_buffer_base(ggml_gallocr_t galloc); // kvgraph: for checkers and debugging

// kvgraph statistics of the last plan.
struct ggml_gallocr_stats {
    size_t buffer_bytes;       // peak bytes of the compute buffer
    size_t sum_tensor_bytes;   // sum of the sizes of all tensors it placed
    int    n_tensors;          // tensors placed
    int    n_inplace;          // nodes that reuse their source's bytes
    int    n_plans;            // how many times a graph was actually planned
    int64_t plan_time_us;      // time of the last planning
};
GGML_API struct ggml_gallocr_stats ggml_gallocr_get_stats(ggml_gallocr_t galloc);

// For tests/demonstrations: decide reuse by node order alone, as a sequential planner
// does. Correct for one-node-at-a-time execution, unsafe for the DAG executor, which may
// run a node concurrently with an earlier one that no edge orders before it.
GGML_API void ggml_gallocr_set_order_only(ggml_gallocr_t galloc, bool order_only);
// Allow or forbid in-place reuse (default: allowed).
GGML_API void ggml_gallocr_set_inplace(ggml_gallocr_t galloc, bool enable);

// One CPU buffer holding all tensors of a no_alloc context (ggml's
// ggml_backend_alloc_ctx_tensors, CPU only). Views get their root's address.
typedef struct ggml_cpu_buffer * ggml_cpu_buffer_t;
GGML_API ggml_cpu_buffer_t ggml_cpu_alloc_ctx_tensors(struct ggml_context * ctx);
GGML_API size_t            ggml_cpu_buffer_size(ggml_cpu_buffer_t buffer);
GGML_API void *            ggml_cpu_buffer_base(ggml_cpu_buffer_t buffer);
GGML_API void              ggml_cpu_buffer_free(ggml_cpu_buffer_t buffer);

#ifdef __cplusplus
}
#endif
