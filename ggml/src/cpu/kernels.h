// CPU kernels, one function per op family. Each runs task params->ith of params->nth
// (splitting rows so that tasks write disjoint bytes) for phase params->phase.
#pragma once

#include "cpu-impl.h"

#include <algorithm>
#include <cmath>

// Rows [begin, end) of task ith out of nth: contiguous, near-equal chunks so that tasks
// write disjoint bytes.
struct task_range {
    int64_t begin, end;
};
inline task_range split_rows(int64_t nr, int ith, int nth) {
    const int64_t per = (nr + nth - 1) / nth;
    const int64_t b = std::min(nr, per * ith);
    return {b, std::min(nr, b + per)};
}

// A phase's n items handed out in chunks. Without a claim counter (params->claim null, or one
// task), task ith takes its static share [n * ith / nth, n * (ith + 1) / nth) in one chunk.
// With one, the items are cut into per_task * nth near-equal chunks; task ith starts with chunk
// ith, then takes the next unclaimed one until none is left. Each item must compute the same
// bits whichever task runs it.
class task_chunks {
public:
    task_chunks(const ggml_compute_params * params, int64_t n, int per_task)
        : n_(n), ith_(params->ith), nth_(params->nth), claim_(params->nth > 1 ? params->claim : nullptr),
          n_chunks_(claim_ ? std::min<int64_t>(n, (int64_t) per_task * params->nth) : params->nth) {}

    // The next chunk [begin, end); false when none is left for this task.
    bool next(int64_t & begin, int64_t & end) {
        int64_t c;
        if (!taken_first_) {
            taken_first_ = true;
            c = ith_;
        } else {
            if (!claim_) return false;
            c = nth_ + claim_->fetch_add(1, std::memory_order_relaxed);
        }
        if (c >= n_chunks_) return false;
        begin = n_ * c / n_chunks_;
        end = n_ * (c + 1) / n_chunks_;
        return true;
    }

private:
    int64_t n_;
    int ith_, nth_;
    std::atomic<int> * claim_;
    int64_t n_chunks_;
    bool taken_first_ = false;
};

// Row (i1, i2, i3) of t.
inline char * row_at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}
// Row r of t, rows counted over dims 1..3.
inline char * nth_row(const ggml_tensor * t, int64_t r) {
    return row_at(t, r % t->ne[1], (r / t->ne[1]) % t->ne[2], r / (t->ne[1] * t->ne[2]));
}
// The elements of each row are adjacent.
inline bool row_is_dense(const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); }

// max with 8 independent lanes (vectorizable; NaNs are ignored)
inline float max_f32(const float * x, int64_t n) {
    float acc[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    }
    float m = -INFINITY;
    for (int j = 0; j < 8; ++j) m = acc[j] > m ? acc[j] : m;
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

// Sum of n floats with 8 independent partial sums: vectorizable, less rounding than one chain.
inline double sum_f32(const float * x, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
    }
    double s = 0.0;
    for (int j = 0; j < 8; ++j) s += acc[j];
    for (; i < n; ++i) s += x[i];
    return s;
}

// kernels-copy.cpp
void ggml_compute_forward_dup(const ggml_compute_params * params, ggml_tensor * dst);      // DUP, CPY, CONT
void ggml_compute_forward_get_rows(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_set_rows(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_concat(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-elementwise.cpp
void ggml_compute_forward_binary(const ggml_compute_params * params, ggml_tensor * dst);   // ADD, SUB, MUL, DIV
void ggml_compute_forward_map(const ggml_compute_params * params, ggml_tensor * dst);      // SQR, SQRT, SCALE, UNARY
void ggml_compute_forward_sum_rows(const ggml_compute_params * params, ggml_tensor * dst); // SUM_ROWS, MEAN
void ggml_compute_forward_sum(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_argmax(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-generate.cpp
void ggml_compute_forward_arange(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_timestep_embedding(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_pad_reflect_1d(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_roll(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_repeat(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-conv.cpp
void ggml_compute_forward_im2col(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_conv_2d(const ggml_compute_params * params, ggml_tensor * dst);          // CONV_2D, CONV_2D_DW
void ggml_compute_forward_conv_transpose(const ggml_compute_params * params, ggml_tensor * dst);   // CONV_TRANSPOSE_1D, _2D
void ggml_compute_forward_pool(const ggml_compute_params * params, ggml_tensor * dst);            // POOL_1D, POOL_2D
void ggml_compute_forward_upscale(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_pad(const ggml_compute_params * params, ggml_tensor * dst);
// kernels-window.cpp (SAM's windowed attention)
void ggml_compute_forward_win_part(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_win_unpart(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_get_rel_pos(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_add_rel_pos(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-norm.cpp
void ggml_compute_forward_norm(const ggml_compute_params * params, ggml_tensor * dst);     // NORM, RMS_NORM
void ggml_compute_forward_soft_max(const ggml_compute_params * params, ggml_tensor * dst);
void ggml_compute_forward_diag_mask_inf(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-rope.cpp
void ggml_compute_forward_rope(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-matmul.cpp: phase 0 converts src1 into the weights' vec_dot_type (in wdata),
// phase 1 computes dot products.
int    ggml_mul_mat_n_phases(const ggml_tensor * dst);
size_t ggml_mul_mat_work_size(const ggml_tensor * dst, int n_tasks);
void   ggml_compute_forward_mul_mat(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-attention.cpp
size_t ggml_flash_attn_ext_work_size(const ggml_tensor * dst, int n_tasks);
int ggml_flash_attn_ext_n_phases(const ggml_tensor * dst); // 2 when a decode splits the cache length
void   ggml_compute_forward_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst);

// kernels-llm.cpp: set/acc (phase 0 copies a unless in place), glu, argsort/top_k,
// mul_mat_id (phase 0 converts b when needed, as mul_mat)
int    ggml_set_n_phases(const ggml_tensor * dst);
void   ggml_compute_forward_set(const ggml_compute_params * params, ggml_tensor * dst);     // SET, ACC
void   ggml_compute_forward_glu(const ggml_compute_params * params, ggml_tensor * dst);
void   ggml_compute_forward_argsort(const ggml_compute_params * params, ggml_tensor * dst); // ARGSORT, TOP_K
int    ggml_mul_mat_id_n_phases(const ggml_tensor * dst);
size_t ggml_mul_mat_id_work_size(const ggml_tensor * dst, int n_tasks);
void   ggml_compute_forward_mul_mat_id(const ggml_compute_params * params, ggml_tensor * dst);
// kernels-elementwise.cpp, for the kernels above: n elements (nb[0] apart) of an F32, F16
// or BF16 row to/from floats; the scalar function of a unary op
void ggml_cpu_load_row(const ggml_tensor * t, const char * row, int64_t n, float * out);
void ggml_cpu_store_row(const ggml_tensor * t, char * row, int64_t n, const float * in);
float (*ggml_cpu_unary_scalar(ggml_unary_op op))(float);
