// CPU kernels of the copy, elementwise, norm and rope families against naive references
// written here: odd sizes, non-contiguous views, broadcasting, every supported type,
// inplace variants, and 1, 2, 3 tasks giving bit-identical results.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ops-common.h"

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>
#define KVG_HAVE_FORK 1
#endif

namespace {
#ifdef KVG_HAVE_FORK
// Runs f in a child process; true if it aborted with a message containing `needle`.
bool aborts_with(const std::function<void()> & f, const char * needle) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        std::signal(SIGABRT, SIG_DFL); // doctest's crash handler must not report the expected abort
        f();
        _exit(0);
    }
    close(fds[1]);
    std::string msg;
    char buf[256];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, (size_t) n);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CAPTURE(msg);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && msg.find(needle) != std::string::npos;
}
#endif
} // namespace

// ==== copies ====================================================================================

TEST_CASE("cpy: every pair of float/quantized types") {
    const int64_t ne[4] = {64, 3, 2, 1};
    const std::vector<float> v = random_values(count(ne), 11, -2.0f, 2.0f);
    for (ggml_type ts : kFloatTypes) {
        for (ggml_type td : kFloatTypes) {
            CAPTURE(ggml_type_name(ts)); CAPTURE(ggml_type_name(td));
            for (Layout l : {CONTIG, STRIDED_ROWS}) {
                CAPTURE(layout_name(l));
                std::vector<float> sv;
                const std::vector<float> dv = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, ts, ne, l, v);
                    sv = values(a);
                    return ggml_cpy(ctx, a, ggml_new_tensor(ctx, td, 4, ne));
                });
                check_converted(ts, td, sv, dv);
            }
        }
    }
}

TEST_CASE("cpy: quantized same-type copies keep the bytes") {
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const int64_t ne[4] = {96, 5, 1, 1};
        const std::vector<float> v = random_values(count(ne), 12);
        Ctx c;
        ggml_tensor * a = make_input(c.ctx, t, ne, STRIDED_ROWS, v);
        ggml_tensor * b = ggml_new_tensor(c.ctx, t, 4, ne);
        ggml_tensor * r = ggml_cpy(c.ctx, a, b);
        compute(r, 2);
        for (int64_t row = 0; row < 5; ++row) CHECK(std::memcmp(row_ptr(a, row), row_ptr(b, row), ggml_row_size(t, 96)) == 0);
        // a different shape with whole blocks per row is still a bit copy
        ggml_tensor * d = ggml_new_tensor_2d(c.ctx, t, 32, 15);
        compute(ggml_cpy(c.ctx, a, d), 3);
        CHECK(bit_equal(values(d), values(a)));
    }
}

TEST_CASE("cont / cpy: non-contiguous sources in logical order") {
    const int64_t ne[4] = {7, 5, 3, 2};
    const std::vector<float> v = random_values(count(ne), 13);
    for (Layout l : {CONTIG, TRANSPOSED, PERMUTED, PERMUTED_ROWS, STRIDED_ROWS}) {
        for (ggml_type ts : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            for (ggml_type td : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                CAPTURE(layout_name(l)); CAPTURE(ggml_type_name(ts)); CAPTURE(ggml_type_name(td));
                std::vector<float> sv;
                const std::vector<float> dv = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, ts, ne, l, v);
                    sv = values(a);
                    return ts == td ? ggml_cont(ctx, a) : ggml_cpy(ctx, a, ggml_new_tensor(ctx, td, 4, ne));
                });
                check_converted(ts, td, sv, dv);
            }
        }
    }
}

TEST_CASE("cpy: different shapes and a strided destination view") {
    const int64_t ne[4] = {6, 35, 1, 1};
    const std::vector<float> v = random_values(count(ne), 14);
    for (Layout l : {CONTIG, TRANSPOSED, STRIDED_ROWS}) {
        CAPTURE(layout_name(l));
        Ctx c;
        ggml_tensor * a = make_input(c.ctx, GGML_TYPE_F32, ne, l, v);
        ggml_tensor * base = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F16, 25, 10);
        const std::vector<float> sentinel(250, 7.0f);
        set_values(base, sentinel);
        // [21, 10] window starting at element 2 of each 25-element row
        ggml_tensor * view = ggml_view_2d(c.ctx, base, 21, 10, base->nb[1], 2 * sizeof(ggml_fp16_t));
        compute(ggml_cpy(c.ctx, a, view), 3);
        const std::vector<float> got = values(view);
        for (size_t i = 0; i < v.size(); ++i) CHECK(got[i] == ref_store(GGML_TYPE_F16, v[i]));
        const std::vector<float> all = values(base);
        for (int64_t r = 0; r < 10; ++r) {
            CHECK(all[r * 25 + 0] == 7.0f);
            CHECK(all[r * 25 + 1] == 7.0f);
            CHECK(all[r * 25 + 23] == 7.0f);
            CHECK(all[r * 25 + 24] == 7.0f);
        }
    }
    // cont_2d of a transposed tensor into another shape
    const int64_t ne2[4] = {12, 10, 1, 1};
    const std::vector<float> v2 = random_values(120, 15);
    const std::vector<float> got = run_node([&](ggml_context * ctx) {
        return ggml_cont_2d(ctx, make_input(ctx, GGML_TYPE_F32, ne2, TRANSPOSED, v2), 8, 15);
    });
    CHECK(bit_equal(got, v2));
}

TEST_CASE("cpy: quantizing and dequantizing across shapes and strides") {
    const int64_t ne[4] = {24, 8, 1, 1}; // 192 elements = 6 blocks
    const std::vector<float> v = random_values(count(ne), 16);
    for (ggml_type td : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (Layout l : {CONTIG, TRANSPOSED, PERMUTED}) {
            CAPTURE(ggml_type_name(td)); CAPTURE(layout_name(l));
            const std::vector<float> dv = run_node([&](ggml_context * ctx) {
                return ggml_cpy(ctx, make_input(ctx, GGML_TYPE_F32, ne, l, v), ggml_new_tensor_2d(ctx, td, 64, 3));
            });
            check_quantized(td, v, dv);
        }
    }
    // quantized source (strided rows) into other shapes and types
    const int64_t nq[4] = {64, 3, 1, 1};
    for (ggml_type ts : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (ggml_type td : kFloatTypes) {
            CAPTURE(ggml_type_name(ts)); CAPTURE(ggml_type_name(td));
            std::vector<float> sv;
            const std::vector<float> dv = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, ts, nq, STRIDED_ROWS, random_values(192, 17));
                sv = values(a);
                return ggml_cpy(ctx, a, td == GGML_TYPE_F32 ? ggml_new_tensor_2d(ctx, td, 12, 16) : ggml_new_tensor_2d(ctx, td, 32, 6));
            });
            check_converted(ts, td, sv, dv);
        }
    }
}

TEST_CASE("cpy: i32 to i32 through a permutation, dup and dup_inplace") {
    const int64_t ne[4] = {5, 4, 3, 2};
    std::vector<float> v(count(ne));
    for (size_t i = 0; i < v.size(); ++i) v[i] = (float) ((int) i * 7919 % 1000 - 500);
    const std::vector<float> got = run_node([&](ggml_context * ctx) { return ggml_cont(ctx, make_input(ctx, GGML_TYPE_I32, ne, PERMUTED, v)); });
    CHECK(got == v);
    const std::vector<float> w = random_values(3000, 18);
    const int64_t nw[4] = {1000, 3, 1, 1};
    CHECK(bit_equal(run_node([&](ggml_context * ctx) { return ggml_dup(ctx, make_input(ctx, GGML_TYPE_F32, nw, CONTIG, w)); }), w));
    CHECK(bit_equal(run_node([&](ggml_context * ctx) { return ggml_dup_inplace(ctx, make_input(ctx, GGML_TYPE_F32, nw, CONTIG, w)); }), w));
}

// ==== get_rows / set_rows / concat =================================================================

TEST_CASE("get_rows: every source type, broadcast batch dims, strided indices") {
    struct Case { ggml_type type; int64_t ne0; Layout l; };
    const Case cases[] = {{GGML_TYPE_F32, 7, CONTIG}, {GGML_TYPE_F32, 7, TRANSPOSED}, {GGML_TYPE_F16, 33, STRIDED_ROWS},
                          {GGML_TYPE_BF16, 9, CONTIG}, {GGML_TYPE_Q8_0, 64, CONTIG}, {GGML_TYPE_Q4_0, 32, STRIDED_ROWS},
                          {GGML_TYPE_I32, 5, PERMUTED_ROWS}};
    for (const Case & k : cases) {
        CAPTURE(ggml_type_name(k.type)); CAPTURE(layout_name(k.l));
        const int64_t ne[4] = {k.ne0, 10, 3, 2};
        std::vector<float> v = random_values(count(ne), 19, -3.0f, 3.0f);
        if (k.type == GGML_TYPE_I32) for (auto & x : v) x = std::round(x * 100.0f);
        const int64_t ni[4] = {4, 3, 2, 1};
        std::vector<float> idx(24);
        std::mt19937 rng(20);
        for (auto & x : idx) x = (float) (rng() % 10);
        std::vector<float> sv;
        const std::vector<float> got = run_node([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, k.type, ne, k.l, v);
            sv = values(a);
            ggml_tensor * ids = make_input(ctx, GGML_TYPE_I32, ni, k.l == TRANSPOSED ? TRANSPOSED : CONTIG, idx);
            return ggml_get_rows(ctx, a, ids);
        });
        REQUIRE(got.size() == (size_t) (k.ne0 * 24));
        for (int64_t i = 0; i < 24; ++i) {
            const int64_t i10 = i % 4, i11 = (i / 4) % 3, i12 = i / 12;
            const int64_t src_row = ((i12 * 3 + i11) * 10 + (int64_t) idx[i]);
            for (int64_t j = 0; j < k.ne0; ++j) CHECK(got[(i12 * 12 + i11 * 4 + i10) * k.ne0 + j] == sv[src_row * k.ne0 + j]);
        }
    }
}

TEST_CASE("set_rows: every destination type, i32/i64 indices broadcast over dims 1, 2") {
    const int64_t na[4] = {64, 10, 2, 3}, nb[4] = {64, 4, 2, 3};
    const std::vector<float> av = random_values(count(na), 21), bv = random_values(count(nb), 22, -4.0f, 4.0f);
    struct IdxShape { ggml_type type; int64_t ne1, ne2; };
    for (ggml_type td : kFloatTypes) {
        for (IdxShape is : {IdxShape{GGML_TYPE_I64, 2, 3}, IdxShape{GGML_TYPE_I32, 1, 1}, IdxShape{GGML_TYPE_I32, 2, 1}}) {
            for (Layout lb : {CONTIG, TRANSPOSED}) {
                CAPTURE(ggml_type_name(td)); CAPTURE(ggml_type_name(is.type)); CAPTURE(is.ne1); CAPTURE(layout_name(lb));
                // distinct indices per index row (so that tasks never write the same row)
                const int64_t ni[4] = {4, is.ne1, is.ne2, 1};
                std::vector<float> idx(count(ni));
                std::mt19937 rng(23);
                for (int64_t r = 0; r < is.ne1 * is.ne2; ++r) {
                    std::vector<int> perm(10);
                    for (int j = 0; j < 10; ++j) perm[j] = j;
                    std::shuffle(perm.begin(), perm.end(), rng);
                    for (int j = 0; j < 4; ++j) idx[r * 4 + j] = (float) perm[j];
                }
                std::vector<float> before;
                const std::vector<float> got = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, td, na, CONTIG, av);
                    before = values(a);
                    ggml_tensor * b = make_input(ctx, GGML_TYPE_F32, nb, lb, bv);
                    ggml_tensor * c = make_input(ctx, is.type, ni, CONTIG, idx);
                    return ggml_set_rows(ctx, a, b, c);
                });
                // expected: rows of a, with the indexed ones replaced by (converted) rows of b
                std::vector<float> want_src = before;
                std::vector<bool> replaced(before.size() / 64, false);
                std::vector<float> bsrc, qsrc;
                for (int64_t i3 = 0; i3 < 3; ++i3) {
                    for (int64_t i2 = 0; i2 < 2; ++i2) {
                        for (int64_t i1 = 0; i1 < 4; ++i1) {
                            const int64_t id = (int64_t) idx[((i3 % is.ne2) * is.ne1 + (i2 % is.ne1)) * 4 + i1];
                            const int64_t arow = (i3 * 2 + i2) * 10 + id, brow = (i3 * 2 + i2) * 4 + i1;
                            replaced[arow] = true;
                            for (int j = 0; j < 64; ++j) {
                                bsrc.push_back(bv[brow * 64 + j]);
                                qsrc.push_back(got[arow * 64 + j]);
                            }
                        }
                    }
                }
                check_converted(GGML_TYPE_F32, td, bsrc, qsrc);
                for (size_t r = 0; r < replaced.size(); ++r) {
                    if (!replaced[r]) CHECK(std::memcmp(&got[r * 64], &before[r * 64], 64 * sizeof(float)) == 0);
                }
            }
        }
    }
}

TEST_CASE("set_rows: into a view of a larger cache, f16 and q8_0 rows byte-exact") {
    for (ggml_type td : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        Ctx c;
        ggml_tensor * cache = ggml_new_tensor_2d(c.ctx, td, 32, 20);
        set_values(cache, std::vector<float>(640, 0.5f));
        const std::vector<float> before = values(cache);
        ggml_tensor * win = ggml_view_2d(c.ctx, cache, 32, 10, cache->nb[1], 5 * cache->nb[1]);
        const int64_t nb[4] = {32, 3, 1, 1}, ni[4] = {3, 1, 1, 1};
        const std::vector<float> bv = random_values(96, 24);
        ggml_tensor * b = make_input(c.ctx, GGML_TYPE_F32, nb, CONTIG, bv);
        ggml_tensor * ids = make_input(c.ctx, GGML_TYPE_I32, ni, CONTIG, {9, 0, 4});
        compute(ggml_set_rows(c.ctx, win, b, ids), 2);
        const int rows[3] = {14, 5, 9};
        std::vector<char> want(ggml_row_size(td, 32));
        for (int i = 0; i < 3; ++i) {
            ggml_get_type_traits(td)->from_float_ref(bv.data() + i * 32, want.data(), 32);
            CHECK(std::memcmp(row_ptr(cache, rows[i]), want.data(), want.size()) == 0);
        }
        const std::vector<float> after = values(cache);
        for (int r = 0; r < 20; ++r) {
            if (r == 14 || r == 5 || r == 9) continue;
            CHECK(std::memcmp(&after[r * 32], &before[r * 32], 32 * sizeof(float)) == 0);
        }
    }
}

#ifdef KVG_HAVE_FORK
TEST_CASE("set_rows / get_rows: out-of-range indices abort with a message") {
    CHECK(aborts_with([] {
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 3);
        ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 1);
        ggml_tensor * ids = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I64, 1);
        ((int64_t *) ids->data)[0] = 3;
        compute(ggml_set_rows(c.ctx, a, b, ids), 1);
    }, "out of range"));
    CHECK(aborts_with([] {
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 3);
        ggml_tensor * ids = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, 1);
        ((int32_t *) ids->data)[0] = -1;
        compute(ggml_get_rows(c.ctx, a, ids), 1);
    }, "out of range"));
}

TEST_CASE("ggml_quantize_chunk: types that need an importance matrix refuse NULL, naming the type") {
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M}) {
        const std::string want = std::string("type ") + ggml_type_name(t) + " requires an importance matrix";
        CHECK(aborts_with(
            [t] {
                std::vector<float> x(QK_K, 0.5f);
                std::vector<uint8_t> out(ggml_row_size(t, QK_K));
                ggml_quantize_chunk(t, x.data(), out.data(), 0, 1, QK_K, nullptr);
            },
            want.c_str()));
    }
}
#endif

TEST_CASE("concat: every dim, non-contiguous inputs, several types") {
    for (int dim = 0; dim < 4; ++dim) {
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32, GGML_TYPE_Q8_0}) {
            const bool q = t == GGML_TYPE_Q8_0;
            int64_t na[4] = {q ? 64 : 5, 4, 3, 2}, nb[4] = {q ? 64 : 5, 4, 3, 2};
            nb[dim] = dim == 0 ? (q ? 32 : 3) : 3;
            std::vector<float> av = random_values(count(na), 25), bv = random_values(count(nb), 26);
            if (t == GGML_TYPE_I32) {
                for (auto & x : av) x = std::round(x * 1000);
                for (auto & x : bv) x = std::round(x * 1000);
            }
            for (int variant = 0; variant < 2; ++variant) {
                CAPTURE(dim); CAPTURE(ggml_type_name(t)); CAPTURE(variant);
                const Layout la = variant ? (q ? STRIDED_ROWS : TRANSPOSED) : CONTIG;
                const Layout lb = variant ? (q ? STRIDED_ROWS : PERMUTED) : CONTIG;
                std::vector<float> sa, sb;
                const std::vector<float> got = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, t, na, la, av);
                    ggml_tensor * b = make_input(ctx, t, nb, lb, bv);
                    sa = values(a), sb = values(b);
                    return ggml_concat(ctx, a, b, dim);
                });
                int64_t nd[4] = {na[0], na[1], na[2], na[3]};
                nd[dim] += nb[dim];
                int bad = 0;
                for (int64_t i = 0; i < count(nd); ++i) {
                    int64_t cc[4];
                    unravel(nd, i, cc);
                    const bool from_a = cc[dim] < na[dim];
                    if (!from_a) cc[dim] -= na[dim];
                    bad += got[i] != (from_a ? sa[ravel(na, cc)] : sb[ravel(nb, cc)]);
                }
                CHECK(bad == 0);
            }
        }
    }
}

// ==== elementwise ====================================================================================

TEST_CASE("binary ops: broadcasting, strides, f16, inplace") {
    const int64_t ne[4] = {33, 7, 3, 2};
    const int64_t shapes1[][4] = {{33, 7, 3, 2}, {33, 1, 1, 1}, {1, 7, 1, 1}, {33, 7, 1, 2}, {11, 7, 3, 1}, {1, 1, 1, 1}};
    const ggml_op ops[] = {GGML_OP_ADD, GGML_OP_SUB, GGML_OP_MUL, GGML_OP_DIV};
    const std::vector<float> av = random_values(count(ne), 27, -2.0f, 2.0f);
    for (ggml_op op : ops) {
        for (const auto & n1 : shapes1) {
            for (int variant = 0; variant < 5; ++variant) {
                // 0: contiguous f32, 1: transposed a, 2: permuted b, 3: f16 a (and dst), 4: inplace on strided rows
                const ggml_type ta = variant == 3 ? GGML_TYPE_F16 : GGML_TYPE_F32;
                const Layout la = variant == 1 ? TRANSPOSED : variant == 4 ? STRIDED_ROWS : CONTIG;
                const Layout lb = variant == 2 ? PERMUTED : CONTIG;
                CAPTURE(ggml_op_name(op)); CAPTURE(n1[0]); CAPTURE(n1[1]); CAPTURE(variant);
                const std::vector<float> bv = random_values(count(n1), 28, 0.5f, 2.0f);
                std::vector<float> sa, sb;
                const std::vector<float> got = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, ta, ne, la, av);
                    ggml_tensor * b = make_input(ctx, GGML_TYPE_F32, n1, lb, bv);
                    sa = values(a), sb = values(b);
                    const bool inpl = variant == 4;
                    switch (op) {
                        case GGML_OP_ADD: return inpl ? ggml_add_inplace(ctx, a, b) : ggml_add(ctx, a, b);
                        case GGML_OP_SUB: return inpl ? ggml_sub_inplace(ctx, a, b) : ggml_sub(ctx, a, b);
                        case GGML_OP_MUL: return inpl ? ggml_mul_inplace(ctx, a, b) : ggml_mul(ctx, a, b);
                        default: return inpl ? ggml_div_inplace(ctx, a, b) : ggml_div(ctx, a, b);
                    }
                });
                // float ops are correctly rounded: the double result rounded to float matches exactly
                int bad = 0;
                for (int64_t i = 0; i < count(ne); ++i) {
                    int64_t c[4];
                    unravel(ne, i, c);
                    for (int d = 0; d < 4; ++d) c[d] %= n1[d];
                    const double x = sa[i], y = sb[ravel(n1, c)];
                    const double r = op == GGML_OP_ADD ? x + y : op == GGML_OP_SUB ? x - y : op == GGML_OP_MUL ? x * y : x / y;
                    bad += got[i] != ref_store(ta, (float) r);
                }
                CHECK(bad == 0);
            }
        }
    }
}

TEST_CASE("unary maps: sqr, sqrt, scale, relu, gelu, silu") {
    const int64_t ne[4] = {33, 7, 3, 1};
    const std::vector<float> v = random_values(count(ne), 29, -4.0f, 4.0f);
    enum Kind { SQR, SQRT, SCALE, RELU, GELU, SILU };
    for (int kind = SQR; kind <= SILU; ++kind) {
        for (int variant = 0; variant < 5; ++variant) {
            // 0: contiguous, 1: transposed, 2: strided rows, 3: f16, 4: inplace (permuted rows)
            const ggml_type t = variant == 3 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 1 ? TRANSPOSED : variant == 2 ? STRIDED_ROWS : variant == 4 ? PERMUTED_ROWS : CONTIG;
            const bool inpl = variant == 4;
            CAPTURE(kind); CAPTURE(variant);
            std::vector<float> in = v;
            if (kind == SQRT) for (auto & x : in) x = std::fabs(x);
            std::vector<float> sv;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, l, in);
                sv = values(a);
                switch (kind) {
                    case SQR: return inpl ? ggml_sqr_inplace(ctx, a) : ggml_sqr(ctx, a);
                    case SQRT: return inpl ? ggml_sqrt_inplace(ctx, a) : ggml_sqrt(ctx, a);
                    case SCALE: return inpl ? ggml_scale_inplace(ctx, a, -0.375f) : ggml_scale(ctx, a, -0.375f);
                    case RELU: return inpl ? ggml_relu_inplace(ctx, a) : ggml_relu(ctx, a);
                    case GELU: return inpl ? ggml_gelu_inplace(ctx, a) : ggml_gelu(ctx, a);
                    default: return inpl ? ggml_silu_inplace(ctx, a) : ggml_silu(ctx, a);
                }
            });
            std::vector<double> want(sv.size());
            for (size_t i = 0; i < sv.size(); ++i) {
                const double x = sv[i];
                switch (kind) {
                    case SQR: want[i] = x * x; break;
                    case SQRT: want[i] = std::sqrt(x); break;
                    case SCALE: want[i] = x * -0.375; break;
                    case RELU: want[i] = x > 0 ? x : 0; break;
                    case GELU: want[i] = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); break;
                    default: want[i] = x / (1 + std::exp(-x)); break;
                }
            }
            if (kind <= RELU) {
                // correctly rounded in float: exact
                int bad = 0;
                for (size_t i = 0; i < sv.size(); ++i) bad += got[i] != ref_store(t, (float) want[i]);
                CHECK(bad == 0);
            } else {
                check_close(got, want, 1e-6, t == GGML_TYPE_F16 ? 1e-3 : 2e-6);
            }
        }
    }
}

TEST_CASE("sum_rows and argmax") {
    const int64_t ne[4] = {129, 7, 3, 1};
    const std::vector<float> v = random_values(count(ne), 30);
    for (Layout l : {CONTIG, TRANSPOSED, STRIDED_ROWS}) {
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            CAPTURE(layout_name(l)); CAPTURE(ggml_type_name(t));
            std::vector<float> sv;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, l, v);
                sv = values(a);
                return ggml_sum_rows(ctx, a);
            });
            REQUIRE(got.size() == 21);
            std::vector<double> want(21, 0.0);
            double mag = 0.0;
            for (size_t i = 0; i < sv.size(); ++i) { want[i / 129] += sv[i]; mag += std::fabs(sv[i]); }
            check_close(got, want, 1e-6 * mag / 21, t == GGML_TYPE_F16 ? 1e-3 : 1e-6);
        }
    }

    const int64_t nm[4] = {33, 9, 1, 1};
    std::vector<float> m = random_values(count(nm), 31);
    std::vector<int> want(9);
    for (int r = 0; r < 9; ++r) {
        const int first = (r * 5) % 33, second = (first + 7) % 33; // planted tie: the last one wins, as in ggml
        m[r * 33 + first] = m[r * 33 + second] = 2.0f + r;
        want[r] = std::max(first, second);
    }
    m[4 * 33 + 0] = 2.0f + 4; // a three-way tie, one at index 0
    for (Layout l : {CONTIG, TRANSPOSED}) {
        CAPTURE(layout_name(l));
        const std::vector<float> got = run_node([&](ggml_context * ctx) { return ggml_argmax(ctx, make_input(ctx, GGML_TYPE_F32, nm, l, m)); });
        for (int r = 0; r < 9; ++r) CHECK(got[r] == (float) want[r]);
    }
}

// ==== norms ====================================================================================

TEST_CASE("norm and rms_norm: odd widths, strides, inplace") {
    for (int64_t ne0 : {7, 129}) {
        const int64_t ne[4] = {ne0, 5, 3, 1};
        const std::vector<float> v = random_values(count(ne), 32, -3.0f, 5.0f);
        for (bool rms : {false, true}) {
            for (int variant = 0; variant < 4; ++variant) {
                const Layout l = variant == 1 ? TRANSPOSED : variant == 2 ? STRIDED_ROWS : CONTIG;
                const bool inpl = variant == 3;
                CAPTURE(ne0); CAPTURE(rms); CAPTURE(variant);
                const float eps = 1e-5f;
                const std::vector<float> got = run_node([&](ggml_context * ctx) {
                    ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, l, v);
                    if (rms) return inpl ? ggml_rms_norm_inplace(ctx, a, eps) : ggml_rms_norm(ctx, a, eps);
                    return inpl ? ggml_norm_inplace(ctx, a, eps) : ggml_norm(ctx, a, eps);
                });
                std::vector<double> want(v.size());
                for (int64_t r = 0; r < count(ne) / ne0; ++r) {
                    const float * x = &v[r * ne0];
                    double mean = 0.0, sq = 0.0;
                    for (int64_t i = 0; i < ne0; ++i) mean += x[i];
                    mean /= ne0;
                    for (int64_t i = 0; i < ne0; ++i) sq += rms ? (double) x[i] * x[i] : (x[i] - mean) * (x[i] - mean);
                    const double s = 1.0 / std::sqrt(sq / ne0 + eps);
                    for (int64_t i = 0; i < ne0; ++i) want[r * ne0 + i] = rms ? x[i] * s : (x[i] - mean) * s;
                }
                check_close(got, want, 2e-6, 2e-6);
            }
        }
    }
}

TEST_CASE("soft_max: scale, f32/f16 masks with broadcasting, ALiBi, all -inf rows, inplace") {
    struct Case { int64_t n_head; ggml_type mask_type; int64_t m1, m2; float max_bias; Layout l; bool inpl; };
    const Case cases[] = {
        {4, GGML_TYPE_COUNT, 0, 0, 0.0f, CONTIG, false},
        {4, GGML_TYPE_F32, 9, 1, 0.0f, CONTIG, false},
        {4, GGML_TYPE_F16, 7, 2, 0.0f, STRIDED_ROWS, false},
        {4, GGML_TYPE_F32, 7, 1, 8.0f, CONTIG, false},
        {6, GGML_TYPE_F16, 8, 1, 8.0f, PERMUTED_ROWS, false},
        {6, GGML_TYPE_F32, 7, 3, 4.0f, CONTIG, true},
    };
    for (const Case & k : cases) {
        CAPTURE(k.n_head); CAPTURE(k.max_bias); CAPTURE(layout_name(k.l)); CAPTURE(k.inpl);
        const bool has_mask = k.mask_type != GGML_TYPE_COUNT;
        const int64_t ne[4] = {33, 7, k.n_head, 2};
        const int64_t nm[4] = {33, k.m1, k.m2, 1};
        const std::vector<float> av = random_values(count(ne), 33, -5.0f, 5.0f);
        std::vector<float> mv = random_values(count(nm), 34, -2.0f, 2.0f);
        if (has_mask) {
            // causal -inf entries; mask row 3 masks everything (its softmax rows become 0)
            for (int64_t j = 0; j < k.m2; ++j) {
                for (int64_t r = 0; r < k.m1; ++r) {
                    for (int64_t i = 0; i < 33; ++i) {
                        if (i > r + 20 || r == 3) mv[(j * k.m1 + r) * 33 + i] = -INFINITY;
                    }
                }
            }
        }
        const float scale = 0.7f;
        std::vector<float> sm;
        const std::vector<float> got = run_node([&](ggml_context * ctx) {
            ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, k.l, av);
            ggml_tensor * m = has_mask ? make_input(ctx, k.mask_type, nm, CONTIG, mv) : nullptr;
            if (m) sm = values(m);
            if (k.inpl) {
                ggml_tensor * r = ggml_soft_max_ext(ctx, a, m, scale, k.max_bias);
                // the API has no masked inplace softmax: build one by hand (dst aliasing a)
                ggml_tensor * v = ggml_view_tensor(ctx, a);
                std::memcpy(v->op_params, r->op_params, sizeof(r->op_params));
                v->op = GGML_OP_SOFT_MAX;
                v->src[0] = a;
                v->src[1] = m;
                return v;
            }
            return ggml_soft_max_ext(ctx, a, m, scale, k.max_bias);
        });
        const double nhl2 = std::pow(2.0, std::floor(std::log2((double) k.n_head)));
        const double m0 = std::pow(2.0, -k.max_bias / nhl2), m1 = std::pow(2.0, -(k.max_bias / 2) / nhl2);
        std::vector<double> want(av.size());
        for (int64_t r = 0; r < count(ne) / 33; ++r) {
            const int64_t i1 = r % 7, i2 = (r / 7) % k.n_head;
            const double slope = k.max_bias > 0 ? (i2 < nhl2 ? std::pow(m0, i2 + 1) : std::pow(m1, 2 * (i2 - nhl2) + 1)) : 1.0;
            std::vector<double> w(33);
            double mx = -INFINITY;
            for (int64_t i = 0; i < 33; ++i) {
                const double mval = has_mask ? sm[((i2 % k.m2) * k.m1 + i1) * 33 + i] : 0.0;
                w[i] = av[r * 33 + i] * (double) scale + slope * mval;
                mx = std::max(mx, w[i]);
            }
            double sum = 0.0;
            for (int64_t i = 0; i < 33; ++i) sum += mx == -INFINITY ? 0.0 : std::exp(w[i] - mx);
            for (int64_t i = 0; i < 33; ++i) want[r * 33 + i] = mx == -INFINITY ? 0.0 : std::exp(w[i] - mx) / sum;
        }
        check_close(got, want, 1e-7, 1e-5);
        int nans = 0;
        for (float x : got) nans += std::isnan(x);
        CHECK(nans == 0);
    }
    // ggml_soft_max_inplace gives the same bits as ggml_soft_max
    const int64_t ne[4] = {129, 3, 2, 1};
    const std::vector<float> v = random_values(count(ne), 38, -10.0f, 10.0f);
    const std::vector<float> a = run_node([&](ggml_context * ctx) { return ggml_soft_max(ctx, make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v)); });
    const std::vector<float> b = run_node([&](ggml_context * ctx) { return ggml_soft_max_inplace(ctx, make_input(ctx, GGML_TYPE_F32, ne, STRIDED_ROWS, v)); });
    CHECK(bit_equal(a, b));
}

TEST_CASE("diag_mask_inf: n_past, strides, inplace") {
    const int64_t ne[4] = {7, 5, 3, 1};
    const std::vector<float> v = random_values(count(ne), 35);
    for (int n_past : {0, 2, 10, -1}) {
        for (int variant = 0; variant < 3; ++variant) {
            CAPTURE(n_past); CAPTURE(variant);
            const Layout l = variant == 1 ? TRANSPOSED : CONTIG;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, GGML_TYPE_F32, ne, l, v);
                return variant == 2 ? ggml_diag_mask_inf_inplace(ctx, a, n_past) : ggml_diag_mask_inf(ctx, a, n_past);
            });
            int bad = 0;
            for (int64_t i = 0; i < count(ne); ++i) {
                const int64_t i0 = i % 7, i1 = (i / 7) % 5;
                const float want = i0 > n_past + i1 ? -INFINITY : v[i];
                bad += got[i] != want;
            }
            CHECK(bad == 0);
        }
    }
}

// ==== rope ======================================================================================

namespace {
struct RopeCfg {
    int64_t head_dim, n_dims;
    int mode;
    float freq_base = 10000.0f, freq_scale = 1.0f, ext_factor = 0.0f, attn_factor = 1.0f;
    int n_ctx_orig = 4096;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    bool freq_factors = false;
};

// rope of a [head_dim, n_head, n_tok] in double, following the YaRN definition
std::vector<double> rope_ref(const RopeCfg & c, const std::vector<float> & x, const std::vector<int> & pos,
                             const std::vector<float> & ff, int64_t n_head) {
    const int64_t half = c.n_dims / 2;
    auto corr = [&](double n_rot) { return c.n_dims * std::log(c.n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * std::log((double) c.freq_base)); };
    const double low = std::max(0.0, std::floor(corr(c.beta_fast)));
    const double high = std::min((double) c.n_dims - 1, std::ceil(corr(c.beta_slow)));
    const double mscale = c.attn_factor * (c.ext_factor != 0 ? 1 + 0.1 * std::log(1 / (double) c.freq_scale) : 1.0);
    std::vector<double> y(x.begin(), x.end());
    for (size_t t = 0; t < pos.size(); ++t) {
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t base = ((int64_t) t * n_head + h) * c.head_dim;
            for (int64_t k = 0; k < half; ++k) {
                double th_e = pos[t] * std::pow((double) c.freq_base, -2.0 * k / c.n_dims);
                if (c.freq_factors) th_e /= ff[k];
                const double th_i = c.freq_scale * th_e;
                const double ramp = 1 - std::min(1.0, std::max(0.0, (k - low) / std::max(0.001, high - low)));
                const double mix = ramp * c.ext_factor;
                const double th = th_i * (1 - mix) + th_e * mix;
                const int64_t a = c.mode == GGML_ROPE_TYPE_NEOX ? k : 2 * k;
                const int64_t b = c.mode == GGML_ROPE_TYPE_NEOX ? k + half : 2 * k + 1;
                const double x0 = x[base + a], x1 = x[base + b];
                y[base + a] = (x0 * std::cos(th) - x1 * std::sin(th)) * mscale;
                y[base + b] = (x0 * std::sin(th) + x1 * std::cos(th)) * mscale;
            }
        }
    }
    return y;
}
} // namespace

TEST_CASE("rope: normal and neox modes, partial dims, freq factors, YaRN, strides, f16, inplace") {
    const int64_t n_head = 3, n_tok = 5;
    const std::vector<int> pos = {0, 1, 17, 500, 2047};
    std::vector<RopeCfg> cfgs;
    for (int mode : {0, GGML_ROPE_TYPE_NEOX}) {
        cfgs.push_back({8, 8, mode});
        cfgs.push_back({64, 64, mode});
        cfgs.push_back({18, 12, mode}); // dims past n_dims are copied
        RopeCfg s{32, 32, mode};
        s.attn_factor = 0.5f;
        s.freq_base = 500000.0f;
        cfgs.push_back(s);
        RopeCfg f{32, 24, mode};
        f.freq_factors = true;
        cfgs.push_back(f);
        RopeCfg y{64, 64, mode};
        y.freq_scale = 0.25f;
        y.ext_factor = 1.0f;
        y.n_ctx_orig = 512;
        cfgs.push_back(y);
        RopeCfg y2 = y;
        y2.ext_factor = 0.5f;
        y2.attn_factor = 0.9f;
        cfgs.push_back(y2);
    }
    for (const RopeCfg & c : cfgs) {
        const int64_t ne[4] = {c.head_dim, n_head, n_tok, 1};
        const std::vector<float> v = random_values(count(ne), 36, -2.0f, 2.0f);
        const std::vector<float> ff = random_values(c.n_dims / 2, 37, 1.0f, 4.0f);
        for (int variant = 0; variant < 5; ++variant) {
            // 0: contiguous, 1: permuted rows (heads/tokens swapped in memory), 2: transposed, 3: f16, 4: inplace
            const ggml_type t = variant == 3 ? GGML_TYPE_F16 : GGML_TYPE_F32;
            const Layout l = variant == 1 ? PERMUTED_ROWS : variant == 2 ? TRANSPOSED : CONTIG;
            CAPTURE(c.head_dim); CAPTURE(c.n_dims); CAPTURE(c.mode); CAPTURE(c.ext_factor); CAPTURE(c.freq_factors);
            CAPTURE(variant);
            std::vector<float> sv;
            const std::vector<float> got = run_node([&](ggml_context * ctx) {
                ggml_tensor * a = make_input(ctx, t, ne, l, v);
                sv = values(a);
                ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
                for (int64_t i = 0; i < n_tok; ++i) ((int32_t *) p->data)[i] = pos[i];
                ggml_tensor * f = nullptr;
                if (c.freq_factors) {
                    const int64_t nf[4] = {c.n_dims / 2, 1, 1, 1};
                    f = make_input(ctx, GGML_TYPE_F32, nf, CONTIG, ff);
                }
                if (variant == 4) {
                    return ggml_rope_ext_inplace(ctx, a, p, f, (int) c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                                                 c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
                }
                return ggml_rope_ext(ctx, a, p, f, (int) c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale, c.ext_factor,
                                     c.attn_factor, c.beta_fast, c.beta_slow);
            });
            const std::vector<double> want = rope_ref(c, sv, pos, ff, n_head);
            check_close(got, want, t == GGML_TYPE_F16 ? 2e-3 : 2e-6, t == GGML_TYPE_F16 ? 2e-3 : 2e-6);
            // pass-through dims are copied bit for bit
            int bad = 0;
            for (int64_t r = 0; r < n_head * n_tok; ++r) {
                for (int64_t i = c.n_dims; i < c.head_dim; ++i) bad += got[r * c.head_dim + i] != sv[r * c.head_dim + i];
            }
            CHECK(bad == 0);
        }
    }
}

TEST_CASE("rope: back-to-back ropes of one position whose parameters differ in one field each") {
    // the kernel reuses a position's cos/sin for the next rope of it (decoding: q and k of every
    // layer) and the last inverse frequencies without factors; each of these must still get its
    // own angles
    const int64_t n_head = 2;
    const std::vector<int> pos = {33};
    std::vector<RopeCfg> cfgs;
    RopeCfg base{16, 16, 0};
    cfgs.push_back(base);
    cfgs.push_back(base); // a hit
    RopeCfg f0 = base; f0.freq_factors = true; cfgs.push_back(f0); // the last base, with factors
    RopeCfg b = base; b.freq_base = 500000.0f; cfgs.push_back(b);
    RopeCfg f = base; f.freq_factors = true; cfgs.push_back(f);
    RopeCfg sc = base; sc.freq_scale = 0.5f; cfgs.push_back(sc);
    RopeCfg e = sc; e.ext_factor = 1.0f; cfgs.push_back(e);
    RopeCfg a = e; a.attn_factor = 0.7f; cfgs.push_back(a);
    RopeCfg o = a; o.n_ctx_orig = 1024; cfgs.push_back(o);
    RopeCfg n = base; n.n_dims = 12; cfgs.push_back(n);
    for (size_t i = 0; i < cfgs.size(); ++i) {
        const RopeCfg & c = cfgs[i];
        CAPTURE(i);
        const int64_t ne[4] = {c.head_dim, n_head, 1, 1};
        const std::vector<float> v = random_values(count(ne), 50, -2.0f, 2.0f);
        const std::vector<float> ff = random_values(c.n_dims / 2, 51, 1.0f, 4.0f);
        std::vector<float> sv;
        const std::vector<float> got = run_node([&](ggml_context * ctx) {
            ggml_tensor * x = make_input(ctx, GGML_TYPE_F32, ne, CONTIG, v);
            sv = values(x);
            ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
            ((int32_t *) p->data)[0] = pos[0];
            ggml_tensor * fr = nullptr;
            if (c.freq_factors) {
                const int64_t nf[4] = {c.n_dims / 2, 1, 1, 1};
                fr = make_input(ctx, GGML_TYPE_F32, nf, CONTIG, ff);
            }
            return ggml_rope_ext(ctx, x, p, fr, (int) c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale, c.ext_factor,
                                 c.attn_factor, c.beta_fast, c.beta_slow);
        });
        check_close(got, rope_ref(c, sv, pos, ff, n_head), 2e-6, 2e-6);
    }
}

TEST_CASE("rope: plain parameters are exactly the textbook rotation; YaRN keeps fast dims unscaled") {
    // position 1, pair 0 has theta = 1 rad in both modes; ext_factor 0 and attn_factor 1 mean no scaling at all
    for (int mode : {0, GGML_ROPE_TYPE_NEOX}) {
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 4, 1, 1);
        const float x[4] = {1.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(a->data, x, sizeof(x));
        ggml_tensor * p = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, 1);
        ((int32_t *) p->data)[0] = 1;
        ggml_tensor * r = ggml_rope(c.ctx, a, p, 4, mode);
        compute(r, 1);
        const float * y = (const float *) r->data;
        const int other = mode == 0 ? 1 : 2;
        CHECK(y[0] == (float) std::cos(1.0));
        CHECK(y[other] == (float) std::sin(1.0));
    }
    // YaRN: for the highest-frequency pair (below the low correction dim) theta is not interpolated
    Ctx c;
    ggml_tensor * a = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 64, 1, 1);
    std::memset(a->data, 0, ggml_nbytes(a));
    ((float *) a->data)[0] = 1.0f;
    ggml_tensor * p = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, 1);
    ((int32_t *) p->data)[0] = 3;
    ggml_tensor * r = ggml_rope_ext(c.ctx, a, p, nullptr, 64, 0, 4096, 10000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f);
    compute(r, 1);
    const double mscale = 1 + 0.1 * std::log(4.0);
    CHECK(((float *) r->data)[0] == doctest::Approx(std::cos(3.0) * mscale).epsilon(1e-6));
    CHECK(((float *) r->data)[1] == doctest::Approx(std::sin(3.0) * mscale).epsilon(1e-6));
}

// ==== larger tensors: the executor splits these across tasks ==========================================

TEST_CASE("larger tensors: every op gives the same bits for any task/thread split") {
    const int64_t ne[4] = {129, 97, 2, 1};
    const int64_t nq[4] = {128, 97, 2, 1};
    const std::vector<float> v = random_values(count(ne), 40, -3.0f, 3.0f);
    const std::vector<float> vq = random_values(count(nq), 41, -3.0f, 3.0f);
    const std::vector<float> small = random_values(129, 42, 0.5f, 2.0f);
    using B = std::function<ggml_tensor *(ggml_context *)>;
    auto in = [&](ggml_context * ctx, ggml_type t, Layout l) { return make_input(ctx, t, ne, l, v); };
    auto row = [&](ggml_context * ctx) {
        const int64_t n1[4] = {129, 1, 1, 1};
        return make_input(ctx, GGML_TYPE_F32, n1, CONTIG, small);
    };
    const std::vector<std::pair<const char *, B>> cases = {
        {"cont transposed", [&](ggml_context * ctx) { return ggml_cont(ctx, in(ctx, GGML_TYPE_F32, TRANSPOSED)); }},
        {"cpy f32->f16 permuted", [&](ggml_context * ctx) { return ggml_cpy(ctx, in(ctx, GGML_TYPE_F32, PERMUTED_ROWS), ggml_new_tensor(ctx, GGML_TYPE_F16, 4, ne)); }},
        {"cpy f32->q8_0", [&](ggml_context * ctx) { return ggml_cpy(ctx, make_input(ctx, GGML_TYPE_F32, nq, CONTIG, vq), ggml_new_tensor(ctx, GGML_TYPE_Q8_0, 4, nq)); }},
        {"cpy q4_0->f32", [&](ggml_context * ctx) { return ggml_cpy(ctx, make_input(ctx, GGML_TYPE_Q4_0, nq, CONTIG, vq), ggml_new_tensor(ctx, GGML_TYPE_F32, 4, nq)); }},
        {"dup contiguous", [&](ggml_context * ctx) { return ggml_dup(ctx, in(ctx, GGML_TYPE_BF16, CONTIG)); }},
        {"get_rows q8_0", [&](ggml_context * ctx) {
             ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 150);
             for (int i = 0; i < 150; ++i) ((int32_t *) ids->data)[i] = (i * 37) % 194;
             return ggml_get_rows(ctx, ggml_reshape_2d(ctx, make_input(ctx, GGML_TYPE_Q8_0, nq, CONTIG, vq), 128, 194), ids);
         }},
        {"set_rows f16", [&](ggml_context * ctx) {
             ggml_tensor * dst = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 129, 300);
             set_values(dst, std::vector<float>(129 * 300, 1.0f));
             ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 194);
             for (int i = 0; i < 194; ++i) ((int64_t *) ids->data)[i] = (i * 7) % 300;
             return ggml_set_rows(ctx, dst, ggml_reshape_2d(ctx, in(ctx, GGML_TYPE_F32, CONTIG), 129, 194), ids);
         }},
        {"add broadcast", [&](ggml_context * ctx) { return ggml_add(ctx, in(ctx, GGML_TYPE_F32, CONTIG), row(ctx)); }},
        {"mul inplace strided", [&](ggml_context * ctx) { return ggml_mul_inplace(ctx, in(ctx, GGML_TYPE_F32, STRIDED_ROWS), row(ctx)); }},
        {"div f16", [&](ggml_context * ctx) { return ggml_div(ctx, in(ctx, GGML_TYPE_F16, CONTIG), row(ctx)); }},
        {"gelu", [&](ggml_context * ctx) { return ggml_gelu(ctx, in(ctx, GGML_TYPE_F32, CONTIG)); }},
        {"silu transposed", [&](ggml_context * ctx) { return ggml_silu(ctx, in(ctx, GGML_TYPE_F32, TRANSPOSED)); }},
        {"scale inplace", [&](ggml_context * ctx) { return ggml_scale_inplace(ctx, in(ctx, GGML_TYPE_F32, CONTIG), 0.125f); }},
        {"sum_rows", [&](ggml_context * ctx) { return ggml_sum_rows(ctx, in(ctx, GGML_TYPE_F32, CONTIG)); }},
        {"norm", [&](ggml_context * ctx) { return ggml_norm(ctx, in(ctx, GGML_TYPE_F32, STRIDED_ROWS), 1e-5f); }},
        {"rms_norm inplace", [&](ggml_context * ctx) { return ggml_rms_norm_inplace(ctx, in(ctx, GGML_TYPE_F32, CONTIG), 1e-6f); }},
        {"soft_max masked", [&](ggml_context * ctx) {
             const int64_t nm[4] = {129, 97, 1, 1};
             std::vector<float> mv(count(nm));
             for (int64_t i = 0; i < count(nm); ++i) mv[i] = (i % 129) > (i / 129) + 20 ? -INFINITY : 0.0f;
             return ggml_soft_max_ext(ctx, in(ctx, GGML_TYPE_F32, CONTIG), make_input(ctx, GGML_TYPE_F16, nm, CONTIG, mv), 0.3f, 0.0f);
         }},
        {"diag_mask_inf", [&](ggml_context * ctx) { return ggml_diag_mask_inf(ctx, in(ctx, GGML_TYPE_F32, CONTIG), 3); }},
        {"rope neox", [&](ggml_context * ctx) {
             const int64_t nr[4] = {128, 8, 24, 1};
             ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 24);
             for (int i = 0; i < 24; ++i) ((int32_t *) p->data)[i] = 100 + 3 * i;
             return ggml_rope(ctx, make_input(ctx, GGML_TYPE_F32, nr, PERMUTED_ROWS, random_values(count(nr), 43)), p, 96, GGML_ROPE_TYPE_NEOX);
         }},
    };
    for (const auto & c : cases) {
        CAPTURE(c.first);
        const std::vector<float> got = run_node(c.second);
        CHECK(!got.empty());
        if (std::string(c.first) == "cont transposed") CHECK(bit_equal(got, v));
        if (std::string(c.first) == "cpy f32->q8_0") check_quantized(GGML_TYPE_Q8_0, vq, got);
    }
}

