// kvg-bench -npl: llama-batched-bench's table through the public API (see batched.h).
//
// Per row (PP, TG, B): the prompts are decoded in one kvg_decode_batch call (a shared prompt
// once, then kvg_seq_cp to the other sequences, untimed as in llama-batched-bench), then TG
// steps of one token per sequence. Columns as
// llama-batched-bench prints them: N_KV the cache cells the row fills, S_PP prompt tokens/s
// (a shared prompt counts once), S_TG generated tokens/s over all sequences, S all tokens/s.
#include "batched.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Comma-separated positive integers; false on anything else.
bool parse_list(const char * s, std::vector<int> * out) {
    out->clear();
    for (const char * p = s; *p;) {
        char * end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p || v <= 0 || v > 1000000 || (*end != ',' && *end != '\0')) return false;
        out->push_back((int) v);
        p = *end == ',' ? end + 1 : end;
    }
    return !out->empty();
}

using ctx_ptr = std::unique_ptr<kvg_context, void (*)(kvg_context *)>;

struct Times {
    double pp = 0, tg = 0; // seconds
};

// One run of a row on an empty context: the prompts, then the generation steps; false on an error.
bool run_once(kvg_context * ctx, int pp, int tg, int B, bool pps, int n_vocab, Times * t) {
    char err[512];
    std::vector<kvg_token> tok;
    std::vector<int32_t> pos, seq;
    const int n_prompts = pps ? 1 : B;
    for (int s = 0; s < n_prompts; ++s) {
        for (int i = 0; i < pp; ++i) {
            tok.push_back((kvg_token) ((1 + 7 * i + 131 * s) % n_vocab));
            pos.push_back(i);
            seq.push_back(s);
        }
    }
    const double t0 = now_s();
    bool ok = kvg_decode_batch(ctx, tok.data(), pos.data(), seq.data(), (int32_t) tok.size(), err, sizeof err);
    t->pp = now_s() - t0;
    for (int s = 1; ok && pps && s < B; ++s) ok = kvg_seq_cp(ctx, 0, s, 0, -1, err, sizeof err);
    const double t1 = now_s();
    tok.assign(B, 0);
    pos.assign(B, 0);
    seq.resize(B);
    for (int s = 0; s < B; ++s) seq[s] = s;
    for (int i = 0; ok && i < tg; ++i) {
        for (int s = 0; s < B; ++s) tok[s] = (kvg_token) ((3 + 11 * i + 17 * s) % n_vocab), pos[s] = pp + i;
        ok = kvg_decode_batch(ctx, tok.data(), pos.data(), seq.data(), B, err, sizeof err);
    }
    const double t2 = now_s();
    for (int s = 0; ok && s < B; ++s) ok = kvg_seq_rm(ctx, s, 0, -1, err, sizeof err);
    if (!ok) {
        fprintf(stderr, "error: %s\n", err);
        return false;
    }
    t->tg = t2 - t1;
    return true;
}

const char * kv_label(kvg_kv_type t) { return t == KVG_KV_F16 ? "f16" : t == KVG_KV_Q8_0 ? "q8_0" : "f32"; }

// The row (pp, tg, B): a warm-up run, then the mean of reps runs.
bool bench_row(kvg_model * model, const kvg_context_params & base, int pp, int tg, int B, bool pps, int reps) {
    kvg_context_params cp = base;
    cp.n_seq_max = B;
    // cells per sequence; the runtime caps a chunk at n_ctx tokens, and a step takes B at once
    cp.n_batch = std::max(std::min(pp * (pps ? 1 : B), 512), B);
    cp.n_ctx = std::min(std::max(pp + tg, cp.n_batch), kvg_model_n_ctx_train(model));
    char err[512];
    ctx_ptr ctx(kvg_context_new(model, cp, err, sizeof err), kvg_context_free);
    if (!ctx) {
        fprintf(stderr, "error: PP %d, TG %d, B %d: %s\n", pp, tg, B, err);
        return false;
    }
    const int n_vocab = kvg_model_n_vocab(model);
    Times t, sum;
    if (!run_once(ctx.get(), pp, tg, B, pps, n_vocab, &t)) return false; // graphs built, pages touched
    for (int r = 0; r < reps; ++r) {
        if (!run_once(ctx.get(), pp, tg, B, pps, n_vocab, &t)) return false;
        sum.pp += t.pp / reps;
        sum.tg += t.tg / reps;
    }
    const int pp_tokens = pps ? pp : B * pp, tg_tokens = B * tg;
    const int n_kv = pps ? pp + B * tg : B * (pp + tg);
    const double total = sum.pp + sum.tg;
    printf("| %6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg, B, n_kv, sum.pp,
           pp_tokens / sum.pp, sum.tg, tg_tokens / sum.tg, total, (pp_tokens + tg_tokens) / total);
    fflush(stdout);
    return true;
}

} // namespace

int parse_batched_arg(int argc, char ** argv, int i, BatchedOptions * opt) {
    const std::string a = argv[i];
    if (a == "-pps") {
        opt->pps = true;
        return 1;
    }
    std::vector<int> * list = a == "-npl" ? &opt->npl : a == "-npp" ? &opt->npp : a == "-ntg" ? &opt->ntg : nullptr;
    if (!list) return 0;
    if (i + 1 >= argc || !parse_list(argv[i + 1], list)) {
        fprintf(stderr, "error: %s takes positive integers separated by commas\n", a.c_str());
        return -1;
    }
    return 2;
}

bool bench_batched(const std::string & path, const BatchedOptions & opt, const std::vector<int> & threads,
                   const std::vector<kvg_kv_type> & kv_types, kvg_attn_impl attn, int reps) {
    char err[1024];
    kvg_model_params mp = kvg_model_default_params();
    mp.repack = opt.repack;
    std::unique_ptr<kvg_model, void (*)(kvg_model *)> model(kvg_model_load(path.c_str(), nullptr, mp, err, sizeof err),
                                                            kvg_model_free);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return false;
    }
    for (kvg_kv_type kv : kv_types) {
        for (int nt : threads) {
            printf("\nbatched: %s (%s), kv %s, attn %s, %d thread(s), pps %d, mean of %d run(s) after a warm-up\n\n",
                   path.c_str(), kvg_model_desc(model.get()), kv_label(kv), attn == KVG_ATTN_FLASH ? "flash" : "matmul",
                   nt, opt.pps ? 1 : 0, reps);
            printf("| %6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
                   "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
            printf("| %6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "-----:", "-----:", "---:",
                   "-----:", "-------:", "-------:", "-------:", "-------:", "-------:", "-------:");
            kvg_context_params cp = kvg_context_default_params();
            cp.n_threads = nt;
            cp.kv_type = kv;
            cp.attn = attn;
            for (int pp : opt.npp) {
                for (int tg : opt.ntg) {
                    for (int B : opt.npl) {
                        if (!bench_row(model.get(), cp, pp, tg, B, opt.pps, reps)) return false;
                    }
                }
            }
        }
    }
    return true;
}
