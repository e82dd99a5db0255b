// kvg-perplexity: perplexity of a model over a text file, as llama.cpp's perplexity tool
// defines it, so the quality cost of a KV-cache type or of quantized weights is a number.
//
//   kvg-perplexity -m models/kjv-tiny.gguf -f text.txt -c 128 [--kv-type f16]
//
// The text is tokenized once (with BOS where the file adds one) and cut into chunks of n_ctx
// tokens; each chunk is decoded from position 0 with its first token replaced by BOS (again only
// where the file adds one: Qwen's files do not), and the negative
// log-likelihood of every token of its second half is summed (token j+1 predicted from the
// logits at j, for j from n_ctx/2 to n_ctx-2). PPL = exp(sum / count). The running estimate
// is printed after each chunk as [chunk]ppl, then the final one.
#include "kvgraph.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

struct options {
    std::string model_path, tok_path, text_path;
    int n_ctx = 128, n_batch = 512, n_threads = 4, max_chunks = -1;
    kvg_kv_type kv_type = KVG_KV_F32;
};

void usage(FILE * out, const char * argv0) {
    fprintf(out,
            "usage: %s -m MODEL -f TEXT [options]\n"
            "  -m, --model PATH   GGUF (llama) or llama2.c checkpoint\n"
            "  -z PATH            llama2.c tokenizer.bin (for .bin checkpoints)\n"
            "  -f, --file PATH    the text\n"
            "  -c, --ctx-size N   tokens per chunk (default 128)\n"
            "  -b, --batch-size N (default 512)\n"
            "  -t, --threads N    (default 4)\n"
            "  --chunks N         at most N chunks (default: all)\n"
            "  --kv-type T        f32, f16 or q8_0 (default f32)\n",
            argv0);
}

bool parse_int(const char * opt, const char * s, long lo, long hi, int * out) {
    char * end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s: '%s' is not an integer in %ld..%ld\n", opt, s, lo, hi);
        return false;
    }
    *out = (int) v;
    return true;
}

// 0: parsed; 1: error; 2: help printed.
int parse_args(int argc, char ** argv, options * o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout, argv[0]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value (or is unknown: --help lists the options)\n", a.c_str());
            return 1;
        }
        const char * v = argv[++i];
        bool ok = true;
        if (a == "-m" || a == "--model") o->model_path = v;
        else if (a == "-z") o->tok_path = v;
        else if (a == "-f" || a == "--file") o->text_path = v;
        else if (a == "-c" || a == "--ctx-size") ok = parse_int(a.c_str(), v, 4, 1 << 20, &o->n_ctx);
        else if (a == "-b" || a == "--batch-size") ok = parse_int(a.c_str(), v, 1, 1 << 20, &o->n_batch);
        else if (a == "-t" || a == "--threads") ok = parse_int(a.c_str(), v, 1, 1024, &o->n_threads);
        else if (a == "--chunks") ok = parse_int(a.c_str(), v, 1, 1 << 30, &o->max_chunks);
        else if (a == "--kv-type") {
            const std::string t = v;
            o->kv_type = t == "f16" ? KVG_KV_F16 : t == "q8_0" ? KVG_KV_Q8_0 : KVG_KV_F32;
            ok = t == "f16" || t == "q8_0" || t == "f32";
            if (!ok) fprintf(stderr, "error: --kv-type must be f32, f16 or q8_0, not '%s'\n", v);
        } else {
            fprintf(stderr, "error: unknown argument '%s' (--help lists the options)\n", a.c_str());
            return 1;
        }
        if (!ok) return 1;
    }
    if (o->model_path.empty() || o->text_path.empty()) {
        fprintf(stderr, "error: need -m MODEL and -f TEXT\n");
        usage(stderr, argv[0]);
        return 1;
    }
    return 0;
}

// -log softmax(logits)[target], in double.
double nll(const float * logits, int n_vocab, int target) {
    double mx = -INFINITY;
    for (int i = 0; i < n_vocab; ++i) mx = std::fmax(mx, (double) logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
    return std::log(sum) + mx - (double) logits[target];
}

int run(kvg_model * model, kvg_context * ctx, const std::vector<kvg_token> & tokens, const options & o) {
    const int n_ctx = o.n_ctx, first = n_ctx / 2, n_vocab = kvg_model_n_vocab(model);
    int n_chunk = (int) (tokens.size() / (size_t) n_ctx);
    if (o.max_chunks > 0 && o.max_chunks < n_chunk) n_chunk = o.max_chunks;
    if (n_chunk == 0) {
        fprintf(stderr, "error: the text has %zu tokens; a chunk needs %d (lower -c)\n", tokens.size(), n_ctx);
        return 1;
    }
    fprintf(stderr, "%d chunks of %d tokens, scoring the last %d of each\n", n_chunk, n_ctx, n_ctx - 1 - first);
    double sum = 0;
    long count = 0;
    char err[1024];
    kvg_token first_token = -1; // the file adds BOS if tokenizing "" with add_bos gives one token
    const bool add_bos = kvg_tokenize(model, "", true, &first_token, 1) == 1;
    for (int c = 0; c < n_chunk; ++c) {
        std::vector<kvg_token> chunk(tokens.begin() + (long) c * n_ctx, tokens.begin() + (long) (c + 1) * n_ctx);
        if (add_bos) chunk[0] = kvg_model_bos(model);
        if (!kvg_decode(ctx, chunk.data(), n_ctx, 0, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
        for (int j = first; j < n_ctx - 1; ++j) {
            sum += nll(kvg_get_logits(ctx, j), n_vocab, tokens[(size_t) c * n_ctx + j + 1]);
            ++count;
        }
        printf("[%d]%.4f,", c + 1, std::exp(sum / (double) count));
        fflush(stdout);
    }
    printf("\nFinal estimate: PPL = %.4f over %ld tokens\n", std::exp(sum / (double) count), count);
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    const int parsed = parse_args(argc, argv, &o);
    if (parsed) return parsed == 2 ? 0 : 1;
    std::ifstream f(o.text_path, std::ios::binary);
    if (!f) {
        fprintf(stderr, "error: cannot read '%s'\n", o.text_path.c_str());
        return 1;
    }
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    char err[1024];
    kvg_model * model = kvg_model_load(o.model_path.c_str(), o.tok_path.empty() ? nullptr : o.tok_path.c_str(),
                                       kvg_model_default_params(), err, sizeof err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    if (!kvg_model_has_vocab(model)) {
        fprintf(stderr, "error: the model has no tokenizer (pass -z tokenizer.bin)\n");
        kvg_model_free(model);
        return 1;
    }
    const int32_t n = -kvg_tokenize(model, text.c_str(), true, nullptr, 0);
    std::vector<kvg_token> tokens((size_t) n);
    kvg_tokenize(model, text.c_str(), true, tokens.data(), n);
    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_batch = o.n_batch;
    cp.n_threads = o.n_threads;
    cp.kv_type = o.kv_type;
    cp.logits_all = true;
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    int rc = 1;
    if (!ctx) fprintf(stderr, "error: %s\n", err);
    else rc = run(model, ctx, tokens, o);
    kvg_context_free(ctx);
    kvg_model_free(model);
    return rc;
}
