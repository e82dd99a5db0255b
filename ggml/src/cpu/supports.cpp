// What the CPU backend computes: one table of ops, each with a check of the variants
// (sub-ops, parameters) and types its kernels take. ggml_backend_supports_op answers from
// it, and the executor refuses a graph holding a node whose op or variant is not computed.
#include "kernels.h"
#include "simd.h"
#include "types.h"

namespace {

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }
bool is_f32(const ggml_tensor * t) { return t && t->type == GGML_TYPE_F32; }
bool f32_or_f16(const ggml_tensor * t) { return t && (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16); }
// element-wise readable: plain floats and ints, or quantized with a row decoder and dense rows
bool convertible(const ggml_tensor * t) {
    if (ggml_is_quantized(t->type)) return kvg::row_decoder(t->type) != nullptr && t->nb[0] == ggml_type_size(t->type);
    return is_float(t->type) || t->type == GGML_TYPE_I8 || t->type == GGML_TYPE_I16 || t->type == GGML_TYPE_I32;
}
// element-wise writable: as convertible, and quantized types need an encoder (iq2_*, iq1_* have none)
bool writable(const ggml_tensor * t) {
    return convertible(t) && (!ggml_is_quantized(t->type) || ggml_get_type_traits(t->type)->from_float_ref);
}
bool all_float(const ggml_tensor * t, int n_src) {
    if (!is_float(t->type)) return false;
    for (int i = 0; i < n_src; ++i) {
        if (t->src[i] && !is_float(t->src[i]->type)) return false;
    }
    return true;
}
bool has_matmul_kernel(ggml_type t) { return kvg::has_mm_kernel(t); } // the kernel tables' own list

// A variant check (types == false) or a variant and type check (types == true): nullptr
// if computed, else why not.
typedef const char * (*op_check)(const ggml_tensor * t, bool types);

const char * yes(const ggml_tensor *, bool) { return nullptr; }
const char * copy_types(const ggml_tensor * t, bool types) {
    if (!types || t->src[0]->type == t->type) return nullptr;
    return convertible(t->src[0]) && writable(t) ? nullptr : "no conversion between these types";
}
const char * float_types(const ggml_tensor * t, bool types) {
    return !types || all_float(t, 2) ? nullptr : "types other than f32, f16, bf16";
}
const char * scale(const ggml_tensor * t, bool types) {
    if (ggml_get_op_params_f32(t, 1) != 0.0f) return "scale with a bias";
    return float_types(t, types);
}
const char * unary(const ggml_tensor * t, bool types) {
    const ggml_unary_op op = (ggml_unary_op) ggml_get_op_params_i32(t, 0);
    if (op == GGML_UNARY_OP_XIELU || op < 0 || op >= GGML_UNARY_OP_COUNT) return "unary op without a CPU kernel";
    return float_types(t, types);
}
const char * glu(const ggml_tensor * t, bool types) {
    const int op = ggml_get_op_params_i32(t, 0);
    if (op < 0 || op >= GGML_GLU_OP_COUNT || op == GGML_GLU_OP_SWIGLU_CLAMP) return "glu op without a CPU kernel";
    return float_types(t, types);
}
const char * f32_only(const ggml_tensor * t, bool types) {
    return !types || (is_f32(t) && is_f32(t->src[0])) ? nullptr : "types other than f32";
}
const char * reduce(const ggml_tensor * t, bool types) {
    return !types || all_float(t, 1) ? nullptr : "types other than f32, f16, bf16";
}
const char * argmax(const ggml_tensor * t, bool types) {
    return !types || (is_float(t->src[0]->type) && ggml_is_matrix(t->src[0])) ? nullptr
                                                                              : "argmax of a non-float or non-matrix";
}
const char * repeat(const ggml_tensor * t, bool types) {
    return !types || (t->src[0]->type == t->type && ggml_blck_size(t->type) == 1)
               ? nullptr
               : "repeat of a block type or across types";
}
const char * concat(const ggml_tensor * t, bool types) {
    return !types || (t->src[0]->type == t->type && t->src[1]->type == t->type) ? nullptr : "concat across types";
}
const char * get_rows(const ggml_tensor * t, bool types) {
    if (!types) return nullptr;
    if (t->src[1]->type != GGML_TYPE_I32) return "get_rows with non-i32 indices";
    return copy_types(t, types);
}
const char * set_rows(const ggml_tensor * t, bool types) {
    return !types || (convertible(t->src[0]) && writable(t)) ? nullptr : "set_rows into this type";
}
const char * soft_max(const ggml_tensor * t, bool types) {
    if (t->src[2]) return "soft_max with sinks";
    if (!types) return nullptr;
    return is_f32(t) && is_f32(t->src[0]) && (!t->src[1] || f32_or_f16(t->src[1])) ? nullptr : "soft_max types";
}
const char * rope(const ggml_tensor * t, bool types) {
    const int mode = ggml_get_op_params_i32(t, 2), n_dims = ggml_get_op_params_i32(t, 1);
    if (mode != 0 && mode != GGML_ROPE_TYPE_NEOX) return "rope mode other than normal and neox";
    if (ggml_get_op_params_i32(t, 15) != 0) return "rope with a position offset";
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > t->ne[0]) return "rope n_dims";
    if (!types) return nullptr;
    return f32_or_f16(t->src[0]) && t->type == t->src[0]->type && t->src[1]->type == GGML_TYPE_I32 ? nullptr
                                                                                                   : "rope types";
}
const char * mul_mat(const ggml_tensor * t, bool types) {
    if (!types) return nullptr;
    const ggml_tensor * a = t->src[0];
    if (!has_matmul_kernel(a->type) || !is_f32(t->src[1]) || !is_f32(t))
        return "mul_mat types (weights with a kernel, f32 activations)";
    if (a->nb[0] != ggml_type_size(a->type) || a->ne[0] % ggml_blck_size(a->type) != 0) return "mul_mat weight rows";
    return nullptr;
}
const char * mul_mat_id(const ggml_tensor * t, bool types) {
    if (!types) return nullptr;
    if (mul_mat(t, types)) return "mul_mat_id types";
    return t->src[2]->type == GGML_TYPE_I32 && kvg::row_decoder(t->src[0]->type) ? nullptr
                                                                                 : "mul_mat_id ids or weights";
}
const char * flash_attn(const ggml_tensor * t, bool types) {
    if (t->src[4] && t->src[4]->type != GGML_TYPE_I32) return "flash_attn_ext with sinks";
    if (ggml_get_op_params_i32(t, 4) != 0) return "flash_attn_ext with n_kv_max";
    if (!types) return nullptr;
    for (int i = 1; i <= 2; ++i) {
        const ggml_type kt = t->src[i]->type;
        if (kt != GGML_TYPE_F32 && kt != GGML_TYPE_F16 && kt != GGML_TYPE_Q8_0) return "flash_attn_ext k/v types";
    }
    return is_f32(t->src[0]) && (!t->src[3] || f32_or_f16(t->src[3])) ? nullptr : "flash_attn_ext q/mask types";
}
const char * conv(const ggml_tensor * t, bool types) {
    if (!types) return nullptr;
    for (int i = 0; i < 2; ++i) {
        if (t->src[i] && !f32_or_f16(t->src[i])) return "convolution types other than f32, f16";
    }
    return f32_or_f16(t) ? nullptr : "convolution result type";
}
const char * pad(const ggml_tensor * t, bool types) {
    if (ggml_get_op_params_i32(t, 8) != 0) return "circular padding";
    return conv(t, types);
}
const char * same_plain(const ggml_tensor * t, bool types) {
    return !types || (t->src[0]->type == t->type && ggml_blck_size(t->type) == 1) ? nullptr
                                                                                  : "a block type or a type change";
}
const char * upscale(const ggml_tensor * t, bool types) {
    const uint32_t mode = (uint32_t) ggml_get_op_params_i32(t, 0), kind = mode & 0xff;
    if (kind != GGML_SCALE_MODE_NEAREST && kind != GGML_SCALE_MODE_BILINEAR)
        return "interpolation other than nearest, bilinear";
    if (mode & ~(0xffu | GGML_SCALE_FLAG_ALIGN_CORNERS)) return "interpolation flags other than align-corners";
    return conv(t, types);
}
const char * argsort(const ggml_tensor * t, bool types) {
    return !types || (is_float(t->src[0]->type) && t->type == GGML_TYPE_I32) ? nullptr : "argsort types";
}
const char * gen(const ggml_tensor * t, bool types) { return !types || is_f32(t) ? nullptr : "types other than f32"; }

struct op_entry {
    ggml_op op;
    op_check check;
};
// Every op the CPU computes; the others are refused.
const op_entry g_ops[] = {
    {GGML_OP_NONE, yes},
    {GGML_OP_RESHAPE, yes},
    {GGML_OP_VIEW, yes},
    {GGML_OP_PERMUTE, yes},
    {GGML_OP_TRANSPOSE, yes},
    {GGML_OP_DUP, copy_types},
    {GGML_OP_CPY, copy_types},
    {GGML_OP_CONT, copy_types},
    {GGML_OP_ADD, float_types},
    {GGML_OP_SUB, float_types},
    {GGML_OP_MUL, float_types},
    {GGML_OP_DIV, float_types},
    {GGML_OP_SQR, float_types},
    {GGML_OP_SQRT, float_types},
    {GGML_OP_SCALE, scale},
    {GGML_OP_UNARY, unary},
    {GGML_OP_GLU, glu},
    {GGML_OP_SUM, reduce},
    {GGML_OP_SUM_ROWS, reduce},
    {GGML_OP_MEAN, reduce},
    {GGML_OP_ARGMAX, argmax},
    {GGML_OP_REPEAT, repeat},
    {GGML_OP_CONCAT, concat},
    {GGML_OP_GET_ROWS, get_rows},
    {GGML_OP_SET_ROWS, set_rows},
    {GGML_OP_NORM, f32_only},
    {GGML_OP_RMS_NORM, f32_only},
    {GGML_OP_SOFT_MAX, soft_max},
    {GGML_OP_DIAG_MASK_INF, f32_only},
    {GGML_OP_ROPE, rope},
    {GGML_OP_MUL_MAT, mul_mat},
    {GGML_OP_MUL_MAT_ID, mul_mat_id},
    {GGML_OP_FLASH_ATTN_EXT, flash_attn},
    {GGML_OP_SET, float_types},
    {GGML_OP_ACC, float_types},
    {GGML_OP_ARGSORT, argsort},
    {GGML_OP_TOP_K, argsort},
    {GGML_OP_ARANGE, gen},
    {GGML_OP_TIMESTEP_EMBEDDING, gen},
    {GGML_OP_PAD, pad},
    {GGML_OP_PAD_REFLECT_1D, f32_only},
    {GGML_OP_ROLL, f32_only},
    {GGML_OP_IM2COL, conv},
    {GGML_OP_CONV_2D, conv},
    {GGML_OP_CONV_2D_DW, conv},
    {GGML_OP_CONV_TRANSPOSE_1D, conv},
    {GGML_OP_CONV_TRANSPOSE_2D, conv},
    {GGML_OP_POOL_1D, conv},
    {GGML_OP_POOL_2D, conv},
    {GGML_OP_UPSCALE, upscale},
    {GGML_OP_WIN_PART, same_plain},
    {GGML_OP_WIN_UNPART, same_plain},
    {GGML_OP_GET_REL_POS, same_plain},
    {GGML_OP_ADD_REL_POS, f32_only},
    {GGML_OP_MAP_CUSTOM1, yes},
    {GGML_OP_MAP_CUSTOM2, yes},
    {GGML_OP_MAP_CUSTOM3, yes},
    {GGML_OP_CUSTOM, yes},
};

const char * not_computed(const ggml_tensor *, bool) { return "op not computed by the CPU backend"; }

// g_ops indexed by op (the executor asks for every node of every compute)
struct op_table {
    op_check by_op[GGML_OP_COUNT];
    op_table() {
        for (op_check & c : by_op) c = not_computed;
        for (const op_entry & e : g_ops) by_op[e.op] = e.check;
    }
};
const op_table g_table;

const char * check(const ggml_tensor * t, bool types) {
    if (!t) return "no tensor";
    if (t->op < 0 || t->op >= GGML_OP_COUNT) return "unknown op";
    if (types) { // ggml's types that kvgraph only names: no kernel reads or writes them
        if (!ggml_type_is_supported(t->type)) return "a type kvgraph does not compute";
        for (const ggml_tensor * s : t->src) {
            if (s && !ggml_type_is_supported(s->type)) return "a source type kvgraph does not compute";
        }
    }
    return g_table.by_op[t->op](t, types);
}

} // namespace

const char * ggml_cpu_op_refusal(const ggml_tensor * t) { return check(t, false); }
bool ggml_cpu_supports_op(const ggml_tensor * t) { return check(t, true) == nullptr; }
