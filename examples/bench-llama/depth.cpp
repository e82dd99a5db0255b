// kvg-bench's depth rows: filling the cache, timing at a depth, the bytes a token reads there.
#include "depth.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

static double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool fill_to_depth(kvg_context * ctx, int depth, int n_vocab) {
    const int from = std::min(kvg_n_past(ctx), depth);
    if (from >= depth) return true;
    std::vector<kvg_token> toks(depth - from);
    uint32_t seed = 12345u + (uint32_t) from;
    for (kvg_token & t : toks) {
        seed = seed * 1664525u + 1013904223u;
        t = (kvg_token) ((seed >> 8) % (uint32_t) n_vocab);
    }
    char err[512];
    if (!kvg_decode(ctx, toks.data(), (int32_t) toks.size(), from, err, sizeof err)) {
        fprintf(stderr, "error: filling the cache to depth %d: %s\n", depth, err);
        return false;
    }
    return true;
}

double run_pp_at(kvg_context * ctx, const std::vector<kvg_token> & toks, int depth) {
    char err[512];
    const double t0 = seconds();
    if (!kvg_decode(ctx, toks.data(), (int32_t) toks.size(), depth, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    return toks.size() / (seconds() - t0);
}

double run_tg_at(kvg_context * ctx, const std::vector<kvg_token> & toks, int depth) {
    char err[512];
    const double t0 = seconds();
    for (size_t i = 0; i < toks.size(); ++i) {
        if (!kvg_decode(ctx, &toks[i], 1, depth + (int32_t) i, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
    }
    return toks.size() / (seconds() - t0);
}

double kv_read_bytes(kvg_kv_type type, double kv_elems, int depth, int n_tg) {
    const double per_elem = type == KVG_KV_F32 ? 4.0 : type == KVG_KV_F16 ? 2.0 : 34.0 / 32.0;
    const double mean_positions = depth + (n_tg + 1) / 2.0;
    return kv_elems * per_elem * mean_positions;
}

int depth_ctx(const std::vector<int> & depths, int n_pp, int n_tg) {
    int deepest = 0;
    for (int d : depths) deepest = std::max(deepest, d);
    return deepest + std::max(n_pp, n_tg);
}

std::string test_name(bool pp, int n, int depth) {
    std::string s = (pp ? "pp" : "tg") + std::to_string(n);
    if (depth > 0) s += " @ d" + std::to_string(depth);
    return s;
}
