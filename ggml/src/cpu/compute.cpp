// Per-op scheduling facts (tasks, phases, scratch) and the dispatch to the kernels.
#include "kernels.h"

#include <algorithm>
#include <cstring>

// Below this many elements a node runs as one task: splitting costs more than it saves.
static const int64_t MIN_ELEMENTS_PER_TASK = 4096;

static int split_by_size(const ggml_tensor * node, int n_threads) {
    const int64_t n = ggml_nelements(node);
    const int64_t rows = ggml_nrows(node);
    int64_t tasks = std::min<int64_t>(n_threads, std::max<int64_t>(1, n / MIN_ELEMENTS_PER_TASK));
    return (int) std::max<int64_t>(1, std::min(tasks, rows));
}

// op_params is only 4-byte aligned inside ggml_tensor: copy out, never cast (pointers need 8).
static custom_op_params custom_params(const ggml_tensor * node) {
    custom_op_params p;
    std::memcpy(&p, node->op_params, sizeof(p));
    return p;
}

int ggml_op_n_tasks(const ggml_tensor * node, int n_threads) {
    if (!ggml_op_computes(node) || ggml_is_empty(node)) return 0; // the access model: views and leafs run no kernel
    switch (node->op) {
        case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_FLASH_ATTN_EXT:
            return n_threads;
        case GGML_OP_ARGMAX:
        case GGML_OP_CONCAT:
        case GGML_OP_SUM:
            return 1;
        case GGML_OP_MEAN:
        case GGML_OP_TOP_K:
            return split_by_size(node->src[0], n_threads); // rows of the source
        case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2:
        case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: {
            const custom_op_params p = custom_params(node);
            return p.n_tasks == GGML_N_TASKS_MAX ? n_threads : std::max(1, std::min(p.n_tasks, n_threads));
        }
        case GGML_OP_SET_ROWS: {
            // set_rows splits over the source rows
            const ggml_tensor * src = node->src[0];
            return (int) std::max<int64_t>(1, std::min<int64_t>(n_threads, ggml_nelements(src) / MIN_ELEMENTS_PER_TASK));
        }
        default:
            return split_by_size(node, n_threads);
    }
}

int ggml_op_n_phases(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_MUL_MAT: return ggml_mul_mat_n_phases(node);
        case GGML_OP_MUL_MAT_ID: return ggml_mul_mat_id_n_phases(node);
        case GGML_OP_FLASH_ATTN_EXT: return ggml_flash_attn_ext_n_phases(node);
        case GGML_OP_SET:
        case GGML_OP_ACC: return ggml_set_n_phases(node);
        default: return 1;
    }
}

size_t ggml_op_work_size(const ggml_tensor * node, int n_tasks) {
    switch (node->op) {
        case GGML_OP_MUL_MAT: return ggml_mul_mat_work_size(node, n_tasks);
        case GGML_OP_FLASH_ATTN_EXT: return ggml_flash_attn_ext_work_size(node, n_tasks);
        case GGML_OP_MUL_MAT_ID: return ggml_mul_mat_id_work_size(node, n_tasks);
        default: return 0;
    }
}

const ggml_graph_sched::node_facts * ggml_exec_facts(const ggml_graph_sched * sc, int n_threads) {
    const int path = (int) ggml_cpu_get_features(); // kernels pick phases and scratch
    if (sc->facts_threads == n_threads && sc->facts_path == path) return sc->facts.data();
    sc->facts.resize(sc->exec.size());
    sc->facts_max_ws = 0;
    for (size_t i = 0; i < sc->exec.size(); ++i) {
        ggml_graph_sched::node_facts & f = sc->facts[i];
        f.n_tasks = ggml_op_n_tasks(sc->exec[i], n_threads);
        f.n_phases = f.n_tasks > 0 ? ggml_op_n_phases(sc->exec[i]) : 1;
        f.wsize = f.n_tasks > 0 ? ggml_op_work_size(sc->exec[i], f.n_tasks) : 0;
        sc->facts_max_ws = std::max(sc->facts_max_ws, f.wsize);
    }
    sc->facts_threads = n_threads;
    sc->facts_path = path;
    return sc->facts.data();
}

static void compute_custom(const ggml_compute_params * params, ggml_tensor * dst) {
    const custom_op_params params_copy = custom_params(dst);
    const custom_op_params * p = &params_copy;
    switch (dst->op) {
        case GGML_OP_MAP_CUSTOM1:
            ((ggml_custom1_op_t) p->fun)(dst, dst->src[0], params->ith, params->nth, p->userdata);
            break;
        case GGML_OP_MAP_CUSTOM2:
            ((ggml_custom2_op_t) p->fun)(dst, dst->src[0], dst->src[1], params->ith, params->nth, p->userdata);
            break;
        case GGML_OP_CUSTOM:
            ((ggml_custom_op_t) p->fun)(dst, params->ith, params->nth, p->userdata);
            break;
        default:
            ((ggml_custom3_op_t) p->fun)(dst, dst->src[0], dst->src[1], dst->src[2], params->ith, params->nth, p->userdata);
            break;
    }
}

void ggml_compute_forward(const ggml_compute_params * params, ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_DUP:
        case GGML_OP_CPY:
        case GGML_OP_CONT: ggml_compute_forward_dup(params, node); break;
        case GGML_OP_GET_ROWS: ggml_compute_forward_get_rows(params, node); break;
        case GGML_OP_SET_ROWS: ggml_compute_forward_set_rows(params, node); break;
        case GGML_OP_CONCAT: ggml_compute_forward_concat(params, node); break;
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: ggml_compute_forward_binary(params, node); break;
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_SCALE:
        case GGML_OP_UNARY: ggml_compute_forward_map(params, node); break;
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN: ggml_compute_forward_sum_rows(params, node); break;
        case GGML_OP_SUM: ggml_compute_forward_sum(params, node); break;
        case GGML_OP_REPEAT: ggml_compute_forward_repeat(params, node); break;
        case GGML_OP_ARGMAX: ggml_compute_forward_argmax(params, node); break;
        case GGML_OP_ARANGE: ggml_compute_forward_arange(params, node); break;
        case GGML_OP_TIMESTEP_EMBEDDING: ggml_compute_forward_timestep_embedding(params, node); break;
        case GGML_OP_PAD_REFLECT_1D: ggml_compute_forward_pad_reflect_1d(params, node); break;
        case GGML_OP_ROLL: ggml_compute_forward_roll(params, node); break;
        case GGML_OP_IM2COL: ggml_compute_forward_im2col(params, node); break;
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW: ggml_compute_forward_conv_2d(params, node); break;
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D: ggml_compute_forward_conv_transpose(params, node); break;
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: ggml_compute_forward_pool(params, node); break;
        case GGML_OP_UPSCALE: ggml_compute_forward_upscale(params, node); break;
        case GGML_OP_PAD: ggml_compute_forward_pad(params, node); break;
        case GGML_OP_WIN_PART: ggml_compute_forward_win_part(params, node); break;
        case GGML_OP_WIN_UNPART: ggml_compute_forward_win_unpart(params, node); break;
        case GGML_OP_GET_REL_POS: ggml_compute_forward_get_rel_pos(params, node); break;
        case GGML_OP_ADD_REL_POS: ggml_compute_forward_add_rel_pos(params, node); break;
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM: ggml_compute_forward_norm(params, node); break;
        case GGML_OP_SOFT_MAX: ggml_compute_forward_soft_max(params, node); break;
        case GGML_OP_DIAG_MASK_INF: ggml_compute_forward_diag_mask_inf(params, node); break;
        case GGML_OP_ROPE: ggml_compute_forward_rope(params, node); break;
        case GGML_OP_MUL_MAT: ggml_compute_forward_mul_mat(params, node); break;
        case GGML_OP_FLASH_ATTN_EXT: ggml_compute_forward_flash_attn_ext(params, node); break;
        case GGML_OP_SET:
        case GGML_OP_ACC: ggml_compute_forward_set(params, node); break;
        case GGML_OP_GLU: ggml_compute_forward_glu(params, node); break;
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: ggml_compute_forward_argsort(params, node); break;
        case GGML_OP_MUL_MAT_ID: ggml_compute_forward_mul_mat_id(params, node); break;
        case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2:
        case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: compute_custom(params, node); break;
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: break;
        default: GGML_ABORT("ggml_compute_forward: op %s has no CPU kernel", ggml_op_name(node->op));
    }
}
