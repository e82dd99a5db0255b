// kvg-generate: text generation with a Llama-style model (GGUF or llama2.c checkpoint).
//
//   kvg-generate -m models/kjv-tiny.gguf -p "And God said" -n 200
//   kvg-generate -m stories15M.bin -z tokenizer.bin -p "Once upon a time" --temp 0
//   kvg-generate -m aidreams260K.bin -z tok512.bin -f prompts.txt --parallel 8 -n 64
//   kvg-generate -m stories260K.bin --kv-mode ring -c 64 --window 48 --sink 4 -n 1000
//   printf 'Hi\nWho are you?\n' | kvg-generate -m qwen2.5-0.5b-instruct.gguf -cnv
//
// Streams the text as it is generated, then reports speed and memory on stderr.
// A model without a tokenizer (llama2.c checkpoint without -z) prints token ids.
// --parallel N decodes N prompts (lines of -f FILE) as independent sequences of one
// context, one batch per step, streams each sequence's text line by line tagged [s] (so
// memory stays bounded even with -n -1 in ring mode) and reports the aggregate speed.
// Every numeric option is checked (integers as integers, in range, the option named in the
// message) before anything is loaded or allocated.
#include "chat.h"
#include "kvgraph.h"
#include "options.h"
#include "text-io.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

static const char * kv_type_name(kvg_kv_type t) { return t == KVG_KV_F16 ? "f16" : t == KVG_KV_Q8_0 ? "q8_0" : "f32"; }

static void report_cache(kvg_context * ctx, kvg_kv_type kv_type) {
    fprintf(stderr, "KV cache:  %zu bytes (%s, %d slots x %d sequence(s))\n", kvg_kv_cache_bytes(ctx),
            kv_type_name(kv_type), kvg_n_ctx(ctx), kvg_n_seq_max(ctx));
}

// The tokens that end generation (kvg_token_is_eog), found once.
static std::vector<kvg_token> end_tokens(const kvg_model * model) {
    std::vector<kvg_token> ends;
    for (kvg_token t = 0; t < kvg_model_n_vocab(model); ++t) {
        if (kvg_token_is_eog(model, t)) ends.push_back(t);
    }
    return ends;
}

// The next token: the penalties know the text so far; --ignore-eos takes the end tokens out
// of the choice.
static kvg_token next_token(kvg_sampler * smpl, const float * logits, int n_vocab, const std::vector<kvg_token> & ends,
                            bool ignore_eos, std::vector<float> * scratch) {
    if (ignore_eos && !ends.empty()) {
        scratch->assign(logits, logits + n_vocab);
        for (kvg_token t : ends) (*scratch)[(size_t) t] = -INFINITY;
        logits = scratch->data();
    }
    return kvg_sampler_sample(smpl, logits, n_vocab);
}

// --prompt-cache: loads the saved state when its tokens start this prompt and keeps their
// common prefix (at least the last prompt token is decoded again, for its logits); returns
// the tokens reused. A missing file is a first run; a file that cannot be used is reported.
static int reuse_prompt_cache(kvg_context * ctx, const std::string & path, const std::vector<kvg_token> & prompt) {
    std::vector<kvg_token> cached((size_t) kvg_n_ctx(ctx));
    char err[1024];
    const int32_t n = kvg_state_seq_load_file(ctx, 0, path.c_str(), cached.data(), (int32_t) cached.size(), err, sizeof err);
    if (n < 0) {
        if (kvg_last_status() != KVG_STATUS_IO) fprintf(stderr, "prompt cache: %s; not used\n", err);
        return 0;
    }
    int keep = 0;
    while (keep < n && keep + 1 < (int) prompt.size() && cached[keep] == prompt[keep]) ++keep;
    if (!kvg_seq_rm(ctx, 0, keep, -1, err, sizeof err)) { // e.g. inside a finished q8_0 group
        keep = 0;
        kvg_seq_rm(ctx, 0, 0, -1, err, sizeof err);
    }
    fprintf(stderr, "prompt cache: reused %d of the prompt's %zu tokens from %s\n", keep, prompt.size(), path.c_str());
    return keep;
}

// --context-shift: the linear cache is full at pos; keeps the first n_keep positions (BOS at
// least), drops half of the rest and moves the others down (kvg_seq_rm + kvg_seq_add, keys
// rotated to their new positions). Returns the new pos, -1 with a message if it cannot.
static int shift_context(kvg_context * ctx, int pos, int n_keep) {
    const int keep = std::max(1, std::min(n_keep, pos - 2));
    const int n_discard = (pos - keep) / 2;
    char err[1024];
    if (!kvg_seq_rm(ctx, 0, keep, keep + n_discard, err, sizeof err) ||
        !kvg_seq_add(ctx, 0, keep + n_discard, pos, -n_discard, err, sizeof err)) {
        fprintf(stderr, "\nerror: context shift: %s\n", err);
        return -1;
    }
    fprintf(stderr, "\n[context shift: kept %d positions, dropped %d]\n", keep, n_discard);
    return pos - n_discard;
}

// One prompt, streamed.
static int generate_one(kvg_model * model, kvg_context * ctx, const options & o, bool ring) {
    std::vector<kvg_token> tokens;
    if (!prompt_tokens(model, o.prompt, &tokens)) return 1;
    const int n_prompt = (int) tokens.size();
    if (!ring && n_prompt > kvg_n_ctx(ctx)) {
        fprintf(stderr, "error: the prompt has %d tokens but the context holds only %d (use -c)\n", n_prompt, kvg_n_ctx(ctx));
        return 1;
    }
    const double t0 = now_s();
    const int n_reused = o.prompt_cache.empty() ? 0 : reuse_prompt_cache(ctx, o.prompt_cache, tokens);
    if (kvg_model_has_vocab(model) && o.display_prompt) {
        for (int i = 0; i < n_prompt; ++i) fputs(piece(model, i ? tokens[i - 1] : -1, tokens[i]).c_str(), stdout);
        fflush(stdout);
    }

    char err[1024];
    const float * logits = kvg_decode(ctx, tokens.data() + n_reused, n_prompt - n_reused, n_reused, err, sizeof err);
    if (!logits) {
        fprintf(stderr, "\nerror: %s\n", err);
        return 1;
    }
    if (!o.prompt_cache.empty() &&
        !kvg_state_seq_save_file(ctx, 0, o.prompt_cache.c_str(), tokens.data(), n_prompt, err, sizeof err)) {
        fprintf(stderr, "prompt cache: %s\n", err);
    }
    const double t_prompt = now_s() - t0;

    kvg_sampler * smpl = kvg_sampler_new(o.sp);
    for (kvg_token t : tokens) kvg_sampler_accept(smpl, t); // the penalties see the prompt too
    const int n_vocab = kvg_model_n_vocab(model), n_gen = o.n_gen;
    int n_generated = 0;
    kvg_token prev = tokens.back();
    std::string text; // generated so far, for the stop strings
    std::vector<float> scratch;
    const std::vector<kvg_token> ends = end_tokens(model);
    const double t1 = now_s();
    const char * stop = "";
    for (int pos = n_prompt; n_gen < 0 || n_generated < n_gen; ++pos) {
        const kvg_token tok = next_token(smpl, logits, n_vocab, ends, o.ignore_eos, &scratch);
        if (kvg_token_is_eog(model, tok)) {
            stop = " (end of text)";
            break;
        }
        const std::string p = piece(model, prev, tok);
        fputs(p.c_str(), stdout);
        fflush(stdout);
        prev = tok;
        ++n_generated;
        text += p;
        if (ends_with_stop(text, o.stop)) {
            stop = " (stop string)";
            break;
        }
        if (n_generated == n_gen) break;
        if (!ring && pos >= kvg_n_ctx(ctx) && o.context_shift) pos = shift_context(ctx, pos, o.n_keep);
        if (pos < 0) {
            kvg_sampler_free(smpl);
            return 1;
        }
        if (!ring && pos >= kvg_n_ctx(ctx)) {
            stop = " (context full)";
            break;
        }
        logits = kvg_decode(ctx, &tok, 1, pos, err, sizeof err);
        if (!logits) {
            fprintf(stderr, "\nerror: %s\n", err);
            kvg_sampler_free(smpl);
            return 1;
        }
    }
    const double t_gen = now_s() - t1;
    printf("\n");
    kvg_sampler_free(smpl);

    fprintf(stderr, "\nprompt:    %5d tokens in %8.2f ms = %9.2f tok/s\n", n_prompt, t_prompt * 1e3, n_prompt / t_prompt);
    fprintf(stderr, "generated: %5d tokens in %8.2f ms = %9.2f tok/s%s\n", n_generated, t_gen * 1e3,
            n_generated > 0 ? n_generated / t_gen : 0.0, stop);
    return 0;
}

// Prints the finished lines of sequence s's text tagged [s+1] and keeps the rest; a line
// longer than 4 KiB, or the rest at the end, is printed as it is.
static void print_lines(int s, std::string * text, bool at_end) {
    for (size_t nl; (nl = text->find('\n')) != std::string::npos;) {
        printf("[%d] %.*s\n", s + 1, (int) nl, text->c_str());
        text->erase(0, nl + 1);
    }
    if (text->size() > 4096 || (at_end && !text->empty())) {
        printf("[%d] %s\n", s + 1, text->c_str());
        text->clear();
    }
    fflush(stdout);
}

// N prompts as N sequences of one context: one batch per step, all active sequences in it.
static int generate_parallel(kvg_model * model, kvg_context * ctx, const std::vector<std::string> & prompts, int n_gen,
                             const kvg_sampler_params & sp, bool ring) {
    const int n_seq = (int) prompts.size(), n_vocab = kvg_model_n_vocab(model);
    std::vector<std::vector<kvg_token>> toks(n_seq);
    std::vector<kvg_token> bt;
    std::vector<int32_t> bp, bs;
    std::vector<int> copy_of(n_seq, -1); // a repeated prompt is decoded once and shared (kvg_seq_cp)
    for (int s = 0; s < n_seq; ++s) {
        if (!prompt_tokens(model, prompts[s], &toks[s])) return 1;
        if (!ring && (int) toks[s].size() > kvg_n_ctx(ctx)) {
            fprintf(stderr, "error: prompt %d has %zu tokens but the context holds only %d (use -c)\n", s + 1,
                    toks[s].size(), kvg_n_ctx(ctx));
            return 1;
        }
        for (int t = 0; t < s && copy_of[s] < 0; ++t) {
            if (copy_of[t] < 0 && toks[t] == toks[s]) copy_of[s] = t;
        }
        for (size_t i = 0; copy_of[s] < 0 && i < toks[s].size(); ++i) {
            bt.push_back(toks[s][i]);
            bp.push_back((int32_t) i);
            bs.push_back(s);
        }
    }
    char err[1024];
    int n_prompt = (int) bt.size();
    const double t0 = now_s();
    if (!kvg_decode_batch(ctx, bt.data(), bp.data(), bs.data(), n_prompt, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    std::vector<int> row(n_seq), n_done(n_seq, 0);
    for (int i = 0; i < n_prompt; ++i) row[bs[i]] = i;
    int n_shared = 0;
    for (int s = 0; s < n_seq; ++s) {
        if (copy_of[s] < 0) continue;
        if (!kvg_seq_cp(ctx, copy_of[s], s, -1, -1, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
        row[s] = row[copy_of[s]];
        ++n_shared;
    }
    if (n_shared > 0) fprintf(stderr, "prompts: %d sequences share an identical earlier prompt's cache (kvg_seq_cp)\n", n_shared);
    const double t_prompt = now_s() - t0;

    std::vector<kvg_sampler *> smpl(n_seq);
    std::vector<bool> active(n_seq, true);
    std::vector<std::string> text(n_seq); // each sequence's line in progress
    for (int s = 0; s < n_seq; ++s) {
        kvg_sampler_params p = sp;
        p.seed = sp.seed + (uint64_t) s; // independent streams
        smpl[s] = kvg_sampler_new(p);
        for (size_t i = 0; i < toks[s].size(); ++i) text[s] += kvg_model_has_vocab(model) ? piece(model, i ? toks[s][i - 1] : -1, toks[s][i]) : "";
        print_lines(s, &text[s], false);
    }
    int n_generated = 0, n_steps = 0;
    const double t1 = now_s();
    for (;;) {
        bt.clear();
        bp.clear();
        bs.clear();
        for (int s = 0; s < n_seq; ++s) {
            if (!active[s]) continue;
            const kvg_token tok = kvg_sampler_sample(smpl[s], kvg_get_logits(ctx, row[s]), n_vocab);
            const int pos = (int) toks[s].size();
            if (kvg_token_is_eog(model, tok) || n_done[s] == n_gen) {
                active[s] = false;
                continue;
            }
            text[s] += piece(model, toks[s].back(), tok);
            print_lines(s, &text[s], false);
            toks[s].push_back(tok);
            ++n_done[s];
            ++n_generated;
            // its last token needs no logits; at a full (linear) context it has no slot
            // either, so it ends here, as the single-sequence loop does
            if (n_done[s] == n_gen || (!ring && pos >= kvg_n_ctx(ctx))) {
                active[s] = false;
                continue;
            }
            row[s] = (int) bt.size();
            bt.push_back(tok);
            bp.push_back(pos);
            bs.push_back(s);
        }
        if (bt.empty()) break;
        if (!kvg_decode_batch(ctx, bt.data(), bp.data(), bs.data(), (int32_t) bt.size(), err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
        ++n_steps;
    }
    const double t_gen = now_s() - t1;
    for (int s = 0; s < n_seq; ++s) {
        print_lines(s, &text[s], true);
        kvg_sampler_free(smpl[s]);
    }
    fprintf(stderr, "\nprompts:   %5d tokens of %d sequences in %8.2f ms = %9.2f tok/s (one batch)\n", n_prompt, n_seq,
            t_prompt * 1e3, n_prompt / t_prompt);
    fprintf(stderr, "generated: %5d tokens in %d batched steps, %8.2f ms = %9.2f tok/s aggregate\n", n_generated, n_steps,
            t_gen * 1e3, n_generated > 0 ? n_generated / t_gen : 0.0);
    return 0;
}

int main(int argc, char ** argv) {
    options o;
    const int parsed = parse_args(argc, argv, &o);
    if (parsed != 0) return parsed == 2 ? 0 : 1;
    if (o.clock_seed) {
        o.sp.seed = (uint64_t) std::chrono::system_clock::now().time_since_epoch().count();
        fprintf(stderr, "seed: %llu\n", (unsigned long long) o.sp.seed);
    }
    std::vector<std::string> prompts;
    if (o.n_parallel > 0) {
        if (!parallel_prompts(o, &prompts)) return 1;
    }

    char err[1024];
    kvg_model * model = kvg_model_load(o.model_path.c_str(), o.tok_path.empty() ? nullptr : o.tok_path.c_str(),
                                       model_params(o), err, sizeof err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "model: %s\n", kvg_model_desc(model));

    const kvg_context_params cp = context_params(o, model);
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err);
        kvg_model_free(model);
        return 1;
    }
    const bool ring = o.kv_mode == KVG_KV_RING;
    int rc = 0;
    if (o.conversation) {
        kvg_sampler * smpl = kvg_sampler_new(o.sp);
        rc = run_conversation(model, ctx, smpl, o);
        kvg_sampler_free(smpl);
    } else {
        rc = o.n_parallel > 0 ? generate_parallel(model, ctx, prompts, o.n_gen, o.sp, ring)
                              : generate_one(model, ctx, o, ring);
    }
    if (rc == 0) {
        report_cache(ctx, o.kv_type);
        fprintf(stderr, "weights:   %zu bytes\n", kvg_model_weight_bytes(model));
    }
    kvg_context_free(ctx);
    kvg_model_free(model);
    return rc;
}
