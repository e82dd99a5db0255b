// kvg-bench's depth rows (-d N[,N...], llama-bench's meaning): the pp and tg tests run after N
// tokens are in the cache. The fill is not timed; every repetition starts again at position N
// (positions past N are overwritten). For a q8_0 cache N should be a multiple of 32: a rewind
// to a group boundary is exact.
#pragma once

#include "kvgraph.h"

#include <string>
#include <vector>

// Decodes random tokens at the positions [min(n_past, depth), depth) of sequence 0, in the
// context's n_batch chunks; false (with a message on stderr) on error.
bool fill_to_depth(kvg_context * ctx, int depth, int n_vocab);

// tok/s of one run; -1 on error. pp: toks in one call at positions depth..; tg: one token per
// step from position depth.
double run_pp_at(kvg_context * ctx, const std::vector<kvg_token> & toks, int depth);
double run_tg_at(kvg_context * ctx, const std::vector<kvg_token> & toks, int depth);

// Cache bytes attention reads per generated token, the mean over n_tg tokens from depth
// (token i attends depth + i + 1 positions): kv_elems K and V elements per position (all
// layers) in the cache's type (q8_0: 34 bytes per 32 values).
double kv_read_bytes(kvg_kv_type type, double kv_elems, int depth, int n_tg);

// Context length the depth rows need: the deepest depth plus the longer test.
int depth_ctx(const std::vector<int> & depths, int n_pp, int n_tg);

// "pp512", "tg32 @ d4096"
std::string test_name(bool pp, int n, int depth);
