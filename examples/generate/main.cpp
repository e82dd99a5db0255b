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
// context, one batch per step, streams each sequence's text line by line tagged [s] (so
// memory stays bounded even with -n -1 in ring mode) and reports the aggregate speed.
// Every numeric option is checked (integers as integers, in range, the option named in the
// message) before anything is loaded or allocated.
#include "kvgraph.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
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
            "  -n N              tokens to generate (default 128; -1: until end of text or a full context)\n"
            "  -t N              threads (default: hardware threads, at most 4)\n"
            "  -c N              context length (default: the model's, at most 4096)\n"
            "  -b N              prompt batch size (default 512)\n"
            "  --temp T          temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K         (default 40, 0 = off)\n"
            "  --top-p P         (default 0.95, 1 = off)\n"
            "  --seed S          sampling seed, 0..2^64-1 (default or -1: from the clock, printed)\n"
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

// Text of one token after prev (token ids without a tokenizer), whatever its length.
static std::string piece(kvg_model * model, kvg_token prev, kvg_token tok) {
    if (!kvg_model_has_vocab(model)) return std::to_string(tok) + " ";
    std::vector<char> buf(256);
    int32_t n = kvg_token_to_piece(model, prev, tok, buf.data(), (int32_t) buf.size());
    if (n < 0 && n != INT32_MIN) { // -(length): too long for the buffer
        buf.resize((size_t) -n + 1);
        n = kvg_token_to_piece(model, prev, tok, buf.data(), (int32_t) buf.size());
    }
    return n > 0 ? std::string(buf.data(), n) : std::string();
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
    for (int pos = n_prompt; n_gen < 0 || n_generated < n_gen; ++pos) {
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
    std::vector<std::string> text(n_seq); // each sequence's line in progress
    for (int i = 0; i < n_prompt; ++i) row[bs[i]] = i;
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
            if (tok == kvg_model_eos(model) || n_done[s] == n_gen) {
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

struct options {
    std::string model_path, tok_path, prompt, prompt_file;
    int n_gen = 128, n_threads = (int) std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    int n_ctx = 0, n_batch = 512, n_parallel = 0, n_window = 0, n_sink = 0;
    kvg_sampler_params sp = kvg_sampler_default_params();
    bool clock_seed = true;
    kvg_kv_type kv_type = KVG_KV_F32;
    kvg_kv_mode kv_mode = KVG_KV_LINEAR;
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    bool use_mmap = true, kv_static = false, check_tensors = false;
    double max_weights_mib = 0, max_kv_mib = 0;
};

// An integer in [lo, hi]: the whole text, no fraction, no overflow; false with a message.
static bool parse_int(const char * opt, const char * s, long long lo, long long hi, int * out) {
    char * end = nullptr;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
        fprintf(stderr, "error: %s: '%s' is not a number (an integer in %lld..%lld)\n", opt, s, lo, hi);
        return false;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s: %s is out of range (%lld..%lld)\n", opt, s, lo, hi);
        return false;
    }
    *out = (int) v;
    return true;
}

// A finite number in [lo, hi] (lo_open: lo itself excluded); false with a message.
static bool parse_real(const char * opt, const char * s, double lo, double hi, bool lo_open, double * out) {
    char * end = nullptr;
    const double v = strtod(s, &end);
    if (end == s || *end != '\0' || !std::isfinite(v)) {
        fprintf(stderr, "error: %s: '%s' is not a number (a finite one)\n", opt, s);
        return false;
    }
    if (v < lo || v > hi || (lo_open && v == lo)) {
        fprintf(stderr, "error: %s: %s is out of range (%s%g..%g)\n", opt, s, lo_open ? "above " : "", lo, hi);
        return false;
    }
    *out = v;
    return true;
}

// The seed: 0..2^64-1, or -1 for one from the clock.
static bool parse_seed(const char * s, options * o) {
    if (std::strcmp(s, "-1") == 0) {
        o->clock_seed = true;
        return true;
    }
    char * end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || std::strchr(s, '-')) {
        fprintf(stderr, "error: --seed: '%s' is not a seed (an integer in 0..18446744073709551615, or -1)\n", s);
        return false;
    }
    o->sp.seed = v;
    o->clock_seed = false;
    return true;
}

// Options with a numeric value: name -> how to parse it.
static bool parse_number_option(const std::string & a, const char * v, options * o, bool * known) {
    double d = 0;
    *known = true;
    if (a == "-n") return parse_int("-n", v, -1, INT32_MAX, &o->n_gen);
    if (a == "-t") return parse_int("-t", v, 1, 1024, &o->n_threads);
    if (a == "-c") return parse_int("-c", v, 1, INT32_MAX, &o->n_ctx);
    if (a == "-b") return parse_int("-b", v, 1, INT32_MAX, &o->n_batch);
    if (a == "--parallel") return parse_int("--parallel", v, 1, 256, &o->n_parallel);
    if (a == "--window") return parse_int("--window", v, 0, INT32_MAX, &o->n_window);
    if (a == "--sink") return parse_int("--sink", v, 0, INT32_MAX, &o->n_sink);
    if (a == "--top-k") return parse_int("--top-k", v, 0, INT32_MAX, &o->sp.top_k);
    if (a == "--seed") return parse_seed(v, o);
    if (a == "--temp" || a == "--top-p") {
        const bool temp = a == "--temp";
        if (!parse_real(a.c_str(), v, temp ? -1e9 : 0.0, temp ? 1e9 : 1.0, false, &d)) return false;
        (temp ? o->sp.temp : o->sp.top_p) = (float) d;
        return true;
    }
    if (a == "--max-weights-mib") return parse_real("--max-weights-mib", v, 0.0, 1e12, true, &o->max_weights_mib);
    if (a == "--max-kv-mib") {
        if (strtod(v, nullptr) <= 0) { // the usual mistake gets its own words
            fprintf(stderr, "error: --max-kv-mib must be a positive number of MiB, not '%s'\n", v);
            return false;
        }
        return parse_real("--max-kv-mib", v, 0.0, 1e12, true, &o->max_kv_mib);
    }
    *known = false;
    return true;
}

// 0: parsed; 1: error (message printed); 2: help printed.
static int parse_args(int argc, char ** argv, options * o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        static const char * const with_value[] = {"-m", "-z", "-p", "-f", "-n", "-t", "-c", "-b", "--temp", "--top-k",
                                                  "--top-p", "--seed", "--kv-type", "--kv-mode", "--window", "--sink",
                                                  "--max-weights-mib", "--max-kv-mib", "--parallel", "--attn"};
        bool takes_value = false;
        for (const char * w : with_value) takes_value = takes_value || a == w;
        if (takes_value && i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return 1;
        }
        const char * v = takes_value ? argv[i + 1] : nullptr;
        i += takes_value ? 1 : 0;
        bool known = false;
        if (takes_value && !parse_number_option(a, v, o, &known)) return 1;
        if (known) continue;
        if (a == "-m") o->model_path = v;
        else if (a == "-z") o->tok_path = v;
        else if (a == "-p") o->prompt = v;
        else if (a == "-f") o->prompt_file = v;
        else if (a == "--no-mmap") o->use_mmap = false;
        else if (a == "--kv-static") o->kv_static = true;
        else if (a == "--check-tensors") o->check_tensors = true;
        else if (a == "--kv-type") {
            if (!choose("--kv-type", v, {{"q8_0", KVG_KV_Q8_0}, {"f32", KVG_KV_F32}, {"f16", KVG_KV_F16}}, &o->kv_type)) return 1;
        } else if (a == "--kv-mode") {
            if (!choose("--kv-mode", v, {{"linear", KVG_KV_LINEAR}, {"ring", KVG_KV_RING}}, &o->kv_mode)) return 1;
        } else if (a == "--attn") {
            if (!choose("--attn", v, {{"flash", KVG_ATTN_FLASH}, {"matmul", KVG_ATTN_MATMUL}}, &o->attn)) return 1;
        } else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 2;
        } else {
            fprintf(stderr, "error: unknown argument '%s'\n", a.c_str());
            usage(argv[0]);
            return 1;
        }
    }
    if (o->model_path.empty()) {
        usage(argv[0]);
        return 1;
    }
    return 0;
}

// The prompts of --parallel: lines of -f (reused in turn if fewer), or -p for all.
static bool parallel_prompts(const options & o, std::vector<std::string> * prompts) {
    if (!o.prompt_file.empty()) {
        std::ifstream f(o.prompt_file);
        if (!f) {
            fprintf(stderr, "error: cannot read prompt file '%s'\n", o.prompt_file.c_str());
            return false;
        }
        for (std::string line; std::getline(f, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            prompts->push_back(line);
        }
        if (prompts->empty()) {
            fprintf(stderr, "error: prompt file '%s' is empty\n", o.prompt_file.c_str());
            return false;
        }
    } else {
        prompts->push_back(o.prompt);
    }
    const size_t n_lines = prompts->size();
    for (size_t s = n_lines; s < (size_t) o.n_parallel; ++s) prompts->push_back((*prompts)[s % n_lines]);
    prompts->resize(o.n_parallel);
    return true;
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
    } else if (!o.prompt_file.empty()) {
        fprintf(stderr, "error: -f needs --parallel N (one prompt per sequence)\n");
        return 1;
    }

    char err[1024];
    kvg_model_params mp = kvg_model_default_params();
    mp.use_mmap = o.use_mmap;
    mp.max_weight_bytes = mib_to_bytes(o.max_weights_mib);
    mp.check_tensors = o.check_tensors;
    kvg_model * model = kvg_model_load(o.model_path.c_str(), o.tok_path.empty() ? nullptr : o.tok_path.c_str(), mp, err, sizeof err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "model: %s\n", kvg_model_desc(model));

    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(kvg_model_n_ctx_train(model), 4096);
    cp.n_threads = o.n_threads;
    cp.n_batch = o.n_batch;
    cp.kv_type = o.kv_type;
    cp.attn = o.attn;
    cp.n_seq_max = std::max(1, o.n_parallel);
    cp.kv_mode = o.kv_mode;
    cp.n_window = o.n_window;
    cp.n_sink = o.n_sink;
    cp.kv_static = o.kv_static;
    cp.max_kv_bytes = mib_to_bytes(o.max_kv_mib);
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err);
        kvg_model_free(model);
        return 1;
    }
    const bool ring = o.kv_mode == KVG_KV_RING;
    const int rc = o.n_parallel > 0 ? generate_parallel(model, ctx, prompts, o.n_gen, o.sp, ring)
                                    : generate_one(model, ctx, o.prompt, o.n_gen, o.sp, ring);
    if (rc == 0) {
        report_cache(ctx, o.kv_type);
        fprintf(stderr, "weights:   %zu bytes\n", kvg_model_weight_bytes(model));
    }
    kvg_context_free(ctx);
    kvg_model_free(model);
    return rc;
}
