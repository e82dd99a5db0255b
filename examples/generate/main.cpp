// kvg-generate: text generation with a Llama-style model (GGUF or llama2.c checkpoint).
//
//   kvg-generate -m models/kjv-tiny.gguf -p "And God said" -n 200
//   kvg-generate -m stories15M.bin -z tokenizer.bin -p "Once upon a time" --temp 0
//
// Streams the text as it is generated, then reports speed and memory on stderr.
// A model without a tokenizer (llama2.c checkpoint without -z) prints token ids.
#include "kvgraph.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
            "  --kv-type T       f32 or f16 (default f32)\n"
            "  --attn A          flash or matmul (default flash)\n"
            "  --no-mmap         read the weights instead of mapping the file\n",
            argv0);
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char ** argv) {
    std::string model_path, tok_path, prompt;
    int n_gen = 128, n_threads = (int) std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    int n_ctx = 0, n_batch = 512;
    kvg_sampler_params sp = kvg_sampler_default_params();
    sp.seed = (uint64_t) std::chrono::system_clock::now().time_since_epoch().count();
    kvg_kv_type kv_type = KVG_KV_F32;
    kvg_attn_impl attn = KVG_ATTN_FLASH;
    bool use_mmap = true;

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
        else if (a == "-n") n_gen = (int) num(next());
        else if (a == "-t") n_threads = (int) num(next());
        else if (a == "-c") n_ctx = (int) num(next());
        else if (a == "-b") n_batch = (int) num(next());
        else if (a == "--temp") sp.temp = (float) num(next());
        else if (a == "--top-k") sp.top_k = (int) num(next());
        else if (a == "--top-p") sp.top_p = (float) num(next());
        else if (a == "--seed") sp.seed = (uint64_t) strtoull(next(), nullptr, 10);
        else if (a == "--no-mmap") use_mmap = false;
        else if (a == "--kv-type") {
            const std::string t = next();
            if (t == "f32") kv_type = KVG_KV_F32;
            else if (t == "f16") kv_type = KVG_KV_F16;
            else {
                fprintf(stderr, "error: --kv-type must be f32 or f16, not '%s'\n", t.c_str());
                return 1;
            }
        } else if (a == "--attn") {
            const std::string t = next();
            if (t == "flash") attn = KVG_ATTN_FLASH;
            else if (t == "matmul") attn = KVG_ATTN_MATMUL;
            else {
                fprintf(stderr, "error: --attn must be flash or matmul, not '%s'\n", t.c_str());
                return 1;
            }
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

    char err[1024];
    kvg_model_params mp = kvg_model_default_params();
    mp.use_mmap = use_mmap;
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
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err);
        kvg_model_free(model);
        return 1;
    }

    // prompt: BOS + the tokenized text
    const bool has_vocab = kvg_model_has_vocab(model);
    std::vector<kvg_token> tokens;
    if (has_vocab) {
        int32_t n = kvg_tokenize(model, prompt.c_str(), true, nullptr, 0);
        tokens.resize(-n);
        kvg_tokenize(model, prompt.c_str(), true, tokens.data(), (int32_t) tokens.size());
    } else {
        if (!prompt.empty()) {
            fprintf(stderr, "error: the model has no tokenizer (pass -z tokenizer.bin); without one only an empty prompt works\n");
            return 1;
        }
        tokens.push_back(kvg_model_bos(model));
    }
    const int n_prompt = (int) tokens.size();
    if (n_prompt > kvg_n_ctx(ctx)) {
        fprintf(stderr, "error: the prompt has %d tokens but the context holds only %d (use -c)\n", n_prompt, kvg_n_ctx(ctx));
        return 1;
    }

    auto print_token = [&](kvg_token prev, kvg_token tok) {
        if (has_vocab) {
            char buf[256];
            const int32_t n = kvg_token_to_piece(model, prev, tok, buf, sizeof buf);
            if (n > 0) fwrite(buf, 1, n, stdout);
        } else {
            printf("%d ", tok);
        }
        fflush(stdout);
    };
    if (has_vocab) {
        for (int i = 0; i < n_prompt; ++i) print_token(i ? tokens[i - 1] : -1, tokens[i]);
    }

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
        print_token(prev, tok);
        prev = tok;
        ++n_generated;
        if (n_generated == n_gen) break;
        if (pos >= kvg_n_ctx(ctx)) {
            stop = " (context full)";
            break;
        }
        logits = kvg_decode(ctx, &tok, 1, pos, err, sizeof err);
        if (!logits) {
            fprintf(stderr, "\nerror: %s\n", err);
            return 1;
        }
    }
    const double t_gen = now_s() - t1;
    printf("\n");

    fprintf(stderr, "\nprompt:    %5d tokens in %8.2f ms = %9.2f tok/s\n", n_prompt, t_prompt * 1e3, n_prompt / t_prompt);
    fprintf(stderr, "generated: %5d tokens in %8.2f ms = %9.2f tok/s%s\n", n_generated, t_gen * 1e3,
            n_generated > 0 ? n_generated / t_gen : 0.0, stop);
    fprintf(stderr, "KV cache:  %zu bytes (%s, %d positions)\n", kvg_kv_cache_bytes(ctx),
            kv_type == KVG_KV_F16 ? "f16" : "f32", kvg_n_ctx(ctx));
    fprintf(stderr, "weights:   %zu bytes\n", kvg_model_weight_bytes(model));

    kvg_sampler_free(smpl);
    kvg_context_free(ctx);
    kvg_model_free(model);
    return 0;
}
