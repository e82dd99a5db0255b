// Randomized programs over shared buffers: writes through views (cpy, set_rows, in-place
// ops) and reads (scale/add of views) in random order. The graph is built by expanding
// only the final tensors (or every op, shuffled); dependency edges must make the DAG
// executor, with any thread count, match a plain sequential run of the program.
// A second test checks ggml_graph_validate against a brute-force version of its rules.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define KVG_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVG_UNDER_TSAN 1
#endif
#endif

namespace {

constexpr int NBUF = 3, W = 8, H = 6, BUF_N = W * H;

int env_int(const char * name, int def) {
    const char * e = std::getenv(name);
    return e ? std::atoi(e) : def;
}

// A window of a buffer: element (i0, i1) is float off + i1 * nb1 + i0.
struct view_desc {
    int buf, ne0, ne1, nb1, off;
};

// A computed tensor (fresh memory) and its expected contents.
struct value {
    ggml_tensor * t;
    int ne0, ne1;
    std::vector<float> ref;
};

struct program {
    std::mt19937 rng;
    ggml_context * ctx;
    ggml_tensor * bufs[NBUF];
    std::vector<float> init[NBUF]; // buffer contents before the run
    std::vector<float> ref[NBUF];  // after a sequential run
    std::vector<value> vals;
    std::vector<ggml_tensor *> ops; // every computing op, in creation order
    std::ostringstream text;        // the program, for failure reports

    program(unsigned seed, ggml_context * c) : rng(seed), ctx(c) {
        for (int b = 0; b < NBUF; ++b) {
            bufs[b] = ggml_format_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, W, H), "buf%d", b);
            init[b].resize(BUF_N);
            for (float & x : init[b]) x = (float) uni(-4, 4) * 0.25f;
            std::memcpy(bufs[b]->data, init[b].data(), BUF_N * sizeof(float));
            ref[b] = init[b];
        }
    }

    int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
    bool chance(int pct) { return uni(0, 99) < pct; }
    float pick_scale() {
        static const float s[] = {0.5f, -1.0f, 2.0f, 1.5f, -0.25f};
        return s[uni(0, 4)];
    }

    void shape(int * ne0, int * ne1) {
        static const int shapes[][2] = {{4, 1}, {8, 1}, {16, 1}, {4, 2}, {2, 3}, {8, 2}, {3, 2}, {6, 1}};
        const int k = uni(0, 7);
        *ne0 = shapes[k][0];
        *ne1 = shapes[k][1];
    }

    view_desc random_view(int ne0, int ne1) {
        view_desc v;
        v.buf = uni(0, NBUF - 1);
        v.ne0 = ne0;
        v.ne1 = ne1;
        if (ne1 == 1) {
            v.nb1 = ne0;
            v.off = uni(0, BUF_N - ne0);
        } else {
            static const int strides[] = {W, W + 1, 2 * W};
            v.nb1 = std::max(ne0, strides[uni(0, 2)]);
            v.off = uni(0, BUF_N - ((ne1 - 1) * v.nb1 + ne0));
        }
        return v;
    }
    ggml_tensor * make_view(const view_desc & v) {
        if (v.ne1 == 1) return ggml_view_1d(ctx, bufs[v.buf], v.ne0, (size_t) v.off * sizeof(float));
        return ggml_view_2d(ctx, bufs[v.buf], v.ne0, v.ne1, (size_t) v.nb1 * sizeof(float), (size_t) v.off * sizeof(float));
    }
    float & at(const view_desc & v, int i) { return ref[v.buf][v.off + (i / v.ne0) * v.nb1 + i % v.ne0]; }
    std::string str(const view_desc & v) {
        std::ostringstream s;
        s << "buf" << v.buf << "[" << v.ne0 << "x" << v.ne1 << " nb1=" << v.nb1 << " off=" << v.off << "]";
        return s.str();
    }

    int add_value(ggml_tensor * t, int ne0, int ne1, std::vector<float> r) {
        ggml_format_name(t, "v%zu", vals.size());
        vals.push_back({t, ne0, ne1, std::move(r)});
        ops.push_back(t);
        return (int) vals.size() - 1;
    }
    // a fresh input leaf, scaled (so the source is a computed tensor)
    int new_source(int ne0, int ne1) {
        ggml_tensor * in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
        std::vector<float> r(ne0 * ne1);
        const float s = pick_scale();
        for (int i = 0; i < ne0 * ne1; ++i) {
            ((float *) in->data)[i] = (float) uni(-8, 8) * 0.125f;
            r[i] = ((float *) in->data)[i] * s;
        }
        const int id = add_value(ggml_scale(ctx, in, s), ne0, ne1, std::move(r));
        text << "  v" << id << " = scale(input, " << s << ")\n";
        return id;
    }
    // an existing value with n elements (any shape if any_shape), or a new source
    int source(int ne0, int ne1, bool any_shape) {
        std::vector<int> fit;
        for (size_t i = 0; i < vals.size(); ++i) {
            const value & v = vals[i];
            if (v.ne0 * v.ne1 == ne0 * ne1 && (any_shape || (v.ne0 == ne0 && v.ne1 == ne1))) fit.push_back((int) i);
        }
        if (!fit.empty() && chance(70)) return fit[uni(0, (int) fit.size() - 1)];
        return new_source(ne0, ne1);
    }

    void step() {
        int ne0, ne1;
        shape(&ne0, &ne1);
        const int kind = uni(0, 99);
        if (kind < 25) { // read: scale of a view
            const view_desc v = random_view(ne0, ne1);
            const float s = pick_scale();
            std::vector<float> r(ne0 * ne1);
            for (int i = 0; i < ne0 * ne1; ++i) r[i] = at(v, i) * s;
            const int id = add_value(ggml_scale(ctx, make_view(v), s), ne0, ne1, std::move(r));
            text << "  v" << id << " = scale(" << str(v) << ", " << s << ")\n";
        } else if (kind < 40) { // read: add of two views, possibly overlapping
            const view_desc a = random_view(ne0, ne1), b = random_view(ne0, ne1);
            std::vector<float> r(ne0 * ne1);
            for (int i = 0; i < ne0 * ne1; ++i) r[i] = at(a, i) + at(b, i);
            const int id = add_value(ggml_add(ctx, make_view(a), make_view(b)), ne0, ne1, std::move(r));
            text << "  v" << id << " = add(" << str(a) << ", " << str(b) << ")\n";
        } else if (kind < 62) { // write: cpy of a computed tensor
            const view_desc d = random_view(ne0, ne1);
            const int src = source(ne0, ne1, chance(30));
            for (int i = 0; i < ne0 * ne1; ++i) at(d, i) = vals[src].ref[i];
            ops.push_back(ggml_cpy(ctx, vals[src].t, make_view(d)));
            text << "  " << str(d) << " = cpy(v" << src << ")\n";
        } else if (kind < 74) { // write: set_rows into a block of rows
            const int b = uni(0, NBUF - 1);
            const int row0 = uni(0, H - 1), nr = uni(1, H - row0);
            const int n = uni(1, std::min(nr, 3));
            std::vector<int> rows(nr);
            for (int i = 0; i < nr; ++i) rows[i] = i;
            std::shuffle(rows.begin(), rows.end(), rng);
            rows.resize(n); // distinct: duplicates would make the result depend on the schedule
            const bool i64 = chance(50);
            ggml_tensor * idx = ggml_new_tensor_1d(ctx, i64 ? GGML_TYPE_I64 : GGML_TYPE_I32, n);
            for (int i = 0; i < n; ++i) ggml_set_i32_1d(idx, i, rows[i]);
            const int src = source(W, n, false);
            ggml_tensor * dst = row0 == 0 && nr == H && chance(50)
                ? bufs[b]
                : ggml_view_2d(ctx, bufs[b], W, nr, bufs[b]->nb[1], (size_t) row0 * bufs[b]->nb[1]);
            for (int i = 0; i < n; ++i) {
                for (int k = 0; k < W; ++k) ref[b][(row0 + rows[i]) * W + k] = vals[src].ref[i * W + k];
            }
            ops.push_back(ggml_set_rows(ctx, dst, vals[src].t, idx));
            text << "  set_rows(buf" << b << " rows " << row0 << "+" << nr << ", v" << src << ", idx {";
            for (int r : rows) text << " " << r;
            text << " })\n";
        } else if (kind < 84) { // write: add_inplace on a view
            const view_desc d = random_view(ne0, ne1);
            const int src = source(ne0, ne1, false);
            for (int i = 0; i < ne0 * ne1; ++i) at(d, i) += vals[src].ref[i];
            ops.push_back(ggml_add_inplace(ctx, make_view(d), vals[src].t));
            text << "  " << str(d) << " += v" << src << "\n";
        } else if (kind < 93) { // write: scale_inplace on a view
            const view_desc d = random_view(ne0, ne1);
            const float s = pick_scale();
            for (int i = 0; i < ne0 * ne1; ++i) at(d, i) *= s;
            ops.push_back(ggml_scale_inplace(ctx, make_view(d), s));
            text << "  " << str(d) << " *= " << s << "\n";
        } else if (!vals.empty()) { // write: in place into a computed tensor
            const int id = uni(0, (int) vals.size() - 1);
            const int n = vals[id].ne0 * vals[id].ne1;
            ggml_tensor * r;
            if (vals[id].ne0 == W && chance(40)) { // set_rows: no src[] link to the tensor it writes
                const int n_rows = vals[id].ne1, n = uni(1, n_rows);
                std::vector<int> rows(n_rows);
                for (int i = 0; i < n_rows; ++i) rows[i] = i;
                std::shuffle(rows.begin(), rows.end(), rng);
                ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
                for (int i = 0; i < n; ++i) ggml_set_i32_1d(idx, i, rows[i]);
                const int src = source(W, n, false);
                for (int i = 0; i < n; ++i) {
                    for (int k = 0; k < W; ++k) vals[id].ref[rows[i] * W + k] = vals[src].ref[i * W + k];
                }
                r = ggml_set_rows(ctx, vals[id].t, vals[src].t, idx);
                text << "  set_rows(v" << id << ", v" << src << ", " << n << " rows)\n";
            } else if (chance(50)) {
                const float s = pick_scale();
                for (float & x : vals[id].ref) x *= s;
                r = ggml_scale_inplace(ctx, vals[id].t, s);
                text << "  v" << id << " *= " << s << "\n";
            } else {
                const int src = source(vals[id].ne0, vals[id].ne1, false); // may grow vals
                for (int i = 0; i < n; ++i) vals[id].ref[i] += vals[src].ref[i];
                r = ggml_add_inplace(ctx, vals[id].t, vals[src].t);
                text << "  v" << id << " += v" << src << "\n";
            }
            ops.push_back(r);
            if (chance(50)) vals[id].t = r; // later users read through the in-place result
        }
    }
};

// Computing ops that no other op uses (directly, through views, or by a control edge that
// pulls its target into a graph: RAW or MANUAL; WAR and WAW edges only order).
std::vector<ggml_tensor *> sinks(const std::vector<ggml_tensor *> & ops) {
    std::set<const ggml_tensor *> used;
    for (ggml_tensor * t : ops) {
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            const ggml_tensor * s = t->src[i];
            while (s && (s->op == GGML_OP_VIEW || s->op == GGML_OP_RESHAPE || s->op == GGML_OP_PERMUTE || s->op == GGML_OP_TRANSPOSE)) {
                s = s->src[0];
            }
            if (s) used.insert(s);
        }
        for (int i = 0; i < ggml_n_control_deps(t); ++i) {
            ggml_dep_kind kind;
            ggml_tensor * d = ggml_get_control_dep(t, i, &kind);
            if (kind == GGML_DEP_RAW || kind == GGML_DEP_MANUAL) used.insert(d);
        }
    }
    std::vector<ggml_tensor *> r;
    for (ggml_tensor * t : ops) if (!used.count(t)) r.push_back(t);
    return r;
}

bool contains(ggml_cgraph * g, const ggml_tensor * t) {
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) if (ggml_graph_node(g, i) == t) return true;
    return false;
}

} // namespace

TEST_CASE("random programs: DAG execution matches a sequential run") {
#ifdef KVG_UNDER_TSAN
    const int n_programs = env_int("KVG_HAZ_PROGRAMS", 200);
#else
    const int n_programs = env_int("KVG_HAZ_PROGRAMS", 1500);
#endif
    const unsigned base_seed = (unsigned) env_int("KVG_HAZ_SEED", 1234);
    const enum ggml_sched_mode saved_mode = ggml_cpu_get_sched_mode();
    int total_ops = 0, total_edges = 0;

    for (int p = 0; p < n_programs; ++p) {
        const unsigned seed = base_seed + (unsigned) p;
        ggml_init_params ip = {4u << 20, nullptr, false};
        ggml_context * ctx = ggml_init(ip);
        REQUIRE(ctx != nullptr);
        program prog(seed, ctx);
        const int n_steps = prog.uni(4, 40);
        for (int s = 0; s < n_steps; ++s) prog.step();
        total_ops += (int) prog.ops.size();
        for (ggml_tensor * t : prog.ops) total_edges += ggml_n_control_deps(t);

        // build: only the sinks, or every op, in random order
        const bool only_sinks = prog.chance(60);
        std::vector<ggml_tensor *> roots = only_sinks ? sinks(prog.ops) : prog.ops;
        std::shuffle(roots.begin(), roots.end(), prog.rng);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        for (ggml_tensor * t : roots) {
            if (prog.chance(30)) ggml_set_output(t);
            ggml_build_forward_expand(gf, t);
        }
        const std::string desc = "seed " + std::to_string(seed) + (only_sinks ? " (sinks expanded)" : " (all ops expanded)") +
                                 "\nprogram:\n" + prog.text.str();
        INFO(desc);
        for (ggml_tensor * t : prog.ops) REQUIRE(contains(gf, t));
        // Expanding a write before an older read of the same bytes lists them against their
        // WAR edge (WAR/WAW edges order, never pull): the validator reports such edges, the
        // executor honours them. No pair may be left unordered.
        std::vector<ggml_hazard> hz(256);
        const int n_hz = ggml_graph_validate(gf, hz.data(), (int) hz.size(), nullptr);
        REQUIRE(n_hz >= 0);
        REQUIRE(n_hz <= (int) hz.size());
        for (int h = 0; h < n_hz; ++h) {
            bool edge = false;
            for (int d = 0; d < ggml_n_control_deps(hz[h].first); ++d) edge |= ggml_get_control_dep(hz[h].first, d, nullptr) == hz[h].second;
            REQUIRE(edge);
        }

        // 1-4 threads with the DAG scheduler, then once with the barrier one
        const int n_runs = 6;
        for (int run = 0; run < n_runs; ++run) {
            const int n_threads = run < 4 ? run + 1 : prog.uni(1, 4);
            ggml_cpu_set_sched_mode(run == n_runs - 1 ? GGML_SCHED_BARRIER : GGML_SCHED_DAG);
            CAPTURE(n_threads);
            CAPTURE(run);
            for (int b = 0; b < NBUF; ++b) std::memcpy(prog.bufs[b]->data, prog.init[b].data(), BUF_N * sizeof(float));
            REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
            for (int b = 0; b < NBUF; ++b) {
                const float * got = (const float *) prog.bufs[b]->data;
                for (int i = 0; i < BUF_N; ++i) {
                    INFO("buf" << b << "[" << i << "]");
                    REQUIRE(got[i] == prog.ref[b][i]);
                }
            }
            for (size_t v = 0; v < prog.vals.size(); ++v) {
                const value & val = prog.vals[v];
                const float * got = (const float *) val.t->data;
                for (size_t i = 0; i < val.ref.size(); ++i) {
                    INFO("v" << v << "[" << i << "]");
                    REQUIRE(got[i] == val.ref[i]);
                }
            }
        }
        ggml_free(ctx);
    }
    ggml_cpu_set_sched_mode(saved_mode);
    MESSAGE(n_programs << " programs, " << total_ops << " ops, " << total_edges << " control edges");
    CHECK(total_edges > total_ops / 2); // the programs do exercise the edges
}

// ---- the validator against a brute-force reading of its rules ---------------------------------
namespace {

bool is_view_op(const ggml_tensor * t) {
    return t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE;
}

struct span {
    const ggml_tensor * root;
    size_t b, e;
    bool write;
};
span extent(const ggml_tensor * t, bool write) {
    const ggml_tensor * root = t->view_src ? t->view_src : t;
    const size_t b = t->view_src ? t->view_offs : 0;
    return {root, b, b + ggml_nbytes(t), write};
}

// misordered edges + unordered conflicting node pairs (one per pair and root), O(n^2)
int brute_force_hazards(const std::vector<ggml_tensor *> & order) {
    const int n = (int) order.size();
    std::map<const ggml_tensor *, int> pos;
    for (int i = 0; i < n; ++i) pos.emplace(order[i], i);
    // predecessors through views (in the graph or not)
    std::vector<std::set<int>> preds(n);
    for (int i = 0; i < n; ++i) {
        std::vector<const ggml_tensor *> todo;
        for (int s = 0; s < GGML_MAX_SRC; ++s) if (order[i]->src[s]) todo.push_back(order[i]->src[s]);
        for (int d = 0; d < order[i]->n_deps; ++d) todo.push_back(order[i]->deps[d].tensor);
        while (!todo.empty()) {
            const ggml_tensor * t = todo.back();
            todo.pop_back();
            auto it = pos.find(t);
            if (it != pos.end() && it->second != i) preds[i].insert(it->second);
            else if (it == pos.end() && is_view_op(t)) {
                for (int s = 0; s < GGML_MAX_SRC; ++s) if (t->src[s]) todo.push_back(t->src[s]);
                for (int d = 0; d < t->n_deps; ++d) todo.push_back(t->deps[d].tensor);
            }
        }
    }
    int count = 0;
    for (int i = 0; i < n; ++i) for (int p : preds[i]) if (p > i) ++count;
    // reach[i][j]: j is an ancestor of i
    std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
    for (int i = 0; i < n; ++i) {
        std::vector<int> todo(preds[i].begin(), preds[i].end());
        while (!todo.empty()) {
            const int j = todo.back();
            todo.pop_back();
            if (reach[i][j]) continue;
            reach[i][j] = 1;
            for (int k : preds[j]) todo.push_back(k);
        }
    }
    std::vector<std::vector<span>> acc(n);
    for (int i = 0; i < n; ++i) {
        for (int s = 0; s < GGML_MAX_SRC; ++s) if (order[i]->src[s]) acc[i].push_back(extent(order[i]->src[s], false));
        acc[i].push_back(extent(order[i], true));
    }
    for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
            if (reach[i][j] || reach[j][i]) continue;
            std::set<const ggml_tensor *> roots;
            for (const span & a : acc[i]) {
                for (const span & b : acc[j]) {
                    if (a.root == b.root && a.b < b.e && b.b < a.e && a.b < a.e && b.b < b.e && (a.write || b.write)) roots.insert(a.root);
                }
            }
            count += (int) roots.size();
        }
    }
    return count;
}

} // namespace

TEST_CASE("random programs: ggml_graph_validate matches a brute-force check") {
    const int n_programs = env_int("KVG_HAZ_VALIDATE_PROGRAMS", 1000);
    int total_hazards = 0, unordered_in_creation_order = 0;
    for (int p = 0; p < n_programs; ++p) {
        const unsigned seed = 777u + (unsigned) p;
        ggml_init_params ip = {4u << 20, nullptr, false};
        ggml_context * ctx = ggml_init(ip);
        REQUIRE(ctx != nullptr);
        program prog(seed, ctx);
        const int n_steps = prog.uni(2, 30);
        for (int s = 0; s < n_steps; ++s) {
            if (prog.chance(5)) ggml_hazards_reset(ctx); // drops edges: unordered pairs appear
            prog.step();
        }
        const std::string desc = "seed " + std::to_string(seed) + "\nprogram:\n" + prog.text.str();
        INFO(desc);

        // creation order, then a random order (misordered edges), then a partial shuffle
        std::vector<ggml_tensor *> order = prog.ops;
        for (int variant = 0; variant < 3; ++variant) {
            CAPTURE(variant);
            if (variant == 1) std::shuffle(order.begin(), order.end(), prog.rng);
            if (variant == 2 && order.size() > 1) {
                order = prog.ops;
                std::swap(order[prog.uni(0, (int) order.size() - 1)], order[prog.uni(0, (int) order.size() - 1)]);
            }
            ggml_cgraph * g = ggml_new_graph(ctx);
            for (ggml_tensor * t : order) ggml_graph_add_node(g, t);
            const int want = brute_force_hazards(order);
            std::vector<ggml_hazard> out(want + 1);
            const int got = ggml_graph_validate(g, out.data(), (int) out.size(), nullptr);
            REQUIRE(got == want);
            total_hazards += got;
            if (variant == 0) unordered_in_creation_order += got;
            for (int k = 0; k < got; ++k) {
                const ggml_hazard & h = out[k];
                REQUIRE(h.first != nullptr);
                REQUIRE(h.second != nullptr);
                CHECK(std::find(order.begin(), order.end(), h.first) < std::find(order.begin(), order.end(), h.second));
            }
        }
        ggml_free(ctx);
    }
    MESSAGE(n_programs << " programs, " << total_hazards << " hazards found, " << unordered_in_creation_order
                       << " in creation order (edges dropped by resets)");
    CHECK(total_hazards > 0);
    CHECK(unordered_in_creation_order > 0);
}
