// kvg-generate's command line (see options.h).
#include "options.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

static void usage(FILE * out, const char * argv0) {
    fprintf(out,
            "usage: %s -m MODEL [options]\n"
            "  -m, --model PATH  model: GGUF (llama) or llama2.c checkpoint (.bin)\n"
            "  -z PATH           llama2.c tokenizer.bin (for .bin checkpoints)\n"
            "  -p, --prompt TEXT prompt (default: empty, generation starts after BOS)\n"
            "  -f, --file FILE   the prompt from a file (with --parallel: one prompt per line)\n"
            "  -e, --escape      process \\n \\t \\\\ \\\" \\' in the prompt\n"
            "  -n, --n-predict N tokens to generate (default 128; -1: until end of text or a full context)\n"
            "  -t, --threads N   threads (default: hardware threads, at most 4)\n"
            "  -c, --ctx-size N  context length (default: the model's, at most 4096)\n"
            "  -b, --batch-size N prompt batch size (default 512)\n"
            "  --temp T          temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K         (default 40, 0 = off)\n"
            "  --top-p P         (default 0.95, 1 = off)\n"
            "  --min-p P         keep tokens at least P x as likely as the top one (default 0 = off)\n"
            "  --repeat-penalty F  divide the logits of the last --repeat-last-n tokens by F (default 1 = off)\n"
            "  --repeat-last-n N tokens the penalties look at (default 64, 0 = none, -1 = all)\n"
            "  --presence-penalty F   subtract F from a token seen there (default 0)\n"
            "  --frequency-penalty F  subtract F x its count (default 0)\n"
            "  -r, --reverse-prompt S stop once the text ends with S (repeatable)\n"
            "  --ignore-eos      keep generating past the end-of-text (and end-of-turn) tokens\n"
            "  --no-display-prompt  print only the generated text\n"
            "  -cnv, --conversation  chat: each line of stdin is a user turn, each reply ends at the\n"
            "                    model's end of turn (or after -n tokens); ends at end of input. The cache\n"
            "                    is kept between turns: only a turn's new tokens are decoded. No prompt\n"
            "                    decorations unless stdout is a terminal (works in a pipe)\n"
            "  --chat-template T  -cnv: llama3, chatml, phi3, phi4, gemma, mistral-v1, mistral-v3,\n"
            "                    mistral-v3-tekken, mistral-v7, mistral-v7-tekken, llama2, llama2-sys,\n"
            "                    llama2-sys-bos, llama2-sys-strip, or a Jinja text of one (default: the\n"
            "                    file's tokenizer.chat_template, chatml without one)\n"
            "  -sys, --system-prompt S  -cnv: the system message\n"
            "  --verbose         -cnv: per turn, the tokens decoded and reused from the cache (stderr)\n"
            "  --context-shift   when a linear cache is full, drop half of the positions after the\n"
            "                    first --keep N (default 0, BOS always kept), shift the rest down, go on\n"
            "  --keep N          positions a context shift keeps at the start\n"
            "  --prompt-cache F  save the state after the prompt to F; a later run whose prompt\n"
            "                    starts with F's tokens loads it and decodes only the rest. With -cnv: the\n"
            "                    conversation (the cache after each turn, its messages in F.chat); a later\n"
            "                    run with F resumes it, decoding only the new turn's tokens\n"
            "  --seed S          sampling seed, 0..2^64-1 (default or -1: from the clock, printed)\n"
            "  --kv-type T       f32, f16 or q8_0 (default f32)\n"
            "  --kv-mode M       linear or ring (default linear)\n"
            "  --window W        ring: positions attended besides the sinks (default: -c minus sinks)\n"
            "  --sink S          ring: first positions always attended (default 0)\n"
            "  --kv-static       commit the whole cache's memory at start (default: as tokens are written)\n"
            "  --max-weights-mib N  refuse models whose weights need more than N MiB\n"
            "  --max-kv-mib N    refuse a KV cache of more than N MiB (all sequences)\n"
            "  --check-tensors   refuse models with NaN/inf weights or non-finite block scales\n"
            "  --parallel N      decode N prompts at once (lines of -f; reused in turn if fewer)\n"
            "  --attn A          flash or matmul (default flash)\n"
            "  --no-mmap         read the weights into memory (huge pages where the kernel allows)\n"
            "                    instead of mapping the file: generation ~25%% faster on large models\n"
            "  --no-repack       keep q4_0/q8_0 matrices as in the file (default: rearranged at load for\n"
            "                    the CPU's interleaved kernel where it has one)\n"
            "  --f16-as-bf16     round f16 matrices to bf16 at load where the CPU has AVX-512 BF16:\n"
            "                    prompts ~2x faster, 3 fewer mantissa bits per weight\n",
            argv0);
}

size_t mib_to_bytes(double mib) {
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

// llama.cpp's long names -> the short ones this parser knows.
static std::string short_name(const char * arg) {
    static const char * const names[][2] = {{"--model", "-m"},      {"--prompt", "-p"},        {"--file", "-f"},
                                            {"--n-predict", "-n"},  {"--threads", "-t"},       {"--ctx-size", "-c"},
                                            {"--batch-size", "-b"}, {"--reverse-prompt", "-r"}, {"--escape", "-e"}};
    for (const auto & n : names) {
        if (std::strcmp(arg, n[0]) == 0) return n[1];
    }
    if (std::strcmp(arg, "--conversation") == 0) return "-cnv";
    if (std::strcmp(arg, "--system-prompt") == 0) return "-sys";
    return arg;
}

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
static bool parse_number_option(const std::string & a, const char * shown, const char * v, options * o, bool * known) {
    double d = 0;
    *known = true;
    if (a == "-n") return parse_int(shown, v, -1, INT32_MAX, &o->n_gen);
    if (a == "--repeat-last-n") return parse_int(shown, v, -1, INT32_MAX, &o->sp.repeat_last_n);
    if (a == "-t") return parse_int(shown, v, 1, 1024, &o->n_threads);
    if (a == "-c") return parse_int(shown, v, 1, INT32_MAX, &o->n_ctx);
    if (a == "-b") return parse_int(shown, v, 1, INT32_MAX, &o->n_batch);
    if (a == "--parallel") return parse_int(shown, v, 1, 256, &o->n_parallel);
    if (a == "--window") return parse_int(shown, v, 0, INT32_MAX, &o->n_window);
    if (a == "--sink") return parse_int(shown, v, 0, INT32_MAX, &o->n_sink);
    if (a == "--keep") return parse_int(shown, v, 0, INT32_MAX, &o->n_keep);
    if (a == "--top-k") return parse_int(shown, v, 0, INT32_MAX, &o->sp.top_k);
    if (a == "--seed") return parse_seed(v, o);
    if (a == "--temp" || a == "--top-p") {
        const bool temp = a == "--temp";
        if (!parse_real(shown, v, temp ? -1e9 : 0.0, temp ? 1e9 : 1.0, false, &d)) return false;
        (temp ? o->sp.temp : o->sp.top_p) = (float) d;
        return true;
    }
    if (a == "--min-p" || a == "--repeat-penalty" || a == "--presence-penalty" || a == "--frequency-penalty") {
        const bool minp = a == "--min-p", rep = a == "--repeat-penalty";
        if (!parse_real(shown, v, minp ? 0.0 : rep ? 0.0 : -1e9, minp ? 1.0 : 1e9, rep, &d)) return false;
        (minp ? o->sp.min_p : rep ? o->sp.repeat_penalty : a == "--presence-penalty" ? o->sp.presence_penalty : o->sp.frequency_penalty) = (float) d;
        return true;
    }
    if (a == "--max-weights-mib") return parse_real(shown, v, 0.0, 1e12, true, &o->max_weights_mib);
    if (a == "--max-kv-mib") {
        if (strtod(v, nullptr) <= 0) { // the usual mistake gets its own words
            fprintf(stderr, "error: %s must be a positive number of MiB, not '%s'\n", shown, v);
            return false;
        }
        return parse_real(shown, v, 0.0, 1e12, true, &o->max_kv_mib);
    }
    *known = false;
    return true;
}

// 0: parsed; 1: error (message printed); 2: help printed.
static int parse_args_raw(int argc, char ** argv, options * o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = short_name(argv[i]);
        static const char * const with_value[] = {"-m", "-z", "-p", "-f", "-n", "-t", "-c", "-b", "-r", "--temp", "--top-k",
                                                  "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
                                                  "--presence-penalty", "--frequency-penalty", "--seed", "--kv-type",
                                                  "--kv-mode", "--window", "--sink", "--max-weights-mib", "--max-kv-mib",
                                                  "--parallel", "--attn", "--prompt-cache", "--keep"};
        bool takes_value = a == "-sys" || a == "--chat-template"; // -cnv's
        for (const char * w : with_value) takes_value = takes_value || a == w;
        if (takes_value && i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return 1;
        }
        const char * v = takes_value ? argv[i + 1] : nullptr;
        i += takes_value ? 1 : 0;
        bool known = false;
        if (takes_value && !parse_number_option(a, argv[i - 1], v, o, &known)) return 1;
        if (known) continue;
        if (a == "-m") o->model_path = v;
        else if (a == "-z") o->tok_path = v;
        else if (a == "-p") o->prompt = v;
        else if (a == "-f") o->prompt_file = v;
        else if (a == "-r") o->stop.push_back(v);
        else if (a == "--prompt-cache") o->prompt_cache = v;
        else if (a == "-sys") o->system_prompt = v;
        else if (a == "--chat-template") o->chat_template = v;
        else if (a == "-cnv") o->conversation = true;
        else if (a == "--verbose") o->verbose = true;
        else if (a == "-e") o->escape = true;
        else if (a == "--ignore-eos") o->ignore_eos = true;
        else if (a == "--no-display-prompt") o->display_prompt = false;
        else if (a == "--context-shift") o->context_shift = true;
        else if (a == "--no-mmap") o->use_mmap = false;
        else if (a == "--no-repack") o->repack = false;
        else if (a == "--f16-as-bf16") o->f16_as_bf16 = true;
        else if (a == "--kv-static") o->kv_static = true;
        else if (a == "--check-tensors") o->check_tensors = true;
        else if (a == "--kv-type") {
            if (!choose("--kv-type", v, {{"q8_0", KVG_KV_Q8_0}, {"f32", KVG_KV_F32}, {"f16", KVG_KV_F16}}, &o->kv_type)) return 1;
        } else if (a == "--kv-mode") {
            if (!choose("--kv-mode", v, {{"linear", KVG_KV_LINEAR}, {"ring", KVG_KV_RING}}, &o->kv_mode)) return 1;
        } else if (a == "--attn") {
            if (!choose("--attn", v, {{"flash", KVG_ATTN_FLASH}, {"matmul", KVG_ATTN_MATMUL}}, &o->attn)) return 1;
        } else if (a == "-h" || a == "--help") {
            usage(stdout, argv[0]);
            return 2;
        } else {
            fprintf(stderr, "error: unknown argument '%s' (--help lists the options)\n", argv[i - (takes_value ? 1 : 0)]);
            return 1;
        }
    }
    if (o->model_path.empty()) {
        fprintf(stderr, "error: no model (-m PATH)\n");
        usage(stderr, argv[0]);
        return 1;
    }
    if (o->conversation && (!o->prompt.empty() || !o->prompt_file.empty() || o->n_parallel > 0)) {
        fprintf(stderr, "error: -cnv reads the user's turns from stdin: -p, -f and --parallel do not apply (-sys sets "
                        "the system message)\n");
        return 1;
    }
    return 0;
}

// \n \t \r \\ \" \' as llama.cpp's -e; any other backslash stays as written.
static std::string unescape(const std::string & s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const char n = i + 1 < s.size() ? s[i + 1] : '\0';
        const char * const from = "ntr\\\"'", * const to = "\n\t\r\\\"'";
        const char * hit = s[i] == '\\' && n ? std::strchr(from, n) : nullptr;
        if (hit) {
            out += to[hit - from];
            ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

int parse_args(int argc, char ** argv, options * o) {
    o->n_threads = (int) std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    const int rc = parse_args_raw(argc, argv, o);
    if (rc != 0) return rc;
    if (!o->prompt_file.empty() && o->n_parallel == 0) { // one prompt: the whole file
        std::ifstream f(o->prompt_file, std::ios::binary);
        if (!f) {
            fprintf(stderr, "error: cannot read prompt file '%s'\n", o->prompt_file.c_str());
            return 1;
        }
        o->prompt.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    if (o->escape) o->prompt = unescape(o->prompt);
    return 0;
}

bool parallel_prompts(const options & o, std::vector<std::string> * prompts) {
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


kvg_model_params model_params(const options & o) {
    kvg_model_params mp = kvg_model_default_params();
    mp.use_mmap = o.use_mmap;
    mp.repack = o.repack;
    mp.f16_as_bf16 = o.f16_as_bf16;
    mp.max_weight_bytes = mib_to_bytes(o.max_weights_mib);
    mp.check_tensors = o.check_tensors;
    return mp;
}

kvg_context_params context_params(const options & o, const kvg_model * model) {
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
    return cp;
}
