// The DAG scheduler (the default). Each node's pending counter starts at its predecessor
// count; the thread that finishes a node decrements its successors and makes those reaching
// zero ready. A ready node is published as n_tasks tokens (node, ith) in a shared lock-free
// queue; any thread takes any token, so independent nodes run at the same time and a big
// node still runs its tasks in parallel. The last task of a phase to finish publishes the
// next phase, so phases stay ordered. A thread that readies a single-task successor runs it
// next itself, bypassing the queue. Each node also has a work counter per phase
// (ggml_compute_params::claim): kernels that take their chunks from it (mul_mat,
// flash_attn_ext) balance their tasks' loads, so a task started late or slowed by the host
// does less.
//
// Scratch. A node's tasks share ggml_op_work_size(node, n_tasks) bytes. The plan's work
// buffer holds n_slots = min(n_threads, nodes needing scratch) slots of the largest
// size; a node needing scratch takes a free slot when it becomes ready (or waits in a
// FIFO until one frees) and returns it when it finishes. Nodes without scratch never
// wait. Every node's tasks run with the same n_tasks as in sequential execution, so
// results are bit-identical. A smaller buffer (down to one slot) still works.
#include "exec-impl.h"

#include <algorithm>

namespace ggml_exec {

static void push_tokens(exec_state * st, int node) {
    const int n = st->facts[node].n_tasks;
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
        const ggml_graph_sched::node_facts & f = st->facts[i];
        if (f.n_tasks > 0) {
            if (f.wsize > 0) {
                std::unique_lock<std::mutex> lk(st->slot_mutex);
                if (st->free_slots.empty()) {
                    st->slot_waiting.push_back(i);
                    continue;
                }
                nr.slot = st->free_slots.back();
                st->free_slots.pop_back();
            } else if (keep && *keep < 0 && f.n_tasks == 1 && f.n_phases == 1) {
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
    const ggml_graph_sched::node_facts & f = st->facts[i];
    ggml_compute_params params;
    params.ith = ith;
    params.nth = f.n_tasks;
    params.phase = nr.phase;
    params.wdata = nr.slot >= 0 ? st->wbase + (size_t) nr.slot * st->wstride : nullptr;
    params.wsize = nr.slot >= 0 ? f.wsize : 0;
    params.claim = &nr.claim;
    ggml_compute_forward(&params, st->sched->exec[i]);
    if (f.n_tasks > 1 && nr.done.fetch_add(1, std::memory_order_acq_rel) + 1 != f.n_tasks) return -1;
    // this thread finished the phase last
    nr.done.store(0, std::memory_order_relaxed);
    nr.claim.store(0, std::memory_order_relaxed); // published with the next phase's tokens
    if (++nr.phase < f.n_phases) {
        push_tokens(st, i);
        return -1;
    }
    return finish_node(st, i);
}

void run_dag_thread(exec_state * st) {
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
void dag_setup(exec_state * st) {
    const ggml_graph_sched * sc = st->sched;
    const int n = (int) sc->exec.size();
    if (st->nodes_cap < n) {
        st->nodes.reset(new node_rt[n]);
        st->nodes_cap = n;
    }
    st->roots.clear();
    size_t total_tokens = 0;
    st->facts = ggml_exec_facts(sc, st->n_threads);
    st->max_ws = sc->facts_max_ws;
    for (int i = 0; i < n; ++i) {
        node_rt & nr = st->nodes[i];
        const int n_preds = sc->pred_off[i + 1] - sc->pred_off[i];
        nr.pending.store(n_preds, std::memory_order_relaxed);
        if (n_preds == 0) st->roots.push_back(i);
        nr.done.store(0, std::memory_order_relaxed);
        nr.claim.store(0, std::memory_order_relaxed);
        nr.phase = 0;
        nr.slot = -1;
        total_tokens += (size_t) st->facts[i].n_tasks * st->facts[i].n_phases;
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
void dag_seed(exec_state * st) {
    for (int i : st->roots) make_ready(st, i, nullptr);
}

} // namespace ggml_exec
