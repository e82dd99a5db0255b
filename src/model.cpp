// Loading Llama-style weights into ggml tensors (GGUF and llama2.c checkpoints) and
// writing them back as GGUF. See model.h for the tensor names and shapes.
#include "model.h"
#include "status.h"

#include "ggml-cpu.h"
#include "gguf.h"

#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvg {

static std::string strfmt(const char * fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string strfmt(const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

static bool fail(std::string * err, const std::string & msg) {
    if (err) *err = msg;
    return false;
}
// A failure whose kind is not the C API's default for the call (kvg_status).
static bool fail(std::string * err, kvg_status status, const std::string & msg) {
    kvg::note_status(status);
    return fail(err, msg);
}

// Opens path for reading if it is a regular file; -1 with a message otherwise. O_NONBLOCK:
// opening a FIFO would otherwise wait for a writer forever.
static int open_regular(const std::string & path, std::string * err) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fail(err, KVG_STATUS_IO, strfmt("cannot open '%s': %s", path.c_str(), strerror(errno)));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(err, KVG_STATUS_IO, strfmt("'%s' is not a regular file", path.c_str()));
        return -1;
    }
    return fd;
}

// ---- the file's bytes ----------------------------------------------------------------------------

// Read-only view of a whole file: mmap'd, or read into memory when mapping is off.
struct FileMapping {
    const uint8_t * data = nullptr;
    size_t size = 0;
    bool mapped = false;
    std::vector<uint8_t> copy;

    ~FileMapping() {
        if (mapped && data) munmap(const_cast<uint8_t *>(data), size);
    }

    bool open(const std::string & path, bool use_mmap, std::string * err) {
        const int fd = open_regular(path, err);
        if (fd < 0) return false;
        struct stat st;
        if (fstat(fd, &st) != 0) {
            ::close(fd);
            return fail(err, KVG_STATUS_IO, strfmt("cannot stat '%s': %s", path.c_str(), strerror(errno)));
        }
        size = (size_t) st.st_size;
        if (size == 0) {
            ::close(fd);
            return fail(err, strfmt("'%s' is empty", path.c_str()));
        }
        if (use_mmap) {
            void * p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                data = (const uint8_t *) p;
                mapped = true;
                ::close(fd);
                return true;
            }
        }
        copy.resize(size);
        size_t got = 0;
        while (got < size) {
            const ssize_t n = ::read(fd, copy.data() + got, size - got);
            if (n <= 0) {
                ::close(fd);
                return fail(err, KVG_STATUS_IO, strfmt("'%s': read failed at offset %zu", path.c_str(), got));
            }
            got += (size_t) n;
        }
        ::close(fd);
        data = copy.data();
        return true;
    }
};

// ---- Model ------------------------------------------------------------------------------------------

Model::Model() = default;
Model::~Model() {
    if (ctx) ggml_free(ctx);
}

std::vector<ggml_tensor *> Model::tensors() const {
    std::vector<ggml_tensor *> out = {tok_embd};
    for (const LayerWeights & l : layers) {
        for (ggml_tensor * t : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down}) {
            out.push_back(t);
        }
    }
    out.push_back(output_norm);
    if (output != tok_embd) out.push_back(output);
    return out;
}

size_t Model::weight_bytes() const {
    size_t n = 0;
    for (const ggml_tensor * t : tensors()) n += ggml_nbytes(t);
    return n;
}

static ggml_context * new_meta_ctx(size_t n_tensors) {
    ggml_init_params p = {(n_tensors + 4) * ggml_tensor_overhead(), nullptr, true};
    return ggml_init(p);
}

static std::string describe(const Model & m, const char * types) {
    const HParams & h = m.hp;
    return strfmt("%s %s: %d layers, dim %d, ff %d, %d heads (%d kv), vocab %d, context %d, rope base %g%s",
                  m.format.c_str(), types, h.n_layer, h.n_embd, h.n_ff, h.n_head, h.n_head_kv, h.n_vocab,
                  h.n_ctx_train, h.rope_base, m.output == m.tok_embd ? ", tied output" : "");
}

static bool check_hparams(const HParams & h, std::string * err) {
    if (h.n_embd <= 0 || h.n_head <= 0 || h.n_head_kv <= 0 || h.n_layer <= 0 || h.n_ff <= 0 || h.n_vocab <= 0 ||
        h.n_ctx_train <= 0) {
        return fail(err, strfmt("invalid hyperparameters: n_embd %d, n_head %d, n_head_kv %d, n_layer %d, n_ff %d, "
                                "n_vocab %d, n_ctx %d (all must be positive)",
                                h.n_embd, h.n_head, h.n_head_kv, h.n_layer, h.n_ff, h.n_vocab, h.n_ctx_train));
    }
    if (h.n_embd % h.n_head != 0) return fail(err, strfmt("n_embd %d is not a multiple of n_head %d", h.n_embd, h.n_head));
    if (h.n_head % h.n_head_kv != 0) {
        return fail(err, strfmt("n_head %d is not a multiple of n_head_kv %d", h.n_head, h.n_head_kv));
    }
    if (h.head_dim() % 2 != 0) return fail(err, strfmt("head size %d is odd (RoPE rotates pairs)", h.head_dim()));
    if (h.n_rot <= 0 || h.n_rot > h.head_dim() || h.n_rot % 2 != 0) {
        return fail(err, strfmt("rope dimension count %d must be even and in 1..%d", h.n_rot, h.head_dim()));
    }
    if (!(h.rms_eps > 0.0f) || !(h.rope_base > 0.0f) || !std::isfinite(h.rope_base)) {
        return fail(err, strfmt("invalid rms epsilon %g or rope base %g", h.rms_eps, h.rope_base));
    }
    return true;
}

// ---- weight data checks ------------------------------------------------------------------------------

// "nan", "inf", "-inf" for a non-finite IEEE value given by its bits (f32, f16 and bf16
// differ only in the masks), nullptr if finite. Bits, not floats: no conversion per element.
static const char * non_finite(uint32_t bits, uint32_t exp_mask, uint32_t man_mask, uint32_t sign_mask) {
    if ((bits & exp_mask) != exp_mask) return nullptr;
    if (bits & man_mask) return "nan";
    return (bits & sign_mask) ? "-inf" : "inf";
}

// A decoded row of a block type; the error names the first block with a non-finite value.
static bool finite_row(const ggml_tensor * t, const uint8_t * row, int64_t r, std::string * err) {
    const int64_t ne0 = t->ne[0], blk = ggml_blck_size(t->type);
    std::vector<float> vals((size_t) ne0);
    ggml_get_type_traits(t->type)->to_float(row, vals.data(), ne0);
    for (int64_t i = 0; i < ne0; ++i) {
        if (std::isfinite(vals[(size_t) i])) continue;
        const int64_t b = i / blk;
        return fail(err, strfmt("tensor '%s' (%s): block %" PRId64 " decodes to a non-finite value (a scale is inf or "
                                "nan), elements %" PRId64 "..%" PRId64 " of row %" PRId64, t->name, ggml_type_name(t->type),
                                r * (ne0 / blk) + b, r * ne0 + b * blk, r * ne0 + b * blk + blk - 1, r));
    }
    return true;
}

bool check_tensor_data(const Model & m, std::string * err) {
    for (const ggml_tensor * t : m.tensors()) {
        const int64_t ne0 = t->ne[0], n_rows = ggml_nrows(t);
        // row and column for matrices: a flat index alone is hard to place
        auto place = [&](int64_t row, const std::string & cols) {
            return n_rows > 1 ? strfmt(" (row %" PRId64 ", %s)", row, cols.c_str()) : std::string();
        };
        const char * bad = nullptr;
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t * row = (const uint8_t *) t->data + r * t->nb[1];
            if (t->type == GGML_TYPE_Q8_0 || t->type == GGML_TYPE_Q4_0) {
                // a block's values are integers; only its f16 scale d (the first 2 bytes) can be non-finite
                const int64_t blk = ggml_blck_size(t->type), n_blocks = ne0 / blk;
                const size_t bsize = ggml_type_size(t->type);
                for (int64_t b = 0; b < n_blocks; ++b) {
                    uint16_t d;
                    std::memcpy(&d, row + b * bsize, sizeof d);
                    if ((bad = non_finite(d, 0x7c00, 0x03ff, 0x8000))) {
                        const int64_t first = r * ne0 + b * blk;
                        return fail(err, strfmt("tensor '%s' (%s): block %" PRId64 " has a non-finite scale (%s), "
                                                "elements %" PRId64 "..%" PRId64 "%s", t->name, ggml_type_name(t->type),
                                                r * n_blocks + b, bad, first, first + blk - 1,
                                                place(r, strfmt("columns %" PRId64 "..%" PRId64, b * blk, b * blk + blk - 1)).c_str()));
                    }
                }
                continue;
            }
            if (ggml_is_quantized(t->type)) {
                // other block types: a scale anywhere in the block can be non-finite; decode and look
                if (!finite_row(t, row, r, err)) return false;
                continue;
            }
            for (int64_t i = 0; i < ne0; ++i) {
                if (t->type == GGML_TYPE_F32) {
                    uint32_t x;
                    std::memcpy(&x, row + 4 * i, 4);
                    bad = non_finite(x, 0x7f800000u, 0x007fffffu, 0x80000000u);
                } else {
                    uint16_t x;
                    std::memcpy(&x, row + 2 * i, 2);
                    bad = t->type == GGML_TYPE_F16 ? non_finite(x, 0x7c00, 0x03ff, 0x8000)
                                                   : non_finite(x, 0x7f80, 0x007f, 0x8000); // bf16
                }
                if (bad) {
                    return fail(err, strfmt("tensor '%s' holds a non-finite value (%s) at element %" PRId64 "%s", t->name,
                                            bad, r * ne0 + i, place(r, "column " + std::to_string(i)).c_str()));
                }
            }
        }
    }
    return true;
}

// ---- llama2.c -------------------------------------------------------------------------------------

std::unique_ptr<Model> load_llama2c(const std::string & path, const std::string & tokenizer_path,
                                    const LoadOptions & opt, std::string * err) {
    std::string e;
    if (!err) err = &e;
    auto m = std::make_unique<Model>();
    m->mapping = std::make_unique<FileMapping>();
    if (!m->mapping->open(path, opt.use_mmap, err)) return nullptr;
    const FileMapping & f = *m->mapping;

    static const char * const fields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    static const int32_t limits[7] = {1 << 16, 1 << 20, 1 << 10, 1 << 12, 1 << 12, 1 << 22, 1 << 24};
    if (f.size < 28) {
        fail(err, strfmt("%s: neither a GGUF file (no 'GGUF' magic at offset 0) nor a llama2.c checkpoint (file is %zu "
                         "bytes, its header alone needs 28)", path.c_str(), f.size));
        return nullptr;
    }
    int32_t h[7];
    std::memcpy(h, f.data, sizeof(h));
    for (int i = 0; i < 7; ++i) {
        const int64_t v = i == 5 ? std::abs((int64_t) h[i]) : h[i]; // negative vocab: separate classifier
        if (v <= 0 || v > limits[i]) {
            fail(err, strfmt("%s: not a llama2.c checkpoint (and no GGUF magic): header field %s at offset %d is %d, "
                             "expected 1..%d", path.c_str(), fields[i], 4 * i, h[i], limits[i]));
            return nullptr;
        }
    }
    HParams & hp = m->hp;
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
    const bool shared = h[5] > 0;
    if (!check_hparams(hp, err)) {
        *err = path + ": llama2.c header (offsets 0..27): " + *err;
        return nullptr;
    }
    m->format = "llama2.c";

    // The arrays in file order, each [L or 1] x rows x cols float32.
    const uint64_t L = hp.n_layer, dim = hp.n_embd, kv = hp.n_embd_kv(), ff = hp.n_ff, V = hp.n_vocab;
    const uint64_t hs = hp.head_dim();
    struct array { const char * name; uint64_t n_per_layer, count; };
    const array arrays[] = {
        {"token_embedding", V * dim, 1}, {"rms_att", dim, L}, {"wq", dim * dim, L}, {"wk", kv * dim, L},
        {"wv", kv * dim, L}, {"wo", dim * dim, L}, {"rms_ffn", dim, L}, {"w1", ff * dim, L}, {"w2", dim * ff, L},
        {"w3", ff * dim, L}, {"rms_final", dim, 1}, {"freq_cis_real", hp.n_ctx_train * hs / 2, 1},
        {"freq_cis_imag", hp.n_ctx_train * hs / 2, 1}, {"wcls", shared ? 0 : V * dim, 1},
    };
    uint64_t offs[14];
    uint64_t off = 28;
    for (int i = 0; i < 14; ++i) {
        offs[i] = off;
        const uint64_t end = off + 4 * arrays[i].n_per_layer * arrays[i].count;
        if (end > f.size) {
            fail(err, strfmt("%s: truncated llama2.c checkpoint: array %s needs bytes %" PRIu64 "..%" PRIu64
                             " but the file ends at offset %zu (header: dim %d, hidden %d, layers %d, vocab %d, seq %d)",
                             path.c_str(), arrays[i].name, off, end, f.size, h[0], h[1], h[2], h[5], h[6]));
            return nullptr;
        }
        off = end;
    }
    if (off != f.size) {
        fail(err, strfmt("%s: llama2.c checkpoint has %zu unexpected bytes after the last array (expected size %" PRIu64
                         ", file size %zu, extra data starts at offset %" PRIu64 "): header does not match the weights",
                         path.c_str(), (size_t) (f.size - off), off, f.size, off));
        return nullptr;
    }

    m->ctx = new_meta_ctx(3 + 9 * L);
    if (!m->ctx) {
        fail(err, KVG_STATUS_OUT_OF_MEMORY, "out of memory");
        return nullptr;
    }
    // A tensor over one layer's slice of array a (llama2.c stores [rows][cols], i.e. ggml ne = {cols, rows}).
    auto take = [&](int a, uint64_t layer, int64_t cols, int64_t rows, const std::string & name) {
        ggml_tensor * t = rows > 1 ? ggml_new_tensor_2d(m->ctx, GGML_TYPE_F32, cols, rows)
                                   : ggml_new_tensor_1d(m->ctx, GGML_TYPE_F32, cols);
        ggml_set_name(t, name.c_str());
        t->data = const_cast<uint8_t *>(f.data) + offs[a] + 4 * arrays[a].n_per_layer * layer;
        return t;
    };
    m->tok_embd = take(0, 0, dim, V, "token_embd.weight");
    m->layers.resize(L);
    for (uint64_t l = 0; l < L; ++l) {
        LayerWeights & w = m->layers[l];
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
    m->output_norm = take(10, 0, dim, 1, "output_norm.weight");
    m->output = shared ? m->tok_embd : take(13, 0, dim, V, "output.weight");
    if (opt.check_tensors && !check_tensor_data(*m, err)) {
        *err = path + ": " + *err;
        return nullptr;
    }

    if (!tokenizer_path.empty()) {
        std::string verr;
        if (!m->vocab.load_llama2c(tokenizer_path, &verr, hp.n_vocab)) {
            fail(err, strfmt("tokenizer for a %d-token model: ", hp.n_vocab) + verr);
            return nullptr;
        }
        m->has_vocab = true;
        m->bos = m->vocab.bos();
        m->eos = m->vocab.eos();
    }
    m->desc = describe(*m, "f32");
    return m;
}

// ---- GGUF reading ------------------------------------------------------------------------------------

namespace {

struct GgufReader {
    gguf_context * g;
    std::string path;
    std::string * err;

    int64_t key(const char * k) const { return gguf_find_key(g, k); }

    // Any integer type; false (with message) if missing and required, or out of range.
    bool get_int(const char * k, int64_t lo, int64_t hi, bool required, int64_t * out) const {
        const int64_t id = key(k);
        if (id < 0) return required ? fail(err, strfmt("%s: missing key %s", path.c_str(), k)) : true;
        int64_t v;
        switch (gguf_get_kv_type(g, id)) {
            case GGUF_TYPE_UINT8: v = gguf_get_val_u8(g, id); break;
            case GGUF_TYPE_INT8: v = gguf_get_val_i8(g, id); break;
            case GGUF_TYPE_UINT16: v = gguf_get_val_u16(g, id); break;
            case GGUF_TYPE_INT16: v = gguf_get_val_i16(g, id); break;
            case GGUF_TYPE_UINT32: v = gguf_get_val_u32(g, id); break;
            case GGUF_TYPE_INT32: v = gguf_get_val_i32(g, id); break;
            case GGUF_TYPE_UINT64: {
                const uint64_t u = gguf_get_val_u64(g, id);
                v = u > (uint64_t) INT64_MAX ? INT64_MAX : (int64_t) u;
                break;
            }
            case GGUF_TYPE_INT64: v = gguf_get_val_i64(g, id); break;
            default:
                return fail(err, strfmt("%s: key %s has type %s, expected an integer", path.c_str(), k,
                                        gguf_type_name(gguf_get_kv_type(g, id))));
        }
        if (v < lo || v > hi) {
            return fail(err, strfmt("%s: key %s = %" PRId64 " is out of range %" PRId64 "..%" PRId64, path.c_str(), k, v, lo, hi));
        }
        *out = v;
        return true;
    }
    bool get_int(const char * k, int64_t lo, int64_t hi, bool required, int * out) const {
        int64_t v = *out;
        if (!get_int(k, lo, hi, required, &v)) return false;
        *out = (int) v;
        return true;
    }
    bool get_float(const char * k, bool required, float * out) const {
        const int64_t id = key(k);
        if (id < 0) return required ? fail(err, strfmt("%s: missing key %s", path.c_str(), k)) : true;
        const gguf_type t = gguf_get_kv_type(g, id);
        if (t == GGUF_TYPE_FLOAT32) *out = gguf_get_val_f32(g, id);
        else if (t == GGUF_TYPE_FLOAT64) *out = (float) gguf_get_val_f64(g, id);
        else return fail(err, strfmt("%s: key %s has type %s, expected a float", path.c_str(), k, gguf_type_name(t)));
        return true;
    }
    bool get_str(const char * k, std::string * out) const {
        const int64_t id = key(k);
        if (id < 0) return fail(err, strfmt("%s: missing key %s", path.c_str(), k));
        if (gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) {
            return fail(err, strfmt("%s: key %s is not a string", path.c_str(), k));
        }
        *out = gguf_get_val_str(g, id);
        return true;
    }
};

// Types the CPU matmul runs directly: f32, f16, bf16 and llama.cpp's block types
// (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K..q6_K, iq4_nl). Not q8_K: the k-quants' activation
// format has a vec_dot (with itself) but no matmul kernel.
bool is_weight_type(ggml_type t) {
    return t >= 0 && t < GGML_TYPE_COUNT && t != GGML_TYPE_Q8_K && ggml_get_type_traits_cpu(t)->vec_dot != nullptr;
}

// Block formats the library can read but has no kernels for: widened to f32 at load.
static bool is_widened_type(ggml_type t) {
    return t >= 0 && t < GGML_TYPE_COUNT && !is_weight_type(t) && ggml_is_quantized(t) && ggml_get_type_traits(t)->to_float;
}

// Bytes a type's kernels need the data aligned to.
size_t type_alignment(ggml_type t) { return t == GGML_TYPE_F32 ? 4 : 2; }

// tokenizer.ggml.merges of a byte-level BPE vocabulary: strings "left right", best first.
bool read_merges(const GgufReader & r, std::vector<std::string> * merges) {
    const int64_t id = r.key("tokenizer.ggml.merges");
    if (id < 0) return fail(r.err, r.path + ": a 'gpt2' tokenizer needs tokenizer.ggml.merges");
    if (gguf_get_kv_type(r.g, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(r.g, id) != GGUF_TYPE_STRING) {
        return fail(r.err, r.path + ": tokenizer.ggml.merges is not an array of strings");
    }
    const size_t n = gguf_get_arr_n(r.g, id);
    merges->reserve(n);
    for (size_t i = 0; i < n; ++i) merges->push_back(gguf_get_arr_str(r.g, id, i));
    return true;
}

bool read_vocab(const GgufReader & r, Model & m) {
    const int64_t tok_id = r.key("tokenizer.ggml.tokens");
    if (tok_id < 0) return true; // token ids only
    std::string model = "llama";
    if (r.key("tokenizer.ggml.model") >= 0) {
        if (!r.get_str("tokenizer.ggml.model", &model)) return false;
        if (model != "llama" && model != "gpt2") {
            return fail(r.err, KVG_STATUS_UNSUPPORTED, strfmt("%s: tokenizer.ggml.model is '%s'; supported: 'llama' (SentencePiece BPE), "
                                      "'gpt2' (byte-level BPE)", r.path.c_str(), model.c_str()));
        }
    }
    gguf_context * g = r.g;
    if (gguf_get_kv_type(g, tok_id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, tok_id) != GGUF_TYPE_STRING) {
        return fail(r.err, r.path + ": tokenizer.ggml.tokens is not an array of strings");
    }
    const size_t n = gguf_get_arr_n(g, tok_id);
    if ((int64_t) n != m.hp.n_vocab) {
        return fail(r.err, strfmt("%s: tokenizer has %zu tokens but token_embd.weight has %d rows", r.path.c_str(), n,
                                  m.hp.n_vocab));
    }
    std::vector<std::string> pieces(n);
    for (size_t i = 0; i < n; ++i) pieces[i] = gguf_get_arr_str(g, tok_id, i);
    std::vector<float> scores;
    const int64_t sc_id = r.key("tokenizer.ggml.scores");
    if (sc_id >= 0) {
        if (gguf_get_kv_type(g, sc_id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, sc_id) != GGUF_TYPE_FLOAT32 ||
            gguf_get_arr_n(g, sc_id) != n) {
            return fail(r.err, r.path + ": tokenizer.ggml.scores must be float32[n_vocab]");
        }
        const float * p = (const float *) gguf_get_arr_data(g, sc_id);
        scores.assign(p, p + n);
    }
    std::vector<int> types;
    const int64_t ty_id = r.key("tokenizer.ggml.token_type");
    if (ty_id >= 0) {
        const gguf_type at = gguf_get_kv_type(g, ty_id) == GGUF_TYPE_ARRAY ? gguf_get_arr_type(g, ty_id) : GGUF_TYPE_COUNT;
        if ((at != GGUF_TYPE_INT32 && at != GGUF_TYPE_UINT32) || gguf_get_arr_n(g, ty_id) != n) {
            return fail(r.err, r.path + ": tokenizer.ggml.token_type must be int32[n_vocab]");
        }
        const int32_t * p = (const int32_t *) gguf_get_arr_data(g, ty_id);
        types.assign(p, p + n);
    }
    int bos = -1, eos = -1, unk = -1;
    const int64_t hi = (int64_t) n - 1;
    if (!r.get_int("tokenizer.ggml.bos_token_id", 0, hi, false, &bos) ||
        !r.get_int("tokenizer.ggml.eos_token_id", 0, hi, false, &eos) ||
        !r.get_int("tokenizer.ggml.unknown_token_id", 0, hi, false, &unk)) {
        return false;
    }
    std::string verr;
    if (model == "gpt2") {
        std::vector<std::string> merges;
        if (!read_merges(r, &merges)) return false;
        std::string pre;
        if (r.key("tokenizer.ggml.pre") >= 0 && !r.get_str("tokenizer.ggml.pre", &pre)) return false;
        if (!m.vocab.init_bpe(std::move(pieces), std::move(types), merges, pre, bos, eos, &verr)) {
            return fail(r.err, r.path + ": tokenizer: " + verr);
        }
    } else if (!m.vocab.init(std::move(pieces), std::move(scores), std::move(types), bos, eos, unk, &verr)) {
        return fail(r.err, r.path + ": tokenizer: " + verr);
    }
    m.has_vocab = true;
    if (bos >= 0) m.bos = bos;
    if (eos >= 0) m.eos = eos;
    return true;
}

} // namespace

// The tokenizer of any GGUF file (vocab_only): the vocabulary's size is its token count.
static std::unique_ptr<Model> read_vocab_only(const GgufReader & r, std::unique_ptr<Model> m) {
    const int64_t tok_id = r.key("tokenizer.ggml.tokens");
    if (tok_id < 0) {
        fail(r.err, r.path + ": no tokenizer (tokenizer.ggml.tokens) in the file");
        return nullptr;
    }
    const size_t n = gguf_get_kv_type(r.g, tok_id) == GGUF_TYPE_ARRAY ? gguf_get_arr_n(r.g, tok_id) : 0;
    if (n == 0 || n > (size_t) INT32_MAX) {
        fail(r.err, r.path + ": tokenizer.ggml.tokens is empty or not an array");
        return nullptr;
    }
    m->hp.n_vocab = (int) n;
    if (!read_vocab(r, *m)) return nullptr;
    m->desc = "gguf vocab only: " + std::to_string(n) + " tokens";
    return m;
}

std::unique_ptr<Model> load_gguf(const std::string & path, const LoadOptions & opt, std::string * err) {
    std::string e;
    if (!err) err = &e;
    auto m = std::make_unique<Model>();
    m->format = "gguf";
    char gerr[512] = "";
    ggml_context * meta = nullptr;
    gguf_init_params gp = {true, &meta};
    gguf_context * g = gguf_init_from_file_ex(path.c_str(), gp, gerr, sizeof(gerr));
    if (!g) {
        fail(err, path + ": " + gerr);
        return nullptr;
    }
    m->ctx = meta;
    struct guard { gguf_context * g; ~guard() { gguf_free(g); } } gguard{g};
    GgufReader r{g, path, err};

    if (opt.vocab_only) return read_vocab_only(r, std::move(m));
    std::string arch;
    if (!r.get_str("general.architecture", &arch)) return nullptr;
    if (arch != "llama") {
        fail(err, KVG_STATUS_UNSUPPORTED, strfmt("%s: architecture '%s' is not supported (only 'llama')", path.c_str(), arch.c_str()));
        return nullptr;
    }
    HParams & hp = m->hp;
    const int64_t big = 1 << 24;
    if (!r.get_int("llama.context_length", 1, big, true, &hp.n_ctx_train) ||
        !r.get_int("llama.embedding_length", 1, 1 << 16, true, &hp.n_embd) ||
        !r.get_int("llama.block_count", 1, 1 << 10, true, &hp.n_layer) ||
        !r.get_int("llama.feed_forward_length", 1, 1 << 20, true, &hp.n_ff) ||
        !r.get_int("llama.attention.head_count", 1, 1 << 12, true, &hp.n_head)) {
        return nullptr;
    }
    hp.n_head_kv = hp.n_head;
    if (!r.get_int("llama.attention.head_count_kv", 1, 1 << 12, false, &hp.n_head_kv)) return nullptr;
    hp.n_rot = hp.n_embd % hp.n_head == 0 ? hp.head_dim() : 0;
    if (!r.get_int("llama.rope.dimension_count", 1, 1 << 16, false, &hp.n_rot) ||
        !r.get_float("llama.rope.freq_base", false, &hp.rope_base) ||
        !r.get_float("llama.attention.layer_norm_rms_epsilon", true, &hp.rms_eps)) {
        return nullptr;
    }

    // Every tensor: listed, a weight type, in the file, mapped (or copied when misaligned).
    if (!m->mapping) m->mapping = std::make_unique<FileMapping>();
    if (!m->mapping->open(path, opt.use_mmap, err)) return nullptr;
    const FileMapping & f = *m->mapping;
    const size_t data_offset = gguf_get_data_offset(g);
    auto get = [&](const std::string & name, int64_t ne0, int64_t ne1) -> ggml_tensor * {
        const int64_t id = gguf_find_tensor(g, name.c_str());
        if (id < 0) {
            fail(err, strfmt("%s: missing tensor %s", path.c_str(), name.c_str()));
            return nullptr;
        }
        ggml_tensor * t = ggml_get_tensor(meta, name.c_str());
        if (!t) {
            fail(err, strfmt("%s: tensor %s has no metadata", path.c_str(), name.c_str()));
            return nullptr;
        }
        if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
            fail(err, strfmt("%s: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                             "], expected [%" PRId64 ", %" PRId64 "]", path.c_str(), name.c_str(), t->ne[0], t->ne[1],
                             t->ne[2], t->ne[3], ne0, ne1));
            return nullptr;
        }
        const bool widen_type = !is_weight_type(t->type); // read, then computed as f32
        if (widen_type && !is_widened_type(t->type)) {
            fail(err, KVG_STATUS_UNSUPPORTED, strfmt("%s: tensor %s has type %s; supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                             "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl", path.c_str(), name.c_str(), ggml_type_name(t->type)));
            return nullptr;
        }
        const size_t begin = data_offset + gguf_get_tensor_offset(g, id);
        const size_t nbytes = ggml_nbytes(t);
        if (begin > f.size || nbytes > f.size - begin) {
            fail(err, strfmt("%s: tensor %s data at offset %zu..%zu lies past the end of the file (%zu bytes)",
                             path.c_str(), name.c_str(), begin, begin + nbytes, f.size));
            return nullptr;
        }
        const uint8_t * src = f.data + begin;
        const bool is_norm = ne1 == 1;
        if ((is_norm && t->type != GGML_TYPE_F32) || widen_type) {
            // norms are applied with an f32 multiply, and a block format without kernels is
            // widened once here, row by row (exactly the values the file encodes)
            auto buf = std::make_unique<uint8_t[]>((size_t) ne0 * ne1 * sizeof(float));
            const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
            for (int64_t r = 0; r < ne1; ++r) to_float(src + r * t->nb[1], (float *) buf.get() + r * ne0, ne0);
            t->type = GGML_TYPE_F32;
            t->nb[0] = sizeof(float);
            for (int i = 1; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
            t->data = buf.get();
            m->owned.push_back(std::move(buf));
        } else if ((uintptr_t) src % type_alignment(t->type) != 0) {
            auto buf = std::make_unique<uint8_t[]>(nbytes);
            std::memcpy(buf.get(), src, nbytes);
            t->data = buf.get();
            m->owned.push_back(std::move(buf));
        } else {
            t->data = const_cast<uint8_t *>(src);
        }
        return t;
    };

    // the vocabulary size comes from the embedding matrix
    const int64_t emb_id = gguf_find_tensor(g, "token_embd.weight");
    ggml_tensor * emb = emb_id >= 0 ? ggml_get_tensor(meta, "token_embd.weight") : nullptr;
    if (!emb) {
        fail(err, path + ": missing tensor token_embd.weight");
        return nullptr;
    }
    hp.n_vocab = (int) std::min<int64_t>(emb->ne[1], INT32_MAX);
    if (!check_hparams(hp, err)) {
        *err = path + ": " + *err;
        return nullptr;
    }
    int64_t vocab_key = hp.n_vocab;
    if (!r.get_int("llama.vocab_size", 1, INT32_MAX, false, &vocab_key)) return nullptr;
    if (vocab_key != hp.n_vocab) {
        fail(err, strfmt("%s: llama.vocab_size %" PRId64 " differs from token_embd.weight's %d rows", path.c_str(),
                         vocab_key, hp.n_vocab));
        return nullptr;
    }

    const int64_t dim = hp.n_embd, kv = hp.n_embd_kv(), ff = hp.n_ff, V = hp.n_vocab;
    if (!(m->tok_embd = get("token_embd.weight", dim, V))) return nullptr;
    m->layers.resize(hp.n_layer);
    for (int l = 0; l < hp.n_layer; ++l) {
        LayerWeights & w = m->layers[l];
        const std::string p = "blk." + std::to_string(l) + ".";
        if (!(w.attn_norm = get(p + "attn_norm.weight", dim, 1)) || !(w.wq = get(p + "attn_q.weight", dim, dim)) ||
            !(w.wk = get(p + "attn_k.weight", dim, kv)) || !(w.wv = get(p + "attn_v.weight", dim, kv)) ||
            !(w.wo = get(p + "attn_output.weight", dim, dim)) ||
            !(w.ffn_norm = get(p + "ffn_norm.weight", dim, 1)) ||
            !(w.ffn_gate = get(p + "ffn_gate.weight", dim, ff)) ||
            !(w.ffn_up = get(p + "ffn_up.weight", dim, ff)) ||
            !(w.ffn_down = get(p + "ffn_down.weight", ff, dim))) {
            return nullptr;
        }
    }
    if (!(m->output_norm = get("output_norm.weight", dim, 1))) return nullptr;
    if (gguf_find_tensor(g, "output.weight") >= 0) {
        if (!(m->output = get("output.weight", dim, V))) return nullptr;
    } else {
        m->output = m->tok_embd; // tied embeddings
    }
    if (!read_vocab(r, *m)) return nullptr;
    if (opt.check_tensors && !check_tensor_data(*m, err)) {
        *err = path + ": " + *err;
        return nullptr;
    }

    std::string types;
    for (const ggml_tensor * t : m->tensors()) {
        if (t->ne[1] > 1 && types.find(ggml_type_name(t->type)) == std::string::npos) {
            types += types.empty() ? "" : "/";
            types += ggml_type_name(t->type);
        }
    }
    m->desc = describe(*m, types.c_str());
    return m;
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
        if (m && !tokenizer_path.empty()) {
            if (!m->vocab.load_llama2c(tokenizer_path, err, m->hp.n_vocab)) {
                *err = strfmt("tokenizer for a %d-token model: ", m->hp.n_vocab) + *err;
                return nullptr;
            }
            m->has_vocab = true;
            m->bos = m->vocab.bos();
            m->eos = m->vocab.eos();
        }
        return m;
    }
    return load_llama2c(path, tokenizer_path, opt, err);
}

// ---- GGUF writing ----------------------------------------------------------------------------------

static void set_vocab(gguf_context * g, const Model & m, bool placeholder) {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<int32_t> types;
    int bos = m.bos, eos = m.eos, unk = 0;
    if (m.has_vocab) {
        for (int i = 0; i < m.vocab.n_tokens(); ++i) {
            pieces.push_back(m.vocab.piece(i));
            scores.push_back(m.vocab.score(i));
            types.push_back(m.vocab.type(i));
        }
        bos = m.vocab.bos();
        eos = m.vocab.eos();
        unk = m.vocab.unk();
    } else if (placeholder) {
        // no tokenizer known: control tokens, byte tokens, then pieces that print their id
        for (int i = 0; i < m.hp.n_vocab; ++i) {
            if (i == 0) pieces.push_back("<unk>"), types.push_back(TOKEN_TYPE_UNKNOWN);
            else if (i == 1) pieces.push_back("<s>"), types.push_back(TOKEN_TYPE_CONTROL);
            else if (i == 2) pieces.push_back("</s>"), types.push_back(TOKEN_TYPE_CONTROL);
            else if (i < 3 + 256) pieces.push_back(strfmt("<0x%02X>", i - 3)), types.push_back(TOKEN_TYPE_BYTE);
            else pieces.push_back(strfmt("[%d]", i)), types.push_back(TOKEN_TYPE_NORMAL);
            scores.push_back(0.0f);
        }
        bos = 1, eos = 2, unk = 0;
    } else {
        return;
    }
    std::vector<const char *> ptrs;
    for (const std::string & p : pieces) ptrs.push_back(p.c_str());
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    if (bos >= 0) gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t) bos);
    if (eos >= 0) gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t) eos);
    if (unk >= 0) gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t) unk);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
}

// Writes a temporary file beside the target and renames it over the target: a model that
// maps the old file keeps its pages (the old inode lives until it is unmapped), and a
// failed write leaves the old file as it was.
static bool write_replacing(gguf_context * g, const std::string & path, std::string * err) {
    std::string tmp = path + ".tmp-XXXXXX";
    const int fd = mkstemp(&tmp[0]);
    if (fd < 0) return fail(err, KVG_STATUS_IO, strfmt("cannot create a temporary file beside '%s': %s", path.c_str(), std::strerror(errno)));
    const mode_t mask = umask(0);
    umask(mask);
    const bool mode_ok = fchmod(fd, 0666 & ~mask) == 0; // mkstemp makes it 0600
    close(fd);
    if (!mode_ok || !gguf_write_to_file(g, tmp.c_str(), false)) {
        unlink(tmp.c_str());
        return fail(err, KVG_STATUS_IO, strfmt("failed to write '%s' (through '%s'); '%s' is unchanged", path.c_str(), tmp.c_str(), path.c_str()));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        unlink(tmp.c_str());
        return fail(err, KVG_STATUS_IO, strfmt("cannot replace '%s': %s; it is unchanged", path.c_str(), std::strerror(e)));
    }
    return true;
}

bool save_gguf(const Model & m, const std::string & path, ggml_type type, bool placeholder_vocab, std::string * err) {
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 && type != GGML_TYPE_Q8_0 &&
        type != GGML_TYPE_Q4_0) {
        return fail(err, KVG_STATUS_UNSUPPORTED, strfmt("cannot write weights as %s (f32, f16, bf16, q8_0, q4_0)", ggml_type_name(type)));
    }
    const HParams & hp = m.hp;
    gguf_context * g = gguf_init_empty();
    struct guard { gguf_context * g; ggml_context * c; ~guard() { gguf_free(g); if (c) ggml_free(c); } } gd{g, nullptr};

    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_str(g, "general.name", "kvgraph-converted");
    // llama.cpp's file types: all f32, mostly f16, q4_0, q8_0, bf16
    const uint32_t ftype = type == GGML_TYPE_F32 ? 0 : type == GGML_TYPE_F16 ? 1 : type == GGML_TYPE_Q4_0 ? 2
                         : type == GGML_TYPE_BF16 ? 32 : 7;
    gguf_set_val_u32(g, "general.file_type", ftype);
    gguf_set_val_u32(g, "llama.context_length", hp.n_ctx_train);
    gguf_set_val_u32(g, "llama.embedding_length", hp.n_embd);
    gguf_set_val_u32(g, "llama.block_count", hp.n_layer);
    gguf_set_val_u32(g, "llama.feed_forward_length", hp.n_ff);
    gguf_set_val_u32(g, "llama.attention.head_count", hp.n_head);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", hp.n_head_kv);
    gguf_set_val_u32(g, "llama.rope.dimension_count", hp.n_rot);
    gguf_set_val_f32(g, "llama.rope.freq_base", hp.rope_base);
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", hp.rms_eps);
    gguf_set_val_u32(g, "llama.vocab_size", hp.n_vocab);
    set_vocab(g, m, placeholder_vocab);

    // Weights in llama.cpp's names. Q/K rows are written as they are: llama.cpp's HF
    // converter permutes them because HF checkpoints store rotate-half (NeoX) order, but
    // llama2.c / Meta weights already pair adjacent elements, the order ggml's rope mode 0
    // (llama.cpp's "normal" mode for the llama architecture) expects.
    const std::vector<ggml_tensor *> src = m.tensors();
    gd.c = new_meta_ctx(src.size());
    std::vector<std::vector<uint8_t>> bufs;
    bufs.reserve(src.size());
    for (const ggml_tensor * s : src) {
        ggml_type t = s->ne[1] == 1 ? GGML_TYPE_F32 : type;
        if (ggml_is_quantized(t) && s->ne[0] % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
        ggml_tensor * d = ggml_new_tensor_2d(gd.c, t, s->ne[0], s->ne[1]);
        ggml_set_name(d, s->name);
        bufs.emplace_back(ggml_nbytes(d));
        d->data = bufs.back().data();
        std::vector<float> row(s->ne[0]);
        const ggml_type_traits * from = ggml_get_type_traits(s->type);
        const ggml_type_traits * to = ggml_get_type_traits(t);
        for (int64_t i = 0; i < s->ne[1]; ++i) {
            const char * srow = (const char *) s->data + i * s->nb[1];
            if (s->type == GGML_TYPE_F32) std::memcpy(row.data(), srow, row.size() * sizeof(float)); // no f32 to_float (as ggml)
            else from->to_float(srow, row.data(), s->ne[0]);
            to->from_float_ref(row.data(), (char *) d->data + i * d->nb[1], s->ne[0]);
        }
        gguf_add_tensor(g, d);
    }
    return write_replacing(g, path, err);
}

} // namespace kvg
