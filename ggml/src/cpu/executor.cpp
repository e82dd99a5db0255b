// CPU executor: graph plans, the persistent thread pool, and two schedulers.
//
// Both schedulers run the graph's schedule (schedule.cpp): its nodes in execution order,
// each waiting for its predecessors there (data and control edges looked through views,
// and every pair of conflicting accesses in that order).
//
// DAG scheduler (default). Each node's pending counter starts at
// its predecessor count; the thread that finishes a node decrements its successors and
// makes those reaching zero ready. A ready node is published as n_tasks tokens
// (node, ith) in a shared lock-free queue; any thread takes any token, so independent
// nodes run at the same time and a big node still runs its tasks in parallel. The last
// task of a phase to finish publishes the next phase, so phases stay ordered. A thread
// that readies a single-task successor runs it next itself, bypassing the queue.
//
// Scratch. A node's tasks share ggml_op_work_size(node, n_tasks) bytes. The plan's work
// buffer holds n_slots = min(n_threads, nodes needing scratch) slots of the largest
// size; a node needing scratch takes a free slot when it becomes ready (or waits in a
// FIFO until one frees) and returns it when it finishes. Nodes without scratch never
// wait. Every node's tasks run with the same n_tasks as in sequential execution, so
// results are bit-identical. A smaller buffer (down to one slot) still works.
//
// BARRIER scheduler: every node in execution order split over all threads, with a barrier
// after every phase (ggml's classic schedule). One thread always runs the nodes in
// execution order.
//
// Abort: the callback runs after each finished node (DAG: on the finishing thread,
// calls serialized; BARRIER: thread 0); nothing new starts once it returned true.
//
// Pool. Workers are created once (grown on demand) and reused; a compute wakes them
// through a generation counter. Idle workers spin briefly (back-to-back computes stay
// cheap), then block on a condition variable. Computes on one pool are serialized; a
// compute started from inside a kernel runs inline on the calling thread.
#include "cpu-impl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax() {}
#endif

namespace {

constexpr size_t CACHE_LINE = 64;
constexpr int SPIN_BEFORE_YIELD = 256;              // pause loops before yielding the core
constexpr auto WORKER_SPIN_TIME = std::chrono::microseconds(500); // then block

// KVG_SCHED=barrier|dag picks the initial mode (to compare schedules in any program)
int initial_sched_mode() {
    const char * e = std::getenv("KVG_SCHED");
    if (!e || !*e || !std::strcmp(e, "dag")) return GGML_SCHED_DAG;
    if (!std::strcmp(e, "barrier")) return GGML_SCHED_BARRIER;
    GGML_LOG_WARN("KVG_SCHED=%s not understood (dag or barrier); using dag\n", e);
    return GGML_SCHED_DAG;
}
std::atomic<int> g_sched_mode{initial_sched_mode()};

// Set while a thread runs graph work: a compute started from inside a kernel (custom
// op) runs inline on that thread instead of waiting for the pool it is part of.
thread_local bool t_in_compute = false;

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Waits until pred() holds: spins, then yields the core.
template <typename F> void spin_until(F pred) {
    for (int k = 0; !pred(); ++k) {
        if (k < SPIN_BEFORE_YIELD) cpu_relax();
        else std::this_thread::yield();
    }
}

struct barrier_t {
    alignas(CACHE_LINE) std::atomic<int> count{0};
    alignas(CACHE_LINE) std::atomic<int> gen{0};

    void wait(int n) {
        if (n == 1) return;
        const int g = gen.load(std::memory_order_relaxed);
        if (count.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
            count.store(0, std::memory_order_relaxed);
            gen.fetch_add(1, std::memory_order_release);
        } else {
            spin_until([&] { return gen.load(std::memory_order_acquire) != g; });
        }
    }
};

// Per-node run-time state of the DAG scheduler.
struct node_rt {
    std::atomic<int> pending{0}; // predecessors not finished yet
    std::atomic<int> done{0};    // tasks of the current phase finished
    int n_tasks = 0;
    int n_phases = 1;
    int phase = 0;               // written by the last finisher of the previous phase only
    int slot = -1;               // scratch slot, -1 if none
    size_t wsize = 0;
};

// One published task. A cell is valid when its epoch equals the compute's epoch, so the
// queue never needs clearing between computes.
struct token_cell {
    std::atomic<uint32_t> epoch{0};
    int32_t node = 0;
    int32_t ith = 0;
};

} // namespace

// State of one compute (DAG or barrier), reused across computes of a pool.
struct exec_state {
    ggml_cgraph * graph = nullptr;
    const ggml_graph_sched * sched = nullptr;
    int n_threads = 1;
    bool dag = true;
    ggml_abort_callback abort_cb = nullptr;
    void * abort_data = nullptr;
    std::atomic<bool> aborted{false};
    std::mutex abort_mutex;

    // scratch
    uint8_t * wbase = nullptr;
    size_t wstride = 0;
    int n_slots = 0;
    size_t max_ws = 0; // largest node scratch (filled by dag_setup)

    // barrier mode
    barrier_t barrier;
    std::atomic<int> abort_node{INT32_MAX}; // node after which all threads stop

    // DAG mode
    std::unique_ptr<node_rt[]> nodes;
    int nodes_cap = 0;
    std::vector<int> roots;          // nodes without predecessors

    std::unique_ptr<token_cell[]> queue;
    size_t queue_cap = 0;
    uint32_t epoch = 0;
    alignas(CACHE_LINE) std::atomic<size_t> q_head{0};
    alignas(CACHE_LINE) std::atomic<size_t> q_tail{0};
    alignas(CACHE_LINE) std::atomic<int> nodes_left{0};
    // set when nodes_left reaches zero; idle threads poll this line, not nodes_left,
    // so a thread running a chain of nodes keeps the counter in its own cache
    alignas(CACHE_LINE) std::atomic<bool> finished{false};

    std::mutex slot_mutex;           // only nodes that need scratch take it
    std::vector<int> free_slots;
    std::vector<int> slot_waiting;   // FIFO of ready nodes waiting for a slot
    size_t slot_waiting_head = 0;
};

struct ggml_threadpool {
    std::mutex compute_mutex; // one compute at a time per pool
    std::mutex mutex;         // guards sleeping workers
    std::condition_variable cv;
    std::vector<std::thread> workers;
    // generation << 16 | n_threads of the current job, published in one word so that a
    // worker never pairs one job's generation with another job's thread count
    std::atomic<uint64_t> ticket{0};
    std::atomic<bool> stop{false};
    // Joining a job: (generation & 0xffffffff) << 32 | CLOSED | workers joined. A worker
    // touches the job state only after joining; a DAG job is closed when its graph is done,
    // so the caller never waits for workers that were still asleep.
    alignas(CACHE_LINE) std::atomic<uint64_t> join_word{0};
    alignas(CACHE_LINE) std::atomic<int> n_left{0}; // joined workers that finished
    exec_state state;

    ~ggml_threadpool();
    int grow(int n_workers);
    void worker_main(int ith, uint64_t seen);
    void run(exec_state * st); // caller participates as thread 0

    static constexpr uint64_t CLOSED = 1u << 31;
    bool join(uint64_t gen) {
        uint64_t w = join_word.load(std::memory_order_acquire);
        for (;;) {
            if ((w >> 32) != (gen & 0xffffffffu) || (w & CLOSED)) return false;
            if (join_word.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
        }
    }
};

static void run_thread(exec_state * st, int ith);

// ---- pool -------------------------------------------------------------------------------

void ggml_threadpool::worker_main(int ith, uint64_t seen) {
    t_in_compute = true; // pool threads never wait on their own pool
    auto changed = [&] { return (ticket.load(std::memory_order_acquire) >> 16) != seen || stop.load(std::memory_order_acquire); };
    for (;;) {
        // spin briefly so back-to-back computes need no wake-up, then sleep
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; !changed(); ++k) {
            if (k < SPIN_BEFORE_YIELD) {
                cpu_relax();
            } else {
                std::this_thread::yield();
                if ((k & 15) == 0 && std::chrono::steady_clock::now() - t0 > WORKER_SPIN_TIME) {
                    std::unique_lock<std::mutex> lk(mutex);
                    cv.wait(lk, changed);
                }
            }
        }
        if (stop.load(std::memory_order_acquire)) return;
        const uint64_t t = ticket.load(std::memory_order_acquire);
        seen = t >> 16;
        if (ith < (int) (t & 0xffff) && join(seen)) {
            run_thread(&state, ith);
            n_left.fetch_add(1, std::memory_order_acq_rel);
        }
    }
}

// Returns how many workers the pool has (fewer than asked if the OS refuses threads).
int ggml_threadpool::grow(int n_workers) {
    n_workers = std::min(n_workers, GGML_MAX_N_THREADS - 1);
    while ((int) workers.size() < n_workers) {
        const int ith = (int) workers.size() + 1;
        const uint64_t seen = ticket.load(std::memory_order_acquire) >> 16;
        try {
            workers.emplace_back([this, ith, seen] { worker_main(ith, seen); });
        } catch (const std::exception & e) {
            GGML_LOG_WARN("ggml_threadpool: could not start worker %d (%s); using %d threads\n", ith, e.what(), ith);
            break;
        }
    }
    return (int) workers.size();
}

void ggml_threadpool::run(exec_state * st) {
    GGML_ASSERT(st == &state && (int) workers.size() >= st->n_threads - 1);
    n_left.store(0, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lk(mutex);
        const uint64_t gen = (ticket.load(std::memory_order_relaxed) >> 16) + 1;
        join_word.store((gen & 0xffffffffu) << 32, std::memory_order_relaxed);
        ticket.store(gen << 16 | (uint64_t) st->n_threads, std::memory_order_release);
    }
    cv.notify_all();
    run_thread(st, 0);
    // The barrier schedule needs every thread (each runs its own task index), so it
    // waits for all of them; a finished DAG needs none that have not joined yet.
    int joined = st->n_threads - 1;
    if (st->dag) joined = (int) (join_word.fetch_or(CLOSED, std::memory_order_acq_rel) & (CLOSED - 1));
    // joined workers may still be leaving: the state must outlive them
    spin_until([&] { return n_left.load(std::memory_order_acquire) == joined; });
}

ggml_threadpool::~ggml_threadpool() {
    {
        std::lock_guard<std::mutex> lk(mutex);
        stop.store(true, std::memory_order_release);
    }
    cv.notify_all();
    for (auto & w : workers) w.join();
}

static ggml_threadpool & default_pool() {
    static ggml_threadpool pool; // joined at exit
    return pool;
}

// ---- DAG scheduler -------------------------------------------------------------------------

// The callback runs between nodes on whichever thread finished one; the mutex keeps
// calls from overlapping so callbacks need not be thread-safe.
static bool check_abort(exec_state * st) {
    if (st->aborted.load(std::memory_order_acquire)) return true;
    if (!st->abort_cb) return false;
    std::lock_guard<std::mutex> lk(st->abort_mutex);
    if (!st->aborted.load(std::memory_order_relaxed) && st->abort_cb(st->abort_data)) {
        st->aborted.store(true, std::memory_order_release);
    }
    return st->aborted.load(std::memory_order_relaxed);
}

static void push_tokens(exec_state * st, int node) {
    const int n = st->nodes[node].n_tasks;
    const size_t pos = st->q_tail.fetch_add((size_t) n, std::memory_order_relaxed);
    GGML_ASSERT(pos + n <= st->queue_cap);
    for (int i = 0; i < n; ++i) {
        token_cell & c = st->queue[pos + i];
        c.node = node;
        c.ith = i;
        c.epoch.store(st->epoch, std::memory_order_release);
    }
}

// false: nothing published yet (queue empty or the next cell is being written)
static bool pop_token(exec_state * st, int * node, int * ith) {
    size_t h = st->q_head.load(std::memory_order_relaxed);
    for (;;) {
        if (h >= st->q_tail.load(std::memory_order_acquire)) return false;
        const token_cell & c = st->queue[h];
        if (c.epoch.load(std::memory_order_acquire) != st->epoch) return false;
        const int n = c.node, i = c.ith;
        if (st->q_head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
            *node = n;
            *ith = i;
            return true;
        }
    }
}

static void node_done(exec_state * st) {
    if (st->nodes_left.fetch_sub(1, std::memory_order_acq_rel) == 1) st->finished.store(true, std::memory_order_release);
}

// A node whose predecessors all finished: publish it, complete it if it computes
// nothing, or park it until a scratch slot frees. With `keep`, the first single-task
// node without scratch is handed back for the calling thread to run next, skipping the
// queue (a chain then runs on one thread with no queue traffic). Uses an explicit stack
// because completing a node can make further nodes ready.
static void make_ready(exec_state * st, int first, int * keep) {
    int stack_small[64];
    std::vector<int> stack_big;
    int n_small = 0;
    auto push = [&](int v) { if (n_small < 64) stack_small[n_small++] = v; else stack_big.push_back(v); };
    auto pop = [&](int * v) {
        if (!stack_big.empty()) { *v = stack_big.back(); stack_big.pop_back(); return true; }
        if (n_small > 0) { *v = stack_small[--n_small]; return true; }
        return false;
    };
    push(first);
    int i;
    while (pop(&i)) {
        node_rt & nr = st->nodes[i];
        if (nr.n_tasks > 0) {
            if (nr.wsize > 0) {
                std::unique_lock<std::mutex> lk(st->slot_mutex);
                if (st->free_slots.empty()) {
                    st->slot_waiting.push_back(i);
                    continue;
                }
                nr.slot = st->free_slots.back();
                st->free_slots.pop_back();
            } else if (keep && *keep < 0 && nr.n_tasks == 1 && nr.n_phases == 1) {
                *keep = i;
                continue;
            }
            push_tokens(st, i);
            continue;
        }
        // nothing to compute (view, empty tensor): completes right away
        node_done(st);
        for (int k = st->sched->succ_off[i]; k < st->sched->succ_off[i + 1]; ++k) {
            const int s = st->sched->succ[k];
            if (st->nodes[s].pending.fetch_sub(1, std::memory_order_acq_rel) == 1) push(s);
        }
    }
}

// Returns a ready node for the calling thread to run next, or -1.
static int finish_node(exec_state * st, int i) {
    if (check_abort(st)) return -1; // publish nothing more; every thread leaves
    node_rt & nr = st->nodes[i];
    if (nr.slot >= 0) {
        // hand the slot to the oldest waiting node, or free it
        int next = -1;
        {
            std::lock_guard<std::mutex> lk(st->slot_mutex);
            if (st->slot_waiting_head < st->slot_waiting.size()) next = st->slot_waiting[st->slot_waiting_head++];
            else st->free_slots.push_back(nr.slot);
        }
        if (next >= 0) {
            st->nodes[next].slot = nr.slot;
            push_tokens(st, next);
        }
        nr.slot = -1;
    }
    int keep = -1;
    for (int k = st->sched->succ_off[i]; k < st->sched->succ_off[i + 1]; ++k) {
        const int s = st->sched->succ[k];
        if (st->nodes[s].pending.fetch_sub(1, std::memory_order_acq_rel) == 1) make_ready(st, s, &keep);
    }
    node_done(st);
    return keep;
}

// Runs one task; returns a node to run next on this thread (single task), or -1.
static int run_token(exec_state * st, int i, int ith) {
    node_rt & nr = st->nodes[i];
    ggml_compute_params params;
    params.ith = ith;
    params.nth = nr.n_tasks;
    params.phase = nr.phase;
    params.wdata = nr.slot >= 0 ? st->wbase + (size_t) nr.slot * st->wstride : nullptr;
    params.wsize = nr.slot >= 0 ? nr.wsize : 0;
    ggml_compute_forward(&params, st->sched->exec[i]);
    if (nr.n_tasks > 1 && nr.done.fetch_add(1, std::memory_order_acq_rel) + 1 != nr.n_tasks) return -1;
    // this thread finished the phase last
    nr.done.store(0, std::memory_order_relaxed);
    if (++nr.phase < nr.n_phases) {
        push_tokens(st, i);
        return -1;
    }
    return finish_node(st, i);
}

static void run_dag_thread(exec_state * st) {
    int idle = 0;
    for (;;) {
        if (st->aborted.load(std::memory_order_relaxed)) return;
        int node, task;
        if (pop_token(st, &node, &task)) {
            int next = run_token(st, node, task);
            while (next >= 0 && !st->aborted.load(std::memory_order_relaxed)) next = run_token(st, next, 0);
            idle = 0;
            continue;
        }
        if (st->finished.load(std::memory_order_acquire)) return;
        if (++idle < SPIN_BEFORE_YIELD) cpu_relax();
        else std::this_thread::yield();
    }
}

// Resets the per-node state of the DAG scheduler for one compute.
static void dag_setup(exec_state * st) {
    const ggml_graph_sched * sc = st->sched;
    const int n = (int) sc->exec.size();
    if (st->nodes_cap < n) {
        st->nodes.reset(new node_rt[n]);
        st->nodes_cap = n;
    }
    st->roots.clear();
    size_t total_tokens = 0;
    st->max_ws = 0;
    for (int i = 0; i < n; ++i) {
        ggml_tensor * t = sc->exec[i];
        node_rt & nr = st->nodes[i];
        const int n_preds = sc->pred_off[i + 1] - sc->pred_off[i];
        nr.pending.store(n_preds, std::memory_order_relaxed);
        if (n_preds == 0) st->roots.push_back(i);
        nr.done.store(0, std::memory_order_relaxed);
        nr.n_tasks = ggml_op_n_tasks(t, st->n_threads);
        nr.n_phases = nr.n_tasks > 0 ? ggml_op_n_phases(t) : 1;
        nr.phase = 0;
        nr.slot = -1;
        nr.wsize = nr.n_tasks > 0 ? ggml_op_work_size(t, nr.n_tasks) : 0;
        st->max_ws = std::max(st->max_ws, nr.wsize);
        total_tokens += (size_t) nr.n_tasks * nr.n_phases;
    }
    if (st->queue_cap < total_tokens) {
        st->queue_cap = std::max<size_t>(total_tokens, 2 * st->queue_cap);
        st->queue.reset(new token_cell[st->queue_cap]);
        st->epoch = 0;
    }
    if (++st->epoch == 0) { // wrapped: old cells could look valid
        for (size_t k = 0; k < st->queue_cap; ++k) st->queue[k].epoch.store(0, std::memory_order_relaxed);
        st->epoch = 1;
    }
    st->q_head.store(0, std::memory_order_relaxed);
    st->q_tail.store(0, std::memory_order_relaxed);
    st->nodes_left.store(n, std::memory_order_relaxed);
    st->finished.store(n == 0, std::memory_order_relaxed);
    st->slot_waiting.clear();
    st->slot_waiting_head = 0;
}

// Called by thread 0 before the workers start: publishes the nodes without predecessors
// (from a list: completing a 0-task root already readies its successors).
static void dag_seed(exec_state * st) {
    for (int i : st->roots) make_ready(st, i, nullptr);
}

// ---- barrier scheduler ------------------------------------------------------------------------

static void run_barrier_thread(exec_state * st, int ith) {
    const std::vector<ggml_tensor *> & exec = st->sched->exec;
    const int nt_all = st->n_threads;
    for (int i = 0; i < (int) exec.size(); ++i) {
        ggml_tensor * node = exec[i];
        const int n_tasks = ggml_op_n_tasks(node, nt_all);
        if (n_tasks == 0) continue;
        const int n_phases = ggml_op_n_phases(node);
        ggml_compute_params params;
        params.ith = ith;
        params.nth = n_tasks;
        params.wsize = ggml_op_work_size(node, n_tasks);
        params.wdata = params.wsize > 0 ? st->wbase : nullptr;
        for (int p = 0; p < n_phases; ++p) {
            params.phase = p;
            if (ith < n_tasks) ggml_compute_forward(&params, node);
            if (p + 1 < n_phases) st->barrier.wait(nt_all);
        }
        // the decision names the node, so a thread still reading the previous node's
        // decision cannot leave one barrier early
        if (ith == 0 && check_abort(st)) st->abort_node.store(i, std::memory_order_relaxed);
        st->barrier.wait(nt_all);
        if (st->abort_node.load(std::memory_order_relaxed) <= i) return;
    }
}

static void run_thread(exec_state * st, int ith) {
    if (st->dag) run_dag_thread(st);
    else run_barrier_thread(st, ith);
}

// ---- plan and compute -------------------------------------------------------------------------

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

    const bool nested = t_in_compute;
    if (nested) n_threads = 1; // inside a kernel of another compute: run inline

    exec_state local_state;
    ggml_threadpool * pool = nullptr;
    exec_state * st = &local_state;
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

    // scratch slots inside the caller's buffer
    const size_t max_ws = st->dag ? st->max_ws : max_work_size(cgraph, n_threads, nullptr);
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
        cplan.work_data = (uint8_t *) ctx->mem_buffer + obj->offs;
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
