// The Model object, its summary line, and load_model, which picks the loader by the file's
// first bytes. Beside it: model-file.cpp (the file's bytes), model-check.cpp (hyperparameter
// and weight checks), model-prepare.cpp (load-time weight changes); the loaders are
// model-gguf.cpp and model-llama2c.cpp, the writer model-save.cpp.
#include "model.h"
#include "model-impl.h"
#include "status.h"

#include <cmath>
#include <cstring>
#include <unistd.h>

namespace kvg {

// ---- Model ------------------------------------------------------------------------------------------

Model::Model() = default;
Model::~Model() {
    if (ctx) ggml_free(ctx);
}

static std::vector<ggml_tensor *> bound(std::initializer_list<ggml_tensor *> ts) {
    std::vector<ggml_tensor *> out;
    for (ggml_tensor * t : ts) {
        if (t) out.push_back(t);
    }
    return out;
}

std::vector<ggml_tensor *> LayerWeights::matrices() const {
    return bound({wq, wk, wv, wqkv, wo, ffn_gate, ffn_up, ffn_down});
}

std::vector<ggml_tensor *> LayerWeights::all() const {
    return bound({attn_norm, wq, wk, wv, wqkv, bq, bk, bv, q_norm, k_norm, wo, attn_post_norm, ffn_norm, ffn_gate,
                  ffn_up, ffn_down, ffn_post_norm});
}

std::vector<ggml_tensor *> Model::tensors() const {
    std::vector<ggml_tensor *> out = {tok_embd};
    for (const LayerWeights & l : layers) {
        for (ggml_tensor * t : l.all()) out.push_back(t);
    }
    out.push_back(output_norm);
    if (output != tok_embd) out.push_back(output);
    for (ggml_tensor * t : {rope_freqs, rope_long, rope_short}) {
        if (t) out.push_back(t);
    }
    return out;
}

ggml_tensor * Model::rope_factor_table(int n_ctx_seq) const {
    if (rope_freqs) return rope_freqs;
    // llama.cpp compares its context rounded up to 256 (it allocates that much), so a context of
    // 64 over an original 128 takes the long table there: the same file computes the same here
    return GGML_PAD(n_ctx_seq, 256) > hp.rope_ctx_orig() ? rope_long : rope_short;
}

// llama.cpp's YaRN magnitude for llama files is 1 + 0.1 ln(factor) for a stretch (none for a
// factor <= 1); ggml's rope applies that gain itself when ext_factor is set, so the argument
// carries the quotient.
float HParams::rope_magnitude() const {
    if (!rope_yarn) return rope_attn_factor;
    const float stretch = 1.0f / rope_freq_scale, gain = 1.0f + 0.1f * std::log(stretch);
    return rope_attn_factor * (stretch <= 1.0f ? 1.0f : gain) / gain;
}

size_t Model::weight_bytes() const {
    size_t n = 0;
    for (const ggml_tensor * t : tensors()) n += ggml_nbytes(t);
    return n;
}

ggml_context * new_meta_ctx(size_t n_tensors) {
    ggml_init_params p = {(n_tensors + 4) * ggml_tensor_overhead(), nullptr, true};
    return ggml_init(p);
}

std::string describe(const Model & m, const char * types) {
    const HParams & h = m.hp;
    const std::string arch = m.arch == "llama" ? "" : " " + m.arch; // llama's line as it always was
    return strfmt("%s%s %s: %d layers, dim %d, ff %d, %d heads (%d kv), vocab %d, context %d, rope base %g%s",
                  m.format.c_str(), arch.c_str(), types, h.n_layer, h.n_embd, h.n_ff, h.n_head, h.n_head_kv, h.n_vocab,
                  h.n_ctx_train, h.rope_base, m.output == m.tok_embd ? ", tied output" : "");
}

// ---- load_model -------------------------------------------------------------------------------------

bool load_tokenizer(Model & m, const std::string & tokenizer_path, std::string * err) {
    std::string verr;
    if (!m.vocab.load_llama2c(tokenizer_path, &verr, m.hp.n_vocab)) {
        return fail(err, strfmt("tokenizer for a %d-token model: ", m.hp.n_vocab) + verr);
    }
    m.has_vocab = true;
    m.bos = m.vocab.bos();
    m.eos = m.vocab.eos();
    return true;
}

std::unique_ptr<Model> load_model(const std::string & path, const std::string & tokenizer_path,
                                  const LoadOptions & opt, std::string * err) {
    std::string e;
    if (!err) err = &e;
    err->clear();
    const int fd = open_regular(path, err);
    if (fd < 0) return nullptr;
    char magic[4] = {0, 0, 0, 0};
    const ssize_t n = ::read(fd, magic, 4);
    ::close(fd);
    if (n == 4 && std::memcmp(magic, "GGUF", 4) == 0) {
        auto m = load_gguf(path, opt, err);
        if (m && !tokenizer_path.empty() && !load_tokenizer(*m, tokenizer_path, err)) return nullptr;
        return m;
    }
    return load_llama2c(path, tokenizer_path, opt, err);
}

} // namespace kvg
