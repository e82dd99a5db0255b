// Op constructors: shape rules, source wiring, op params. No math here (see cpu/).
// Every constructor ends in finish_op(), which hands the new op to the hazard rules.
#include "ggml-impl.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

static ggml_tensor * finish_op(ggml_context * ctx, ggml_tensor * t) {
    ggml_hazards_on_new_op(ctx, t);
    return t;
}

// result of an op: fresh memory, or (inplace) a view of a whose bytes the op overwrites
static ggml_tensor * new_result(ggml_context * ctx, ggml_tensor * a, bool inplace) {
    return inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
}

// ---- copies -------------------------------------------------------------------------------
static ggml_tensor * dup_impl(ggml_context * ctx, ggml_tensor * a, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = GGML_OP_DUP;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a) { return dup_impl(ctx, a, false); }
ggml_tensor * ggml_dup_inplace(ggml_context * ctx, ggml_tensor * a) { return dup_impl(ctx, a, true); }

ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_nelements(a) == ggml_nelements(b));
    ggml_tensor * r = ggml_view_tensor(ctx, b);
    if (std::strlen(b->name) > 0) ggml_format_name(r, "%s (copy of %s)", b->name, a->name);
    else ggml_format_name(r, "%s (copy)", a->name);
    r->op = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    return finish_op(ctx, r);
}

static ggml_tensor * cont_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne) {
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) n *= ne[i];
    GGML_ASSERT(n == ggml_nelements(a));
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, n_dims, ne);
    ggml_format_name(r, "%s (cont)", a->name);
    r->op = GGML_OP_CONT;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a) { return cont_impl(ctx, a, 4, a->ne); }
ggml_tensor * ggml_cont_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) { return cont_impl(ctx, a, 1, &ne0); }
ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[] = {ne0, ne1};
    return cont_impl(ctx, a, 2, ne);
}
ggml_tensor * ggml_cont_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[] = {ne0, ne1, ne2};
    return cont_impl(ctx, a, 3, ne);
}
ggml_tensor * ggml_cont_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[] = {ne0, ne1, ne2, ne3};
    return cont_impl(ctx, a, 4, ne);
}

// ---- elementwise ----------------------------------------------------------------------------
static ggml_tensor * binary_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, enum ggml_op op, bool inplace) {
    if (!ggml_can_repeat(b, a)) {
        GGML_ABORT("%s: cannot broadcast b [%lld,%lld,%lld,%lld] to a [%lld,%lld,%lld,%lld]", ggml_op_name(op),
                   (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2], (long long) b->ne[3],
                   (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) a->ne[3]);
    }
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_ADD, false); }
ggml_tensor * ggml_add_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_ADD, true); }
ggml_tensor * ggml_sub(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_SUB, false); }
ggml_tensor * ggml_sub_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_SUB, true); }
ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_MUL, false); }
ggml_tensor * ggml_mul_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_MUL, true); }
ggml_tensor * ggml_div(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_DIV, false); }
ggml_tensor * ggml_div_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary_impl(ctx, a, b, GGML_OP_DIV, true); }

static ggml_tensor * unary_op_impl(ggml_context * ctx, ggml_tensor * a, enum ggml_op op, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = op;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_sqr(ggml_context * ctx, ggml_tensor * a) { return unary_op_impl(ctx, a, GGML_OP_SQR, false); }
ggml_tensor * ggml_sqr_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_op_impl(ctx, a, GGML_OP_SQR, true); }
ggml_tensor * ggml_sqrt(ggml_context * ctx, ggml_tensor * a) { return unary_op_impl(ctx, a, GGML_OP_SQRT, false); }
ggml_tensor * ggml_sqrt_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_op_impl(ctx, a, GGML_OP_SQRT, true); }

static ggml_tensor * scale_impl(ggml_context * ctx, ggml_tensor * a, float s, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = GGML_OP_SCALE;
    ggml_set_op_params_f32(r, 0, s);
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s) { return scale_impl(ctx, a, s, false); }
ggml_tensor * ggml_scale_inplace(ggml_context * ctx, ggml_tensor * a, float s) { return scale_impl(ctx, a, s, true); }

static ggml_tensor * unary_impl(ggml_context * ctx, ggml_tensor * a, enum ggml_unary_op op, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = GGML_OP_UNARY;
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_unary(ggml_context * ctx, ggml_tensor * a, enum ggml_unary_op op) { return unary_impl(ctx, a, op, false); }
ggml_tensor * ggml_unary_inplace(ggml_context * ctx, ggml_tensor * a, enum ggml_unary_op op) { return unary_impl(ctx, a, op, true); }
ggml_tensor * ggml_relu(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_RELU, false); }
ggml_tensor * ggml_relu_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_RELU, true); }
ggml_tensor * ggml_gelu(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_GELU, false); }
ggml_tensor * ggml_gelu_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_GELU, true); }
ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_SILU, false); }
ggml_tensor * ggml_silu_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_SILU, true); }
#define UNARY_OP(name, OP)                                                                                       \
    ggml_tensor * ggml_##name(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, OP, false); }       \
    ggml_tensor * ggml_##name##_inplace(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, OP, true); }
UNARY_OP(abs, GGML_UNARY_OP_ABS)
UNARY_OP(sgn, GGML_UNARY_OP_SGN)
UNARY_OP(neg, GGML_UNARY_OP_NEG)
UNARY_OP(step, GGML_UNARY_OP_STEP)
UNARY_OP(tanh, GGML_UNARY_OP_TANH)
UNARY_OP(elu, GGML_UNARY_OP_ELU)
UNARY_OP(sigmoid, GGML_UNARY_OP_SIGMOID)
UNARY_OP(gelu_quick, GGML_UNARY_OP_GELU_QUICK)
UNARY_OP(hardswish, GGML_UNARY_OP_HARDSWISH)
UNARY_OP(hardsigmoid, GGML_UNARY_OP_HARDSIGMOID)
UNARY_OP(exp, GGML_UNARY_OP_EXP)
UNARY_OP(expm1, GGML_UNARY_OP_EXPM1)
UNARY_OP(softplus, GGML_UNARY_OP_SOFTPLUS)
UNARY_OP(gelu_erf, GGML_UNARY_OP_GELU_ERF)
UNARY_OP(floor, GGML_UNARY_OP_FLOOR)
UNARY_OP(ceil, GGML_UNARY_OP_CEIL)
UNARY_OP(round, GGML_UNARY_OP_ROUND)
UNARY_OP(trunc, GGML_UNARY_OP_TRUNC)
#undef UNARY_OP

// ---- reductions -----------------------------------------------------------------------------
ggml_tensor * ggml_sum_rows(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]);
    r->op = GGML_OP_SUM_ROWS;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_sum(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_1d(ctx, a->type, 1);
    r->op = GGML_OP_SUM;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_mean(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
    r->op = GGML_OP_MEAN;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_repeat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(a, b));
    if (ggml_are_same_shape(a, b)) return a; // as ggml
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, b->ne);
    r->op = GGML_OP_REPEAT;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a) {
    GGML_ASSERT(ggml_is_matrix(a) && a->type == GGML_TYPE_F32);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, a->ne[1]);
    r->op = GGML_OP_ARGMAX;
    r->src[0] = a;
    return finish_op(ctx, r);
}
// b placed after a along dim; every other extent must agree.
ggml_tensor * ggml_concat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int dim) {
    if (dim < 0 || dim >= GGML_MAX_DIMS) GGML_ABORT("concat: dim %d is outside 0..%d", dim, GGML_MAX_DIMS - 1);
    if (a->type != b->type) {
        GGML_ABORT("concat: '%s' is %s but '%s' is %s", a->name, ggml_type_name(a->type), b->name,
                   ggml_type_name(b->type));
    }
    int64_t joined[GGML_MAX_DIMS];
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (d != dim && a->ne[d] != b->ne[d]) {
            GGML_ABORT("concat along dim %d: dim %d is %lld in '%s' but %lld in '%s'", dim, d, (long long) a->ne[d],
                       a->name, (long long) b->ne[d], b->name);
        }
        joined[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
    }
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, joined);
    ggml_set_op_params_i32(r, 0, dim);
    return ggml_finish_op(ctx, r, GGML_OP_CONCAT, a, b);
}

static ggml_tensor * norm_impl(ggml_context * ctx, ggml_tensor * a, float eps, enum ggml_op op, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    r->op = op;
    ggml_set_op_params_f32(r, 0, eps);
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_norm(ggml_context * ctx, ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_NORM, false); }
ggml_tensor * ggml_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_NORM, true); }
ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, false); }
ggml_tensor * ggml_rms_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, true); }

// ---- matmul -----------------------------------------------------------------------------------
ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0 || ggml_is_transposed(a)) {
        GGML_ABORT("ggml_mul_mat: incompatible shapes a [%lld,%lld,%lld,%lld] b [%lld,%lld,%lld,%lld]%s",
                   (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) a->ne[3],
                   (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2], (long long) b->ne[3],
                   ggml_is_transposed(a) ? " (a is transposed)" : "");
    }
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]);
    r->op = GGML_OP_MUL_MAT;
    r->src[0] = a;
    r->src[1] = b;
    return finish_op(ctx, r);
}

// ---- views --------------------------------------------------------------------------------------
ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return ggml_reshape_4d(ctx, a, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}
static ggml_tensor * reshape_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne) {
    GGML_ASSERT(ggml_is_contiguous(a));
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) n *= ne[i];
    if (n != ggml_nelements(a)) {
        GGML_ABORT("ggml_reshape: %lld elements cannot be reshaped to %lld", (long long) ggml_nelements(a), (long long) n);
    }
    ggml_tensor * r = ggml_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    ggml_format_name(r, "%s (reshaped)", a->name);
    r->op = GGML_OP_RESHAPE;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) { return reshape_impl(ctx, a, 1, &ne0); }
ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne);
}
ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne);
}
ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne);
}

static ggml_tensor * view_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, const size_t * nb, size_t offset) {
    ggml_tensor * r = ggml_new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    ggml_format_name(r, "%s (view)", a->name);
    for (int i = 1; i < n_dims; ++i) r->nb[i] = nb[i - 1];
    for (int i = n_dims; i < GGML_MAX_DIMS; ++i) r->nb[i] = r->nb[i - 1] * r->ne[i - 1];
    // the view's extent must stay inside the viewed bytes
    GGML_ASSERT(ggml_nbytes(r) == 0 || r->view_offs + ggml_nbytes(r) <= ggml_nbytes(r->view_src));
    std::memcpy(r->op_params, &offset, sizeof(offset));
    r->op = GGML_OP_VIEW;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset) {
    return view_impl(ctx, a, 1, &ne0, nullptr, offset);
}
ggml_tensor * ggml_view_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[] = {ne0, ne1};
    const size_t nb[] = {nb1};
    return view_impl(ctx, a, 2, ne, nb, offset);
}
ggml_tensor * ggml_view_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[] = {ne0, ne1, ne2};
    const size_t nb[] = {nb1, nb2};
    return view_impl(ctx, a, 3, ne, nb, offset);
}
ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[] = {ne0, ne1, ne2, ne3};
    const size_t nb[] = {nb1, nb2, nb3};
    return view_impl(ctx, a, 4, ne, nb, offset);
}

ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    const int axes[4] = {axis0, axis1, axis2, axis3};
    for (int i = 0; i < 4; ++i) {
        GGML_ASSERT(axes[i] >= 0 && axes[i] < GGML_MAX_DIMS);
        for (int j = 0; j < i; ++j) GGML_ASSERT(axes[i] != axes[j]);
    }
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%s (permuted)", a->name);
    // source dim i goes to position axes[i]
    for (int i = 0; i < 4; ++i) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    r->op = GGML_OP_PERMUTE;
    r->src[0] = a;
    for (int i = 0; i < 4; ++i) ggml_set_op_params_i32(r, i, axes[i]);
    return finish_op(ctx, r);
}
// The first two dims trade places, strides with them; no byte moves.
ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_view_tensor(ctx, a); // starts with a's shape and strides
    std::swap(r->ne[0], r->ne[1]);
    std::swap(r->nb[0], r->nb[1]);
    ggml_format_name(r, "%s (transposed)", a->name);
    return ggml_finish_op(ctx, r, GGML_OP_TRANSPOSE, a);
}

// ---- rows -----------------------------------------------------------------------------------------
ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(a->ne[2] == b->ne[1] && b->ne[3] == 1 && b->type == GGML_TYPE_I32);
    const enum ggml_type type = a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32;
    ggml_tensor * r = ggml_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    r->op = GGML_OP_GET_ROWS;
    r->src[0] = a;
    r->src[1] = b;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    GGML_ASSERT(a->ne[0] == b->ne[0] && b->ne[1] == c->ne[0]);
    GGML_ASSERT(a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3]);
    GGML_ASSERT(b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0 && c->ne[3] == 1);
    GGML_ASSERT((b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16) &&
                (c->type == GGML_TYPE_I32 || c->type == GGML_TYPE_I64));
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op = GGML_OP_SET_ROWS;
    r->src[0] = b;
    r->src[1] = c;
    return finish_op(ctx, r);
}

// ---- masks, softmax, rope ------------------------------------------------------------------------
static ggml_tensor * diag_mask_inf_impl(ggml_context * ctx, ggml_tensor * a, int n_past, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    ggml_set_op_params_i32(r, 0, n_past);
    r->op = GGML_OP_DIAG_MASK_INF;
    r->src[0] = a;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past) { return diag_mask_inf_impl(ctx, a, n_past, false); }
ggml_tensor * ggml_diag_mask_inf_inplace(ggml_context * ctx, ggml_tensor * a, int n_past) { return diag_mask_inf_impl(ctx, a, n_past, true); }

static ggml_tensor * soft_max_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias, bool inplace) {
    GGML_ASSERT(ggml_is_contiguous_rows(a) && a->type == GGML_TYPE_F32);
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F16 || mask->type == GGML_TYPE_F32);
        GGML_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0);
    }
    ggml_tensor * r = new_result(ctx, a, inplace);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    r->op = GGML_OP_SOFT_MAX;
    r->src[0] = a;
    r->src[1] = mask;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a) { return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, false); }
ggml_tensor * ggml_soft_max_inplace(ggml_context * ctx, ggml_tensor * a) { return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, true); }
ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, false);
}
ggml_tensor * ggml_soft_max_ext_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, true);
}

static ggml_tensor * rope_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
                               int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                               float beta_fast, float beta_slow, bool inplace) {
    GGML_ASSERT(b->type == GGML_TYPE_I32 && ggml_is_vector(b) && a->ne[2] == b->ne[0]);
    GGML_ASSERT(n_dims <= a->ne[0] && n_dims % 2 == 0);
    GGML_ASSERT(c == nullptr || (c->type == GGML_TYPE_F32 && c->ne[0] >= n_dims / 2));
    ggml_tensor * r = new_result(ctx, a, inplace);
    int32_t params[11] = {0, n_dims, mode, 0, n_ctx_orig};
    std::memcpy(params + 5, &freq_base, 4);
    std::memcpy(params + 6, &freq_scale, 4);
    std::memcpy(params + 7, &ext_factor, 4);
    std::memcpy(params + 8, &attn_factor, 4);
    std::memcpy(params + 9, &beta_fast, 4);
    std::memcpy(params + 10, &beta_slow, 4);
    ggml_set_op_params(r, params, sizeof(params));
    r->op = GGML_OP_ROPE;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_rope(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false);
}
ggml_tensor * ggml_rope_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, true);
}
ggml_tensor * ggml_rope_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
                            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                            float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, false);
}
ggml_tensor * ggml_rope_ext_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
                                    int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                    float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, true);
}

// ---- attention ---------------------------------------------------------------------------------------
// The result [dv, n_head, n_batch, ne3] and the sources both flash attention forms share.
static ggml_tensor * flash_attn_result(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * mask,
                                       int64_t dv, float scale, float max_bias, float logit_softcap) {
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, dv, q->ne[2], q->ne[1], q->ne[3]);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    ggml_set_op_params_f32(r, 2, logit_softcap);
    r->op = GGML_OP_FLASH_ATTN_EXT;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    return r;
}

ggml_tensor * ggml_flash_attn_ext(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * mask,
                                  float scale, float max_bias, float logit_softcap) {
    // rows of k/v may pack P heads each (see ggml.h)
    GGML_ASSERT(q->type == GGML_TYPE_F32 && q->ne[0] > 0 && k->ne[0] % q->ne[0] == 0 && k->ne[1] == v->ne[1]);
    const int64_t pack = k->ne[0] / q->ne[0];
    GGML_ASSERT(v->ne[0] % pack == 0 && k->ne[2] == v->ne[2] && q->ne[2] % (k->ne[2] * pack) == 0 && q->ne[3] == k->ne[3]);
    if (mask) {
        GGML_ASSERT(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1]);
        GGML_ASSERT(q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0);
    }
    return finish_op(ctx, flash_attn_result(ctx, q, k, v, mask, v->ne[0] / pack, scale, max_bias, logit_softcap));
}
ggml_tensor * ggml_flash_attn_ext_grouped(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_groups, ggml_tensor * k_recent,
                                          ggml_tensor * k_recent_group, ggml_tensor * v, ggml_tensor * mask, float scale,
                                          float max_bias, float logit_softcap) {
    const int64_t D = q->ne[0], n_kv = v->ne[1], C = k_groups->ne[1];
    GGML_ASSERT(q->type == GGML_TYPE_F32 && D > 0 && k_groups->ne[0] == GGML_KV_GROUP && C % D == 0);
    GGML_ASSERT(n_kv <= GGML_KV_GROUP * k_groups->ne[2] && k_groups->ne[3] == q->ne[3]);
    GGML_ASSERT(k_recent->type == GGML_TYPE_F32 && k_recent->ne[0] == C && k_recent->ne[1] == GGML_KV_GROUP &&
                k_recent->ne[2] == q->ne[3] && k_recent->nb[0] == sizeof(float));
    GGML_ASSERT(k_recent_group->type == GGML_TYPE_I32 && ggml_is_contiguous(k_recent_group) &&
                ggml_nelements(k_recent_group) == q->ne[3]);
    const int64_t n_head_kv = C / D, vpack = n_head_kv / v->ne[2]; // heads per v row slice
    GGML_ASSERT(v->ne[2] * vpack == n_head_kv && v->ne[0] % vpack == 0 && v->ne[3] == q->ne[3] && q->ne[2] % n_head_kv == 0);
    if (mask) {
        GGML_ASSERT(mask->ne[0] == n_kv && mask->ne[1] >= q->ne[1]);
        GGML_ASSERT(q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0);
    }
    ggml_tensor * r = flash_attn_result(ctx, q, k_groups, v, mask, v->ne[0] / vpack, scale, max_bias, logit_softcap);
    r->src[5] = k_recent;
    r->src[6] = k_recent_group;
    return finish_op(ctx, r);
}
void ggml_flash_attn_ext_set_prec(ggml_tensor * a, enum ggml_prec prec) { ggml_set_op_params_i32(a, 3, (int32_t) prec); }
enum ggml_prec ggml_flash_attn_ext_get_prec(const ggml_tensor * a) {
    return (enum ggml_prec) ggml_get_op_params_i32(a, 3);
}
void ggml_mul_mat_set_prec(ggml_tensor * a, enum ggml_prec prec) { ggml_set_op_params_i32(a, 0, (int32_t) prec); }
void ggml_flash_attn_ext_set_kv_len(ggml_context * ctx, ggml_tensor * a, ggml_tensor * kv_len) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT && a->src[4] == nullptr);
    GGML_ASSERT(kv_len->type == GGML_TYPE_I32 && ggml_is_contiguous(kv_len) && ggml_nelements(kv_len) == a->src[0]->ne[3]);
    a->src[4] = kv_len;
    ggml_hazards_on_new_src(ctx, a, 4);
}

// ---- custom ops -------------------------------------------------------------------------------------------

static ggml_tensor * custom_impl(ggml_context * ctx, enum ggml_op op, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c,
                                 void * fun, int n_tasks, void * userdata, bool inplace) {
    ggml_tensor * r = new_result(ctx, a, inplace);
    const custom_op_params params = {fun, n_tasks, userdata};
    ggml_set_op_params(r, &params, sizeof(params));
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return finish_op(ctx, r);
}
ggml_tensor * ggml_map_custom1(ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM1, a, nullptr, nullptr, (void *) fun, n_tasks, userdata, false);
}
ggml_tensor * ggml_map_custom1_inplace(ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM1, a, nullptr, nullptr, (void *) fun, n_tasks, userdata, true);
}
ggml_tensor * ggml_map_custom2(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM2, a, b, nullptr, (void *) fun, n_tasks, userdata, false);
}
ggml_tensor * ggml_map_custom2_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM2, a, b, nullptr, (void *) fun, n_tasks, userdata, true);
}
ggml_tensor * ggml_map_custom3(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM3, a, b, c, (void *) fun, n_tasks, userdata, false);
}
ggml_tensor * ggml_map_custom3_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return custom_impl(ctx, GGML_OP_MAP_CUSTOM3, a, b, c, (void *) fun, n_tasks, userdata, true);
}

static ggml_tensor * custom_args(ggml_context * ctx, ggml_tensor * r, int first, ggml_tensor ** args, int n_args,
                                  ggml_custom_op_t fun, int n_tasks, void * userdata) {
    GGML_ASSERT(n_args >= 0 && first + n_args <= GGML_MAX_SRC && (n_args == 0 || args));
    const custom_op_params params = {(void *) fun, n_tasks, userdata};
    ggml_set_op_params(r, &params, sizeof(params));
    r->op = GGML_OP_CUSTOM;
    for (int i = 0; i < n_args; ++i) r->src[first + i] = args[i];
    return finish_op(ctx, r);
}
ggml_tensor * ggml_custom_4d(ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                             ggml_tensor ** args, int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata) {
    return custom_args(ctx, ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3), 0, args, n_args, fun, n_tasks, userdata);
}
ggml_tensor * ggml_custom_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor ** args, int n_args, ggml_custom_op_t fun,
                                  int n_tasks, void * userdata) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->src[0] = a;
    return custom_args(ctx, r, 1, args, n_args, fun, n_tasks, userdata);
}

// ---- generators and rearrangements --------------------------------------------------------
ggml_tensor * ggml_arange(ggml_context * ctx, float start, float stop, float step) {
    GGML_ASSERT(step != 0.0f && std::isfinite(start) && std::isfinite(stop) && std::isfinite(step));
    const double n = std::ceil(((double) stop - start) / step);
    GGML_ASSERT(n >= 0 && n < (double) INT64_MAX);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, (int64_t) n);
    r->op = GGML_OP_ARANGE;
    ggml_set_op_params_f32(r, 0, start);
    ggml_set_op_params_f32(r, 1, stop);
    ggml_set_op_params_f32(r, 2, step);
    return finish_op(ctx, r);
}

ggml_tensor * ggml_timestep_embedding(ggml_context * ctx, ggml_tensor * timesteps, int dim, int max_period) {
    GGML_ASSERT(timesteps->type == GGML_TYPE_F32 && ggml_is_vector(timesteps) && dim > 0 && max_period > 0);
    ggml_tensor * r = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, dim, timesteps->ne[0]);
    r->op = GGML_OP_TIMESTEP_EMBEDDING;
    ggml_set_op_params_i32(r, 0, dim);
    ggml_set_op_params_i32(r, 1, max_period);
    r->src[0] = timesteps;
    return finish_op(ctx, r);
}

ggml_tensor * ggml_pad_reflect_1d(ggml_context * ctx, ggml_tensor * a, int p0, int p1) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0]);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
    r->op = GGML_OP_PAD_REFLECT_1D;
    ggml_set_op_params_i32(r, 0, p0);
    ggml_set_op_params_i32(r, 1, p1);
    r->src[0] = a;
    return finish_op(ctx, r);
}

ggml_tensor * ggml_roll(ggml_context * ctx, ggml_tensor * a, int shift0, int shift1, int shift2, int shift3) {
    const int shift[4] = {shift0, shift1, shift2, shift3};
    GGML_ASSERT(a->type == GGML_TYPE_F32);
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op = GGML_OP_ROLL;
    for (int d = 0; d < 4; ++d) {
        GGML_ASSERT(std::abs(shift[d]) <= a->ne[d]);
        ggml_set_op_params_i32(r, d, shift[d]);
    }
    r->src[0] = a;
    return finish_op(ctx, r);
}

// ---- names ---------------------------------------------------------------------------------------------------
// no size in the brackets: the static_assert below fails when an op is added without a name
static const char * const g_op_names[] = {
    "NONE", "DUP", "ADD", "ADD_ID", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS",
    "SUM", "SUM_ROWS", "CUMSUM", "MEAN", "ARGMAX", "COUNT_EQUAL", "REPEAT", "REPEAT_BACK", "CONCAT",
    "SILU_BACK", "NORM", "RMS_NORM", "RMS_NORM_BACK", "GROUP_NORM", "L2_NORM", "MUL_MAT", "MUL_MAT_ID",
    "OUT_PROD", "SCALE", "SET", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "GET_ROWS",
    "GET_ROWS_BACK", "SET_ROWS", "DIAG", "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX", "SOFT_MAX_BACK", "ROPE",
    "ROPE_BACK", "CLAMP", "CONV_TRANSPOSE_1D", "IM2COL", "IM2COL_BACK", "IM2COL_3D", "COL2IM_1D", "CONV_2D",
    "CONV_3D", "CONV_2D_DW", "CONV_TRANSPOSE_2D", "POOL_1D", "POOL_2D", "POOL_2D_BACK", "UPSCALE", "PAD",
    "PAD_REFLECT_1D", "ROLL", "ARANGE", "TIMESTEP_EMBEDDING", "ARGSORT", "TOP_K", "LEAKY_RELU", "TRI", "FILL",
    "FLASH_ATTN_EXT", "FLASH_ATTN_BACK", "SSM_CONV", "SSM_SCAN", "WIN_PART", "WIN_UNPART", "GET_REL_POS",
    "ADD_REL_POS", "RWKV_WKV6", "GATED_LINEAR_ATTN", "RWKV_WKV7", "SOLVE_TRI", "GATED_DELTA_NET",
    "LIGHTNING_INDEXER", "DSV4_HC_COMB", "DSV4_HC_PRE", "DSV4_HC_POST", "UNARY", "MAP_CUSTOM1", "MAP_CUSTOM2",
    "MAP_CUSTOM3", "CUSTOM", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK", "OPT_STEP_ADAMW", "OPT_STEP_SGD",
    "GLU",
};
static_assert(sizeof(g_op_names) / sizeof(g_op_names[0]) == GGML_OP_COUNT, "one name per ggml_op");
const char * ggml_op_name(enum ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? g_op_names[op] : "?"; }
static const char * const g_unary_op_names[] = {
    "ABS", "SGN", "NEG", "STEP", "TANH", "ELU", "RELU", "SIGMOID", "GELU", "GELU_QUICK", "SILU", "HARDSWISH",
    "HARDSIGMOID", "EXP", "EXPM1", "SOFTPLUS", "GELU_ERF", "XIELU", "FLOOR", "CEIL", "ROUND", "TRUNC",
};
static_assert(sizeof(g_unary_op_names) / sizeof(g_unary_op_names[0]) == GGML_UNARY_OP_COUNT, "one name per unary op");
const char * ggml_unary_op_name(enum ggml_unary_op op) { return op >= 0 && op < GGML_UNARY_OP_COUNT ? g_unary_op_names[op] : "?"; }
const char * ggml_op_desc(const ggml_tensor * t) {
    if (t->op == GGML_OP_UNARY) return ggml_unary_op_name((enum ggml_unary_op) t->op_params[0]);
    if (t->op == GGML_OP_GLU) return ggml_glu_op_name(ggml_get_glu_op(t));
    return ggml_op_name(t->op);
}
