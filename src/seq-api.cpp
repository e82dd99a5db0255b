// The C API's sequence editing: kvg_seq_* (remove, keep, positions) and kvg_state_seq_*
// (a sequence's cache state as bytes or as a file, restorable exactly).
#include "api-impl.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using kvg::begin_call;
using kvg::set_err;
using kvg::set_exception_err;

// ---- editing sequences ---------------------------------------------------------------------------

static bool known_seq(const kvg_context * ctx, int32_t seq, const char * fn, char * err, size_t err_size) {
    if (ctx && seq >= 0 && seq < ctx->kv.n_seq()) return true;
    set_err(err, err_size,
            std::string(fn) + ": " +
                (ctx ? "sequence " + std::to_string(seq) + " is not in 0.." + std::to_string(ctx->kv.n_seq() - 1)
                     : std::string("no context")));
    return false;
}

bool kvg_seq_rm(kvg_context * ctx, int32_t seq, int32_t p0, int32_t p1, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_seq_rm", err, err_size)) return false;
    const int64_t from = p0 < 0 ? 0 : p0, to = p1 < 0 ? INT64_MAX : p1;
    if (from > to) {
        set_err(err, err_size, "kvg_seq_rm: p0 = " + std::to_string(p0) + " is past p1 = " + std::to_string(p1));
        return false;
    }
    std::string e;
    if (!ctx->kv.remove(seq, from, to, &e)) {
        set_err(err, err_size, "kvg_seq_rm: " + e);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_seq_rm");
    return false;
}

bool kvg_seq_cp(kvg_context * ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, src, "kvg_seq_cp", err, err_size) || !known_seq(ctx, dst, "kvg_seq_cp", err, err_size)) return false;
    if (p0 > 0 && p1 >= 0 && p0 > p1) {
        set_err(err, err_size, "kvg_seq_cp: p0 = " + std::to_string(p0) + " is past p1 = " + std::to_string(p1));
        return false;
    }
    std::string e;
    const int64_t to = p1 < 0 ? INT64_MAX : p1;
    if (p0 > 0 ? !ctx->kv.copy_range(src, dst, p0, to, &e) : !ctx->kv.copy_seq(src, dst, to, &e)) {
        set_err(err, err_size, "kvg_seq_cp: " + e);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_seq_cp");
    return false;
}

bool kvg_seq_add(kvg_context * ctx, int32_t seq, int32_t p0, int32_t p1, int32_t delta, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_seq_add", err, err_size)) return false;
    const int64_t from = p0 < 0 ? 0 : p0, to = p1 < 0 ? INT64_MAX : p1;
    std::string e;
    if (from > to) e = "p0 = " + std::to_string(p0) + " is past p1 = " + std::to_string(p1);
    if (!e.empty() ||
        !ctx->kv.shift(seq, from, to, delta, ctx->model->hp, ctx->model->rope_factors(ctx->kv.n_ctx()), &e)) {
        set_err(err, err_size, "kvg_seq_add: " + e);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_seq_add");
    return false;
}

bool kvg_seq_keep(kvg_context * ctx, int32_t seq, char * err, size_t err_size) {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_seq_keep", err, err_size)) return false;
    ctx->kv.keep_only(seq);
    return true;
}

int32_t kvg_seq_pos_min(const kvg_context * ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->kv.n_seq()) return -1;
    return (int32_t) ctx->kv.pos_min(seq);
}
int32_t kvg_seq_pos_max(const kvg_context * ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->kv.n_seq()) return -1;
    return (int32_t) ctx->kv.pos_max(seq);
}

// ---- state -----------------------------------------------------------------------------------------

// Identifies the model a state belongs to: its shape and a sample of its weights' bytes.
static uint64_t model_id(const kvg::Model & m) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void * p, size_t n) {
        for (size_t i = 0; i < n; ++i) h = (h ^ ((const uint8_t *) p)[i]) * 1099511628211ull;
    };
    const kvg::HParams & hp = m.hp;
    const int32_t shape[] = {hp.n_vocab, hp.n_embd, hp.n_ff, hp.n_layer, hp.n_head, hp.n_head_kv, hp.n_rot};
    mix(shape, sizeof shape);
    for (const ggml_tensor * t : {m.tok_embd, m.output_norm}) {
        if (t && t->data) mix(t->data, std::min<size_t>(ggml_nbytes(t), 4096));
    }
    return h;
}

size_t kvg_state_seq_size(const kvg_context * ctx, int32_t seq) try {
    if (!ctx || seq < 0 || seq >= ctx->kv.n_seq()) return 0;
    return ctx->kv.state_size(seq);
} catch (...) {
    return 0;
}

size_t kvg_state_seq_get(const kvg_context * ctx, int32_t seq, uint8_t * dst, size_t size, char * err,
                         size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_state_seq_get", err, err_size)) return 0;
    std::vector<uint8_t> blob;
    ctx->kv.state_write(seq, model_id(*ctx->model), &blob);
    if (!dst || size < blob.size()) {
        set_err(err, err_size, "kvg_state_seq_get: the state needs " + std::to_string(blob.size()) + " bytes, the buffer has " +
                                   std::to_string(dst ? size : 0));
        return 0;
    }
    std::memcpy(dst, blob.data(), blob.size());
    return blob.size();
} catch (...) {
    set_exception_err(err, err_size, "kvg_state_seq_get");
    return 0;
}

bool kvg_state_seq_set(kvg_context * ctx, int32_t seq, const uint8_t * src, size_t size, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_state_seq_set", err, err_size)) return false;
    std::string e;
    if (!ctx->kv.state_read(seq, model_id(*ctx->model), src, size, &e)) {
        set_err(err, err_size, "kvg_state_seq_set: " + e);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_state_seq_set");
    return false;
}

// ---- state files: "KVGF", u32 version, i32 n_tokens, the tokens, u64 state size, the state ----

static const char FILE_MAGIC[4] = {'K', 'V', 'G', 'F'};
static const uint32_t FILE_VERSION = 1;

bool kvg_state_seq_save_file(const kvg_context * ctx, int32_t seq, const char * path, const kvg_token * tokens,
                             int32_t n_tokens, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_state_seq_save_file", err, err_size)) return false;
    if (!path || !*path || n_tokens < 0 || (n_tokens > 0 && !tokens)) {
        set_err(err, err_size, "kvg_state_seq_save_file: no path, or n_tokens < 0, or no tokens");
        return false;
    }
    std::vector<uint8_t> blob;
    ctx->kv.state_write(seq, model_id(*ctx->model), &blob);
    const uint64_t blob_size = blob.size();
    // a temporary file beside path, renamed over it: a failed save leaves the old file
    const std::string tmp = std::string(path) + ".tmp" + std::to_string(getpid());
    FILE * f = std::fopen(tmp.c_str(), "wb");
    bool ok = f != nullptr;
    ok = ok && std::fwrite(FILE_MAGIC, 4, 1, f) == 1 && std::fwrite(&FILE_VERSION, 4, 1, f) == 1 &&
         std::fwrite(&n_tokens, 4, 1, f) == 1 && (n_tokens == 0 || std::fwrite(tokens, 4, n_tokens, f) == (size_t) n_tokens) &&
         std::fwrite(&blob_size, 8, 1, f) == 1 && std::fwrite(blob.data(), 1, blob.size(), f) == blob.size();
    if (f) ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        kvg::note_status(KVG_STATUS_IO);
        set_err(err, err_size, "kvg_state_seq_save_file: cannot write '" + std::string(path) + "': " + why);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_state_seq_save_file");
    return false;
}

namespace {

// Reads n bytes at offset off; false with errno set on an error or a short read.
bool read_at(int fd, void * dst, size_t n, uint64_t off) {
    for (size_t done = 0; done < n;) {
        const ssize_t r = pread(fd, (char *) dst + done, n - done, (off_t) (off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return false;
        }
        done += (size_t) r;
    }
    return true;
}

struct StateFile {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;
};

// Opens path, checks its header, the state's header and the sizes they declare against the
// file's size and this context, then reads only what they say: a large file that is not a
// state costs at most 108 bytes (12 + 8 + the state's 88).
bool read_state_file(const kvg_context * ctx, const char * path, int32_t n_max, bool has_out, StateFile * out,
                     std::string * msg, kvg_status * kind) {
    const std::string name = std::string("'") + path + "'";
    auto fail = [&](kvg_status k, const std::string & m) { return *kind = k, *msg = m, false; };
    auto io = [&](const char * what) {
        const std::string why = std::strerror(errno); // before anything else can change errno
        return fail(KVG_STATUS_IO, "cannot " + std::string(what) + " " + name + ": " + why);
    };
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io("open");
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    struct stat st;
    if (fstat(fd, &st) != 0) return io("inspect");
    if (S_ISDIR(st.st_mode)) return fail(KVG_STATUS_IO, name + " is a directory, not a state file");
    if (!S_ISREG(st.st_mode)) return fail(KVG_STATUS_IO, name + " is not a regular file");
    const uint64_t size = (uint64_t) st.st_size;
    const std::string not_state = name + " is not a kvgraph state file or is truncated";
    uint8_t head[12];
    if (size < sizeof head + 8) return fail(KVG_STATUS_BAD_FILE, not_state);
    if (!read_at(fd, head, sizeof head, 0)) return io("read");
    uint32_t version;
    int32_t n_tokens;
    std::memcpy(&version, head + 4, 4), std::memcpy(&n_tokens, head + 8, 4);
    const uint64_t tokens_end = 12 + 4 * (uint64_t) std::max(n_tokens, 0);
    if (std::memcmp(head, FILE_MAGIC, 4) != 0 || version != FILE_VERSION || n_tokens < 0 || size < tokens_end + 8) {
        return fail(KVG_STATUS_BAD_FILE, not_state);
    }
    uint64_t blob_size;
    if (!read_at(fd, &blob_size, 8, tokens_end)) return io("read");
    if (blob_size != size - tokens_end - 8) return fail(KVG_STATUS_BAD_FILE, not_state);
    if (n_tokens > n_max || (n_tokens > 0 && !has_out)) {
        return fail(KVG_STATUS_BAD_INPUT, "the file holds " + std::to_string(n_tokens) +
                                              " tokens, more than n_max = " + std::to_string(n_max));
    }
    // the state's own header next: model, type, mode, fit and its exact size, before the rest
    std::vector<uint8_t> state_head((size_t) std::min<uint64_t>(blob_size, kvg::KvCache::state_header_bytes()));
    if (!read_at(fd, state_head.data(), state_head.size(), tokens_end + 8)) return io("read");
    std::string e;
    if (!ctx->kv.state_header_fits(state_head.data(), state_head.size(), blob_size, model_id(*ctx->model), &e)) {
        return fail(KVG_STATUS_BAD_INPUT, name + ": " + e);
    }
    out->tokens.resize((size_t) n_tokens);
    out->state.resize((size_t) blob_size);
    if (!read_at(fd, out->tokens.data(), out->tokens.size() * 4, 12) ||
        !read_at(fd, out->state.data(), out->state.size(), tokens_end + 8)) {
        return io("read");
    }
    return true;
}

} // namespace

int32_t kvg_state_seq_load_file(kvg_context * ctx, int32_t seq, const char * path, kvg_token * tokens_out, int32_t n_max,
                                char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!known_seq(ctx, seq, "kvg_state_seq_load_file", err, err_size)) return -1;
    if (!path) {
        set_err(err, err_size, "kvg_state_seq_load_file: no path");
        return -1;
    }
    StateFile f;
    std::string e;
    kvg_status kind = KVG_STATUS_BAD_INPUT;
    if (!read_state_file(ctx, path, n_max, tokens_out != nullptr, &f, &e, &kind)) {
        kvg::note_status(kind);
        set_err(err, err_size, "kvg_state_seq_load_file: " + e, kind);
        return -1;
    }
    if (!ctx->kv.state_read(seq, model_id(*ctx->model), f.state.data(), f.state.size(), &e)) {
        set_err(err, err_size, std::string("kvg_state_seq_load_file: '") + path + "': " + e);
        return -1;
    }
    if (!f.tokens.empty()) std::memcpy(tokens_out, f.tokens.data(), f.tokens.size() * 4);
    return (int32_t) f.tokens.size();
} catch (...) {
    set_exception_err(err, err_size, "kvg_state_seq_load_file");
    return -1;
}
