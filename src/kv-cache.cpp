// KV cache buffers and sequence bookkeeping (see kv-cache.h).
#include "kv-cache.h"

#include "errors.h"
#include "status.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace kvg {

// MemAvailable + SwapFree from /proc/meminfo, in bytes; 0 if unknown.
static size_t available_memory() {
    FILE * f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long total_kb = 0, kb = 0;
    while (std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1 || std::sscanf(line, "SwapFree: %llu kB", &kb) == 1) total_kb += kb;
    }
    std::fclose(f);
    return (size_t) total_kb * 1024;
}

KvCache::~KvCache() {
    if (ctx_) ggml_free(ctx_);
}

bool KvCache::init(const HParams & hp, int length, ggml_type cache_type, std::string * err) {
    KvCacheParams p;
    p.n_ctx = length;
    p.type = cache_type;
    return init(hp, p, err);
}

// The parameters' checks, and the byte limit (before the reservation: a limit must hold
// even for address space).
static bool check_params(const HParams & hp, const KvCacheParams & p, std::string * err) {
    if (p.type != GGML_TYPE_F32 && p.type != GGML_TYPE_F16 && p.type != GGML_TYPE_Q8_0) {
        return fail(err, std::string("unsupported KV cache type ") + ggml_type_name(p.type) + " (f32, f16 or q8_0)");
    }
    if (p.type == GGML_TYPE_Q8_0 && hp.n_embd_kv() % QK8_0 != 0) {
        return fail(err, "a q8_0 KV cache needs rows that are a multiple of 32 elements, the model's are " +
                         std::to_string(hp.n_embd_kv()));
    }
    if (p.n_ctx <= 0) return fail(err, "KV cache length must be positive");
    if (p.n_seq <= 0) return fail(err, "the number of sequences must be positive");
    if (p.mode == KvMode::Ring) {
        if (p.n_sink < 0 || p.n_sink >= p.n_ctx) {
            return fail(err, "n_sink = " + std::to_string(p.n_sink) + " must be in 0.." + std::to_string(p.n_ctx - 1));
        }
        if (p.n_window < 0 || p.n_window > p.n_ctx - p.n_sink) {
            return fail(err, "n_window = " + std::to_string(p.n_window) + " must be in 1.." + std::to_string(p.n_ctx - p.n_sink) +
                             " (n_ctx - n_sink), or 0 for all of it");
        }
    }
    const size_t need = KvCache::bytes_for(hp, p);
    if (p.max_bytes > 0 && need > p.max_bytes) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        return fail(err, "the KV cache needs " + std::to_string(need) + " bytes (n_ctx " + std::to_string(p.n_ctx) + " x " +
                         std::to_string(p.n_seq) + (p.n_seq == 1 ? " sequence, " : " sequences, ") + ggml_type_name(p.type) +
                         "), more than the limit of " + std::to_string(p.max_bytes) + " bytes");
    }
    return true;
}

// Reserves mem_size_ bytes as one anonymous mapping (committed when commit_).
bool KvCache::reserve(std::string * err) {
    if (commit_) {
        // a static cache is filled now: refuse one the machine cannot hold instead of
        // filling until the kernel kills the process
        const size_t avail = available_memory();
        if (avail > 0 && mem_size_ > avail) {
            const std::string msg = "cannot commit " + std::to_string(mem_size_) +
                                    " bytes for a static KV cache: the machine has " + std::to_string(avail) +
                                    " bytes of memory available";
            mem_size_ = 0;
            kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
            return fail(err, msg);
        }
    }
    std::string e;
    if (!pages_.init(mem_size_, &e)) {
        mem_size_ = 0;
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        return fail(err, e);
    }
    mem_ = pages_.base();
    return true;
}

// The tensors of every layer over the reservation (layer il's K at il * (k_stride +
// v_stride), its V k_stride later) and, for grouped K, the f32 copies of its groups.
bool KvCache::make_tensors(int n_layer, size_t k_stride, size_t v_stride, std::string * err) {
    ggml_init_params ip = {3 * (size_t) n_layer * ggml_tensor_overhead() + 1024, nullptr, true};
    ctx_ = ggml_init(ip);
    if (!ctx_) {
        kvg::note_status(KVG_STATUS_OUT_OF_MEMORY);
        return fail(err, "cannot allocate the KV cache's tensor context");
    }
    const bool group_k = type_ == GGML_TYPE_Q8_0;
    for (int il = 0; il < n_layer; ++il) {
        char * base = (char *) mem_ + (size_t) il * (k_stride + v_stride);
        const int64_t n_k_rows =
            group_k ? (int64_t) n_embd_kv_ * KvKeyGroups::n_groups(n_ctx_) * n_seq_ : (int64_t) n_seq_ * n_ctx_;
        ggml_tensor * tk = ggml_new_tensor_2d(ctx_, type_, group_k ? GGML_KV_GROUP : n_embd_kv_, n_k_rows);
        ggml_tensor * tv = ggml_new_tensor_2d(ctx_, type_, n_embd_kv_, (int64_t) n_seq_ * n_ctx_);
        ggml_format_name(tk, "cache_k_l%d", il);
        ggml_format_name(tv, "cache_v_l%d", il);
        tk->data = base;
        tv->data = base + k_stride;
        k_.push_back(tk);
        v_.push_back(tv);
    }
    groups_.init(ctx_, group_k ? k_ : std::vector<ggml_tensor *>(),
                 KvKeyGroups::Shape{n_seq_, n_ctx_, n_sink_, n_embd_kv_});
    return true;
}

bool KvCache::init(const HParams & hp, const KvCacheParams & p, std::string * err) {
    if (ctx_) return fail(err, "KV cache already initialized");
    if (!check_params(hp, p, err)) return false;
    type_ = p.type;
    mode_ = p.mode;
    n_ctx_ = p.n_ctx;
    n_seq_ = p.n_seq;
    n_sink_ = mode_ == KvMode::Ring ? p.n_sink : 0;
    n_window_ = mode_ == KvMode::Ring ? (p.n_window > 0 ? p.n_window : n_ctx_ - n_sink_) : n_ctx_;
    commit_ = p.commit;
    head_dim_ = hp.head_dim();
    n_head_kv_ = hp.n_head_kv;
    n_embd_kv_ = hp.n_embd_kv();
    const bool group_k = type_ == GGML_TYPE_Q8_0;

    // one reservation, each K/V tensor at a page boundary so that residency is per tensor prefix
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    const size_t k_bytes =
        group_k ? ggml_row_size(type_, GGML_KV_GROUP) * n_embd_kv_ * KvKeyGroups::n_groups(n_ctx_) * (size_t) n_seq_
                : ggml_row_size(type_, n_embd_kv_) * (size_t) n_seq_ * n_ctx_;
    const size_t v_bytes = ggml_row_size(type_, n_embd_kv_) * (size_t) n_seq_ * n_ctx_;
    const size_t k_stride = (k_bytes + page - 1) / page * page, v_stride = (v_bytes + page - 1) / page * page;
    mem_size_ = (size_t) hp.n_layer * (k_stride + v_stride);
    if (!reserve(err) || !make_tensors(hp.n_layer, k_stride, v_stride, err)) return false;
    clear();
    return true;
}

void KvCache::clear() {
    // fresh zero pages on the next touch: memory is given back, never read as garbage
    pages_.release_all();
    // a static cache stays committed: zeros, as masked slots may still enter attention sums with weight 0
    if (commit_) std::memset(mem_, 0, mem_size_);
    groups_.clear();
    seqs_.assign(n_seq_, Seq());
}

size_t KvCache::bytes() const {
    size_t n = 0;
    for (const ggml_tensor * t : k_) n += ggml_nbytes(t);
    for (const ggml_tensor * t : v_) n += ggml_nbytes(t);
    return n + groups_.bytes();
}

size_t KvCache::bytes_for(const HParams & hp, const KvCacheParams & p) {
    // mirrors init(): the shapes of k, v and the grouped K copies, without creating them
    const size_t n_layer = (size_t) hp.n_layer, n_seq = (size_t) p.n_seq, n_ctx = (size_t) p.n_ctx;
    const size_t v_bytes = ggml_row_size(p.type, hp.n_embd_kv()) * n_seq * n_ctx;
    if (p.type != GGML_TYPE_Q8_0) return n_layer * 2 * v_bytes;
    const size_t k_bytes =
        ggml_row_size(p.type, GGML_KV_GROUP) * hp.n_embd_kv() * (size_t) KvKeyGroups::n_groups(p.n_ctx) * n_seq;
    const int n_sink = p.mode == KvMode::Ring ? std::max(p.n_sink, 0) : 0;
    return n_layer * (k_bytes + v_bytes) +
           KvKeyGroups::bytes_for(n_layer, KvKeyGroups::Shape{p.n_seq, p.n_ctx, n_sink, hp.n_embd_kv()});
}
ggml_tensor * KvCache::view(ggml_context * gctx, ggml_tensor * t, int n_kv, bool packed) const {
    // dim 1 steps over slots (rows), dim 3 over sequences; dim 2 over the heads inside a row
    const size_t seq_stride = (size_t) n_ctx_ * t->nb[1];
    if (packed) return ggml_view_4d(gctx, t, t->ne[0], n_kv, 1, n_seq_, t->nb[1], n_kv * t->nb[1], seq_stride, 0);
    return ggml_view_4d(gctx, t, head_dim_, n_kv, n_head_kv_, n_seq_, t->nb[1], ggml_row_size(type_, head_dim_),
                        seq_stride, 0);
}

ggml_tensor * KvCache::write_k(ggml_context * gctx, int il, ggml_tensor * cur, ggml_tensor * idx, ggml_tensor * group_rows) const {
    if (!grouped()) return ggml_set_rows(gctx, k_[il], cur, idx);
    return groups_.write(gctx, il, cur, idx, group_rows);
}

ggml_tensor * KvCache::write_v(ggml_context * gctx, int il, ggml_tensor * cur, ggml_tensor * idx) const {
    return ggml_set_rows(gctx, v_[il], cur, idx);
}

// ---- sequences ----------------------------------------------------------------------------------

bool KvCache::check_start(int seq, int64_t pos, std::string * err) const {
    const Seq & s = seqs_[seq];
    if (pos < 0 || pos > s.n_past) {
        if (err) {
            *err = "position " + std::to_string(pos) + " is invalid: sequence " + std::to_string(seq) +
                   " holds positions 0.." + std::to_string(s.n_past - 1) + ", so the next one must be at most " +
                   std::to_string(s.n_past);
        }
        return false;
    }
    if (mode_ == KvMode::Ring) {
        for (int64_t q = std::max<int64_t>(n_sink_, pos - n_window_ + 1); q < pos; ++q) {
            if (s.held(slot(q)) != q) {
                kvg::note_status(KVG_STATUS_CONTEXT_FULL);
                if (err) {
                    *err = "position " + std::to_string(pos) + " cannot be decoded again: the ring cache of sequence " +
                           std::to_string(seq) + " no longer holds position " + std::to_string(q) + " of its window";
                }
                return false;
            }
        }
    }
    return true;
}

int64_t KvCache::chunk_last(int64_t pos) const {
    // the slot of position p held p - ring; the chunk's first token still attends it while
    // p - ring > pos - n_window. Before the ring wraps (p < n_ctx) no slot is reused.
    const int64_t ring = n_ctx_ - n_sink_;
    const int64_t last = mode_ == KvMode::Linear ? n_ctx_ - 1 : std::max<int64_t>(n_ctx_ - 1, pos - n_window_ + ring);
    if (!grouped()) return last;
    // slots advance one per position up to n_ctx - 1, so the group ends this many positions on
    return std::min(last, pos + groups_.slots_after(slot(pos)));
}

void KvCache::rewind(int seq, int64_t pos) {
    Seq & s = seqs_[seq];
    if (pos >= s.n_past) return;
    for (int64_t & q : s.slot_pos) {
        if (q >= pos) q = -1;
    }
    s.n_past = pos;
}

// The start of a q8_0 refusal: a cut at pos inside a group whose keys exist only rounded.
static std::string rounded_cut(int64_t pos, const char * what) {
    const std::string group = " lies inside a group of 32 slots of the q8_0 cache whose keys are kept only rounded: ";
    return "position " + std::to_string(pos) + group + what +
           " a multiple of 32 or a position inside one of the two groups written last, whose keys are kept exactly (";
}

bool KvCache::remove(int seq, int64_t p0, int64_t p1, std::string * err) {
    Seq & s = seqs_[seq];
    if (p0 >= s.n_past || p0 >= p1) return true; // nothing held there
    auto refuse = [&](const std::string & msg) {
        kvg::note_status(KVG_STATUS_UNSUPPORTED);
        if (err) *err = msg;
        return false;
    };
    if (p1 < s.n_past) { // a middle range: never attended again
        // a ring's next token must find its whole window (check_start): keep that window whole
        const int64_t lo = std::max({p0, (int64_t) n_sink_, s.n_past - n_window_ + 1}), hi = p1;
        if (mode_ == KvMode::Ring && lo < hi) {
            return refuse("positions " + std::to_string(lo) + ".." + std::to_string(hi - 1) +
                          " lie in the window that the next token of sequence " + std::to_string(seq) + " (position " +
                          std::to_string(s.n_past) + ") attends: a ring cache removes from its window a suffix only");
        }
        for (int64_t & q : s.slot_pos) {
            if (q >= p0 && q < p1) q = -1;
        }
        return true;
    }
    if (!groups_.exact_cut(seq, slot(p0)))
        return refuse(rounded_cut(p0, "remove from") + groups_.exact_groups(seq) + ")");
    if (!check_start(seq, p0, err)) return false; // a ring must still hold the window before p0
    rewind(seq, p0);
    if (p0 == 0) s.n_used = 0; // empty: attention starts from nothing again
    return true;
}

void KvCache::keep_only(int seq) {
    for (int s = 0; s < n_seq_; ++s) {
        if (s == seq) continue;
        rewind(s, 0);
        seqs_[s].n_used = 0;
    }
}

// ---- shared pages ---------------------------------------------------------------------------------

size_t KvCache::slot_offset(const ggml_tensor * t, int seq, int64_t a) const {
    const size_t base = (size_t) ((const char *) t->data - (const char *) mem_);
    if (grouped() && is_k(t)) { // K by channel: whole groups
        return base +
               (size_t) (((int64_t) seq * KvKeyGroups::n_groups(n_ctx_) + a / GGML_KV_GROUP) * n_embd_kv_) * t->nb[1];
    }
    return base + (size_t) ((int64_t) seq * n_ctx_ + a) * t->nb[1];
}

size_t KvCache::slot_bytes(const ggml_tensor * t, int64_t a, int64_t b) const {
    if (grouped() && is_k(t)) {
        return (size_t) ((b + GGML_KV_GROUP - 1) / GGML_KV_GROUP - a / GGML_KV_GROUP) * n_embd_kv_ * t->nb[1];
    }
    return (size_t) (b - a) * t->nb[1];
}

bool KvCache::is_k(const ggml_tensor * t) const { return std::find(k_.begin(), k_.end(), t) != k_.end(); }

void KvCache::own_rows(int seq, int64_t j) {
    if (pages_.n_shared_pages() == 0) return;
    for (size_t il = 0; il < k_.size(); ++il) {
        for (const ggml_tensor * t : {k_[il], v_[il]})
            pages_.make_private(slot_offset(t, seq, j), slot_bytes(t, j, j + 1));
    }
}

bool KvCache::copy_seq(int src, int dst, int64_t p1, std::string * err) {
    const Seq & s = seqs_[src];
    const int64_t end = std::min(p1, s.n_past);
    const bool whole = end == s.n_past;
    auto refuse = [&](const std::string & msg) {
        kvg::note_status(KVG_STATUS_UNSUPPORTED);
        if (err) *err = msg;
        return false;
    };
    if (mode_ == KvMode::Ring && !whole) return refuse("a ring cache copies whole sequences only (p1 < 0)");
    if (!whole && !groups_.exact_cut(src, end)) { // not whole: linear, slot = position
        return refuse(rounded_cut(end, "copy up to") + groups_.exact_groups(src) + ")");
    }
    if (src == dst) return whole || remove(src, end, INT64_MAX, err); // its own prefix: a rollback to it
    const int64_t n_slots = whole ? s.n_used : end; // linear when not whole: slot = position
    for (size_t il = 0; il < k_.size(); ++il) {
        for (const ggml_tensor * t : {k_[il], v_[il]}) {
            pages_.share(slot_offset(t, dst, 0), slot_offset(t, src, 0), slot_bytes(t, 0, n_slots));
        }
    }
    Seq & d = seqs_[dst];
    d = s;
    if (!whole) {
        for (int64_t & q : d.slot_pos) q = q < end ? q : -1;
        d.n_past = end;
        d.n_used = (int) end;
    }
    groups_.copy_seq(src, dst);
    return true;
}

bool KvCache::copy_range(int src, int dst, int64_t p0, int64_t p1, std::string * err) {
    if (mode_ != KvMode::Linear || grouped()) {
        kvg::note_status(KVG_STATUS_UNSUPPORTED);
        if (err) *err = "a range that does not start at 0 is copied in linear f32 and f16 caches only";
        return false;
    }
    const Seq & s = seqs_[src];
    const int64_t end = std::min(p1, s.n_past);
    if (p0 >= end || src == dst) return true;
    for (size_t il = 0; il < k_.size(); ++il) {
        for (const ggml_tensor * t : {k_[il], v_[il]}) {
            pages_.share(slot_offset(t, dst, p0), slot_offset(t, src, p0), slot_bytes(t, p0, end));
        }
    }
    Seq & d = seqs_[dst];
    if ((int64_t) d.slot_pos.size() < end) d.slot_pos.resize((size_t) end, -1);
    for (int64_t j = p0; j < end; ++j) d.slot_pos[(size_t) j] = s.held(j);
    d.n_past = pos_max(dst) + 1;
    d.n_used = std::max<int>(d.n_used, (int) end);
    return true;
}

// ---- shifting positions ------------------------------------------------------------------------------

// Rotates each head's pairs of one key row of layer il by delta positions: pair k's angle per
// position is freq_scale * base^(-2k / n_rot) / factors[k] with the layer's base and scale (Gemma's
// sliding-window layers have their own), as the graph's rope (without YaRN, whose blended angles
// are not additive) applies it. Pair k is values 2k, 2k + 1 (llama) or k,
// k + n_rot / 2 (hp.rope_mode NEOX).
static void rotate_key_row(void * row, ggml_type type, int n_embd_kv, int head_dim, const HParams & hp, int il,
                           const float * factors, int64_t delta) {
    const double base = hp.layer_rope_base(il), freq_scale = hp.layer_rope_freq_scale(il);
    const int n_rot = hp.n_rot;
    const bool neox = hp.rope_mode == GGML_ROPE_TYPE_NEOX;
    std::vector<double> x((size_t) n_embd_kv);
    for (int i = 0; i < n_embd_kv; ++i) {
        x[i] = type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *) row)[i]) : ((const float *) row)[i];
    }
    for (int h = 0; h < n_embd_kv / head_dim; ++h) {
        for (int k = 0; k < n_rot / 2; ++k) {
            const double per_pos = freq_scale * std::pow(base, -2.0 * k / n_rot);
            const double theta = (double) delta * per_pos / (factors ? factors[k] : 1.0);
            const size_t i = (size_t) h * head_dim + (neox ? k : 2 * k), step = neox ? n_rot / 2 : 1;
            double & a = x[i];
            double & b = x[i + step];
            const double a0 = a;
            a = a0 * std::cos(theta) - b * std::sin(theta);
            b = a0 * std::sin(theta) + b * std::cos(theta);
        }
    }
    for (int i = 0; i < n_embd_kv; ++i) {
        if (type == GGML_TYPE_F16) ((ggml_fp16_t *) row)[i] = ggml_fp32_to_fp16((float) x[i]);
        else ((float *) row)[i] = (float) x[i];
    }
}

bool KvCache::shift(int seq, int64_t p0, int64_t p1, int64_t delta, const HParams & hp, const float * factors,
                    std::string * err) {
    auto refuse = [&](kvg_status st, const std::string & msg) {
        kvg::note_status(st);
        if (err) *err = msg;
        return false;
    };
    if (mode_ != KvMode::Linear || grouped()) {
        return refuse(KVG_STATUS_UNSUPPORTED, "positions can be shifted in linear f32 and f16 caches only (a q8_0 key would "
                                              "be rounded again; a ring slides by itself)");
    }
    if (hp.rope_yarn) {
        return refuse(KVG_STATUS_UNSUPPORTED,
                      "positions cannot be shifted with YaRN rope scaling (its angles do not add up)");
    }
    Seq & s = seqs_[seq];
    p1 = std::min(p1, s.n_past);
    if (delta == 0 || p0 >= p1) return true;
    for (int64_t j = 0; j < (int64_t) s.slot_pos.size(); ++j) {
        const int64_t q = s.slot_pos[(size_t) j];
        if (q < p0 || q >= p1) {
            if (q >= 0 && q >= p0 + delta && q < p1 + delta) return refuse(KVG_STATUS_BAD_INPUT, "position " +
                std::to_string(q) + " is held and lies where the shifted positions would go");
            continue;
        }
        if (q + delta < 0 || q + delta >= n_ctx_) {
            return refuse(KVG_STATUS_BAD_INPUT, "position " + std::to_string(q) + " would move to " +
                                                    std::to_string(q + delta) + ", outside 0.." +
                                                    std::to_string(n_ctx_ - 1));
        }
    }
    // move rows in the order that never overwrites one still to be moved
    const int64_t first = delta < 0 ? p0 : p1 - 1, last = delta < 0 ? p1 : p0 - 1, step = delta < 0 ? 1 : -1;
    for (int64_t q = first; q != last; q += step) {
        if (q >= (int64_t) s.slot_pos.size() || s.slot_pos[(size_t) q] != q) continue; // not held
        for (size_t il = 0; il < k_.size(); ++il) {
            for (ggml_tensor * t : {k_[il], v_[il]}) {
                pages_.make_private(slot_offset(t, seq, q + delta), slot_bytes(t, q + delta, q + delta + 1));
                char * from = (char *) t->data + (size_t) ((int64_t) seq * n_ctx_ + q) * t->nb[1];
                char * to = (char *) t->data + (size_t) ((int64_t) seq * n_ctx_ + q + delta) * t->nb[1];
                std::memcpy(to, from, t->nb[1]);
                if (t == k_[il] && hp.layer_uses_rope((int) il))
                    rotate_key_row(to, type_, n_embd_kv_, head_dim_, hp, (int) il, factors, delta);
            }
        }
        if (q + delta >= (int64_t) s.slot_pos.size()) s.slot_pos.resize((size_t) (q + delta + 1), -1);
        s.slot_pos[(size_t) q] = -1;
        s.slot_pos[(size_t) (q + delta)] = q + delta;
    }
    const int64_t top = pos_max(seq);
    s.n_past = top + 1;
    s.n_used = (int) std::min<int64_t>(s.slot_pos.size(), top + 1); // slots past the last held one are stale
    return true;
}

int64_t KvCache::pos_min(int seq) const {
    int64_t m = -1;
    for (int64_t q : seqs_[seq].slot_pos) {
        if (q >= 0 && (m < 0 || q < m)) m = q;
    }
    return m;
}

int64_t KvCache::pos_max(int seq) const {
    int64_t m = -1;
    for (int64_t q : seqs_[seq].slot_pos) m = std::max(m, q);
    return m;
}

void KvCache::apply(int seq, int64_t pos) {
    Seq & s = seqs_[seq];
    const int64_t j = slot(pos);
    groups_.use(seq, j);
    own_rows(seq, j);
    if (j >= (int64_t) s.slot_pos.size()) {
        s.slot_pos.reserve((size_t) std::max<int64_t>(j + 1, n_ctx_)); // once: decode then allocates nothing
        s.slot_pos.resize((size_t) j + 1, -1);
    }
    s.slot_pos[j] = pos;
    s.n_used = std::max<int>(s.n_used, (int) j + 1);
    s.n_past = std::max(s.n_past, pos + 1);
}

// ---- batches -------------------------------------------------------------------------------------

bool KvCache::begin_batch(const int32_t * pos, const int32_t * seq, int n, Batch * b, std::string * err) {
    b->first.assign(n_seq_, -1);
    b->last.assign(n_seq_, -1);
    for (int i = 0; i < n; ++i) {
        if (b->first[seq[i]] < 0) b->first[seq[i]] = pos[i];
        b->last[seq[i]] = pos[i];
    }
    for (int s = 0; s < n_seq_; ++s) {
        if (b->first[s] < 0) continue;
        if (!check_start(s, b->first[s], err)) return false;
        if (mode_ == KvMode::Linear && b->last[s] >= n_ctx_) {
            kvg::note_status(KVG_STATUS_CONTEXT_FULL);
            if (err) {
                *err = std::to_string(b->last[s] - b->first[s] + 1) + " tokens at position " +
                       std::to_string(b->first[s]) + " do not fit in the context of " + std::to_string(n_ctx_) +
                       " tokens" + (n_seq_ > 1 ? " (sequence " + std::to_string(s) + ")" : "");
            }
            return false;
        }
    }
    b->n_used.resize(n_seq_);
    for (int s = 0; s < n_seq_; ++s) b->n_used[s] = seqs_[s].n_used;
    groups_.begin(&b->groups);
    for (int s = 0; s < n_seq_; ++s) {
        if (b->first[s] >= 0) rewind(s, b->first[s]); // rows from there on are being replaced
    }
    return true;
}

void KvCache::commit_batch(Batch *) { groups_.end(); }

void KvCache::rollback_batch(Batch * b) {
    groups_.end();
    for (int s = 0; s < n_seq_; ++s) {
        if (b->first[s] < 0) continue;
        rewind(s, b->first[s]); // also every slot the batch wrote: they hold its positions
        seqs_[s].n_used = b->n_used[s];
        groups_.rollback(s, b->groups);
    }
}

} // namespace kvg
