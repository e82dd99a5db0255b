// Loading llama2.c checkpoints: a 28-byte header of seven int32 hyperparameters, then the
// float32 arrays in a fixed order, mapped in place as ggml tensors.
#include "model.h"
#include "model-impl.h"
#include "status.h"

#include <cinttypes>
#include <cstdlib>
#include <cstring>

namespace kvg {

namespace {

constexpr size_t HEADER_BYTES = 28;
constexpr int N_ARRAYS = 14;
// The 28-byte header leaves every array 28 bytes past a cache line in the mapping, so each
// vector load of a weight row spans two lines; checkpoints up to this size are copied to
// memory where the arrays start on a line (stories260K, 500 tokens on Zen 4: 35.5 -> 34.7 ms):
// read there directly, into pages committed at once (a copy from the mapping took 0.6 ms of
// page faults for a 1 MB model).
constexpr size_t ALIGNED_COPY_MAX = (size_t) 64 << 20;
constexpr size_t LINE = 64;

// One of the checkpoint's arrays: [count (layers or 1)] x n_per_layer float32.
struct Llama2cArray {
    const char * name;
    uint64_t n_per_layer, count;
};

// The header's seven fields (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len), each checked against a sane range. A negative vocab_size means a separate
// classifier (wcls) follows the arrays.
bool read_header(const FileMapping & f, const std::string & path, int32_t h[7], std::string * err) {
    static const char * const fields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    static const int32_t limits[7] = {1 << 16, 1 << 20, 1 << 10, 1 << 12, 1 << 12, 1 << 22, 1 << 24};
    if (f.size < HEADER_BYTES) {
        return fail(err, strfmt("%s: neither a GGUF file (no 'GGUF' magic at offset 0) nor a llama2.c checkpoint (file is %zu "
                                "bytes, its header alone needs 28)", path.c_str(), f.size));
    }
    std::memcpy(h, f.data, 7 * sizeof(int32_t));
    for (int i = 0; i < 7; ++i) {
        const int64_t v = i == 5 ? std::abs((int64_t) h[i]) : h[i]; // negative vocab: separate classifier
        if (v <= 0 || v > limits[i]) {
            return fail(err, strfmt("%s: not a llama2.c checkpoint (and no GGUF magic): header field %s at offset %d is %d, "
                                    "expected 1..%d", path.c_str(), fields[i], 4 * i, h[i], limits[i]));
        }
    }
    return true;
}

void header_hparams(const int32_t h[7], HParams & hp) {
    hp.n_embd = h[0];
    hp.n_ff = h[1];
    hp.n_layer = h[2];
    hp.n_head = h[3];
    hp.n_head_kv = h[4];
    hp.n_vocab = std::abs(h[5]);
    hp.n_ctx_train = h[6];
    hp.rope_base = 10000.0f; // llama2.c's fixed constants
    hp.rms_eps = 1e-5f;
    if (hp.n_embd % hp.n_head == 0) hp.n_rot = hp.head_dim();
}

// The arrays' offsets in file order; the file must end exactly after the last one.
bool locate_arrays(const FileMapping & f, const std::string & path, const int32_t h[7], const Llama2cArray (&arrays)[N_ARRAYS],
                   uint64_t (&offs)[N_ARRAYS], std::string * err) {
    uint64_t off = HEADER_BYTES;
    for (int i = 0; i < N_ARRAYS; ++i) {
        offs[i] = off;
        const uint64_t end = off + 4 * arrays[i].n_per_layer * arrays[i].count;
        if (end > f.size) {
            return fail(err, strfmt("%s: truncated llama2.c checkpoint: array %s needs bytes %" PRIu64 "..%" PRIu64
                                    " but the file ends at offset %zu (header: dim %d, hidden %d, layers %d, vocab %d, seq %d)",
                                    path.c_str(), arrays[i].name, off, end, f.size, h[0], h[1], h[2], h[5], h[6]));
        }
        off = end;
    }
    if (off != f.size) {
        return fail(err, strfmt("%s: llama2.c checkpoint has %zu unexpected bytes after the last array (expected size %" PRIu64
                                ", file size %zu, extra data starts at offset %" PRIu64 "): header does not match the weights",
                                path.c_str(), (size_t) (f.size - off), off, f.size, off));
    }
    return true;
}

// The model's tensors over the arrays (llama2.c stores [rows][cols], i.e. ggml ne = {cols, rows}).
void bind_tensors(Model & m, const Llama2cArray (&arrays)[N_ARRAYS], const uint64_t (&offs)[N_ARRAYS], bool shared) {
    const HParams & hp = m.hp;
    const uint64_t L = hp.n_layer;
    const int64_t dim = hp.n_embd, kv = hp.n_embd_kv(), ff = hp.n_ff, V = hp.n_vocab;
    const uint8_t * data = m.mapping->data;
    auto take = [&](int a, uint64_t layer, int64_t cols, int64_t rows, const std::string & name) {
        ggml_tensor * t = rows > 1 ? ggml_new_tensor_2d(m.ctx, GGML_TYPE_F32, cols, rows)
                                   : ggml_new_tensor_1d(m.ctx, GGML_TYPE_F32, cols);
        ggml_set_name(t, name.c_str());
        t->data = const_cast<uint8_t *>(data) + offs[a] + 4 * arrays[a].n_per_layer * layer;
        return t;
    };
    m.tok_embd = take(0, 0, dim, V, "token_embd.weight");
    m.layers.resize(L);
    for (uint64_t l = 0; l < L; ++l) {
        LayerWeights & w = m.layers[l];
        const std::string p = "blk." + std::to_string(l) + ".";
        w.attn_norm = take(1, l, dim, 1, p + "attn_norm.weight");
        w.wq = take(2, l, dim, dim, p + "attn_q.weight");
        w.wk = take(3, l, dim, kv, p + "attn_k.weight");
        w.wv = take(4, l, dim, kv, p + "attn_v.weight");
        w.wo = take(5, l, dim, dim, p + "attn_output.weight");
        w.ffn_norm = take(6, l, dim, 1, p + "ffn_norm.weight");
        w.ffn_gate = take(7, l, dim, ff, p + "ffn_gate.weight");
        w.ffn_down = take(8, l, ff, dim, p + "ffn_down.weight");
        w.ffn_up = take(9, l, dim, ff, p + "ffn_up.weight");
    }
    m.output_norm = take(10, 0, dim, 1, "output_norm.weight");
    m.output = shared ? m.tok_embd : take(13, 0, dim, V, "output.weight");
}

} // namespace

std::unique_ptr<Model> load_llama2c(const std::string & path, const std::string & tokenizer_path,
                                    const LoadOptions & opt, std::string * err) {
    std::string e;
    if (!err) err = &e;
    auto m = std::make_unique<Model>();
    m->mapping = std::make_unique<FileMapping>();
    // Small checkpoints are read so that the arrays after the header start on a cache line.
    if (!m->mapping->open(path, opt.use_mmap, err, ALIGNED_COPY_MAX, LINE - HEADER_BYTES)) return nullptr;
    const FileMapping & f = *m->mapping;

    int32_t h[7];
    if (!read_header(f, path, h, err)) return nullptr;
    HParams & hp = m->hp;
    header_hparams(h, hp);
    const bool shared = h[5] > 0;
    if (!check_hparams(hp, err)) {
        *err = path + ": llama2.c header (offsets 0..27): " + *err;
        return nullptr;
    }
    m->format = "llama2.c";

    const uint64_t L = hp.n_layer, dim = hp.n_embd, kv = hp.n_embd_kv(), ff = hp.n_ff, V = hp.n_vocab;
    const uint64_t hs = hp.head_dim();
    const Llama2cArray arrays[N_ARRAYS] = {
        {"token_embedding", V * dim, 1}, {"rms_att", dim, L}, {"wq", dim * dim, L}, {"wk", kv * dim, L},
        {"wv", kv * dim, L}, {"wo", dim * dim, L}, {"rms_ffn", dim, L}, {"w1", ff * dim, L}, {"w2", dim * ff, L},
        {"w3", ff * dim, L}, {"rms_final", dim, 1}, {"freq_cis_real", hp.n_ctx_train * hs / 2, 1},
        {"freq_cis_imag", hp.n_ctx_train * hs / 2, 1}, {"wcls", shared ? 0 : V * dim, 1},
    };
    uint64_t offs[N_ARRAYS];
    if (!locate_arrays(f, path, h, arrays, offs, err)) return nullptr;

    m->ctx = new_meta_ctx(3 + 9 * L);
    if (!m->ctx) {
        fail(err, KVG_STATUS_OUT_OF_MEMORY, "out of memory");
        return nullptr;
    }
    bind_tensors(*m, arrays, offs, shared);
    if (opt.check_tensors && !check_tensor_data(*m, err)) {
        *err = path + ": " + *err;
        return nullptr;
    }
    if (!tokenizer_path.empty() && !load_tokenizer(*m, tokenizer_path, err)) return nullptr;
    m->desc = describe(*m, "f32");
    return m;
}

} // namespace kvg
