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

size_t KvCache::k_row_bytes() const { return grouped() ? ggml_row_size(type, GGML_KV_GROUP) : ggml_row_size(type, n_embd_kv); }

// Groups (of slots) that hold at least one of seq's held slots, ascending.
static std::vector<int64_t> held_groups(const std::vector<std::pair<int64_t, int64_t>> & held) {
    std::vector<int64_t> g;
    for (const auto & h : held) {
        if (g.empty() || g.back() != h.first / GGML_KV_GROUP) g.push_back(h.first / GGML_KV_GROUP);
    }
    return g;
}

void KvCache::state_write(int seq, uint64_t model_id, std::vector<uint8_t> * out) const {
    const Seq & s = seqs[seq];
    std::vector<std::pair<int64_t, int64_t>> held; // (slot, position)
    for (size_t j = 0; j < s.slot_pos.size(); ++j) {
        if (s.slot_pos[j] >= 0) held.emplace_back((int64_t) j, s.slot_pos[j]);
    }
    const std::vector<int64_t> groups = grouped() ? held_groups(held) : std::vector<int64_t>();
    StateHeader h = {};
    std::memcpy(h.magic, STATE_MAGIC, 4);
    h.version = STATE_VERSION;
    h.model_id = model_id;
    h.n_layer = (int32_t) k.size(), h.n_embd_kv = n_embd_kv, h.type = (int32_t) type, h.mode = (int32_t) mode;
    h.n_ctx = n_ctx, h.n_window = n_window, h.n_sink = n_sink, h.grouped = grouped();
    h.n_past = s.n_past, h.n_used = s.n_used, h.recent_group = s.recent_group, h.prev_group = s.prev_group;
    h.n_held = (int64_t) held.size(), h.n_groups = (int64_t) groups.size();
    out->clear();
    auto put = [&](const void * p, size_t n) { out->insert(out->end(), (const uint8_t *) p, (const uint8_t *) p + n); };
    put(&h, sizeof h);
    for (const auto & x : held) {
        const int64_t pair[2] = {x.first, x.second};
        put(pair, sizeof pair);
    }
    const size_t v_row = ggml_row_size(type, n_embd_kv), k_row = k_row_bytes();
    for (const auto & x : held) {
        for (size_t il = 0; il < k.size(); ++il) {
            const size_t r = (size_t) ((int64_t) seq * n_ctx + x.first);
            put((const char *) v[il]->data + r * v_row, v_row);
            if (!grouped()) put((const char *) k[il]->data + r * k_row, k_row);
        }
    }
    for (int64_t g : groups) {
        for (size_t il = 0; il < k.size(); ++il) {
            put((const char *) k[il]->data + (size_t) ((int64_t) seq * n_groups(n_ctx) + g) * n_embd_kv * k_row,
                (size_t) n_embd_kv * k_row);
        }
    }
    const size_t rows = (size_t) GGML_KV_GROUP * n_embd_kv;
    for (size_t il = 0; grouped() && s.recent_group >= 0 && il < k.size(); ++il) {
        put((const float *) k_recent[il]->data + (size_t) seq * rows, rows * sizeof(float));
    }
    for (size_t il = 0; grouped() && s.prev_group >= 0 && il < k.size(); ++il) {
        put(prev_mem.data() + (il * n_seq + seq) * rows, rows * sizeof(float));
    }
    for (size_t il = 0; grouped() && n_sink > 0 && il < k.size(); ++il) {
        put(sink_mem.data() + (il * n_seq + seq) * (size_t) n_sink * n_embd_kv, (size_t) n_sink * n_embd_kv * sizeof(float));
    }
    const uint64_t sum = fnv1a(out->data(), out->size());
    put(&sum, sizeof sum);
}

size_t KvCache::state_bytes(int64_t n_held, int64_t n_groups, bool open_group, bool prev_group) const {
    const size_t L = k.size(), v_row = ggml_row_size(type, n_embd_kv), k_row = k_row_bytes();
    const size_t group_rows = L * (size_t) GGML_KV_GROUP * n_embd_kv * sizeof(float);
    const size_t per_slot = 2 * sizeof(int64_t) + L * (v_row + (grouped() ? 0 : k_row));
    const size_t tail = grouped() ? (open_group ? group_rows : 0) + (prev_group ? group_rows : 0) +
                                        L * (size_t) n_sink * n_embd_kv * sizeof(float)
                                  : 0;
    return sizeof(StateHeader) + (size_t) n_held * per_slot + (size_t) n_groups * L * n_embd_kv * k_row + tail +
           sizeof(uint64_t);
}

size_t KvCache::state_size(int seq) const {
    const Seq & s = seqs[seq];
    std::vector<std::pair<int64_t, int64_t>> held;
    for (size_t j = 0; j < s.slot_pos.size(); ++j) {
        if (s.slot_pos[j] >= 0) held.emplace_back((int64_t) j, s.slot_pos[j]);
    }
    const int64_t n_groups = grouped() ? (int64_t) held_groups(held).size() : 0;
    return state_bytes((int64_t) held.size(), n_groups, s.recent_group >= 0, s.prev_group >= 0);
}

// Does a state made by h fit this cache? (the message says what differs)
bool KvCache::state_check(const StateHeader & h, uint64_t model_id, std::string * err) const {
    auto fail = [&](const std::string & msg) {
        kvg::note_status(KVG_STATUS_BAD_INPUT);
        if (err) *err = msg;
        return false;
    };
    if (h.model_id != model_id || h.n_layer != (int32_t) k.size() || h.n_embd_kv != n_embd_kv) {
        return fail("the state was saved from another model");
    }
    if (h.type != (int32_t) type || h.grouped != (int32_t) grouped()) {
        // the number is the state's: named only if it is a type (else it is damaged)
        const bool known = h.type >= 0 && h.type < GGML_TYPE_COUNT;
        return fail("the state holds a " + std::string(known ? ggml_type_name((ggml_type) h.type) : "damaged") +
                    " cache (type " + std::to_string(h.type) + "), this context's is " + ggml_type_name(type));
    }
    if (h.mode != (int32_t) mode) return fail("the state was saved from a cache of another mode (linear / ring)");
    if (mode == KvMode::Ring && (h.n_ctx != n_ctx || h.n_window != n_window || h.n_sink != n_sink)) {
        return fail("the state was saved from a ring of " + std::to_string(h.n_ctx) + " slots, window " +
                    std::to_string(h.n_window) + ", " + std::to_string(h.n_sink) + " sinks; this context's differs");
    }
    // linear: the positions must fit; the slots once written may not (a rollback keeps n_used)
    const int64_t top_group = n_groups(mode == KvMode::Ring ? n_ctx : std::max(n_ctx, h.n_used));
    if (h.n_used < 0 || (mode == KvMode::Ring && h.n_used > n_ctx) || h.n_past < 0 ||
        (mode == KvMode::Linear && h.n_past > n_ctx) || h.recent_group < -1 || h.recent_group >= top_group ||
        h.prev_group < -1 || h.prev_group >= top_group || h.n_held < 0 || h.n_held > h.n_used || h.n_held > n_ctx ||
        h.n_groups < 0 || h.n_groups > n_groups(n_ctx)) {
        return fail("the state holds " + std::to_string(h.n_past) + " positions in " + std::to_string(h.n_used) +
                    " slots, more than this context's " + std::to_string(n_ctx) + " (or the state is damaged)");
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
    const size_t L = k.size(), v_row = ggml_row_size(type, n_embd_kv), k_row = k_row_bytes();
    const size_t rows = (size_t) GGML_KV_GROUP * n_embd_kv;
    if (size != state_bytes(h.n_held, h.n_groups, h.recent_group >= 0, h.prev_group >= 0)) {
        return damaged("its size does not match what it says it holds");
    }
    std::vector<std::pair<int64_t, int64_t>> held((size_t) h.n_held);
    for (size_t i = 0; i < held.size(); ++i) {
        int64_t x[2];
        std::memcpy(x, src + sizeof h + i * sizeof x, sizeof x);
        held[i] = {x[0], x[1]};
    }
    const int64_t oldest = mode == KvMode::Ring ? h.n_past - (n_ctx - n_sink) : 0; // a ring holds its last lap
    for (size_t i = 0; i < held.size(); ++i) {
        const int64_t j = held[i].first, q = held[i].second;
        if (j < 0 || j >= h.n_used || (i > 0 && j <= held[i - 1].first) || q < 0 || q >= h.n_past || slot(q) != j ||
            (q >= n_sink && q < oldest)) {
            return damaged("a held slot does not match its position");
        }
    }
    if (grouped() && (int64_t) held_groups(held).size() != h.n_groups) return damaged("its groups do not match its slots");

    // checked: replace what seq holds (pages it shares with another sequence get copies first)
    for (size_t il = 0; il < k.size(); ++il) {
        for (const ggml_tensor * t : {k[il], v[il]}) pages.make_private(slot_offset(t, seq, 0), slot_bytes(t, 0, n_ctx));
    }
    rewind(seq, 0);
    Seq & s = seqs[seq];
    // linear into fewer slots: slots past n_ctx hold no position, and neither do groups past it
    s.n_past = h.n_past, s.n_used = std::min(h.n_used, n_ctx);
    s.recent_group = h.recent_group < n_groups(n_ctx) ? h.recent_group : -1;
    s.prev_group = h.prev_group < n_groups(n_ctx) ? h.prev_group : -1;
    s.slot_pos.assign((size_t) s.n_used, -1);
    const uint8_t * p = src + sizeof h + held.size() * 2 * sizeof(int64_t);
    for (const auto & x : held) {
        s.slot_pos[(size_t) x.first] = x.second;
        const size_t r = (size_t) ((int64_t) seq * n_ctx + x.first);
        for (size_t il = 0; il < L; ++il) {
            std::memcpy((char *) v[il]->data + r * v_row, p, v_row), p += v_row;
            if (!grouped()) std::memcpy((char *) k[il]->data + r * k_row, p, k_row), p += k_row;
        }
    }
    for (int64_t g : grouped() ? held_groups(held) : std::vector<int64_t>()) {
        for (size_t il = 0; il < L; ++il) {
            const size_t n = (size_t) n_embd_kv * k_row;
            std::memcpy((char *) k[il]->data + (size_t) ((int64_t) seq * n_groups(n_ctx) + g) * n, p, n), p += n;
        }
    }
    for (size_t il = 0; grouped() && h.recent_group >= 0 && il < L; ++il, p += rows * sizeof(float)) {
        if (s.recent_group >= 0)
            std::memcpy((float *) k_recent[il]->data + (size_t) seq * rows, p, rows * sizeof(float));
    }
    for (size_t il = 0; grouped() && h.prev_group >= 0 && il < L; ++il, p += rows * sizeof(float)) {
        if (s.prev_group >= 0) std::memcpy(prev_mem.data() + (il * n_seq + seq) * rows, p, rows * sizeof(float));
    }
    for (size_t il = 0; grouped() && n_sink > 0 && il < L; ++il) {
        const size_t n = (size_t) n_sink * n_embd_kv;
        std::memcpy(sink_mem.data() + (il * n_seq + seq) * n, p, n * sizeof(float)), p += n * sizeof(float);
    }
    if (grouped() && s.recent_group < 0) reopen_first_group(seq);
    return true;
}

// No open group (dropped because it lay past n_ctx, or none saved): each graph re-quantizes
// group 0 from k_recent (recent_group()), so k_recent must hold group 0's keys first.
void KvCache::reopen_first_group(int seq) {
    Seq & s = seqs[seq];
    const int prev = s.prev_group;
    load_recent(seq, 0); // prev 0: its exact rows come back, and group 0 is open again
    if (prev != 0) s.recent_group = -1, s.prev_group = prev; // dequantized: not claimed exact
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
