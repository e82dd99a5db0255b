// Graph plans and computes: ggml_graph_plan (threads, work-buffer size), ggml_graph_compute
// (picks the scheduler and the pool, carves the work buffer into scratch slots, runs),
// ggml_graph_compute_with_ctx, the threadpool API and the scheduler mode.
#include "exec-impl.h"

#include <memory>

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace ggml_exec;

namespace {

// KVG_SCHED=barrier|dag picks the initial mode (to compare schedules in any program)
int initial_sched_mode() {
    const char * e = std::getenv("KVG_SCHED");
    if (!e || !*e || !std::strcmp(e, "dag")) return GGML_SCHED_DAG;
    if (!std::strcmp(e, "barrier")) return GGML_SCHED_BARRIER;
    GGML_LOG_WARN("KVG_SCHED=%s not understood (dag or barrier); using dag\n", e);
    return GGML_SCHED_DAG;
}
std::atomic<int> g_sched_mode{initial_sched_mode()};

} // namespace

static int clamp_threads(int n_threads) {
    if (n_threads <= 0) n_threads = GGML_DEFAULT_N_THREADS;
    return std::min(n_threads, GGML_MAX_N_THREADS);
}

// Largest scratch any node needs and how many nodes need any.
static size_t max_work_size(const ggml_cgraph * g, int n_threads, int * n_needing) {
    size_t max_ws = 0;
    int count = 0;
    for (int i = 0; i < g->n_nodes; ++i) {
        const int n_tasks = ggml_op_n_tasks(g->nodes[i], n_threads);
        if (n_tasks == 0) continue;
        const size_t ws = ggml_op_work_size(g->nodes[i], n_tasks);
        if (ws > 0) ++count;
        max_ws = std::max(max_ws, ws);
    }
    if (n_needing) *n_needing = count;
    return max_ws;
}

// Carves the caller's work buffer into cache-line aligned scratch slots (at most one per
// thread, at least one when any node needs scratch).
static ggml_status place_scratch(exec_state * st, const ggml_cplan * cplan) {
    const int n_threads = st->n_threads;
    const size_t max_ws = st->max_ws; // from dag_setup or barrier_setup
    const size_t stride = align_up(max_ws, CACHE_LINE);
    uint8_t * wbase = nullptr;
    int n_slots = 0;
    if (max_ws > 0) {
        if (cplan->work_data == nullptr) {
            GGML_LOG_ERROR("ggml_graph_compute: the graph needs %zu bytes of work buffer but cplan->work_data is NULL "
                            "(allocate cplan->work_size bytes from ggml_graph_plan)\n", max_ws);
            return GGML_STATUS_ALLOC_FAILED;
        }
        const uintptr_t p = (uintptr_t) cplan->work_data;
        const size_t skip = align_up(p, CACHE_LINE) - p;
        const size_t usable = cplan->work_size > skip ? cplan->work_size - skip : 0;
        n_slots = (int) std::min<size_t>((size_t) n_threads, usable / stride);
        if (n_slots >= 1) {
            wbase = cplan->work_data + skip;
        } else if (cplan->work_size >= max_ws) {
            wbase = cplan->work_data; // unaligned but large enough: one slot
            n_slots = 1;
        } else {
            GGML_LOG_ERROR("ggml_graph_compute: work buffer too small: %zu bytes, a node needs %zu "
                            "(use ggml_graph_plan's work_size)\n", cplan->work_size, max_ws);
            return GGML_STATUS_ALLOC_FAILED;
        }
    }
    st->wbase = wbase;
    st->wstride = stride;
    st->n_slots = n_slots;
    st->free_slots.clear();
    for (int k = n_slots - 1; k >= 0; --k) st->free_slots.push_back(k);
    return GGML_STATUS_SUCCESS;
}

extern "C" {

ggml_cplan ggml_graph_plan(const ggml_cgraph * cgraph, int n_threads, ggml_threadpool * threadpool) {
    GGML_ASSERT(cgraph != nullptr);
    ggml_cplan cplan;
    std::memset(&cplan, 0, sizeof(cplan));
    cplan.n_threads = clamp_threads(n_threads);
    cplan.threadpool = threadpool;
    int n_needing = 0;
    const size_t max_ws = max_work_size(cgraph, cplan.n_threads, &n_needing);
    if (max_ws > 0) {
        const int n_slots = std::max(1, std::min(cplan.n_threads, n_needing));
        // slack so the slots can start on a cache line whatever the buffer's alignment
        cplan.work_size = align_up(max_ws, CACHE_LINE) * n_slots + CACHE_LINE;
    }
    return cplan;
}

enum ggml_status ggml_graph_compute(ggml_cgraph * cgraph, ggml_cplan * cplan) {
    GGML_ASSERT(cgraph != nullptr && cplan != nullptr);
    if (cplan->n_threads <= 0 || cplan->n_threads > GGML_MAX_N_THREADS) {
        GGML_LOG_ERROR("ggml_graph_compute: n_threads = %d is out of range [1, %d]\n", cplan->n_threads,
                GGML_MAX_N_THREADS);
        return GGML_STATUS_FAILED;
    }
    int n_threads = cplan->n_threads;
    if (cgraph->n_nodes == 0) return GGML_STATUS_SUCCESS;
    const ggml_graph_sched * sched = ggml_graph_get_sched(cgraph);
    if (!sched->ok) return GGML_STATUS_FAILED; // the message names the cycle
    for (int i = 0; i < cgraph->n_nodes; ++i) { // before any node runs: all or nothing
        const char * why = ggml_cpu_op_refusal(cgraph->nodes[i]);
        if (why) {
            GGML_LOG_ERROR("ggml_graph_compute: node %d '%s' (%s): %s\n", i, cgraph->nodes[i]->name,
                           ggml_op_desc(cgraph->nodes[i]), why);
            return GGML_STATUS_FAILED;
        }
    }

    const bool nested = t_in_compute;
    if (nested) n_threads = 1; // inside a kernel of another compute: run inline

    // One thread: this thread's state, whose vectors keep their capacity (a warm decode
    // allocates nothing); a compute nested in a kernel of another needs a state of its own.
    thread_local exec_state thread_state;
    std::unique_ptr<exec_state> nested_state;
    if (nested) nested_state.reset(new exec_state());
    ggml_threadpool * pool = nullptr;
    exec_state * st = nested ? nested_state.get() : &thread_state;
    std::unique_lock<std::mutex> pool_lock;
    if (n_threads > 1) {
        pool = cplan->threadpool ? cplan->threadpool : &default_pool();
        pool_lock = std::unique_lock<std::mutex>(pool->compute_mutex);
        st = &pool->state;
        n_threads = std::min(n_threads, pool->grow(n_threads - 1) + 1);
    }
    st->graph = cgraph;
    st->sched = sched;
    st->n_threads = n_threads;
    st->dag = n_threads > 1 && ggml_cpu_get_sched_mode() == GGML_SCHED_DAG;
    if (st->dag) dag_setup(st);
    else barrier_setup(st);

    const ggml_status placed = place_scratch(st, cplan);
    if (placed != GGML_STATUS_SUCCESS) return placed;

    st->abort_cb = cplan->abort_callback;
    st->abort_data = cplan->abort_callback_data;
    st->aborted.store(false, std::memory_order_relaxed);
    st->abort_node.store(INT32_MAX, std::memory_order_relaxed);

    t_in_compute = true;
    if (!pool) {
        run_barrier_thread(st, 0); // one thread: graph order
    } else {
        if (st->dag) dag_seed(st);
        pool->run(st);
    }
    t_in_compute = nested;

    return st->aborted.load(std::memory_order_relaxed) ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

enum ggml_status ggml_graph_compute_with_ctx(ggml_context * ctx, ggml_cgraph * cgraph, int n_threads) {
    GGML_ASSERT(ctx != nullptr && cgraph != nullptr);
    ggml_cplan cplan = ggml_graph_plan(cgraph, n_threads, nullptr);
    if (cplan.work_size > 0) {
        ggml_object * obj = ggml_new_object(ctx, GGML_OBJECT_TYPE_WORK_BUFFER, cplan.work_size);
        cplan.work_data = (uint8_t *) ggml_object_payload(ctx, obj);
    }
    return ggml_graph_compute(cgraph, &cplan);
}

ggml_threadpool_params ggml_threadpool_params_default(int n_threads) {
    ggml_threadpool_params p = {};
    p.n_threads = clamp_threads(n_threads);
    p.prio = GGML_SCHED_PRIO_NORMAL;
    p.poll = 50; // ggml's default
    return p;
}

ggml_threadpool * ggml_threadpool_new(ggml_threadpool_params * params) {
    const int n_threads = clamp_threads(params ? params->n_threads : 0);
    ggml_threadpool * pool = new ggml_threadpool();
    pool->grow(n_threads - 1);
    return pool;
}

void ggml_threadpool_free(ggml_threadpool * threadpool) {
    if (!threadpool) return;
    { std::lock_guard<std::mutex> lk(threadpool->compute_mutex); } // let a running compute end
    delete threadpool;
}

void ggml_cpu_set_sched_mode(enum ggml_sched_mode mode) {
    if (mode != GGML_SCHED_DAG && mode != GGML_SCHED_BARRIER) {
        GGML_LOG_WARN("ggml_cpu_set_sched_mode: unknown mode %d ignored\n", (int) mode);
        return;
    }
    g_sched_mode.store(mode, std::memory_order_relaxed);
}

enum ggml_sched_mode ggml_cpu_get_sched_mode(void) {
    return (enum ggml_sched_mode) g_sched_mode.load(std::memory_order_relaxed);
}

} // extern "C"
