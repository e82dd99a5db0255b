// The LLM ops of ops-llm.cpp (set/acc, glu, argsort/top_k, mul_mat_id, soft_max_ext_inplace,
// graph_cpy, ftype) against naive double-precision loops written here, with the harness of
// ops-common.h; and the dependency edges of set/acc: what they read and write decides
// which readers of the same bytes run before and after them, with 1, 2 and 4 threads.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "edges-common.h"
#include "ops-common.h"
#include "ggml-alloc.h"

#include <numeric>

namespace {

// ---- set / acc reference ----------------------------------------------------------------------
// mem: the logical values of a contiguous buffer of element size es; b's element c lands at
// byte base + c0*es + c1*nb1 + c2*nb2 + c3*nb3 (set: replaces, acc: adds).
void ref_set(std::vector<double> & mem, size_t es, size_t base, const int64_t * bne, const size_t * nb,
             const std::vector<float> & bv, bool acc) {
    for (int64_t i = 0; i < count(bne); ++i) {
        int64_t c[4];
        unravel(bne, i, c);
        const size_t byte = base + c[0] * es + c[1] * nb[0] + c[2] * nb[1] + c[3] * nb[2];
        REQUIRE(byte % es == 0);
        double & m = mem[byte / es];
        m = acc ? m + bv[i] : bv[i];
    }
}

ggml_tensor * root_of(ggml_tensor * t) { return t->view_src ? t->view_src : t; }

// a in any layout, the padding of its root zeroed (set/acc in place may write there)
ggml_tensor * make_padded(ggml_context * ctx, ggml_type type, const int64_t * ne, Layout l, const std::vector<float> & v) {
    ggml_tensor * a = make_input(ctx, type, ne, l, v);
    std::memset(root_of(a)->data, 0, ggml_nbytes(root_of(a)));
    set_values(a, v);
    return a;
}

struct SetCase {
    int64_t ane[4], bne[4];
    int64_t rows[3];        // region strides nb1, nb2, nb3 in rows of the result
    int64_t off_row, off_col;
};

// One set/acc case: a of type ta in layout la, b of type tb in layout lb; checks the values of
// the result (not in place) or of a's whole root buffer (in place) against ref_set.
void check_set_case(const SetCase & sc, ggml_op op, bool inplace, ggml_type ta, Layout la, ggml_type tb, Layout lb) {
    const std::vector<float> av = random_values(count(sc.ane), 11, -2.0f, 2.0f);
    const std::vector<float> bv = random_values(count(sc.bne), 12, -2.0f, 2.0f);
    std::vector<float> before, b_read;
    size_t nb[3] = {}, base = 0;
    const size_t es = ggml_type_size(ta);
    const std::vector<float> got = run_tasks([&](ggml_context * ctx) {
        ggml_tensor * a = make_padded(ctx, ta, sc.ane, la, av);
        ggml_tensor * b = make_input(ctx, tb, sc.bne, lb, bv);
        const size_t row = inplace ? a->nb[1] : es * sc.ane[0]; // the result's row stride
        for (int i = 0; i < 3; ++i) nb[i] = row * sc.rows[i];
        const size_t offset = row * sc.off_row + es * sc.off_col;
        ggml_tensor * r = op == GGML_OP_SET ? (inplace ? ggml_set_inplace : ggml_set)(ctx, a, b, nb[0], nb[1], nb[2], offset)
                                            : (inplace ? ggml_acc_inplace : ggml_acc)(ctx, a, b, nb[0], nb[1], nb[2], offset);
        REQUIRE(r->op == op);
        CHECK((r->view_src != nullptr) == inplace);
        ggml_tensor * out = inplace ? root_of(a) : r;
        before = values(inplace ? out : a);
        b_read = values(b);
        base = (inplace ? a->view_offs : 0) + offset;
        return Built{r, out};
    });
    std::vector<double> want(before.begin(), before.end());
    ref_set(want, es, base, sc.bne, nb, b_read, op == GGML_OP_ACC);
    for (double & w : want) w = ref_store(ta, w);
    const bool exact32 = ta == GGML_TYPE_F32 || ta == GGML_TYPE_I32;
    check_close(got, want, exact32 ? 1e-6 : 0.0, exact32 ? 1e-6 : 4e-3);
}

const SetCase kSetCases[] = {
    {{6, 5, 4, 3}, {3, 2, 2, 1}, {1, 5, 20}, 7, 1},  // a block inside a 4-d tensor (ggml's test)
    {{6, 5, 4, 3}, {6, 5, 4, 3}, {1, 5, 20}, 0, 0},  // the whole tensor
    {{10, 3, 1, 1}, {7, 1, 1, 1}, {1, 1, 1}, 1, 2},  // a 1-d run
    {{8, 6, 1, 1}, {3, 3, 1, 1}, {2, 6, 6}, 1, 4},   // every other row
    {{4, 4, 3, 1}, {4, 2, 3, 1}, {1, 2, 12}, 1, 0},  // planes two rows apart
};

} // namespace

TEST_CASE("set and acc against a byte-addressed reference: shapes, strides, layouts, types, in place") {
    for (ggml_op op : {GGML_OP_SET, GGML_OP_ACC}) {
        for (bool inplace : {false, true}) {
            for (const SetCase & sc : kSetCases) {
                const std::string op_name = ggml_op_name(op);
            CAPTURE(op_name); CAPTURE(inplace); CAPTURE(sc.ane[0]); CAPTURE(sc.bne[0]);
                check_set_case(sc, op, inplace, GGML_TYPE_F32, CONTIG, GGML_TYPE_F32, CONTIG);
                check_set_case(sc, op, inplace, GGML_TYPE_F32, CONTIG, GGML_TYPE_F32, PERMUTED);   // strided b
                check_set_case(sc, op, inplace, GGML_TYPE_F32, STRIDED_ROWS, GGML_TYPE_F32, TRANSPOSED); // strided a
                check_set_case(sc, op, inplace, GGML_TYPE_F16, CONTIG, GGML_TYPE_F16, STRIDED_ROWS);
                if (op == GGML_OP_SET) {
                    check_set_case(sc, op, inplace, GGML_TYPE_F16, CONTIG, GGML_TYPE_F32, CONTIG); // b converted
                    check_set_case(sc, op, inplace, GGML_TYPE_I32, CONTIG, GGML_TYPE_I32, CONTIG);
                }
            }
        }
    }
}

TEST_CASE("set_1d and set_2d use a's strides; op params in ggml's layout") {
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 8, 6, 2);
    ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 3, 2);
    for (bool inplace : {false, true}) {
        ggml_tensor * s1 = (inplace ? ggml_set_1d_inplace : ggml_set_1d)(c.ctx, a, b, 12);
        ggml_tensor * s2 = (inplace ? ggml_set_2d_inplace : ggml_set_2d)(c.ctx, a, b, 64, 16);
        const int32_t want1[5] = {32, 192, 384, 12, inplace};
        const int32_t want2[5] = {64, 192, 384, 16, inplace};
        CHECK(std::memcmp(s1->op_params, want1, sizeof(want1)) == 0);
        CHECK(std::memcmp(s2->op_params, want2, sizeof(want2)) == 0);
    }
}

// ---- set/acc and the dependency edges -----------------------------------------------------------
// A cache C [D, ROWS] (F32) written by set/acc in place and read through other views of C.
namespace {

constexpr int D = 8, ROWS = 16;

struct Cache {
    ggml_tensor * c;
    std::vector<float> init;
    explicit Cache(ggml_context * ctx) {
        c = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, ROWS);
        init = random_values(D * ROWS, 5);
        set_values(c, init);
    }
    ggml_tensor * rows(ggml_context * ctx, int r0, int n) const { return ggml_view_2d(ctx, c, D, n, c->nb[1], r0 * c->nb[1]); }
    // b [D, n] written into (or added onto) rows [r0, r0 + n)
    ggml_tensor * write(ggml_context * ctx, ggml_op op, ggml_tensor * b, int r0) const {
        return op == GGML_OP_SET ? ggml_set_2d_inplace(ctx, c, b, c->nb[1], r0 * c->nb[1])
                                 : ggml_acc_inplace(ctx, c, b, c->nb[1], c->nb[2], c->nb[3], r0 * c->nb[1]);
    }
};

ggml_tensor * input(ggml_context * ctx, int n, unsigned seed) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, n);
    set_values(t, random_values(D * n, seed));
    return t;
}

// expected cache rows after a set/acc of b's values at row r0
std::vector<float> after(std::vector<float> mem, ggml_op op, const std::vector<float> & b, int r0) {
    for (size_t i = 0; i < b.size(); ++i) mem[r0 * D + i] = op == GGML_OP_SET ? b[i] : mem[r0 * D + i] + b[i];
    return mem;
}

std::vector<float> slice(const std::vector<float> & mem, int r0, int n) {
    return std::vector<float>(mem.begin() + r0 * D, mem.begin() + (r0 + n) * D);
}

// f(op, n_threads, ctx, cache) for set and acc in place with 1, 2 and 4 threads, each in a
// fresh context holding a fresh cache
template <class F> void each_op_and_thread_count(F f) {
    for (ggml_op op : {GGML_OP_SET, GGML_OP_ACC}) {
        for (int n_threads : {1, 2, 4}) {
            const std::string op_name = ggml_op_name(op);
            CAPTURE(op_name); CAPTURE(n_threads);
            Ctx c;
            Cache cache(c.ctx);
            f(op, n_threads, c.ctx, cache);
        }
    }
}

// n_reversed: edges the node list contradicts (the validator counts them; compute honours them;
// expansion leaves none)
void compute_threads(ggml_context * ctx, ggml_cgraph * gf, int n_threads, int n_reversed) {
    CHECK(ggml_graph_validate(gf, nullptr, 0, nullptr) == n_reversed);
    REQUIRE(ggml_graph_compute_with_ctx(ctx, gf, n_threads) == GGML_STATUS_SUCCESS);
}

} // namespace

TEST_CASE("set/acc in place: a later reader of the cache through another view sees the write (RAW, pulled in)") {
    each_op_and_thread_count([](ggml_op op, int n_threads, ggml_context * ctx, const Cache & cache) {
        ggml_tensor * x = input(ctx, 4, 7);
        ggml_tensor * b = ggml_scale(ctx, x, 2.0f);
        ggml_tensor * w = cache.write(ctx, op, b, 5);
        ggml_tensor * reader = ggml_scale(ctx, cache.rows(ctx, 3, 6), 1.0f); // rows 3..8 overlap 5..8
        ggml_tensor * apart = ggml_scale(ctx, cache.rows(ctx, 10, 4), 1.0f); // rows 10..13 do not
        CHECK(dep_kind(reader, w) == GGML_DEP_RAW);
        CHECK(dep_kind(apart, w) == -1); // only the region is written
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, reader); // nothing expands w: the RAW edge pulls it in
        ggml_build_forward_expand(gf, apart);
        REQUIRE(node_index(gf, w) >= 0);
        CHECK(node_index(gf, w) < node_index(gf, reader));
        compute_threads(ctx, gf, n_threads, 0);
        const std::vector<float> mem = after(cache.init, op, values(b), 5);
        CHECK(bit_equal(values(cache.c), mem));
        CHECK(bit_equal(values(reader), slice(mem, 3, 6)));
        CHECK(bit_equal(values(apart), slice(cache.init, 10, 4)));
    });
}

TEST_CASE("set/acc in place: an earlier reader runs before the write (WAR), even when listed after it") {
    each_op_and_thread_count([](ggml_op op, int n_threads, ggml_context * ctx, const Cache & cache) {
        ggml_tensor * early = ggml_scale(ctx, cache.rows(ctx, 6, 3), 1.0f);
        ggml_tensor * early_apart = ggml_scale(ctx, cache.rows(ctx, 0, 4), 1.0f);
        ggml_tensor * x = input(ctx, 4, 9);
        ggml_tensor * w = cache.write(ctx, op, x, 5);
        CHECK(dep_kind(w, early) == GGML_DEP_WAR);
        CHECK(dep_kind(w, early_apart) == -1);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, w); // the write first: expanding the reader moves it before
        ggml_build_forward_expand(gf, early);
        ggml_build_forward_expand(gf, early_apart);
        CHECK(node_index(gf, early) < node_index(gf, w));
        compute_threads(ctx, gf, n_threads, 0);
        CHECK(bit_equal(values(early), slice(cache.init, 6, 3)));
        CHECK(bit_equal(values(early_apart), slice(cache.init, 0, 4)));
        CHECK(bit_equal(values(cache.c), after(cache.init, op, values(x), 5)));
    });
}

TEST_CASE("set/acc in place: overlapping writes keep program order (WAW; acc reads the region)") {
    for (int n_threads : {1, 2, 4}) {
        CAPTURE(n_threads);
        Ctx c;
        Cache cache(c.ctx);
        ggml_tensor * x1 = input(c.ctx, 6, 21), * x2 = input(c.ctx, 4, 22), * x3 = input(c.ctx, 2, 23);
        ggml_tensor * w1 = cache.write(c.ctx, GGML_OP_SET, x1, 2);  // rows 2..7
        ggml_tensor * w2 = cache.write(c.ctx, GGML_OP_ACC, x2, 4);  // rows 4..7: reads w1's bytes
        ggml_tensor * w3 = cache.write(c.ctx, GGML_OP_SET, x3, 6);  // rows 6..7
        CHECK(dep_kind(w2, w1) >= 0); // RAW (its read) or WAW: either orders it
        CHECK(dep_kind(w3, w2) >= 0);
        ggml_cgraph * gf = ggml_new_graph(c.ctx);
        for (ggml_tensor * t : {w3, w2, w1}) ggml_build_forward_expand(gf, t); // listed backwards
        // w2's read of the region is a RAW edge: it pulls w1 in before itself; w3 -> w2 (WAW)
        // does not pull, but expanding w2 moves it before w3
        CHECK(node_index(gf, w1) < node_index(gf, w2));
        CHECK(node_index(gf, w2) < node_index(gf, w3));
        CHECK(dep_kind(w2, w1) == GGML_DEP_RAW);
        CHECK(dep_kind(w3, w2) == GGML_DEP_WAW);
        compute_threads(c.ctx, gf, n_threads, 0);
        std::vector<float> mem = after(cache.init, GGML_OP_SET, values(x1), 2);
        mem = after(mem, GGML_OP_ACC, values(x2), 4);
        mem = after(mem, GGML_OP_SET, values(x3), 6);
        CHECK(bit_equal(values(cache.c), mem));
    }
}

TEST_CASE("set/acc not in place read all of a: a later write into a waits for them (WAR)") {
    each_op_and_thread_count([](ggml_op op, int n_threads, ggml_context * ctx, const Cache & cache) {
        ggml_tensor * x = input(ctx, 2, 31), * y = input(ctx, 3, 32);
        ggml_tensor * s = op == GGML_OP_SET ? ggml_set_2d(ctx, cache.c, x, cache.c->nb[1], 0)
                                            : ggml_acc(ctx, cache.c, x, cache.c->nb[1], cache.c->nb[2], cache.c->nb[3], 0);
        ggml_tensor * later = ggml_cpy(ctx, y, cache.rows(ctx, 12, 3)); // outside the region, inside a
        CHECK(dep_kind(later, s) == GGML_DEP_WAR);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, later);
        ggml_build_forward_expand(gf, s); // listed after the write, it moves before it
        CHECK(node_index(gf, s) < node_index(gf, later));
        compute_threads(ctx, gf, n_threads, 0);
        CHECK(bit_equal(values(s), after(cache.init, op, values(x), 0)));
        CHECK(bit_equal(slice(values(cache.c), 12, 3), values(y)));
    });
}

// ---- gated linear units -------------------------------------------------------------------------
namespace {

double ref_act(ggml_glu_op op, double x) {
    switch (op) {
        case GGML_GLU_OP_REGLU: return x > 0 ? x : 0;
        case GGML_GLU_OP_GEGLU: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case GGML_GLU_OP_SWIGLU: return x / (1 + std::exp(-x));
        case GGML_GLU_OP_GEGLU_ERF: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        default: return x / (1 + std::exp(-1.702 * x)); // GEGLU_QUICK
    }
}

struct GluOp {
    ggml_glu_op op;
    ggml_tensor * (*plain)(ggml_context *, ggml_tensor *);
    ggml_tensor * (*swapped)(ggml_context *, ggml_tensor *);
    ggml_tensor * (*split)(ggml_context *, ggml_tensor *, ggml_tensor *);
};
const GluOp kGluOps[] = {
    {GGML_GLU_OP_REGLU, ggml_reglu, ggml_reglu_swapped, ggml_reglu_split},
    {GGML_GLU_OP_GEGLU, ggml_geglu, ggml_geglu_swapped, ggml_geglu_split},
    {GGML_GLU_OP_SWIGLU, ggml_swiglu, ggml_swiglu_swapped, ggml_swiglu_split},
    {GGML_GLU_OP_GEGLU_ERF, ggml_geglu_erf, ggml_geglu_erf_swapped, ggml_geglu_erf_split},
    {GGML_GLU_OP_GEGLU_QUICK, ggml_geglu_quick, ggml_geglu_quick_swapped, ggml_geglu_quick_split},
};

// form 0: plain, 1: swapped, 2: split, 3: ggml_glu(op, swapped = true); a [2n, ...] (or [n, ...] split)
void check_glu(const GluOp & g, int form, ggml_type type, Layout layout) {
    const int64_t n = 37, ne[4] = {form == 2 ? n : 2 * n, 5, 3, 2};
    const std::vector<float> av = random_values(count(ne), 41, -4.0f, 4.0f), bv = random_values(count(ne), 42, -2.0f, 2.0f);
    std::vector<float> a_read, b_read;
    const std::vector<float> got = run_node([&](ggml_context * ctx) {
        ggml_tensor * a = make_input(ctx, type, ne, layout, av), * b = make_input(ctx, type, ne, layout, bv);
        a_read = values(a);
        b_read = values(b);
        ggml_tensor * r = form == 0 ? g.plain(ctx, a) : form == 1 ? g.swapped(ctx, a) : form == 2 ? g.split(ctx, a, b)
                                                                                  : ggml_glu(ctx, a, g.op, true);
        CHECK(ggml_get_glu_op(r) == g.op);
        CHECK(std::string(ggml_op_desc(r)) == ggml_glu_op_name(g.op));
        return r;
    });
    const int64_t rows = count(ne) / ne[0];
    REQUIRE((int64_t) got.size() == rows * n);
    std::vector<double> want(got.size());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            const float * row = a_read.data() + r * ne[0];
            const double x = form == 2 ? row[i] : form == 0 ? row[i] : row[n + i];
            const double gate = form == 2 ? b_read[r * n + i] : form == 0 ? row[n + i] : row[i];
            want[r * n + i] = ref_store(type, ref_act(g.op, x) * gate);
        }
    }
    check_close(got, want, 1e-6, type == GGML_TYPE_F32 ? 2e-6 : type == GGML_TYPE_F16 ? 2e-3 : 8e-3);
}

} // namespace

TEST_CASE("glu: every op, plain/swapped/split, F32/F16/BF16, strided rows, 1-3 tasks") {
    for (const GluOp & g : kGluOps) {
        for (int form = 0; form < 4; ++form) {
            for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                for (Layout layout : {CONTIG, STRIDED_ROWS, PERMUTED_ROWS}) {
                    const std::string name = ggml_glu_op_name(g.op), lname = layout_name(layout);
                    CAPTURE(name); CAPTURE(form); CAPTURE(type); CAPTURE(lname);
                    check_glu(g, form, type, layout);
                }
            }
        }
    }
}

TEST_CASE("swiglu_oai: clamped x and gate, gate shifted by one") {
    const int64_t ne[4] = {19, 4, 1, 1};
    const float alpha = 1.702f, limit = 1.5f;
    const std::vector<float> av = random_values(count(ne), 51, -3.0f, 3.0f), bv = random_values(count(ne), 52, -3.0f, 3.0f);
    const std::vector<float> got = run_node([&](ggml_context * ctx) {
        return ggml_swiglu_oai(ctx, make_input(ctx, GGML_TYPE_F32, ne, CONTIG, av), make_input(ctx, GGML_TYPE_F32, ne, STRIDED_ROWS, bv),
                               alpha, limit);
    });
    std::vector<double> want(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
        const double x = std::min<double>(av[i], limit), g = std::min<double>(std::max<double>(bv[i], -limit), limit);
        want[i] = x / (1 + std::exp(-alpha * x)) * (g + 1);
    }
    check_close(got, want, 1e-6, 2e-6);
}

// ---- argsort / top_k ------------------------------------------------------------------------------
namespace {

// stable sort of each row's indices by value; rows of n
std::vector<int32_t> ref_argsort(const std::vector<float> & v, int64_t n, bool desc) {
    std::vector<int32_t> out(v.size());
    for (size_t r = 0; r < v.size() / n; ++r) {
        std::vector<int32_t> idx(n);
        std::iota(idx.begin(), idx.end(), 0);
        const float * row = v.data() + r * n;
        std::stable_sort(idx.begin(), idx.end(), [&](int32_t i, int32_t j) { return desc ? row[i] > row[j] : row[i] < row[j]; });
        std::copy(idx.begin(), idx.end(), out.begin() + r * n);
    }
    return out;
}

std::vector<float> ties(int64_t n, unsigned seed) {
    std::vector<float> v = random_values(n, seed, -3.0f, 3.0f);
    for (float & x : v) x = std::round(x * 2) / 2; // many equal values
    return v;
}

} // namespace

TEST_CASE("argsort: stable order of each row, ascending and descending, any layout and float type") {
    for (int64_t n0 : {1, 7, 300}) {
        const int64_t ne[4] = {n0, 6, 2, 3};
        const std::vector<float> v = ties(count(ne), 61);
        for (ggml_sort_order order : {GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC}) {
            for (Layout layout : {CONTIG, TRANSPOSED, PERMUTED, STRIDED_ROWS}) {
                for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                    CAPTURE(n0); CAPTURE(order); CAPTURE(layout); CAPTURE(type);
                    std::vector<float> read;
                    const std::vector<float> got = run_node([&](ggml_context * ctx) {
                        ggml_tensor * a = make_input(ctx, type, ne, layout, v);
                        read = values(a);
                        ggml_tensor * r = ggml_argsort(ctx, a, order);
                        CHECK(r->type == GGML_TYPE_I32);
                        return r;
                    });
                    const std::vector<int32_t> want = ref_argsort(read, n0, order == GGML_SORT_ORDER_DESC);
                    CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
                }
            }
        }
    }
}

TEST_CASE("argsort puts NaNs last in either order") {
    const int64_t ne[4] = {6, 1, 1, 1};
    const std::vector<float> v = {2.0f, NAN, -1.0f, 5.0f, NAN, 0.0f};
    const std::vector<float> asc = run_node([&](ggml_context * ctx) {
        return ggml_argsort(ctx, make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v), GGML_SORT_ORDER_ASC);
    });
    const std::vector<float> desc = run_node([&](ggml_context * ctx) {
        return ggml_argsort(ctx, make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v), GGML_SORT_ORDER_DESC);
    });
    CHECK(asc == std::vector<float>{2, 5, 0, 3, 1, 4});
    CHECK(desc == std::vector<float>{3, 0, 5, 2, 1, 4});
}

TEST_CASE("top_k: indices of the k largest, largest first, ties by index (= head of a descending argsort)") {
    for (int64_t n0 : {5, 64, 301}) {
        for (int k : {1, 3, 5}) {
            const int64_t ne[4] = {n0, 4, 3, 1};
            const std::vector<float> v = ties(count(ne), 71);
            for (Layout layout : {CONTIG, PERMUTED, STRIDED_ROWS}) {
                CAPTURE(n0); CAPTURE(k); CAPTURE(layout);
                std::vector<float> read;
                const std::vector<float> got = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, layout, v);
                    read = values(a);
                    return ggml_top_k(ctx, a, k);
                });
                Ctx c; // argsort_top_k: argsort + view, so through a graph
                ggml_tensor * via_t = ggml_cont(c.ctx, ggml_argsort_top_k(c.ctx, make_input(c.ctx, GGML_TYPE_F32, ne, layout, v), k));
                compute_graph(c.ctx, via_t, 2, GGML_SCHED_DAG);
                const std::vector<float> via = values(via_t);
                const std::vector<int32_t> full = ref_argsort(read, n0, true);
                std::vector<float> want;
                for (size_t r = 0; r < read.size() / n0; ++r) want.insert(want.end(), full.begin() + r * n0, full.begin() + r * n0 + k);
                CHECK(got == want);
                CHECK(via == want);
            }
        }
    }
}

// ---- mul_mat_id ------------------------------------------------------------------------------------
namespace {

struct MoeCase {
    ggml_type type;
    int64_t K, N, n_as, n_used, ne11, n_tok;
    bool ids_view, b_strided;
};

// Weights of type t: encoded from v, or for the k-quants (no encoder in kvgraph) random
// blocks whose f16 super-block scales (ggml's layout: d, dmin first in q4_K, d last in q6_K)
// are small and finite.
ggml_tensor * make_weights(ggml_context * ctx, ggml_type t, const int64_t * ne, const std::vector<float> & v) {
    if (ggml_get_type_traits(t)->from_float_ref || !ggml_is_quantized(t)) return make_input(ctx, t, ne, CONTIG, v);
    REQUIRE((t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q6_K));
    ggml_tensor * w = ggml_new_tensor_4d(ctx, t, ne[0], ne[1], ne[2], ne[3]);
    std::mt19937 rng(83);
    uint8_t * p = (uint8_t *) w->data;
    for (size_t i = 0; i < ggml_nbytes(w); ++i) p[i] = (uint8_t) rng();
    for (size_t blk = 0; blk < ggml_nbytes(w); blk += ggml_type_size(t)) {
        for (size_t off : t == GGML_TYPE_Q4_K ? std::vector<size_t>{0, 2} : std::vector<size_t>{208}) {
            const ggml_fp16_t d = ggml_fp32_to_fp16(0.001f * (float) (rng() % 100 + 1));
            std::memcpy(p + blk + off, &d, sizeof(d));
        }
    }
    return w;
}

// Runs the op through the executor with 1-3 threads, DAG and barrier (bit-identical), and
// checks it against double dot products of the (dequantized) weights and b's values.
void check_moe(const MoeCase & m) {
    const int64_t ane[4] = {m.K, m.N, m.n_as, 1}, bne[4] = {m.K, m.ne11, m.n_tok, 1};
    const std::vector<float> wv = random_values(count(ane), 81), bv = random_values(count(bne), 82);
    std::vector<float> w_read, b_read, first;
    std::vector<int32_t> ids(m.n_used * m.n_tok);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t) ((i * 7 + i / m.n_used * 3) % m.n_as);
    for (int run = 0; run < 6; ++run) {
        Ctx c;
        ggml_tensor * as = make_weights(c.ctx, m.type, ane, wv);
        ggml_tensor * b = make_input(c.ctx, GGML_TYPE_F32, bne, m.b_strided ? STRIDED_ROWS : CONTIG, bv);
        // ids as a view of a wider [n_as, n_tok] tensor, as llama.cpp selects its top experts
        ggml_tensor * idt = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, m.ids_view ? m.n_as : m.n_used, m.n_tok);
        ggml_tensor * idv = m.ids_view ? ggml_view_2d(c.ctx, idt, m.n_used, m.n_tok, idt->nb[1], 0) : idt;
        for (int64_t t = 0; t < m.n_tok; ++t) {
            for (int64_t e = 0; e < m.n_used; ++e) ggml_set_i32_nd(idv, (int) e, (int) t, 0, 0, ids[t * m.n_used + e]);
        }
        ggml_tensor * r = ggml_mul_mat_id(c.ctx, as, b, idv);
        REQUIRE(r->ne[0] == m.N);
        REQUIRE(r->ne[1] == m.n_used);
        REQUIRE(r->ne[2] == m.n_tok);
        compute_graph(c.ctx, r, run % 3 + 1, run < 3 ? GGML_SCHED_DAG : GGML_SCHED_BARRIER);
        const std::vector<float> got = values(r);
        if (run == 0) {
            first = got;
            w_read = values(as);
            b_read = values(b);
        }
        CHECK(bit_equal(got, first));
    }
    const bool quant = ggml_is_quantized(m.type);
    int bad = 0;
    for (int64_t t = 0; t < m.n_tok; ++t) {
        for (int64_t e = 0; e < m.n_used; ++e) {
            const float * x = b_read.data() + (t * m.ne11 + e % m.ne11) * m.K;
            for (int64_t n = 0; n < m.N; ++n) {
                const float * w = w_read.data() + (ids[t * m.n_used + e] * m.N + n) * m.K;
                double dot = 0, mag = 0;
                for (int64_t k = 0; k < m.K; ++k) { dot += (double) w[k] * x[k]; mag += std::fabs((double) w[k] * x[k]); }
                const double got = first[(t * m.n_used + e) * m.N + n];
                // quantized weights dot q8 activations: each product off by up to ~1/127 of it
                if (!(std::fabs(got - dot) <= (quant ? 1e-2 : 1e-5) * mag + 1e-6) && ++bad < 5) MESSAGE(got << " vs " << dot);
            }
        }
    }
    CHECK(bad == 0);
}

} // namespace

TEST_CASE("mul_mat_id: each token's experts, every weight type family, b broadcast or per expert, ids a view") {
    const MoeCase cases[] = {
        {GGML_TYPE_F32, 32, 70, 4, 2, 2, 5, false, false},
        {GGML_TYPE_F32, 17, 9, 3, 3, 1, 4, true, true},    // b shared by the experts, strided rows, odd K
        {GGML_TYPE_F16, 64, 33, 5, 2, 2, 3, true, false},
        {GGML_TYPE_BF16, 32, 8, 2, 2, 1, 1, false, false},
        {GGML_TYPE_Q8_0, 64, 40, 4, 2, 2, 6, true, true},
        {GGML_TYPE_Q4_0, 96, 17, 3, 2, 1, 2, false, false},
        {GGML_TYPE_Q4_K, 256, 12, 3, 2, 2, 3, true, false},
        {GGML_TYPE_Q6_K, 256, 5, 2, 1, 1, 2, false, true},
    };
    for (const MoeCase & m : cases) {
        CAPTURE(ggml_type_name(m.type)); CAPTURE(m.K); CAPTURE(m.N);
        check_moe(m);
    }
}

// ---- the rest: soft_max_ext_inplace, graph_cpy, ftype ----------------------------------------------
TEST_CASE("soft_max_ext_inplace writes softmax_ext's values over a") {
    const int64_t ne[4] = {12, 5, 2, 1}, mne[4] = {12, 5, 1, 1};
    const std::vector<float> v = random_values(count(ne), 91, -3.0f, 3.0f), mv = random_values(count(mne), 92, -1.0f, 0.0f);
    auto build = [&](bool inplace) {
        return run_tasks([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v), * mask = make_input(ctx, GGML_TYPE_F32, mne, CONTIG, mv);
            ggml_tensor * r = (inplace ? ggml_soft_max_ext_inplace : ggml_soft_max_ext)(ctx, a, mask, 0.7f, 0.0f);
            CHECK((r->view_src == a) == inplace);
            return Built{r, inplace ? a : r};
        });
    };
    CHECK(bit_equal(build(true), build(false)));
}

TEST_CASE("graph_cpy: the copy holds the same nodes and computes the same values; graph_reset is harmless") {
    Ctx c;
    const int64_t ne[4] = {16, 4, 1, 1};
    ggml_tensor * a = make_input(c.ctx, GGML_TYPE_F32, ne, CONTIG, random_values(64, 93));
    ggml_tensor * out = ggml_swiglu(c.ctx, ggml_scale(c.ctx, a, 3.0f));
    ggml_cgraph * g1 = ggml_new_graph(c.ctx);
    ggml_build_forward_expand(g1, out);
    ggml_cgraph * g2 = ggml_new_graph_custom(c.ctx, 16, false);
    ggml_graph_cpy(g1, g2);
    ggml_graph_reset(g2);
    REQUIRE(ggml_graph_n_nodes(g2) == ggml_graph_n_nodes(g1));
    for (int i = 0; i < ggml_graph_n_nodes(g1); ++i) CHECK(ggml_graph_node(g2, i) == ggml_graph_node(g1, i));
    REQUIRE(ggml_graph_compute_with_ctx(c.ctx, g1, 2) == GGML_STATUS_SUCCESS);
    const std::vector<float> v1 = values(out);
    ggml_set_zero(out);
    REQUIRE(ggml_graph_compute_with_ctx(c.ctx, g2, 2) == GGML_STATUS_SUCCESS);
    CHECK(bit_equal(values(out), v1));
}

TEST_CASE("ftype -> type and the file constants are ggml's") {
    CHECK(GGML_FILE_MAGIC == 0x67676d6c);
    CHECK(GGML_FILE_VERSION == 2);
    CHECK(GGML_QNT_VERSION == 2);
    CHECK(GGML_QNT_VERSION_FACTOR == 1000);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_ALL_F32) == GGML_TYPE_F32);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_F16) == GGML_TYPE_F16);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q4_1_SOME_F16) == GGML_TYPE_Q4_1);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q8_0) == GGML_TYPE_Q8_0);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q6_K) == GGML_TYPE_Q6_K);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_IQ4_NL) == GGML_TYPE_IQ4_NL);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_IQ4_XS) == GGML_TYPE_IQ4_XS);
    CHECK(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_BF16) == GGML_TYPE_BF16);
    CHECK((int) GGML_FTYPE_MOSTLY_Q2_0 == 28);
    CHECK((int) GGML_GLU_OP_GEGLU_QUICK == 5);
    CHECK((int) GGML_SORT_ORDER_DESC == 1);
}

TEST_CASE("set/acc in place under the memory planner: same values as separate memory") {
    struct Prog { ggml_tensor * x, * y, * out; ggml_cgraph * gf; };
    auto build = [](ggml_context * ctx) {
        Prog p;
        p.x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 6);
        p.y = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);
        ggml_set_input(p.x);
        ggml_set_input(p.y);
        ggml_tensor * a = ggml_scale(ctx, p.x, 2.0f); // planned memory that the writes borrow
        ggml_tensor * s = ggml_set_2d_inplace(ctx, a, ggml_sqr(ctx, p.y), a->nb[1], 1 * a->nb[1]);
        ggml_tensor * t = ggml_acc_inplace(ctx, a, p.y, a->nb[1], a->nb[2], a->nb[3], 3 * a->nb[1]);
        ggml_tensor * rows = ggml_scale(ctx, ggml_view_2d(ctx, a, 8, 4, a->nb[1], 1 * a->nb[1]), 1.0f); // reads both writes
        ggml_tensor * u = ggml_sqr(ctx, p.x); // a candidate to reuse a's bytes if they looked dead
        p.out = ggml_add(ctx, ggml_add(ctx, ggml_scale(ctx, s, 0.5f), u), ggml_scale(ctx, t, 0.25f));
        p.out = ggml_concat(ctx, p.out, rows, 1);
        ggml_set_output(p.out);
        p.gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(p.gf, p.out);
        return p;
    };
    const std::vector<float> xv = random_values(48, 101), yv = random_values(16, 102);
    Ctx ref;
    Prog r = build(ref.ctx);
    set_values(r.x, xv);
    set_values(r.y, yv);
    REQUIRE(ggml_graph_compute_with_ctx(ref.ctx, r.gf, 2) == GGML_STATUS_SUCCESS);
    for (int n_threads : {1, 2, 4}) {
        ggml_context * ctx = ggml_init({16u << 20, nullptr, true});
        Prog p = build(ctx);
        ggml_gallocr_t ga = ggml_gallocr_new(NULL);
        REQUIRE(ggml_gallocr_alloc_graph(ga, p.gf));
        set_values(p.x, xv);
        set_values(p.y, yv);
        Ctx work;
        REQUIRE(ggml_graph_compute_with_ctx(work.ctx, p.gf, n_threads) == GGML_STATUS_SUCCESS);
        CHECK(bit_equal(values(p.out), values(r.out)));
        ggml_gallocr_free(ga);
        ggml_free(ctx);
    }
}
