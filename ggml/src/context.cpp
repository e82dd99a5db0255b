// The arena: one block of memory holding tensor structs, their data and graphs;
// tensor creation, views, names, element access.
#include "ggml-impl.h"
#include "types.h"

#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "%s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
    abort();
}

// ---- logging --------------------------------------------------------------------------
static void log_to_stderr(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    fputs(text, stderr);
    fflush(stderr);
}
static ggml_log_callback g_log_callback = log_to_stderr;
static void * g_log_user_data = nullptr;

void ggml_log_set(ggml_log_callback cb, void * user_data) {
    g_log_callback = cb ? cb : log_to_stderr;
    g_log_user_data = user_data;
}
void ggml_log_get(ggml_log_callback * cb, void ** user_data) {
    if (cb) *cb = g_log_callback;
    if (user_data) *user_data = g_log_user_data;
}
void ggml_log_internal(enum ggml_log_level level, const char * fmt, ...) {
    char small[512];
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(small, sizeof small, fmt, args);
    va_end(args);
    if (n >= 0 && (size_t) n < sizeof small) {
        g_log_callback(level, small, g_log_user_data);
    } else if (n >= 0) {
        std::string big((size_t) n + 1, '\0');
        vsnprintf(&big[0], big.size(), fmt, copy);
        g_log_callback(level, big.c_str(), g_log_user_data);
    }
    va_end(copy);
}

// ---- time -------------------------------------------------------------------------
static const auto g_time_start = std::chrono::steady_clock::now();
void ggml_time_init(void) {}
int64_t ggml_time_us(void) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - g_time_start).count();
}
int64_t ggml_time_ms(void) { return ggml_time_us() / 1000; }

// ---- shape helpers ------------------------------------------------------------------
int64_t ggml_nelements(const ggml_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t ggml_nrows(const ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }


size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    GGML_ASSERT(ne % ggml_blck_size(type) == 0);
    return ggml_type_size(type) * ne / ggml_blck_size(type);
}
size_t ggml_element_size(const ggml_tensor * t) { return ggml_type_size(t->type); }

bool ggml_is_transposed(const ggml_tensor * t) { return t->nb[0] > t->nb[1]; }
bool ggml_is_permuted(const ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}
bool ggml_is_empty(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) if (t->ne[i] == 0) return true;
    return false;
}
bool ggml_is_scalar(const ggml_tensor * t) { return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool ggml_is_vector(const ggml_tensor * t) { return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool ggml_is_matrix(const ggml_tensor * t) { return t->ne[2] == 1 && t->ne[3] == 1; }
int ggml_n_dims(const ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) if (t->ne[i] > 1) return i + 1;
    return 1;
}

bool ggml_is_contiguous_rows(const ggml_tensor * t) {
    return t->ne[0] == ggml_blck_size(t->type) || t->nb[0] == ggml_type_size(t->type);
}
bool ggml_are_same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}
bool ggml_are_same_stride(const ggml_tensor * a, const ggml_tensor * b) {
    return a->nb[0] == b->nb[0] && a->nb[1] == b->nb[1] && a->nb[2] == b->nb[2] && a->nb[3] == b->nb[3];
}
// can b be broadcast (repeated) to the shape of a
bool ggml_can_repeat(const ggml_tensor * b, const ggml_tensor * a) {
    if (ggml_is_empty(b)) return ggml_is_empty(a);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) if (a->ne[i] % b->ne[i] != 0) return false;
    return true;
}

bool ggml_writes_borrowed_memory(const ggml_tensor * t) {
    return t->view_src != nullptr && t->op != GGML_OP_NONE && !ggml_op_is_view(t->op);
}

// ---- context --------------------------------------------------------------------------
size_t ggml_tensor_overhead(void) { return GGML_OBJECT_SIZE + GGML_TENSOR_SIZE; }

ggml_context * ggml_init(ggml_init_params params) {
    ggml_context * ctx = new (std::nothrow) ggml_context();
    if (!ctx) return nullptr;
    if (params.mem_size == 0) params.mem_size = GGML_MEM_ALIGN;
    ctx->mem_size = GGML_PAD(params.mem_size, GGML_MEM_ALIGN);
    ctx->mem_buffer = params.mem_buffer;
    ctx->mem_buffer_owned = params.mem_buffer == nullptr;
    if (ctx->mem_buffer_owned) {
        ctx->mem_buffer = std::aligned_alloc(64, GGML_PAD(ctx->mem_size, 64));
        if (!ctx->mem_buffer) {
            GGML_LOG_ERROR("ggml_init: failed to allocate %zu bytes for the context arena\n", ctx->mem_size);
            delete ctx;
            return nullptr;
        }
    }
    ctx->no_alloc = params.no_alloc;
    ctx->tensor_states = new std::deque<ggml_tensor_state>();
    ctx->hazards = new ggml_hazard_rules();
    ctx->current_graph_id = 0;
    return ctx;
}

// Graphs keep a heap-allocated schedule; the arena cannot run destructors.
static void free_graph_scheds(ggml_context * ctx) {
    for (ggml_object * obj = ctx->objects_begin; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_GRAPH) ggml_graph_sched_free((ggml_cgraph *) ((char *) ctx->mem_buffer + obj->offs));
    }
}

static void release_cross_edges(ggml_context * ctx); // below, with the edges

void ggml_reset(ggml_context * ctx) {
    if (!ctx) return;
    release_cross_edges(ctx);
    free_graph_scheds(ctx);
    ctx->n_objects = 0;
    ctx->objects_begin = ctx->objects_end = nullptr;
    ctx->tensor_states->clear();
    ctx->hazards->clear();
}

void ggml_free(ggml_context * ctx) {
    if (!ctx) return;
    release_cross_edges(ctx);
    free_graph_scheds(ctx);
    if (ctx->mem_buffer_owned) std::free(ctx->mem_buffer);
    delete ctx->tensor_states;
    delete ctx->hazards;
    delete ctx;
}

size_t ggml_used_mem(const ggml_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}
bool ggml_get_no_alloc(ggml_context * ctx) { return ctx->no_alloc; }
void ggml_set_no_alloc(ggml_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }
void * ggml_get_mem_buffer(const ggml_context * ctx) { return ctx->mem_buffer; }
size_t ggml_get_mem_size(const ggml_context * ctx) { return ctx->mem_size; }

size_t ggml_get_max_tensor_size(const ggml_context * ctx) {
    size_t max_size = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const size_t n = ggml_nbytes(t);
        if (n > max_size) max_size = n;
    }
    return max_size;
}

ggml_object * ggml_new_object(ggml_context * ctx, enum ggml_object_type type, size_t size) {
    const size_t cur_end = ggml_used_mem(ctx);
    const size_t size_needed = GGML_PAD(size, GGML_MEM_ALIGN);
    char * const mem = (char *) ctx->mem_buffer;
    const size_t obj_offs = GGML_PAD(cur_end, GGML_MEM_ALIGN);
    const size_t needed = obj_offs + GGML_OBJECT_SIZE + size_needed;
    if (needed > ctx->mem_size) {
        GGML_ABORT("ggml_new_object: not enough space in the context's memory pool: "
                   "%zu bytes needed, %zu available (%zu used of %zu); increase ggml_init_params.mem_size",
                   GGML_OBJECT_SIZE + size_needed, ctx->mem_size > cur_end ? ctx->mem_size - cur_end : (size_t) 0,
                   cur_end, ctx->mem_size);
    }
    ggml_object * obj = (ggml_object *) (mem + obj_offs);
    obj->offs = obj_offs + GGML_OBJECT_SIZE;
    obj->size = size_needed;
    obj->next = nullptr;
    obj->type = type;
    if (ctx->objects_end) ctx->objects_end->next = obj; else ctx->objects_begin = obj;
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

ggml_tensor * ggml_new_tensor_impl(ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne,
                                   ggml_tensor * view_src, size_t view_offs) {
    GGML_ASSERT(type >= 0 && type < kvg::TYPE_COUNT && ggml_blck_size(type) > 0);
    GGML_ASSERT(n_dims >= 1 && n_dims <= GGML_MAX_DIMS);
    // views always point at the root that owns the bytes
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    int64_t ne_full[GGML_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) {
        GGML_ASSERT(ne[i] >= 0);
        ne_full[i] = ne[i];
    }
    GGML_ASSERT(ne_full[0] % ggml_blck_size(type) == 0);
    size_t data_size = ggml_row_size(type, ne_full[0]);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) data_size *= ne_full[i];
    GGML_ASSERT(view_src == nullptr || data_size == 0 || data_size + view_offs <= ggml_nbytes(view_src));

    void * data = view_src ? (view_src->data ? (char *) view_src->data + view_offs : nullptr) : nullptr;
    const bool own_data = view_src == nullptr && !ctx->no_alloc;
    ggml_object * obj = ggml_new_object(ctx, GGML_OBJECT_TYPE_TENSOR, GGML_TENSOR_SIZE + (own_data ? data_size : 0));
    ggml_tensor * t = (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    std::memset((void *) t, 0, sizeof(*t));
    t->type = type;
    t->op = GGML_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = own_data ? (void *) (t + 1) : data;
    ctx->tensor_states->emplace_back();
    ctx->tensor_states->back().owner = ctx;
    t->impl = &ctx->tensor_states->back();
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t->ne[i] = ne_full[i];
    t->nb[0] = ggml_type_size(type);
    t->nb[1] = t->nb[0] * (t->ne[0] / ggml_blck_size(type));
    for (int i = 2; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
    return t;
}

ggml_tensor * ggml_new_tensor(ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne) {
    return ggml_new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, enum ggml_type type, int64_t ne0) {
    return ggml_new_tensor(ctx, type, 1, &ne0);
}
ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return ggml_new_tensor(ctx, type, 2, ne);
}
ggml_tensor * ggml_new_tensor_3d(ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return ggml_new_tensor(ctx, type, 3, ne);
}
ggml_tensor * ggml_new_tensor_4d(ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return ggml_new_tensor(ctx, type, 4, ne);
}
ggml_tensor * ggml_new_i32(ggml_context * ctx, int32_t value) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    if (t->data) ggml_set_i32(t, value);
    return t;
}
ggml_tensor * ggml_new_f32(ggml_context * ctx, float value) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    if (t->data) ggml_set_f32(t, value);
    return t;
}
ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src) {
    return ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
}
ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src) {
    ggml_tensor * t = ggml_new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0);
    ggml_format_name(t, "%s (view)", src->name);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t->nb[i] = src->nb[i];
    return t;
}

ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx) {
    for (ggml_object * obj = ctx->objects_begin; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}
ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * tensor) {
    ggml_object * obj = (ggml_object *) ((char *) tensor - GGML_OBJECT_SIZE);
    for (obj = obj->next; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}
ggml_tensor * ggml_get_tensor(ggml_context * ctx, const char * name) {
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (std::strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

// ---- names, flags, params ---------------------------------------------------------------
const char * ggml_get_name(const ggml_tensor * t) { return t->name; }
ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name) {
    size_t i = 0;
    for (; i < sizeof(t->name) - 1 && name[i] != '\0'; ++i) t->name[i] = name[i];
    t->name[i] = '\0';
    return t;
}
ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, args);
    va_end(args);
    return t;
}
void ggml_set_input(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_INPUT; }
void ggml_set_output(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_OUTPUT; }

void ggml_set_op_params(ggml_tensor * t, const void * params, size_t size) {
    GGML_ASSERT(size <= GGML_MAX_OP_PARAMS);
    std::memcpy(t->op_params, params, size);
}
int32_t ggml_get_op_params_i32(const ggml_tensor * t, uint32_t i) { return t->op_params[i]; }
float ggml_get_op_params_f32(const ggml_tensor * t, uint32_t i) {
    float v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}
void ggml_set_op_params_i32(ggml_tensor * t, uint32_t i, int32_t value) { t->op_params[i] = value; }
void ggml_set_op_params_f32(ggml_tensor * t, uint32_t i, float value) { std::memcpy(&t->op_params[i], &value, sizeof(value)); }

// ---- control edges storage -----------------------------------------------------------------
// ---- edges between contexts --------------------------------------------------------------
// An edge is stored with the tensor that waits; its target may live in another context
// (ggml_add_control_dep). Freeing or resetting either context drops such edges, so none
// points at freed memory. Rare, hence one list under one lock.
namespace {
struct cross_edge {
    ggml_tensor * holder;        // the tensor whose deps hold the edge
    ggml_context * holder_ctx;
    ggml_context * target_ctx;
};
std::mutex g_cross_mutex;
std::vector<cross_edge> g_cross_edges;

void drop_deps_into(ggml_tensor * t, const ggml_context * target_ctx) {
    std::vector<ggml_dep> & list = ggml_state(t)->deps;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const ggml_dep & d) { return ggml_state(d.tensor)->owner == target_ctx; }),
               list.end());
    t->deps = list.data();
    t->n_deps = (int32_t) list.size();
}
} // namespace

// ctx's tensors are going away: edges into them are dropped, its own are forgotten.
static void release_cross_edges(ggml_context * ctx) {
    std::lock_guard<std::mutex> lock(g_cross_mutex);
    if (g_cross_edges.empty()) return;
    bool dropped = false;
    for (const cross_edge & e : g_cross_edges) {
        if (e.target_ctx == ctx && e.holder_ctx != ctx) {
            drop_deps_into(e.holder, ctx);
            dropped = true;
        }
    }
    g_cross_edges.erase(std::remove_if(g_cross_edges.begin(), g_cross_edges.end(),
                                       [&](const cross_edge & e) { return e.target_ctx == ctx || e.holder_ctx == ctx; }),
                        g_cross_edges.end());
    if (dropped) ggml_graph_edges_changed();
}

void ggml_push_dep(ggml_tensor * tensor, ggml_tensor * dep, enum ggml_dep_kind kind) {
    if (dep == tensor || dep == nullptr) return;
    for (int i = 0; i < tensor->n_deps; ++i) {
        if (tensor->deps[i].tensor == dep) return; // one edge per pair: the first reason found is kept
    }
    if (ggml_state(tensor)->graph_id != 0) ggml_graph_edges_changed(); // a graph holds it already
    ggml_context * holder_ctx = ggml_state(tensor)->owner, * target_ctx = ggml_state(dep)->owner;
    if (holder_ctx != target_ctx) {
        std::lock_guard<std::mutex> lock(g_cross_mutex);
        g_cross_edges.push_back({tensor, holder_ctx, target_ctx});
    }
    std::vector<ggml_dep> & list = ggml_state(tensor)->deps;
    list.push_back({dep, kind});
    tensor->deps = list.data();
    tensor->n_deps = (int32_t) list.size();
}

void ggml_add_control_dep(ggml_context * ctx, ggml_tensor * tensor, ggml_tensor * dep) {
    (void) ctx; // the edge lives with `tensor`, in its own context
    if (tensor == nullptr || dep == nullptr) {
        GGML_LOG_ERROR("ggml_add_control_dep: %s is NULL; no edge added\n", tensor ? "dep" : "tensor");
        return;
    }
    ggml_push_dep(tensor, dep, GGML_DEP_MANUAL);
}
int ggml_n_control_deps(const ggml_tensor * t) { return t->n_deps; }
ggml_tensor * ggml_get_control_dep(const ggml_tensor * t, int i, enum ggml_dep_kind * kind) {
    if (i < 0 || i >= t->n_deps) return nullptr;
    if (kind) *kind = t->deps[i].kind;
    return t->deps[i].tensor;
}
const char * ggml_dep_kind_name(enum ggml_dep_kind kind) {
    switch (kind) {
        case GGML_DEP_RAW: return "RAW";
        case GGML_DEP_WAR: return "WAR";
        case GGML_DEP_WAW: return "WAW";
        case GGML_DEP_MANUAL: return "MANUAL";
    }
    return "?";
}

// ---- element access -------------------------------------------------------------------------
void ggml_unravel_index(const ggml_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne0 = t->ne[0], ne1 = t->ne[1], ne2 = t->ne[2];
    const int64_t r3 = i / (ne2 * ne1 * ne0);
    const int64_t r2 = (i - r3 * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t r1 = (i - r3 * ne2 * ne1 * ne0 - r2 * ne1 * ne0) / ne0;
    const int64_t r0 = i - r3 * ne2 * ne1 * ne0 - r2 * ne1 * ne0 - r1 * ne0;
    if (i0) *i0 = r0;
    if (i1) *i1 = r1;
    if (i2) *i2 = r2;
    if (i3) *i3 = r3;
}

static void * element_ptr(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    GGML_ASSERT(t->data != nullptr);
    GGML_ASSERT(!ggml_is_quantized(t->type));
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

float ggml_get_f32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    void * p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_F32: return *(float *) p;
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(ggml_bf16_t *) p);
        case GGML_TYPE_I8: return *(int8_t *) p;
        case GGML_TYPE_I16: return *(int16_t *) p;
        case GGML_TYPE_I32: return (float) *(int32_t *) p;
        case GGML_TYPE_I64: return (float) *(int64_t *) p;
        default: GGML_ABORT("ggml_get_f32: unsupported type %s", ggml_type_name(t->type));
    }
}
void ggml_set_f32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3, float v) {
    void * p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_F32: *(float *) p = v; break;
        case GGML_TYPE_F16: *(ggml_fp16_t *) p = ggml_fp32_to_fp16(v); break;
        case GGML_TYPE_BF16: *(ggml_bf16_t *) p = ggml_fp32_to_bf16(v); break;
        case GGML_TYPE_I8: *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_I16: *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I32: *(int32_t *) p = (int32_t) v; break;
        case GGML_TYPE_I64: *(int64_t *) p = (int64_t) v; break;
        default: GGML_ABORT("ggml_set_f32: unsupported type %s", ggml_type_name(t->type));
    }
}
int32_t ggml_get_i32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    void * p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_I8: return *(int8_t *) p;
        case GGML_TYPE_I16: return *(int16_t *) p;
        case GGML_TYPE_I32: return *(int32_t *) p;
        case GGML_TYPE_I64: return (int32_t) *(int64_t *) p;
        default: return (int32_t) ggml_get_f32_nd(t, i0, i1, i2, i3);
    }
}
void ggml_set_i32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3, int32_t v) {
    void * p = element_ptr(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_I8: *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_I16: *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I32: *(int32_t *) p = v; break;
        case GGML_TYPE_I64: *(int64_t *) p = v; break;
        default: ggml_set_f32_nd(t, i0, i1, i2, i3, (float) v);
    }
}

#define UNRAVEL(t, i) int64_t i0, i1, i2, i3; ggml_unravel_index(t, i, &i0, &i1, &i2, &i3)
float ggml_get_f32_1d(const ggml_tensor * t, int i) { UNRAVEL(t, i); return ggml_get_f32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3); }
void ggml_set_f32_1d(const ggml_tensor * t, int i, float v) { UNRAVEL(t, i); ggml_set_f32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3, v); }
int32_t ggml_get_i32_1d(const ggml_tensor * t, int i) { UNRAVEL(t, i); return ggml_get_i32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3); }
void ggml_set_i32_1d(const ggml_tensor * t, int i, int32_t v) { UNRAVEL(t, i); ggml_set_i32_nd(t, (int) i0, (int) i1, (int) i2, (int) i3, v); }
#undef UNRAVEL

ggml_tensor * ggml_set_zero(ggml_tensor * t) {
    if (ggml_is_empty(t)) return t;
    GGML_ASSERT(t->data && ggml_is_contiguous(t));
    std::memset(t->data, 0, ggml_nbytes(t));
    return t;
}
ggml_tensor * ggml_set_f32(ggml_tensor * t, float v) {
    const int64_t n = ggml_nelements(t);
    for (int64_t i = 0; i < n; ++i) ggml_set_f32_1d(t, (int) i, v);
    return t;
}
ggml_tensor * ggml_set_i32(ggml_tensor * t, int32_t v) {
    const int64_t n = ggml_nelements(t);
    for (int64_t i = 0; i < n; ++i) ggml_set_i32_1d(t, (int) i, v);
    return t;
}
void * ggml_get_data(const ggml_tensor * t) { return t->data; }
float * ggml_get_data_f32(const ggml_tensor * t) {
    GGML_ASSERT(t->type == GGML_TYPE_F32);
    return (float *) t->data;
}
