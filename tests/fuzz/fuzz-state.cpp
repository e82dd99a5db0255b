// Fuzz target: kvg_state_seq_set with mutated sequence states of the tiny model
// (shared/models/stories260K.bin). The seeds are valid states (make-seeds); the input's
// checksum is recomputed before the call, so that mutations reach the parser's checks
// instead of stopping at the checksum. The input picks the context by the cache type and
// mode its header names (f32, f16, q8_0; linear or ring), so that type and mode match.
//
// Invariants besides "no crash, leak or UB" (kvgraph.h, kvg_state_seq_set):
//  - refused: a message, and the target sequence's state bytes, pos_min, pos_max and n_past
//    are what they were;
//  - accepted: the positions are consistent (consistent_positions below);
//  - either way the context's other sequence is untouched;
//  - accepted: a token decoded at n_past runs, or fails with a message, and the positions
//    stay consistent (the sequence is usable).
// The same state also goes through kvg_state_seq_load_file in a state file, and the raw
// input as a file (its header fuzzed), with the same invariants.
#include "fuzz-common.h"

#include <climits>

namespace {

const int N_CTX = 64;

struct Target {
    int ggml_type; // what a state's header names: 0 f32, 1 f16, 8 q8_0
    kvg_kv_type type;
    kvg_kv_mode mode;
    kvg_context * ctx = nullptr;
    std::vector<uint8_t> victim{}; // what sequence 1 (the target) holds before each input
    std::vector<uint8_t> other{};  // what sequence 0 holds, always
};

std::vector<uint8_t> get_state(kvg_context * c, int seq) {
    std::vector<uint8_t> s(kvg_state_seq_size(c, seq));
    char err[256] = "";
    FUZZ_CHECK(kvg_state_seq_get(c, seq, s.data(), s.size(), err, sizeof err) == s.size(), "state get: %s", err);
    return s;
}

void decode(kvg_context * c, int seq, int n, int first_token) {
    char err[256] = "";
    for (int i = 0; i < n; ++i) {
        const kvg_token t = 3 + (first_token + 7 * i) % 500;
        const int32_t pos = i;
        FUZZ_CHECK(kvg_decode_batch(c, &t, &pos, &seq, 1, err, sizeof err), "setup decode: %s", err);
    }
}

std::vector<Target> & targets() {
    static std::vector<Target> * all = [] {
        const char * env = std::getenv("KVG_SHARED_DIR");
        const std::string path = std::string(env && *env ? env : KVG_SHARED_DIR) + "/models/stories260K.bin";
        char err[512] = "";
        static kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        FUZZ_CHECK(m, "cannot load %s: %s", path.c_str(), err);
        auto * t = new std::vector<Target>{{0, KVG_KV_F32, KVG_KV_LINEAR},
                                           {1, KVG_KV_F16, KVG_KV_LINEAR},
                                           {8, KVG_KV_Q8_0, KVG_KV_LINEAR},
                                           {0, KVG_KV_F32, KVG_KV_RING},
                                           {8, KVG_KV_Q8_0, KVG_KV_RING}};
        for (Target & x : *t) {
            kvg_context_params p = kvg_context_default_params();
            p.n_ctx = N_CTX, p.n_seq_max = 2, p.n_threads = 1, p.kv_type = x.type, p.kv_mode = x.mode;
            if (x.mode == KVG_KV_RING) p.n_sink = 4, p.n_window = 40;
            x.ctx = kvg_context_new(m, p, err, sizeof err);
            FUZZ_CHECK(x.ctx, "context: %s", err);
            decode(x.ctx, 0, 12, 1);
            decode(x.ctx, 1, 40, 2);
            x.other = get_state(x.ctx, 0), x.victim = get_state(x.ctx, 1);
        }
        return t; // kept for the process, as the model (static: reachable, not a leak)
    }();
    return *all;
}

struct Positions {
    int32_t min, max, n_past;
    bool operator==(const Positions & o) const { return min == o.min && max == o.max && n_past == o.n_past; }
};

Positions positions(kvg_context * c, int seq) {
    return {kvg_seq_pos_min(c, seq), kvg_seq_pos_max(c, seq), kvg_seq_n_past(c, seq)};
}

// kvgraph.h: n_past counts the positions decoded (at most INT32_MAX: positions are int32;
// linear: at most n_ctx); a sequence holding nothing has pos_min = pos_max = -1 whatever its
// n_past (middle removals can empty it); else 0 <= pos_min <= pos_max < n_past.
void consistent_positions(const Target & t, const char * when) {
    const Positions p = positions(t.ctx, 1);
    const bool empty = p.min == -1 && p.max == -1;
    FUZZ_CHECK(p.n_past >= 0 && (t.mode == KVG_KV_RING || p.n_past <= N_CTX) &&
                   (empty || (0 <= p.min && p.min <= p.max && p.max < p.n_past)),
               "%s: pos_min %d pos_max %d n_past %d", when, p.min, p.max, p.n_past);
}

// The layout's checksum (kv-state.cpp): FNV-1a 64 of everything before the last 8 bytes.
void reseal(std::vector<uint8_t> * s) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 8 < s->size(); ++i) h = (h ^ (*s)[i]) * 1099511628211ull;
    std::memcpy(s->data() + s->size() - 8, &h, 8);
}

Target & target_for(const std::vector<uint8_t> & s) {
    int32_t type = -1, mode = -1; // header: type at byte 24, mode at 28
    if (s.size() >= 32) std::memcpy(&type, &s[24], 4), std::memcpy(&mode, &s[28], 4);
    for (Target & t : targets()) {
        if (t.ggml_type == type && (int32_t) t.mode == mode) return t;
    }
    return targets()[0];
}

// An accepted state: the sequence decodes a token at n_past, or says why not.
void try_decode(const Target & t) {
    const Positions before = positions(t.ctx, 1);
    if (before.n_past == INT32_MAX || (t.mode == KVG_KV_LINEAR && before.n_past >= N_CTX)) return;
    char err[256] = "";
    const kvg_token tok = 5;
    const int32_t seq = 1;
    if (kvg_decode_batch(t.ctx, &tok, &before.n_past, &seq, 1, err, sizeof err)) {
        const Positions after = positions(t.ctx, 1);
        FUZZ_CHECK(after.max == before.n_past && after.n_past == before.n_past + 1,
                   "after a decode at %d: pos_max %d n_past %d", before.n_past, after.max, after.n_past);
    } else {
        FUZZ_CHECK(err[0], "decode failed without a message");
    }
    consistent_positions(t, "after a decode");
}

// One restore attempt into sequence 1 (by bytes or by file): the invariants, then the
// victim back for the next attempt.
void check_restore(Target & t, bool ok, const char * err, const Positions & before, const char * how) {
    if (!ok) {
        FUZZ_CHECK(err[0], "%s: refused without a message", how);
        FUZZ_CHECK(positions(t.ctx, 1) == before, "%s: a refused state changed the positions", how);
        FUZZ_CHECK(get_state(t.ctx, 1) == t.victim, "%s: a refused state changed the sequence: %s", how, err);
    } else {
        consistent_positions(t, how);
        try_decode(t);
    }
    FUZZ_CHECK(get_state(t.ctx, 0) == t.other, "%s: the other sequence changed (%s)", how, ok ? "accepted" : err);
    char e[512] = "";
    if (ok) FUZZ_CHECK(kvg_state_seq_set(t.ctx, 1, t.victim.data(), t.victim.size(), e, sizeof e), "restore: %s", e);
}

// kvg_state_seq_load_file of these bytes as a file.
void load_file(Target & t, const std::vector<uint8_t> & bytes, const char * how) {
    static fuzz::MemFile file;
    const std::string & path = file.write(bytes.data(), bytes.size());
    const Positions before = positions(t.ctx, 1);
    kvg_token tokens[4];
    char err[512] = "";
    const int32_t n = kvg_state_seq_load_file(t.ctx, 1, path.c_str(), tokens, 4, err, sizeof err);
    FUZZ_CHECK(n >= -1 && n <= 4, "%s: %d tokens", how, n);
    check_restore(t, n >= 0, err, before, how);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::vector<uint8_t> s(data, data + size);
    if (s.size() >= 8) reseal(&s);
    Target & t = target_for(s);
    const Positions before = positions(t.ctx, 1);
    char err[512] = "";
    check_restore(t, kvg_state_seq_set(t.ctx, 1, s.data(), s.size(), err, sizeof err), err, before, "state_seq_set");
    // the same state in a state file ("KVGF", version 1, two tokens, its size, the state), and
    // the raw input as a file, which fuzzes the file's own header
    std::vector<uint8_t> f = {'K', 'V', 'G', 'F', 1, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0};
    const uint64_t n = s.size();
    f.insert(f.end(), (const uint8_t *) &n, (const uint8_t *) &n + 8);
    f.insert(f.end(), s.begin(), s.end());
    load_file(t, f, "load_file");
    load_file(targets()[0], std::vector<uint8_t>(data, data + size), "load_file (raw)");
    return 0;
}
