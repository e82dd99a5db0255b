// llama.cpp's reference for tests/test-family.cpp: tokenizes a prompt with llama.cpp, decodes it
// one token at a time from position 0 (f16 KV cache, flash attention off, 1 thread, as the
// ../shared/gguf-quant fixtures were made), then 32 greedy tokens, and writes a compact sample of
// every position's logits (the format is described at the top of tests/test-family.cpp).
// Not part of the build: it links llama.cpp, which lives outside the tree. Build it against a
// llama.cpp build directory (scripts/README-family.md):
//   L=/work/peers/llama.cpp
//   g++ -O2 -std=c++17 scripts/llama-ref.cpp -I$L/include -I$L/ggml/include -L$L/build/bin \
//       -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o /work/peers/llama-ref
// Usage: llama-ref MODEL.gguf PROMPT.txt OUT.bin NOTE
//   PROMPT.txt is read as bytes, trailing newlines dropped; NOTE (e.g. "llama3 llama.cpp <commit>")
//   is stored in the file for people.
#include "llama-ref-common.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int N_GREEDY = 32, N_TOP = 32, N_RANDOM = 384;

// Decodes prompt + N_GREEDY greedy tokens one at a time; returns every position's logits.
bool run(llama_context * ctx, int n_vocab, const std::vector<llama_token> & prompt, std::vector<llama_token> * greedy,
         std::vector<std::vector<float>> * rows) {
    llama_token tok = prompt[0];
    for (size_t p = 0; p < prompt.size() + N_GREEDY; ++p) {
        if (p < prompt.size()) tok = prompt[p];
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return false;
        const float * l = llama_get_logits_ith(ctx, -1);
        rows->emplace_back(l, l + n_vocab);
        if (p + 1 >= prompt.size() && (int) greedy->size() < N_GREEDY) {
            tok = (llama_token) (std::max_element(l, l + n_vocab) - l);
            greedy->push_back(tok);
        }
    }
    return true;
}

int16_t quant(float x, float max_abs) { return (int16_t) std::lround(max_abs > 0 ? x / max_abs * 32767.0f : 0.0f); }

// One position: max |logit|, argmax, top-2 gap, the top N_TOP (id, logit), the logits of ids.
void put_row(Out & o, const std::vector<float> & l, const std::vector<int32_t> & ids) {
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + N_TOP, order.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    float max_abs = 0;
    for (float x : l) max_abs = std::max(max_abs, std::fabs(x));
    o.put(max_abs);
    o.put(order[0]);
    o.put(l[order[0]] - l[order[1]]);
    for (int k = 0; k < N_TOP; ++k) o.put(order[k]);
    for (int k = 0; k < N_TOP; ++k) o.put(quant(l[order[k]], max_abs));
    for (int32_t id : ids) o.put(quant(l[id], max_abs));
}

} // namespace

int main(int argc, char ** argv) {
    if (!start_llama(argc, argv, 4, "MODEL.gguf PROMPT.txt OUT.bin NOTE")) return 1;
    llama_model * model = load_cpu_model(argv[1]);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    llama_context * ctx = reference_context(model);
    if (!ctx) return fprintf(stderr, "cannot create a context\n"), 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::string text = slurp(argv[2]);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    std::vector<llama_token> prompt(text.size() + 8);
    const int n = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), prompt.data(), (int32_t) prompt.size(),
                                 /*add_special*/ true, /*parse_special*/ false);
    if (n <= 0 || n + N_GREEDY > 256) return fprintf(stderr, "tokenize: %d\n", n), 1;
    prompt.resize(n);
    std::vector<llama_token> greedy;
    std::vector<std::vector<float>> rows;
    if (!run(ctx, n_vocab, prompt, &greedy, &rows)) return fprintf(stderr, "llama_decode failed\n"), 1;

    // the ids sampled at every position: those of the text, and N_RANDOM drawn from a fixed seed
    std::set<int32_t> idset(prompt.begin(), prompt.end());
    idset.insert(greedy.begin(), greedy.end());
    for (uint64_t k = 0; k < N_RANDOM; ++k) idset.insert((int32_t) (splitmix64(0x4645 + k) % (uint64_t) n_vocab));
    const std::vector<int32_t> ids(idset.begin(), idset.end());

    Out o;
    o.buf = "KVGFAM01";
    o.str(argv[4]);
    o.put(fnv1a(slurp(argv[1])));
    o.str(text);
    for (int32_t v : {n_vocab, n, N_GREEDY, (int) ids.size(), N_TOP}) o.put(v);
    for (int32_t v : prompt) o.put(v);
    for (int32_t v : greedy) o.put(v);
    for (int32_t v : ids) o.put(v);
    for (const auto & r : rows) put_row(o, r, ids);
    std::ofstream(argv[3], std::ios::binary).write(o.buf.data(), (std::streamsize) o.buf.size());
    printf("%s: %d prompt tokens, %d greedy, %zu ids, %zu bytes\n", argv[3], n, N_GREEDY, ids.size(), o.buf.size());
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
