// The executor's private interface: one compute's state, the thread pool that runs it, and
// the entry points of the two schedulers (threadpool.cpp, sched-dag.cpp, sched-barrier.cpp,
// plan.cpp).
//
// Both schedulers run the graph's schedule (schedule.cpp): its nodes in execution order,
// each waiting for its predecessors there (data and control edges looked through views,
// and every pair of conflicting accesses in that order).
//
// Abort: the callback runs after each finished node (DAG: on the finishing thread,
// calls serialized; BARRIER: thread 0); nothing new starts once it returned true.
#pragma once

#include "cpu-impl.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ggml_exec {

#if defined(__x86_64__) || defined(__i386__)
inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
inline void cpu_relax() {}
#endif

constexpr size_t CACHE_LINE = 64;
constexpr int SPIN_BEFORE_YIELD = 256;              // pause loops before yielding the core
constexpr auto WORKER_SPIN_TIME = std::chrono::microseconds(500); // then block

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Waits until pred() holds: spins, then yields the core.
template <typename F> void spin_until(F pred) {
    for (int k = 0; !pred(); ++k) {
        if (k < SPIN_BEFORE_YIELD) cpu_relax();
        else std::this_thread::yield();
    }
}

// Set while a thread runs graph work: a compute started from inside a kernel (custom
// op) runs inline on that thread instead of waiting for the pool it is part of.
extern thread_local bool t_in_compute;

// All threads of the barrier scheduler meet here after every phase (sched-barrier.cpp).
struct barrier_t {
    alignas(CACHE_LINE) std::atomic<int> count{0};
    alignas(CACHE_LINE) std::atomic<int> gen{0};

    void wait(int n);
};

// Per-node run-time state of the DAG scheduler.
struct node_rt {
    std::atomic<int> pending{0}; // predecessors not finished yet
    std::atomic<int> done{0};    // tasks of the current phase finished
    std::atomic<int> claim{0};   // the current phase's work counter (ggml_compute_params::claim)
    int phase = 0;               // written by the last finisher of the previous phase only
    int slot = -1;               // scratch slot, -1 if none
};

// One published task. A cell is valid when its epoch equals the compute's epoch, so the
// queue never needs clearing between computes.
struct token_cell {
    std::atomic<uint32_t> epoch{0};
    int32_t node = 0;
    int32_t ith = 0;
};

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

    // both modes: each exec node's tasks, phases and scratch (ggml_exec_facts, set by the setup)
    const ggml_graph_sched::node_facts * facts = nullptr;

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

// The callback runs between nodes on whichever thread finished one; the mutex keeps
// calls from overlapping so callbacks need not be thread-safe.
inline bool check_abort(exec_state * st) {
    if (st->aborted.load(std::memory_order_acquire)) return true;
    if (!st->abort_cb) return false;
    std::lock_guard<std::mutex> lk(st->abort_mutex);
    if (!st->aborted.load(std::memory_order_relaxed) && st->abort_cb(st->abort_data)) {
        st->aborted.store(true, std::memory_order_release);
    }
    return st->aborted.load(std::memory_order_relaxed);
}

// ---- DAG scheduler (sched-dag.cpp) ----
// Resets the per-node state for one compute; fills st->max_ws.
void dag_setup(exec_state * st);
// Called by thread 0 before the workers start: publishes the nodes without predecessors.
void dag_seed(exec_state * st);
// One thread's part of a DAG compute: takes tasks until the graph is done or aborted.
void run_dag_thread(exec_state * st);

// ---- barrier scheduler (sched-barrier.cpp) ----
// Thread ith's part of every node in execution order; with one thread, the whole graph.
// Called by thread 0 before a barrier compute: each node's tasks, phases and scratch, once
// (not once per thread and pass), and max_ws.
void barrier_setup(exec_state * st);
void run_barrier_thread(exec_state * st, int ith);

} // namespace ggml_exec

// ---- thread pool (threadpool.cpp) ----
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
    alignas(ggml_exec::CACHE_LINE) std::atomic<uint64_t> join_word{0};
    alignas(ggml_exec::CACHE_LINE) std::atomic<int> n_left{0}; // joined workers that finished
    ggml_exec::exec_state state;

    ~ggml_threadpool();
    // Returns how many workers the pool has (fewer than asked if the OS refuses threads).
    int grow(int n_workers);
    void worker_main(int ith, uint64_t seen);
    void run(ggml_exec::exec_state * st); // caller participates as thread 0

    static constexpr uint64_t CLOSED = 1u << 31;
    bool join(uint64_t gen) {
        uint64_t w = join_word.load(std::memory_order_acquire);
        for (;;) {
            if ((w >> 32) != (gen & 0xffffffffu) || (w & CLOSED)) return false;
            if (join_word.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
        }
    }
};

namespace ggml_exec {
// The pool used when a plan names none (created on first use, joined at exit).
ggml_threadpool & default_pool();
} // namespace ggml_exec
