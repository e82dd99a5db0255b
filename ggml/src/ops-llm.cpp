// Op constructors LLM programs reach for: set/acc (writes into a region of a tensor),
// gated linear units, argsort/top_k, mixture-of-experts matmul; ggml's file-type helpers.
// Shapes, types and op params as ggml 0.21 (see the section in ggml.h). No math here.
#include "ggml-impl.h"

#include <climits>
#include <cstring>


// ---- set / acc ----------------------------------------------------------------------------
ggml_set_region ggml_get_set_region(const ggml_tensor * t) {
    GGML_ASSERT((t->op == GGML_OP_SET || t->op == GGML_OP_ACC) && t->src[1]);
    ggml_set_region g;
    const ggml_tensor * b = t->src[1];
    g.nb[0] = ggml_type_size(t->type);
    bool empty = false;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        g.ne[i] = b->ne[i];
        if (i > 0) g.nb[i] = (size_t) (uint32_t) ggml_get_op_params_i32(t, i - 1);
        empty = empty || b->ne[i] == 0;
    }
    g.offset = (size_t) (uint32_t) ggml_get_op_params_i32(t, 3);
    g.inplace = ggml_get_op_params_i32(t, 4) != 0;
    g.nbytes = 0;
    if (!empty) {
        g.nbytes = g.nb[0];
        for (int i = 0; i < GGML_MAX_DIMS; ++i) g.nbytes += (size_t) (g.ne[i] - 1) * g.nb[i];
    }
    return g;
}

static ggml_tensor * set_impl(ggml_context * ctx, enum ggml_op op, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2,
                              size_t nb3, size_t offset, bool inplace) {
    GGML_ASSERT(ggml_nelements(a) >= ggml_nelements(b));
    GGML_ASSERT(!ggml_is_quantized(a->type) && !ggml_is_quantized(b->type));
    if (op == GGML_OP_ACC) {
        for (const ggml_tensor * t : {a, b}) {
            GGML_ASSERT(t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16);
        }
    }
    // ggml keeps these in int32 op params
    for (size_t v : {nb1, nb2, nb3, offset}) GGML_ASSERT(v <= (size_t) INT32_MAX);
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const int32_t params[] = {(int32_t) nb1, (int32_t) nb2, (int32_t) nb3, (int32_t) offset, inplace ? 1 : 0};
    ggml_set_op_params(r, params, sizeof(params));
    r->op = op;
    r->src[1] = b;
    const ggml_set_region g = ggml_get_set_region(r);
    if (g.nbytes > 0 && g.offset + g.nbytes > ggml_nbytes(r)) {
        GGML_ABORT("%s: region of %zu bytes at offset %zu does not fit in the %zu bytes of '%s'", ggml_op_name(op), g.nbytes,
                   g.offset, ggml_nbytes(r), a->name);
    }
    return ggml_finish_op(ctx, r, op, a, b);
}

ggml_tensor * ggml_set(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, nb1, nb2, nb3, offset, false);
}
ggml_tensor * ggml_set_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, nb1, nb2, nb3, offset, true);
}
ggml_tensor * ggml_set_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false);
}
ggml_tensor * ggml_set_1d_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true);
}
ggml_tensor * ggml_set_2d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, nb1, a->nb[2], a->nb[3], offset, false);
}
ggml_tensor * ggml_set_2d_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset) {
    return set_impl(ctx, GGML_OP_SET, a, b, nb1, a->nb[2], a->nb[3], offset, true);
}
ggml_tensor * ggml_acc(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return set_impl(ctx, GGML_OP_ACC, a, b, nb1, nb2, nb3, offset, false);
}
ggml_tensor * ggml_acc_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return set_impl(ctx, GGML_OP_ACC, a, b, nb1, nb2, nb3, offset, true);
}

// ---- gated linear units ---------------------------------------------------------------------
static ggml_tensor * glu_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, enum ggml_glu_op op, bool swapped) {
    GGML_ASSERT(op >= 0 && op < GGML_GLU_OP_COUNT);
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_BF16);
    GGML_ASSERT(ggml_is_contiguous_rows(a));
    if (b) GGML_ASSERT(ggml_are_same_shape(a, b) && a->type == b->type && ggml_is_contiguous_rows(b));
    int64_t ne[GGML_MAX_DIMS] = {b ? a->ne[0] : a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, ne);
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    ggml_set_op_params_i32(r, 1, swapped ? 1 : 0);
    return ggml_finish_op(ctx, r, GGML_OP_GLU, a, b);
}
ggml_tensor * ggml_glu(ggml_context * ctx, ggml_tensor * a, enum ggml_glu_op op, bool swapped) {
    return glu_impl(ctx, a, nullptr, op, swapped);
}
ggml_tensor * ggml_glu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, enum ggml_glu_op op) {
    return glu_impl(ctx, a, b, op, false);
}
#define GLU_OP(name, OP)                                                                                        \
    ggml_tensor * ggml_##name(ggml_context * ctx, ggml_tensor * a) { return glu_impl(ctx, a, nullptr, OP, false); } \
    ggml_tensor * ggml_##name##_swapped(ggml_context * ctx, ggml_tensor * a) { return glu_impl(ctx, a, nullptr, OP, true); } \
    ggml_tensor * ggml_##name##_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return glu_impl(ctx, a, b, OP, false); }
GLU_OP(reglu, GGML_GLU_OP_REGLU)
GLU_OP(geglu, GGML_GLU_OP_GEGLU)
GLU_OP(swiglu, GGML_GLU_OP_SWIGLU)
GLU_OP(geglu_erf, GGML_GLU_OP_GEGLU_ERF)
GLU_OP(geglu_quick, GGML_GLU_OP_GEGLU_QUICK)
#undef GLU_OP
ggml_tensor * ggml_swiglu_oai(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float alpha, float limit) {
    ggml_tensor * r = glu_impl(ctx, a, b, GGML_GLU_OP_SWIGLU_OAI, false);
    ggml_set_op_params_f32(r, 2, alpha);
    ggml_set_op_params_f32(r, 3, limit);
    return r;
}

static const char * const g_glu_op_names[] = {"REGLU",     "GEGLU",       "SWIGLU",      "SWIGLU_OAI",
                                              "GEGLU_ERF", "GEGLU_QUICK", "SWIGLU_CLAMP"};
static_assert(sizeof(g_glu_op_names) / sizeof(g_glu_op_names[0]) == GGML_GLU_OP_COUNT, "one name per glu op");
const char * ggml_glu_op_name(enum ggml_glu_op op) { return op >= 0 && op < GGML_GLU_OP_COUNT ? g_glu_op_names[op] : "?"; }
enum ggml_glu_op ggml_get_glu_op(const ggml_tensor * t) {
    GGML_ASSERT(t->op == GGML_OP_GLU);
    return (enum ggml_glu_op) ggml_get_op_params_i32(t, 0);
}

// ---- sorting ------------------------------------------------------------------------------------
static void check_sortable(const ggml_tensor * a) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_BF16);
    GGML_ASSERT(a->ne[0] <= INT32_MAX); // indices are I32
}
ggml_tensor * ggml_argsort(ggml_context * ctx, ggml_tensor * a, enum ggml_sort_order order) {
    check_sortable(a);
    GGML_ASSERT(order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC);
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_I32, GGML_MAX_DIMS, a->ne);
    ggml_set_op_params_i32(r, 0, (int32_t) order);
    return ggml_finish_op(ctx, r, GGML_OP_ARGSORT, a);
}
ggml_tensor * ggml_argsort_top_k(ggml_context * ctx, ggml_tensor * a, int k) {
    GGML_ASSERT(k >= 0 && k <= a->ne[0]);
    ggml_tensor * s = ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC);
    return ggml_view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}
ggml_tensor * ggml_top_k(ggml_context * ctx, ggml_tensor * a, int k) {
    check_sortable(a);
    GGML_ASSERT(k >= 0 && k <= a->ne[0]);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_I32, k, a->ne[1], a->ne[2], a->ne[3]);
    return ggml_finish_op(ctx, r, GGML_OP_TOP_K, a);
}

// ---- mixture of experts -------------------------------------------------------------------------
ggml_tensor * ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as, ggml_tensor * b, ggml_tensor * ids) {
    GGML_ASSERT(!ggml_is_transposed(as) && ids->type == GGML_TYPE_I32 && b->type == GGML_TYPE_F32);
    GGML_ASSERT(as->ne[3] == 1 && b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1);
    if (as->ne[0] != b->ne[0] || ids->ne[1] != b->ne[2] || b->ne[1] == 0 || ids->ne[0] % b->ne[1] != 0) {
        GGML_ABORT("ggml_mul_mat_id: incompatible shapes as [%lld,%lld,%lld] b [%lld,%lld,%lld] ids [%lld,%lld]",
                   (long long) as->ne[0], (long long) as->ne[1], (long long) as->ne[2], (long long) b->ne[0],
                   (long long) b->ne[1], (long long) b->ne[2], (long long) ids->ne[0], (long long) ids->ne[1]);
    }
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, as->ne[1], ids->ne[0], b->ne[2], 1);
    r->src[2] = ids;
    return ggml_finish_op(ctx, r, GGML_OP_MUL_MAT_ID, as, b);
}

// ---- ggml's file types --------------------------------------------------------------------------
enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype) {
    switch (ftype) {
        case GGML_FTYPE_ALL_F32: return GGML_TYPE_F32;
        case GGML_FTYPE_MOSTLY_F16: return GGML_TYPE_F16;
        case GGML_FTYPE_MOSTLY_BF16: return GGML_TYPE_BF16;
        case GGML_FTYPE_MOSTLY_Q4_0: return GGML_TYPE_Q4_0;
        case GGML_FTYPE_MOSTLY_Q4_1:
        case GGML_FTYPE_MOSTLY_Q4_1_SOME_F16: return GGML_TYPE_Q4_1;
        case GGML_FTYPE_MOSTLY_Q5_0: return GGML_TYPE_Q5_0;
        case GGML_FTYPE_MOSTLY_Q5_1: return GGML_TYPE_Q5_1;
        case GGML_FTYPE_MOSTLY_Q8_0: return GGML_TYPE_Q8_0;
        case GGML_FTYPE_MOSTLY_Q2_K: return GGML_TYPE_Q2_K;
        case GGML_FTYPE_MOSTLY_Q3_K: return GGML_TYPE_Q3_K;
        case GGML_FTYPE_MOSTLY_Q4_K: return GGML_TYPE_Q4_K;
        case GGML_FTYPE_MOSTLY_Q5_K: return GGML_TYPE_Q5_K;
        case GGML_FTYPE_MOSTLY_Q6_K: return GGML_TYPE_Q6_K;
        case GGML_FTYPE_MOSTLY_IQ4_NL: return GGML_TYPE_IQ4_NL;
        case GGML_FTYPE_MOSTLY_IQ4_XS: return GGML_TYPE_IQ4_XS;
        default: GGML_ABORT("ggml_ftype_to_ggml_type: file type %d has no weight type in kvgraph", (int) ftype);
    }
}
