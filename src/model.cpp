// The Model object and what its loaders share: messages, the file mapping, hyperparameter
// and weight data checks, and load_model, which picks the loader by the file's first bytes.
// The loaders: model-gguf.cpp, model-llama2c.cpp; the writer: model-save.cpp.
#include "model.h"
#include "model-impl.h"
#include "status.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace kvg {

// ---- the file's bytes ----------------------------------------------------------------------------

FileMapping::~FileMapping() {
    if (mapped && data) munmap(const_cast<uint8_t *>(data), size);
    if (copy) munmap(copy, copy_size);
}

bool FileMapping::open(const std::string & path, bool use_mmap, std::string * err, size_t read_max, size_t lead) {
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
    const bool small = size <= read_max;
    if (use_mmap && !small) {
        void * p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            data = (const uint8_t *) p;
            mapped = true;
            ::close(fd);
            return true;
        }
    }
    const size_t huge = (size_t) 2 << 20, page = 4096;
    const size_t round = small ? page : huge;
    copy_size = (lead + size + round - 1) / round * round;
    copy = mmap(nullptr, copy_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (small ? MAP_POPULATE : 0), -1, 0);
    if (copy == MAP_FAILED) {
        copy = nullptr;
        ::close(fd);
        return fail(err, KVG_STATUS_OUT_OF_MEMORY, strfmt("'%s': cannot allocate %zu bytes for its contents", path.c_str(), size));
    }
    if (!small) madvise(copy, copy_size, MADV_HUGEPAGE); // a hint: without transparent huge pages it does nothing
    uint8_t * dst = (uint8_t *) copy + lead;
    // large files in parallel slices: the page faults of fresh memory (zeroing, and finding
    // huge pages) cost more than the copy, and they run on every core
    const size_t slice_min = (size_t) 64 << 20;
    const size_t cores = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    const unsigned n_slices = (unsigned) std::max<size_t>(1, std::min(cores, size / slice_min));
    std::vector<size_t> failed_at(n_slices, SIZE_MAX);
    auto read_slice = [&](unsigned i) {
        const size_t begin = size / n_slices * i, end = i + 1 == n_slices ? size : size / n_slices * (i + 1);
        for (size_t at = begin; at < end;) {
            const ssize_t n = ::pread(fd, dst + at, end - at, (off_t) at);
            if (n <= 0) {
                failed_at[i] = at;
                return;
            }
            at += (size_t) n;
        }
    };
    std::vector<std::thread> readers;
    for (unsigned i = 1; i < n_slices; ++i) {
        try {
            readers.emplace_back(read_slice, i);
        } catch (const std::system_error &) {
            read_slice(i); // no thread to be had: this one reads the slice
        }
    }
    read_slice(0);
    for (auto & t : readers) t.join();
    ::close(fd);
    for (size_t at : failed_at) {
        if (at != SIZE_MAX) return fail(err, KVG_STATUS_IO, strfmt("'%s': read failed at offset %zu", path.c_str(), at));
    }
    data = dst;
    return true;
}

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

ggml_context * new_meta_ctx(size_t n_tensors) {
    ggml_init_params p = {(n_tensors + 4) * ggml_tensor_overhead(), nullptr, true};
    return ggml_init(p);
}

std::string describe(const Model & m, const char * types) {
    const HParams & h = m.hp;
    return strfmt("%s %s: %d layers, dim %d, ff %d, %d heads (%d kv), vocab %d, context %d, rope base %g%s",
                  m.format.c_str(), types, h.n_layer, h.n_embd, h.n_ff, h.n_head, h.n_head_kv, h.n_vocab,
                  h.n_ctx_train, h.rope_base, m.output == m.tok_embd ? ", tied output" : "");
}

bool check_hparams(const HParams & h, std::string * err) {
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

namespace {

// The matrices a product reads: the layers' and the output (not a tied embedding, which
// ggml_get_rows reads).
std::vector<ggml_tensor *> product_matrices(const Model & m) {
    std::vector<ggml_tensor *> mats;
    for (const LayerWeights & l : m.layers) {
        for (ggml_tensor * t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) mats.push_back(t);
    }
    if (m.output != m.tok_embd) mats.push_back(m.output);
    return mats;
}

// Runs change(t) on every matrix, one matrix at a time per thread (1.1B q4_0 repack on 2
// cores: 70 -> 35 ms); returns how many it changed.
int change_matrices(const std::vector<ggml_tensor *> & mats, bool (*change)(ggml_tensor *)) {
    std::atomic<int> next{0}, n{0};
    auto work = [&] {
        for (int i; (i = next++) < (int) mats.size();) n += change(mats[i]) ? 1 : 0;
    };
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < std::min(8u, std::thread::hardware_concurrency()); ++i) {
        try {
            pool.emplace_back(work);
        } catch (const std::system_error &) {
            break; // fewer threads: the ones running take the rest
        }
    }
    work();
    for (auto & th : pool) th.join();
    return n;
}

// f16 -> bf16 in place, row by row through an f32 row (nearest even, as ggml_fp32_to_bf16;
// the vector converters: a 1.1B model in ~0.2 s of a 0.4 s load, ggml.h's scalar rows 2.2 s).
bool round_to_bf16(ggml_tensor * t) {
    if (t->type != GGML_TYPE_F16 || !ggml_is_contiguous(t)) return false;
    const int64_t k = t->ne[0];
    std::vector<float> row(k);
    for (int64_t r = 0; r < ggml_nrows(t); ++r) {
        void * p = (char *) t->data + r * t->nb[1];
        ggml_cpu_fp16_to_fp32((const ggml_fp16_t *) p, row.data(), k);
        ggml_cpu_fp32_to_bf16(row.data(), (ggml_bf16_t *) p, k);
    }
    t->type = GGML_TYPE_BF16; // the same element size: strides stay
    return true;
}

} // namespace

bool rounds_f16_to_bf16() { return ggml_cpu_get_features() >= GGML_CPU_FEATURES_AVX512_BF16; }

int repack_weights(Model & m) {
    const std::vector<ggml_tensor *> mats = product_matrices(m);
    bool any = false;
    for (const ggml_tensor * t : mats) any |= ggml_kvg_repacks(t->type);
    if (!any) return 0;
    // a read-only mapping is never written: load_gguf reads files with matrices to rearrange
    // into memory (in a private writable mapping each page would be copied on a fault of its own)
    if (m.mapping && m.mapping->mapped) return 0;
    return change_matrices(mats, ggml_kvg_repack);
}

int round_f16_weights(Model & m) {
    if (!rounds_f16_to_bf16() || (m.mapping && m.mapping->mapped)) return 0;
    return change_matrices(product_matrices(m), round_to_bf16);
}

} // namespace kvg
