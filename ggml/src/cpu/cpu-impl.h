// The CPU compute's private interface between the executor (exec-impl.h), the per-op
// task planning and dispatch (compute.cpp) and the kernels: a task's parameters.
#pragma once

#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <atomic>

struct ggml_compute_params {
    int ith, nth;   // this task's index and the node's task count
    int phase;      // 0..n_phases-1; all tasks of a phase finish before the next starts
    void * wdata;   // node's scratch (ggml_op_work_size bytes), shared by its tasks
    size_t wsize;
    // The node's work counter for this phase, zero when the phase starts, or null (barrier
    // scheduler). Tasks that take their items from it (task_chunks, kernels.h) balance the
    // load: a task that started late or ran slow takes fewer.
    std::atomic<int> * claim = nullptr;
};
// Number of tasks a node splits into for n_threads (1 for view ops and tiny nodes).
int    ggml_op_n_tasks(const struct ggml_tensor * node, int n_threads);
// Phases of a node (e.g. mul_mat: convert src1, then dot products).
int    ggml_op_n_phases(const struct ggml_tensor * node);
// Scratch bytes a node needs when run with n_tasks tasks.
size_t ggml_op_work_size(const struct ggml_tensor * node, int n_tasks);
// The three facts above for every node of sc (by exec position) on n_threads threads and the
// active kernel path, computed once per schedule, thread count and path (kept in sc).
const ggml_graph_sched::node_facts * ggml_exec_facts(const ggml_graph_sched * sc, int n_threads);
// Runs one task of one phase of a node.
void   ggml_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * node);
// What the CPU computes (supports.cpp): why node's op or variant is not computed (nullptr
// if it is), and whether its types are taken too (ggml_backend_supports_op).
const char * ggml_cpu_op_refusal(const struct ggml_tensor * node);
bool ggml_cpu_supports_op(const struct ggml_tensor * node);
