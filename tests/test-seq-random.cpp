// Random edit sequences (issue 48): decode_batch, kvg_seq_rm, kvg_seq_cp, kvg_seq_add,
// kvg_seq_keep and kvg_state_seq_get/set over 4-8 sequences, in every cache type and mode,
// checked step by step against a model of the rules kvgraph.h states: which calls are
// refused (and that a refusal changes nothing), the positions each sequence holds
// (pos_min, pos_max, n_past), and, for a sequence that holds exactly what a context fed its
// tokens would hold, its logits against such a fresh context.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-runtime-common.h"

#include <climits>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

const int N_CTX = 64, N_SINK = 4, N_WINDOW = 40, GROUP = 32;

// One sequence as kvgraph.h describes it.
struct SeqModel {
    std::vector<int> slot_pos = std::vector<int>(N_CTX, -1); // position each slot holds, -1: none
    std::vector<int> tok; // the token decoded at each position < n_past (-1: unknown)
    int n_past = 0;
    bool clean = true;          // holds what a fresh context fed tok[0..n_past) holds
    int recent = -1, prev = -1; // q8_0: the group of slots written last, and the one before it
};

struct Outcome {
    bool ok;
    kvg_status status; // when refused
};
const Outcome ACCEPT = {true, KVG_STATUS_OK};

struct Harness {
    kvg_model * m;
    kvg_kv_type type;
    bool ring;
    int n_seq;
    kvg_context * ctx = nullptr;
    std::vector<SeqModel> seqs;
    std::mt19937 rng;
    int nv;
    float worst = 0.0f; // largest logit difference against a fresh context, relative to the top logit
    int n_compared = 0, n_refused = 0;
    std::map<std::string, int> n_accepted; // per call

    Harness(kvg_model * model, kvg_kv_type t, bool r, int n, uint32_t seed)
        : m(model), type(t), ring(r), n_seq(n), seqs(n), rng(seed), nv(kvg_model_n_vocab(model)) {
        ctx = new_ctx(m, params(n_seq));
    }
    ~Harness() { kvg_context_free(ctx); }

    kvg_context_params params(int n) const {
        kvg_context_params p = kvg_context_default_params();
        p.n_ctx = N_CTX, p.n_seq_max = n, p.n_threads = 2, p.kv_type = type;
        p.kv_mode = ring ? KVG_KV_RING : KVG_KV_LINEAR;
        if (ring) p.n_sink = N_SINK, p.n_window = N_WINDOW;
        return p;
    }
    int rand(int lo, int hi) { return lo + (int) (rng() % (uint32_t) (hi - lo + 1)); } // [lo, hi]
    bool grouped() const { return type == KVG_KV_Q8_0; }
    bool shifts() const { return !ring && !grouped(); } // kvg_seq_add and ranges with p0 > 0

    // ---- the rules ----
    int slot(int p) const { return !ring || p < N_SINK ? p : N_SINK + (p - N_SINK) % (N_CTX - N_SINK); }
    bool held(const SeqModel & s, int q) const { return q >= 0 && s.slot_pos[slot(q)] == q; }
    int pos_min(const SeqModel & s) const {
        int r = -1;
        for (int q : s.slot_pos)
            if (q >= 0 && (r < 0 || q < r)) r = q;
        return r;
    }
    int pos_max(const SeqModel & s) const {
        int r = -1;
        for (int q : s.slot_pos) r = std::max(r, q);
        return r;
    }
    // A ring continues at p only while it holds the window before p (sinks apart).
    bool window_held(const SeqModel & s, int p) const {
        for (int q = std::max(N_SINK, p - N_WINDOW + 1); ring && q < p; ++q) {
            if (!held(s, q)) return false;
        }
        return true;
    }
    // q8_0: a cut inside a group is exact only in the two groups written last.
    bool exact_cut(const SeqModel & s, int p) const {
        const int g = slot(p) / GROUP;
        return !grouped() || slot(p) % GROUP == 0 || g == s.recent || g == s.prev;
    }
    void write(SeqModel & s, int p, int t) {
        s.slot_pos[slot(p)] = p;
        if ((int) s.tok.size() <= p) s.tok.resize(p + 1, -1);
        s.tok[p] = t;
        s.n_past = std::max(s.n_past, p + 1);
        const int g = slot(p) / GROUP;
        if (g != s.recent) s.prev = s.recent, s.recent = g;
    }
    void forget_from(SeqModel & s, int p) {
        for (int & q : s.slot_pos) q = q >= p ? -1 : q;
        s.n_past = std::min(s.n_past, p);
        s.tok.resize(std::min<size_t>(s.tok.size(), p));
        if (p == 0) s.clean = true;
    }

    void check_positions(const char * when) {
        const std::string what = when;
        for (int i = 0; i < n_seq; ++i) {
            CAPTURE(what);
            CAPTURE(i);
            CHECK(kvg_seq_pos_min(ctx, i) == pos_min(seqs[i]));
            CHECK(kvg_seq_pos_max(ctx, i) == pos_max(seqs[i]));
            CHECK(kvg_seq_n_past(ctx, i) == seqs[i].n_past);
        }
    }
    // The call's result against the rules' prediction; a refusal changes no sequence.
    void check_outcome(const char * op, bool got, const Outcome & want, const char * err,
                       const std::vector<std::vector<uint8_t>> & before) {
        const std::string call = op, message = err;
        CAPTURE(call);
        CAPTURE(message);
        REQUIRE(got == want.ok);
        if (got) ++n_accepted[op];
        if (got) return;
        ++n_refused;
        CHECK(err[0] != '\0');
        CHECK(kvg_last_status() == want.status);
        for (int i = 0; i < n_seq; ++i) CHECK(seq_state(ctx, i) == before[i]);
    }
    std::vector<std::vector<uint8_t>> states() {
        std::vector<std::vector<uint8_t>> out;
        for (int i = 0; i < n_seq; ++i) out.push_back(seq_state(ctx, i));
        return out;
    }

    void step_decode();
    void step_rm();
    void step_cp();
    void step_add();
    void step_keep();
    void step_state();
    void compare_fresh(int seq, const float * logits);
    Outcome rm_rule(SeqModel & s, int p0, int p1, bool apply);
};

// Logits of seq's last token against a fresh context fed the same tokens in one call:
// bit for bit where batchings agree (kvgraph.h, kvg_seq_rm), else within the rounding of
// other batchings; q8_0 is not promised bit for bit (its keys are rounded per group).
void Harness::compare_fresh(int seq, const float * logits) {
    const SeqModel & s = seqs[seq];
    kvg_context * fresh = new_ctx(m, params(1));
    char err[512] = "";
    const float * want = kvg_decode(fresh, s.tok.data(), s.n_past, 0, err, sizeof err);
    INFO(err);
    REQUIRE(want != nullptr);
    float top = 0.0f;
    for (int i = 0; i < nv; ++i) top = std::max(top, std::fabs(want[i]));
    const float diff = max_diff(logits, want, nv) / top;
    worst = std::max(worst, diff);
    ++n_compared;
    CAPTURE(seq);
    CAPTURE(s.n_past);
    if (type == KVG_KV_Q8_0) CHECK(diff <= (ggml_cpu_has_blas() ? 1e-3f : 1e-4f)); // as test-kv-edit's q8_0 rollbacks
    else if (batchings_agree_bitwise()) CHECK(diff == 0.0f);
    else CHECK(diff <= 1e-3f);
    kvg_context_free(fresh);
}

void Harness::step_decode() {
    // 1..3 sequences, 1..6 tokens each at their n_past, interleaved at random
    std::vector<int> which(n_seq);
    for (int i = 0; i < n_seq; ++i) which[i] = i;
    std::shuffle(which.begin(), which.end(), rng);
    which.resize(rand(1, std::min(3, n_seq)));
    std::vector<int> left(n_seq, 0), toks, pos, ids;
    for (int s : which) left[s] = rand(1, 6);
    Outcome want = ACCEPT;
    for (int s : which) {
        if (!ring && seqs[s].n_past + left[s] > N_CTX) want = {false, KVG_STATUS_CONTEXT_FULL};
        if (!window_held(seqs[s], seqs[s].n_past)) want = {false, KVG_STATUS_CONTEXT_FULL};
    }
    std::vector<int> next(n_seq);
    for (int s = 0; s < n_seq; ++s) next[s] = seqs[s].n_past;
    int remaining = 0;
    for (int s : which) remaining += left[s];
    for (; remaining > 0; --remaining) {
        int pick = rand(0, remaining - 1), s = 0;
        for (int w : which) {
            if (pick < left[w]) {
                s = w;
                break;
            }
            pick -= left[w];
        }
        --left[s];
        toks.push_back(rand(3, nv - 1)), pos.push_back(next[s]++), ids.push_back(s);
    }
    const auto before = states();
    char err[512] = "";
    const bool got = kvg_decode_batch(ctx, toks.data(), pos.data(), ids.data(), (int32_t) toks.size(), err, sizeof err);
    check_outcome("decode", got, want, err, before);
    if (!got) return;
    int checked = -1;
    for (size_t i = 0; i < toks.size(); ++i) write(seqs[ids[i]], pos[i], toks[i]);
    for (size_t i = toks.size(); i-- > 0 && checked < 0;) { // one clean sequence's last token
        if (seqs[ids[i]].clean && pos[i] == seqs[ids[i]].n_past - 1)
            checked = ids[i], compare_fresh(ids[i], kvg_get_logits(ctx, (int32_t) i));
    }
}

// kvg_seq_rm's rules; with apply, the model follows an accepted call.
Outcome Harness::rm_rule(SeqModel & s, int p0, int p1, bool apply) {
    const int from = p0 < 0 ? 0 : p0;
    const long long to = p1 < 0 ? LLONG_MAX : p1;
    if (from > to) return {false, KVG_STATUS_BAD_INPUT};
    if (from >= s.n_past || from >= to) return ACCEPT;
    if (to < s.n_past) { // a middle range
        if (ring && std::max({from, N_SINK, s.n_past - N_WINDOW + 1}) < to) return {false, KVG_STATUS_UNSUPPORTED};
        for (int & q : s.slot_pos) {
            if (apply && q >= from && q < to) q = -1, s.clean = false;
        }
        return ACCEPT;
    }
    if (!exact_cut(s, from)) return {false, KVG_STATUS_UNSUPPORTED};
    if (!window_held(s, from)) return {false, KVG_STATUS_CONTEXT_FULL};
    if (apply) forget_from(s, from);
    return ACCEPT;
}

void Harness::step_rm() {
    const int seq = rand(0, n_seq - 1), n = seqs[seq].n_past;
    int p0 = rand(-1, n), p1 = -1;
    switch (rand(0, 3)) {
        case 0: break;                               // a suffix
        case 1: p1 = rand(p0 + 1, n + 1); break;     // a middle range (or a suffix)
        case 2: p0 = n - rand(1, 8), p1 = -1; break; // a short rollback
        default: p1 = rand(-1, n + 1);               // anything, p0 > p1 included
    }
    const auto before = states();
    SeqModel after = seqs[seq];
    const Outcome want = rm_rule(after, p0, p1, true);
    char err[512] = "";
    check_outcome("rm", kvg_seq_rm(ctx, seq, p0, p1, err, sizeof err), want, err, before);
    if (want.ok) seqs[seq] = after;
}

void Harness::step_cp() {
    const int src = rand(0, n_seq - 1), dst = rand(0, 3) == 0 ? src : rand(0, n_seq - 1);
    const int n = seqs[src].n_past;
    const int p0 = rand(0, 3) == 0 ? rand(1, N_CTX - 1) : rand(-1, 0), p1 = rand(0, 2) == 0 ? -1 : rand(0, n + 2);
    Outcome want = ACCEPT;
    SeqModel d = seqs[dst];
    const int end = std::min(p1 < 0 ? INT_MAX : p1, n);
    if (p0 > 0 && p1 >= 0 && p0 > p1) want = {false, KVG_STATUS_BAD_INPUT};
    else if (p0 > 0 && !shifts()) want = {false, KVG_STATUS_UNSUPPORTED};
    else if (p0 > 0) { // a range joins what dst holds
        for (int j = p0; j < end && src != dst; ++j) {
            if ((int) d.tok.size() < end) d.tok.resize(end, -1);
            d.slot_pos[j] = seqs[src].slot_pos[j], d.tok[j] = seqs[src].tok[j], d.clean = false;
        }
        if (p0 < end && src != dst) d.n_past = pos_max(d) + 1;
    } else if (end < n && (ring || !exact_cut(seqs[src], end))) {
        want = {false, KVG_STATUS_UNSUPPORTED};
    } else if (src == dst) { // a prefix onto itself: a rollback to it
        if (end < n) want = rm_rule(d, end, -1, true);
    } else {
        d = seqs[src];
        if (end < n) forget_from(d, end);
    }
    const auto before = states();
    char err[512] = "";
    check_outcome("cp", kvg_seq_cp(ctx, src, dst, p0, p1, err, sizeof err), want, err, before);
    if (want.ok) seqs[dst] = d;
}

void Harness::step_add() {
    const int seq = rand(0, n_seq - 1), n = seqs[seq].n_past;
    const int p0 = rand(-1, n), p1 = rand(0, 1) ? -1 : rand(0, n + 1), delta = rand(-12, 12);
    SeqModel s = seqs[seq];
    const int from = p0 < 0 ? 0 : p0, to = std::min(p1 < 0 ? INT_MAX : p1, n);
    Outcome want = ACCEPT;
    if (p1 >= 0 && from > p1) want = {false, KVG_STATUS_BAD_INPUT};
    else if (!shifts()) want = {false, KVG_STATUS_UNSUPPORTED};
    else if (delta != 0 && from < to) {
        std::vector<int> moved(N_CTX, -1);
        for (int q : s.slot_pos) {
            if (q < 0) continue;
            const bool in = q >= from && q < to;
            if ((!in && q >= from + delta && q < to + delta) || (in && (q + delta < 0 || q + delta >= N_CTX))) {
                want = {false, KVG_STATUS_BAD_INPUT};
            } else {
                moved[in ? q + delta : q] = in ? q + delta : q;
            }
        }
        s.slot_pos = moved, s.clean = false, s.n_past = pos_max(s) + 1;
    }
    const auto before = states();
    char err[512] = "";
    check_outcome("add", kvg_seq_add(ctx, seq, p0, p1, delta, err, sizeof err), want, err, before);
    if (want.ok) seqs[seq] = s;
}

void Harness::step_keep() {
    const int seq = rand(0, n_seq - 1);
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_seq_keep(ctx, seq, err, sizeof err), err);
    for (int i = 0; i < n_seq; ++i) {
        if (i != seq) forget_from(seqs[i], 0);
    }
}

// A state moves to another sequence bit for bit, and the model's sequence with it.
void Harness::step_state() {
    const int a = rand(0, n_seq - 1), b = rand(0, n_seq - 1);
    const std::vector<uint8_t> blob = seq_state(ctx, a);
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_state_seq_set(ctx, b, blob.data(), blob.size(), err, sizeof err), err);
    CHECK(seq_state(ctx, b) == blob);
    seqs[b] = seqs[a];
}

void run(kvg_model * m, kvg_kv_type type, bool ring, int n_seq, int steps, uint32_t seed) {
    Harness h(m, type, ring, n_seq, seed);
    for (int i = 0; i < steps; ++i) {
        CAPTURE(i);
        const int op = h.rand(0, 99);
        if (op < 45) h.step_decode();
        else if (op < 65) h.step_rm();
        else if (op < 77) h.step_cp();
        else if (op < 85) h.step_add();
        else if (op < 88) h.step_keep();
        else h.step_state();
        h.check_positions("after the step");
    }
    MESSAGE("kv type ", (int) type, std::string(ring ? " ring" : " linear"), ", ", n_seq, " sequences, ", steps,
            " steps: ", h.n_refused, " refusals, ", h.n_compared, " logit comparisons, worst ", h.worst,
            " of the top logit");
    std::string accepted;
    for (const auto & x : h.n_accepted) accepted += " " + x.first + " " + std::to_string(x.second);
    MESSAGE("accepted:", accepted);
    CHECK(h.n_compared > steps / 20); // the comparisons happened
}

} // namespace

TEST_CASE("random edit sequences follow kvgraph.h's rules in every cache type and mode") {
    kvg_model * m = load_shared_model("stories260K.bin");
    uint32_t seed = 1;
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16, KVG_KV_Q8_0}) {
        for (bool ring : {false, true}) {
            CAPTURE(type);
            CAPTURE(ring);
            run(m, type, ring, 4 + (int) (seed % 5), 600, seed);
            ++seed;
        }
    }
    kvg_model_free(m);
}
