// ggml's backend API over kvgraph's CPU compute (see ggml-backend.h). One buffer type (host
// memory), one device, one backend kind; a buffer is a block of aligned memory, and graph
// compute is ggml_graph_plan + ggml_graph_compute with a work buffer kept per backend.
#include "cpu/cpu-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace {
constexpr size_t ALIGN = 64;
}

struct ggml_backend_buffer_type {
    const char * name;
};
struct ggml_backend_buffer {
    ggml_backend_buffer_type_t buft;
    void * base;
    size_t size;
    ggml_backend_buffer_usage usage;
};
struct ggml_backend_device {
    const char * name, * description;
};
struct ggml_backend {
    int n_threads = GGML_DEFAULT_N_THREADS;
    ggml_threadpool * threadpool = nullptr;
    ggml_abort_callback abort_callback = nullptr;
    void * abort_callback_data = nullptr;
    bool use_ref = false; // computes run the scalar kernels on the barrier executor
    std::vector<uint8_t> work;
};
struct ggml_backend_sched {
    ggml_backend_t backend;
    ggml_gallocr_t galloc;
};

static ggml_backend_buffer_type g_cpu_buft = {"CPU"};
static ggml_backend_device g_cpu_device = {"CPU", "CPU (kvgraph)"};

// ---- buffer types and buffers ----
ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void) { return &g_cpu_buft; }
const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) { return buft ? buft->name : "NULL"; }

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    void * base = size > 0 ? std::aligned_alloc(ALIGN, GGML_PAD(size, ALIGN)) : nullptr;
    if (size > 0 && !base) {
        GGML_LOG_ERROR("ggml_backend_buft_alloc_buffer: failed to allocate %zu bytes of %s memory\n", size, ggml_backend_buft_name(buft));
        return nullptr;
    }
    return new (std::nothrow) ggml_backend_buffer{buft ? buft : &g_cpu_buft, base, size, GGML_BACKEND_BUFFER_USAGE_ANY};
}
size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t) { return ALIGN; }
size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t) { return SIZE_MAX; }
size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t, const ggml_tensor * t) { return ggml_nbytes(t); }
bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t) { return true; }

const char * ggml_backend_buffer_name(ggml_backend_buffer_t b) { return b ? b->buft->name : "NULL"; }
void ggml_backend_buffer_free(ggml_backend_buffer_t b) {
    if (!b) return;
    std::free(b->base);
    delete b;
}
void * ggml_backend_buffer_get_base(ggml_backend_buffer_t b) { return b ? b->base : nullptr; }
size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t b) { return b ? b->size : 0; }
enum ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t, ggml_tensor *) { return GGML_STATUS_SUCCESS; }
size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t) { return ALIGN; }
size_t ggml_backend_buffer_get_max_size(ggml_backend_buffer_t) { return SIZE_MAX; }
size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t, const ggml_tensor * t) { return ggml_nbytes(t); }
void ggml_backend_buffer_clear(ggml_backend_buffer_t b, uint8_t value) {
    if (b && b->base) std::memset(b->base, value, b->size);
}
bool ggml_backend_buffer_is_host(ggml_backend_buffer_t) { return true; }
void ggml_backend_buffer_set_usage(ggml_backend_buffer_t b, ggml_backend_buffer_usage usage) {
    if (b) b->usage = usage;
}
ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t b) { return b ? b->usage : GGML_BACKEND_BUFFER_USAGE_ANY; }
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t b) { return b ? b->buft : nullptr; }
void ggml_backend_buffer_reset(ggml_backend_buffer_t) {}

enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t b, ggml_tensor * t, void * addr) {
    const char * base = (const char *) ggml_backend_buffer_get_base(b);
    if (!b || !t || (const char *) addr < base || (const char *) addr + ggml_nbytes(t) > base + b->size) {
        GGML_LOG_ERROR("ggml_backend_tensor_alloc: tensor '%s' does not fit at that address of the buffer\n", t ? t->name : "NULL");
        return GGML_STATUS_ALLOC_FAILED;
    }
    t->data = addr;
    t->buffer = b;
    return GGML_STATUS_SUCCESS;
}
enum ggml_status ggml_backend_view_init(ggml_tensor * t) {
    if (!t || !t->view_src || !t->view_src->data) return GGML_STATUS_FAILED;
    t->data = (char *) t->view_src->data + t->view_offs;
    t->buffer = t->view_src->buffer;
    return GGML_STATUS_SUCCESS;
}

struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer) {
    void * base = ggml_backend_buffer_get_base(buffer);
    const size_t pad = base ? (ALIGN - (uintptr_t) base % ALIGN) % ALIGN : 0;
    return {buffer, base, ALIGN, pad};
}
enum ggml_status ggml_tallocr_alloc(struct ggml_tallocr * ta, ggml_tensor * t) {
    const size_t size = GGML_PAD(ggml_nbytes(t), ta->alignment);
    const size_t avail = ggml_backend_buffer_get_size(ta->buffer);
    if (ta->offset + size > avail) {
        GGML_LOG_ERROR("ggml_tallocr_alloc: tensor '%s' needs %zu bytes, the buffer has %zu left\n", t->name, size,
                       avail > ta->offset ? avail - ta->offset : 0);
        return GGML_STATUS_ALLOC_FAILED;
    }
    const enum ggml_status st = ggml_backend_tensor_alloc(ta->buffer, t, (char *) ta->base + ta->offset);
    if (st == GGML_STATUS_SUCCESS) ta->offset += size;
    return st;
}

// ---- tensor data ----
static void check_range(const char * fn, const ggml_tensor * t, size_t offset, size_t size) {
    if (!t || !t->data) GGML_ABORT("%s: tensor '%s' has no memory (allocate it first)", fn, t ? t->name : "NULL");
    if (offset > ggml_nbytes(t) || size > ggml_nbytes(t) - offset) {
        GGML_ABORT("%s: bytes %zu..%zu are outside tensor '%s' (%zu bytes)", fn, offset, offset + size, t->name, ggml_nbytes(t));
    }
}
void ggml_backend_tensor_set(ggml_tensor * t, const void * data, size_t offset, size_t size) {
    check_range("ggml_backend_tensor_set", t, offset, size);
    if (size) std::memcpy((char *) t->data + offset, data, size);
}
void ggml_backend_tensor_get(const ggml_tensor * t, void * data, size_t offset, size_t size) {
    check_range("ggml_backend_tensor_get", t, offset, size);
    if (size) std::memcpy(data, (const char *) t->data + offset, size);
}
void ggml_backend_tensor_memset(ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    check_range("ggml_backend_tensor_memset", t, offset, size);
    if (size) std::memset((char *) t->data + offset, value, size);
}
void ggml_backend_tensor_copy(ggml_tensor * src, ggml_tensor * dst) {
    if (ggml_nbytes(src) != ggml_nbytes(dst)) GGML_ABORT("ggml_backend_tensor_copy: '%s' and '%s' differ in size", src->name, dst->name);
    check_range("ggml_backend_tensor_copy", src, 0, ggml_nbytes(src));
    check_range("ggml_backend_tensor_copy", dst, 0, ggml_nbytes(dst));
    if (src != dst) std::memmove(dst->data, src->data, ggml_nbytes(src));
}

// ---- backends ----
ggml_backend_t ggml_backend_cpu_init(void) { return new (std::nothrow) ggml_backend(); }
bool ggml_backend_is_cpu(ggml_backend_t backend) { return backend != nullptr; }
void ggml_backend_cpu_set_n_threads(ggml_backend_t b, int n_threads) {
    if (n_threads < 1 || n_threads > GGML_MAX_N_THREADS) GGML_ABORT("ggml_backend_cpu_set_n_threads: %d threads (1..%d)", n_threads, GGML_MAX_N_THREADS);
    if (b) b->n_threads = n_threads;
}
void ggml_backend_cpu_set_threadpool(ggml_backend_t b, ggml_threadpool_t tp) {
    if (b) b->threadpool = tp;
}
void ggml_backend_cpu_set_abort_callback(ggml_backend_t b, ggml_abort_callback cb, void * data) {
    if (!b) return;
    b->abort_callback = cb;
    b->abort_callback_data = data;
}
void ggml_cpu_init(void) {}

const char * ggml_backend_name(ggml_backend_t b) { return b ? "CPU" : "NULL"; }
void ggml_backend_free(ggml_backend_t b) { delete b; }
ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t) { return &g_cpu_buft; }
ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t, size_t size) { return ggml_backend_buft_alloc_buffer(&g_cpu_buft, size); }
size_t ggml_backend_get_alignment(ggml_backend_t) { return ALIGN; }
size_t ggml_backend_get_max_size(ggml_backend_t) { return SIZE_MAX; }
void ggml_backend_synchronize(ggml_backend_t) {}

void ggml_backend_cpu_set_use_ref(ggml_backend_t b, bool use_ref) {
    if (b) b->use_ref = use_ref;
}

// The kernel path and schedule are process-wide: a reference compute sets both for its
// duration, one at a time, and restores them.
static std::mutex g_ref_mutex;
struct reference_mode {
    std::lock_guard<std::mutex> lock{g_ref_mutex};
    ggml_cpu_features path = ggml_cpu_get_features();
    ggml_sched_mode sched = ggml_cpu_get_sched_mode();
    reference_mode() {
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_SCALAR);
        ggml_cpu_set_sched_mode(GGML_SCHED_BARRIER);
    }
    ~reference_mode() {
        ggml_cpu_set_features_limit(path);
        ggml_cpu_set_sched_mode(sched);
    }
};

static enum ggml_status compute_now(ggml_backend_t b, ggml_cgraph * g) {
    ggml_cplan plan = ggml_graph_plan(g, b->n_threads, b->threadpool);
    if (b->work.size() < plan.work_size) b->work.resize(plan.work_size);
    plan.work_data = b->work.data();
    plan.abort_callback = b->abort_callback;
    plan.abort_callback_data = b->abort_callback_data;
    return ggml_graph_compute(g, &plan);
}
enum ggml_status ggml_backend_graph_compute(ggml_backend_t b, ggml_cgraph * g) {
    if (!b || !g) return GGML_STATUS_FAILED;
    if (!b->use_ref) return compute_now(b, g);
    reference_mode ref;
    return compute_now(b, g);
}
enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t b, ggml_cgraph * g) { return ggml_backend_graph_compute(b, g); }
bool ggml_backend_supports_op(ggml_backend_t, const ggml_tensor * op) { return ggml_cpu_supports_op(op); }
bool ggml_backend_supports_buft(ggml_backend_t, ggml_backend_buffer_type_t buft) { return buft == &g_cpu_buft; }

// ---- devices ----
size_t ggml_backend_dev_count(void) { return 1; }
ggml_backend_dev_t ggml_backend_dev_get(size_t i) { return i == 0 ? &g_cpu_device : nullptr; }
ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type) {
    return type == GGML_BACKEND_DEVICE_TYPE_CPU ? &g_cpu_device : nullptr;
}
const char * ggml_backend_dev_name(ggml_backend_dev_t d) { return d ? d->name : "NULL"; }
const char * ggml_backend_dev_description(ggml_backend_dev_t d) { return d ? d->description : "NULL"; }
enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_CPU; }
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t d, const char *) { return d ? ggml_backend_cpu_init() : nullptr; }
ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t) { return &g_cpu_buft; }
ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t b) { return b ? &g_cpu_device : nullptr; }
ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params) {
    return ggml_backend_dev_init(ggml_backend_dev_by_type(type), params);
}
ggml_backend_t ggml_backend_init_best(void) { return ggml_backend_cpu_init(); }
void ggml_backend_load_all(void) {}
void ggml_backend_load_all_from_path(const char *) {}

// ---- scheduler ----
ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends, size_t,
                                            bool, bool) {
    if (!backends || n_backends < 1 || !backends[0]) {
        GGML_LOG_ERROR("ggml_backend_sched_new: no backend\n");
        return nullptr;
    }
    return new (std::nothrow) ggml_backend_sched{backends[0], ggml_gallocr_new(bufts ? bufts[0] : nullptr)};
}
void ggml_backend_sched_free(ggml_backend_sched_t s) {
    if (!s) return;
    ggml_gallocr_free(s->galloc);
    delete s;
}
bool ggml_backend_sched_reserve(ggml_backend_sched_t s, ggml_cgraph * g) { return s && ggml_gallocr_reserve(s->galloc, g); }
bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t s, ggml_cgraph * g) { return s && ggml_gallocr_alloc_graph(s->galloc, g); }
enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t s, ggml_cgraph * g) {
    if (!s || !ggml_gallocr_alloc_graph(s->galloc, g)) return GGML_STATUS_ALLOC_FAILED;
    return ggml_backend_graph_compute(s->backend, g);
}
enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t s, ggml_cgraph * g) { return ggml_backend_sched_graph_compute(s, g); }
void ggml_backend_sched_synchronize(ggml_backend_sched_t) {}
void ggml_backend_sched_reset(ggml_backend_sched_t) {}
int ggml_backend_sched_get_n_backends(ggml_backend_sched_t s) { return s ? 1 : 0; }
ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t s, int i) { return s && i == 0 ? s->backend : nullptr; }
size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t s, ggml_backend_t) { return s ? ggml_gallocr_get_buffer_size(s->galloc, 0) : 0; }

// ---- whole contexts ----
static bool needs_memory(const ggml_tensor * t) { return t->data == nullptr && t->view_src == nullptr; }

size_t ggml_backend_alloc_ctx_tensors_from_buft_size(ggml_context * ctx, ggml_backend_buffer_type_t) {
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (needs_memory(t)) total += GGML_PAD(ggml_nbytes(t), ALIGN);
    }
    return total;
}
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t total = ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, buft);
    if (total == 0) return nullptr; // as ggml: nothing to allocate
    ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(buft, total);
    if (!b) return nullptr;
    ggml_tallocr ta = ggml_tallocr_new(b);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (needs_memory(t)) ggml_tallocr_alloc(&ta, t);
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src && !t->data) ggml_backend_view_init(t);
    }
    return b;
}
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, &g_cpu_buft);
}
