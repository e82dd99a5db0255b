// Fuzz target: the llama2.c checkpoint reader (kvg_model_load on a file without the GGUF
// magic), then the runtime on whatever loads. The checkpoint has no magic: its 28-byte header
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len) decides the sizes of
// the float arrays that must follow exactly.
//
// Each input is tried as it is, and again with the bytes after the header stretched or cut to
// the size the header implies (small models only), so that mutated hyperparameters get past
// the size check and reach the runtime.
//
// Invariants besides "no crash, leak or UB": a rejected file gives a message; an accepted one
// has hyperparameters matching its header and runs (fuzz::exercise_model); mmap and read
// loading agree; a file of the right size with consistent hyperparameters loads.
#include "fuzz-common.h"

#include <cstdlib>

namespace {

// Bytes the arrays after the header take, computed from the format description (-1 if a
// field is out of the loader's accepted range or the model would be too big to run here).
int64_t expected_body_bytes(const int32_t h[7]) {
    const int64_t dim = h[0], ff = h[1], L = h[2], heads = h[3], kv_heads = h[4], V = std::abs((int64_t) h[5]), seq = h[6];
    if (dim <= 0 || ff <= 0 || L <= 0 || heads <= 0 || kv_heads <= 0 || V <= 0 || seq <= 0) return -1;
    if (dim > 256 || ff > 512 || L > 4 || V > 1024 || seq > 256 || dim % heads != 0 || kv_heads > heads) return -1;
    const int64_t hs = dim / heads, kv = hs * kv_heads;
    const int64_t floats = V * dim + L * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * ff * dim) + dim + seq * hs +
                           (h[5] < 0 ? V * dim : 0);
    return 4 * floats;
}

bool load_and_run(const uint8_t * data, size_t size) {
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
        return false;
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
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    // GGUF files take the other loader (fuzz-gguf)
    if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) return 0;
    // the bytes as they are: mostly size mismatches, header range checks
    load_and_run(data, size);

    // the header with the rest of the input stretched or cut to the size it implies, so that
    // mutated hyperparameters reach the loader's success path and the runtime
    if (size < 28) return 0;
    int32_t h[7];
    std::memcpy(h, data, sizeof h);
    const int64_t body = expected_body_bytes(h);
    if (body < 0 || (int64_t) size == 28 + body) return 0;
    std::vector<uint8_t> fitted(data, data + 28);
    fitted.resize(28 + (size_t) body, 0);
    for (size_t i = 28, j = 28; i < fitted.size() && size > 28; ++i, j = j + 1 < size ? j + 1 : 28) fitted[i] = data[j];
    // every field in range (checked above) and consistent: the file is valid and must load
    const bool valid = h[3] % h[4] == 0 && (h[0] / h[3]) % 2 == 0;
    const bool loaded = load_and_run(fitted.data(), fitted.size());
    FUZZ_CHECK(loaded || !valid, "a valid checkpoint (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq %d) "
               "was rejected", h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    return 0;
}
