// llama.cpp's reference for tests/test-family-quant.cpp: a family's 256-wide f32 model and
// llama-quantize's Q4_K_M file of it. Records the type and FNV-1a of every tensor of the Q4_K_M
// file, tokenizes the prompt, decodes it one token at a time with each model (f16 KV cache, flash
// attention off, 1 thread, as scripts/llama-ref.cpp) and keeps the logits of a fixed set of ids.
// Not part of the build: it links llama.cpp (scripts/README-family.md, section "Q4_K_M"):
//   L=/work/peers/llama.cpp
//   g++ -O2 -std=c++17 scripts/llama-quant-ref.cpp -I$L/include -I$L/ggml/include -L$L/build/bin \
//       -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o /work/peers/llama-quant-ref
// Usage: llama-quant-ref F32.gguf Q4_K_M.gguf PROMPT.txt OUT.bin NOTE
//        llama-quant-ref --logits MODEL.gguf TOKENS.txt OUT.logits.f32
//   The second form writes every position's logits of the whitespace-separated token ids, decoded
//   the same way, as raw float32 [n_tokens][n_vocab]: the format of ../shared/gguf-quant's
//   *.logits.f32 (tests/test-gguf-quant.cpp; its IQ4_XS fixture was made so).
//
// OUT.bin, little-endian:
//   char[8] "KVGQNT01"; u32 n, char[n] note; u64 FNV-1a 64 of F32.gguf; u64 that of Q4_K_M.gguf
//   u32 n, char[n] the prompt; i32 n_vocab, n_tokens, n_ids
//   i32 tokens[n_tokens] (the prompt, add_special = true, parse_special = false), i32 ids[n_ids]
//   i32 n_tensors; per tensor of Q4_K_M.gguf, in file order: u32 n, char[n] name; i32 ggml type; u64 FNV-1a 64
//     of its bytes; f32 RMS of (its decoded values - the f32 file's)
//   per position, for the f32 run then the Q4_K_M run: f32 max_abs, i16 q[n_ids] (a logit is
//     q * max_abs / 32767)
#include "gguf.h"
#include "llama-ref-common.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int N_IDS = 384;

// Every position's logits of `tokens`, decoded one at a time from position 0; empty on failure.
std::vector<std::vector<float>> run(const char * path, const std::vector<llama_token> & tokens) {
    llama_model * model = load_cpu_model(path);
    if (!model) return {};
    llama_context * ctx = reference_context(model);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<std::vector<float>> rows;
    for (size_t p = 0; ctx && p < tokens.size(); ++p) {
        llama_token tok = tokens[p];
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return {};
        const float * l = llama_get_logits_ith(ctx, -1);
        rows.emplace_back(l, l + n_vocab);
    }
    llama_free(ctx);
    llama_model_free(model);
    return rows;
}

// The tokens of the prompt, with the f32 model's vocabulary.
std::vector<llama_token> tokenize(const char * path, const std::string & text) {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) return {};
    std::vector<llama_token> t(text.size() + 8);
    const int n = llama_tokenize(llama_model_get_vocab(model), text.c_str(), (int32_t) text.size(), t.data(),
                                 (int32_t) t.size(), /*add_special*/ true, /*parse_special*/ false);
    llama_model_free(model);
    t.resize(n > 0 ? n : 0);
    return t;
}

// RMS of (decoded - f32) over a tensor: the error of llama-quantize's encoding.
float encoding_error(ggml_type type, const char * q, const float * x, size_t n) {
    std::vector<float> y(n);
    if (type == GGML_TYPE_F32) std::copy((const float *) q, (const float *) q + n, y.begin());
    else ggml_get_type_traits(type)->to_float(q, y.data(), (int64_t) n);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (double) (y[i] - x[i]) * (y[i] - x[i]);
    return (float) std::sqrt(s / (double) n);
}

// Name, type, FNV-1a and encoding error of every tensor of the Q4_K_M file (f32: the f32 file).
bool put_tensors(Out & o, const char * f32_path, const std::string & f32, const char * q_path, const std::string & q) {
    gguf_init_params gp = {true, nullptr};
    gguf_context *gf = gguf_init_from_file(f32_path, gp), *g = gguf_init_from_file(q_path, gp);
    if (!gf || !g) return false;
    o.put((int32_t) gguf_get_n_tensors(g));
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const char * name = gguf_get_tensor_name(g, i);
        const int64_t j = gguf_find_tensor(gf, name);
        if (j < 0 || gguf_get_tensor_type(gf, j) != GGML_TYPE_F32) return false;
        const char * data = q.data() + gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i);
        const float * x = (const float *) (f32.data() + gguf_get_data_offset(gf) + gguf_get_tensor_offset(gf, j));
        o.str(name);
        o.put((int32_t) gguf_get_tensor_type(g, i));
        o.put(fnv1a(data, gguf_get_tensor_size(g, i)));
        o.put(encoding_error(gguf_get_tensor_type(g, i), data, x, gguf_get_tensor_size(gf, j) / sizeof(float)));
    }
    gguf_free(g);
    gguf_free(gf);
    return true;
}

void put_rows(Out & o, const std::vector<std::vector<float>> & rows, const std::vector<int32_t> & ids) {
    for (const std::vector<float> & l : rows) {
        float max_abs = 0;
        for (float x : l) max_abs = std::max(max_abs, std::fabs(x));
        o.put(max_abs);
        for (int32_t id : ids) o.put((int16_t) std::lround(max_abs > 0 ? l[id] / max_abs * 32767.0f : 0.0f));
    }
}

// RMS distance of two runs over every logit, for people (the test uses the stored ids).
double rms(const std::vector<std::vector<float>> & a, const std::vector<std::vector<float>> & b) {
    double s = 0, n = 0;
    for (size_t p = 0; p < a.size(); ++p) {
        for (size_t i = 0; i < a[p].size(); ++i, ++n) s += (double) (a[p][i] - b[p][i]) * (a[p][i] - b[p][i]);
    }
    return std::sqrt(s / n);
}

// --logits: raw logits of given token ids
int write_logits(const char * model, const char * tokens_path, const char * out) {
    std::vector<llama_token> tokens;
    std::ifstream tf(tokens_path);
    for (int x; tf >> x;) tokens.push_back(x);
    const std::vector<std::vector<float>> rows = run(model, tokens);
    if (tokens.empty() || rows.size() != tokens.size()) return fprintf(stderr, "no tokens or decode failed\n"), 1;
    std::ofstream f(out, std::ios::binary);
    for (const std::vector<float> & l : rows)
        f.write((const char *) l.data(), (std::streamsize) (l.size() * sizeof(float)));
    return f ? 0 : 1;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc == 5 && std::string(argv[1]) == "--logits") {
        return start_llama(argc, argv, 4, "--logits MODEL.gguf TOKENS.txt OUT.f32") ? write_logits(argv[2], argv[3], argv[4]) : 1;
    }
    if (!start_llama(argc, argv, 5, "F32.gguf Q4_K_M.gguf PROMPT.txt OUT.bin NOTE")) return 1;
    std::string text = slurp(argv[3]);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const std::vector<llama_token> tokens = tokenize(argv[1], text);
    if (tokens.empty() || tokens.size() > 256) return fprintf(stderr, "tokenize: %zu\n", tokens.size()), 1;
    const std::vector<std::vector<float>> f32 = run(argv[1], tokens), q = run(argv[2], tokens);
    if (f32.size() != tokens.size() || q.size() != tokens.size()) return fprintf(stderr, "decode failed\n"), 1;
    const int n_vocab = (int) f32[0].size();

    std::set<int32_t> idset; // drawn from a fixed seed
    for (uint64_t k = 0; (int) idset.size() < N_IDS; ++k) idset.insert((int32_t) (splitmix64(0x5134 + k) % n_vocab));
    const std::vector<int32_t> ids(idset.begin(), idset.end());

    const std::string f32_bytes = slurp(argv[1]), q_bytes = slurp(argv[2]);
    Out o;
    o.buf = "KVGQNT01";
    o.str(argv[5]);
    o.put(fnv1a(f32_bytes.data(), f32_bytes.size()));
    o.put(fnv1a(q_bytes.data(), q_bytes.size()));
    o.str(text);
    for (int32_t v : {n_vocab, (int) tokens.size(), N_IDS}) o.put(v);
    for (int32_t v : tokens) o.put(v);
    for (int32_t v : ids) o.put(v);
    if (!put_tensors(o, argv[1], f32_bytes, argv[2], q_bytes)) return fprintf(stderr, "cannot read %s\n", argv[2]), 1;
    put_rows(o, f32, ids);
    put_rows(o, q, ids);
    std::ofstream(argv[4], std::ios::binary).write(o.buf.data(), (std::streamsize) o.buf.size());
    printf("%s: %zu tokens, %d ids, %zu bytes; llama.cpp's Q4_K_M RMS distance to f32 over every logit %.5f\n", argv[4],
           tokens.size(), N_IDS, o.buf.size(), rms(f32, q));
    return 0;
}
