// The barrier scheduler: every node in execution order split over all threads, with a
// barrier after every phase (ggml's classic schedule), kept to compare against the DAG
// scheduler. One thread always runs the nodes in execution order.
#include "exec-impl.h"

#include <algorithm>

namespace ggml_exec {

void barrier_t::wait(int n) {
    if (n == 1) return;
    const int g = gen.load(std::memory_order_relaxed);
    if (count.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        count.store(0, std::memory_order_relaxed);
        gen.fetch_add(1, std::memory_order_release);
    } else {
        spin_until([&] { return gen.load(std::memory_order_acquire) != g; });
    }
}

void barrier_setup(exec_state * st) {
    st->facts = ggml_exec_facts(st->sched, st->n_threads);
    st->max_ws = st->sched->facts_max_ws;
}

void run_barrier_thread(exec_state * st, int ith) {
    const std::vector<ggml_tensor *> & exec = st->sched->exec;
    const int nt_all = st->n_threads;
    for (int i = 0; i < (int) exec.size(); ++i) {
        ggml_tensor * node = exec[i];
        const int n_tasks = st->facts[i].n_tasks;
        if (n_tasks == 0) continue;
        const int n_phases = st->facts[i].n_phases;
        ggml_compute_params params;
        params.ith = ith;
        params.nth = n_tasks;
        params.wsize = st->facts[i].wsize;
        params.wdata = params.wsize > 0 ? st->wbase : nullptr;
        params.claim = nullptr; // static shares: ggml's classic split
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

} // namespace ggml_exec
