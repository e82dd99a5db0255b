// The KV cache: per layer one K and one V tensor of n_ctx rows (one row = one position,
// all KV heads of it), allocated once when the context is created, all in ONE buffer.
//
//   k[il], v[il]: [n_embd_kv = head_dim * n_head_kv, n_ctx], type f32 or f16
//
// New rows are written with ggml_set_rows at slot indices that are a graph input; slot =
// position (a linear, static cache). Attention reads a strided view of rows [0, n_kv).
#pragma once

#include "ggml.h"
#include "model.h"

#include <string>
#include <vector>

namespace kvg {

struct KvCache {
    KvCache() = default;
    ~KvCache();
    KvCache(const KvCache &) = delete;
    KvCache & operator=(const KvCache &) = delete;

    // false + message if the type is unsupported, n_ctx <= 0 or the allocation fails.
    bool init(const HParams & hp, int n_ctx, ggml_type type, std::string * err);

    // Slot that holds position pos (linear cache: the position itself).
    int64_t slot(int pos) const { return pos; }

    // K or V rows [0, n_kv) of layer il as [head_dim, n_kv, n_head_kv] (heads strided inside a row).
    ggml_tensor * view_k(ggml_context * ctx, int il, int n_kv) const { return view(ctx, k[il], n_kv); }
    ggml_tensor * view_v(ggml_context * ctx, int il, int n_kv) const { return view(ctx, v[il], n_kv); }

    // Writes cur [n_embd_kv, n_tokens] (f32) into rows idx [n_tokens] (I64) of K or V of layer il.
    ggml_tensor * write_k(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx) const;
    ggml_tensor * write_v(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx) const;

    size_t bytes() const; // K + V of all layers
    void clear();         // zero every row, forget all positions

    ggml_context * ctx = nullptr; // owns the single buffer
    ggml_type type = GGML_TYPE_F32;
    int n_ctx = 0;
    int head_dim = 0;
    int n_head_kv = 0;
    int n_past = 0; // positions [0, n_past) hold valid rows
    std::vector<ggml_tensor *> k, v;

private:
    ggml_tensor * view(ggml_context * ctx, ggml_tensor * t, int n_kv) const;
};

} // namespace kvg
