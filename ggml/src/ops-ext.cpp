// Constructors of the ops in ggml-ops-ext.h: ggml's result shapes, op ids and op_params,
// so the graphs of a ggml program are well formed. Most are not computed by the CPU
// backend (cpu/supports.cpp says which); no math here.
#include "ggml-impl.h"

#include <cmath>
#include <cstring>
#include <initializer_list>

namespace {

// Wires the sources in order and records the op's accesses (as every constructor does).
ggml_tensor * make_op(ggml_context * ctx, ggml_tensor * r, ggml_op op, std::initializer_list<ggml_tensor *> srcs) {
    r->op = op;
    int i = 0;
    for (ggml_tensor * s : srcs) r->src[i++] = s;
    ggml_hazards_on_new_op(ctx, r);
    return r;
}
ggml_tensor * same_as(ggml_context * ctx, ggml_tensor * a, bool inplace) {
    return inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
}
ggml_tensor * f32_tensor(ggml_context * ctx, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
    return ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
}
int64_t conv_out(int64_t in, int64_t k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

ggml_tensor * rope_node(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                        const int * sections, int mode, int n_ctx_orig, const float * f6, bool inplace) {
    int32_t params[16] = {0, n_dims, mode, 0, n_ctx_orig};
    std::memcpy(params + 5, f6, 6 * sizeof(float)); // freq_base .. beta_slow
    if (sections && (mode & GGML_ROPE_TYPE_MROPE))
        std::memcpy(params + 11, sections, GGML_MROPE_SECTIONS * sizeof(int32_t));
    ggml_tensor * r = same_as(ctx, a, inplace);
    ggml_set_op_params(r, params, sizeof(params));
    return make_op(ctx, r, op, {a, b, c});
}

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

} // namespace

static const char * const g_status_names[] = {"GGML status: error (memory allocation failed)", "GGML status: error",
                                              "GGML status: success", "GGML status: warning (operation aborted)"};
const char * ggml_status_to_string(enum ggml_status s) {
    return s >= GGML_STATUS_ALLOC_FAILED && s <= GGML_STATUS_ABORTED ? g_status_names[s + 2] : "GGML status: unknown";
}
const char * ggml_commit(void) { return "kvgraph"; }

void ggml_set_param(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_PARAM; }
void ggml_set_loss(ggml_tensor * t) {
    GGML_ASSERT(ggml_is_scalar(t) && t->type == GGML_TYPE_F32);
    t->flags |= GGML_TENSOR_FLAG_LOSS;
}
void ggml_build_backward_expand(ggml_context *, ggml_cgraph *, ggml_tensor **) {
    GGML_LOG_ERROR("ggml_build_backward_expand: kvgraph has no backward pass; the graph is unchanged\n");
}
ggml_tensor * ggml_graph_get_grad(const ggml_cgraph *, const ggml_tensor *) { return nullptr; }

enum ggml_unary_op ggml_get_unary_op(const ggml_tensor * t) {
    GGML_ASSERT(t->op == GGML_OP_UNARY);
    return (enum ggml_unary_op) ggml_get_op_params_i32(t, 0);
}
bool ggml_prec_set_acc(ggml_tensor * a, enum ggml_prec prec) {
    if (a->op == GGML_OP_MUL_MAT || a->op == GGML_OP_MUL_MAT_ID) ggml_set_op_params_i32(a, 0, (int32_t) prec);
    else if (a->op == GGML_OP_FLASH_ATTN_EXT) ggml_set_op_params_i32(a, 3, (int32_t) prec);
    else return false;
    return true;
}
bool ggml_prec_set_src(ggml_tensor * a, enum ggml_prec prec, int idx) {
    GGML_ASSERT(idx >= 0 && idx < GGML_MAX_SRC);
    if ((a->op != GGML_OP_MUL_MAT && a->op != GGML_OP_MUL_MAT_ID) || idx != 1) return false;
    ggml_set_op_params_i32(a, 2 + idx, (int32_t) prec);
    return true;
}
void ggml_mul_mat_set_hint(ggml_tensor * a, enum ggml_op_hint hint) {
    GGML_ASSERT(a->op == GGML_OP_MUL_MAT);
    ggml_set_op_params_i32(a, 1, (int32_t) hint);
}
void ggml_flash_attn_ext_set_n_kv_max(ggml_tensor * a, int32_t n_kv_max) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT && n_kv_max >= 0);
    ggml_set_op_params_i32(a, 4, n_kv_max);
}
// sinks are a read of a source added after creation: the access model hears of it
static void add_sinks(ggml_tensor * a, ggml_tensor * sinks, ggml_op op, int slot) {
    if (!sinks) {
        a->src[slot] = nullptr;
        return;
    }
    GGML_ASSERT(a->op == op && a->src[slot] == nullptr);
    GGML_ASSERT(sinks->type == GGML_TYPE_F32 && a->src[0]->ne[2] == sinks->ne[0]);
    a->src[slot] = sinks;
}
void ggml_flash_attn_ext_add_sinks(ggml_tensor * a, ggml_tensor * sinks) {
    add_sinks(a, sinks, GGML_OP_FLASH_ATTN_EXT, 4);
}
void ggml_soft_max_add_sinks(ggml_tensor * a, ggml_tensor * sinks) { add_sinks(a, sinks, GGML_OP_SOFT_MAX, 2); }
ggml_tensor * ggml_rope_set_offset(ggml_tensor * a, int n_offs) {
    GGML_ASSERT((a->op == GGML_OP_ROPE || a->op == GGML_OP_ROPE_BACK) && n_offs >= 0);
    GGML_ASSERT(ggml_get_op_params_i32(a, 2) != GGML_ROPE_TYPE_VISION);
    ggml_set_op_params_i32(a, 15, n_offs);
    return a;
}

// ---- elementwise and reductions ----
ggml_tensor * ggml_add_id(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * ids) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_ADD_ID, {a, b, ids});
}
ggml_tensor * ggml_cast(ggml_context * ctx, ggml_tensor * a, enum ggml_type type) {
    ggml_tensor * r = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, a->ne);
    ggml_format_name(r, "%s (copy)", a->name);
    return make_op(ctx, r, GGML_OP_CPY, {a, r}); // ggml's form: the destination is its own src[1]
}
ggml_tensor * ggml_clamp(ggml_context * ctx, ggml_tensor * a, float min, float max) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    const float params[2] = {min, max};
    ggml_set_op_params(r, params, sizeof(params));
    return make_op(ctx, r, GGML_OP_CLAMP, {a});
}
ggml_tensor * ggml_log(ggml_context * ctx, ggml_tensor * a) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_LOG, {a});
}
ggml_tensor * ggml_sin(ggml_context * ctx, ggml_tensor * a) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_SIN, {a});
}
ggml_tensor * ggml_cos(ggml_context * ctx, ggml_tensor * a) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_COS, {a});
}
ggml_tensor * ggml_count_equal(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_are_same_shape(a, b));
    return make_op(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1), GGML_OP_COUNT_EQUAL, {a, b});
}
ggml_tensor * ggml_cumsum(ggml_context * ctx, ggml_tensor * a) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_CUMSUM, {a});
}
ggml_tensor * ggml_diag(ggml_context * ctx, ggml_tensor * a) {
    GGML_ASSERT(a->ne[1] == 1);
    const int64_t ne[4] = {a->ne[0], a->ne[0], a->ne[2], a->ne[3]};
    return make_op(ctx, ggml_new_tensor(ctx, a->type, 4, ne), GGML_OP_DIAG, {a});
}
ggml_tensor * ggml_fill(ggml_context * ctx, ggml_tensor * a, float c) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_f32(r, 0, c);
    return make_op(ctx, r, GGML_OP_FILL, {a});
}
ggml_tensor * ggml_tri(ggml_context * ctx, ggml_tensor * a, enum ggml_tri_type type) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(r, 0, (int32_t) type);
    return make_op(ctx, r, GGML_OP_TRI, {a});
}
ggml_tensor * ggml_leaky_relu(ggml_context * ctx, ggml_tensor * a, float negative_slope, bool inplace) {
    ggml_tensor * r = same_as(ctx, a, inplace);
    ggml_set_op_params_f32(r, 0, negative_slope);
    return make_op(ctx, r, GGML_OP_LEAKY_RELU, {a});
}
ggml_tensor * ggml_xielu(ggml_context * ctx, ggml_tensor * a, float alpha_n, float alpha_p, float beta, float eps) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(r, 0, (int32_t) GGML_UNARY_OP_XIELU);
    ggml_set_op_params_f32(r, 1, beta + softplus(alpha_n));
    ggml_set_op_params_f32(r, 2, softplus(alpha_p));
    ggml_set_op_params_f32(r, 3, beta);
    ggml_set_op_params_f32(r, 4, eps);
    return make_op(ctx, r, GGML_OP_UNARY, {a});
}
ggml_tensor * ggml_swiglu_clamp(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float limit) {
    ggml_tensor * r = ggml_glu_split(ctx, a, b, GGML_GLU_OP_SWIGLU); // shape and checks of a split glu
    ggml_set_op_params_i32(r, 0, (int32_t) GGML_GLU_OP_SWIGLU_CLAMP);
    ggml_set_op_params_f32(r, 3, limit);
    return r;
}
static ggml_tensor * scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b, bool inplace) {
    ggml_tensor * r = inplace ? ggml_scale_inplace(ctx, a, s) : ggml_scale(ctx, a, s);
    ggml_set_op_params_f32(r, 1, b);
    return r;
}
ggml_tensor * ggml_scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b) {
    return scale_bias(ctx, a, s, b, false);
}
ggml_tensor * ggml_scale_bias_inplace(ggml_context * ctx, ggml_tensor * a, float s, float b) {
    return scale_bias(ctx, a, s, b, true);
}
ggml_tensor * ggml_repeat_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    GGML_ASSERT(ne0 % a->ne[0] == 0 && ne1 % a->ne[1] == 0 && ne2 % a->ne[2] == 0 && ne3 % a->ne[3] == 0);
    return make_op(ctx, ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3), GGML_OP_REPEAT, {a});
}
ggml_tensor * ggml_repeat_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(b, a));
    return make_op(ctx, ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, b->ne), GGML_OP_REPEAT_BACK, {a});
}
ggml_tensor * ggml_out_prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return make_op(ctx, f32_tensor(ctx, a->ne[0], b->ne[0], b->ne[2], b->ne[3]), GGML_OP_OUT_PROD, {a, b});
}

// ---- normalization, backward ops ----
ggml_tensor * ggml_group_norm(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(r, 0, n_groups);
    ggml_set_op_params_f32(r, 1, eps);
    return make_op(ctx, r, GGML_OP_GROUP_NORM, {a});
}
ggml_tensor * ggml_l2_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_f32(r, 0, eps);
    return make_op(ctx, r, GGML_OP_L2_NORM, {a});
}
ggml_tensor * ggml_rms_norm_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float eps) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_f32(r, 0, eps);
    return make_op(ctx, r, GGML_OP_RMS_NORM_BACK, {a, b});
}
ggml_tensor * ggml_silu_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return make_op(ctx, ggml_dup_tensor(ctx, a), GGML_OP_SILU_BACK, {a, b});
}
ggml_tensor * ggml_get_rows_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    return make_op(ctx, f32_tensor(ctx, c->ne[0], c->ne[1]), GGML_OP_GET_ROWS_BACK, {a, b});
}
ggml_tensor * ggml_soft_max_ext_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale,
                                     float max_bias) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    return make_op(ctx, r, GGML_OP_SOFT_MAX_BACK, {a, b});
}
ggml_tensor * ggml_cross_entropy_loss(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_are_same_shape(a, b));
    return make_op(ctx, ggml_new_tensor_1d(ctx, a->type, 1), GGML_OP_CROSS_ENTROPY_LOSS, {a, b});
}
ggml_tensor * ggml_cross_entropy_loss_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    return make_op(ctx, ggml_dup_tensor(ctx, b), GGML_OP_CROSS_ENTROPY_LOSS_BACK, {a, b, c});
}
ggml_tensor * ggml_opt_step_adamw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * m,
                                  ggml_tensor * v, ggml_tensor * adamw_params) {
    GGML_ASSERT(ggml_are_same_shape(a, grad) && ggml_are_same_shape(a, m) && ggml_are_same_shape(a, v));
    return make_op(ctx, ggml_view_tensor(ctx, a), GGML_OP_OPT_STEP_ADAMW, {a, grad, m, v, adamw_params});
}
ggml_tensor * ggml_opt_step_sgd(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * sgd_params) {
    return make_op(ctx, ggml_view_tensor(ctx, a), GGML_OP_OPT_STEP_SGD, {a, grad, sgd_params});
}

// ---- rope variants ----
ggml_tensor * ggml_rope_multi(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                              int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig, float freq_base,
                              float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    const float f6[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    return rope_node(ctx, GGML_OP_ROPE, a, b, c, n_dims, sections, mode, n_ctx_orig, f6, false);
}
ggml_tensor * ggml_rope_multi_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                      int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig, float freq_base,
                                      float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                      float beta_slow) {
    const float f6[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    return rope_node(ctx, GGML_OP_ROPE, a, b, c, n_dims, sections, mode, n_ctx_orig, f6, true);
}
ggml_tensor * ggml_rope_ext_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                 int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                 float attn_factor, float beta_fast, float beta_slow) {
    const float f6[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    return rope_node(ctx, GGML_OP_ROPE_BACK, a, b, c, n_dims, nullptr, mode, n_ctx_orig, f6, false);
}
ggml_tensor * ggml_rope_multi_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                   int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                   float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    const float f6[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    return rope_node(ctx, GGML_OP_ROPE_BACK, a, b, c, n_dims, sections, mode, n_ctx_orig, f6, false);
}

// ---- convolutions, padding ----
ggml_tensor * ggml_col2im_1d(ggml_context * ctx, ggml_tensor * a, int s0, int oc, int p0) {
    GGML_ASSERT(oc > 0 && a->ne[0] % oc == 0);
    const int64_t k = a->ne[0] / oc, t_out = (a->ne[1] - 1) * s0 + k - 2 * p0;
    ggml_tensor * r = ggml_new_tensor_2d(ctx, a->type, t_out, oc);
    const int32_t params[3] = {s0, oc, p0};
    ggml_set_op_params(r, params, sizeof(params));
    return make_op(ctx, r, GGML_OP_COL2IM_1D, {a});
}
ggml_tensor * ggml_im2col_3d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t IC, int s0, int s1, int s2,
                             int p0, int p1, int p2, int d0, int d1, int d2, enum ggml_type dst_type) {
    GGML_ASSERT(IC > 0);
    const int64_t n = b->ne[3] / IC;
    const int64_t ow = conv_out(b->ne[0], a->ne[0], s0, p0, d0), oh = conv_out(b->ne[1], a->ne[1], s1, p1, d1);
    const int64_t od = conv_out(b->ne[2], a->ne[2], s2, p2, d2);
    const int64_t ne[4] = {a->ne[0] * a->ne[1] * a->ne[2] * IC, ow, oh, od * n};
    ggml_tensor * r = ggml_new_tensor(ctx, dst_type, 4, ne);
    const int32_t params[10] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, (int32_t) IC};
    ggml_set_op_params(r, params, sizeof(params));
    return make_op(ctx, r, GGML_OP_IM2COL_3D, {a, b});
}
ggml_tensor * ggml_conv_3d_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int s2, int p0,
                                  int p1, int p2, int d0, int d1, int d2, int c, int n, int oc) {
    ggml_tensor * r =
        f32_tensor(ctx, conv_out(b->ne[0], a->ne[0], s0, p0, d0), conv_out(b->ne[1], a->ne[1], s1, p1, d1),
                   conv_out(b->ne[2], a->ne[2], s2, p2, d2), (int64_t) oc * n);
    const int32_t params[12] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc};
    ggml_set_op_params(r, params, sizeof(params));
    return make_op(ctx, r, GGML_OP_CONV_3D, {a, b});
}
ggml_tensor * ggml_pad_ext_circular(ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2,
                                    int rp2, int lp3, int rp3) {
    ggml_tensor * r = ggml_pad_ext(ctx, a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3);
    ggml_set_op_params_i32(r, 8, 1);
    return r;
}
ggml_tensor * ggml_pad_circular(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3) {
    return ggml_pad_ext_circular(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}

// ---- state-space, linear-attention and solver ops: [S*H, tokens + state rows] results ----
ggml_tensor * ggml_ssm_conv(ggml_context * ctx, ggml_tensor * sx, ggml_tensor * c) {
    return make_op(ctx, f32_tensor(ctx, c->ne[1], sx->ne[0] - c->ne[0] + 1, sx->ne[2]), GGML_OP_SSM_CONV, {sx, c});
}
ggml_tensor * ggml_ssm_scan(ggml_context * ctx, ggml_tensor * s, ggml_tensor * x, ggml_tensor * dt, ggml_tensor * A,
                            ggml_tensor * B, ggml_tensor * C, ggml_tensor * ids, int64_t K) {
    const int64_t n = ggml_nelements(x) + K * s->ne[0] * s->ne[1] * s->ne[2] * ids->ne[0];
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_op_params_i32(r, 0, (int32_t) K);
    return make_op(ctx, r, GGML_OP_SSM_SCAN, {s, x, dt, A, B, C, ids});
}
static ggml_tensor * recurrent_result(ggml_context * ctx, const ggml_tensor * k, const ggml_tensor * state) {
    return f32_tensor(ctx, k->ne[0] * k->ne[1], k->ne[2] + k->ne[0] * state->ne[1]);
}
ggml_tensor * ggml_rwkv_wkv6(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * r, ggml_tensor * tf,
                             ggml_tensor * td, ggml_tensor * state) {
    return make_op(ctx, recurrent_result(ctx, k, state), GGML_OP_RWKV_WKV6, {k, v, r, tf, td, state});
}
ggml_tensor * ggml_rwkv_wkv7(ggml_context * ctx, ggml_tensor * r, ggml_tensor * w, ggml_tensor * k, ggml_tensor * v,
                             ggml_tensor * a, ggml_tensor * b, ggml_tensor * state) {
    return make_op(ctx, recurrent_result(ctx, k, state), GGML_OP_RWKV_WKV7, {r, w, k, v, a, b, state});
}
ggml_tensor * ggml_gated_linear_attn(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * q,
                                     ggml_tensor * g, ggml_tensor * state, float scale) {
    ggml_tensor * res = recurrent_result(ctx, k, state);
    ggml_set_op_params_f32(res, 0, scale);
    return make_op(ctx, res, GGML_OP_GATED_LINEAR_ATTN, {k, v, q, g, state});
}
ggml_tensor * ggml_gated_delta_net(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * g, ggml_tensor * beta, ggml_tensor * state, int64_t K) {
    const int64_t sv = v->ne[0], h = v->ne[1], n_tokens = v->ne[2], n_seqs = v->ne[3];
    ggml_tensor * r = f32_tensor(ctx, sv * h, n_tokens * n_seqs + K * sv * n_seqs);
    ggml_set_op_params_i32(r, 0, (int32_t) K);
    return make_op(ctx, r, GGML_OP_GATED_DELTA_NET, {q, k, v, g, beta, state});
}
ggml_tensor * ggml_solve_tri(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool, bool, bool) {
    return make_op(ctx, f32_tensor(ctx, b->ne[0], b->ne[1], b->ne[2], b->ne[3]), GGML_OP_SOLVE_TRI, {a, b});
}
ggml_tensor * ggml_lightning_indexer(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * weights,
                                     ggml_tensor * mask) {
    return make_op(ctx, f32_tensor(ctx, k->ne[2], q->ne[2], 1, q->ne[3]), GGML_OP_LIGHTNING_INDEXER,
                   {q, k, weights, mask});
}
ggml_tensor * ggml_dsv4_hc_comb(ggml_context * ctx, ggml_tensor * mixes, ggml_tensor * scale, ggml_tensor * base,
                                float eps, int32_t n_iter) {
    // mixes rows hold hc pre + hc post + hc*hc comb values: hc*hc + 2*hc = ne0
    int64_t hc = 1;
    while ((hc + 2) * hc < mixes->ne[0]) ++hc;
    GGML_ASSERT((hc + 2) * hc == mixes->ne[0]);
    ggml_tensor * r = f32_tensor(ctx, hc, hc, mixes->ne[1]);
    ggml_set_op_params_f32(r, 0, eps);
    ggml_set_op_params_i32(r, 1, n_iter);
    return make_op(ctx, r, GGML_OP_DSV4_HC_COMB, {mixes, scale, base});
}
static ggml_tensor * dsv4_hc_pre(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float scale, bool gated) {
    ggml_tensor * r = f32_tensor(ctx, x->ne[0], x->ne[2]);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_i32(r, 1, gated ? 1 : 0);
    return make_op(ctx, r, GGML_OP_DSV4_HC_PRE, {x, w});
}
ggml_tensor * ggml_dsv4_hc_pre(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weights) {
    return dsv4_hc_pre(ctx, x, weights, 1.0f, false);
}
ggml_tensor * ggml_dsv4_hc_pre_gated(ggml_context * ctx, ggml_tensor * x, ggml_tensor * gate, float scale) {
    return dsv4_hc_pre(ctx, x, gate, scale, true);
}
ggml_tensor * ggml_dsv4_hc_post(ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual, ggml_tensor * post,
                                ggml_tensor * comb) {
    return make_op(ctx, f32_tensor(ctx, x->ne[0], residual->ne[1], x->ne[1]), GGML_OP_DSV4_HC_POST,
                   {x, residual, post, comb});
}
