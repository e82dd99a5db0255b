// kvg-generate: text generation with a Llama-style model (GGUF or llama2.c checkpoint).
//
//   kvg-generate -m models/kjv-tiny.gguf -p "And God said" -n 200
//   kvg-generate -m stories15M.bin -z tokenizer.bin -p "Once upon a time" --temp 0
//   kvg-generate -m aidreams260K.bin -z tok512.bin -f prompts.txt --parallel 8 -n 64
//   kvg-generate -m stories260K.bin --kv-mode ring -c 64 --window 48 --sink 4 -n 1000
//
// Streams the text as it is generated, then reports speed and memory on stderr.
// A model without a tokenizer (llama2.c checkpoint without -z) prints token ids.
// --parallel N decodes N prompts (lines of -f FILE) as independent sequences of one
// context, one batch per step, prints each text at the end and the aggregate speed.
#include "kvgraph.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

static void usage(const char * argv0) {
    fprintf(stderr,
            "usage: %s -m MODEL [options]\n"
            "  -m PATH           model: GGUF (llama) or llama2.c checkpoint (.bin)\n"
            "  -z PATH           llama2.c tokenizer.bin (for .bin checkpoints)\n"
            "  -p TEXT           prompt (default: empty, generation starts after BOS)\n"
            "  -n N              tokens to generate (default 128)\n"
            "  -t N              threads (default: hardware threads, at most 4)\n"
            "  -c N              context length (default: the model's, at most 4096)\n"
            "  -b N              prompt batch size (default 512)\n"
            "  --temp T          temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K         (default 40, 0 = off)\n"
            "  --top-p P         (default 0.95, 1 = off)\n"
            "  --seed S          sampling seed (default: from the clock)\n"
            "  --kv-type T       f32, f16 or q8_0 (default f32)\n"
            "  --kv-mode M       linear or ring (default linear)\n"
            "  --window W        ring: positions attended besides the sinks (default: -c minus sinks)\n"
            "  --sink S          ring: first positions always attended (default 0)\n"
            "  --kv-static       commit the whole cache's memory at start (default: as tokens are written)\n"
            "  --max-weights-mib N  refuse models whose weights need more than N MiB\n"
            "  --max-kv-mib N    refuse a KV cache of more than N MiB (all sequences)\n"
            "  --check-tensors   refuse models with NaN/inf weights or non-finite q8_0/q4_0 scales\n"
            "  --parallel N      decode N prompts at once (lines of -f; reused in turn if fewer)\n"
            "  -f FILE           prompts, one per line (with --parallel)\n"
            "  --attn A          flash or matmul (default flash)\n"
            "  --no-mmap         read the weights instead of mapping the file\n",
            argv0);
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A positive limit in MiB as bytes: at least 1 (0 would mean no limit), saturating.
static size_t mib_to_bytes(double mib) {
    if (!(mib > 0)) return 0;
    const double b = mib * 1024 * 1024;
    return b >= 1.8e19 ? SIZE_MAX : std::max<size_t>(1, (size_t) b);
}

// The value named t among an option's choices; false (with a message listing them) if none.
template <typename E>
static bool choose(const char * opt, const std::string & t, std::initializer_list<std::pair<const char *, E>> choices, E * out) {
    std::string names; // "a, b or c"
    size_t i = 0;
    for (const auto & [name, value] : choices) {
        if (t == name) {
            *out = value;
            return true;
        }
        if (i > 0) names += i + 1 == choices.size() ? " or " : ", ";
        names += name;
        ++i;
    }
    fprintf(stderr, "error: %s must be %s, not '%s'\n", opt, names.c_str(), t.c_str());
    return false;
}

static const char * kv_type_name(kvg_kv_type t) { return t == KVG_KV_F16 ? "f16" : t == KVG_KV_Q8_0 ? "q8_0" : "f32"; }

// BOS + the tokenized text; without a tokenizer only an empty text (BOS alone) works.
static bool prompt_tokens(kvg_model * model, const std::string & text, std::vector<kvg_token> * out) {
    out->clear();
    if (!kvg_model_has_vocab(model)) {
        if (!text.empty()) {
            fprintf(stderr, "error: the model has no tokenizer (pass -z tokenizer.bin); without one only an empty prompt works\n");
            return false;
        }
        out->push_back(kvg_model_bos(model));
        return true;
    }
    const int32_t n = kvg_tokenize(model, text.c_str(), true, nullptr, 0);
    out->resize(-n);
    kvg_tokenize(model, text.c_str(), true, out->data(), (int32_t) out->size());
    return true;
}

// Text of one token after prev (token ids without a tokenizer).
static std::string piece(kvg_model * model, kvg_token prev, kvg_token tok) {
    if (!kvg_model_has_vocab(model)) return std::to_string(tok) + " ";
    char buf[256];
    const int32_t n = kvg_token_to_piece(model, prev, tok, buf, sizeof buf);
    return n > 0 ? std::string(buf, n) : std::string();
}

static void report_cache(kvg_context * ctx, kvg_kv_type kv_type) {
    fprintf(stderr, "KV cache:  %zu bytes (%s, %d slots x %d sequence(s))\n", kvg_kv_cache_bytes(ctx),
            kv_type_name(kv_type), kvg_n_ctx(ctx), kvg_n_seq_max(ctx));
}

// One prompt, streamed.
static int generate_one(kvg_model * model, kvg_context * ctx, const std::string & prompt, int n_gen,
                        const kvg_sampler_params & sp, bool ring) {
    std::vector<kvg_token> tokens;
    if (!prompt_tokens(model, prompt, &tokens)) return 1;
    const int n_prompt = (int) tokens.size();
    if (!ring && n_prompt > kvg_n_ctx(ctx)) {
        fprintf(stderr, "error: the prompt has %d tokens but the context holds only %d (use -c)\n", n_prompt, kvg_n_ctx(ctx));
        return 1;
    }
    if (kvg_model_has_vocab(model)) {
        for (int i = 0; i < n_prompt; ++i) fputs(piece(model, i ? tokens[i - 1] : -1, tokens[i]).c_str(), stdout);
        fflush(stdout);
    }

    char err[1024];
    const double t0 = now_s();
    const float * logits = kvg_decode(ctx, tokens.data(), n_prompt, 0, err, sizeof err);
    if (!logits) {
        fprintf(stderr, "\nerror: %s\n", err);
        return 1;
    }
    const double t_prompt = now_s() - t0;

    kvg_sampler * smpl = kvg_sampler_new(sp);
    const int n_vocab = kvg_model_n_vocab(model);
    int n_generated = 0;
    kvg_token prev = tokens.back();
    const double t1 = now_s();
    const char * stop = "";
    for (int pos = n_prompt; n_generated < n_gen; ++pos) {
        const kvg_token tok = kvg_sampler_sample(smpl, logits, n_vocab);
        if (tok == kvg_model_eos(model)) {
            stop = " (end of text)";
            break;
        }
        fputs(piece(model, prev, tok).c_str(), stdout);
        fflush(stdout);
        prev = tok;
        ++n_generated;
        if (n_generated == n_gen) break;
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

// N prompts as N sequences of one context: one batch per step, all active sequences in it.
static int generate_parallel(kvg_model * model, kvg_context * ctx, const std::vector<std::string> & prompts, int n_gen,
                             const kvg_sampler_params & sp, bool ring) {
    const int n_seq = (int) prompts.size(), n_vocab = kvg_model_n_vocab(model);
    std::vector<std::vector<kvg_token>> toks(n_seq);
    std::vector<kvg_token> bt;
    std::vector<int32_t> bp, bs;
    for (int s = 0; s < n_seq; ++s) {
        if (!prompt_tokens(model, prompts[s], &toks[s])) return 1;
        if (!ring && (int) toks[s].size() > kvg_n_ctx(ctx)) {
            fprintf(stderr, "error: prompt %d has %zu tokens but the context holds only %d (use -c)\n", s + 1,
                    toks[s].size(), kvg_n_ctx(ctx));
            return 1;
        }
        for (size_t i = 0; i < toks[s].size(); ++i) {
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
    const double t_prompt = now_s() - t0;

    std::vector<kvg_sampler *> smpl(n_seq);
    std::vector<int> row(n_seq), n_done(n_seq, 0);
    std::vector<bool> active(n_seq, true);
    std::vector<std::string> text(n_seq);
    for (int i = 0; i < n_prompt; ++i) row[bs[i]] = i;
    for (int s = 0; s < n_seq; ++s) {
        kvg_sampler_params p = sp;
        p.seed = sp.seed + (uint64_t) s; // independent streams
        smpl[s] = kvg_sampler_new(p);
        for (size_t i = 0; i < toks[s].size(); ++i) text[s] += kvg_model_has_vocab(model) ? piece(model, i ? toks[s][i - 1] : -1, toks[s][i]) : "";
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
            if (tok == kvg_model_eos(model) || n_done[s] == n_gen || (!ring && pos >= kvg_n_ctx(ctx))) {
                active[s] = false;
                continue;
            }
            text[s] += piece(model, toks[s].back(), tok);
            toks[s].push_back(tok);
            ++n_done[s];
            ++n_generated;
            if (n_done[s] == n_gen) { // its last token needs no logits
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
        printf("[%d] %s\n", s + 1, text[s].c_str());
        kvg_sampler_free(smpl[s]);
    }
    fprintf(stderr, "\nprompts:   %5d tokens of %d sequences in %8.2f ms = %9.2f tok/s (one batch)\n", n_prompt, n_seq,
            t_prompt * 1e3, n_prompt / t_prompt);
    fprintf(stderr, "generated: %5d tokens in %d batched steps, %8.2f ms = %9.2f tok/s aggregate\n", n_generated, n_steps,
            t_gen * 1e3, n_generated > 0 ? n_generated / t_gen : 0.0);
    return 0;
}

int main(int argc, char ** argv) {
    std::string model_path, tok_path, prompt, prompt_file;
    int n_gen = 128, n_threads = (int) std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    int n_ctx = 0, n_batch = 512, n_parallel = 0, n_window = 0, n_sink = 0;
    kvg_sampler_params sp = kvg_sampler_default_params();
    sp.seed = (uint64_t) std::chrono::system_clock::now().time_since_epoch().count();
    kvg_kv_type kv_type = KVG_KV_F32;
    kvg_kv_mode kv_mode = KVG_KV_LINEAR;
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    bool use_mmap = true, kv_static = false;
    bool check_tensors = false;
    double max_weights_mib = 0, max_kv_mib = 0;

    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s needs a value\n", a.c_str());
                exit(1);
            }
            return argv[++i];
        };
        auto num = [&](const char * s) {
            char * end = nullptr;
            const double v = strtod(s, &end);
            if (!end || *end != '\0') {
                fprintf(stderr, "error: %s: '%s' is not a number\n", a.c_str(), s);
                exit(1);
            }
            return v;
        };
        if (a == "-m") model_path = next();
        else if (a == "-z") tok_path = next();
        else if (a == "-p") prompt = next();
        else if (a == "-f") prompt_file = next();
        else if (a == "-n") n_gen = (int) num(next());
        else if (a == "-t") n_threads = (int) num(next());
        else if (a == "-c") {
            n_ctx = (int) num(next());
            if (n_ctx <= 0) {
                fprintf(stderr, "error: -c must be a positive context length (omit it for the model's own)\n");
                return 1;
            }
        }
        else if (a == "-b") n_batch = (int) num(next());
        else if (a == "--parallel") n_parallel = (int) num(next());
        else if (a == "--window") n_window = (int) num(next());
        else if (a == "--sink") n_sink = (int) num(next());
        else if (a == "--temp") sp.temp = (float) num(next());
        else if (a == "--top-k") sp.top_k = (int) num(next());
        else if (a == "--top-p") sp.top_p = (float) num(next());
        else if (a == "--seed") sp.seed = (uint64_t) strtoull(next(), nullptr, 10);
        else if (a == "--no-mmap") use_mmap = false;
        else if (a == "--kv-static") kv_static = true;
        else if (a == "--max-weights-mib") max_weights_mib = strtod(next(), nullptr);
        else if (a == "--max-kv-mib") {
            max_kv_mib = num(next());
            if (!(max_kv_mib > 0)) {
                fprintf(stderr, "error: --max-kv-mib must be a positive number of MiB\n");
                return 1;
            }
        }
        else if (a == "--check-tensors") check_tensors = true;
        else if (a == "--kv-type") {
            if (!choose("--kv-type", next(), {{"q8_0", KVG_KV_Q8_0}, {"f32", KVG_KV_F32}, {"f16", KVG_KV_F16}}, &kv_type)) return 1;
        } else if (a == "--kv-mode") {
            if (!choose("--kv-mode", next(), {{"linear", KVG_KV_LINEAR}, {"ring", KVG_KV_RING}}, &kv_mode)) return 1;
        } else if (a == "--attn") {
            if (!choose("--attn", next(), {{"flash", KVG_ATTN_FLASH}, {"matmul", KVG_ATTN_MATMUL}}, &attn)) return 1;
        } else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 0;
        } else {
            fprintf(stderr, "error: unknown argument '%s'\n", a.c_str());
            usage(argv[0]);
            return 1;
        }
    }
    if (model_path.empty()) {
        usage(argv[0]);
        return 1;
    }
    std::vector<std::string> prompts;
    if (n_parallel < 0) {
        fprintf(stderr, "error: --parallel must be positive\n");
        return 1;
    }
    if (n_parallel > 0) {
        if (!prompt_file.empty()) {
            std::ifstream f(prompt_file);
            if (!f) {
                fprintf(stderr, "error: cannot read prompt file '%s'\n", prompt_file.c_str());
                return 1;
            }
            for (std::string line; std::getline(f, line);) {
                if (!line.empty() && line.back() == '\r') line.pop_back();
                prompts.push_back(line);
            }
            if (prompts.empty()) {
                fprintf(stderr, "error: prompt file '%s' is empty\n", prompt_file.c_str());
                return 1;
            }
        } else {
            prompts.push_back(prompt);
        }
        const size_t n_lines = prompts.size();
        for (size_t s = n_lines; s < (size_t) n_parallel; ++s) prompts.push_back(prompts[s % n_lines]);
        prompts.resize(n_parallel);
    } else if (!prompt_file.empty()) {
        fprintf(stderr, "error: -f needs --parallel N (one prompt per sequence)\n");
        return 1;
    }

    char err[1024];
    kvg_model_params mp = kvg_model_default_params();
    mp.use_mmap = use_mmap;
    mp.max_weight_bytes = (size_t) (max_weights_mib * 1024 * 1024);
    mp.check_tensors = check_tensors;
    kvg_model * model = kvg_model_load(model_path.c_str(), tok_path.empty() ? nullptr : tok_path.c_str(), mp, err, sizeof err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "model: %s\n", kvg_model_desc(model));

    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = n_ctx > 0 ? n_ctx : std::min(kvg_model_n_ctx_train(model), 4096);
    cp.n_threads = n_threads;
    cp.n_batch = n_batch;
    cp.kv_type = kv_type;
    cp.attn = attn;
    cp.n_seq_max = std::max(1, n_parallel);
    cp.kv_mode = kv_mode;
    cp.n_window = n_window;
    cp.n_sink = n_sink;
    cp.kv_static = kv_static;
    cp.max_kv_bytes = mib_to_bytes(max_kv_mib);
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err);
        kvg_model_free(model);
        return 1;
    }
    const bool ring = kv_mode == KVG_KV_RING;
    const int rc = n_parallel > 0 ? generate_parallel(model, ctx, prompts, n_gen, sp, ring)
                                  : generate_one(model, ctx, prompt, n_gen, sp, ring);
    if (rc == 0) {
        report_cache(ctx, kv_type);
        fprintf(stderr, "weights:   %zu bytes\n", kvg_model_weight_bytes(model));
    }
    kvg_context_free(ctx);
    kvg_model_free(model);
    return rc;
}
