// kvg-bench's batched table (llama-batched-bench's columns): B sequences, each with its own
// prompt of PP tokens (or one shared prompt, -pps), then TG tokens generated per sequence,
// one token of every sequence per kvg_decode_batch step.
#pragma once

#include "kvgraph.h"

#include <string>
#include <vector>

struct BatchedOptions {
    std::vector<int> npl;        // sequence counts B (-npl 1,2,4): empty = no batched table
    std::vector<int> npp = {1};  // prompt tokens per sequence (-npp)
    std::vector<int> ntg = {32}; // tokens generated per sequence (-ntg)
    bool pps = false;            // -pps: one prompt, copied to every sequence (kvg_seq_cp)
    bool repack = true;          // kvg_model_params.repack (kvg-bench's --repack)
};

#define BATCHED_USAGE                                                                                          \
    "  -npl 1,2,4 [-npp 1] [-ntg 32] [-pps]: llama-batched-bench's table alone (sequence counts, prompt and\n" \
    "      generated tokens per sequence, -pps one shared prompt; cache f16 unless --kv-type)\n"

// Reads a batched option at argv[i] (and its value); returns the arguments it used (0: not
// one of them, -1: a bad value, reported on stderr).
int parse_batched_arg(int argc, char ** argv, int i, BatchedOptions * opt);

// The table for one model per cache type and thread count: mean of reps runs after a warm-up
// (llama-batched-bench's cache is f16). false (message printed) on an error.
bool bench_batched(const std::string & path, const BatchedOptions & opt, const std::vector<int> & threads,
                   const std::vector<kvg_kv_type> & kv_types, kvg_attn_impl attn, int reps);
