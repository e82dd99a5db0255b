// The state of one KV-cache sequence as bytes: what a prompt cache or a saved conversation
// stores, and what restores it exactly (kv-cache.h: state_write / state_read).
//
// Layout (native little-endian, all checked on reading):
//   StateHeader
//   held slots: n_held x {int64 slot, int64 position}, by slot
//   per held slot, per layer: the V row, then (not grouped) the K row
//   grouped K: per group holding a held slot, per layer: n_embd_kv q8_0 channel blocks;
//              then per layer the open group's f32 rows [32][n_embd_kv] (if one is open),
//              then per layer the sinks' f32 rows [n_sink][n_embd_kv]
//   uint64 checksum (FNV-1a of everything before it)
#include "kv-cache.h"
#include "status.h"

#include <climits>
#include <cstring>

namespace kvg {

struct KvCache::StateHeader {
    char magic[4];
    uint32_t version;
    uint64_t model_id;
    int32_t n_layer, n_embd_kv, type, mode, n_ctx, n_window, n_sink, grouped;
    int64_t n_past;
    int32_t n_used, recent_group, prev_group, reserved;
    int64_t n_held, n_groups;
};

static const char STATE_MAGIC[4] = {'K', 'V', 'G', 'S'};
static const uint32_t STATE_VERSION = 1;

static uint64_t fnv1a(const uint8_t * p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// Groups (of slots) that hold at least one of seq's held slots, ascending.
static std::vector<int64_t> held_groups(const std::vector<std::pair<int64_t, int64_t>> & held) {
    std::vector<int64_t> g;
    for (const auto & h : held) {
        if (g.empty() || g.back() != h.first / GGML_KV_GROUP) g.push_back(h.first / GGML_KV_GROUP);
    }
    return g;
}

void KvCache::state_write(int seq, uint64_t model_id, std::vector<uint8_t> * out) const {
    const Seq & s = seqs_[seq];
    std::vector<std::pair<int64_t, int64_t>> held; // (slot, position)
    for (size_t j = 0; j < s.slot_pos.size(); ++j) {
        if (s.slot_pos[j] >= 0) held.emplace_back((int64_t) j, s.slot_pos[j]);
    }
    const std::vector<int64_t> groups = grouped() ? held_groups(held) : std::vector<int64_t>();
    StateHeader h = {};
    std::memcpy(h.magic, STATE_MAGIC, 4);
    h.version = STATE_VERSION;
    h.model_id = model_id;
    h.n_layer = (int32_t) k_.size(), h.n_embd_kv = n_embd_kv_, h.type = (int32_t) type_, h.mode = (int32_t) mode_;
    h.n_ctx = n_ctx_, h.n_window = n_window_, h.n_sink = n_sink_, h.grouped = grouped();
    h.n_past = s.n_past, h.n_used = s.n_used, h.recent_group = groups_.open_group(seq),
    h.prev_group = groups_.prev_group(seq);
    h.n_held = (int64_t) held.size(), h.n_groups = (int64_t) groups.size();
    out->clear();
    auto put = [&](const void * p, size_t n) { out->insert(out->end(), (const uint8_t *) p, (const uint8_t *) p + n); };
    put(&h, sizeof h);
    for (const auto & x : held) {
        const int64_t pair[2] = {x.first, x.second};
        put(pair, sizeof pair);
    }
    const size_t v_row = ggml_row_size(type_, n_embd_kv_), k_row = v_row; // K rows (not grouped) are as wide
    for (const auto & x : held) {
        for (size_t il = 0; il < k_.size(); ++il) {
            const size_t r = (size_t) ((int64_t) seq * n_ctx_ + x.first);
            put((const char *) v_[il]->data + r * v_row, v_row);
            if (!grouped()) put((const char *) k_[il]->data + r * k_row, k_row);
        }
    }
    groups_.state_write(seq, groups, out);
    const uint64_t sum = fnv1a(out->data(), out->size());
    put(&sum, sizeof sum);
}

size_t KvCache::state_bytes(int64_t n_held, int64_t n_groups, bool open_group, bool prev_group) const {
    const size_t L = k_.size(), v_row = ggml_row_size(type_, n_embd_kv_), k_row = v_row; // K rows (not grouped)
    const size_t per_slot = 2 * sizeof(int64_t) + L * (v_row + (grouped() ? 0 : k_row));
    // not grouped, a state counts n_groups (0 as written) K rows per layer, as it always has
    const size_t grouped_part =
        grouped() ? groups_.state_bytes(n_groups, open_group, prev_group) : (size_t) n_groups * L * n_embd_kv_ * k_row;
    return sizeof(StateHeader) + (size_t) n_held * per_slot + grouped_part + sizeof(uint64_t);
}

size_t KvCache::state_size(int seq) const {
    const Seq & s = seqs_[seq];
    std::vector<std::pair<int64_t, int64_t>> held;
    for (size_t j = 0; j < s.slot_pos.size(); ++j) {
        if (s.slot_pos[j] >= 0) held.emplace_back((int64_t) j, s.slot_pos[j]);
    }
    const int64_t n_groups = grouped() ? (int64_t) held_groups(held).size() : 0;
    return state_bytes((int64_t) held.size(), n_groups, groups_.open_group(seq) >= 0, groups_.prev_group(seq) >= 0);
}

// Does a state made by h fit this cache? (the message says what differs)
bool KvCache::state_check(const StateHeader & h, uint64_t model_id, std::string * err) const {
    auto fail = [&](const std::string & msg) {
        kvg::note_status(KVG_STATUS_BAD_INPUT);
        if (err) *err = msg;
        return false;
    };
    if (h.model_id != model_id || h.n_layer != (int32_t) k_.size() || h.n_embd_kv != n_embd_kv_) {
        return fail("the state was saved from another model");
    }
    if (h.type != (int32_t) type_ || h.grouped != (int32_t) grouped()) {
        // the number is the state's: named only if it is a type (else it is damaged)
        const bool known = h.type >= 0 && h.type < GGML_TYPE_COUNT;
        return fail("the state holds a " + std::string(known ? ggml_type_name((ggml_type) h.type) : "damaged") +
                    " cache (type " + std::to_string(h.type) + "), this context's is " + ggml_type_name(type_));
    }
    if (h.mode != (int32_t) mode_) return fail("the state was saved from a cache of another mode (linear / ring)");
    if (mode_ == KvMode::Ring && (h.n_ctx != n_ctx_ || h.n_window != n_window_ || h.n_sink != n_sink_)) {
        return fail("the state was saved from a ring of " + std::to_string(h.n_ctx) + " slots, window " +
                    std::to_string(h.n_window) + ", " + std::to_string(h.n_sink) + " sinks; this context's differs");
    }
    // linear: the positions must fit; the slots once written may not (a rollback keeps n_used)
    const int64_t top_group = KvKeyGroups::n_groups(mode_ == KvMode::Ring ? n_ctx_ : std::max(n_ctx_, h.n_used));
    if (h.n_used < 0 || (mode_ == KvMode::Ring && h.n_used > n_ctx_) || h.n_past < 0 ||
        (mode_ == KvMode::Linear && h.n_past > n_ctx_) || h.recent_group < -1 || h.recent_group >= top_group ||
        h.prev_group < -1 || h.prev_group >= top_group || h.n_held < 0 || h.n_held > h.n_used || h.n_held > n_ctx_ ||
        h.n_groups < 0 || h.n_groups > KvKeyGroups::n_groups(n_ctx_)) {
        return fail("the state holds " + std::to_string(h.n_past) + " positions in " + std::to_string(h.n_used) +
                    " slots, more than this context's " + std::to_string(n_ctx_) + " (or the state is damaged)");
    }
    if (h.n_past > INT32_MAX) { // positions are int32 in the API (a ring's are otherwise unbounded)
        return fail("the state holds positions up to " + std::to_string(h.n_past - 1) +
                    ", past 2147483647 (it is damaged)");
    }
    return true;
}

bool KvCache::state_read(int seq, uint64_t model_id, const uint8_t * src, size_t size, std::string * err) {
    auto damaged = [&](const char * what) {
        kvg::note_status(KVG_STATUS_BAD_INPUT);
        if (err) *err = std::string("the state is damaged: ") + what;
        return false;
    };
    StateHeader h;
    if (!src || size < sizeof h + sizeof(uint64_t)) return damaged("too short for its header");
    std::memcpy(&h, src, sizeof h);
    if (std::memcmp(h.magic, STATE_MAGIC, 4) != 0 || h.version != STATE_VERSION) return damaged("not a kvgraph state");
    uint64_t sum;
    std::memcpy(&sum, src + size - sizeof sum, sizeof sum);
    if (sum != fnv1a(src, size - sizeof sum)) return damaged("checksum mismatch (truncated or altered)");
    if (!state_check(h, model_id, err)) return false;
    const size_t L = k_.size(), v_row = ggml_row_size(type_, n_embd_kv_), k_row = v_row; // K rows (not grouped)
    if (size != state_bytes(h.n_held, h.n_groups, h.recent_group >= 0, h.prev_group >= 0)) {
        return damaged("its size does not match what it says it holds");
    }
    std::vector<std::pair<int64_t, int64_t>> held((size_t) h.n_held);
    for (size_t i = 0; i < held.size(); ++i) {
        int64_t x[2];
        std::memcpy(x, src + sizeof h + i * sizeof x, sizeof x);
        held[i] = {x[0], x[1]};
    }
    const int64_t oldest = mode_ == KvMode::Ring ? h.n_past - (n_ctx_ - n_sink_) : 0; // a ring holds its last lap
    for (size_t i = 0; i < held.size(); ++i) {
        const int64_t j = held[i].first, q = held[i].second;
        if (j < 0 || j >= h.n_used || (i > 0 && j <= held[i - 1].first) || q < 0 || q >= h.n_past || slot(q) != j ||
            (q >= n_sink_ && q < oldest)) {
            return damaged("a held slot does not match its position");
        }
    }
    const std::vector<int64_t> groups = grouped() ? held_groups(held) : std::vector<int64_t>();
    if (grouped() && (int64_t) groups.size() != h.n_groups) return damaged("its groups do not match its slots");

    // checked: replace what seq holds (pages it shares with another sequence get copies first)
    for (size_t il = 0; il < k_.size(); ++il) {
        for (const ggml_tensor * t : {k_[il], v_[il]})
            pages_.make_private(slot_offset(t, seq, 0), slot_bytes(t, 0, n_ctx_));
    }
    rewind(seq, 0);
    Seq & s = seqs_[seq];
    // linear into fewer slots: slots past n_ctx hold no position (nor groups past it: groups_)
    s.n_past = h.n_past, s.n_used = std::min(h.n_used, n_ctx_);
    s.slot_pos.assign((size_t) s.n_used, -1);
    const uint8_t * p = src + sizeof h + held.size() * 2 * sizeof(int64_t);
    for (const auto & x : held) {
        s.slot_pos[(size_t) x.first] = x.second;
        const size_t r = (size_t) ((int64_t) seq * n_ctx_ + x.first);
        for (size_t il = 0; il < L; ++il) {
            std::memcpy((char *) v_[il]->data + r * v_row, p, v_row), p += v_row;
            if (!grouped()) std::memcpy((char *) k_[il]->data + r * k_row, p, k_row), p += k_row;
        }
    }
    groups_.state_read(seq, h.recent_group, h.prev_group, groups, p);
    return true;
}

size_t KvCache::state_header_bytes() { return sizeof(StateHeader); }

bool KvCache::state_header_fits(const uint8_t * head, size_t n, uint64_t size, uint64_t model_id,
                                std::string * err) const {
    auto damaged = [&](const char * what) {
        kvg::note_status(KVG_STATUS_BAD_INPUT);
        if (err) *err = std::string("the state is damaged: ") + what;
        return false;
    };
    StateHeader h;
    if (n < sizeof h || size < sizeof h + sizeof(uint64_t)) return damaged("too short for its header");
    std::memcpy(&h, head, sizeof h);
    if (std::memcmp(h.magic, STATE_MAGIC, 4) != 0 || h.version != STATE_VERSION) return damaged("not a kvgraph state");
    if (!state_check(h, model_id, err)) return false;
    if (size != state_bytes(h.n_held, h.n_groups, h.recent_group >= 0, h.prev_group >= 0)) {
        return damaged("its size does not match what it says it holds");
    }
    return true;
}

} // namespace kvg
