// Op constructors of SAM's windowed attention (ggml's win_part, win_unpart, get_rel_pos,
// add_rel_pos): shape rules, source wiring, op params. The kernels are in
// cpu/kernels-window.cpp; the shapes are documented in ggml.h.
#include "ggml-impl.h"

static ggml_tensor * window_op(ggml_context * ctx, ggml_tensor * r, enum ggml_op op, ggml_tensor * a) {
    r->op = op;
    r->src[0] = a;
    ggml_hazards_on_new_op(ctx, r);
    return r;
}

static void check_plain_type(const ggml_tensor * a, const char * what) {
    if (ggml_blck_size(a->type) != 1 || ggml_type_size(a->type) == 0) {
        GGML_ABORT("%s: '%s' has type %s; a non-block type (F32, F16, BF16, ...) is required", what, a->name, ggml_type_name(a->type));
    }
}

ggml_tensor * ggml_win_part(ggml_context * ctx, ggml_tensor * a, int w) {
    check_plain_type(a, "ggml_win_part");
    GGML_ASSERT(w > 0 && a->ne[3] == 1);
    const int npx = (int) ((a->ne[1] + w - 1) / w);
    const int npy = (int) ((a->ne[2] + w - 1) / w);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, a->type, a->ne[0], w, w, (int64_t) npx * npy);
    ggml_set_op_params_i32(r, 0, npx);
    ggml_set_op_params_i32(r, 1, npy);
    ggml_set_op_params_i32(r, 2, w);
    return window_op(ctx, r, GGML_OP_WIN_PART, a);
}

ggml_tensor * ggml_win_unpart(ggml_context * ctx, ggml_tensor * a, int w0, int h0, int w) {
    check_plain_type(a, "ggml_win_unpart");
    GGML_ASSERT(w > 0 && w0 > 0 && h0 > 0 && a->ne[1] == w && a->ne[2] == w);
    const int64_t npx = (w0 + w - 1) / w, npy = (h0 + w - 1) / w;
    GGML_ASSERT(a->ne[3] >= npx * npy);
    ggml_tensor * r = ggml_new_tensor_3d(ctx, a->type, a->ne[0], w0, h0);
    ggml_set_op_params_i32(r, 0, w);
    return window_op(ctx, r, GGML_OP_WIN_UNPART, a);
}

ggml_tensor * ggml_get_rel_pos(ggml_context * ctx, ggml_tensor * a, int qh, int kh) {
    check_plain_type(a, "ggml_get_rel_pos");
    GGML_ASSERT(qh > 0 && qh == kh && a->ne[1] == 2 * (int64_t) kh - 1 && a->ne[2] == 1 && a->ne[3] == 1);
    ggml_tensor * r = ggml_new_tensor_3d(ctx, a->type, a->ne[0], kh, qh);
    return window_op(ctx, r, GGML_OP_GET_REL_POS, a);
}

static ggml_tensor * add_rel_pos_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph, bool inplace) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && pw->type == GGML_TYPE_F32 && ph->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(pw, ph));
    const int64_t k = pw->ne[0];
    if (a->ne[0] != k * k || a->ne[1] != pw->ne[1] * pw->ne[2] || a->ne[2] != pw->ne[3] || a->ne[3] != 1) {
        GGML_ABORT("ggml_add_rel_pos: a [%lld,%lld,%lld,%lld] must be [k*k, qw*qh, B, 1] for pw, ph [k=%lld, qw=%lld, qh=%lld, B=%lld]",
                   (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) a->ne[3], (long long) k,
                   (long long) pw->ne[1], (long long) pw->ne[2], (long long) pw->ne[3]);
    }
    // in place: a view of a, so the write lands on a's bytes and gets a's edges
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(r, 0, inplace ? 1 : 0);
    r->src[1] = pw;
    r->src[2] = ph;
    return window_op(ctx, r, GGML_OP_ADD_REL_POS, a);
}

ggml_tensor * ggml_add_rel_pos(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, false);
}
ggml_tensor * ggml_add_rel_pos_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true);
}
