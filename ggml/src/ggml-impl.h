// Internal structures shared by the library's files (not installed).
#pragma once

#include "ggml.h"
#include "ggml-cpu.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <deque>
#include <vector>

struct ggml_hazard_log; // per-context access log (hazards.cpp)

// One allocation inside the arena: a tensor (struct + data), a graph, or a work buffer.
struct ggml_object {
    size_t offs;  // of the payload from the start of mem_buffer
    size_t size;  // payload bytes
    struct ggml_object * next;
    int type;     // ggml_object_type
    char padding[4];
};

enum ggml_object_type { GGML_OBJECT_TYPE_TENSOR, GGML_OBJECT_TYPE_GRAPH, GGML_OBJECT_TYPE_WORK_BUFFER };

static const size_t GGML_OBJECT_SIZE = sizeof(struct ggml_object);

struct ggml_context {
    size_t mem_size;
    void * mem_buffer;
    bool   mem_buffer_owned;
    bool   no_alloc;
    int    n_objects;
    struct ggml_object * objects_begin;
    struct ggml_object * objects_end;

    // Storage for control-edge arrays of tensors created here (outside the arena so that
    // arena sizing stays what ggml programs expect).
    std::deque<std::vector<ggml_dep>> * dep_storage; // deque: element addresses stay put
    ggml_hazard_log * hazards;
};

// Open-addressing set of tensor pointers (graph membership).
struct ggml_hash_set {
    size_t size;
    uint32_t * used; // bitset
    struct ggml_tensor ** keys;
};

struct ggml_cgraph {
    int size;
    int n_nodes;
    int n_leafs;
    struct ggml_tensor ** nodes; // ops, topologically ordered over data + control edges
    struct ggml_tensor ** leafs; // tensors without an op (weights, inputs, constants)
    struct ggml_hash_set visited_hash_set;
    struct ggml_context * ctx; // owner: edges the planner adds are stored there
};

// op_params of GGML_OP_MAP_CUSTOM1..3
struct custom_op_params {
    void * fun;
    int n_tasks;
    void * userdata;
};
static_assert(sizeof(custom_op_params) <= GGML_MAX_OP_PARAMS, "custom op params must fit");

// ---- context helpers (context.cpp) ----
struct ggml_tensor * ggml_new_tensor_impl(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                          const int64_t * ne, struct ggml_tensor * view_src, size_t view_offs);
// Allocates raw bytes in the arena (graphs, work buffers); aborts with a clear message if it does not fit.
struct ggml_object * ggml_new_object(struct ggml_context * ctx, enum ggml_object_type type, size_t size);
void ggml_set_op_params(struct ggml_tensor * tensor, const void * params, size_t size);
int32_t ggml_get_op_params_i32(const struct ggml_tensor * tensor, uint32_t i);
float   ggml_get_op_params_f32(const struct ggml_tensor * tensor, uint32_t i);
void    ggml_set_op_params_i32(struct ggml_tensor * tensor, uint32_t i, int32_t value);
void    ggml_set_op_params_f32(struct ggml_tensor * tensor, uint32_t i, float value);
// Appends a control edge unless an identical one exists (storage in ctx).
void ggml_push_dep(struct ggml_context * ctx, struct ggml_tensor * tensor, struct ggml_tensor * dep, enum ggml_dep_kind kind);
// View ops share bytes and compute nothing.
bool ggml_op_is_view(enum ggml_op op);
// A computing op whose result is a view writes into memory owned by another tensor.
bool ggml_writes_borrowed_memory(const struct ggml_tensor * t);

// ---- hazards (hazards.cpp) ----
// Called by every op constructor once src[] and view_src are set: records the op's
// accesses and its control edges.
void ggml_hazards_on_new_op(struct ggml_context * ctx, struct ggml_tensor * tensor);
ggml_hazard_log * ggml_hazards_new(void);
void ggml_hazards_clear(ggml_hazard_log * log);
void ggml_hazards_free(ggml_hazard_log * log);
// Does the op read its source i? (cpy's src[1] is only its destination.)
bool ggml_op_reads_src(const struct ggml_tensor * t, int i);
// Byte extent [begin, end) of a tensor inside its root (conservative hull for strided views).
void ggml_tensor_extent(const struct ggml_tensor * t, const struct ggml_tensor ** root, size_t * begin, size_t * end);

// ---- graphs (graph.cpp) ----
size_t ggml_hash_find(const struct ggml_hash_set * set, const struct ggml_tensor * key); // index or SIZE_MAX
bool   ggml_hash_contains(const struct ggml_hash_set * set, const struct ggml_tensor * key);
bool   ggml_graph_has_node(const struct ggml_cgraph * g, const struct ggml_tensor * t);

// ---- CPU compute (cpu/) ----
struct ggml_compute_params {
    int ith, nth;   // this task's index and the node's task count
    int phase;      // 0..n_phases-1; all tasks of a phase finish before the next starts
    void * wdata;   // node's scratch (ggml_op_work_size bytes), shared by its tasks
    size_t wsize;
};
// Number of tasks a node splits into for n_threads (1 for view ops and tiny nodes).
int    ggml_op_n_tasks(const struct ggml_tensor * node, int n_threads);
// Phases of a node (e.g. mul_mat: convert src1, then dot products).
int    ggml_op_n_phases(const struct ggml_tensor * node);
// Scratch bytes a node needs when run with n_tasks tasks.
size_t ggml_op_work_size(const struct ggml_tensor * node, int n_tasks);
// Runs one task of one phase of a node.
void   ggml_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * node);

#endif // __cplusplus
