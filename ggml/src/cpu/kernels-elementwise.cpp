// Elementwise kernels: binary ops with broadcasting, unary maps, sum_rows, argmax.
// F32 rows with unit stride take the direct loops; anything else (F16/BF16, strided
// elements) goes through a float row buffer. Results are written only after a row has
// been read, so dst may alias src0 (inplace variants).
#include "kernels.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

void check_float(const ggml_tensor * t, const ggml_tensor * dst) {
    if (!is_float_type(t->type)) {
        GGML_ABORT("%s: tensor '%s' has type %s; only f32, f16 and bf16 are supported", ggml_op_desc(dst), t->name,
                   ggml_type_name(t->type));
    }
}

bool dense_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float); }

void load_row(const ggml_tensor * t, const char * row, int64_t n, float * out) {
    const size_t nb0 = t->nb[0];
    switch (t->type) {
        case GGML_TYPE_F32:
            for (int64_t i = 0; i < n; ++i) std::memcpy(&out[i], row + i * nb0, sizeof(float));
            break;
        case GGML_TYPE_F16:
            for (int64_t i = 0; i < n; ++i) {
                ggml_fp16_t h;
                std::memcpy(&h, row + i * nb0, sizeof(h));
                out[i] = ggml_fp16_to_fp32(h);
            }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) {
                ggml_bf16_t h;
                std::memcpy(&h, row + i * nb0, sizeof(h));
                out[i] = ggml_bf16_to_fp32(h);
            }
            break;
    }
}

void store_row(const ggml_tensor * t, char * row, int64_t n, const float * in) {
    const size_t nb0 = t->nb[0];
    switch (t->type) {
        case GGML_TYPE_F32:
            for (int64_t i = 0; i < n; ++i) std::memcpy(row + i * nb0, &in[i], sizeof(float));
            break;
        case GGML_TYPE_F16:
            for (int64_t i = 0; i < n; ++i) {
                const ggml_fp16_t h = ggml_fp32_to_fp16(in[i]);
                std::memcpy(row + i * nb0, &h, sizeof(h));
            }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) {
                const ggml_bf16_t h = ggml_fp32_to_bf16(in[i]);
                std::memcpy(row + i * nb0, &h, sizeof(h));
            }
            break;
    }
}


// ---- binary ------------------------------------------------------------------------------

struct op_add { static float f(float a, float b) { return a + b; } };
struct op_sub { static float f(float a, float b) { return a - b; } };
struct op_mul { static float f(float a, float b) { return a * b; } };
struct op_div { static float f(float a, float b) { return a / b; } };

template <class Op>
void vec_binary(float * d, const float * a, const float * b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] = Op::f(a[i], b[i]);
}
template <class Op>
void vec_binary_scalar(float * d, const float * a, float b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] = Op::f(a[i], b);
}

// d = a op b with b (nb elements) repeated along the row of na elements
template <class Op>
void row_binary(float * d, const float * a, const float * b, int64_t na, int64_t nb) {
    if (nb == na) {
        vec_binary<Op>(d, a, b, na);
    } else if (nb == 1) {
        vec_binary_scalar<Op>(d, a, b[0], na);
    } else {
        for (int64_t k = 0; k < na; k += nb) vec_binary<Op>(d + k, a + k, b, nb);
    }
}

template <class Op>
void binary_impl(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    check_float(src0, dst);
    check_float(src1, dst);
    check_float(dst, dst);
    if (!ggml_are_same_shape(src0, dst) || !ggml_can_repeat(src1, src0)) {
        GGML_ABORT("%s: shapes of '%s' and '%s' do not broadcast to '%s'", ggml_op_name(dst->op), src0->name, src1->name, dst->name);
    }
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1], ne12 = src1->ne[2], ne13 = src1->ne[3];
    const bool fast = dense_f32(src0) && dense_f32(src1) && dense_f32(dst);
    std::vector<float> buf0(fast ? 0 : ne0), buf1(fast ? 0 : ne10);

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * a = row_at(src0, i1, i2, i3);
        const char * b = row_at(src1, i1 % ne11, i2 % ne12, i3 % ne13);
        char * d = row_at(dst, i1, i2, i3);
        if (fast) {
            row_binary<Op>((float *) d, (const float *) a, (const float *) b, ne0, ne10);
        } else {
            load_row(src0, a, ne0, buf0.data());
            load_row(src1, b, ne10, buf1.data());
            row_binary<Op>(buf0.data(), buf0.data(), buf1.data(), ne0, ne10);
            store_row(dst, d, ne0, buf0.data());
        }
    }
}

// ---- maps ------------------------------------------------------------------------------------

struct map_sqr { float s; float f(float x) const { return x * x; } };
struct map_sqrt { float s; float f(float x) const { return std::sqrt(x); } };
struct map_scale { float s; float f(float x) const { return x * s; } };
struct map_relu { float s; float f(float x) const { return x > 0.0f ? x : 0.0f; } };
// tanh approximation 0.5x(1 + tanh(y)), y = sqrt(2/pi)(x + 0.044715x^3), written as the
// identical x / (1 + e^(-2y)): one exp instead of a (much slower) tanh
struct map_gelu {
    float s;
    float f(float x) const {
        const float k2 = 2.0f * 0.7978845608028654f;
        return x / (1.0f + std::exp(-k2 * x * (1.0f + 0.044715f * x * x)));
    }
};
struct map_silu { float s; float f(float x) const { return x / (1.0f + std::exp(-x)); } };
// the rest of ggml's unary ops, one function each
struct map_fn { float (*fn)(float); float f(float x) const { return fn(x); } };
float hsig(float x) { return std::fmin(1.0f, std::fmax(0.0f, (x + 3.0f) / 6.0f)); }
float (*unary_fn(ggml_unary_op op))(float) {
    switch (op) {
        case GGML_UNARY_OP_ABS: return [](float x) { return std::fabs(x); };
        case GGML_UNARY_OP_SGN: return [](float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f; };
        case GGML_UNARY_OP_NEG: return [](float x) { return -x; };
        case GGML_UNARY_OP_STEP: return [](float x) { return x > 0.0f ? 1.0f : 0.0f; };
        case GGML_UNARY_OP_TANH: return [](float x) { return std::tanh(x); };
        case GGML_UNARY_OP_ELU: return [](float x) { return x > 0.0f ? x : std::expm1(x); };
        case GGML_UNARY_OP_SIGMOID: return [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
        case GGML_UNARY_OP_GELU_QUICK: return [](float x) { return x / (1.0f + std::exp(-1.702f * x)); };
        case GGML_UNARY_OP_HARDSWISH: return [](float x) { return x * hsig(x); };
        case GGML_UNARY_OP_HARDSIGMOID: return hsig;
        case GGML_UNARY_OP_EXP: return [](float x) { return std::exp(x); };
        case GGML_UNARY_OP_EXPM1: return [](float x) { return std::expm1(x); };
        case GGML_UNARY_OP_SOFTPLUS: return [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); };
        case GGML_UNARY_OP_GELU_ERF: return [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); };
        case GGML_UNARY_OP_FLOOR: return [](float x) { return std::floor(x); };
        case GGML_UNARY_OP_CEIL: return [](float x) { return std::ceil(x); };
        case GGML_UNARY_OP_ROUND: return [](float x) { return std::round(x); };
        case GGML_UNARY_OP_TRUNC: return [](float x) { return std::trunc(x); };
        default: return nullptr;
    }
}

// row_fn: a vector kernel for dense f32 rows with the same function (nullptr: m.f per element)
template <class M>
void map_impl(const ggml_compute_params * params, ggml_tensor * dst, M m, void (*row_fn)(int64_t, const float *, float *) = nullptr) {
    const ggml_tensor * src0 = dst->src[0];
    check_float(src0, dst);
    check_float(dst, dst);
    if (!ggml_are_same_shape(src0, dst)) {
        GGML_ABORT("%s: '%s' and '%s' must have the same shape", ggml_op_desc(dst), src0->name, dst->name);
    }
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const bool fast = dense_f32(src0) && dense_f32(dst);
    std::vector<float> buf(fast ? 0 : ne0);

    const task_range rows = split_rows(ggml_nrows(dst), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * a = row_at(src0, i1, i2, i3);
        char * d = row_at(dst, i1, i2, i3);
        if (fast) {
            const float * x = (const float *) a;
            float * y = (float *) d;
            if (row_fn) row_fn(ne0, x, y);
            else for (int64_t i = 0; i < ne0; ++i) y[i] = m.f(x[i]);
        } else {
            load_row(src0, a, ne0, buf.data());
            for (int64_t i = 0; i < ne0; ++i) buf[i] = m.f(buf[i]);
            store_row(dst, d, ne0, buf.data());
        }
    }
}

} // namespace

void ggml_compute_forward_binary(const ggml_compute_params * params, ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_ADD: binary_impl<op_add>(params, dst); break;
        case GGML_OP_SUB: binary_impl<op_sub>(params, dst); break;
        case GGML_OP_MUL: binary_impl<op_mul>(params, dst); break;
        case GGML_OP_DIV: binary_impl<op_div>(params, dst); break;
        default: GGML_ABORT("ggml_compute_forward_binary: op %s is not a binary op", ggml_op_name(dst->op));
    }
}

void ggml_compute_forward_map(const ggml_compute_params * params, ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_SQR: map_impl(params, dst, map_sqr{0}); break;
        case GGML_OP_SQRT: map_impl(params, dst, map_sqrt{0}); break;
        case GGML_OP_SCALE: map_impl(params, dst, map_scale{ggml_get_op_params_f32(dst, 0)}); break;
        case GGML_OP_UNARY:
            switch ((ggml_unary_op) ggml_get_op_params_i32(dst, 0)) {
                case GGML_UNARY_OP_RELU: map_impl(params, dst, map_relu{0}); break;
                case GGML_UNARY_OP_GELU: map_impl(params, dst, map_gelu{0}); break;
                case GGML_UNARY_OP_SILU: map_impl(params, dst, map_silu{0}, kvg::cpu_active_kernels().silu_f32); break;
                default: {
                    const auto op = (ggml_unary_op) ggml_get_op_params_i32(dst, 0);
                    float (*fn)(float) = unary_fn(op);
                    if (!fn) GGML_ABORT("unary: no CPU kernel for unary op %s (%d)", ggml_unary_op_name(op), (int) op);
                    map_impl(params, dst, map_fn{fn});
                }
            }
            break;
        default: GGML_ABORT("ggml_compute_forward_map: op %s is not a map", ggml_op_name(dst->op));
    }
}

void ggml_compute_forward_sum_rows(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    check_float(src0, dst);
    check_float(dst, dst);
    GGML_ASSERT(dst->ne[0] == 1 && dst->ne[1] == src0->ne[1] && dst->ne[2] == src0->ne[2] && dst->ne[3] == src0->ne[3]);
    const int64_t ne0 = src0->ne[0], ne1 = src0->ne[1], ne2 = src0->ne[2];
    const double scale = dst->op == GGML_OP_MEAN ? 1.0 / (double) ne0 : 1.0; // MEAN: the row's sum / ne0
    const bool fast = dense_f32(src0);
    std::vector<float> buf(fast ? 0 : ne0);
    const task_range rows = split_rows(ggml_nrows(src0), params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * a = row_at(src0, i1, i2, i3);
        const float * x = (const float *) a;
        if (!fast) {
            load_row(src0, a, ne0, buf.data());
            x = buf.data();
        }
        const float s = (float) (sum_f32(x, ne0) * scale);
        store_row(dst, row_at(dst, i1, i2, i3), 1, &s);
    }
}

// one task: the row sums in order, in double
void ggml_compute_forward_sum(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    check_float(src0, dst);
    check_float(dst, dst);
    if (params->ith != 0) return;
    const int64_t ne0 = src0->ne[0], ne1 = src0->ne[1], ne2 = src0->ne[2];
    std::vector<float> buf(ne0);
    double total = 0;
    for (int64_t r = 0; r < ggml_nrows(src0); ++r) {
        load_row(src0, row_at(src0, r % ne1, (r / ne1) % ne2, r / (ne1 * ne2)), ne0, buf.data());
        total += sum_f32(buf.data(), ne0);
    }
    const float s = (float) total;
    store_row(dst, (char *) dst->data, 1, &s);
}

void ggml_compute_forward_argmax(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    check_float(src0, dst);
    GGML_ASSERT(dst->type == GGML_TYPE_I32 && dst->ne[0] == src0->ne[1] && ggml_is_matrix(src0));
    const int64_t ne0 = src0->ne[0];
    const bool fast = dense_f32(src0);
    std::vector<float> buf(fast ? 0 : ne0);
    const task_range rows = split_rows(src0->ne[1], params->ith, params->nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
        const char * a = row_at(src0, r, 0, 0);
        const float * x = (const float *) a;
        if (!fast) {
            load_row(src0, a, ne0, buf.data());
            x = buf.data();
        }
        // last index of the maximum, as ggml (greedy decoding on tied logits agrees with
        // llama.cpp); NaNs never win a comparison
        int32_t best = 0;
        float vmax = -INFINITY;
        for (int64_t i = 0; i < ne0; ++i) {
            if (x[i] >= vmax) { vmax = x[i]; best = (int32_t) i; }
        }
        std::memcpy((char *) dst->data + r * dst->nb[0], &best, sizeof(best));
    }
}

void ggml_cpu_load_row(const ggml_tensor * t, const char * row, int64_t n, float * out) { load_row(t, row, n, out); }
void ggml_cpu_store_row(const ggml_tensor * t, char * row, int64_t n, const float * in) { store_row(t, row, n, in); }
float (*ggml_cpu_unary_scalar(ggml_unary_op op))(float) {
    switch (op) {
        case GGML_UNARY_OP_RELU: return [](float x) { return map_relu{0}.f(x); };
        case GGML_UNARY_OP_GELU: return [](float x) { return map_gelu{0}.f(x); };
        case GGML_UNARY_OP_SILU: return [](float x) { return map_silu{0}.f(x); };
        default: {
            float (*fn)(float) = unary_fn(op);
            if (!fn) GGML_ABORT("unary: no CPU kernel for unary op %s (%d)", ggml_unary_op_name(op), (int) op);
            return fn;
        }
    }
}
