// The RPC server's graphs: GRAPH_COMPUTE's message decoded into kvgraph tensors, each node
// checked against what its CPU kernel requires, computed with the backend's executor in the
// client's node order; GRAPH_RECOMPUTE runs the stored graph again.
//
// Memory: every tensor becomes a view of one root tensor per buffer (offset = its address
// in the buffer), so the schedule's hazard rules see the aliasing ggml's allocator creates
// (a node reusing the bytes of a dead intermediate) and keep such nodes in list order.
//
// Checks that depend on data (row indices of get_rows / set_rows) run before every compute:
// the index tensor may be written by no node listed before its reader, so the values read
// at check time are the values the kernel reads.
#include "rpc-server.h"

#include "ggml-backend.h"
#include "ggml-impl.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_map>

namespace kvg::rpc {

StoredGraph::~StoredGraph() {
    if (ctx) ggml_free(ctx);
}

namespace {

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }
bool is_scalar(ggml_type t) { return is_float(t) || t == GGML_TYPE_I8 || t == GGML_TYPE_I16 || t == GGML_TYPE_I32; }
// Readable as floats by the copy kernels (rows of a quantized tensor are always dense here).
bool readable(const ggml_tensor * t) {
    return is_scalar(t->type) || (ggml_is_quantized(t->type) && kvg::row_decoder(t->type));
}
// Writable from floats by the copy kernels.
bool writable(const ggml_tensor * t) {
    return is_scalar(t->type) || (readable(t) && ggml_get_type_traits(t->type)->from_float_ref != nullptr);
}
bool same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    for (int i = 0; i < 4; ++i) {
        if (a->ne[i] != b->ne[i]) return false;
    }
    return true;
}
bool mm_weight_type(ggml_type t) {
    return t != GGML_TYPE_I8 && t != GGML_TYPE_I16 && t != GGML_TYPE_I32 && t != GGML_TYPE_I64;
}
// every unary op the CPU kernels have (xielu is not one of them)
bool unary_supported(int32_t op) {
    return op >= GGML_UNARY_OP_ABS && op <= GGML_UNARY_OP_TRUNC && op != GGML_UNARY_OP_XIELU;
}

// Sources an op reads: [min, max] of src[0..]; the rest must be absent.
struct SrcCount {
    int min, max;
};
SrcCount src_count(ggml_op op) {
    switch (op) {
        case GGML_OP_CPY:
        case GGML_OP_GET_ROWS:
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
        case GGML_OP_MUL_MAT: return {2, 2};
        case GGML_OP_SOFT_MAX:
        case GGML_OP_GLU: return {1, 2};
        case GGML_OP_ROPE:
        case GGML_OP_SET_ROWS: return {2, 3};       // set_rows: ggml lists the destination as src[2]
        case GGML_OP_FLASH_ATTN_EXT: return {3, 4}; // q, k, v, mask; no sinks (kvgraph's src[4] means else)
        default: return {1, 1};
    }
}

const char * check_copy(const ggml_tensor * t) {
    const ggml_tensor * s = t->src[0];
    if (ggml_nelements(s) != ggml_nelements(t)) return "source and result differ in element count";
    if (s->type != t->type && (!readable(s) || !writable(t))) return "no conversion between these types";
    return nullptr;
}

const char * check_rows(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *i = t->src[1];
    if (t->op == GGML_OP_GET_ROWS) {
        if (i->type != GGML_TYPE_I32) return "row indices must be i32";
        if (t->ne[0] != a->ne[0] || t->ne[1] != i->ne[0] || t->ne[2] != i->ne[1] || t->ne[3] != i->ne[2] ||
            a->ne[2] != i->ne[1] || a->ne[3] != i->ne[2] || i->ne[3] != 1) {
            return "shapes of source, indices and result do not match";
        }
        if (a->type != t->type && (!readable(a) || !writable(t))) return "no conversion between these types";
        return nullptr;
    }
    if (i->type != GGML_TYPE_I32 && i->type != GGML_TYPE_I64) return "row indices must be i32 or i64";
    if (t->ne[0] != a->ne[0] || a->ne[1] != i->ne[0] || t->ne[2] != a->ne[2] || t->ne[3] != a->ne[3] || i->ne[1] < 1 ||
        i->ne[2] < 1 || a->ne[2] % i->ne[1] != 0 || a->ne[3] % i->ne[2] != 0 || i->ne[3] != 1) {
        return "shapes of source, indices and result do not match";
    }
    if (!readable(a) || !writable(t)) return "no conversion between these types";
    return nullptr;
}

const char * check_elementwise(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *b = t->src[1];
    if (!is_float(a->type) || !is_float(t->type) || (b && !is_float(b->type))) return "types must be f32, f16 or bf16";
    if (!same_shape(a, t)) return "source and result differ in shape";
    if (b) {
        for (int d = 0; d < 4; ++d) {
            if (b->ne[d] < 1 || a->ne[d] % b->ne[d] != 0) return "the second source does not broadcast to the first";
        }
    }
    if (t->op == GGML_OP_UNARY && !unary_supported(t->op_params[0])) return "unary op not supported";
    if (t->op == GGML_OP_SCALE && t->op_params[1] != 0) return "scale with a bias is not supported";
    return nullptr;
}

const char * check_norm(const ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    if (a->type != GGML_TYPE_F32 || t->type != GGML_TYPE_F32) return "types must be f32";
    if (!same_shape(a, t)) return "source and result differ in shape";
    float eps;
    std::memcpy(&eps, &t->op_params[0], 4);
    if (!(eps >= 0.0f)) return "eps must be >= 0";
    return nullptr;
}

const char * check_soft_max(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *m = t->src[1];
    if (a->type != GGML_TYPE_F32 || t->type != GGML_TYPE_F32) return "types must be f32";
    if (!same_shape(a, t) || a->nb[0] != 4 || t->nb[0] != 4)
        return "source and result must have the same shape, dense rows";
    if (m) {
        if (m->type != GGML_TYPE_F32 && m->type != GGML_TYPE_F16) return "mask must be f32 or f16";
        if (m->ne[0] != t->ne[0] || m->ne[1] < t->ne[1] || m->ne[2] < 1 || m->ne[3] < 1 || t->ne[2] % m->ne[2] != 0 ||
            t->ne[3] % m->ne[3] != 0) {
            return "mask shape does not fit";
        }
    }
    return nullptr;
}

const char * check_rope(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *pos = t->src[1], *ff = t->src[2];
    if ((a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) || t->type != a->type) return "types must be f32 or f16";
    if (!same_shape(a, t)) return "source and result differ in shape";
    if (pos->type != GGML_TYPE_I32 || pos->ne[0] < a->ne[2]) return "positions must be i32, one per token";
    const int32_t n_dims = t->op_params[1], mode = t->op_params[2];
    if (mode != 0 && mode != GGML_ROPE_TYPE_NEOX) return "rope mode not supported (0 or neox)";
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > t->ne[0]) return "n_dims must be even and in (0, ne[0]]";
    if (ff && (ff->type != GGML_TYPE_F32 || ff->ne[0] < n_dims / 2))
        return "frequency factors must be f32, n_dims/2 of them";
    return nullptr;
}

const char * check_mul_mat(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *b = t->src[1];
    if (!mm_weight_type(a->type) || b->type != GGML_TYPE_F32 || t->type != GGML_TYPE_F32) return "types not supported";
    if (a->ne[0] != b->ne[0] || a->ne[1] != t->ne[0] || b->ne[1] != t->ne[1] || b->ne[2] != t->ne[2] ||
        b->ne[3] != t->ne[3] || a->ne[2] < 1 || a->ne[3] < 1 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        return "shapes do not match";
    }
    if (a->nb[0] != ggml_type_size(a->type) || t->nb[0] != 4)
        return "rows of the first source and the result must be dense";
    return nullptr;
}

const char * check_glu(const ggml_tensor * t) {
    const ggml_tensor *a = t->src[0], *b = t->src[1];
    if (t->op_params[0] < 0 || t->op_params[0] >= GGML_GLU_OP_COUNT) return "glu op not supported";
    if (!is_float(a->type) || !is_float(t->type) || (b && !is_float(b->type))) return "types must be f32, f16 or bf16";
    if (ggml_nrows(t) != ggml_nrows(a) || t->ne[0] > (b ? a->ne[0] : a->ne[0] / 2)) return "shapes do not match";
    if (b && (ggml_nrows(b) != ggml_nrows(a) || b->ne[0] < t->ne[0])) return "the gate's shape does not match";
    return nullptr;
}

// ggml's layout only: q [D, n_q, n_head, ne3], k [D, n_kv, n_head_kv, ne3], v [Dv, ...] (no
// packed heads, no broadcast over ne3), mask [n_kv, >= n_q, divides n_head, divides ne3].
const char * check_flash_attn(const ggml_tensor * t) {
    const ggml_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    auto kv_ok = [](const ggml_tensor * x) {
        return (x->type == GGML_TYPE_F32 || x->type == GGML_TYPE_F16 || x->type == GGML_TYPE_Q8_0) &&
               x->nb[0] == ggml_type_size(x->type);
    };
    if (q->type != GGML_TYPE_F32 || !kv_ok(k) || !kv_ok(v) || t->type != GGML_TYPE_F32 || t->nb[0] != 4)
        return "types not supported";
    const int64_t D = q->ne[0], Dv = v->ne[0], n_q = q->ne[1], n_head = q->ne[2], n_kv = v->ne[1], n_head_kv = v->ne[2];
    if (D < 1 || Dv < 1 || n_head_kv < 1 || k->ne[0] != D || k->ne[1] != n_kv || k->ne[2] != n_head_kv ||
        n_head % n_head_kv != 0 || k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3]) {
        return "shapes of q, k and v do not match";
    }
    if (t->ne[0] != Dv || t->ne[1] != n_head || t->ne[2] != n_q || t->ne[3] != q->ne[3])
        return "result shape does not match";
    if (m && ((m->type != GGML_TYPE_F32 && m->type != GGML_TYPE_F16) || m->nb[0] != ggml_type_size(m->type) ||
              m->ne[0] != n_kv || m->ne[1] < n_q || m->ne[2] < 1 || m->ne[3] < 1 || n_head % m->ne[2] != 0 ||
              q->ne[3] % m->ne[3] != 0)) {
        return "mask does not fit";
    }
    return nullptr;
}

typedef const char * (*OpCheck)(const ggml_tensor * t);
const char * check_view(const ggml_tensor *) { return nullptr; } // computes nothing

// The check of an op this server runs; null for the others.
OpCheck op_check(ggml_op op) {
    switch (op) {
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return check_view;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: return check_copy;
        case GGML_OP_GET_ROWS:
        case GGML_OP_SET_ROWS: return check_rows;
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_SCALE:
        case GGML_OP_UNARY: return check_elementwise;
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM: return check_norm;
        case GGML_OP_SOFT_MAX: return check_soft_max;
        case GGML_OP_ROPE: return check_rope;
        case GGML_OP_MUL_MAT: return check_mul_mat;
        case GGML_OP_GLU: return check_glu;
        case GGML_OP_FLASH_ATTN_EXT: return check_flash_attn;
        default: return nullptr;
    }
}

// Does t have anything to compute? Not a view, not empty, and for set_rows some rows to set.
bool runs(const ggml_tensor * t) {
    if (ggml_op_is_view(t->op) || ggml_nelements(t) == 0) return false;
    return t->op != GGML_OP_SET_ROWS || !t->src[0] || ggml_nelements(t->src[0]) > 0;
}

// Null if the CPU kernel of t's op can run t as given; else why not.
const char * check_node(const ggml_tensor * t) {
    if (t->op >= GGML_OP_COUNT) return "unknown op";
    const OpCheck check = op_check(t->op);
    if (!check) return "op not supported by this server";
    const SrcCount c = src_count(t->op);
    // kernels divide by dimensions: an empty result is not computed (build_graph skips it),
    // and a result computed from an empty source is refused
    const bool computed = runs(t);
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (i < c.min && !t->src[i]) return "a source is missing";
        if (i >= c.max && t->src[i]) return "too many sources for this op";
        if (computed && t->src[i] && ggml_nelements(t->src[i]) == 0) return "empty tensors are not computed";
    }
    return computed || ggml_op_is_view(t->op) ? check(t) : nullptr;
}

// Written address ranges (the client's addresses: unique over all buffers), merged.
class Intervals {
public:
    bool overlaps(uint64_t b, uint64_t e) const {
        auto it = m_.lower_bound(e); // first interval starting at or after e
        if (it == m_.begin()) return false;
        --it;
        return it->second > b;
    }
    void add(uint64_t b, uint64_t e) {
        if (b >= e) return;
        auto it = m_.upper_bound(b);
        if (it != m_.begin() && std::prev(it)->second >= b) --it;
        while (it != m_.end() && it->first <= e) {
            b = std::min(b, it->first), e = std::max(e, it->second);
            it = m_.erase(it);
        }
        m_[b] = e;
    }

private:
    std::map<uint64_t, uint64_t> m_;
};

// The client's address range of a tensor built from its wire form (see build_tensors).
struct Span {
    uint64_t begin, end;
};

bool run_index_checks(const StoredGraph & g, std::string * why) {
    for (const StoredGraph::IndexCheck & c : g.index_checks) {
        const ggml_tensor * x = c.idx;
        const bool i64 = x->type == GGML_TYPE_I64;
        for (int64_t i3 = 0; i3 < x->ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < x->ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < x->ne[1]; ++i1)
                    for (int64_t i0 = 0; i0 < x->ne[0]; ++i0) {
                        const char * p =
                            (const char *) x->data + i0 * x->nb[0] + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
                        const int64_t v =
                            i64 ? load<int64_t>((const uint8_t *) p, 0) : load<int32_t>((const uint8_t *) p, 0);
                        if (v < 0 || v >= c.limit) {
                            char buf[256];
                            snprintf(buf, sizeof buf, "node '%s': row index %lld is outside [0, %lld)", c.node->name,
                                     (long long) v, (long long) c.limit);
                            *why = buf;
                            return false;
                        }
                    }
    }
    return true;
}

} // namespace

// ---- GRAPH_COMPUTE ----
// | device (4) | n_nodes (4) | node ids (8 each) | n_tensors (4) | tensors |

namespace {

struct GraphBuild {
    std::vector<WireTensor> wire;
    std::vector<ggml_tensor *> tensors;
    std::vector<Span> spans;
    std::unordered_map<uint64_t, uint32_t> index; // id -> position in wire
    std::map<uint64_t, ggml_tensor *> roots;      // buffer handle -> root tensor
};

} // namespace

// Wire tensors -> kvgraph tensors: checked one by one, sources and view sources before
// their users (the client's order), so no cycle can be built.
static bool build_tensors(Session & s, GraphBuild & gb, ggml_context * ctx) {
    const size_t n = gb.wire.size();
    gb.tensors.assign(n, nullptr);
    gb.spans.assign(n, Span{0, 0});
    for (size_t i = 0; i < n; ++i) {
        const WireTensor & w = gb.wire[i];
        uint8_t * host = nullptr;
        uint64_t extent = 0;
        if (!s.check_tensor(w, true, &host, &extent)) return false;
        gb.spans[i] = {w.data, w.data + extent};
        ggml_tensor * t = ggml_new_tensor_4d(ctx, (ggml_type) w.type, w.ne[0], w.ne[1], w.ne[2], w.ne[3]);
        for (int d = 0; d < 4; ++d) t->nb[d] = w.nb[d];
        t->op = w.op < GGML_OP_COUNT ? (ggml_op) w.op : GGML_OP_NONE;
        std::memcpy(t->op_params, w.op_params, sizeof t->op_params);
        std::memcpy(t->name, w.name, sizeof t->name);
        t->data = host;
        gb.tensors[i] = t;
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            if (w.src[k] == 0) continue;
            auto it = gb.index.find(w.src[k]);
            if (it == gb.index.end() || it->second >= i)
                return s.fail("tensor '%s': source %d is not an earlier tensor of the graph", w.name, k);
            t->src[k] = gb.tensors[it->second];
        }
        if (w.view_src != 0) {
            auto it = gb.index.find(w.view_src);
            if (it == gb.index.end() || it->second >= i)
                return s.fail("tensor '%s': view source is not an earlier tensor", w.name);
            const WireTensor & v = gb.wire[it->second];
            const Span & vs = gb.spans[it->second];
            if (v.buffer != w.buffer || w.data < vs.begin || w.data + extent > vs.end ||
                w.data - v.data != w.view_offs) {
                return s.fail("tensor '%s': view [0x%llx, +%llu) is outside its source '%s' or at the wrong offset",
                              w.name, (unsigned long long) w.data, (unsigned long long) extent, v.name);
            }
        }
        // every tensor a view of its buffer's root (see the file comment)
        ggml_tensor *& root = gb.roots[w.buffer];
        if (!root) {
            const Buffer * b = s.find_buffer(w.buffer);
            root = ggml_new_tensor_1d(ctx, GGML_TYPE_I8, (int64_t) std::max<size_t>(b->size, 1));
            root->data = b->host;
        }
        t->view_src = root;
        t->view_offs = (size_t) (host - (uint8_t *) root->data);
    }
    return true;
}

// Node list -> graph; each node's op checked; row indices' writers looked for.
static bool build_graph(Session & s, GraphBuild & gb, const uint8_t * ids, uint32_t n_nodes, StoredGraph & g) {
    g.graph = ggml_new_graph_custom(g.ctx, std::max<uint32_t>(n_nodes, 1), false);
    Intervals written;
    std::vector<char> listed(gb.wire.size(), 0);
    for (uint32_t k = 0; k < n_nodes; ++k) {
        const uint64_t id = load<uint64_t>(ids, 8 * (size_t) k);
        auto it = gb.index.find(id);
        if (it == gb.index.end())
            return s.fail("node %u: id 0x%llx is not among the graph's tensors", k, (unsigned long long) id);
        if (listed[it->second]++) return s.fail("node %u: '%s' is listed twice", k, gb.wire[it->second].name);
        const WireTensor & w = gb.wire[it->second];
        ggml_tensor * t = gb.tensors[it->second];
        if (w.op >= GGML_OP_COUNT) return s.fail("node %u '%s': unknown op %u", k, w.name, w.op);
        if (t->op == GGML_OP_NONE) continue; // a leaf: nothing to compute
        if (const char * why = check_node(t))
            return s.fail("node %u '%s' (%s): %s", k, w.name, ggml_op_name(t->op), why);
        if (ggml_op_is_view(t->op) && w.view_src == 0)
            return s.fail("node %u '%s': a view op without a view source", k, w.name);
        // as ggml's CPU backend: a listed node without the compute flag is checked, not run;
        // an empty one has nothing to run
        if (!(w.flags & GGML_TENSOR_FLAG_COMPUTE) || (!runs(t) && !ggml_op_is_view(t->op))) continue;
        if (t->op == GGML_OP_GET_ROWS || t->op == GGML_OP_SET_ROWS) {
            const WireTensor & iw = gb.wire[gb.index[w.src[1]]];
            const Span sp = gb.spans[gb.index[w.src[1]]];
            if (written.overlaps(sp.begin, sp.end)) {
                return s.fail("node %u '%s': its row indices '%s' are written by an earlier node", k, w.name, iw.name);
            }
            g.index_checks.push_back({t, t->src[1], t->op == GGML_OP_GET_ROWS ? t->src[0]->ne[1] : t->ne[1]});
        }
        if (!ggml_op_is_view(t->op)) written.add(gb.spans[it->second].begin, gb.spans[it->second].end);
        ggml_graph_add_node(g.graph, t);
    }
    return true;
}

void Session::forget_graph() { graph_.reset(); }

bool Session::graph_compute(const uint8_t * p, size_t n) {
    if (n < 12) return fail("GRAPH_COMPUTE carries %zu bytes, at least 12 needed", n);
    if (load<uint32_t>(p, 0) != 0) return fail("device %u does not exist (one device: 0)", load<uint32_t>(p, 0));
    const uint32_t n_nodes = load<uint32_t>(p, 4);
    if (n_nodes > MAX_GRAPH_NODES) return fail("graph of %u nodes: at most %u allowed", n_nodes, MAX_GRAPH_NODES);
    const size_t at_count = 8 + 8 * (size_t) n_nodes;
    if (n < at_count + 4) return fail("GRAPH_COMPUTE of %u nodes carries %zu bytes: truncated", n_nodes, n);
    const uint32_t n_tensors = load<uint32_t>(p, at_count);
    if (n_tensors > MAX_GRAPH_TENSORS)
        return fail("graph of %u tensors: at most %u allowed", n_tensors, MAX_GRAPH_TENSORS);
    if (n != at_count + 4 + (size_t) n_tensors * WIRE_TENSOR_SIZE) {
        return fail("GRAPH_COMPUTE of %u nodes and %u tensors carries %zu bytes, expected %zu", n_nodes, n_tensors, n,
                    at_count + 4 + (size_t) n_tensors * WIRE_TENSOR_SIZE);
    }
    GraphBuild gb;
    gb.wire.reserve(n_tensors);
    for (uint32_t i = 0; i < n_tensors; ++i) {
        gb.wire.push_back(decode_tensor(p + at_count + 4 + (size_t) i * WIRE_TENSOR_SIZE));
        if (gb.wire[i].id == 0 || !gb.index.emplace(gb.wire[i].id, i).second) {
            return fail("tensor %u: id 0x%llx is zero or repeated", i, (unsigned long long) gb.wire[i].id);
        }
    }
    auto g = std::make_unique<StoredGraph>();
    const size_t mem = (2 * (size_t) n_tensors + 1) * ggml_tensor_overhead() +
                       ggml_graph_overhead_custom(std::max<uint32_t>(n_nodes, 1), false) + 4096;
    g->ctx = ggml_init({mem, nullptr, true});
    if (!g->ctx) return fail("out of memory for a graph of %u tensors", n_tensors);
    if (!build_tensors(*this, gb, g->ctx) || !build_graph(*this, gb, p + 8, n_nodes, *g)) return false;
    graph_ = std::move(g);
    return run_graph();
}

bool Session::graph_recompute(const uint8_t * p, size_t n) {
    if (n != 4) return fail("GRAPH_RECOMPUTE carries %zu bytes, expected 4", n);
    if (load<uint32_t>(p, 0) != 0) return fail("device %u does not exist (one device: 0)", load<uint32_t>(p, 0));
    if (!graph_) return fail("GRAPH_RECOMPUTE without a stored graph");
    return run_graph();
}

bool Session::run_graph() {
    std::string why;
    if (!run_index_checks(*graph_, &why)) return fail("%s", why.c_str());
    if (!backend_) return fail("no CPU backend");
    if (ggml_graph_n_nodes(graph_->graph) == 0) return true; // only leafs were listed
    if (ggml_backend_graph_compute(backend_, graph_->graph) != GGML_STATUS_SUCCESS) return fail("graph compute failed");
    return true;
}

} // namespace kvg::rpc
