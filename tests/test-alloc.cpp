// Graph memory planner: results with the planned buffer equal results where every tensor
// has its own memory, and an independent checker proves that tensors sharing bytes are
// ordered by edges (except declared in-place pairs).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace {

const int N = 24, M = 7; // every tensor of the random programs is [N, M]

struct program {
    std::vector<ggml_tensor *> inputs;  // filled after allocation
    std::vector<ggml_tensor *> outputs;
    ggml_cgraph * graph = nullptr;
};

// Builds the same random program in any context (seeded, so both builds match).
program build_program(ggml_context * ctx, uint32_t seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return (int) (rng() % (uint32_t) n); };
    program p;
    std::vector<ggml_tensor *> pool;
    for (int i = 0; i < 3; ++i) {
        ggml_tensor * in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, M);
        ggml_format_name(in, "in%d", i);
        ggml_set_input(in);
        p.inputs.push_back(in);
        pool.push_back(in);
    }
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, N);
    ggml_set_name(w, "w");
    ggml_set_input(w);
    p.inputs.push_back(w);

    const int n_ops = 12 + pick(20);
    for (int k = 0; k < n_ops; ++k) {
        ggml_tensor * a = pool[pool.size() - 1 - pick(std::min<int>(4, (int) pool.size()))];
        ggml_tensor * b = pool[pick((int) pool.size())];
        ggml_tensor * r = nullptr;
        switch (pick(9)) {
            case 0: r = ggml_add(ctx, a, b); break;
            case 1: r = ggml_mul(ctx, a, b); break;
            case 2: r = ggml_scale(ctx, a, 0.5f + (float) pick(3)); break;
            case 3: r = ggml_silu(ctx, a); break;
            case 4: r = ggml_rms_norm(ctx, a, 1e-5f); break;
            case 5: r = ggml_mul_mat(ctx, w, a); break;
            case 6: r = ggml_sub(ctx, a, b); break;
            case 7: {
                // write the first half of a fresh copy of b through a view, then read it whole
                ggml_tensor * dst = ggml_scale(ctx, b, 1.0f);
                ggml_tensor * half = ggml_view_2d(ctx, dst, N, M / 2, dst->nb[1], 0);
                ggml_tensor * src = ggml_view_2d(ctx, a, N, M / 2, a->nb[1], 0);
                ggml_cpy(ctx, ggml_sqr(ctx, src), half);
                r = ggml_add(ctx, dst, a); // reads dst after the write (RAW edge)
                break;
            }
            default: r = ggml_add(ctx, ggml_cont(ctx, ggml_transpose(ctx, ggml_cont(ctx, ggml_transpose(ctx, a)))), b); break;
        }
        pool.push_back(r);
        if (pick(5) == 0) {
            ggml_set_output(r);
            p.outputs.push_back(r);
        }
    }
    ggml_set_output(pool.back());
    p.outputs.push_back(pool.back());
    p.graph = ggml_new_graph(ctx);
    for (ggml_tensor * o : p.outputs) ggml_build_forward_expand(p.graph, o);
    return p;
}

void fill_inputs(const program & p, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (ggml_tensor * t : p.inputs) {
        float * d = (float *) t->data; // null when the graph does not use the input
        for (int64_t i = 0; i < ggml_nelements(t); ++i) {
            const float v = u(rng) * (t->ne[1] == N ? 0.2f : 1.0f);
            if (d) d[i] = v;
        }
    }
}

const ggml_tensor * root_of(const ggml_tensor * t) { return t->view_src ? t->view_src : t; }

// Independent checker: tensors placed in the buffer share bytes only if every node that
// touches the earlier one is an ancestor (over src[] and control edges) of the node that
// produces the later one; the producer itself may touch it only as a declared in-place pair.
std::vector<std::string> check_sharing(ggml_cgraph * g, const char * base, size_t size) {
    const int n = ggml_graph_n_nodes(g);
    std::map<const ggml_tensor *, int> index;
    for (int i = 0; i < n; ++i) index[ggml_graph_node(g, i)] = i;
    // ancestors by BFS over predecessors
    std::vector<std::set<int>> anc(n);
    std::vector<char> done(n, 0);
    std::function<const std::set<int> &(int)> ancestors = [&](int i) -> const std::set<int> & {
        if (done[i]) return anc[i];
        const ggml_tensor * t = ggml_graph_node(g, i);
        std::vector<const ggml_tensor *> preds;
        for (int s = 0; s < GGML_MAX_SRC; ++s) if (t->src[s]) preds.push_back(t->src[s]);
        for (int d = 0; d < ggml_n_control_deps(t); ++d) preds.push_back(ggml_get_control_dep(t, d, nullptr));
        for (const ggml_tensor * p : preds) {
            auto it = index.find(p);
            if (it == index.end()) continue;
            anc[i].insert(it->second);
            const auto & pa = ancestors(it->second);
            anc[i].insert(pa.begin(), pa.end());
        }
        done[i] = 1;
        return anc[i];
    };
    // placed roots and the nodes touching them
    std::map<const ggml_tensor *, std::set<int>> touch;
    std::vector<const ggml_tensor *> placed;
    auto in_buffer = [&](const ggml_tensor * t) { return (const char *) t->data >= base && (const char *) t->data < base + size; };
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * t = ggml_graph_node(g, i);
        if (t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE) continue;
        for (int s = 0; s < GGML_MAX_SRC; ++s) if (t->src[s]) touch[root_of(t->src[s])].insert(i);
        touch[root_of(t)].insert(i);
        if (!t->view_src && in_buffer(t)) placed.push_back(t);
    }
    std::vector<std::string> problems;
    auto ordered = [&](const ggml_tensor * a, const ggml_tensor * b) {
        // may b's bytes replace a's? (b is produced by a node)
        if (!index.count(b)) return false;
        const int pb = index[b];
        const auto & ab = ancestors(pb);
        for (int u : touch[a]) {
            if (u == pb) {
                if (!(b->src[0] == a && b->data == a->data)) return false; // undeclared overwrite
                continue;
            }
            if (!ab.count(u)) return false;
        }
        return true;
    };
    for (size_t x = 0; x < placed.size(); ++x) {
        for (size_t y = x + 1; y < placed.size(); ++y) {
            const ggml_tensor * a = placed[x];
            const ggml_tensor * b = placed[y];
            const char * a0 = (const char *) a->data;
            const char * b0 = (const char *) b->data;
            if (!(a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a))) continue;
            if (!ordered(a, b) && !ordered(b, a)) problems.push_back(std::string(a->name) + " ~ " + b->name);
        }
    }
    return problems;
}

ggml_context * new_ctx(bool no_alloc) {
    ggml_init_params params = {(size_t) (no_alloc ? 2 : 16) * 1024 * 1024, nullptr, no_alloc};
    return ggml_init(params);
}

} // namespace

TEST_CASE("random graphs: planned buffer gives the same results as separate memory") {
    int total_inplace = 0;
    for (uint32_t seed = 1; seed <= 60; ++seed) {
        ggml_context * ref_ctx = new_ctx(false);
        program ref = build_program(ref_ctx, seed);
        fill_inputs(ref, seed);
        REQUIRE(ggml_graph_compute_with_ctx(ref_ctx, ref.graph, 2) == GGML_STATUS_SUCCESS);

        ggml_context * ctx = new_ctx(true);
        program p = build_program(ctx, seed);
        ggml_gallocr_t ga = ggml_gallocr_new(NULL);
        REQUIRE(ggml_gallocr_alloc_graph(ga, p.graph));
        fill_inputs(p, seed);
        ggml_context * work = new_ctx(false);
        const int threads = 1 + (int) (seed % 3);
        REQUIRE(ggml_graph_compute_with_ctx(work, p.graph, threads) == GGML_STATUS_SUCCESS);

        REQUIRE(p.outputs.size() == ref.outputs.size());
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const float * a = (const float *) p.outputs[o]->data;
            const float * b = (const float *) ref.outputs[o]->data;
            for (int64_t i = 0; i < ggml_nelements(p.outputs[o]); ++i) {
                INFO("seed " << seed << " output " << o << " element " << i);
                REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
            }
        }
        const auto problems = check_sharing(p.graph, (const char *) ggml_gallocr_get_buffer_base(ga), ggml_gallocr_get_buffer_size(ga, 0));
        INFO("seed " << seed << ": " << (problems.empty() ? "" : problems[0]));
        CHECK(problems.empty());
        ggml_gallocr_stats st = ggml_gallocr_get_stats(ga);
        total_inplace += st.n_inplace;
        CHECK(st.buffer_bytes <= st.sum_tensor_bytes + 64 * (size_t) st.n_tensors);
        ggml_gallocr_free(ga);
        ggml_free(work);
        ggml_free(ctx);
        ggml_free(ref_ctx);
    }
    CHECK(total_inplace > 0);
}

TEST_CASE("a changed setting of the allocator is a new plan: set_inplace(false) after a plan shares nothing") {
    int checked = 0;
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        ggml_context * ctx = new_ctx(true);
        program p = build_program(ctx, seed);
        ggml_gallocr_t ga = ggml_gallocr_new(NULL);
        REQUIRE(ggml_gallocr_alloc_graph(ga, p.graph));
        if (ggml_gallocr_get_stats(ga).n_inplace > 0) {
            ggml_gallocr_set_inplace(ga, false);
            REQUIRE(ggml_gallocr_alloc_graph(ga, p.graph));
            CHECK(ggml_gallocr_get_stats(ga).n_plans == 2);
            CHECK(ggml_gallocr_get_stats(ga).n_inplace == 0);
            // no two nodes of the graph share bytes now
            for (int i = 0; i < ggml_graph_n_nodes(p.graph); ++i) {
                const ggml_tensor * a = ggml_graph_node(p.graph, i);
                if (a->view_src) continue;
                for (int j = i + 1; j < ggml_graph_n_nodes(p.graph); ++j) {
                    const ggml_tensor * b = ggml_graph_node(p.graph, j);
                    if (b->view_src || b->src[0] != a) continue;
                    CHECK(a->data != b->data); // what an in-place op would have shared
                }
            }
            ++checked;
        }
        ggml_gallocr_free(ga);
        ggml_free(ctx);
    }
    CHECK(checked > 0);
}

TEST_CASE("reuse across computes: plan once, replay while the graph is unchanged") {
    ggml_context * ctx = new_ctx(true);
    program p = build_program(ctx, 7);
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    REQUIRE(ggml_gallocr_reserve(ga, p.graph));
    const size_t size = ggml_gallocr_get_buffer_size(ga, 0);
    ggml_context * work = new_ctx(false);
    std::vector<float> first;
    for (int step = 0; step < 10; ++step) {
        REQUIRE(ggml_gallocr_alloc_graph(ga, p.graph));
        fill_inputs(p, 7);
        REQUIRE(ggml_graph_compute_with_ctx(work, p.graph, 2) == GGML_STATUS_SUCCESS);
        const ggml_tensor * out = p.outputs.back();
        std::vector<float> now((const float *) out->data, (const float *) out->data + ggml_nelements(out));
        if (step == 0) first = now;
        CHECK(now == first);
    }
    CHECK(ggml_gallocr_get_stats(ga).n_plans == 1);
    CHECK(ggml_gallocr_get_buffer_size(ga, 0) == size);
    ggml_gallocr_free(ga);
    ggml_free(work);
    ggml_free(ctx);
}

// Two independent branches. A planner that decides reuse by node order gives branch 2's
// result the bytes branch 1 still reads: fine one node at a time, a race under the DAG
// executor (nothing orders the two). With edges the planner does not share them.
static ggml_cgraph * two_branches(ggml_context * ctx, std::vector<ggml_tensor *> & ins) {
    ggml_tensor * in1 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, M);
    ggml_tensor * in2 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, M);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, N);
    for (ggml_tensor * t : {in1, in2, w}) { ggml_set_input(t); ins.push_back(t); }
    ggml_tensor * x = ggml_set_name(ggml_scale(ctx, in1, 2.0f), "x");
    ggml_tensor * y = ggml_set_name(ggml_mul_mat(ctx, w, x), "y");
    ggml_tensor * out1 = ggml_set_name(ggml_add(ctx, y, in1), "out1");
    ggml_tensor * z = ggml_set_name(ggml_silu(ctx, in2), "z");
    ggml_tensor * out2 = ggml_set_name(ggml_scale(ctx, z, 3.0f), "out2");
    ggml_set_output(out1);
    ggml_set_output(out2);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out1);
    ggml_build_forward_expand(g, out2);
    return g;
}

TEST_CASE("order-only reuse is unsafe for the DAG executor; edge-aware reuse is not") {
    for (bool order_only : {true, false}) {
        ggml_context * ctx = new_ctx(true);
        std::vector<ggml_tensor *> ins;
        ggml_cgraph * g = two_branches(ctx, ins);
        ggml_gallocr_t ga = ggml_gallocr_new(NULL);
        ggml_gallocr_set_order_only(ga, order_only);
        ggml_gallocr_set_inplace(ga, false);
        REQUIRE(ggml_gallocr_alloc_graph(ga, g));
        const auto problems = check_sharing(g, (const char *) ggml_gallocr_get_buffer_base(ga), ggml_gallocr_get_buffer_size(ga, 0));
        if (order_only) {
            CHECK(!problems.empty()); // z took bytes of x or y, which branch 1 may still be using
        } else {
            INFO((problems.empty() ? std::string() : problems[0]));
            CHECK(problems.empty());
        }
        ggml_gallocr_free(ga);
        ggml_free(ctx);
    }
}

TEST_CASE("in-place: a reader listed after the candidate blocks it; the node list and edges stay as built") {
    ggml_context * ctx = new_ctx(true);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_set_input(a);
    ggml_set_input(b);
    ggml_tensor * x = ggml_set_name(ggml_concat(ctx, a, b, 1), "x");   // [8, 6]
    ggml_tensor * c = ggml_set_name(ggml_scale(ctx, x, 2.0f), "c");    // could overwrite x
    ggml_tensor * r = ggml_set_name(ggml_sum_rows(ctx, x), "r");       // reads x
    ggml_set_output(c);
    ggml_set_output(r);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, c); // order: x, c, r -- r blocks in-place
    ggml_build_forward_expand(g, r);
    std::vector<ggml_tensor *> before(ggml_graph_nodes(g), ggml_graph_nodes(g) + ggml_graph_n_nodes(g));
    const int deps_before = ggml_n_control_deps(c);
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    REQUIRE(ggml_gallocr_alloc_graph(ga, g));
    CHECK(c->data != x->data);
    CHECK(ggml_n_control_deps(c) == deps_before);
    CHECK(std::vector<ggml_tensor *>(ggml_graph_nodes(g), ggml_graph_nodes(g) + ggml_graph_n_nodes(g)) == before);
    for (int i = 0; i < 24; ++i) {
        ((float *) a->data)[i] = (float) i;
        ((float *) b->data)[i] = (float) (100 + i);
    }
    ggml_context * work = new_ctx(false);
    REQUIRE(ggml_graph_compute_with_ctx(work, g, 2) == GGML_STATUS_SUCCESS);
    for (int row = 0; row < 6; ++row) {
        float expect = 0;
        for (int i = 0; i < 8; ++i) expect += row < 3 ? (float) (row * 8 + i) : (float) (100 + (row - 3) * 8 + i);
        CHECK(((float *) r->data)[row] == doctest::Approx(expect)); // sum of x before it was scaled
        CHECK(((float *) c->data)[row * 8] == doctest::Approx(2.0f * (row < 3 ? row * 8 : 100 + (row - 3) * 8)));
    }
    const auto problems = check_sharing(g, (const char *) ggml_gallocr_get_buffer_base(ga), ggml_gallocr_get_buffer_size(ga, 0));
    CHECK(problems.empty());
    ggml_gallocr_free(ga);
    ggml_free(work);
    ggml_free(ctx);
}

TEST_CASE("KV-cache write through set_rows keeps its source alive and is read after the write") {
    // the cache lives in its own buffer, like a runtime's KV cache
    ggml_context * cache_ctx = new_ctx(false);
    ggml_tensor * cache = ggml_new_tensor_2d(cache_ctx, GGML_TYPE_F32, N, 16);
    for (int i = 0; i < N * 16; ++i) ((float *) cache->data)[i] = -1.0f;

    ggml_context * ctx = new_ctx(true);
    ggml_tensor * in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, 2);
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    ggml_set_input(in);
    ggml_set_input(idx);
    ggml_tensor * k = ggml_scale(ctx, in, 3.0f);
    ggml_set_rows(ctx, cache, k, idx);                               // not expanded on purpose
    ggml_tensor * kview = ggml_view_2d(ctx, cache, N, 8, cache->nb[1], 0);
    ggml_tensor * s = ggml_sum_rows(ctx, kview);
    ggml_tensor * t = ggml_scale(ctx, s, 1.0f);
    ggml_set_output(t);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, t);
    ggml_gallocr_t ga = ggml_gallocr_new(NULL);
    REQUIRE(ggml_gallocr_alloc_graph(ga, g));
    for (int i = 0; i < N * 2; ++i) ((float *) in->data)[i] = 1.0f;
    ((int32_t *) idx->data)[0] = 2;
    ((int32_t *) idx->data)[1] = 5;
    ggml_context * work = new_ctx(false);
    REQUIRE(ggml_graph_compute_with_ctx(work, g, 2) == GGML_STATUS_SUCCESS);
    for (int row = 0; row < 8; ++row) {
        const float expect = (row == 2 || row == 5) ? 3.0f * N : -1.0f * N;
        CHECK(((float *) t->data)[row] == doctest::Approx(expect));
    }
    ggml_gallocr_free(ga);
    ggml_free(work);
    ggml_free(ctx);
    ggml_free(cache_ctx);
}

TEST_CASE("ggml_cpu_alloc_ctx_tensors places every tensor of a no_alloc context") {
    ggml_context * ctx = new_ctx(true);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 33);
    ggml_tensor * v = ggml_view_1d(ctx, a, 5, a->nb[1]);
    ggml_cpu_buffer_t buf = ggml_cpu_alloc_ctx_tensors(ctx);
    REQUIRE(buf != nullptr);
    CHECK(ggml_cpu_buffer_size(buf) >= ggml_nbytes(a) + ggml_nbytes(b));
    REQUIRE(a->data != nullptr);
    REQUIRE(b->data != nullptr);
    CHECK(v->data == (char *) a->data + a->nb[1]);
    const char * lo = (const char *) ggml_cpu_buffer_base(buf);
    CHECK((const char *) a->data >= lo);
    CHECK((const char *) b->data + ggml_nbytes(b) <= lo + ggml_cpu_buffer_size(buf));
    CHECK(!((const char *) a->data < (const char *) b->data + ggml_nbytes(b) && (const char *) b->data < (const char *) a->data + ggml_nbytes(a)));
    ggml_cpu_buffer_free(buf);
    ggml_free(ctx);
}
