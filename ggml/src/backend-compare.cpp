// The registry (one "CPU" entry with one device) and ggml's backend comparison, the two
// pieces ggml's test-backend-ops reaches through: devices by registry, extra functions by
// name, and a graph computed on two backends node by node.
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <cstring>
#include <strings.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

struct ggml_backend_reg {
    const char * name;
};
static ggml_backend_reg g_cpu_reg = {"CPU"};

size_t ggml_backend_reg_count(void) { return 1; }
ggml_backend_reg_t ggml_backend_reg_get(size_t i) { return i == 0 ? &g_cpu_reg : nullptr; }
ggml_backend_reg_t ggml_backend_reg_by_name(const char * name) {
    return name && strcasecmp(name, g_cpu_reg.name) == 0 ? &g_cpu_reg : nullptr;
}
const char * ggml_backend_reg_name(ggml_backend_reg_t reg) { return reg ? reg->name : "NULL"; }
size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg) { return reg ? 1 : 0; }
ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t i) {
    return reg ? ggml_backend_dev_get(i) : nullptr;
}
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t dev) { return dev ? &g_cpu_reg : nullptr; }

void ggml_backend_dev_memory(ggml_backend_dev_t, size_t * free, size_t * total) {
    const long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
    const bool ok = page > 0 && pages > 0 && avail >= 0;
    if (total) *total = ok ? (size_t) page * (size_t) pages : 0;
    if (free) *free = ok ? (size_t) page * (size_t) avail : 0;
}

static const char * const g_path_names[] = {"scalar", "avx2", "avx512", "avx512vnni", "avx512bf16"};
static ggml_backend_feature * cpu_features(ggml_backend_reg_t) {
    static ggml_backend_feature list[2] = {{"KVG_CPU_PATH", nullptr}, {nullptr, nullptr}};
    const int path = (int) ggml_cpu_get_features();
    list[0].value =
        path >= 0 && path < (int) (sizeof(g_path_names) / sizeof(g_path_names[0])) ? g_path_names[path] : "?";
    return list;
}

void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    if (!reg || !name) return nullptr;
    if (std::strcmp(name, "ggml_backend_set_n_threads") == 0) return (void *) ggml_backend_cpu_set_n_threads;
    if (std::strcmp(name, "ggml_backend_get_features") == 0) return (void *) cpu_features;
    if (std::strcmp(name, "ggml_backend_set_abort_callback") == 0) return (void *) ggml_backend_cpu_set_abort_callback;
    if (std::strcmp(name, "ggml_backend_cpu_set_use_ref") == 0) return (void *) ggml_backend_cpu_set_use_ref;
    return nullptr;
}

// ---- a graph's tensors copied into another context and buffer ----
namespace {

struct graph_copy {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_cgraph * graph = nullptr;
    std::unordered_map<const ggml_tensor *, ggml_tensor *> map;

    ~graph_copy() {
        ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
    // the copy of t, made once, after its sources and root (same type, shape, strides, op)
    ggml_tensor * copy_of(ggml_tensor * t) {
        if (!t) return nullptr;
        auto it = map.find(t);
        if (it != map.end()) return it->second;
        ggml_tensor * root = copy_of(t->view_src);
        ggml_tensor * c = ggml_new_tensor_impl(ctx, t->type, GGML_MAX_DIMS, t->ne, root, t->view_offs);
        std::memcpy(c->nb, t->nb, sizeof(t->nb));
        c->op = t->op;
        std::memcpy(c->op_params, t->op_params, sizeof(t->op_params));
        c->flags = t->flags;
        std::memcpy(c->name, t->name, sizeof(c->name));
        map[t] = c;
        for (int i = 0; i < GGML_MAX_SRC; ++i) c->src[i] = copy_of(t->src[i]);
        if (c->op != GGML_OP_NONE) ggml_hazards_on_new_op(ctx, c); // the copy's ops get their edges too
        return c;
    }
    bool make(ggml_backend_t backend, ggml_cgraph * g) {
        const int n = ggml_graph_n_nodes(g);
        const size_t n_tensors = 4 * (size_t) n + 64; // nodes, their sources and roots, bounded by GGML_MAX_SRC each
        ggml_init_params p = {ggml_tensor_overhead() * (n_tensors * GGML_MAX_SRC) +
                                  2 * ggml_graph_overhead_custom(n + 1, false),
                              nullptr, true};
        ctx = ggml_init(p);
        if (!ctx) return false;
        graph = ggml_new_graph_custom(ctx, n + 1, false);
        for (int i = 0; i < n; ++i) ggml_graph_add_node(graph, copy_of(ggml_graph_node(g, i)));
        buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
        if (!buf) return false;
        for (auto & kv : map) { // every tensor that owns bytes starts with the original's
            if (!kv.second->view_src && kv.first->data && kv.second->data) {
                std::memcpy(kv.second->data, kv.first->data, ggml_nbytes(kv.first));
            }
        }
        return true;
    }
};

bool is_view_op(ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// one node as a graph of its own (sources are already computed or inputs)
bool compute_one(ggml_backend_t backend, ggml_cgraph * scratch, ggml_tensor * node) {
    ggml_graph_clear(scratch);
    ggml_graph_add_node(scratch, node);
    return ggml_backend_graph_compute(backend, scratch) == GGML_STATUS_SUCCESS;
}

} // namespace

bool ggml_backend_compare_graph_backend(ggml_backend_t backend1, ggml_backend_t backend2, ggml_cgraph * graph,
                                        ggml_backend_eval_callback callback, void * user_data,
                                        ggml_tensor const * const * test_nodes, size_t num_test_nodes) {
    if (!backend1 || !backend2 || !graph || !callback) return false;
    graph_copy copy;
    if (!copy.make(backend2, graph)) {
        GGML_LOG_ERROR("ggml_backend_compare_graph_backend: cannot copy the graph\n");
        return false;
    }
    ggml_cgraph * g2 = copy.graph;
    const int n = ggml_graph_n_nodes(graph);
    if (num_test_nodes != 0) {
        if (ggml_backend_graph_compute(backend1, graph) != GGML_STATUS_SUCCESS ||
            ggml_backend_graph_compute(backend2, g2) != GGML_STATUS_SUCCESS) {
            return false;
        }
        for (int i = 0; i < n; ++i) {
            for (size_t j = 0; j < num_test_nodes; ++j) {
                if (ggml_graph_node(graph, i) == test_nodes[j])
                    callback(i, ggml_graph_node(graph, i), ggml_graph_node(g2, i), user_data);
            }
        }
        return true;
    }
    ggml_init_params p = {2 * ggml_graph_overhead_custom(1, false), nullptr, true};
    ggml_context * scratch_ctx = ggml_init(p);
    if (!scratch_ctx) return false;
    ggml_cgraph * s1 = ggml_new_graph_custom(scratch_ctx, 1, false);
    ggml_cgraph * s2 = ggml_new_graph_custom(scratch_ctx, 1, false);
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
        ggml_tensor * t1 = ggml_graph_node(graph, i);
        ggml_tensor * t2 = ggml_graph_node(g2, i);
        ok = compute_one(backend1, s1, t1) && compute_one(backend2, s2, t2);
        if (!ok)
            GGML_LOG_ERROR("ggml_backend_compare_graph_backend: node %d '%s' (%s) failed\n", i, t1->name,
                           ggml_op_desc(t1));
        if (ok && !is_view_op(t1->op) && !callback(i, t1, t2, user_data)) break;
    }
    ggml_free(scratch_ctx);
    return ok;
}
