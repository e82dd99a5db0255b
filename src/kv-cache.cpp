// KV cache buffers (see kv-cache.h).
#include "kv-cache.h"

#include <cstring>

namespace kvg {

KvCache::~KvCache() {
    if (ctx) ggml_free(ctx);
}

bool KvCache::init(const HParams & hp, int n_ctx_, ggml_type type_, std::string * err) {
    if (type_ != GGML_TYPE_F32 && type_ != GGML_TYPE_F16) {
        if (err) *err = std::string("unsupported KV cache type ") + ggml_type_name(type_) + " (f32 or f16)";
        return false;
    }
    if (n_ctx_ <= 0) {
        if (err) *err = "KV cache length must be positive";
        return false;
    }
    type = type_;
    n_ctx = n_ctx_;
    head_dim = hp.head_dim();
    n_head_kv = hp.n_head_kv;
    const size_t row = ggml_row_size(type, hp.n_embd_kv());
    const size_t per_tensor = ggml_tensor_overhead() + GGML_PAD(row * n_ctx, 64) + 64;
    // one context, one allocation: all 2 * n_layer tensors live in its arena
    ggml_init_params p = {2 * (size_t) hp.n_layer * per_tensor + 1024, nullptr, false};
    ctx = ggml_init(p);
    if (!ctx) {
        if (err) *err = "cannot allocate " + std::to_string(p.mem_size) + " bytes for the KV cache";
        return false;
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        k.push_back(ggml_new_tensor_2d(ctx, type, hp.n_embd_kv(), n_ctx));
        v.push_back(ggml_new_tensor_2d(ctx, type, hp.n_embd_kv(), n_ctx));
        ggml_format_name(k.back(), "cache_k_l%d", il);
        ggml_format_name(v.back(), "cache_v_l%d", il);
    }
    clear();
    return true;
}

void KvCache::clear() {
    // zeros, not garbage: masked slots still enter the attention sums with weight 0,
    // and 0 * NaN would poison them
    for (ggml_tensor * t : k) std::memset(t->data, 0, ggml_nbytes(t));
    for (ggml_tensor * t : v) std::memset(t->data, 0, ggml_nbytes(t));
    n_past = 0;
}

size_t KvCache::bytes() const {
    size_t n = 0;
    for (const ggml_tensor * t : k) n += ggml_nbytes(t);
    for (const ggml_tensor * t : v) n += ggml_nbytes(t);
    return n;
}

ggml_tensor * KvCache::view(ggml_context * gctx, ggml_tensor * t, int n_kv) const {
    // ne = {head_dim, n_kv, n_head_kv}: dim 1 steps over positions (rows), dim 2 over the
    // heads inside a row
    return ggml_view_3d(gctx, t, head_dim, n_kv, n_head_kv, t->nb[1], ggml_row_size(type, head_dim), 0);
}

ggml_tensor * KvCache::write_k(ggml_context * gctx, int il, ggml_tensor * cur, ggml_tensor * idx) const {
    return ggml_set_rows(gctx, k[il], cur, idx);
}
ggml_tensor * KvCache::write_v(ggml_context * gctx, int il, ggml_tensor * cur, ggml_tensor * idx) const {
    return ggml_set_rows(gctx, v[il], cur, idx);
}

} // namespace kvg
