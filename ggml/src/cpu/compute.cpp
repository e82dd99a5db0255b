// TEMPORARY stub, replaced by the kernels work.
#include "ggml-impl.h"
int ggml_op_n_tasks(const ggml_tensor *, int) { return 1; }
int ggml_op_n_phases(const ggml_tensor *) { return 1; }
size_t ggml_op_work_size(const ggml_tensor *, int) { return 0; }
void ggml_compute_forward(const ggml_compute_params *, ggml_tensor *) {}
