// Randomized multi-graph programs, the way ggml programs use one context for many graphs:
// each step creates ops over persistent buffers (reads of views; writes through cpy,
// set_rows and in-place ops, fed from one input tensor) and builds a new graph of them;
// between steps graphs are computed again, new and old, with the input overwritten each
// time. A step's graph is built by expanding its sinks or all its ops in random order, in
// creation order when its ops come from two contexts, or by hand (computing ops only, no
// views); some ops get control edges through a context freed right away; some results
// are read through output views. Every compute, on 1-4 threads, DAG or barrier, with or
// without one planner for all graphs (sometimes reserving first), must equal a sequential
// interpretation of exactly that step's ops.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml-impl.h" // the schedule, to check its edges without relying on a race
#include "ggml.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int NBUF = 3, W = 8, H = 6, BUF_N = W * H, INP_N = 64;

struct ref_state {
    std::vector<float> buf[NBUF];
    std::vector<float> inp;
    std::vector<std::vector<float>> vals; // by value id
};

struct view_desc {
    int buf, ne0, ne1, nb1, off;
};

struct step_op {
    ggml_tensor * t;                          // a computing op of the step
    std::function<void(ref_state &)> apply;   // its meaning, run in creation order
};

struct step_graph {
    ggml_cgraph * gf;
    std::vector<step_op> ops;
    std::vector<std::pair<int, ggml_tensor *>> checks; // value id -> tensor that shows it
};

struct config {
    bool planner, two_ctx, hand_built;
};

struct tester {
    std::mt19937 rng;
    config cfg;
    ggml_context * data = nullptr; // persistent buffers, the input, index tensors
    ggml_context * ctx_a = nullptr;
    ggml_context * ctx_b = nullptr;
    ggml_tensor * bufs[NBUF];
    ggml_tensor * inp;
    ref_state ref;
    std::vector<step_graph> graphs;
    ggml_gallocr_t ga = nullptr;
    std::ostringstream text;

    tester(unsigned seed, config c) : rng(seed), cfg(c) {
        data = new_ctx(false);
        ctx_a = new_ctx(cfg.planner);
        ctx_b = new_ctx(cfg.planner);
        for (int b = 0; b < NBUF; ++b) {
            bufs[b] = ggml_format_name(ggml_new_tensor_2d(data, GGML_TYPE_F32, W, H), "buf%d", b);
            ref.buf[b].resize(BUF_N);
            for (float & x : ref.buf[b]) x = (float) uni(-4, 4) * 0.25f;
            std::memcpy(bufs[b]->data, ref.buf[b].data(), sizeof(float) * BUF_N);
        }
        inp = ggml_set_name(ggml_new_tensor_1d(data, GGML_TYPE_F32, INP_N), "inp");
        ref.inp.assign(INP_N, 0.0f);
        if (cfg.planner) ga = ggml_gallocr_new(NULL);
    }
    ~tester() {
        ggml_gallocr_free(ga);
        ggml_free(ctx_b);
        ggml_free(ctx_a);
        ggml_free(data);
    }
    static ggml_context * new_ctx(bool no_alloc) {
        ggml_init_params p = {16u << 20, nullptr, no_alloc};
        return ggml_init(p);
    }

    int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
    bool chance(int pct) { return uni(0, 99) < pct; }
    float pick_scale() {
        static const float s[] = {0.5f, -1.0f, 2.0f, 1.5f, -0.25f};
        return s[uni(0, 4)];
    }
    ggml_context * pick_ctx() { return cfg.two_ctx && chance(50) ? ctx_b : ctx_a; }

    view_desc random_view(int ne0, int ne1) {
        view_desc v{uni(0, NBUF - 1), ne0, ne1, ne0, 0};
        if (ne1 > 1) v.nb1 = std::max(ne0, W + uni(0, 1) * W);
        v.off = uni(0, BUF_N - ((ne1 - 1) * v.nb1 + ne0));
        return v;
    }
    ggml_tensor * make_view(ggml_context * c, const view_desc & v) {
        if (v.ne1 == 1) return ggml_view_1d(c, bufs[v.buf], v.ne0, (size_t) v.off * sizeof(float));
        return ggml_view_2d(c, bufs[v.buf], v.ne0, v.ne1, (size_t) v.nb1 * sizeof(float), (size_t) v.off * sizeof(float));
    }
    static float & at(ref_state & s, const view_desc & v, int i) { return s.buf[v.buf][v.off + (i / v.ne0) * v.nb1 + i % v.ne0]; }

    // a new value: s * inp[off .. off + n), an op of the step
    int from_input(std::vector<step_op> & ops, int ne0, int ne1, ggml_tensor ** t) {
        const int n = ne0 * ne1, off = uni(0, INP_N - n), id = (int) ref.vals.size();
        const float s = pick_scale();
        ggml_context * c = pick_ctx();
        *t = ggml_scale(c, ggml_reshape_2d(c, ggml_view_1d(c, inp, n, (size_t) off * sizeof(float)), ne0, ne1), s);
        ref.vals.emplace_back(n);
        ops.push_back({*t, [=](ref_state & r) {
                           for (int i = 0; i < n; ++i) r.vals[id][i] = r.inp[off + i] * s;
                       }});
        text << "    v" << id << " = inp[" << off << "+" << n << "] * " << s << "\n";
        return id;
    }

    void random_op(step_graph & g) {
        static const int shapes[][2] = {{4, 1}, {8, 1}, {16, 1}, {4, 2}, {2, 3}, {8, 2}};
        const int k = uni(0, 5), ne0 = shapes[k][0], ne1 = shapes[k][1], n = ne0 * ne1, kind = uni(0, 99);
        const view_desc v = random_view(ne0, ne1);
        ggml_context * c = pick_ctx();
        if (kind < 30) { // read
            const float s = pick_scale();
            const int id = (int) ref.vals.size();
            ref.vals.emplace_back(n);
            ggml_tensor * t = ggml_scale(c, make_view(c, v), s);
            g.ops.push_back({t, [=](ref_state & r) { for (int i = 0; i < n; ++i) r.vals[id][i] = at(r, v, i) * s; }});
            ggml_tensor * shown = t;
            if (!cfg.hand_built && chance(30)) { // read back through an output view
                shown = ggml_reshape_1d(c, t, n);
                ggml_set_output(shown);
            }
            g.checks.push_back({id, shown});
            text << "    v" << id << " = buf" << v.buf << "@" << v.off << " * " << s << "\n";
        } else if (kind < 55) { // cpy from the input
            ggml_tensor * src;
            const int id = from_input(g.ops, ne0, ne1, &src);
            g.ops.push_back({ggml_cpy(c, src, make_view(c, v)), [=](ref_state & r) { for (int i = 0; i < n; ++i) at(r, v, i) = r.vals[id][i]; }});
            text << "    buf" << v.buf << "@" << v.off << " = v" << id << "\n";
        } else if (kind < 70) { // set_rows
            const int b = uni(0, NBUF - 1), nr = uni(1, 3);
            std::vector<int> rows(H);
            for (int i = 0; i < H; ++i) rows[i] = i;
            std::shuffle(rows.begin(), rows.end(), rng);
            rows.resize(nr);
            ggml_tensor * idx = ggml_new_tensor_1d(data, GGML_TYPE_I32, nr);
            for (int i = 0; i < nr; ++i) ggml_set_i32_1d(idx, i, rows[i]);
            ggml_tensor * src;
            const int id = from_input(g.ops, W, nr, &src);
            g.ops.push_back({ggml_set_rows(c, bufs[b], src, idx), [=](ref_state & r) {
                                 for (int i = 0; i < nr; ++i)
                                     for (int x = 0; x < W; ++x) r.buf[b][rows[i] * W + x] = r.vals[id][i * W + x];
                             }});
            text << "    set_rows(buf" << b << ", v" << id << ")\n";
        } else if (kind < 85) { // add in place
            ggml_tensor * src;
            const int id = from_input(g.ops, ne0, ne1, &src);
            g.ops.push_back({ggml_add_inplace(c, make_view(c, v), src), [=](ref_state & r) { for (int i = 0; i < n; ++i) at(r, v, i) += r.vals[id][i]; }});
            text << "    buf" << v.buf << "@" << v.off << " += v" << id << "\n";
        } else { // scale in place
            const float s = pick_scale();
            g.ops.push_back({ggml_scale_inplace(c, make_view(c, v), s), [=](ref_state & r) { for (int i = 0; i < n; ++i) at(r, v, i) *= s; }});
            text << "    buf" << v.buf << "@" << v.off << " *= " << s << "\n";
        }
    }

    // Ops of the step that no later op of the step uses (data edge through views, or a
    // control edge that pulls): expanding them brings in the whole step.
    static std::vector<ggml_tensor *> sinks(const std::vector<step_op> & ops) {
        std::set<const ggml_tensor *> used;
        for (const step_op & o : ops) {
            for (int i = 0; i < GGML_MAX_SRC; ++i) {
                for (const ggml_tensor * s = o.t->src[i]; s; s = s->src[0]) {
                    used.insert(s);
                    if (s->op != GGML_OP_VIEW && s->op != GGML_OP_RESHAPE) break;
                }
            }
            for (int d = 0; d < ggml_n_control_deps(o.t); ++d) {
                ggml_dep_kind kind;
                const ggml_tensor * t = ggml_get_control_dep(o.t, d, &kind);
                if (kind == GGML_DEP_RAW || kind == GGML_DEP_MANUAL) used.insert(t);
            }
        }
        std::vector<ggml_tensor *> r;
        for (const step_op & o : ops) if (!used.count(o.t)) r.push_back(o.t);
        return r;
    }

    void build_step() {
        step_graph g;
        const int n_ops = uni(1, 8);
        text << "  graph " << graphs.size() << ":\n";
        for (int k = 0; k < n_ops; ++k) random_op(g);
        if (g.ops.size() > 1 && chance(30)) { // an ordering edge through a context freed at once
            const int a = uni(0, (int) g.ops.size() - 2), b = uni(a + 1, (int) g.ops.size() - 1);
            ggml_context * tmp = new_ctx(false);
            ggml_add_control_dep(tmp, g.ops[b].t, g.ops[a].t);
            ggml_free(tmp);
        }
        g.gf = ggml_new_graph(ctx_a);
        if (cfg.hand_built) {
            for (const step_op & o : g.ops) ggml_graph_add_node(g.gf, o.t);
        } else if (cfg.two_ctx) { // ggml's order: no edges join the two contexts
            for (const step_op & o : g.ops) ggml_build_forward_expand(g.gf, o.t);
        } else {
            std::vector<ggml_tensor *> roots;
            if (chance(50)) roots = sinks(g.ops);
            else for (const step_op & o : g.ops) roots.push_back(o.t);
            std::shuffle(roots.begin(), roots.end(), rng);
            for (ggml_tensor * t : roots) ggml_build_forward_expand(g.gf, t);
        }
        for (const auto & c : g.checks) if (c.second->op == GGML_OP_RESHAPE) ggml_build_forward_expand(g.gf, c.second);
        graphs.push_back(std::move(g));
    }

    // The graph holds exactly its step's computing ops: none of an earlier graph's.
    void check_membership(const step_graph & g) {
        std::set<const ggml_tensor *> want, got;
        for (const step_op & o : g.ops) want.insert(o.t);
        for (int i = 0; i < ggml_graph_n_nodes(g.gf); ++i) {
            const ggml_tensor * t = ggml_graph_node(g.gf, i);
            if (t->op != GGML_OP_VIEW && t->op != GGML_OP_RESHAPE && t->op != GGML_OP_NONE) got.insert(t);
        }
        REQUIRE(got == want);
    }

    void compute(int gi) {
        step_graph & g = graphs[gi];
        for (int i = 0; i < INP_N; ++i) ref.inp[i] = (float) uni(-8, 8) * 0.125f;
        std::memcpy(inp->data, ref.inp.data(), sizeof(float) * INP_N);
        if (cfg.planner) {
            if (chance(20)) REQUIRE(ggml_gallocr_reserve(ga, g.gf));
            REQUIRE(ggml_gallocr_alloc_graph(ga, g.gf));
        }
        const int n_threads = uni(1, 4);
        ggml_cpu_set_sched_mode(chance(25) ? GGML_SCHED_BARRIER : GGML_SCHED_DAG);
        CAPTURE(n_threads);
        CAPTURE(gi);
        ggml_cplan plan = ggml_graph_plan(g.gf, n_threads, nullptr);
        std::vector<uint8_t> work(plan.work_size);
        plan.work_data = work.data();
        REQUIRE(ggml_graph_compute(g.gf, &plan) == GGML_STATUS_SUCCESS);
        for (const step_op & o : g.ops) o.apply(ref);
        for (int b = 0; b < NBUF; ++b) {
            for (int i = 0; i < BUF_N; ++i) {
                INFO("buf" << b << "[" << i << "]");
                REQUIRE(((const float *) bufs[b]->data)[i] == ref.buf[b][i]);
            }
        }
        for (const auto & c : g.checks) {
            for (size_t i = 0; i < ref.vals[c.first].size(); ++i) {
                INFO("v" << c.first << "[" << i << "]");
                REQUIRE(((const float *) c.second->data)[i] == ref.vals[c.first][i]);
            }
        }
    }
};

int env_int(const char * name, int def) {
    const char * e = std::getenv(name);
    return e ? std::atoi(e) : def;
}

// Tiny ops rarely overlap in time, so a missing edge seldom shows in the values. Checked
// directly instead, pair by pair (the schedule finds these pairs in one scan): two ops of
// the step whose accesses overlap, one writing, must be joined by a path of the
// schedule's edges, in the order the step created them (the sequential interpretation).
void check_schedule_orders_conflicts(const step_graph & g) {
    const ggml_graph_sched * sc = ggml_graph_get_sched(g.gf);
    REQUIRE(sc->ok);
    const int n = (int) sc->exec.size();
    std::vector<std::vector<bool>> anc(n, std::vector<bool>(n, false));
    for (int k = 0; k < n; ++k) {
        for (int e = sc->pred_off[k]; e < sc->pred_off[k + 1]; ++e) {
            const int p = sc->preds[e];
            anc[k][p] = true;
            for (int q = 0; q < n; ++q) if (anc[p][q]) anc[k][q] = true;
        }
    }
    std::vector<int> created(n, -1); // rank among the step's ops; views and others: -1
    std::vector<std::vector<ggml_access>> acc(n);
    for (int k = 0; k < n; ++k) {
        for (size_t o = 0; o < g.ops.size(); ++o) if (g.ops[o].t == sc->exec[k]) created[k] = (int) o;
        acc[k].resize(GGML_MAX_ACCESSES);
        acc[k].resize((size_t) ggml_op_accesses(sc->exec[k], acc[k].data()));
    }
    for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
            if (created[a] < 0 || created[b] < 0 || created[a] >= created[b]) continue;
            for (const ggml_access & x : acc[a]) {
                for (const ggml_access & y : acc[b]) {
                    if (x.root != y.root || !(x.write || y.write) || x.end <= y.begin || y.end <= x.begin) continue;
                    INFO("ops " << created[a] << " and " << created[b] << " of the step touch the same bytes");
                    REQUIRE(anc[b][a]);
                }
            }
        }
    }
}

} // namespace

TEST_CASE("random multi-graph programs: every compute equals a sequential run of its graph's step") {
    const int n_programs = env_int("KVG_MG_PROGRAMS", 400);
    const unsigned base_seed = (unsigned) env_int("KVG_MG_SEED", 777);
    const ggml_sched_mode saved = ggml_cpu_get_sched_mode();
    int n_graphs = 0, n_computes = 0;
    for (int p = 0; p < n_programs; ++p) {
        const unsigned seed = base_seed + (unsigned) p;
        std::mt19937 pick(seed);
        const config cfg{(pick() % 2) == 0, (pick() % 4) == 0, (pick() % 5) == 0};
        tester t(seed, cfg);
        const int n_steps = t.uni(2, 6);
        for (int s = 0; s < n_steps; ++s) {
            t.build_step();
            INFO("seed " << seed << (cfg.planner ? " planner" : "") << (cfg.two_ctx ? " two contexts" : "")
                         << (cfg.hand_built ? " hand-built" : "") << "\nprogram:\n" << t.text.str());
            t.check_membership(t.graphs.back());
            check_schedule_orders_conflicts(t.graphs.back());
            if (!cfg.two_ctx && !cfg.hand_built) { // expansion keeps the node list in the edges' order
                CHECK(ggml_graph_validate(t.graphs.back().gf, nullptr, 0, stderr) == 0);
            }
            const int n_comp = t.uni(1, 3);
            for (int c = 0; c < n_comp; ++c) {
                const int gi = t.chance(70) ? (int) t.graphs.size() - 1 : t.uni(0, (int) t.graphs.size() - 1);
                t.compute(gi);
                ++n_computes;
            }
        }
        n_graphs += n_steps;
    }
    ggml_cpu_set_sched_mode(saved);
    MESSAGE(n_programs << " programs, " << n_graphs << " graphs, " << n_computes << " computes");
}
