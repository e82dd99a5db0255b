// Grouped K's f32 copies and the groups each sequence keeps exact (see kv-group.h).
#include "kv-group.h"

#include <cstring>

namespace kvg {

size_t KvKeyGroups::bytes_for(size_t n_layer, const Shape & s) {
    const size_t recent = sizeof(float) * s.n_embd_kv * GGML_KV_GROUP * s.n_seq;
    return n_layer * 2 * recent + sizeof(float) * n_layer * s.n_seq * s.n_sink * s.n_embd_kv; // k_recent + prev, sinks
}

void KvKeyGroups::init(ggml_context * ctx, const std::vector<ggml_tensor *> & k_groups, const Shape & shape) {
    shape_ = shape;
    k_ = k_groups;
    const size_t n_layer = k_.size(), per_layer = group_floats() * shape.n_seq;
    recent_mem_.assign(n_layer * per_layer, 0.0f);
    prev_.assign(recent_mem_.size(), 0.0f);
    sinks_.assign(n_layer * shape.n_seq * shape.n_sink * shape.n_embd_kv, 0.0f);
    for (size_t il = 0; il < n_layer; ++il) {
        ggml_tensor * t =
            ggml_new_tensor_2d(ctx, GGML_TYPE_F32, shape.n_embd_kv, (int64_t) GGML_KV_GROUP * shape.n_seq);
        ggml_format_name(t, "cache_k_recent_l%d", (int) il);
        t->data = recent_mem_.data() + il * per_layer;
        recent_.push_back(t);
    }
    seqs_.assign(shape.n_seq, SeqGroups());
}

size_t KvKeyGroups::bytes() const { return (recent_mem_.size() + prev_.size() + sinks_.size()) * sizeof(float); }

void KvKeyGroups::clear() {
    std::fill(recent_mem_.begin(), recent_mem_.end(), 0.0f);
    std::fill(prev_.begin(), prev_.end(), 0.0f);
    std::fill(sinks_.begin(), sinks_.end(), 0.0f);
    seqs_.assign(shape_.n_seq, SeqGroups());
}

bool KvKeyGroups::exact_cut(int seq, int64_t slot) const {
    const int group = (int) (slot / GGML_KV_GROUP);
    return !active() || slot % GGML_KV_GROUP == 0 || group == seqs_[seq].recent || group == seqs_[seq].prev;
}

// The groups whose exact f32 keys seq keeps (the one written last, then the one written
// before it), which after a rollback may lie past its end.
std::string KvKeyGroups::exact_groups(int seq) const {
    std::string out;
    for (int g : {seqs_[seq].recent, seqs_[seq].prev}) {
        if (g < 0) continue;
        const int64_t end = std::min<int64_t>((int64_t) (g + 1) * GGML_KV_GROUP, shape_.n_ctx) - 1;
        out += (out.empty() ? "slots " : " and ") + std::to_string((int64_t) g * GGML_KV_GROUP) + ".." +
               std::to_string(end);
    }
    return out.empty() ? "none" : out;
}

void KvKeyGroups::copy_seq(int src, int dst) {
    seqs_[dst] = seqs_[src];
    for (size_t il = 0; il < recent_.size(); ++il) {
        for (std::vector<float> * rows : {&recent_mem_, &prev_}) {
            float * base = rows->data();
            std::copy_n(base + group_offset(il, src), group_floats(), base + group_offset(il, dst));
        }
        const size_t n_sink = (size_t) shape_.n_sink * shape_.n_embd_kv;
        if (n_sink > 0) std::copy_n(sinks_.data() + sink_offset(il, src), n_sink, sinks_.data() + sink_offset(il, dst));
    }
}

// ---- graph ------------------------------------------------------------------------------------

ggml_tensor * KvKeyGroups::view_groups(ggml_context * ctx, int il, int n_kv) const {
    const ggml_tensor * t = k_[il];
    const int n_embd_kv = shape_.n_embd_kv;
    return ggml_view_4d(ctx, k_[il], GGML_KV_GROUP, n_embd_kv, n_groups(n_kv), shape_.n_seq, t->nb[1],
                        n_embd_kv * t->nb[1], (size_t) n_groups(shape_.n_ctx) * n_embd_kv * t->nb[1], 0);
}

ggml_tensor * KvKeyGroups::view_recent(ggml_context * ctx, int il) const {
    return ggml_reshape_3d(ctx, recent_[il], shape_.n_embd_kv, GGML_KV_GROUP, shape_.n_seq);
}

ggml_tensor * KvKeyGroups::write(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx,
                                 ggml_tensor * group_rows) const {
    // The RAW edge from this write orders the transpose after it; the transpose's read
    // orders the next chunk's write after it (WAR); attention reads both k_recent and k[il].
    ggml_set_rows(ctx, recent_[il], cur, idx);
    ggml_tensor * by_channel =
        ggml_cont(ctx, ggml_permute(ctx, view_recent(ctx, il), 1, 0, 2, 3)); // [32, n_embd_kv, n_seq]
    const int64_t n_rows = (int64_t) shape_.n_embd_kv * shape_.n_seq;
    return ggml_set_rows(ctx, k_[il], ggml_reshape_2d(ctx, by_channel, GGML_KV_GROUP, n_rows), group_rows);
}

void KvKeyGroups::fill_group_rows(int64_t * rows) const {
    const int n_embd_kv = shape_.n_embd_kv;
    for (int s = 0; s < shape_.n_seq; ++s) {
        const int64_t first = ((int64_t) s * n_groups(shape_.n_ctx) + recent_group(s)) * n_embd_kv;
        for (int c = 0; c < n_embd_kv; ++c) rows[(size_t) s * n_embd_kv + c] = first + c;
    }
}

// ---- moving between groups ----------------------------------------------------------------------

static void copy_f32_row(const void * x, float * y, int64_t k) { std::memcpy(y, x, (size_t) k * sizeof(float)); }

// A ring never rewrites its sink slots: their rows are saved in f32 when their group leaves
// k_recent and restored when it comes back. Dequantized, they would be re-quantized with the
// scales of every later lap and drift further each lap.
void KvKeyGroups::swap_sinks(int seq, int group, bool save) {
    const int n_embd_kv = shape_.n_embd_kv;
    for (size_t il = 0; il < k_.size(); ++il) {
        float * rows = recent_mem_.data() + group_offset(il, seq);
        for (int j = group * GGML_KV_GROUP; j < std::min(shape_.n_sink, (group + 1) * GGML_KV_GROUP); ++j) {
            float * r = rows + (size_t) (j - group * GGML_KV_GROUP) * n_embd_kv;
            float * saved = sinks_.data() + sink_offset(il, seq) + (size_t) j * n_embd_kv;
            std::memcpy(save ? saved : r, save ? r : saved, n_embd_kv * sizeof(float));
        }
    }
}

// k_recent's rows of seq become `group`'s: the last-left group's exact rows if it is that one,
// else dequantized from the channel rows of k[il]; the group left becomes the last-left one.
void KvKeyGroups::load(int seq, int group) {
    if (open_) save(seq); // the batch may be rolled back to this group
    // ggml's traits have no to_float for f32: a copy
    const ggml_type type = k_[0]->type;
    const ggml_to_float_t to_float = type == GGML_TYPE_F32 ? copy_f32_row : ggml_get_type_traits(type)->to_float;
    float block[GGML_KV_GROUP];
    SeqGroups & s = seqs_[seq];
    if (s.recent >= 0) swap_sinks(seq, s.recent, true);
    const size_t n_rows = group_floats();
    const int n_embd_kv = shape_.n_embd_kv;
    const bool back = group == s.prev; // the group left last: its exact rows are kept
    for (size_t il = 0; il < k_.size(); ++il) {
        const ggml_tensor * t = k_[il];
        float * rows = recent_mem_.data() + group_offset(il, seq);
        float * prev = prev_.data() + group_offset(il, seq);
        if (back) std::swap_ranges(rows, rows + n_rows, prev);
        else if (s.recent >= 0) std::copy(rows, rows + n_rows, prev);
        for (int c = 0; c < n_embd_kv && !back; ++c) {
            const int64_t r = ((int64_t) seq * n_groups(shape_.n_ctx) + group) * n_embd_kv + c;
            to_float((const char *) t->data + r * t->nb[1], block, GGML_KV_GROUP);
            for (int j = 0; j < GGML_KV_GROUP; ++j) rows[(size_t) j * n_embd_kv + c] = block[j];
        }
    }
    swap_sinks(seq, group, false);
    s.prev = s.recent;
    s.recent = group;
}

// No open group (dropped because it lay past n_ctx, or none saved): each graph re-quantizes
// group 0 from k_recent (recent_group()), so k_recent must hold group 0's keys first.
void KvKeyGroups::reopen_first_group(int seq) {
    SeqGroups & s = seqs_[seq];
    const int prev = s.prev;
    load(seq, 0);                                // prev 0: its exact rows come back, and group 0 is open again
    if (prev != 0) s.recent = -1, s.prev = prev; // dequantized: not claimed exact
}

// ---- batches ----------------------------------------------------------------------------------

void KvKeyGroups::begin(Undo * u) {
    u->group.resize(shape_.n_seq);
    for (int s = 0; s < shape_.n_seq; ++s) u->group[s] = seqs_[s].recent;
    u->saved.assign(shape_.n_seq, 0);
    open_ = u;
}

// The f32 rows of seq's group being filled, every layer, kept once per batch.
void KvKeyGroups::save(int seq) {
    if (open_->saved[seq]) return;
    const size_t rows = group_floats(), n_layer = recent_.size();
    if (open_->rows.empty()) open_->rows.resize((size_t) shape_.n_seq * n_layer * rows);
    for (size_t il = 0; il < n_layer; ++il) {
        const float * src = recent_mem_.data() + group_offset(il, seq);
        std::copy_n(src, rows, open_->rows.data() + ((size_t) seq * n_layer + il) * rows);
    }
    open_->saved[seq] = 1;
}

void KvKeyGroups::rollback(int seq, const Undo & u) {
    SeqGroups & s = seqs_[seq];
    s.recent = u.group[seq];
    const size_t rows = group_floats(), n_layer = recent_.size();
    for (size_t il = 0; u.saved[seq] && il < n_layer; ++il) {
        std::copy_n(u.rows.data() + ((size_t) seq * n_layer + il) * rows, rows,
                    recent_mem_.data() + group_offset(il, seq));
    }
    if (s.prev == s.recent) s.prev = -1; // its rows were the batch's
}

// ---- state --------------------------------------------------------------------------------------

size_t KvKeyGroups::state_bytes(int64_t n_groups, bool open_group, bool prev_group) const {
    if (!active()) return 0;
    const size_t L = k_.size(), k_row = ggml_row_size(k_[0]->type, GGML_KV_GROUP);
    const size_t group_rows = L * group_floats() * sizeof(float);
    return (size_t) n_groups * L * shape_.n_embd_kv * k_row + (open_group ? group_rows : 0) +
           (prev_group ? group_rows : 0) + L * (size_t) shape_.n_sink * shape_.n_embd_kv * sizeof(float);
}

void KvKeyGroups::state_write(int seq, const std::vector<int64_t> & groups, std::vector<uint8_t> * out) const {
    if (!active()) return;
    auto put = [&](const void * p, size_t n) { out->insert(out->end(), (const uint8_t *) p, (const uint8_t *) p + n); };
    const size_t group_bytes = (size_t) shape_.n_embd_kv * k_[0]->nb[1]; // one group's channel blocks
    for (int64_t g : groups) {
        for (const ggml_tensor * t : k_) {
            put((const char *) t->data + (size_t) ((int64_t) seq * n_groups(shape_.n_ctx) + g) * group_bytes,
                group_bytes);
        }
    }
    const size_t rows = group_floats() * sizeof(float),
                 sink_bytes = (size_t) shape_.n_sink * shape_.n_embd_kv * sizeof(float);
    for (size_t il = 0; seqs_[seq].recent >= 0 && il < k_.size(); ++il)
        put(recent_mem_.data() + group_offset(il, seq), rows);
    for (size_t il = 0; seqs_[seq].prev >= 0 && il < k_.size(); ++il) put(prev_.data() + group_offset(il, seq), rows);
    for (size_t il = 0; sink_bytes > 0 && il < k_.size(); ++il) put(sinks_.data() + sink_offset(il, seq), sink_bytes);
}

void KvKeyGroups::state_read(int seq, int recent, int prev, const std::vector<int64_t> & groups, const uint8_t * p) {
    SeqGroups & s = seqs_[seq];
    // linear into fewer slots: groups past n_ctx hold no position
    s.recent = recent < n_groups(shape_.n_ctx) ? recent : -1;
    s.prev = prev < n_groups(shape_.n_ctx) ? prev : -1;
    if (!active()) return;
    const size_t group_bytes = (size_t) shape_.n_embd_kv * k_[0]->nb[1];
    for (int64_t g : groups) {
        for (ggml_tensor * t : k_) {
            std::memcpy((char *) t->data + (size_t) ((int64_t) seq * n_groups(shape_.n_ctx) + g) * group_bytes, p,
                        group_bytes);
            p += group_bytes;
        }
    }
    const size_t rows = group_floats() * sizeof(float);
    for (size_t il = 0; recent >= 0 && il < k_.size(); ++il, p += rows) {
        if (s.recent >= 0) std::memcpy(recent_mem_.data() + group_offset(il, seq), p, rows);
    }
    for (size_t il = 0; prev >= 0 && il < k_.size(); ++il, p += rows) {
        if (s.prev >= 0) std::memcpy(prev_.data() + group_offset(il, seq), p, rows);
    }
    const size_t sink_bytes = (size_t) shape_.n_sink * shape_.n_embd_kv * sizeof(float);
    for (size_t il = 0; sink_bytes > 0 && il < k_.size(); ++il, p += sink_bytes) {
        std::memcpy(sinks_.data() + sink_offset(il, seq), p, sink_bytes);
    }
    if (s.recent < 0) reopen_first_group(seq);
}

} // namespace kvg
