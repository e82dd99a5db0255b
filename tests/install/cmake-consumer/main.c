/* An installed-kvgraph consumer written in C: y = W x + b with the ggml API. */
#include <ggml.h>
#include <ggml-cpu.h>
#include <math.h>
#include <stdio.h>

int main(void) {
    struct ggml_init_params params = {8 * 1024 * 1024, NULL, false};
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2); /* 2 rows of 3 */
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3);
    struct ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2);
    for (int i = 0; i < 6; ++i) ggml_set_f32_1d(w, i, (float) (i + 1));
    for (int i = 0; i < 3; ++i) ggml_set_f32_1d(x, i, (float) (i + 1));
    ggml_set_f32_1d(b, 0, 0.5f);
    ggml_set_f32_1d(b, 1, -0.5f);
    struct ggml_tensor * y = ggml_add(ctx, ggml_mul_mat(ctx, w, x), b);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    if (ggml_graph_compute_with_ctx(ctx, gf, 2) != GGML_STATUS_SUCCESS) return 1;
    /* row 0: 1*1+2*2+3*3 + 0.5 = 14.5; row 1: 4+10+18 - 0.5 = 31.5 */
    const float y0 = ggml_get_f32_1d(y, 0), y1 = ggml_get_f32_1d(y, 1);
    printf("y = [%g, %g]\n", y0, y1);
    ggml_free(ctx);
    return (fabsf(y0 - 14.5f) < 1e-5f && fabsf(y1 - 31.5f) < 1e-5f) ? 0 : 1;
}
