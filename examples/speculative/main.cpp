// kvg-speculative: greedy speculative decoding. A small draft model proposes N tokens, the
// target model checks them all in one batch, the longest agreeing prefix is kept plus the
// target's own next token, and both caches roll back the rest (kvg_seq_rm). The text is
// the target's greedy text (kvg-generate -m TARGET --temp 0 with the same options prints
// the same); acceptance and speeds go to stderr.
//
//   kvg-speculative -m models/kjv-tiny.gguf -md draft.gguf --draft 6 -p "And God said" -n 100
//
// Options: -md/--model-draft FILE, --draft N (1..64, default 8), and kvg-generate's (-p -f
// -e -n -c -b -t -z --kv-type --kv-mode --window --sink -r --ignore-eos --no-display-prompt).
#include "kvgraph.h"
#include "options.h"
#include "text-io.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Decoder {
    kvg_model * model = nullptr;
    kvg_context * ctx = nullptr;
    ~Decoder() {
        kvg_context_free(ctx);
        kvg_model_free(model);
    }
};

bool open_decoder(const std::string & path, const options & o, bool logits_all, Decoder * d) {
    char err[1024];
    d->model = kvg_model_load(path.c_str(), o.tok_path.empty() ? nullptr : o.tok_path.c_str(), model_params(o), err, sizeof err);
    kvg_context_params cp = d->model ? context_params(o, d->model) : kvg_context_default_params();
    cp.logits_all = logits_all;
    if (d->model) d->ctx = kvg_context_new(d->model, cp, err, sizeof err);
    if (!d->ctx) fprintf(stderr, "error: %s: %s\n", path.c_str(), err);
    return d->ctx != nullptr;
}

// The draft must speak the target's vocabulary: the same ids for the same pieces.
bool same_vocab(kvg_model * a, kvg_model * b) {
    const int n = kvg_model_n_vocab(a);
    if (n != kvg_model_n_vocab(b) || kvg_model_eos(a) != kvg_model_eos(b)) return false;
    for (int t = 0; t < n; ++t) {
        if (piece(a, -1, t) != piece(b, -1, t)) return false;
    }
    return true;
}

// Splits off -md/--model-draft and --draft; the rest is kvg-generate's command line.
bool own_args(int argc, char ** argv, std::string * draft, int * n_draft, std::vector<char *> * rest) {
    rest->push_back(argv[0]);
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool mine = a == "-md" || a == "--model-draft" || a == "--draft";
        if (mine && i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return false;
        }
        if (a == "--draft") {
            char * end = nullptr;
            const long v = std::strtol(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > 64) {
                fprintf(stderr, "error: --draft %s is invalid: it must be an integer in 1..64\n", argv[i]);
                return false;
            }
            *n_draft = (int) v;
        } else if (mine) {
            *draft = argv[++i];
        } else {
            rest->push_back(argv[i]);
        }
    }
    return true;
}

// Positions a round may draft beyond pos: the cache must be able to take them back. A ring
// rolls back only within its slack; a q8_0 cache one 32-position group back at most (a
// rollback into an older group could not be exact, and kvg_seq_rm refuses it); a linear cache
// holds n_ctx positions.
int draft_room(const options & o, kvg_context * ctx, int pos, int n_draft) {
    const int n_ctx = kvg_n_ctx(ctx);
    int room = n_draft;
    if (o.kv_mode == KVG_KV_RING) room = std::min(room, n_ctx - o.n_sink - (o.n_window > 0 ? o.n_window : n_ctx - o.n_sink));
    else room = std::min(room, n_ctx - pos - 1);
    if (o.kv_type == KVG_KV_Q8_0) room = std::min(room, 63 - pos % 32); // into the next group at most
    return std::max(room, 0);
}

// kvg-generate's greedy choice: the largest logit, EOS left out with --ignore-eos.
kvg_token greedy(const float * logits, int n_vocab, kvg_token eos, bool ignore_eos, std::vector<float> * scratch) {
    if (!ignore_eos || eos < 0) return kvg_argmax(logits, n_vocab);
    scratch->assign(logits, logits + n_vocab);
    (*scratch)[(size_t) eos] = -1e30f;
    return kvg_argmax(scratch->data(), n_vocab);
}

struct Run {
    Run(Decoder & t, Decoder & d, const options & opt, int n, const std::vector<kvg_token> & prompt)
        : target(t), draft(d), o(opt), n_draft(n), n_vocab(kvg_model_n_vocab(t.model)), eos(kvg_model_eos(t.model)),
          prev(prompt.back()), hist(prompt) {}
    Decoder & target, & draft;
    const options & o;
    int n_draft, n_vocab;
    kvg_token eos, prev;
    std::vector<kvg_token> hist; // the token at each position so far
    int draft_past = 0;          // the draft holds positions < draft_past
    int n_generated = 0, drafted = 0, accepted = 0, rounds = 0;
    std::string text;
    const char * stop = "";
    std::vector<float> scratch;
    char err[1024] = "";

    // Prints t (at position at) and says whether generation goes on: kvg-generate's stops.
    bool emit(kvg_token t, int at) {
        if (!o.ignore_eos && kvg_token_is_eog(target.model, t)) return stop = " (end of text)", false;
        const std::string p = piece(target.model, prev, t);
        fputs(p.c_str(), stdout);
        fflush(stdout);
        text += p;
        prev = t;
        hist.resize((size_t) at + 1);
        hist[(size_t) at] = t;
        ++n_generated;
        if (ends_with_stop(text, o.stop)) return stop = " (stop string)", false;
        if (n_generated == o.n_gen) return false;
        if (o.kv_mode != KVG_KV_RING && at >= kvg_n_ctx(target.ctx)) return stop = " (context full)", false;
        return true;
    }

    // One round at pos, with next (the target's choice for pos) printed and not yet decoded:
    // the draft decodes next and proposes up to k tokens, the target checks [next, d_1..d_k] in
    // one batch, the agreeing drafts are printed, both caches forget the rest. Returns the
    // target's logits for the new pos (the old pos + 1 + accepted), NULL on error or stop.
    const float * round(int * pos, kvg_token next, bool * stopped) {
        const int k = draft_room(o, target.ctx, *pos, n_draft);
        std::vector<kvg_token> batch = {next};
        if (k > 0 && draft_past < *pos) { // catch up with what the target accepted last round
            if (!kvg_decode(draft.ctx, hist.data() + draft_past, *pos - draft_past, draft_past, err, sizeof err)) return nullptr;
            draft_past = *pos;
        }
        for (int i = 0; i < k; ++i) { // the draft holds positions < *pos + i
            const float * ld = kvg_decode(draft.ctx, &batch.back(), 1, *pos + i, err, sizeof err);
            if (!ld) return nullptr;
            ++draft_past;
            batch.push_back(greedy(ld, n_vocab, eos, o.ignore_eos, &scratch));
        }
        std::vector<int32_t> bpos(batch.size()), bseq(batch.size(), 0);
        for (size_t i = 0; i < batch.size(); ++i) bpos[i] = *pos + (int32_t) i;
        if (!kvg_decode_batch(target.ctx, batch.data(), bpos.data(), bseq.data(), (int32_t) batch.size(), err, sizeof err)) {
            return nullptr;
        }
        int m = 0; // drafts the target agrees with
        while (m < k && greedy(kvg_get_logits(target.ctx, m), n_vocab, eos, o.ignore_eos, &scratch) == batch[m + 1]) ++m;
        drafted += k, accepted += m, ++rounds;
        const float * lt = kvg_get_logits(target.ctx, m);
        // both caches keep positions up to *pos + m: next and the accepted drafts
        if (!kvg_seq_rm(target.ctx, 0, *pos + m + 1, -1, err, sizeof err) ||
            !kvg_seq_rm(draft.ctx, 0, *pos + m + 1, -1, err, sizeof err)) {
            return nullptr;
        }
        draft_past = std::min(draft_past, *pos + m + 1);
        for (int i = 1; i <= m && !*stopped; ++i) *stopped = !emit(batch[i], *pos + i);
        *pos += m + 1;
        return lt;
    }
};

} // namespace

int main(int argc, char ** argv) {
    std::string draft_path;
    int n_draft = 8;
    std::vector<char *> rest;
    options o;
    if (!own_args(argc, argv, &draft_path, &n_draft, &rest)) return 1;
    const int parsed = parse_args((int) rest.size(), rest.data(), &o);
    if (parsed != 0) return parsed == 2 ? 0 : 1;
    if (draft_path.empty() || o.n_parallel > 0) {
        fprintf(stderr, "error: kvg-speculative needs -md DRAFT_MODEL (and does not take --parallel)\n");
        return 1;
    }
    Decoder target, draft;
    if (!open_decoder(o.model_path, o, true, &target) || !open_decoder(draft_path, o, false, &draft)) return 1;
    if (!same_vocab(target.model, draft.model)) {
        fprintf(stderr, "error: the draft model's vocabulary differs from the target's\n");
        return 1;
    }
    std::vector<kvg_token> toks;
    if (!prompt_tokens(target.model, o.prompt, &toks)) return 1;
    const int n_prompt = (int) toks.size();
    if (o.display_prompt && kvg_model_has_vocab(target.model)) {
        for (int i = 0; i < n_prompt; ++i) fputs(piece(target.model, i ? toks[i - 1] : -1, toks[i]).c_str(), stdout);
        fflush(stdout);
    }
    Run r(target, draft, o, n_draft, toks);
    const double t0 = now_s();
    const float * lt = kvg_decode(target.ctx, toks.data(), n_prompt, 0, r.err, sizeof r.err);
    if (lt && !kvg_decode(draft.ctx, toks.data(), n_prompt, 0, r.err, sizeof r.err)) lt = nullptr;
    r.draft_past = n_prompt;
    const double t1 = now_s();
    int pos = n_prompt;
    bool stopped = false, failed = lt == nullptr;
    while (!failed && !stopped) {
        const kvg_token next = greedy(lt, r.n_vocab, r.eos, o.ignore_eos, &r.scratch);
        if (!r.emit(next, pos)) break;
        lt = r.round(&pos, next, &stopped);
        failed = lt == nullptr && !stopped;
    }
    const double t2 = now_s();
    printf("\n");
    if (failed) {
        fprintf(stderr, "\nerror: %s\n", r.err);
        return 1;
    }
    fprintf(stderr, "\nprompt:    %5d tokens in %8.2f ms (both models)\n", n_prompt, (t1 - t0) * 1e3);
    fprintf(stderr, "generated: %5d tokens in %8.2f ms = %9.2f tok/s%s\n", r.n_generated, (t2 - t1) * 1e3,
            r.n_generated > 0 ? r.n_generated / (t2 - t1) : 0.0, r.stop);
    fprintf(stderr, "drafted:   %5d tokens in %d rounds, accepted %d (%.1f%%)\n", r.drafted, r.rounds, r.accepted,
            r.drafted > 0 ? 100.0 * r.accepted / r.drafted : 0.0);
    return 0;
}
