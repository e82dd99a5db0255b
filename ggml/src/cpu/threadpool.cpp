// The persistent thread pool: workers created once (grown on demand) and reused; a compute
// wakes them through a generation counter. Idle workers spin briefly (back-to-back computes
// stay cheap), then block on a condition variable. Computes on one pool are serialized
// (plan.cpp); a compute started from inside a kernel runs inline on the calling thread.
#include "exec-impl.h"

#include <algorithm>
#include <exception>

namespace ggml_exec {

thread_local bool t_in_compute = false;

// One thread's part of the current compute, whichever scheduler it uses.
static void run_thread(exec_state * st, int ith) {
    if (st->dag) run_dag_thread(st);
    else run_barrier_thread(st, ith);
}

ggml_threadpool & default_pool() {
    static ggml_threadpool pool; // joined at exit
    return pool;
}

} // namespace ggml_exec

using namespace ggml_exec;

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
