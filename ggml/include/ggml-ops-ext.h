// The rest of ggml.h's names that ggml's own test suite (test-backend-ops) uses: op
// constructors with ggml's signatures, result shapes, op ids and op_params, so a ggml
// program builds and its graphs are well formed. Part of ggml.h (included at its end).
//
// Most of these ops are NOT computed by kvgraph's CPU backend: ggml_backend_supports_op
// answers false for them (and for the variants noted below), and computing a graph that
// holds one fails with GGML_STATUS_FAILED and a message naming the node, before any node
// runs. ggml_backend_supports_op is the one source of truth for what the CPU computes.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ggml_op_hint {
    GGML_HINT_NONE = 0,
    GGML_HINT_SRC0_IS_HADAMARD = 1, // a hint only: kvgraph computes the plain product
};

enum ggml_tri_type {
    GGML_TRI_TYPE_UPPER_DIAG = 0,
    GGML_TRI_TYPE_UPPER = 1,
    GGML_TRI_TYPE_LOWER_DIAG = 2,
    GGML_TRI_TYPE_LOWER = 3,
};

// "success", "error", ... for a status; "unknown status" for other values.
GGML_API const char * ggml_status_to_string(enum ggml_status status);
// The source revision ggml reports; kvgraph answers "kvgraph".
GGML_API const char * ggml_commit(void);

// ---- training marks and backward graphs (kvgraph has no backward pass) ----
// Flags only (GGML_TENSOR_FLAG_PARAM / _LOSS); set_loss wants a scalar.
GGML_API void ggml_set_param(struct ggml_tensor * tensor);
GGML_API void ggml_set_loss(struct ggml_tensor * tensor);
// Logs an error and leaves the graph as it is; get_grad is always NULL.
GGML_API void ggml_build_backward_expand(struct ggml_context * ctx, struct ggml_cgraph * cgraph,
                                         struct ggml_tensor ** grad_accs);
GGML_API struct ggml_tensor * ggml_graph_get_grad(const struct ggml_cgraph * cgraph, const struct ggml_tensor * node);

// ---- parameters of existing ops ----
GGML_API enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor); // tensor->op must be UNARY
// mul_mat, mul_mat_id: op_params[0]; flash_attn_ext: op_params[3]. false for other ops.
GGML_API bool ggml_prec_set_acc(struct ggml_tensor * a, enum ggml_prec prec);
// mul_mat(_id), idx 1 only: op_params[2 + idx]. false otherwise.
GGML_API bool ggml_prec_set_src(struct ggml_tensor * a, enum ggml_prec prec, int idx);
GGML_API void ggml_mul_mat_set_hint(struct ggml_tensor * a, enum ggml_op_hint hint); // op_params[1]
// op_params[4]; the CPU computes only n_kv_max == 0 (all of K).
GGML_API void ggml_flash_attn_ext_set_n_kv_max(struct ggml_tensor * a, int32_t n_kv_max);
// Attention sinks: F32 [n_head] as src[4] (flash_attn_ext) or src[2] (soft_max). Not
// computed by the CPU (kvgraph's flash_attn_ext uses an I32 src[4] for its own kv_len).
GGML_API void ggml_flash_attn_ext_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);
GGML_API void ggml_soft_max_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);
// Rope position offset, op_params[15]; the CPU computes only 0.
GGML_API struct ggml_tensor * ggml_rope_set_offset(struct ggml_tensor * a, int n_offs);

// ---- elementwise and reductions ----
GGML_API struct ggml_tensor * ggml_add_id(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          struct ggml_tensor * ids);
GGML_API struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a,
                                        enum ggml_type type); // CPY into a new tensor
GGML_API struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
GGML_API struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sin(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cos(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_count_equal(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b); // I64 [1]
GGML_API struct ggml_tensor * ggml_cumsum(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_diag(struct ggml_context * ctx, struct ggml_tensor * a); // [n, 1, ..] -> [n, n, ..]
GGML_API struct ggml_tensor * ggml_fill(struct ggml_context * ctx, struct ggml_tensor * a, float c);
GGML_API struct ggml_tensor * ggml_tri(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_tri_type type);
GGML_API struct ggml_tensor * ggml_leaky_relu(struct ggml_context * ctx, struct ggml_tensor * a, float negative_slope,
                                              bool inplace);
GGML_API struct ggml_tensor * ggml_xielu(struct ggml_context * ctx, struct ggml_tensor * a, float alpha_n,
                                         float alpha_p, float beta, float eps);
GGML_API struct ggml_tensor * ggml_swiglu_clamp(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * b, float limit);
// SCALE with a bias: a*s + b (op_params[1] = b); the CPU computes b == 0 only.
GGML_API struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b);
GGML_API struct ggml_tensor * ggml_scale_bias_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s,
                                                      float b);
GGML_API struct ggml_tensor * ggml_repeat_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                             int64_t ne1, int64_t ne2, int64_t ne3);
GGML_API struct ggml_tensor * ggml_repeat_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_out_prod(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);

// ---- normalization, backward ops ----
GGML_API struct ggml_tensor * ggml_group_norm(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups,
                                              float eps);
GGML_API struct ggml_tensor * ggml_l2_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_rms_norm_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, float eps);
GGML_API struct ggml_tensor * ggml_silu_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_get_rows_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, struct ggml_tensor * c);
GGML_API struct ggml_tensor * ggml_soft_max_ext_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, float scale, float max_bias);
GGML_API struct ggml_tensor * ggml_cross_entropy_loss(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_cross_entropy_loss_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                           struct ggml_tensor * b, struct ggml_tensor * c);
GGML_API struct ggml_tensor * ggml_opt_step_adamw(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * grad, struct ggml_tensor * m,
                                                  struct ggml_tensor * v, struct ggml_tensor * adamw_params);
GGML_API struct ggml_tensor * ggml_opt_step_sgd(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * grad, struct ggml_tensor * sgd_params);

// ---- rope variants (multi-section and vision rope, backward) ----
GGML_API struct ggml_tensor * ggml_rope_multi(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                              struct ggml_tensor * c, int n_dims, int sections[GGML_MROPE_SECTIONS],
                                              int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                              float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_multi_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                      int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig,
                                                      float freq_base, float freq_scale, float ext_factor,
                                                      float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_ext_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, struct ggml_tensor * c, int n_dims, int mode,
                                                 int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                                 float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_multi_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                   struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                   int sections[4], int mode, int n_ctx_orig, float freq_base,
                                                   float freq_scale, float ext_factor, float attn_factor,
                                                   float beta_fast, float beta_slow);

// ---- convolutions, padding ----
GGML_API struct ggml_tensor * ggml_col2im_1d(struct ggml_context * ctx, struct ggml_tensor * a, int s0, int oc, int p0);
GGML_API struct ggml_tensor * ggml_im2col_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                             int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1,
                                             int d2, enum ggml_type dst_type);
GGML_API struct ggml_tensor * ggml_conv_3d_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, int s0, int s1, int s2, int p0, int p1,
                                                  int p2, int d0, int d1, int d2, int n_channels, int n_batch,
                                                  int n_channels_out);
// PAD with op_params[8] = 1 (wrap around); the CPU computes zero padding only.
GGML_API struct ggml_tensor * ggml_pad_circular(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1,
                                                int p2, int p3);
GGML_API struct ggml_tensor * ggml_pad_ext_circular(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0,
                                                    int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);

// ---- state-space, linear-attention and solver ops ----
GGML_API struct ggml_tensor * ggml_ssm_conv(struct ggml_context * ctx, struct ggml_tensor * sx, struct ggml_tensor * c);
GGML_API struct ggml_tensor * ggml_ssm_scan(struct ggml_context * ctx, struct ggml_tensor * s, struct ggml_tensor * x,
                                            struct ggml_tensor * dt, struct ggml_tensor * A, struct ggml_tensor * B,
                                            struct ggml_tensor * C, struct ggml_tensor * ids, int64_t K);
GGML_API struct ggml_tensor * ggml_rwkv_wkv6(struct ggml_context * ctx, struct ggml_tensor * k, struct ggml_tensor * v,
                                             struct ggml_tensor * r, struct ggml_tensor * tf, struct ggml_tensor * td,
                                             struct ggml_tensor * state);
GGML_API struct ggml_tensor * ggml_rwkv_wkv7(struct ggml_context * ctx, struct ggml_tensor * r, struct ggml_tensor * w,
                                             struct ggml_tensor * k, struct ggml_tensor * v, struct ggml_tensor * a,
                                             struct ggml_tensor * b, struct ggml_tensor * state);
GGML_API struct ggml_tensor * ggml_gated_linear_attn(struct ggml_context * ctx, struct ggml_tensor * k,
                                                     struct ggml_tensor * v, struct ggml_tensor * q,
                                                     struct ggml_tensor * g, struct ggml_tensor * state, float scale);
GGML_API struct ggml_tensor * ggml_gated_delta_net(struct ggml_context * ctx, struct ggml_tensor * q,
                                                   struct ggml_tensor * k, struct ggml_tensor * v,
                                                   struct ggml_tensor * g, struct ggml_tensor * beta,
                                                   struct ggml_tensor * state, int64_t K);
GGML_API struct ggml_tensor * ggml_solve_tri(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                             bool left, bool lower, bool uni);
GGML_API struct ggml_tensor * ggml_lightning_indexer(struct ggml_context * ctx, struct ggml_tensor * q,
                                                     struct ggml_tensor * k, struct ggml_tensor * weights,
                                                     struct ggml_tensor * mask);
GGML_API struct ggml_tensor * ggml_dsv4_hc_comb(struct ggml_context * ctx, struct ggml_tensor * mixes,
                                                struct ggml_tensor * scale, struct ggml_tensor * base, float eps,
                                                int32_t n_iter);
GGML_API struct ggml_tensor * ggml_dsv4_hc_pre(struct ggml_context * ctx, struct ggml_tensor * x,
                                               struct ggml_tensor * weights);
GGML_API struct ggml_tensor * ggml_dsv4_hc_pre_gated(struct ggml_context * ctx, struct ggml_tensor * x,
                                                     struct ggml_tensor * gate, float scale);
GGML_API struct ggml_tensor * ggml_dsv4_hc_post(struct ggml_context * ctx, struct ggml_tensor * x,
                                                struct ggml_tensor * residual, struct ggml_tensor * post,
                                                struct ggml_tensor * comb);

#ifdef __cplusplus
}
#endif
