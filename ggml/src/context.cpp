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

// The whole report is built before anything is written, so that it reaches stderr as one
// line even while other threads print.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    char what[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fflush(stdout); // what the program printed before the failure comes first
    fprintf(stderr, "kvgraph fatal error: %s [%s line %d]\n", what, file, line);
    abort();
}

// ---- logging --------------------------------------------------------------------------
// Without a callback of the program's own, messages go to stderr as they are (each ends
// in its own newline; stderr is unbuffered).
static void default_log_sink(enum ggml_log_level, const char * text, void *) { fputs(text, stderr); }
static ggml_log_callback g_log_callback = default_log_sink;
static void * g_log_user_data = nullptr;

void ggml_log_set(ggml_log_callback cb, void * user_data) {
    g_log_callback = cb ? cb : default_log_sink;
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

// ---- context --------------------------------------------------------------------------
size_t ggml_tensor_overhead(void) { return GGML_OBJECT_SIZE + GGML_TENSOR_SIZE; }

ggml_context * ggml_init(ggml_init_params params) {
    ggml_context * ctx = new (std::nothrow) ggml_context();
    if (!ctx) return nullptr;
    // a zero size still gets one aligned unit, so that the arena pointer is never null
    ctx->arena_size = GGML_PAD(params.mem_size ? params.mem_size : GGML_MEM_ALIGN, GGML_MEM_ALIGN);
    ctx->arena = (char *) params.mem_buffer;
    ctx->arena_owned = ctx->arena == nullptr;
    if (ctx->arena_owned) {
        ctx->arena = (char *) std::aligned_alloc(64, GGML_PAD(ctx->arena_size, 64));
        if (!ctx->arena) {
            GGML_LOG_ERROR("ggml_init: failed to allocate %zu bytes for the context arena\n", ctx->arena_size);
            delete ctx;
            return nullptr;
        }
    }
    ctx->skip_data = params.no_alloc;
    ctx->tensor_states = new std::deque<ggml_tensor_state>();
    ctx->hazards = new ggml_hazard_rules();
    ctx->current_graph_id = 0;
    return ctx;
}

// Graphs keep a heap-allocated schedule; the arena cannot run destructors.
static void free_graph_scheds(ggml_context * ctx) {
    for (ggml_object * obj = ctx->first; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_GRAPH) ggml_graph_sched_free((ggml_cgraph *) ggml_object_payload(ctx, obj));
    }
}

static void release_cross_edges(ggml_context * ctx); // below, with the edges

void ggml_reset(ggml_context * ctx) {
    if (!ctx) return;
    release_cross_edges(ctx);
    free_graph_scheds(ctx);
    ctx->first = ctx->last = nullptr;
    ctx->tensor_states->clear();
    ctx->hazards->clear();
}

void ggml_free(ggml_context * ctx) {
    if (!ctx) return;
    release_cross_edges(ctx);
    free_graph_scheds(ctx);
    if (ctx->arena_owned) std::free(ctx->arena);
    delete ctx->tensor_states;
    delete ctx->hazards;
    delete ctx;
}

size_t ggml_used_mem(const ggml_context * ctx) { return ctx->last ? ctx->last->offs + ctx->last->size : 0; }
bool ggml_get_no_alloc(ggml_context * ctx) { return ctx->skip_data; }
void ggml_set_no_alloc(ggml_context * ctx, bool no_alloc) { ctx->skip_data = no_alloc; }
void * ggml_get_mem_buffer(const ggml_context * ctx) { return ctx->arena; }
size_t ggml_get_mem_size(const ggml_context * ctx) { return ctx->arena_size; }

size_t ggml_get_max_tensor_size(const ggml_context * ctx) {
    size_t max_size = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const size_t n = ggml_nbytes(t);
        if (n > max_size) max_size = n;
    }
    return max_size;
}

// Objects are laid end to end: an aligned header, then its payload right behind it (so a
// tensor finds its own header one header size before its struct).
ggml_object * ggml_new_object(ggml_context * ctx, enum ggml_object_type type, size_t size) {
    const size_t in_use = ggml_used_mem(ctx);
    const size_t header_at = GGML_PAD(in_use, GGML_MEM_ALIGN);
    const size_t payload = GGML_PAD(size, GGML_MEM_ALIGN);
    const size_t request = GGML_OBJECT_SIZE + payload;
    // header_at <= arena_size: both are multiples of the alignment and in_use <= arena_size
    if (size > ctx->arena_size || request > ctx->arena_size - header_at) {
        GGML_ABORT("context arena full: %zu bytes needed, %zu available (%zu of %zu bytes in use); "
                   "create the context with a larger ggml_init_params.mem_size",
                   request, ctx->arena_size - in_use, in_use, ctx->arena_size);
    }
    ggml_object * obj = (ggml_object *) (ctx->arena + header_at);
    *obj = ggml_object{header_at + GGML_OBJECT_SIZE, payload, nullptr, type, {}};
    (ctx->last ? ctx->last->next : ctx->first) = obj;
    ctx->last = obj;
    return obj;
}

static ggml_tensor_state * new_tensor_state(ggml_context * ctx) {
    ctx->tensor_states->emplace_back();
    ggml_tensor_state * st = &ctx->tensor_states->back(); // a deque: the address stays valid
    st->owner = ctx;
    return st;
}

// A tensor has 4 dims (missing ones are 1) and contiguous strides. A view records the
// tensor owning the bytes, never another view, so view_offs is from that owner's start.
ggml_tensor * ggml_new_tensor_impl(ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne,
                                   ggml_tensor * view_src, size_t view_offs) {
    if (type < 0 || type >= kvg::TYPE_COUNT || ggml_blck_size(type) <= 0) {
        GGML_ABORT("new tensor: no such type (%d)", (int) type);
    }
    if (n_dims < 1 || n_dims > GGML_MAX_DIMS) {
        GGML_ABORT("new tensor: %d dims given, 1 to %d allowed", n_dims, GGML_MAX_DIMS);
    }
    int64_t shape[GGML_MAX_DIMS];
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        shape[d] = d < n_dims ? ne[d] : 1;
        if (shape[d] < 0) GGML_ABORT("new tensor: dim %d is negative (%" PRId64 ")", d, shape[d]);
    }
    const int64_t block = ggml_blck_size(type);
    if (shape[0] % block != 0) {
        GGML_ABORT("new tensor: a %s row holds whole blocks of %" PRId64 ", not %" PRId64 " elements",
                   ggml_type_name(type), block, shape[0]);
    }
    size_t stride[GGML_MAX_DIMS];
    stride[0] = ggml_type_size(type);
    stride[1] = stride[0] * (size_t) (shape[0] / block);
    for (int d = 2; d < GGML_MAX_DIMS; ++d) stride[d] = stride[d - 1] * (size_t) shape[d - 1];
    const size_t nbytes = stride[3] * (size_t) shape[3];

    ggml_tensor * owner = view_src;
    size_t offset = view_offs;
    if (owner && owner->view_src) {
        offset += owner->view_offs;
        owner = owner->view_src;
    }
    if (owner && nbytes > 0 && (offset > ggml_nbytes(owner) || nbytes > ggml_nbytes(owner) - offset)) {
        GGML_ABORT("new view: %zu bytes at offset %zu do not fit in the %zu bytes of '%s'", nbytes, offset,
                   ggml_nbytes(owner), owner->name);
    }

    const bool with_data = owner == nullptr && !ctx->skip_data;
    ggml_object * obj = ggml_new_object(ctx, GGML_OBJECT_TYPE_TENSOR, GGML_TENSOR_SIZE + (with_data ? nbytes : 0));
    ggml_tensor * t = new (ggml_object_payload(ctx, obj)) ggml_tensor(); // all zero: op NONE, no name, no sources
    t->type = type;
    std::copy(shape, shape + GGML_MAX_DIMS, t->ne);
    std::copy(stride, stride + GGML_MAX_DIMS, t->nb);
    t->view_src = owner;
    t->view_offs = offset;
    if (with_data) t->data = t + 1;
    else if (owner && owner->data) t->data = (char *) owner->data + offset;
    t->impl = new_tensor_state(ctx);
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
// The same elements as src, shape and strides included, over src's bytes.
ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src) {
    ggml_tensor * v = ggml_new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0);
    std::copy(src->nb, src->nb + GGML_MAX_DIMS, v->nb);
    return ggml_format_name(v, "%s (view)", src->name);
}

// The first tensor at or after obj in the object list (graphs and work buffers are skipped).
static ggml_tensor * tensor_at_or_after(const ggml_context * ctx, const ggml_object * obj) {
    while (obj && obj->type != GGML_OBJECT_TYPE_TENSOR) obj = obj->next;
    return obj ? (ggml_tensor *) ggml_object_payload(ctx, obj) : nullptr;
}
ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx) { return tensor_at_or_after(ctx, ctx->first); }
ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * tensor) {
    const ggml_object * own = (const ggml_object *) ((const char *) tensor - GGML_OBJECT_SIZE); // see ggml_new_object
    return tensor_at_or_after(ctx, own->next);
}
ggml_tensor * ggml_get_tensor(ggml_context * ctx, const char * name) {
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (std::strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

// ---- names, flags, params ---------------------------------------------------------------
const char * ggml_get_name(const ggml_tensor * t) { return t->name; }
// Names longer than GGML_MAX_NAME - 1 bytes are cut; the result is always terminated.
ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name) {
    const size_t len = strnlen(name, GGML_MAX_NAME - 1);
    std::memcpy(t->name, name, len);
    t->name[len] = '\0';
    return t;
}
// Formatted aside first: the arguments may be t's own name ("%s (copy)", t->name).
ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...) {
    char text[GGML_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return ggml_set_name(t, text);
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
// Element number -> coordinates, dim 0 varying fastest; whatever is left over lands in dim 3.
void ggml_unravel_index(const ggml_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3) {
    int64_t * const coord[GGML_MAX_DIMS] = {i0, i1, i2, i3};
    int64_t rest = i;
    for (int d = 0; d + 1 < GGML_MAX_DIMS; ++d) {
        if (coord[d]) *coord[d] = rest % t->ne[d];
        rest /= t->ne[d];
    }
    if (coord[GGML_MAX_DIMS - 1]) *coord[GGML_MAX_DIMS - 1] = rest;
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
