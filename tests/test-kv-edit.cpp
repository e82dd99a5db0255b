// Editing sequences (kvg_seq_rm / kvg_seq_keep / kvg_seq_pos_min / kvg_seq_pos_max): a
// rollback gives the logits of a fresh context fed the kept tokens, in every cache type and
// mode where it is allowed; where it could not be exact it is refused and nothing changes.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "family-common.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "kvgraph.h"
#include "test-runtime-common.h"

#include <cstring>
#include <fstream>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<int> random_tokens(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int> t(n);
    for (int & x : t) x = 3 + (int) (rng() % 509); // stories260K: 512 ids, 0..2 special
    return t;
}

kvg_context_params params(kvg_kv_type type, kvg_kv_mode mode = KVG_KV_LINEAR) {
    kvg_context_params p = kvg_context_default_params();
    p.n_threads = 2;
    p.kv_type = type;
    p.kv_mode = mode;
    if (mode == KVG_KV_RING) p.n_ctx = 64, p.n_sink = 4, p.n_window = 40; // slack 20
    return p;
}

// Logits of the same tokens decoded in different batches: bit for bit where the products round
// alike for any number of rows (batchings_agree_bitwise), else within 1e-3 of the largest logit
// (an f16 cache re-rounds a 1e-5 difference to its own step).
void check_same_logits(const std::vector<float> & got, const std::vector<float> & want) {
    REQUIRE(got.size() == want.size());
    if (batchings_agree_bitwise()) {
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        return;
    }
    float top = 0.0f;
    for (float x : want) top = std::max(top, std::fabs(x));
    CHECK(max_diff(got.data(), want.data(), got.size()) <= 1e-3f * top);
}

// Decodes tokens at pos (sequence 0), in pieces of `piece` tokens, then n greedy tokens;
// returns the logits of every greedy step.
std::vector<float> decode_then_greedy(kvg_context * c, const std::vector<int> & tokens, int pos, int piece, int n,
                                      int nv, std::vector<int> * picked = nullptr) {
    char err[512] = "";
    const float * l = nullptr;
    for (size_t i = 0; i < tokens.size(); i += piece) {
        const int m = (int) std::min<size_t>(piece, tokens.size() - i);
        l = kvg_decode(c, tokens.data() + i, m, pos + (int) i, err, sizeof err);
        INFO(err);
        REQUIRE(l != nullptr);
    }
    std::vector<float> out;
    int p = pos + (int) tokens.size();
    for (int k = 0; k < n; ++k) {
        out.insert(out.end(), l, l + nv);
        const int t = kvg_argmax(l, nv);
        if (picked) picked->push_back(t);
        l = kvg_decode(c, &t, 1, p++, err, sizeof err);
        INFO(err);
        REQUIRE(l != nullptr);
    }
    return out;
}

// A context that decoded `seen` (40 tokens in one batch, then one at a time) and rolled back
// to `keep`, against a fresh one fed the first `keep` tokens the same way, both continuing with
// `cont` and 24 greedy tokens. Below 40 kept tokens the fresh context's batch is shorter, so
// its products may round differently (check_same_logits).
void check_rollback(kvg_model * m, const kvg_context_params & p, const std::vector<int> & seen, int keep,
                    const std::vector<int> & cont, bool bit_identical) {
    const int nv = kvg_model_n_vocab(m);
    kvg_context * a = new_ctx(m, p);
    decode_then_greedy(a, std::vector<int>(seen.begin(), seen.begin() + 40), 0, 40, 0, nv);
    decode_then_greedy(a, std::vector<int>(seen.begin() + 40, seen.end()), 40, 1, 0, nv);
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_seq_rm(a, 0, keep, -1, err, sizeof err), err);
    CHECK(kvg_seq_pos_max(a, 0) == keep - 1);
    std::vector<int> ta, tb;
    const std::vector<float> la = decode_then_greedy(a, cont, keep, 3, 24, nv, &ta);
    kvg_context * b = new_ctx(m, p);
    const int first = std::min(keep, 40);
    decode_then_greedy(b, std::vector<int>(seen.begin(), seen.begin() + first), 0, 40, 0, nv);
    decode_then_greedy(b, std::vector<int>(seen.begin() + first, seen.begin() + keep), first, 1, 0, nv);
    const std::vector<float> lb = decode_then_greedy(b, cont, keep, 3, 24, nv, &tb);
    CHECK(ta == tb);
    float top = 0.0f;
    for (float x : lb) top = std::max(top, std::fabs(x));
    const float diff = max_diff(la.data(), lb.data(), la.size());
    MESSAGE("kv type ", p.kv_type, " mode ", p.kv_mode, ", rolled back ", seen.size(), " -> ", keep, ": max |dlogit| ", diff,
            " of ", top);
    if (bit_identical && keep >= 40) CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
    else if (bit_identical) check_same_logits(la, lb);
    else CHECK(diff <= (ggml_cpu_has_blas() ? 1e-3f : 1e-4f) * top); // q8_0: measured 0 on the panel path too
    kvg_context_free(a);
    kvg_context_free(b);
}

} // namespace

TEST_CASE("rollback with kvg_seq_rm: f32 and f16 caches give a fresh context's logits bit for bit") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const std::vector<int> seen = random_tokens(50, 1), cont = random_tokens(8, 2);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16}) {
        for (int keep : {45, 40, 12, 1}) check_rollback(m, params(type), seen, keep, cont, true);
    }
    kvg_model_free(m);
}

TEST_CASE("rollback with kvg_seq_rm: a q8_0 cache in the open group, back across a group boundary, at a boundary") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const std::vector<int> seen = random_tokens(75, 3), cont = random_tokens(8, 4);
    // 75 positions: group 2 (64..74) is open; 50 and 33 lie in group 1, the one left last
    for (int keep : {70, 64, 50, 33, 32}) check_rollback(m, params(KVG_KV_Q8_0), seen, keep, cont, false);
    // inside group 0 (positions 0..31), two groups back: refused, and the sequence keeps its 75
    kvg_context * c = new_ctx(m, params(KVG_KV_Q8_0));
    decode_then_greedy(c, seen, 0, 75, 0, kvg_model_n_vocab(m));
    char err[512] = "";
    CHECK_FALSE(kvg_seq_rm(c, 0, 20, -1, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
    CHECK(std::string(err).find("kept only rounded") != std::string::npos);
    CHECK(kvg_seq_pos_max(c, 0) == 74);
    CHECK(kvg_seq_rm(c, 0, 32, -1, err, sizeof err)); // the boundary is exact
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("rollback with kvg_seq_rm: a ring within its slack, before and after wrapping; beyond it refused") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const std::vector<int> cont = random_tokens(8, 6);
    check_rollback(m, params(KVG_KV_F32, KVG_KV_RING), random_tokens(50, 5), 45, cont, true);
    check_rollback(m, params(KVG_KV_F32, KVG_KV_RING), random_tokens(100, 7), 95, cont, true); // wrapped
    kvg_context * c = new_ctx(m, params(KVG_KV_F32, KVG_KV_RING));
    decode_then_greedy(c, random_tokens(100, 7), 0, 10, 0, kvg_model_n_vocab(m));
    char err[512] = "";
    CHECK_FALSE(kvg_seq_rm(c, 0, 50, -1, err, sizeof err)); // the window before 50 was overwritten
    CHECK(kvg_last_status() == KVG_STATUS_CONTEXT_FULL);
    CHECK(std::string(err).find("no longer holds") != std::string::npos);
    CHECK(kvg_seq_pos_max(c, 0) == 99);
    CHECK(kvg_seq_pos_min(c, 0) == 0); // a sink
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("kvg_seq_rm of a middle range, kvg_seq_keep, positions, bad input changes nothing") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    kvg_context_params p = params(KVG_KV_F32);
    p.n_seq_max = 3;
    kvg_context * c = new_ctx(m, p);
    const std::vector<int> t = random_tokens(30, 8);
    char err[512] = "";
    for (int s = 0; s < 3; ++s) {
        std::vector<int> pos(30), seq(30, s);
        for (int i = 0; i < 30; ++i) pos[i] = i;
        REQUIRE(kvg_decode_batch(c, t.data(), pos.data(), seq.data(), 30, err, sizeof err));
    }
    // bad input: false, a message, nothing changed
    CHECK_FALSE(kvg_seq_rm(c, 3, 0, -1, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK_FALSE(kvg_seq_rm(c, 0, 10, 5, err, sizeof err));
    CHECK(std::string(err).find("past p1") != std::string::npos);
    CHECK_FALSE(kvg_seq_keep(c, -1, err, sizeof err));
    CHECK_FALSE(kvg_seq_rm(nullptr, 0, 0, -1, err, sizeof err));
    CHECK(kvg_seq_pos_max(nullptr, 0) == -1);
    CHECK(kvg_seq_pos_max(c, 7) == -1);
    for (int s = 0; s < 3; ++s) CHECK(kvg_seq_pos_max(c, s) == 29);

    // middle: positions 0..9 of sequence 1 are no longer attended; the others keep theirs
    REQUIRE(kvg_seq_rm(c, 1, -1, 10, err, sizeof err));
    CHECK(kvg_seq_pos_min(c, 1) == 10);
    CHECK(kvg_seq_pos_max(c, 1) == 29);
    CHECK(kvg_n_past(c) == 30);
    const int next = 5;
    std::vector<int> pos = {30, 30}, seq = {0, 1};
    std::vector<int> toks = {next, next};
    REQUIRE(kvg_decode_batch(c, toks.data(), pos.data(), seq.data(), 2, err, sizeof err));
    const std::vector<float> l0(kvg_get_logits(c, 0), kvg_get_logits(c, 0) + nv);
    const std::vector<float> l1(kvg_get_logits(c, 1), kvg_get_logits(c, 1) + nv);
    CHECK(max_diff(l0.data(), l1.data(), nv) > 1e-3f); // sequence 1 no longer sees 0..9

    // keep: only sequence 2 remains; the others start again at 0
    REQUIRE(kvg_seq_keep(c, 2, err, sizeof err));
    CHECK(kvg_seq_pos_max(c, 0) == -1);
    CHECK(kvg_seq_pos_max(c, 1) == -1);
    CHECK(kvg_seq_pos_max(c, 2) == 29);
    CHECK(kvg_seq_n_past(c, 0) == 0);
    std::vector<int> p0 = {0}, s0 = {0};
    CHECK(kvg_decode_batch(c, t.data(), p0.data(), s0.data(), 1, err, sizeof err));
    // sequence 2 continues as a context that only ever had it
    std::vector<int> p2 = {30}, s2 = {2};
    REQUIRE(kvg_decode_batch(c, &next, p2.data(), s2.data(), 1, err, sizeof err));
    const std::vector<float> kept(kvg_get_logits(c, -1), kvg_get_logits(c, -1) + nv);
    kvg_context * alone = new_ctx(m, params(KVG_KV_F32));
    std::vector<int> t31 = t;
    t31.push_back(next);
    const float * la = kvg_decode(alone, t31.data(), 31, 0, err, sizeof err);
    REQUIRE(la != nullptr);
    CHECK(max_diff(kept.data(), la, nv) <= 1e-4f);
    kvg_context_free(alone);
    kvg_context_free(c);
    kvg_model_free(m);
}

// ---- state ------------------------------------------------------------------------------------------

namespace {

// Logits of sequence seq continuing at pos with `cont` then 16 greedy tokens (one token per call).
std::vector<float> continue_seq(kvg_context * c, int seq, int pos, const std::vector<int> & cont, int nv) {
    char err[512] = "";
    std::vector<float> out;
    int t = cont[0];
    for (int k = 0; k < (int) cont.size() + 16; ++k) {
        if (k < (int) cont.size()) t = cont[k];
        const int32_t p = pos + k;
        REQUIRE_MESSAGE(kvg_decode_batch(c, &t, &p, &seq, 1, err, sizeof err), err);
        const float * l = kvg_get_logits(c, -1);
        out.insert(out.end(), l, l + nv);
        t = kvg_argmax(l, nv);
    }
    return out;
}

} // namespace

TEST_CASE("state round trip into another sequence of another context: bit-identical, every type and mode") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    const std::vector<int> cont = random_tokens(4, 10);
    struct Case {
        kvg_kv_type type;
        kvg_kv_mode mode;
        int n;
    };
    for (const Case & k : {Case{KVG_KV_F32, KVG_KV_LINEAR, 50}, Case{KVG_KV_F16, KVG_KV_LINEAR, 50},
                           Case{KVG_KV_Q8_0, KVG_KV_LINEAR, 50}, Case{KVG_KV_F32, KVG_KV_RING, 100},
                           Case{KVG_KV_Q8_0, KVG_KV_RING, 150}}) {
        CAPTURE(k.type);
        CAPTURE(k.mode);
        kvg_context * a = new_ctx(m, params(k.type, k.mode));
        decode_then_greedy(a, random_tokens(k.n, 9), 0, 7, 0, nv);
        const std::vector<uint8_t> state = seq_state(a, 0);
        kvg_context_params pb = params(k.type, k.mode);
        pb.n_seq_max = 2;
        kvg_context * b = new_ctx(m, pb);
        char err[512] = "";
        REQUIRE_MESSAGE(kvg_state_seq_set(b, 1, state.data(), state.size(), err, sizeof err), err);
        CHECK(kvg_seq_pos_max(b, 1) == k.n - 1);
        CHECK(kvg_seq_pos_min(b, 1) == kvg_seq_pos_min(a, 0));
        const std::vector<float> la = continue_seq(a, 0, k.n, cont, nv), lb = continue_seq(b, 1, k.n, cont, nv);
        CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
        kvg_context_free(a);
        kvg_context_free(b);
    }
    // sized by the positions held, not by n_ctx
    kvg_context * c = new_ctx(m, params(KVG_KV_F32));
    decode_then_greedy(c, random_tokens(10, 9), 0, 10, 0, nv);
    const size_t s10 = kvg_state_seq_size(c, 0);
    decode_then_greedy(c, random_tokens(40, 9), 10, 40, 0, nv);
    const size_t s50 = kvg_state_seq_size(c, 0);
    const size_t per_pos = 2 * (size_t) kvg_model_n_layer(m) * (size_t) (kvg_model_n_embd(m) / kvg_model_n_head(m) *
                                                                       kvg_model_n_head_kv(m)) * sizeof(float);
    CHECK(s50 - s10 == 40 * (per_pos + 2 * sizeof(int64_t)));
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("a bad state is refused and the sequence keeps what it held") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    kvg_context * a = new_ctx(m, params(KVG_KV_F32));
    decode_then_greedy(a, random_tokens(30, 11), 0, 30, 0, nv);
    const std::vector<uint8_t> good = seq_state(a, 0);
    kvg_context * b = new_ctx(m, params(KVG_KV_F32));
    decode_then_greedy(b, random_tokens(20, 12), 0, 20, 0, nv); // what b must keep
    const std::vector<uint8_t> b_before = seq_state(b, 0);
    char err[512] = "";
    auto refused = [&](const std::vector<uint8_t> & s, size_t size, const char * why) {
        CAPTURE(why);
        CHECK_FALSE(kvg_state_seq_set(b, 0, s.data(), size, err, sizeof err));
        CHECK(std::string(err).find(why) != std::string::npos);
        CHECK(seq_state(b, 0) == b_before);
    };
    refused(good, good.size() - 1, "checksum");
    std::vector<uint8_t> flipped = good;
    flipped[flipped.size() / 2] ^= 1;
    refused(flipped, flipped.size(), "checksum");
    refused(good, 10, "too short");
    kvg_context * f16 = new_ctx(m, params(KVG_KV_F16));
    decode_then_greedy(f16, random_tokens(5, 1), 0, 5, 0, nv);
    refused(seq_state(f16, 0), seq_state(f16, 0).size(), "f16 cache");
    kvg_context * ring = new_ctx(m, params(KVG_KV_F32, KVG_KV_RING));
    decode_then_greedy(ring, random_tokens(5, 1), 0, 5, 0, nv);
    refused(seq_state(ring, 0), seq_state(ring, 0).size(), "another mode");
    kvg_context_params small = params(KVG_KV_F32);
    small.n_ctx = 16;
    kvg_context * s = new_ctx(m, small);
    CHECK_FALSE(kvg_state_seq_set(s, 0, good.data(), good.size(), err, sizeof err)); // 30 positions, 16 slots
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    kvg_model * other = load_shared_model("aidreams260K.bin");
    kvg_context * o = new_ctx(other, params(KVG_KV_F32));
    CHECK_FALSE(kvg_state_seq_set(o, 0, good.data(), good.size(), err, sizeof err));
    CHECK(std::string(err).find("another model") != std::string::npos);
    CHECK(kvg_state_seq_get(a, 0, nullptr, 0, err, sizeof err) == 0);
    CHECK(kvg_state_seq_size(a, 5) == 0);
    for (kvg_context * c : {a, b, f16, ring, s, o}) kvg_context_free(c);
    kvg_model_free(other);
    kvg_model_free(m);
}

TEST_CASE("state files: tokens and state back, atomic, damaged and foreign files refused") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    const std::vector<int> prompt = random_tokens(33, 13);
    kvg_context * a = new_ctx(m, params(KVG_KV_Q8_0));
    decode_then_greedy(a, prompt, 0, 33, 0, nv);
    const std::string path = temp_path("kv-edit", "state.kvgs");
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_state_seq_save_file(a, 0, path.c_str(), prompt.data(), (int32_t) prompt.size(), err, sizeof err), err);
    kvg_context * b = new_ctx(m, params(KVG_KV_Q8_0));
    std::vector<int> got(64, -1);
    CHECK(kvg_state_seq_load_file(b, 0, path.c_str(), got.data(), 64, err, sizeof err) == 33);
    got.resize(33);
    CHECK(got == prompt);
    const std::vector<int> cont = random_tokens(3, 14);
    const std::vector<float> la = continue_seq(a, 0, 33, cont, nv), lb = continue_seq(b, 0, 33, cont, nv);
    CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);

    kvg_context * c = new_ctx(m, params(KVG_KV_Q8_0));
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), got.data(), 10, err, sizeof err) == -1); // n_max too small
    CHECK(kvg_seq_pos_max(c, 0) == -1);
    CHECK(kvg_state_seq_load_file(c, 0, "/nonexistent/state", got.data(), 64, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    const std::string bytes = read_file(path);
    write_file(path, bytes.substr(0, bytes.size() - 9));
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), got.data(), 64, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
    CHECK(kvg_seq_pos_max(c, 0) == -1);
    CHECK_FALSE(kvg_state_seq_save_file(a, 0, "/nonexistent/dir/state", prompt.data(), 33, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    std::remove(path.c_str());
    for (kvg_context * x : {a, b, c}) kvg_context_free(x);
    kvg_model_free(m);
}

// ---- sharing a prefix ---------------------------------------------------------------------------------

namespace {

long resident_kib() {
    std::ifstream f("/proc/self/statm");
    long size = 0, resident = 0;
    f >> size >> resident;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Sequence s continues with `cont` (one token per call) after the prompt; its logits.
std::vector<float> branch(kvg_context * c, int s, int pos, const std::vector<int> & cont, int nv) {
    std::vector<float> out;
    char err[512] = "";
    for (size_t i = 0; i < cont.size(); ++i) {
        const int32_t p = pos + (int32_t) i;
        REQUIRE_MESSAGE(kvg_decode_batch(c, &cont[i], &p, &s, 1, err, sizeof err), err);
        const float * l = kvg_get_logits(c, -1);
        out.insert(out.end(), l, l + nv);
    }
    return out;
}

} // namespace

TEST_CASE("kvg_seq_cp: branches of a shared prompt give the logits of contexts fed their own tokens; writes copy pages") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    const std::vector<int> prompt = random_tokens(70, 20);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16, KVG_KV_Q8_0}) {
        CAPTURE(type);
        kvg_context_params p = params(type);
        p.n_seq_max = 4;
        kvg_context * c = new_ctx(m, p);
        decode_then_greedy(c, prompt, 0, 70, 0, nv);
        char err[512] = "";
        for (int s = 1; s < 4; ++s) REQUIRE_MESSAGE(kvg_seq_cp(c, 0, s, -1, -1, err, sizeof err), err);
        REQUIRE_MESSAGE(kvg_seq_cp(c, 0, 3, 0, 64, err, sizeof err), err); // a shorter prefix (a group boundary)
        CHECK(kvg_seq_pos_max(c, 3) == 63);
        // sequence 1 rewrites shared rows (from position 40, inside pages it shares with
        // sequence 0): copy-on-write keeps sequence 0's rows, checked when 0 continues after it
        REQUIRE(kvg_seq_rm(c, 1, type == KVG_KV_Q8_0 ? 64 : 40, -1, err, sizeof err));
        for (int s : {1, 0, 2, 3}) {
            CAPTURE(s);
            const int start = s == 3 || (s == 1 && type == KVG_KV_Q8_0) ? 64 : s == 1 ? 40 : 70;
            const std::vector<int> cont = random_tokens(12, 30 + s);
            const std::vector<float> got = branch(c, s, start, cont, nv);
            kvg_context * alone = new_ctx(m, params(type));
            std::vector<int> all(prompt.begin(), prompt.begin() + start);
            decode_then_greedy(alone, all, 0, 70, 0, nv);
            const std::vector<float> want = branch(alone, 0, start, cont, nv);
            check_same_logits(got, want);
            kvg_context_free(alone);
        }
        // q8_0: a cut inside group 0 (positions 0..31), two groups before the open one, is refused
        if (type == KVG_KV_Q8_0) {
            CHECK_FALSE(kvg_seq_cp(c, 0, 1, 0, 20, err, sizeof err));
            CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
        }
        if (type == KVG_KV_Q8_0) CHECK_FALSE(kvg_seq_cp(c, 0, 1, 5, -1, err, sizeof err)); // a later range: groups would mix
        CHECK_FALSE(kvg_seq_cp(c, 0, 9, 0, -1, err, sizeof err));
        kvg_context_free(c);
    }
    kvg_model_free(m);
}

TEST_CASE("kvg_seq_cp: sixteen sequences sharing a 240-token prompt keep it resident once") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    const std::vector<int> prompt = random_tokens(240, 40);
    const size_t kv_per_pos = 2 * (size_t) kvg_model_n_layer(m) *
                              (size_t) (kvg_model_n_embd(m) / kvg_model_n_head(m) * kvg_model_n_head_kv(m)) * sizeof(float);
    long growth[2];
    for (int shared = 0; shared < 2; ++shared) {
        kvg_context_params p = params(KVG_KV_F32);
        p.n_seq_max = 16;
        p.n_ctx = 512;
        kvg_context * c = new_ctx(m, p);
        char err[512] = "";
        decode_then_greedy(c, random_tokens(4, 1), 0, 4, 0, nv); // graphs built before measuring
        REQUIRE(kvg_seq_rm(c, 0, 0, -1, err, sizeof err));
        const long before = resident_kib();
        for (int s = 0; s < 16; ++s) {
            if (shared && s > 0) {
                REQUIRE(kvg_seq_cp(c, 0, s, -1, -1, err, sizeof err));
                continue;
            }
            std::vector<int32_t> pos(240), seq(240, s);
            for (int i = 0; i < 240; ++i) pos[i] = i;
            REQUIRE_MESSAGE(kvg_decode_batch(c, prompt.data(), pos.data(), seq.data(), 240, err, sizeof err), err);
        }
        for (int s = 0; s < 16; ++s) branch(c, s, 240, random_tokens(16, 50 + s), nv);
        growth[shared] = resident_kib() - before;
        kvg_context_free(c);
    }
    const double fifteen_prefixes_kib = 15.0 * 240 * (double) kv_per_pos / 1024.0;
    MESSAGE("resident growth: decoded 16 times ", growth[0], " KiB, shared ", growth[1], " KiB; 15 prefixes are ",
            fifteen_prefixes_kib, " KiB");
    CHECK(growth[0] - growth[1] >= 0.7 * fifteen_prefixes_kib);
    kvg_model_free(m);
}

// ---- shifting positions -----------------------------------------------------------------------------

namespace {

// Changes to the file: Llama 3's rope (pair k's angle divided by factors[k], rope_freqs.weight),
// the rope scaling keys, and things kvgraph must refuse.
struct RopeChange {
    std::vector<float> factors;  // empty: no rope_freqs tensor
    float linear = 0.0f;         // llama.rope.scaling.factor; 0: no scaling keys
    std::string type = "linear"; // llama.rope.scaling.type when linear != 0
    std::string extra_tensor;    // a tensor of that name added ([n_embd] f32)
    int key_length = 0;          // llama.attention.key_length; 0: no key
    std::string arch = "llama";  // another architecture of the same layer: the llama.* keys under its prefix
};

// The file's llama.* keys under arch's prefix, general.architecture set to it.
void rename_arch(gguf_context * g, const std::string & arch) {
    gguf_set_val_str(g, "general.architecture", arch.c_str());
    for (int64_t i = gguf_get_n_kv(g) - 1; i >= 0; --i) {
        const std::string k = gguf_get_key(g, i);
        if (k.rfind("llama.", 0) != 0) continue;
        const std::string to = arch + k.substr(5);
        switch (gguf_get_kv_type(g, i)) {
            case GGUF_TYPE_UINT32: gguf_set_val_u32(g, to.c_str(), gguf_get_val_u32(g, i)); break;
            case GGUF_TYPE_FLOAT32: gguf_set_val_f32(g, to.c_str(), gguf_get_val_f32(g, i)); break;
            case GGUF_TYPE_STRING: gguf_set_val_str(g, to.c_str(), gguf_get_val_str(g, i)); break;
            default: FAIL("key " << k << " has a type rename_arch does not copy");
        }
        gguf_remove_key(g, k.c_str());
    }
}

// stories260K cut to its first layer (a GGUF rewritten with block_count 1), its rope changed as
// asked: layer 0's keys and values depend on the token and its position only, so a context
// shift can be checked exactly.
std::string one_layer_model(const RopeChange & rope = {}, const std::string & tag = "one-layer") {
    const std::string full = temp_path("kv-edit", tag + "-full.gguf"), cut = temp_path("kv-edit", tag + ".gguf");
    kvg_model * m = load_shared_model("stories260K.bin", "tok512.bin");
    char err[512];
    REQUIRE(kvg_model_save_gguf(m, full.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
    kvg_model_free(m);
    ggml_context * data = nullptr;
    gguf_context * src = gguf_init_from_file(full.c_str(), {false, &data});
    REQUIRE(src != nullptr);
    gguf_context * dst = gguf_init_empty();
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, "llama.block_count", 1);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) {
        const std::string name = t->name;
        if (name.rfind("blk.", 0) != 0 || name.rfind("blk.0.", 0) == 0) gguf_add_tensor(dst, t);
    }
    ggml_context * extra = ggml_init({2 * ggml_tensor_overhead() + 4096, nullptr, false});
    if (!rope.extra_tensor.empty()) {
        ggml_tensor * b = ggml_new_tensor_1d(extra, GGML_TYPE_F32, 64);
        ggml_set_name(b, rope.extra_tensor.c_str());
        std::memset(b->data, 0, ggml_nbytes(b));
        gguf_add_tensor(dst, b);
    }
    if (rope.key_length) gguf_set_val_u32(dst, "llama.attention.key_length", (uint32_t) rope.key_length);
    if (!rope.factors.empty()) {
        ggml_tensor * f = ggml_new_tensor_1d(extra, GGML_TYPE_F32, (int64_t) rope.factors.size());
        ggml_set_name(f, "rope_freqs.weight");
        std::memcpy(f->data, rope.factors.data(), ggml_nbytes(f));
        gguf_add_tensor(dst, f);
    }
    if (rope.linear != 0.0f) {
        gguf_set_val_str(dst, "llama.rope.scaling.type", rope.type.c_str());
        gguf_set_val_f32(dst, "llama.rope.scaling.factor", rope.linear);
    }
    if (rope.arch != "llama") rename_arch(dst, rope.arch);
    REQUIRE(gguf_write_to_file(dst, cut.c_str(), false));
    gguf_free(dst);
    gguf_free(src);
    ggml_free(data);
    ggml_free(extra);
    std::remove(full.c_str());
    return cut;
}

} // namespace

namespace {

void check_context_shift(const std::string & path) {
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    REQUIRE_MESSAGE(m != nullptr, err);
    REQUIRE(kvg_model_n_layer(m) == 1);
    const int nv = kvg_model_n_vocab(m);
    const std::vector<int> dropped = random_tokens(17, 60), kept = random_tokens(30, 61);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16}) {
        CAPTURE(type);
        // b: 5 kept, 17 dropped, 25 kept; then the 17 are removed and the 25 move down
        kvg_context * b = new_ctx(m, params(type));
        std::vector<int> seen(kept.begin(), kept.begin() + 5);
        seen.insert(seen.end(), dropped.begin(), dropped.end());
        seen.insert(seen.end(), kept.begin() + 5, kept.end());
        decode_then_greedy(b, seen, 0, 9, 0, nv);
        REQUIRE(kvg_seq_rm(b, 0, 5, 22, err, sizeof err));
        REQUIRE_MESSAGE(kvg_seq_add(b, 0, 22, -1, -17, err, sizeof err), err);
        CHECK(kvg_seq_pos_max(b, 0) == 29);
        kvg_context * a = new_ctx(m, params(type));
        decode_then_greedy(a, kept, 0, 30, 0, nv);
        const std::vector<int> cont = random_tokens(6, 62);
        const std::vector<float> lb = branch(b, 0, 30, cont, nv), la = branch(a, 0, 30, cont, nv);
        float top = 0.0f;
        for (float x : la) top = std::max(top, std::fabs(x));
        const float diff = max_diff(la.data(), lb.data(), la.size());
        MESSAGE("kv type ", type, ": context shift vs kept tokens decoded in place: max |dlogit| ", diff, " of ", top);
        CHECK(diff <= 1e-3f * top);
        kvg_context_free(a);
        kvg_context_free(b);
    }
    kvg_model_free(m);
    std::remove(path.c_str());
}

} // namespace

TEST_CASE("kvg_seq_rm + kvg_seq_add (a context shift) equal a context that decoded the kept tokens there") {
    check_context_shift(one_layer_model());
}

// The shift rotates keys by the graph's angles: with Llama 3's frequency factors (head size 8:
// 4 pairs) and with linear scaling on top.
TEST_CASE("a context shift with rope_freqs.weight and linear rope scaling") {
    SUBCASE("rope_freqs") {
        check_context_shift(one_layer_model({{1.0f, 1.5f, 3.0f, 8.0f}, 0.0f, "linear", "", 0}, "freqs"));
    }
    SUBCASE("rope_freqs and linear scaling") {
        check_context_shift(one_layer_model({{1.0f, 1.5f, 3.0f, 8.0f}, 4.0f, "linear", "", 0}, "freqs-linear"));
    }
}

// qwen2 rotates pairs n_rot / 2 apart (NEOX): the shift must rotate the same pairs.
TEST_CASE("a context shift of a NEOX-rope architecture (qwen2)") {
    RopeChange qwen2;
    qwen2.arch = "qwen2";
    check_context_shift(one_layer_model(qwen2, "qwen2"));
}

namespace {

// A family model of tests/test-family.cpp (its tokens from llama.cpp's reference): a prompt
// decoded at 0..39 and shifted right by 37, then 6 more tokens, against a context that
// decoded the prompt at 0..39 and the 6 tokens after it. Attention sees relative positions
// only, so every layer, rotated or not, must agree: a key rotated with other angles than the
// graph's, or rotated on a layer without rope, shows in the logits.
void check_family_shift(const std::string & name) {
    using namespace family_twin;
    const Ref ref = read_ref(name);
    const TempFile file{temp_path("kv-edit", name + ".gguf")};
    write_model(family(name), file.path, (uint32_t) ref.n_vocab);
    kvg_model * m = load_model_file(file.path);
    const int nv = kvg_model_n_vocab(m), n = 40, delta = 37;
    const std::vector<int> prompt(ref.prompt_ids.begin(), ref.prompt_ids.begin() + n);
    const std::vector<int> cont(ref.prompt_ids.begin() + n, ref.prompt_ids.begin() + n + 6);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16}) {
        CAPTURE(type);
        kvg_context_params p = params(type);
        p.n_ctx = 256; // phi3-long: its long table, as in test-family
        kvg_context * a = new_ctx(m, p);
        decode_then_greedy(a, prompt, 0, n, 0, nv);
        const std::vector<float> want = branch(a, 0, n, cont, nv);
        kvg_context * b = new_ctx(m, p);
        decode_then_greedy(b, prompt, 0, n, 0, nv);
        char err[512] = "";
        REQUIRE_MESSAGE(kvg_seq_add(b, 0, 0, -1, delta, err, sizeof err), err);
        CHECK(kvg_seq_pos_min(b, 0) == delta);
        const std::vector<float> got = branch(b, 0, n + delta, cont, nv);
        float top = 0.0f;
        for (float x : want) top = std::max(top, std::fabs(x));
        const float diff = max_diff(want.data(), got.data(), want.size());
        MESSAGE(name, ", kv type ", type, ": shifted by ", delta, " against unshifted: max |dlogit| ", diff, " of ",
                top);
        CHECK(diff <= 1e-3f * top);
        kvg_context_free(a);
        kvg_context_free(b);
    }
    kvg_model_free(m);
}

} // namespace

// SmolLM3 has no rope on every fourth layer: the shift must leave those keys as they are.
TEST_CASE("a context shift of smollm3 (no rope on every fourth layer) equals the unshifted context") {
    check_family_shift("smollm3");
}

// Phi-3.5's LongRoPE: the shift rotates with the table the context chose (its long one here).
TEST_CASE("a context shift of phi3 with LongRoPE tables equals the unshifted context") {
    check_family_shift("phi3-long");
}

namespace {

std::vector<float> prompt_logits(const std::string & path, const std::vector<int> & tokens) {
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    REQUIRE_MESSAGE(m != nullptr, err);
    kvg_context * c = new_ctx(m, params(KVG_KV_F32));
    const int nv = kvg_model_n_vocab(m);
    std::vector<float> logits;
    for (size_t i = 0; i < tokens.size(); ++i) {
        REQUIRE_MESSAGE(kvg_decode(c, &tokens[i], 1, (int) i, err, sizeof err), err);
        logits.insert(logits.end(), kvg_get_logits(c, 0), kvg_get_logits(c, 0) + nv);
    }
    kvg_context_free(c);
    kvg_model_free(m);
    std::remove(path.c_str());
    return logits;
}

} // namespace

// Two routes to the same angles: every frequency factor 2 (rope_freqs.weight) and linear
// scaling by 2 (freq_scale 1/2); and the file without either differs from both.
TEST_CASE("rope_freqs.weight divides each pair's angle, as linear scaling does for all") {
    const std::vector<int> tokens = random_tokens(40, 63);
    const std::vector<float> by_factors =
        prompt_logits(one_layer_model({{2, 2, 2, 2}, 0.0f, "linear", "", 0}, "twos"), tokens);
    const std::vector<float> by_scale = prompt_logits(one_layer_model({{}, 2.0f, "linear", "", 0}, "linear2"), tokens);
    const std::vector<float> plain = prompt_logits(one_layer_model({}, "plain"), tokens);
    float top = 0.0f;
    for (float x : by_scale) top = std::max(top, std::fabs(x));
    CHECK(max_diff(by_factors.data(), by_scale.data(), by_scale.size()) <= 1e-5f * top);
    CHECK(max_diff(plain.data(), by_scale.data(), by_scale.size()) > 1e-2f * top);
}

// A file whose arithmetic kvgraph would not follow is refused, naming what it does not support.
TEST_CASE("files with a tensor, rope scaling or head size kvgraph does not implement are refused") {
    struct Case {
        RopeChange change;
        const char * named;
    };
    const Case cases[] = {
        {{{}, 0.0f, "linear", "blk.0.attn_q.bias", 0}, "blk.0.attn_q.bias"},
        {{{}, 0.0f, "linear", "rope_factors_long.weight", 0}, "rope_factors_long.weight"},
        {{{}, 4.0f, "longrope", "", 0}, "longrope"},
        {{{}, 0.0f, "linear", "", 16}, "llama.attention.key_length"},
    };
    for (const Case & c : cases) {
        const std::string named = c.named;
        CAPTURE(named);
        const std::string path = one_layer_model(c.change, "refused");
        char err[512] = "";
        kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        CHECK(m == nullptr);
        CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
        CHECK(std::string(err).find(c.named) != std::string::npos);
        MESSAGE(err);
        kvg_model_free(m);
        std::remove(path.c_str());
    }
}

TEST_CASE("kvg_seq_add: refused where it could not be exact or would collide, the sequence unchanged") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    char err[512] = "";
    for (kvg_context_params p : {params(KVG_KV_Q8_0), params(KVG_KV_F32, KVG_KV_RING)}) {
        kvg_context * c = new_ctx(m, p);
        decode_then_greedy(c, random_tokens(20, 63), 0, 20, 0, nv);
        REQUIRE(kvg_seq_rm(c, 0, 1, 3, err, sizeof err)); // (a ring: sinks, outside its next token's window)
        CHECK_FALSE(kvg_seq_add(c, 0, 10, -1, -5, err, sizeof err));
        CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
        CHECK(kvg_seq_pos_max(c, 0) == 19);
        kvg_context_free(c);
    }
    kvg_context * c = new_ctx(m, params(KVG_KV_F32));
    decode_then_greedy(c, random_tokens(20, 64), 0, 20, 0, nv);
    const std::vector<uint8_t> before = seq_state(c, 0);
    CHECK_FALSE(kvg_seq_add(c, 0, 10, -1, -5, err, sizeof err)); // onto 5..9, still held
    CHECK(std::string(err).find("is held") != std::string::npos);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK_FALSE(kvg_seq_add(c, 0, 0, -1, -1, err, sizeof err)); // below 0
    CHECK_FALSE(kvg_seq_add(c, 0, 0, -1, 1000, err, sizeof err)); // past n_ctx
    CHECK(seq_state(c, 0) == before);
    CHECK(kvg_seq_add(c, 0, 0, -1, 3, err, sizeof err)); // to the right: 3..22
    CHECK(kvg_seq_pos_min(c, 0) == 3);
    CHECK(kvg_seq_pos_max(c, 0) == 22);
    kvg_context_free(c);
    kvg_model_free(m);
}

TEST_CASE("a middle range removed from one sequence equals the rows around it copied into another") {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    for (kvg_kv_type type : {KVG_KV_F32, KVG_KV_F16}) {
        CAPTURE(type);
        kvg_context_params p = params(type);
        p.n_seq_max = 3;
        kvg_context * c = new_ctx(m, p);
        decode_then_greedy(c, random_tokens(50, 70), 0, 50, 0, nv);
        char err[512] = "";
        REQUIRE(kvg_seq_cp(c, 0, 1, -1, -1, err, sizeof err)); // 1: all, then the middle removed
        REQUIRE(kvg_seq_rm(c, 1, 10, 20, err, sizeof err));
        REQUIRE(kvg_seq_cp(c, 0, 2, 0, 10, err, sizeof err)); // 2: the rows around the middle, copied
        REQUIRE_MESSAGE(kvg_seq_cp(c, 0, 2, 20, -1, err, sizeof err), err);
        for (int s = 1; s < 3; ++s) {
            CHECK(kvg_seq_pos_min(c, s) == 0);
            CHECK(kvg_seq_pos_max(c, s) == 49);
        }
        const std::vector<int> cont = random_tokens(6, 71);
        const std::vector<float> l1 = branch(c, 1, 50, cont, nv), l2 = branch(c, 2, 50, cont, nv);
        CHECK(std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)) == 0);
        const std::vector<float> l0 = branch(c, 0, 50, cont, nv);
        CHECK(max_diff(l0.data(), l1.data(), l0.size()) > 1e-3f); // the middle mattered
        kvg_context_free(c);
    }
    kvg_model_free(m);
}
