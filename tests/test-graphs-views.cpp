// Random view programs, as an adversary would write them (issue 43): 4 persistent 3-d
// buffers written through strided, transposed and permuted views (rows with gaps, slices
// that interleave), set_rows with gaps, in-place ops, reads through the same kinds of
// views, and "dead" writes that a later write overwrites before anyone reads them. Only a
// random subset of ops is expanded, in random order. The reference works element by
// element from each view's ne/strides/offset, never from the library's access model:
//   1. the graph holds every op the roots need: their data sources and, for each element
//      they read, the last op created before them that writes it (closed under both);
//   2. running exactly the graph's computing nodes in creation order gives what kvgraph
//      computed: each node's result and every buffer element at the end;
//   3. running them in the order of gf->nodes gives the same (the node list agrees with
//      the edges, so a ggml tool walking gf->nodes computes what kvgraph computes);
//   4. ggml_graph_validate reports nothing, but pairs that join two contexts (no edges
//      join contexts by design: the node list orders them, as in ggml).
// Each rule of hazards.cpp that keeps these checks true was broken once on purpose and
// this test failed (10,000 programs from seed 4300, 2026-11-27): a strided write counted
// as covering its span: 784 programs (check 1; seeds 4304, 4308, 4312, ...); a strided
// write dropping the accesses inside its span: 871 (check 1; 4304, 4312, 4329, ...); no
// ordering through ops that run in no graph: 222 (checks 2-4; 4318, 4410, 4452, ...); no
// re-sort of the node list after an expansion: 2,733 (checks 3-4; 4302, 4308, 4312, ...).
// KVG_VIEWS_PROGRAMS and KVG_VIEWS_SEED set the count and the first seed; KVG_VIEWS_SHOW
// how many failing programs are printed in full; KVG_VIEWS_LIST=1 lists every failing
// seed with its op count and failed checks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int NBUF = 4, BNE0 = 6, BNE1 = 5, BNE2 = 4, BUF_N = BNE0 * BNE1 * BNE2, INP_N = 256;

// A view of one buffer in elements. The ggml calls: view_<nd>d(buf, bne, st1, st2, off),
// then transpose (tr 1) or permute by ax (tr 2). Logical element (i0, i1, i2), i0 fastest,
// sits at off + i0*st[0] + i1*st[1] + i2*st[2].
struct view_desc {
    int buf = 0, nd = 1, bne[3] = {1, 1, 1}, st1 = 1, st2 = 1, off = 0;
    int tr = 0, ax[3] = {0, 1, 2};
    int ne[3] = {1, 1, 1}, st[3] = {1, 1, 1};

    int n() const { return ne[0] * ne[1] * ne[2]; }
    int elem(int i0, int i1, int i2) const { return off + i0 * st[0] + i1 * st[1] + i2 * st[2]; }
    int at(int i) const { return elem(i % ne[0], (i / ne[0]) % ne[1], i / (ne[0] * ne[1])); }

    // the logical shape and strides the ggml calls produce
    void finish() {
        int e[3] = {bne[0], bne[1], bne[2]}, s[3] = {1, st1, st2};
        if (tr == 1) {
            std::swap(e[0], e[1]);
            std::swap(s[0], s[1]);
        }
        for (int i = 0; i < 3; ++i) {
            const int d = tr == 2 ? ax[i] : i; // permute: dim i goes to ax[i]
            ne[d] = e[i];
            st[d] = s[i];
        }
    }
};

// The order matters: ops up to OP_READ_ADD have a result of their own, from OP_CPY on
// they write a buffer.
enum op_kind {
    OP_INPUT,
    OP_READ_SCALE,
    OP_READ_CONT,
    OP_READ_ADD,
    OP_CPY,
    OP_SET_ROWS,
    OP_SCALE_INPLACE,
    OP_ADD_INPLACE
};

bool writes_buffer(op_kind k) { return k >= OP_CPY; }
bool reads_buffer(op_kind k) {
    return k == OP_READ_SCALE || k == OP_READ_CONT || k == OP_READ_ADD || k == OP_SCALE_INPLACE || k == OP_ADD_INPLACE;
}
bool has_value(op_kind k) { return k <= OP_READ_ADD; } // a result of its own, not a view of a buffer

struct prog_op {
    op_kind kind;
    ggml_tensor * t = nullptr;
    int ctx = 0;
    view_desc v;  // the buffer view it reads or writes
    int src = -1; // the op whose result it uses
    float s = 1.0f;
    int inp_off = 0, n = 0; // OP_INPUT: s * inp[inp_off .. inp_off + n)
    int nr = 0;             // OP_SET_ROWS: source row i of slice j goes to row rows[i + nr*j]
    std::vector<int> rows;
};

struct state {
    std::vector<float> buf[NBUF];
    std::vector<std::vector<float>> vals; // by op; NaN until the op ran
};

// The buffer elements an op writes or reads, as buf * BUF_N + element.
std::vector<int> written(const prog_op & o) {
    std::vector<int> r;
    if (!writes_buffer(o.kind)) return r;
    const int base = o.v.buf * BUF_N;
    if (o.kind == OP_SET_ROWS) {
        for (int j = 0; j < o.v.ne[2]; ++j)
            for (int i = 0; i < o.nr; ++i)
                for (int x = 0; x < o.v.ne[0]; ++x) r.push_back(base + o.v.elem(x, o.rows[i + o.nr * j], j));
    } else {
        for (int i = 0; i < o.v.n(); ++i) r.push_back(base + o.v.at(i));
    }
    return r;
}
std::vector<int> read_elems(const prog_op & o) {
    std::vector<int> r;
    if (!reads_buffer(o.kind)) return r;
    for (int i = 0; i < o.v.n(); ++i) r.push_back(o.v.buf * BUF_N + o.v.at(i));
    return r;
}

// The op's meaning in plain C.
void apply(const std::vector<prog_op> & ops, int id, const std::vector<float> & inp, state & st) {
    const prog_op & o = ops[id];
    std::vector<float> & b = st.buf[o.v.buf];
    const std::vector<float> * src = o.src >= 0 ? &st.vals[o.src] : nullptr;
    std::vector<float> & out = st.vals[id];
    const int n = o.v.n();
    switch (o.kind) {
        case OP_INPUT:
            for (int i = 0; i < o.n; ++i) out[i] = inp[o.inp_off + i] * o.s;
            break;
        case OP_READ_SCALE:
            for (int i = 0; i < n; ++i) out[i] = b[o.v.at(i)] * o.s;
            break;
        case OP_READ_CONT:
            for (int i = 0; i < n; ++i) out[i] = b[o.v.at(i)];
            break;
        case OP_READ_ADD:
            for (int i = 0; i < n; ++i) out[i] = b[o.v.at(i)] + (*src)[i];
            break;
        case OP_CPY:
            for (int i = 0; i < n; ++i) b[o.v.at(i)] = (*src)[i];
            break;
        case OP_SCALE_INPLACE:
            for (int i = 0; i < n; ++i) b[o.v.at(i)] *= o.s;
            break;
        case OP_ADD_INPLACE:
            for (int i = 0; i < n; ++i) b[o.v.at(i)] += (*src)[i];
            break;
        case OP_SET_ROWS:
            for (int j = 0; j < o.v.ne[2]; ++j)
                for (int i = 0; i < o.nr; ++i)
                    for (int x = 0; x < o.v.ne[0]; ++x)
                        b[o.v.elem(x, o.rows[i + o.nr * j], j)] = (*src)[x + o.v.ne[0] * (i + o.nr * j)];
            break;
    }
}

bool is_view_op(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE || t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_PERMUTE ||
           t->op == GGML_OP_TRANSPOSE;
}

ggml_context * new_ctx(size_t size, bool no_alloc) {
    ggml_init_params p = {size, nullptr, no_alloc};
    return ggml_init(p);
}

// Runs gf on n_threads; false if kvgraph refused it.
bool compute(ggml_cgraph * gf, int n_threads) {
    ggml_cplan plan = ggml_graph_plan(gf, n_threads, nullptr);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    return ggml_graph_compute(gf, &plan) == GGML_STATUS_SUCCESS;
}

std::string view_text(const view_desc & v) {
    std::ostringstream s;
    s << "buf" << v.buf << "[" << v.nd << "d " << v.bne[0];
    if (v.nd > 1) s << "x" << v.bne[1];
    if (v.nd > 2) s << "x" << v.bne[2];
    s << " @" << v.off;
    if (v.nd > 1) s << " nb1 " << v.st1;
    if (v.nd > 2) s << " nb2 " << v.st2;
    s << "]";
    if (v.tr == 1) s << ".T";
    if (v.tr == 2) s << ".perm(" << v.ax[0] << "," << v.ax[1] << "," << v.ax[2] << ")";
    if (v.n() <= 12) { // small views: the elements, in logical order
        s << "{";
        for (int i = 0; i < v.n(); ++i) s << (i ? "," : "") << v.at(i);
        s << "}";
    }
    return s.str();
}

struct config {
    bool planner, two_ctx, reverse_roots, barrier;
    int n_threads;
};

// What a run found: fail[c] for check c (1-4), the first difference of each.
struct outcome {
    bool fail[5] = {};
    std::string detail;
    bool any() const { return fail[1] || fail[2] || fail[3] || fail[4]; }
};

struct program {
    std::mt19937 rng;
    config cfg;
    ggml_context * data = nullptr; // buffers, the input, set_rows indices
    ggml_context * ctx[2] = {nullptr, nullptr};
    ggml_tensor * bufs[NBUF];
    ggml_tensor * inp = nullptr;
    state init;
    std::vector<float> inp_vals;
    std::vector<prog_op> ops;
    std::vector<int> roots;
    ggml_cgraph * gf = nullptr;
    ggml_gallocr_t ga = nullptr;
    std::ostringstream text;

    explicit program(unsigned seed) : rng(seed) {
        cfg.planner = chance(50);
        cfg.two_ctx = chance(15);
        cfg.reverse_roots = chance(30);
        cfg.barrier = chance(30);
        cfg.n_threads = uni(1, 8);
        data = new_ctx(256u << 10, false);
        for (int i = 0; i < 2; ++i) ctx[i] = new_ctx(ggml_graph_overhead() + (512u << 10), cfg.planner);
        for (int b = 0; b < NBUF; ++b) {
            bufs[b] = ggml_format_name(ggml_new_tensor_3d(data, GGML_TYPE_F32, BNE0, BNE1, BNE2), "buf%d", b);
            init.buf[b].resize(BUF_N);
            for (float & x : init.buf[b]) x = (float) uni(-8, 8) * 0.25f;
            std::memcpy(bufs[b]->data, init.buf[b].data(), sizeof(float) * BUF_N);
        }
        inp = ggml_set_name(ggml_new_tensor_1d(data, GGML_TYPE_F32, INP_N), "inp");
        inp_vals.resize(INP_N);
        for (float & x : inp_vals) x = (float) uni(-16, 16) * 0.125f;
        std::memcpy(inp->data, inp_vals.data(), sizeof(float) * INP_N);
        if (cfg.planner) ga = ggml_gallocr_new(NULL);
    }
    ~program() {
        ggml_gallocr_free(ga);
        ggml_free(ctx[1]);
        ggml_free(ctx[0]);
        ggml_free(data);
    }
    program(const program &) = delete;
    program & operator=(const program &) = delete;

    int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
    bool chance(int pct) { return uni(0, 99) < pct; }
    float pick_scale() {
        static const float s[] = {0.5f, -1.0f, 2.0f, 1.5f, -0.25f};
        return s[uni(0, 4)];
    }
    int pick_ctx() { return cfg.two_ctx && chance(50) ? 1 : 0; }
    int pick_buf() { // buffers 0 and 1 more often, so that accesses meet
        const int r = uni(0, 99);
        return r < 40 ? 0 : r < 70 ? 1 : r < 85 ? 2 : 3;
    }

    // Strided views: rows with gaps, slices that interleave with rows, then maybe
    // transposed or permuted. Every element distinct, inside the buffer.
    view_desc random_view(int buf) {
        for (int attempt = 0; attempt < 64; ++attempt) {
            view_desc v;
            v.buf = buf;
            v.nd = uni(1, 3);
            v.bne[0] = uni(1, BNE0);
            if (v.nd > 1) v.bne[1] = uni(1, BNE1);
            if (v.nd > 2) v.bne[2] = uni(1, BNE2);
            v.st1 = chance(70) ? v.bne[0] + uni(0, 4) : uni(1, 12);
            v.st2 = chance(60) ? v.st1 * v.bne[1] + uni(0, 6) : uni(1, 40);
            if (v.nd == 1) v.st1 = v.st2 = v.bne[0];
            if (v.nd == 2) v.st2 = v.st1 * v.bne[1];
            if (v.nd > 1 && chance(30)) v.tr = 1;
            if (v.nd == 3 && v.tr == 0 && chance(40)) {
                v.tr = 2;
                while (v.ax[0] == 0 && v.ax[1] == 1) std::shuffle(v.ax, v.ax + 3, rng); // not the identity
            }
            v.finish();
            const int last = v.elem(v.ne[0] - 1, v.ne[1] - 1, v.ne[2] - 1);
            if (last >= BUF_N) continue;
            v.off = uni(0, BUF_N - 1 - last);
            std::set<int> seen;
            for (int i = 0; i < v.n(); ++i) seen.insert(v.at(i));
            if ((int) seen.size() == v.n()) return v;
        }
        return dense_view(buf, uni(0, BUF_N - 6), 6);
    }
    static view_desc dense_view(int buf, int off, int n) {
        view_desc v;
        v.buf = buf;
        v.off = off;
        v.bne[0] = v.st1 = v.st2 = n;
        v.finish();
        return v;
    }

    static view_desc whole_view(int buf) {
        view_desc v;
        v.buf = buf;
        v.nd = 3;
        v.bne[0] = BNE0, v.bne[1] = BNE1, v.bne[2] = BNE2;
        v.st1 = BNE0, v.st2 = BNE0 * BNE1;
        v.finish();
        return v;
    }

    ggml_tensor * make_view(ggml_context * c, const view_desc & v) {
        const size_t f = sizeof(float);
        ggml_tensor * t;
        if (v.nd == 1) t = ggml_view_1d(c, bufs[v.buf], v.bne[0], v.off * f);
        else if (v.nd == 2) t = ggml_view_2d(c, bufs[v.buf], v.bne[0], v.bne[1], v.st1 * f, v.off * f);
        else t = ggml_view_3d(c, bufs[v.buf], v.bne[0], v.bne[1], v.bne[2], v.st1 * f, v.st2 * f, v.off * f);
        if (v.tr == 1) t = ggml_transpose(c, t);
        if (v.tr == 2) t = ggml_permute(c, t, v.ax[0], v.ax[1], v.ax[2], 3);
        return t;
    }

    int push(prog_op o, const std::string & line) {
        const int id = (int) ops.size();
        text << "  #" << id << (cfg.two_ctx ? (o.ctx ? " [b]" : " [a]") : "") << " " << line << "\n";
        ops.push_back(std::move(o));
        return id;
    }

    // A value of n elements: an earlier op's result of that size, or s * a slice of the input.
    int value_of(int n) {
        std::vector<int> same;
        for (int i = 0; i < (int) ops.size(); ++i)
            if (has_value(ops[i].kind) && ggml_nelements(ops[i].t) == n) same.push_back(i);
        if (!same.empty() && chance(30)) return same[uni(0, (int) same.size() - 1)];
        prog_op o;
        o.kind = OP_INPUT;
        o.ctx = pick_ctx();
        o.n = n;
        o.inp_off = uni(0, INP_N - n);
        o.s = pick_scale();
        ggml_context * c = ctx[o.ctx];
        o.t = ggml_scale(c, ggml_view_1d(c, inp, n, (size_t) o.inp_off * sizeof(float)), o.s);
        std::ostringstream l;
        l << "v" << ops.size() << " = inp[" << o.inp_off << "+" << n << "] * " << o.s;
        return push(o, l.str());
    }
    // op id's result in the shape ne (contiguous, so a reshape)
    ggml_tensor * shaped(ggml_context * c, int id, const int * ne) {
        return ggml_reshape_3d(c, ops[id].t, ne[0], ne[1], ne[2]);
    }

    // cpy, scale_inplace or add_inplace through v
    int add_write(op_kind kind, const view_desc & v) {
        prog_op o;
        o.kind = kind;
        o.v = v;
        if (kind != OP_SCALE_INPLACE) o.src = value_of(v.n());
        o.ctx = pick_ctx();
        ggml_context * c = ctx[o.ctx];
        ggml_tensor * dst = make_view(c, v);
        std::ostringstream l;
        if (kind == OP_CPY) {
            o.t = ggml_cpy(c, ops[o.src].t, dst);
            l << view_text(v) << " = v" << o.src;
        } else if (kind == OP_ADD_INPLACE) {
            o.t = ggml_add_inplace(c, dst, shaped(c, o.src, v.ne));
            l << view_text(v) << " += v" << o.src;
        } else {
            o.s = pick_scale();
            o.t = ggml_scale_inplace(c, dst, o.s);
            l << view_text(v) << " *= " << o.s;
        }
        return push(o, l.str());
    }

    // scale, cont or add reading v; the result is a new contiguous tensor
    int add_read(op_kind kind, const view_desc & v) {
        prog_op o;
        o.kind = kind;
        o.v = v;
        if (kind == OP_READ_ADD) o.src = value_of(v.n());
        o.ctx = pick_ctx();
        ggml_context * c = ctx[o.ctx];
        ggml_tensor * src = make_view(c, v);
        std::ostringstream l;
        l << "v" << ops.size() << " = ";
        if (kind == OP_READ_SCALE) {
            o.s = pick_scale();
            o.t = ggml_scale(c, src, o.s);
            l << view_text(v) << " * " << o.s;
        } else if (kind == OP_READ_CONT) {
            o.t = ggml_cont(c, src);
            l << "cont " << view_text(v);
        } else {
            o.t = ggml_add(c, src, shaped(c, o.src, v.ne));
            l << view_text(v) << " + v" << o.src;
        }
        return push(o, l.str());
    }

    // set_rows into the whole buffer or a view of it: per slice, distinct rows with gaps
    int add_set_rows(int buf) {
        prog_op o;
        o.kind = OP_SET_ROWS;
        const bool whole = chance(40); // the buffer itself, [6, 5, 4]
        o.v = whole ? whole_view(buf) : random_view(buf);
        const int n_rows = o.v.ne[1], n_slices = o.v.ne[2];
        o.nr = uni(1, n_rows);
        std::vector<int> perm(n_rows);
        for (int i = 0; i < n_rows; ++i) perm[i] = i;
        for (int j = 0; j < n_slices; ++j) {
            if (j == 0 || chance(50)) std::shuffle(perm.begin(), perm.end(), rng);
            o.rows.insert(o.rows.end(), perm.begin(), perm.begin() + o.nr);
        }
        const int ne[3] = {o.v.ne[0], o.nr, n_slices};
        o.src = value_of(ne[0] * ne[1] * ne[2]);
        o.ctx = pick_ctx();
        ggml_context * c = ctx[o.ctx];
        ggml_tensor * idx = ggml_new_tensor_2d(data, GGML_TYPE_I32, o.nr, n_slices);
        std::memcpy(idx->data, o.rows.data(), sizeof(int) * o.rows.size());
        o.t = ggml_set_rows(c, whole ? bufs[buf] : make_view(c, o.v), shaped(c, o.src, ne), idx);
        std::ostringstream l;
        l << "set_rows(" << (whole ? "buf" + std::to_string(buf) : view_text(o.v)) << ", v" << o.src << ", rows";
        for (int j = 0; j < n_slices; ++j) {
            l << (j ? " |" : "");
            for (int i = 0; i < o.nr; ++i) l << " " << o.rows[i + o.nr * j];
        }
        l << ")";
        return push(o, l.str());
    }

    // A reader, a write that a later write overwrites before anything reads it, then the
    // overwriting write (issue 43's second program): the dead write held the only edge
    // from the reader to the later writer.
    void add_dead_write() {
        const int buf = pick_buf();
        add_read(chance(50) ? OP_READ_SCALE : OP_READ_CONT, random_view(buf));
        const view_desc dead = random_view(buf);
        add_write(OP_CPY, dead);
        int lo = BUF_N, hi = 0;
        for (int i = 0; i < dead.n(); ++i) lo = std::min(lo, dead.at(i)), hi = std::max(hi, dead.at(i));
        add_write(OP_CPY, chance(50) ? dead : dense_view(buf, lo, hi - lo + 1));
    }

    // A write, then a strided write whose rows pass on either side of it (its span holds
    // the first write's bytes but it does not touch them), then a reader of the whole
    // span (issue 43's first program): the reader needs both writers.
    void add_hidden_write() {
        const int buf = pick_buf(), len = uni(1, 3), ne0 = uni(1, 3), start = uni(0, 3);
        const int at = start + ne0 + uni(0, 1); // the first write, between two rows
        view_desc rows;
        rows.buf = buf;
        rows.nd = 2;
        rows.off = start;
        rows.bne[0] = ne0;
        rows.bne[1] = uni(2, 3);
        rows.st1 = at + len - start + uni(0, 1);
        rows.st2 = rows.st1 * rows.bne[1];
        rows.tr = uni(0, 1);
        rows.finish();
        const int shift = uni(0, BUF_N - 1 - rows.elem(rows.ne[0] - 1, rows.ne[1] - 1, 0));
        rows.off += shift;
        add_write(chance(60) ? OP_CPY : OP_ADD_INPLACE, dense_view(buf, at + shift, len));
        add_write(chance(60) ? OP_CPY : OP_SCALE_INPLACE, rows);
        const view_desc span = dense_view(buf, rows.off, rows.elem(rows.ne[0] - 1, rows.ne[1] - 1, 0) - rows.off + 1);
        add_read(chance(50) ? OP_READ_SCALE : OP_READ_CONT, span);
    }

    void random_op() {
        const int r = uni(0, 99), buf = pick_buf();
        if (r < 14) add_write(OP_CPY, random_view(buf));
        else if (r < 24) add_set_rows(buf);
        else if (r < 34) add_write(OP_SCALE_INPLACE, random_view(buf));
        else if (r < 46) add_write(OP_ADD_INPLACE, random_view(buf));
        else if (r < 62) add_read(OP_READ_SCALE, random_view(buf));
        else if (r < 74) add_read(OP_READ_CONT, random_view(buf));
        else if (r < 84) add_read(OP_READ_ADD, random_view(buf));
        else if (r < 92) add_dead_write();
        else add_hidden_write();
    }

    // n_ops random ops (a dead-write triple counts once), then a graph of a random
    // subset of them, expanded in random or reverse creation order. With two contexts
    // no edges join them, so every op is expanded in creation order, as in ggml.
    void build(int n_ops) {
        for (int k = 0; k < n_ops; ++k) random_op();
        const int n = (int) ops.size();
        for (int i = 0; i < n; ++i)
            if (cfg.two_ctx || chance(35)) roots.push_back(i);
        if (roots.empty()) roots.push_back(uni(0, n - 1));
        if (!cfg.two_ctx) {
            std::shuffle(roots.begin(), roots.end(), rng);
            if (cfg.reverse_roots) std::sort(roots.rbegin(), roots.rend());
        }
        gf = ggml_new_graph(ctx[0]);
        for (int r : roots) ggml_build_forward_expand(gf, ops[r].t);
        text << "  expand:";
        for (int r : roots) text << " #" << r;
        text << "\n";
    }

    // The ops the roots need (check 1), each with the op that needs it (-1: a root).
    std::vector<int> required() const {
        const int n = (int) ops.size();
        std::vector<std::vector<int>> needs(n);
        std::vector<int> last[2]; // per context (each has its own edges): last writer of each element
        for (auto & l : last) l.assign(NBUF * BUF_N, -1);
        for (int i = 0; i < n; ++i) {
            if (ops[i].src >= 0) needs[i].push_back(ops[i].src);
            for (int e : read_elems(ops[i]))
                if (last[ops[i].ctx][e] >= 0) needs[i].push_back(last[ops[i].ctx][e]);
            for (int e : written(ops[i])) last[ops[i].ctx][e] = i;
        }
        std::vector<int> by(n, -2); // -2: not required
        std::vector<std::pair<int, int>> todo;
        for (int r : roots) todo.push_back({r, -1});
        while (!todo.empty()) {
            const std::pair<int, int> x = todo.back();
            todo.pop_back();
            if (by[x.first] != -2) continue;
            by[x.first] = x.second;
            for (int j : needs[x.first]) todo.push_back({j, x.first});
        }
        return by;
    }

    // The program's computing nodes in gf->nodes order; a node that is none of them is
    // reported in err.
    std::vector<int> node_ops(std::string & err) {
        std::map<const ggml_tensor *, int> id;
        for (int i = 0; i < (int) ops.size(); ++i) id[ops[i].t] = i;
        std::vector<int> r;
        for (int k = 0; k < ggml_graph_n_nodes(gf); ++k) {
            const ggml_tensor * t = ggml_graph_node(gf, k);
            if (is_view_op(t)) continue;
            auto it = id.find(t);
            if (it == id.end()) err += "node " + std::to_string(k) + " (" + t->name + ") is no op of the program\n";
            else if (std::count(r.begin(), r.end(), it->second))
                err += "#" + std::to_string(it->second) + " is listed twice\n";
            else r.push_back(it->second);
        }
        return r;
    }

    // The plain C interpretation of the ops in `order`, from the initial buffers.
    state interpret(const std::vector<int> & order) const {
        state st = init;
        st.vals.resize(ops.size());
        for (int i = 0; i < (int) ops.size(); ++i)
            if (has_value(ops[i].kind)) st.vals[i].assign((size_t) ggml_nelements(ops[i].t), NAN);
        for (int i : order) apply(ops, i, inp_vals, st);
        return st;
    }

    // What kvgraph left: the buffers and the results of the ops flagged in `which`.
    state observed(const std::vector<bool> & which) const {
        state st;
        st.vals.resize(ops.size());
        for (int b = 0; b < NBUF; ++b)
            st.buf[b].assign((const float *) bufs[b]->data, (const float *) bufs[b]->data + BUF_N);
        for (int i = 0; i < (int) ops.size(); ++i) {
            if (!which[i]) continue;
            const float * d = (const float *) ops[i].t->data;
            st.vals[i].assign(d, d + ggml_nelements(ops[i].t));
        }
        return st;
    }
};

// The first difference between a and b (the buffers and the results flagged in which),
// or "" if none. NaN (a result never computed) differs from everything.
std::string first_difference(const state & a, const state & b, const std::vector<bool> & which, const char * na,
                             const char * nb) {
    std::ostringstream s;
    for (int k = 0; k < NBUF; ++k) {
        for (int i = 0; i < BUF_N; ++i) {
            if (a.buf[k][i] == b.buf[k][i]) continue;
            s << "buf" << k << "[" << i << "]: " << na << " " << a.buf[k][i] << ", " << nb << " " << b.buf[k][i];
            return s.str();
        }
    }
    for (size_t o = 0; o < which.size(); ++o) {
        if (!which[o]) continue;
        for (size_t i = 0; i < a.vals[o].size(); ++i) {
            if (a.vals[o][i] == b.vals[o][i]) continue;
            s << "v" << o << "[" << i << "]: " << na << " " << a.vals[o][i] << ", " << nb << " " << b.vals[o][i];
            return s.str();
        }
    }
    return "";
}

// The validator's report; *count: the pairs it reports that one access log could have
// ordered. ctx_of (op -> context; null: one context): ops of two contexts get no edges
// from each other by design (the node list orders them, as in ggml), so a pair joining
// the contexts is expected and not counted.
std::string validate_log(ggml_cgraph * gf, int * count, const std::map<const ggml_tensor *, int> * ctx_of = nullptr) {
    std::vector<ggml_hazard> h(4096);
    FILE * f = std::tmpfile();
    const int n = ggml_graph_validate(gf, h.data(), (int) h.size(), f);
    *count = n > (int) h.size() ? n : 0;
    for (int i = 0; i < n && i < (int) h.size(); ++i) {
        *count += !ctx_of || ctx_of->count(h[i].first) == 0 || ctx_of->count(h[i].second) == 0 ||
                  ctx_of->at(h[i].first) == ctx_of->at(h[i].second);
    }
    std::string s;
    if (!f) return s;
    std::rewind(f);
    for (int c; (c = std::fgetc(f)) != EOF;) s += (char) c;
    std::fclose(f);
    return s;
}

// Computes p's graph and runs checks 1-4 on it.
outcome run_and_check(program & p) {
    outcome res;
    std::ostringstream d;
    const int n = (int) p.ops.size();
    std::string err;
    const std::vector<int> list = p.node_ops(err);
    std::vector<bool> in_graph(n, false), shown(n, false), results(n, false);
    std::vector<int> created;
    for (int i : list) in_graph[i] = true;
    for (int i = 0; i < n; ++i)
        if (in_graph[i]) created.push_back(i);
    const std::vector<int> by = p.required();
    for (int i = 0; i < n; ++i) {
        if (by[i] == -2 || in_graph[i]) continue;
        res.fail[1] = true;
        d << "check 1: #" << i << " is not in the graph, but "
          << (by[i] < 0 ? std::string("it is a root") : "#" + std::to_string(by[i]) + " needs it") << "\n";
    }
    // the planner may reuse the memory of results nobody keeps: check the outputs only
    for (int i = 0; i < n; ++i) {
        results[i] = in_graph[i] && has_value(p.ops[i].kind);
        shown[i] = results[i] && (!p.cfg.planner || p.chance(50));
        if (p.cfg.planner && shown[i]) ggml_set_output(p.ops[i].t);
    }
    ggml_cpu_set_sched_mode(p.cfg.barrier ? GGML_SCHED_BARRIER : GGML_SCHED_DAG);
    const bool ran = (!p.cfg.planner || ggml_gallocr_alloc_graph(p.ga, p.gf)) && compute(p.gf, p.cfg.n_threads);
    const state ref = p.interpret(created);
    std::string diff = !ran ? "kvgraph refused the graph" : err;
    if (diff.empty()) diff = first_difference(p.observed(shown), ref, shown, "kvgraph", "creation order");
    if (!diff.empty()) {
        res.fail[2] = true;
        d << "check 2: " << diff << "\n";
    }
    diff = first_difference(p.interpret(list), ref, results, "node list", "creation order");
    if (!diff.empty()) {
        res.fail[3] = true;
        d << "check 3: " << diff << "\n  node list:";
        for (int i : list) d << " #" << i;
        d << "\n";
    }
    int n_hazards = 0;
    std::map<const ggml_tensor *, int> ctx_of;
    for (const prog_op & o : p.ops) ctx_of[o.t] = o.ctx;
    const std::string log = validate_log(p.gf, &n_hazards, &ctx_of);
    if (n_hazards != 0) {
        res.fail[4] = true;
        d << "check 4: ggml_graph_validate reports " << n_hazards << " pairs within one context\n" << log;
    }
    res.detail = d.str();
    return res;
}

std::string header(unsigned seed, const program & p) {
    std::ostringstream s;
    s << "seed " << seed << " (" << p.ops.size() << " ops): " << (p.cfg.planner ? "planner" : "no planner")
      << (p.cfg.two_ctx ? ", two contexts" : "") << ", " << p.cfg.n_threads << " threads, "
      << (p.cfg.barrier ? "barrier" : "DAG") << (p.cfg.reverse_roots ? ", roots in reverse order" : "");
    return s.str();
}

int env_int(const char * name, int def) {
    const char * e = std::getenv(name);
    return e ? std::atoi(e) : def;
}

std::string floats_text(const std::vector<float> & v) {
    std::ostringstream s;
    for (size_t i = 0; i < v.size(); ++i) s << (i ? " " : "") << v[i];
    return s.str();
}

// Issue 43's minimal programs: buf is 8 floats of 0, the values written are constants.
struct minimal {
    ggml_context * ctx = new_ctx(1u << 20, false);
    ggml_tensor * buf = constant(8, 0.0f);
    ~minimal() { ggml_free(ctx); }

    ggml_tensor * constant(int n, float x) {
        ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        for (int i = 0; i < n; ++i) ((float *) t->data)[i] = x;
        return t;
    }
    // Every compute (1 and 4 threads, DAG and barrier), each from buf = 0, gives the
    // wanted results, and the graph validates.
    void check(ggml_cgraph * gf, const std::vector<std::pair<ggml_tensor *, std::vector<float>>> & want) {
        const ggml_sched_mode saved = ggml_cpu_get_sched_mode();
        for (int mode = 0; mode < 2; ++mode) {
            for (int n_threads : {1, 4}) {
                ggml_cpu_set_sched_mode(mode ? GGML_SCHED_BARRIER : GGML_SCHED_DAG);
                std::memset(buf->data, 0, ggml_nbytes(buf));
                REQUIRE(compute(gf, n_threads));
                for (const auto & w : want) {
                    const float * d = (const float *) w.first->data;
                    const std::vector<float> got(d, d + w.second.size());
                    INFO(n_threads << " threads, " << std::string(mode ? "barrier" : "DAG") << ": " << w.first->name
                                   << " = " << floats_text(got) << ", want " << floats_text(w.second));
                    CHECK(got == w.second);
                }
            }
        }
        ggml_cpu_set_sched_mode(saved);
        int n_hazards = 0;
        INFO(validate_log(gf, &n_hazards));
        CHECK(n_hazards == 0);
    }
};

} // namespace

TEST_CASE("random view programs: the graph holds what the roots need and computes it in creation order") {
    const int n_programs = env_int("KVG_VIEWS_PROGRAMS", 500);
    const unsigned base_seed = (unsigned) env_int("KVG_VIEWS_SEED", 4300);
    const int show = env_int("KVG_VIEWS_SHOW", 5);
    const bool list = env_int("KVG_VIEWS_LIST", 0) != 0;
    const ggml_sched_mode saved = ggml_cpu_get_sched_mode();
    int failing = 0, by_check[5] = {}, n_two_ctx = 0, two_ctx_by_check[5] = {};
    for (int k = 0; k < n_programs; ++k) {
        const unsigned seed = base_seed + (unsigned) k;
        program p(seed);
        p.build(p.uni(4, 14));
        const outcome o = run_and_check(p);
        n_two_ctx += p.cfg.two_ctx;
        if (!o.any()) continue;
        ++failing;
        std::string which;
        for (int c = 1; c <= 4; ++c) {
            by_check[c] += o.fail[c];
            two_ctx_by_check[c] += o.fail[c] && p.cfg.two_ctx;
            if (o.fail[c]) which += (which.empty() ? "" : ",") + std::to_string(c);
        }
        if (list) std::printf("failing seed %u: %zu ops, checks %s\n", seed, p.ops.size(), which.c_str());
        if (failing <= show) FAIL_CHECK(header(seed, p) << "\n" << p.text.str() << o.detail);
    }
    ggml_cpu_set_sched_mode(saved);
    MESSAGE(n_programs << " programs from seed " << base_seed << ": " << failing << " failing (check 1: " << by_check[1]
                       << ", 2: " << by_check[2] << ", 3: " << by_check[3] << ", 4: " << by_check[4] << "); of the "
                       << n_two_ctx << " two-context programs (no edges join the contexts): check 1: "
                       << two_ctx_by_check[1] << ", 2: " << two_ctx_by_check[2] << ", 3: " << two_ctx_by_check[3]
                       << ", 4: " << two_ctx_by_check[4]);
    CHECK(failing == 0);
}

// A strided write (buf[0] and buf[6]) whose span holds an earlier write (buf[2..3]) it
// does not touch: the reader of all of buf needs both writers.
TEST_CASE("issue 43, program 1: a strided write does not hide the earlier write inside its span") {
    minimal m;
    ggml_cpy(m.ctx, m.constant(2, 1.0f), ggml_view_1d(m.ctx, m.buf, 2, 2 * sizeof(float)));
    ggml_cpy(m.ctx, m.constant(2, 5.0f), ggml_view_2d(m.ctx, m.buf, 1, 2, 6 * sizeof(float), 0));
    ggml_tensor * r = ggml_set_name(ggml_scale(m.ctx, m.buf, 1.0f), "r");
    ggml_cgraph * gf = ggml_new_graph(m.ctx);
    ggml_build_forward_expand(gf, r);
    m.check(gf, {{r, {5, 0, 1, 1, 0, 0, 5, 0}}});
}

// r reads buf[2..3], w1 writes buf[1..4], w2 overwrites buf[0..5], f reads buf. w1 is
// dead, yet r must still run before w2.
TEST_CASE("issue 43, program 2: a dead write does not lose the order of the reader before it") {
    minimal m;
    ggml_tensor * r = ggml_set_name(ggml_scale(m.ctx, ggml_view_1d(m.ctx, m.buf, 2, 2 * sizeof(float)), 1.0f), "r");
    ggml_cpy(m.ctx, m.constant(4, 1.0f), ggml_view_1d(m.ctx, m.buf, 4, 1 * sizeof(float)));
    ggml_cpy(m.ctx, m.constant(6, 5.0f), ggml_view_1d(m.ctx, m.buf, 6, 0));
    ggml_tensor * f = ggml_set_name(ggml_scale(m.ctx, m.buf, 1.0f), "f");
    ggml_cgraph * gf = ggml_new_graph(m.ctx);
    ggml_build_forward_expand(gf, f);
    ggml_build_forward_expand(gf, r);
    m.check(gf, {{r, {0, 0}}, {f, {5, 5, 5, 5, 5, 5, 0, 0}}});
}
