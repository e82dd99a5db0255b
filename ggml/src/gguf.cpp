// GGUF parser and writer. The parser checks every count, length, type id, shape and offset
// against the bytes actually present before allocating or reading, and reports failures as
// "gguf: <item> at offset <n>: <problem>" instead of aborting.
// Values are kept as their little-endian file bytes (the library assumes a little-endian host).
#include "gguf.h"

#include "ggml-impl.h"
#include "types.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

struct gguf_kv {
    std::string key;
    gguf_type type = GGUF_TYPE_UINT8; // element type for arrays
    bool is_array = false;
    std::vector<uint8_t> data;      // fixed-size values, file bytes
    std::vector<std::string> strs;  // string values
};

// A tensor's entry in the file's table: where its bytes start, counted from the start of
// the data section, and a tensor struct describing them (name, type, ne, nb; data only
// while writing: the caller's bytes).
struct tensor_entry {
    uint64_t rel_offset = 0;
    ggml_tensor desc;
};

struct gguf_error {
    std::string msg;
};

size_t type_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: return 0; // string, array, invalid
    }
}

size_t kv_n(const gguf_kv & kv) {
    return kv.type == GGUF_TYPE_STRING ? kv.strs.size() : kv.data.size() / type_size(kv.type);
}

std::string vformat(const char * fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string s(n > 0 ? (size_t) n : 0, '\0');
    if (n > 0) vsnprintf(&s[0], (size_t) n + 1, fmt, args);
    return s;
}

#ifdef __GNUC__
__attribute__((format(printf, 1, 2)))
#endif
std::string format(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

// Names from a file can hold anything: escape and shorten them for messages.
std::string printable(const std::string & s) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < 96; ++i) {
        const unsigned char c = (unsigned char) s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') out += (char) c;
        else out += format("\\x%02x", c);
    }
    if (s.size() > 96) out += "...";
    return out;
}

// Bounds-checked reads from a memory buffer or a file of known size.
class gguf_reader {
public:
    gguf_reader(const uint8_t * buf, uint64_t size) : buf_(buf), size_(size) {}
    gguf_reader(FILE * f, uint64_t size) : file_(f), size_(size) {}

    uint64_t pos() const { return pos_; }
    uint64_t size() const { return size_; }
    uint64_t remaining() const { return size_ - pos_; }

    // What is being parsed, for error messages.
    void set_item(std::string item, uint64_t offset) { item_ = std::move(item); item_off_ = offset; }

    [[noreturn]]
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    void fail(const char * fmt, ...) const {
        va_list args;
        va_start(args, fmt);
        std::string detail = vformat(fmt, args);
        va_end(args);
        throw gguf_error{format("gguf: %s at offset %" PRIu64 ": ", item_.c_str(), item_off_) + detail};
    }

    void read(void * dst, uint64_t n, const char * what) {
        if (n > remaining()) {
            fail("unexpected end of file reading %s at offset %" PRIu64 " (%" PRIu64 " bytes needed, %" PRIu64
                 " left)", what, pos_, n, remaining());
        }
        if (n == 0) return;
        if (buf_) {
            std::memcpy(dst, buf_ + pos_, n);
        } else if (std::fread(dst, 1, n, file_) != n) {
            fail("read error reading %s at offset %" PRIu64, what, pos_);
        }
        pos_ += n;
    }

    template <typename T> T read(const char * what) {
        T v;
        read(&v, sizeof(v), what);
        return v;
    }

    std::string read_string(const char * what) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(what);
        if (len > remaining()) {
            fail("%s length %" PRIu64 " at offset %" PRIu64 " exceeds the %" PRIu64 " bytes left in the file",
                 what, len, at, remaining());
        }
        std::string s((size_t) len, '\0');
        read(&s[0], len, what);
        return s;
    }

    void seek(uint64_t offset) {
        if (offset > size_) fail("seek to offset %" PRIu64 " past end of file (%" PRIu64 " bytes)", offset, size_);
        if (file_ && fseeko(file_, (off_t) offset, SEEK_SET) != 0) fail("cannot seek to offset %" PRIu64, offset);
        pos_ = offset;
    }

private:
    const uint8_t * buf_ = nullptr;
    FILE * file_ = nullptr;
    uint64_t size_ = 0;
    uint64_t pos_ = 0;
    std::string item_ = "header";
    uint64_t item_off_ = 0;
};

// Smallest encodings: a KV pair (1-byte key, u8 value) and a tensor info (1-byte name, 1 dim).
const uint64_t MIN_KV_BYTES = 8 + 1 + 4 + 1;
const uint64_t MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8;

// Counts only bound the minimal encodings; our records are larger, so grow as we parse.
const uint64_t RESERVE_CAP = 4096;

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }
uint64_t pad_to(uint64_t x, uint64_t align) { return (x + align - 1) / align * align; }

void check_name(gguf_reader & r, const std::string & s, const char * what) {
    if (s.empty()) r.fail("%s is empty", what);
    if (std::memchr(s.data(), '\0', s.size())) r.fail("%s contains a NUL byte", what);
}

void read_kv(gguf_reader & r, gguf_context & ctx, std::unordered_set<std::string> & seen, uint64_t i);
void read_tensor_info(gguf_reader & r, gguf_context & ctx, std::unordered_set<std::string> & seen, uint64_t i,
                      std::vector<uint64_t> & info_offs);

struct ggml_ctx_deleter {
    void operator()(ggml_context * c) const { ggml_free(c); }
};

} // namespace

// What a file holds, or what gguf_write_to_file will write: metadata pairs and the tensor
// table, both in file order.
struct gguf_context {
    std::vector<gguf_kv> pairs;
    std::vector<tensor_entry> tensors;
    size_t data_start = 0;                 // read contexts: file offset of the data section
    size_t align = GGUF_DEFAULT_ALIGNMENT; // general.alignment, kept in step with that key
    uint32_t file_version = GGUF_VERSION;
};

namespace {

void read_kv(gguf_reader & r, gguf_context & ctx, std::unordered_set<std::string> & seen, uint64_t i) {
    const uint64_t at = r.pos();
    r.set_item(format("key #%" PRIu64, i), at);
    gguf_kv kv;
    kv.key = r.read_string("key");
    check_name(r, kv.key, "key");
    r.set_item(format("key '%s'", printable(kv.key).c_str()), at);
    if (!seen.insert(kv.key).second) r.fail("duplicate key");

    const uint64_t type_at = r.pos();
    uint32_t type = r.read<uint32_t>("value type");
    if (type >= GGUF_TYPE_COUNT) r.fail("invalid value type %" PRIu32 " at offset %" PRIu64, type, type_at);
    uint64_t n = 1;
    if (type == GGUF_TYPE_ARRAY) {
        kv.is_array = true;
        const uint64_t elem_at = r.pos();
        type = r.read<uint32_t>("array element type");
        if (type >= GGUF_TYPE_COUNT) r.fail("invalid array element type %" PRIu32 " at offset %" PRIu64, type, elem_at);
        if (type == GGUF_TYPE_ARRAY) r.fail("arrays of arrays are not supported (element type at offset %" PRIu64 ")", elem_at);
        const uint64_t n_at = r.pos();
        n = r.read<uint64_t>("array length");
        const uint64_t min_elem = type == GGUF_TYPE_STRING ? 8 : type_size((gguf_type) type);
        if (n > r.remaining() / min_elem) {
            r.fail("array length %" PRIu64 " at offset %" PRIu64 " is too large: %" PRIu64 " elements of type %s take at "
                   "least %" PRIu64 " bytes each and only %" PRIu64 " bytes are left", n, n_at, n,
                   gguf_type_name((gguf_type) type), min_elem, r.remaining());
        }
    }
    kv.type = (gguf_type) type;
    if (kv.type == GGUF_TYPE_STRING) {
        kv.strs.reserve((size_t) std::min<uint64_t>(n, RESERVE_CAP));
        for (uint64_t j = 0; j < n; ++j) kv.strs.push_back(r.read_string("string"));
    } else {
        const uint64_t data_at = r.pos();
        kv.data.resize((size_t) (n * type_size(kv.type))); // n was checked against the bytes left
        r.read(kv.data.data(), kv.data.size(), "value");
        if (kv.type == GGUF_TYPE_BOOL) {
            for (size_t j = 0; j < kv.data.size(); ++j) {
                if (kv.data[j] > 1) r.fail("invalid bool value %u at offset %" PRIu64, kv.data[j], data_at + j);
            }
        }
    }

    if (kv.key == GGUF_KEY_GENERAL_ALIGNMENT) {
        if (kv.is_array || kv.type != GGUF_TYPE_UINT32) {
            r.fail("must be of type u32, not %s%s", kv.is_array ? "array of " : "", gguf_type_name(kv.type));
        }
        uint32_t align;
        std::memcpy(&align, kv.data.data(), sizeof(align));
        if (!is_pow2(align)) r.fail("alignment %" PRIu32 " is not a nonzero power of 2", align);
        ctx.align = align;
    }
    ctx.pairs.push_back(std::move(kv));
}

void read_tensor_info(gguf_reader & r, gguf_context & ctx, std::unordered_set<std::string> & seen, uint64_t i,
                      std::vector<uint64_t> & info_offs) {
    const uint64_t at = r.pos();
    r.set_item(format("tensor #%" PRIu64, i), at);
    const std::string name = r.read_string("tensor name");
    check_name(r, name, "tensor name");
    r.set_item(format("tensor '%s'", printable(name).c_str()), at);
    if (name.size() >= GGML_MAX_NAME) {
        r.fail("name is %zu bytes long (at most %d allowed)", name.size(), GGML_MAX_NAME - 1);
    }
    if (!seen.insert(name).second) r.fail("duplicate tensor name");

    const uint32_t n_dims = r.read<uint32_t>("n_dims");
    if (n_dims < 1 || n_dims > GGML_MAX_DIMS) r.fail("n_dims = %" PRIu32 " (must be 1..%d)", n_dims, GGML_MAX_DIMS);
    int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    int64_t nelements = 1;
    for (uint32_t j = 0; j < n_dims; ++j) {
        const uint64_t dim_at = r.pos();
        ne[j] = r.read<int64_t>("dimension");
        if (ne[j] <= 0) r.fail("dimension %" PRIu32 " at offset %" PRIu64 " is %" PRId64 " (must be > 0)", j, dim_at, ne[j]);
        if (ne[j] > INT64_MAX / nelements) {
            r.fail("element count overflows: dimension %" PRIu32 " (%" PRId64 ") times the previous ones (%" PRId64 ")",
                   j, ne[j], nelements);
        }
        nelements *= ne[j];
    }

    const uint64_t type_at = r.pos();
    const uint32_t type_id = r.read<uint32_t>("tensor type");
    if (type_id >= GGML_TYPE_COUNT && type_id < (uint32_t) kvg::TYPE_COUNT) {
        r.fail("tensor type %" PRIu32 " at offset %" PRIu64 " is %s, kvgraph's in-memory layout, never a file's", type_id, type_at,
               ggml_type_name((ggml_type) type_id));
    }
    if (type_id >= GGML_TYPE_COUNT) r.fail("invalid tensor type %" PRIu32 " at offset %" PRIu64, type_id, type_at);
    const ggml_type type = (ggml_type) type_id;
    if (!ggml_type_is_supported(type)) {
        std::string names; // the supported ones, by ggml's names
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            if (ggml_type_is_supported((ggml_type) t)) names += std::string(names.empty() ? "" : ", ") + ggml_type_name((ggml_type) t);
        }
        r.fail("tensor type %" PRIu32 " is not supported (supported: %s)", type_id, names.c_str());
    }
    const int64_t blck = ggml_blck_size(type);
    if (ne[0] % blck != 0) {
        r.fail("ne[0] = %" PRId64 " is not a multiple of the block size %" PRId64 " of type %s", ne[0], blck,
               ggml_type_name(type));
    }
    // bytes = type_size * ne0/blck * ne1 * ne2 * ne3, each step overflow-checked
    uint64_t nbytes = ggml_type_size(type);
    for (int j = 0; j < GGML_MAX_DIMS; ++j) {
        const uint64_t f = (uint64_t) (j == 0 ? ne[0] / blck : ne[j]);
        if (nbytes > SIZE_MAX / f) r.fail("data size overflows (%" PRId64 " elements of type %s)", nelements, ggml_type_name(type));
        nbytes *= f;
    }

    const uint64_t off_at = r.pos();
    const uint64_t offset = r.read<uint64_t>("tensor data offset");
    if (offset % ctx.align != 0) {
        r.fail("data offset %" PRIu64 " (at offset %" PRIu64 ") is not a multiple of the alignment %zu", offset, off_at,
               ctx.align);
    }

    tensor_entry ti;
    std::memset((void *) &ti.desc, 0, sizeof(ti.desc));
    ti.desc.type = type;
    for (int j = 0; j < GGML_MAX_DIMS; ++j) ti.desc.ne[j] = ne[j];
    ti.desc.nb[0] = ggml_type_size(type);
    ti.desc.nb[1] = ti.desc.nb[0] * (size_t) (ne[0] / blck);
    for (int j = 2; j < GGML_MAX_DIMS; ++j) ti.desc.nb[j] = ti.desc.nb[j - 1] * (size_t) ne[j - 1];
    std::memcpy(ti.desc.name, name.c_str(), name.size() + 1);
    ti.rel_offset = offset;
    ctx.tensors.push_back(ti);
    info_offs.push_back(at);
}

// Tensor data must lie inside the file and tensors must not share bytes.
void check_tensor_data(gguf_reader & r, gguf_context & ctx, const std::vector<uint64_t> & info_offs) {
    const uint64_t file_size = r.size();
    std::vector<size_t> order(ctx.tensors.size());
    for (size_t i = 0; i < ctx.tensors.size(); ++i) {
        order[i] = i;
        const tensor_entry & ti = ctx.tensors[i];
        const uint64_t nbytes = ggml_nbytes(&ti.desc);
        r.set_item(format("tensor '%s'", printable(ti.desc.name).c_str()), info_offs[i]);
        if (ti.rel_offset > UINT64_MAX - ctx.data_start || ctx.data_start + ti.rel_offset > UINT64_MAX - nbytes) {
            r.fail("data offset %" PRIu64 " + size %" PRIu64 " overflows", ti.rel_offset, nbytes);
        }
        const uint64_t begin = ctx.data_start + ti.rel_offset, end = begin + nbytes;
        if (end > file_size) {
            r.fail("data [%" PRIu64 ", %" PRIu64 ") extends past end of file (%" PRIu64 " bytes)", begin, end, file_size);
        }
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return ctx.tensors[a].rel_offset < ctx.tensors[b].rel_offset; });
    for (size_t k = 1; k < order.size(); ++k) {
        const tensor_entry & prev = ctx.tensors[order[k - 1]];
        const tensor_entry & cur = ctx.tensors[order[k]];
        const uint64_t prev_end = prev.rel_offset + ggml_nbytes(&prev.desc);
        if (cur.rel_offset < prev_end) {
            r.set_item(format("tensor '%s'", printable(cur.desc.name).c_str()), info_offs[order[k]]);
            r.fail("data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' data [%" PRIu64 ", %" PRIu64 ")",
                   ctx.data_start + cur.rel_offset, ctx.data_start + cur.rel_offset + ggml_nbytes(&cur.desc),
                   printable(prev.desc.name).c_str(), ctx.data_start + prev.rel_offset, ctx.data_start + prev_end);
        }
    }
}

// Creates the ggml context holding the tensors (and their data unless no_alloc).
ggml_context * make_ggml_ctx(gguf_reader & r, const gguf_context & ctx, bool no_alloc) {
    size_t mem = 0;
    for (const tensor_entry & ti : ctx.tensors) {
        // struct + object header + arena alignment slack, then the data
        const size_t need = ggml_tensor_overhead() + 2 * GGML_MEM_ALIGN;
        const size_t data = no_alloc ? 0 : ggml_nbytes(&ti.desc);
        if (data > SIZE_MAX - need || mem > SIZE_MAX - need - data) r.fail("ggml context size overflows");
        mem += need + data;
    }
    r.set_item("ggml context", ctx.data_start);
    std::unique_ptr<ggml_context, ggml_ctx_deleter> gctx(ggml_init({mem, nullptr, no_alloc}));
    if (!gctx) r.fail("cannot allocate %zu bytes for the ggml context", mem);
    for (const tensor_entry & ti : ctx.tensors) {
        ggml_tensor * t = ggml_new_tensor(gctx.get(), ti.desc.type, GGML_MAX_DIMS, ti.desc.ne);
        ggml_set_name(t, ti.desc.name);
        if (!no_alloc) {
            r.set_item(format("tensor '%s' data", printable(ti.desc.name).c_str()), ctx.data_start + ti.rel_offset);
            r.seek(ctx.data_start + ti.rel_offset);
            r.read(t->data, ggml_nbytes(t), "tensor data");
        }
    }
    return gctx.release();
}

gguf_context * parse(gguf_reader & r, gguf_init_params params, std::string & err) {
    if (params.ctx) *params.ctx = nullptr;
    try {
        std::unique_ptr<gguf_context> ctx(new gguf_context());

        char magic[4];
        r.set_item("magic", 0);
        r.read(magic, 4, "magic");
        if (std::memcmp(magic, GGUF_MAGIC, 4) != 0) {
            r.fail("bad magic \"%s\" (expected \"GGUF\"): not a GGUF file", printable(std::string(magic, 4)).c_str());
        }
        r.set_item("version", 4);
        const uint32_t version = r.read<uint32_t>("version");
        if (version == 1) r.fail("GGUF v1 is not supported (only v2 and v3)");
        if (version > 0xffff && (version & 0xffff) == 0) r.fail("big-endian GGUF files are not supported");
        if (version != 2 && version != 3) r.fail("unsupported GGUF version %" PRIu32 " (only 2 and 3)", version);
        ctx->file_version = version;

        r.set_item("n_tensors", 8);
        const uint64_t n_tensors = r.read<uint64_t>("n_tensors");
        r.set_item("n_kv", 16);
        const uint64_t n_kv = r.read<uint64_t>("n_kv");
        const uint64_t left = r.remaining();
        if (n_tensors > left / MIN_TENSOR_BYTES) {
            r.set_item("n_tensors", 8);
            r.fail("n_tensors = %" PRIu64 " is too large: the %" PRIu64 " bytes after the header hold at most %" PRIu64
                   " tensor infos", n_tensors, left, left / MIN_TENSOR_BYTES);
        }
        if (n_kv > (left - n_tensors * MIN_TENSOR_BYTES) / MIN_KV_BYTES) {
            r.fail("n_kv = %" PRIu64 " is too large: the %" PRIu64 " bytes after the header (and %" PRIu64
                   " tensor infos) hold at most %" PRIu64 " key-value pairs", n_kv, left, n_tensors,
                   (left - n_tensors * MIN_TENSOR_BYTES) / MIN_KV_BYTES);
        }

        std::unordered_set<std::string> seen;
        ctx->pairs.reserve((size_t) std::min<uint64_t>(n_kv, RESERVE_CAP));
        for (uint64_t i = 0; i < n_kv; ++i) read_kv(r, *ctx, seen, i);

        seen.clear();
        std::vector<uint64_t> info_offs;
        ctx->tensors.reserve((size_t) std::min<uint64_t>(n_tensors, RESERVE_CAP));
        for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info(r, *ctx, seen, i, info_offs);

        // the data section starts at the padded end of the metadata, even with no tensors;
        // a file without tensors may end unpadded (llama.cpp's vocab-only files do), as ggml accepts
        const uint64_t meta_end = r.pos();
        ctx->data_start = (size_t) pad_to(meta_end, ctx->align);
        if (ctx->data_start > r.size() && n_tensors > 0) {
            r.set_item("data section", meta_end);
            r.fail("starts at offset %zu (end of metadata padded to the alignment %zu), past end of file (%" PRIu64
                   " bytes)",
                   ctx->data_start, ctx->align, r.size());
        }
        check_tensor_data(r, *ctx, info_offs);

        if (params.ctx) *params.ctx = make_ggml_ctx(r, *ctx, params.no_alloc);
        return ctx.release();
    } catch (const gguf_error & e) {
        err = e.msg;
    } catch (const std::bad_alloc &) {
        err = format("gguf: out of memory while parsing near offset %" PRIu64, r.pos());
    }
    return nullptr;
}

void report(const std::string & msg, char * err, size_t err_size) {
    if (err && err_size > 0) snprintf(err, err_size, "%s", msg.c_str());
    else if (!msg.empty()) GGML_LOG_ERROR("%s\n", msg.c_str());
}

} // namespace

// ---- loading -----------------------------------------------------------------------------------

gguf_context * gguf_init_empty(void) { return new gguf_context(); }

gguf_context * gguf_init_from_buffer(const void * data, size_t size, gguf_init_params params) {
    return gguf_init_from_buffer_ex(data, size, params, nullptr, 0);
}

gguf_context * gguf_init_from_buffer_ex(const void * data, size_t size, gguf_init_params params, char * err, size_t err_size) {
    std::string msg;
    gguf_context * ctx = nullptr;
    if (!data && size > 0) {
        msg = "gguf: NULL buffer";
        if (params.ctx) *params.ctx = nullptr;
    } else {
        gguf_reader r((const uint8_t *) data, size);
        ctx = parse(r, params, msg);
    }
    report(msg, err, err_size);
    return ctx;
}

gguf_context * gguf_init_from_file_ex(const char * fname, gguf_init_params params, char * err, size_t err_size) {
    if (params.ctx) *params.ctx = nullptr;
    FILE * f = fname ? std::fopen(fname, "rb") : nullptr;
    if (!f) {
        report(format("gguf: cannot open '%s': %s", fname ? fname : "(null)", std::strerror(errno)), err, err_size);
        return nullptr;
    }
    std::string msg;
    gguf_context * ctx = nullptr;
    const off_t size = fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : (off_t) -1;
    if (size < 0 || fseeko(f, 0, SEEK_SET) != 0) {
        msg = format("gguf: cannot determine the size of '%s'", fname);
    } else {
        gguf_reader r(f, (uint64_t) size);
        ctx = parse(r, params, msg);
    }
    std::fclose(f);
    report(msg, err, err_size);
    return ctx;
}

gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params) {
    char err[1024];
    gguf_context * ctx = gguf_init_from_file_ex(fname, params, err, sizeof(err));
    if (!ctx) GGML_LOG_ERROR("gguf_init_from_file: failed to load '%s': %s\n", fname ? fname : "(null)", err);
    return ctx;
}

void gguf_free(gguf_context * ctx) { delete ctx; }

const char * gguf_type_name(enum gguf_type type) {
    static const char * const names[] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    static_assert(sizeof(names) / sizeof(names[0]) == GGUF_TYPE_COUNT, "one name per gguf_type");
    return type >= 0 && type < GGUF_TYPE_COUNT ? names[type] : nullptr;
}

// ---- reading accessors ---------------------------------------------------------------------------

uint32_t gguf_get_version(const gguf_context * ctx) { return ctx->file_version; }
size_t gguf_get_alignment(const gguf_context * ctx) { return ctx->align; }
size_t gguf_get_data_offset(const gguf_context * ctx) { return ctx->data_start; }
int64_t gguf_get_n_kv(const gguf_context * ctx) { return (int64_t) ctx->pairs.size(); }

int64_t gguf_find_key(const gguf_context * ctx, const char * key) {
    for (size_t i = 0; i < ctx->pairs.size(); ++i) {
        if (ctx->pairs[i].key == key) return (int64_t) i;
    }
    return -1;
}

static const gguf_kv & get_kv(const gguf_context * ctx, int64_t key_id) {
    GGML_ASSERT(key_id >= 0 && key_id < gguf_get_n_kv(ctx));
    return ctx->pairs[key_id];
}

const char * gguf_get_key(const gguf_context * ctx, int64_t key_id) { return get_kv(ctx, key_id).key.c_str(); }

enum gguf_type gguf_get_kv_type(const gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    return kv.is_array ? GGUF_TYPE_ARRAY : kv.type;
}

enum gguf_type gguf_get_arr_type(const gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    GGML_ASSERT(kv.is_array && "key is not an array");
    return kv.type;
}

template <typename T> static T get_val(const gguf_context * ctx, int64_t key_id, gguf_type type) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != type || kv_n(kv) != 1) {
        GGML_ABORT("gguf: key '%s' has type %s%s, not %s", kv.key.c_str(), kv.is_array ? "array of " : "",
                   gguf_type_name(kv.type), gguf_type_name(type));
    }
    T v;
    std::memcpy(&v, kv.data.data(), sizeof(v));
    return v;
}

uint8_t gguf_get_val_u8(const gguf_context * ctx, int64_t id) { return get_val<uint8_t>(ctx, id, GGUF_TYPE_UINT8); }
int8_t gguf_get_val_i8(const gguf_context * ctx, int64_t id) { return get_val<int8_t>(ctx, id, GGUF_TYPE_INT8); }
uint16_t gguf_get_val_u16(const gguf_context * ctx, int64_t id) { return get_val<uint16_t>(ctx, id, GGUF_TYPE_UINT16); }
int16_t gguf_get_val_i16(const gguf_context * ctx, int64_t id) { return get_val<int16_t>(ctx, id, GGUF_TYPE_INT16); }
uint32_t gguf_get_val_u32(const gguf_context * ctx, int64_t id) { return get_val<uint32_t>(ctx, id, GGUF_TYPE_UINT32); }
int32_t gguf_get_val_i32(const gguf_context * ctx, int64_t id) { return get_val<int32_t>(ctx, id, GGUF_TYPE_INT32); }
float gguf_get_val_f32(const gguf_context * ctx, int64_t id) { return get_val<float>(ctx, id, GGUF_TYPE_FLOAT32); }
uint64_t gguf_get_val_u64(const gguf_context * ctx, int64_t id) { return get_val<uint64_t>(ctx, id, GGUF_TYPE_UINT64); }
int64_t gguf_get_val_i64(const gguf_context * ctx, int64_t id) { return get_val<int64_t>(ctx, id, GGUF_TYPE_INT64); }
double gguf_get_val_f64(const gguf_context * ctx, int64_t id) { return get_val<double>(ctx, id, GGUF_TYPE_FLOAT64); }
bool gguf_get_val_bool(const gguf_context * ctx, int64_t id) { return get_val<uint8_t>(ctx, id, GGUF_TYPE_BOOL) != 0; }

const char * gguf_get_val_str(const gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    if (kv.type != GGUF_TYPE_STRING || kv.strs.size() != 1) {
        GGML_ABORT("gguf: key '%s' has type %s%s, not str", kv.key.c_str(), kv.is_array ? "array of " : "",
                   gguf_type_name(kv.type));
    }
    return kv.strs[0].c_str();
}

const void * gguf_get_val_data(const gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    GGML_ASSERT(kv.type != GGUF_TYPE_STRING && kv_n(kv) == 1 && "gguf_get_val_data needs one fixed-size value");
    return kv.data.data();
}

size_t gguf_get_arr_n(const gguf_context * ctx, int64_t key_id) { return kv_n(get_kv(ctx, key_id)); }

const void * gguf_get_arr_data(const gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    GGML_ASSERT(kv.type != GGUF_TYPE_STRING && "use gguf_get_arr_str for string arrays");
    return kv.data.data();
}

const char * gguf_get_arr_str(const gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & kv = get_kv(ctx, key_id);
    GGML_ASSERT(kv.type == GGUF_TYPE_STRING && "not a string array");
    GGML_ASSERT(i < kv.strs.size());
    return kv.strs[i].c_str();
}

int64_t gguf_get_n_tensors(const gguf_context * ctx) { return (int64_t) ctx->tensors.size(); }

int64_t gguf_find_tensor(const gguf_context * ctx, const char * name) {
    for (size_t i = 0; i < ctx->tensors.size(); ++i) {
        if (std::strcmp(ctx->tensors[i].desc.name, name) == 0) return (int64_t) i;
    }
    return -1;
}

static const tensor_entry & get_info(const gguf_context * ctx, int64_t tensor_id) {
    GGML_ASSERT(tensor_id >= 0 && tensor_id < gguf_get_n_tensors(ctx));
    return ctx->tensors[tensor_id];
}

size_t gguf_get_tensor_offset(const gguf_context * ctx, int64_t id) { return get_info(ctx, id).rel_offset; }
const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t id) { return get_info(ctx, id).desc.name; }
enum ggml_type gguf_get_tensor_type(const gguf_context * ctx, int64_t id) { return get_info(ctx, id).desc.type; }
size_t gguf_get_tensor_size(const gguf_context * ctx, int64_t id) { return ggml_nbytes(&get_info(ctx, id).desc); }

// ---- editing -------------------------------------------------------------------------------------

// Tensor data stays one block: each tensor starts at the previous end padded to the alignment.
static void relayout(gguf_context * ctx) {
    uint64_t off = 0;
    for (tensor_entry & ti : ctx->tensors) {
        ti.rel_offset = off;
        off += pad_to(ggml_nbytes(&ti.desc), ctx->align);
    }
}

int64_t gguf_remove_key(gguf_context * ctx, const char * key) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id >= 0) {
        ctx->pairs.erase(ctx->pairs.begin() + id);
        if (std::strcmp(key, GGUF_KEY_GENERAL_ALIGNMENT) == 0) {
            ctx->align = GGUF_DEFAULT_ALIGNMENT;
            relayout(ctx);
        }
    }
    return id;
}

// kv is fully built (values copied) before the old pair goes: key or value may point into ctx.
static void put_kv(gguf_context * ctx, gguf_kv kv) {
    GGML_ASSERT(!kv.key.empty() && "gguf: empty key");
    const bool is_alignment = kv.key == GGUF_KEY_GENERAL_ALIGNMENT;
    uint32_t align = 0;
    if (is_alignment) {
        if (kv.is_array || kv.type != GGUF_TYPE_UINT32) GGML_ABORT("gguf: " GGUF_KEY_GENERAL_ALIGNMENT " must be u32");
        std::memcpy(&align, kv.data.data(), sizeof(align));
        if (!is_pow2(align)) GGML_ABORT("gguf: " GGUF_KEY_GENERAL_ALIGNMENT " must be a power of 2, got %u", align);
    }
    gguf_remove_key(ctx, kv.key.c_str());
    ctx->pairs.push_back(std::move(kv));
    if (is_alignment) {
        ctx->align = align;
        relayout(ctx);
    }
}

static gguf_kv make_kv(const char * key, gguf_type type, bool is_array) {
    GGML_ASSERT(key);
    gguf_kv kv;
    kv.key = key;
    kv.type = type;
    kv.is_array = is_array;
    return kv;
}

template <typename T> static void set_val(gguf_context * ctx, const char * key, gguf_type type, T val) {
    gguf_kv kv = make_kv(key, type, false);
    kv.data.resize(sizeof(T));
    std::memcpy(kv.data.data(), &val, sizeof(T));
    put_kv(ctx, std::move(kv));
}

void gguf_set_val_u8(gguf_context * ctx, const char * key, uint8_t val) { set_val(ctx, key, GGUF_TYPE_UINT8, val); }
void gguf_set_val_i8(gguf_context * ctx, const char * key, int8_t val) { set_val(ctx, key, GGUF_TYPE_INT8, val); }
void gguf_set_val_u16(gguf_context * ctx, const char * key, uint16_t val) { set_val(ctx, key, GGUF_TYPE_UINT16, val); }
void gguf_set_val_i16(gguf_context * ctx, const char * key, int16_t val) { set_val(ctx, key, GGUF_TYPE_INT16, val); }
void gguf_set_val_u32(gguf_context * ctx, const char * key, uint32_t val) { set_val(ctx, key, GGUF_TYPE_UINT32, val); }
void gguf_set_val_i32(gguf_context * ctx, const char * key, int32_t val) { set_val(ctx, key, GGUF_TYPE_INT32, val); }
void gguf_set_val_f32(gguf_context * ctx, const char * key, float val) { set_val(ctx, key, GGUF_TYPE_FLOAT32, val); }
void gguf_set_val_u64(gguf_context * ctx, const char * key, uint64_t val) { set_val(ctx, key, GGUF_TYPE_UINT64, val); }
void gguf_set_val_i64(gguf_context * ctx, const char * key, int64_t val) { set_val(ctx, key, GGUF_TYPE_INT64, val); }
void gguf_set_val_f64(gguf_context * ctx, const char * key, double val) { set_val(ctx, key, GGUF_TYPE_FLOAT64, val); }
void gguf_set_val_bool(gguf_context * ctx, const char * key, bool val) {
    set_val(ctx, key, GGUF_TYPE_BOOL, (uint8_t) (val ? 1 : 0));
}

void gguf_set_val_str(gguf_context * ctx, const char * key, const char * val) {
    GGML_ASSERT(val);
    gguf_kv kv = make_kv(key, GGUF_TYPE_STRING, false);
    kv.strs.emplace_back(val);
    put_kv(ctx, std::move(kv));
}

void gguf_set_arr_data(gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n) {
    const size_t es = type_size(type);
    if (es == 0) GGML_ABORT("gguf_set_arr_data: type %d is not a fixed-size type (use gguf_set_arr_str for strings)", (int) type);
    GGML_ASSERT(n <= SIZE_MAX / es && (data || n == 0));
    gguf_kv kv = make_kv(key, type, true);
    kv.data.resize(n * es);
    if (n > 0) std::memcpy(kv.data.data(), data, n * es);
    if (type == GGUF_TYPE_BOOL) {
        for (uint8_t & b : kv.data) b = b != 0; // the file stores bools as 0 or 1
    }
    put_kv(ctx, std::move(kv));
}

void gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n) {
    GGML_ASSERT(data || n == 0);
    gguf_kv kv = make_kv(key, GGUF_TYPE_STRING, true);
    kv.strs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        GGML_ASSERT(data[i]);
        kv.strs.emplace_back(data[i]);
    }
    put_kv(ctx, std::move(kv));
}

void gguf_set_kv(gguf_context * ctx, const gguf_context * src) {
    const std::vector<gguf_kv> copy = src->pairs; // src may be ctx
    for (const gguf_kv & kv : copy) put_kv(ctx, kv);
}

void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor) {
    GGML_ASSERT(tensor);
    if (gguf_find_tensor(ctx, tensor->name) >= 0) GGML_ABORT("gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    if (tensor->name[0] == '\0') GGML_ABORT("gguf_add_tensor: tensor has no name");
    GGML_ASSERT(ggml_type_is_supported(tensor->type));
    if (kvg::is_r16(tensor->type)) {
        GGML_ABORT("gguf_add_tensor: '%s' is %s, an in-memory layout (ggml_kvg_unrepack it)", tensor->name, ggml_type_name(tensor->type));
    }
    GGML_ASSERT(ggml_is_contiguous(tensor) && "gguf_add_tensor: tensor must be contiguous");
    tensor_entry ti;
    std::memset((void *) &ti.desc, 0, sizeof(ti.desc));
    ti.desc.type = tensor->type;
    for (int j = 0; j < GGML_MAX_DIMS; ++j) {
        ti.desc.ne[j] = tensor->ne[j];
        ti.desc.nb[j] = tensor->nb[j];
    }
    std::memcpy(ti.desc.name, tensor->name, sizeof(ti.desc.name));
    ti.desc.data = tensor->data;
    if (!ctx->tensors.empty()) {
        const tensor_entry & last = ctx->tensors.back();
        ti.rel_offset = last.rel_offset + pad_to(ggml_nbytes(&last.desc), ctx->align);
    }
    ctx->tensors.push_back(ti);
}

static tensor_entry & find_info(gguf_context * ctx, const char * name) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf: tensor '%s' not found", name);
    return ctx->tensors[id];
}

void gguf_set_tensor_type(gguf_context * ctx, const char * name, enum ggml_type type) {
    tensor_entry & ti = find_info(ctx, name);
    GGML_ASSERT(ggml_type_is_supported(type));
    const int64_t blck = ggml_blck_size(type);
    GGML_ASSERT(ti.desc.ne[0] % blck == 0 && "ne[0] must be a multiple of the new type's block size");
    ti.desc.type = type;
    ti.desc.nb[0] = ggml_type_size(type);
    ti.desc.nb[1] = ti.desc.nb[0] * (size_t) (ti.desc.ne[0] / blck);
    for (int j = 2; j < GGML_MAX_DIMS; ++j) ti.desc.nb[j] = ti.desc.nb[j - 1] * (size_t) ti.desc.ne[j - 1];
    relayout(ctx);
}

void gguf_set_tensor_data(gguf_context * ctx, const char * name, const void * data) {
    find_info(ctx, name).desc.data = const_cast<void *>(data);
}

// ---- writing -------------------------------------------------------------------------------------

namespace {

struct meta_writer {
    std::vector<uint8_t> buf;
    void raw(const void * p, size_t n) {
        const uint8_t * b = (const uint8_t *) p;
        buf.insert(buf.end(), b, b + n);
    }
    template <typename T> void put(T v) { raw(&v, sizeof(v)); }
    void str(const std::string & s) {
        put<uint64_t>(s.size());
        raw(s.data(), s.size());
    }
};

std::vector<uint8_t> build_meta(const gguf_context * ctx) {
    meta_writer w;
    w.raw(GGUF_MAGIC, 4);
    w.put<uint32_t>(GGUF_VERSION);
    w.put<uint64_t>(ctx->tensors.size());
    w.put<uint64_t>(ctx->pairs.size());
    for (const gguf_kv & kv : ctx->pairs) {
        w.str(kv.key);
        if (kv.is_array) {
            w.put<uint32_t>(GGUF_TYPE_ARRAY);
            w.put<uint32_t>(kv.type);
            w.put<uint64_t>(kv_n(kv));
        } else {
            w.put<uint32_t>(kv.type);
        }
        if (kv.type == GGUF_TYPE_STRING) {
            for (const std::string & s : kv.strs) w.str(s);
        } else {
            w.raw(kv.data.data(), kv.data.size());
        }
    }
    for (const tensor_entry & ti : ctx->tensors) {
        w.str(ti.desc.name);
        const int n_dims = ggml_n_dims(&ti.desc);
        w.put<uint32_t>((uint32_t) n_dims);
        for (int j = 0; j < n_dims; ++j) w.put<int64_t>(ti.desc.ne[j]);
        w.put<uint32_t>((uint32_t) ti.desc.type);
        w.put<uint64_t>(ti.rel_offset);
    }
    w.buf.resize(pad_to(w.buf.size(), ctx->align), 0);
    return std::move(w.buf);
}

} // namespace

size_t gguf_get_meta_size(const gguf_context * ctx) { return build_meta(ctx).size(); }

void gguf_get_meta_data(const gguf_context * ctx, void * data) {
    const std::vector<uint8_t> meta = build_meta(ctx);
    std::memcpy(data, meta.data(), meta.size());
}

bool gguf_write_to_file(const gguf_context * ctx, const char * fname, bool only_meta) {
    if (!only_meta) {
        for (const tensor_entry & ti : ctx->tensors) {
            if (!ti.desc.data) {
                GGML_LOG_ERROR("gguf_write_to_file: tensor '%s' has no data (use gguf_set_tensor_data)\n",
                               ti.desc.name);
                return false;
            }
        }
    }
    FILE * f = std::fopen(fname, "wb");
    if (!f) {
        GGML_LOG_ERROR("gguf_write_to_file: cannot open '%s' for writing: %s\n", fname, std::strerror(errno));
        return false;
    }
    const std::vector<uint8_t> meta = build_meta(ctx);
    bool ok = std::fwrite(meta.data(), 1, meta.size(), f) == meta.size();
    if (!only_meta) {
        const std::vector<uint8_t> zeros(ctx->align, 0);
        for (size_t i = 0; ok && i < ctx->tensors.size(); ++i) {
            const tensor_entry & ti = ctx->tensors[i];
            const size_t n = ggml_nbytes(&ti.desc);
            const size_t pad = pad_to(n, ctx->align) - n;
            ok = std::fwrite(ti.desc.data, 1, n, f) == n && std::fwrite(zeros.data(), 1, pad, f) == pad;
        }
    }
    ok = std::fclose(f) == 0 && ok;
    if (!ok) GGML_LOG_ERROR("gguf_write_to_file: error writing '%s': %s\n", fname, std::strerror(errno));
    return ok;
}
