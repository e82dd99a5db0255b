// kvg-generate's command line: llama.cpp's flag names and meanings where kvg-generate has
// the feature (short and long forms), every number checked (an integer as an integer, in
// range, the option named in the message) before anything is loaded.
#pragma once

#include "kvgraph.h"

#include <cstddef>
#include <string>
#include <vector>

struct options {
    std::string model_path, tok_path, prompt, prompt_file;
    std::string prompt_cache; // --prompt-cache: the cache state after the prompt, reused by a later run
    int n_gen = 128, n_threads = 4;
    int n_ctx = 0, n_batch = 512, n_parallel = 0, n_window = 0, n_sink = 0;
    kvg_sampler_params sp = kvg_sampler_default_params();
    bool clock_seed = true;
    kvg_kv_type kv_type = KVG_KV_F32;
    kvg_kv_mode kv_mode = KVG_KV_LINEAR;
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    bool use_mmap = true, repack = true, f16_as_bf16 = false, kv_static = false, check_tensors = false;
    bool escape = false, ignore_eos = false, display_prompt = true;
    bool context_shift = false; // linear cache full: drop half of what follows the first n_keep, shift, go on
    int n_keep = 0;
    std::vector<std::string> stop; // -r: generation stops once the text ends with one of them
    bool conversation = false, verbose = false; // -cnv: user turns from stdin (chat.h)
    std::string chat_template, system_prompt;   // --chat-template (name or Jinja text), -sys
    double max_weights_mib = 0, max_kv_mib = 0;
};

// 0: parsed (the prompt file read, escapes applied); 1: error (message printed);
// 2: help printed (on stdout).
int parse_args(int argc, char ** argv, options * o);
// The prompts of --parallel: lines of -f (reused in turn if fewer), or -p for all.
bool parallel_prompts(const options & o, std::vector<std::string> * prompts);
// A positive limit in MiB as bytes: at least 1 (0 would mean no limit), saturating.
size_t mib_to_bytes(double mib);
// The model and context parameters the options ask for.
kvg_model_params model_params(const options & o);
kvg_context_params context_params(const options & o, const kvg_model * model);
