// Fuzz target: the llama2.c checkpoint reader (kvg_model_load on a file without the GGUF
// magic), then the runtime on whatever loads. The checkpoint has no magic: its 28-byte header
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len) decides the sizes of
// the float arrays that must follow exactly.
//
// Invariants besides "no crash, leak or UB": a rejected file gives a message; an accepted one
// has hyperparameters matching its header and runs (fuzz::exercise_model); mmap and read
// loading agree.
#include "fuzz-common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    // GGUF files take the other loader (fuzz-gguf)
    if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) return 0;
    static fuzz::MemFile file;
    const std::string & path = file.write(data, size);

    char err[512];
    kvg_model_params mp = kvg_model_default_params();
    kvg_model * model = kvg_model_load(path.c_str(), nullptr, mp, err, sizeof err);
    mp.use_mmap = false;
    char err2[512];
    kvg_model * copy = kvg_model_load(path.c_str(), nullptr, mp, err2, sizeof err2);
    FUZZ_CHECK((model == nullptr) == (copy == nullptr), "mmap and read loading disagree: '%s' vs '%s'", err, err2);
    if (!model) {
        FUZZ_CHECK(err[0] != '\0' && std::strcmp(err, err2) == 0, "messages: '%s' vs '%s'", err, err2);
        return 0;
    }
    kvg_model_free(copy);

    int32_t h[7];
    std::memcpy(h, data, sizeof h);
    FUZZ_CHECK(kvg_model_n_embd(model) == h[0] && kvg_model_n_layer(model) == h[2] && kvg_model_n_head(model) == h[3] &&
                   kvg_model_n_head_kv(model) == h[4] && kvg_model_n_vocab(model) == std::abs(h[5]) &&
                   kvg_model_n_ctx_train(model) == h[6],
               "hyperparameters differ from the header");
    // the arrays fill the file exactly: the weights are a subset of it
    FUZZ_CHECK(kvg_model_weight_bytes(model) <= size - 28, "weights %zu bytes > file", kvg_model_weight_bytes(model));
    fuzz::exercise_model(model);
    kvg_model_free(model);
    return 0;
}
