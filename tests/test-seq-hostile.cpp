// The sequence API under hostile use (issue 48): each case is the smallest program that broke
// a promise of kvgraph.h, checked against what the header now states.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-runtime-common.h"

#include <climits>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

kvg_context_params params(kvg_kv_type type, kvg_kv_mode mode, int n_ctx) {
    kvg_context_params p = kvg_context_default_params();
    p.n_threads = 2;
    p.kv_type = type;
    p.kv_mode = mode;
    p.n_ctx = n_ctx;
    if (mode == KVG_KV_RING) p.n_sink = 4, p.n_window = 40;
    return p;
}

void decode(kvg_context * c, const std::vector<int> & t, int pos, int seq = 0) {
    char err[512] = "";
    std::vector<int32_t> p(t.size()), s(t.size(), seq);
    for (size_t i = 0; i < t.size(); ++i) p[i] = pos + (int32_t) i;
    REQUIRE_MESSAGE(kvg_decode_batch(c, t.data(), p.data(), s.data(), (int32_t) t.size(), err, sizeof err), err);
}

// Logits of seq continuing at pos with `cont`, one token per call.
std::vector<float> continue_seq(kvg_context * c, int seq, int pos, const std::vector<int> & cont, int nv) {
    std::vector<float> out;
    for (size_t i = 0; i < cont.size(); ++i) {
        decode(c, {cont[i]}, pos + (int) i, seq);
        const float * l = kvg_get_logits(c, -1);
        out.insert(out.end(), l, l + nv);
    }
    return out;
}

// The tiny model and contexts of one test case, freed at its end (also when a REQUIRE stops it).
struct Owned {
    kvg_model * m = load_shared_model("stories260K.bin");
    const int nv = kvg_model_n_vocab(m);
    std::vector<kvg_context *> ctxs;
    ~Owned() {
        for (kvg_context * c : ctxs) kvg_context_free(c);
        kvg_model_free(m);
    }
    kvg_context * ctx(const kvg_context_params & p) { return ctxs.emplace_back(new_ctx(m, p)); }
};

bool contains(const char * s, const char * what) { return std::strstr(s, what) != nullptr; }

// Peak resident memory of this process (VmHWM), KiB.
long peak_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

// The state layout's checksum (kv-state.cpp): FNV-1a 64 of everything before the last 8 bytes.
void reseal(std::vector<uint8_t> * s) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 8 < s->size(); ++i) h = (h ^ (*s)[i]) * 1099511628211ull;
    std::memcpy(s->data() + s->size() - 8, &h, 8);
}

} // namespace

TEST_CASE("1: a rolled-back linear state restores into a smaller context that holds its positions") {
    Owned own;
    const int nv = own.nv;
    const std::vector<int> t = random_tokens(200, nv, 1), cont = random_tokens(6, nv, 2);
    struct Case {
        kvg_kv_type type;
        int n, keep, small_ctx;
    };
    // q8_0 after 200: a cut at a group boundary (always exact), the groups written last (192..223,
    // 160..191) past the small context; after 100, cut at 70: 96..127 past it, 64..95 kept exact
    for (const Case & k :
         {Case{KVG_KV_F32, 200, 10, 64}, Case{KVG_KV_Q8_0, 200, 32, 64}, Case{KVG_KV_Q8_0, 100, 70, 96}}) {
        const kvg_kv_type type = k.type;
        const int keep = k.keep;
        CAPTURE(type);
        CAPTURE(keep);
        kvg_context * big = own.ctx(params(type, KVG_KV_LINEAR, 256));
        decode(big, std::vector<int>(t.begin(), t.begin() + k.n), 0);
        char err[512] = "";
        REQUIRE_MESSAGE(kvg_seq_rm(big, 0, keep, -1, err, sizeof err), err);
        const std::vector<uint8_t> state = seq_state(big, 0);
        const std::string path = temp_path("seq-hostile", "rolled-back.kvgs");
        REQUIRE_MESSAGE(kvg_state_seq_save_file(big, 0, path.c_str(), t.data(), keep, err, sizeof err), err);

        kvg_context * small = own.ctx(params(type, KVG_KV_LINEAR, k.small_ctx));
        CHECK_MESSAGE(kvg_state_seq_set(small, 0, state.data(), state.size(), err, sizeof err), err);
        CHECK(kvg_seq_pos_max(small, 0) == keep - 1);
        CHECK(kvg_seq_n_past(small, 0) == keep);
        kvg_context * from_file = own.ctx(params(type, KVG_KV_LINEAR, k.small_ctx));
        std::vector<int> tokens(keep);
        CHECK_MESSAGE(kvg_state_seq_load_file(from_file, 0, path.c_str(), tokens.data(), keep, err, sizeof err) == keep,
                      err);
        std::remove(path.c_str());
        // saved again from the small context (its dropped groups stay dropped) and restored
        const std::vector<uint8_t> again = seq_state(small, 0);
        kvg_context * twice = own.ctx(params(type, KVG_KV_LINEAR, k.small_ctx));
        CHECK_MESSAGE(kvg_state_seq_set(twice, 0, again.data(), again.size(), err, sizeof err), err);
        // restoring is exact: the small contexts continue as the big one does, bit for bit
        const std::vector<float> want = continue_seq(big, 0, keep, cont, nv);
        CHECK(continue_seq(small, 0, keep, cont, nv) == want);
        CHECK(continue_seq(from_file, 0, keep, cont, nv) == want);
        CHECK(continue_seq(twice, 0, keep, cont, nv) == want);
    }
    // positions that do not fit are still refused
    kvg_context * a = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 256));
    decode(a, t, 0);
    const std::vector<uint8_t> s200 = seq_state(a, 0);
    kvg_context * b = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    char err[512] = "";
    CHECK_FALSE(kvg_state_seq_set(b, 0, s200.data(), s200.size(), err, sizeof err));
    CHECK(contains(err, "200 positions"));
}

TEST_CASE("2: a ring refuses a middle removal inside the window its next token attends; nothing changes") {
    Owned own;
    const int nv = own.nv;
    kvg_context * c = own.ctx(params(KVG_KV_F32, KVG_KV_RING, 64));
    const std::vector<int> t = random_tokens(50, nv, 3);
    decode(c, t, 0);
    const std::vector<uint8_t> before = seq_state(c, 0);
    char err[512] = "";
    CHECK_FALSE(kvg_seq_rm(c, 0, 45, 47, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
    CHECK(contains(err, "window"));
    CHECK(seq_state(c, 0) == before);
    CHECK(kvg_seq_n_past(c, 0) == 50);
    // the sequence continues where it was
    const int next = 7;
    decode(c, {next}, kvg_n_past(c));
    // positions outside that window may go: the sinks here (the next token still attends 11..50)
    REQUIRE_MESSAGE(kvg_seq_rm(c, 0, 0, 2, err, sizeof err), err);
    CHECK(kvg_seq_pos_min(c, 0) == 2);
    decode(c, {next}, kvg_n_past(c));
}

TEST_CASE("3: load_file of a multi-gigabyte file that is not a state reads its header only") {
    Owned own;
    kvg_context * c = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    const std::string path = temp_path("seq-hostile", "huge.kvgs");
    const long long size = 4ll << 30; // sparse: no disk blocks behind the zeros
    // the file's 12-byte header, the state's size at blob_at, then the state's header if given
    auto make = [&](int32_t n_tokens, long long blob_at, uint64_t blob_size,
                    const std::vector<uint8_t> & state_head = {}) {
        const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
        REQUIRE(fd >= 0);
        const uint32_t version = 1;
        uint8_t head[12];
        std::memcpy(head, "KVGF", 4), std::memcpy(head + 4, &version, 4), std::memcpy(head + 8, &n_tokens, 4);
        REQUIRE(pwrite(fd, head, 12, 0) == 12);
        if (blob_at > 0) REQUIRE(pwrite(fd, &blob_size, 8, blob_at) == 8);
        if (!state_head.empty()) REQUIRE(pwrite(fd, state_head.data(), state_head.size(), blob_at + 8) > 0);
        REQUIRE(ftruncate(fd, size) == 0);
        close(fd);
    };
    decode(c, random_tokens(5, own.nv, 11), 0);
    const std::vector<uint8_t> real = seq_state(c, 0);
    const long peak = peak_kib();
    std::vector<int> tokens(16);
    char err[512] = "";
    // zeros after the magic: no tokens, and a state size of 0 where 4 GiB follow
    make(0, 0, 0);
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), tokens.data(), 16, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
    CHECK(contains(err, "not a kvgraph state file"));
    // sizes that agree with the file, but zeros where the state's header should be
    make(0, 12, (uint64_t) size - 20);
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), tokens.data(), 16, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK(contains(err, "not a kvgraph state"));
    // a real state's header (5 positions) at the start of 4 GiB: not the size it declares
    make(0, 12, (uint64_t) size - 20, std::vector<uint8_t>(real.begin(), real.begin() + 88));
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), tokens.data(), 16, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK(contains(err, "its size does not match what it says it holds"));
    // a billion tokens: more than n_max, refused before they are read
    const int32_t n = (int32_t) ((size - 20) / 4);
    make(n, 12 + 4ll * n, (uint64_t) (size - 20 - 4ll * n));
    CHECK(kvg_state_seq_load_file(c, 0, path.c_str(), tokens.data(), 16, err, sizeof err) == -1);
    CHECK(contains(err, "more than n_max"));
    // none of these read the file: the peak resident memory did not grow by its size
    CHECK(peak_kib() - peak < 64 * 1024);
    CHECK(seq_state(c, 0) == real); // unchanged
    std::remove(path.c_str());
}

TEST_CASE("4: a forged ring state with positions past INT32_MAX is refused, the sequence unchanged") {
    Owned own;
    const int nv = own.nv;
    kvg_context * a = own.ctx(params(KVG_KV_F32, KVG_KV_RING, 64));
    decode(a, random_tokens(50, nv, 4), 0);
    const std::vector<uint8_t> good = seq_state(a, 0);
    kvg_context * b = own.ctx(params(KVG_KV_F32, KVG_KV_RING, 64));
    decode(b, random_tokens(20, nv, 5), 0);
    const std::vector<uint8_t> b_before = seq_state(b, 0);
    // header (kv-state.cpp): n_past at byte 48, n_held at 72, then (slot, position) pairs from 88;
    // moving every non-sink position by a multiple of the ring (60 slots) keeps its slot
    for (int64_t shift : {(int64_t) 60 * 40000000, (int64_t) 60 * 35791394}) {
        std::vector<uint8_t> forged = good;
        int64_t n_past, n_held;
        std::memcpy(&n_past, &forged[48], 8), std::memcpy(&n_held, &forged[72], 8);
        n_past += shift;
        std::memcpy(&forged[48], &n_past, 8);
        for (int64_t i = 0; i < n_held; ++i) {
            int64_t q;
            std::memcpy(&q, &forged[88 + 16 * i + 8], 8);
            if (q >= 4) q += shift;
            std::memcpy(&forged[88 + 16 * i + 8], &q, 8);
        }
        reseal(&forged);
        CAPTURE(n_past);
        char err[512] = "";
        CHECK_FALSE(kvg_state_seq_set(b, 0, forged.data(), forged.size(), err, sizeof err));
        CHECK(contains(err, "2147483647"));
        CHECK(seq_state(b, 0) == b_before);
        CHECK(kvg_seq_pos_max(b, 0) == 19);
        CHECK(kvg_seq_n_past(b, 0) == 20);
    }
}

TEST_CASE("5: load_file of a directory fails with status IO") {
    Owned own;
    kvg_context * c = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    const std::string dir = temp_path("seq-hostile", "dir");
    REQUIRE(mkdir(dir.c_str(), 0700) == 0);
    std::vector<int> tokens(4);
    char err[512] = "";
    CHECK(kvg_state_seq_load_file(c, 0, dir.c_str(), tokens.data(), 4, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_IO);
    CHECK(contains(err, "directory"));
    rmdir(dir.c_str());
}

TEST_CASE("6: a q8_0 refusal names the two groups whose keys are kept exactly") {
    Owned own;
    const int nv = own.nv;
    kvg_context * c = own.ctx(params(KVG_KV_Q8_0, KVG_KV_LINEAR, 256));
    decode(c, random_tokens(100, nv, 6), 0);
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_seq_rm(c, 0, 70, -1, err, sizeof err), err); // 64..95: the group written before 96..99
    // the sequence ends at 69, yet the groups written last are still 96..127 and 64..95
    CHECK_FALSE(kvg_seq_rm(c, 0, 40, -1, err, sizeof err));
    CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
    CHECK(contains(err, "slots 96..127 and 64..95"));
    CHECK(kvg_seq_pos_max(c, 0) == 69);
    decode(c, random_tokens(6, nv, 7), 70);                 // back into 64..95: now written last, 96..127 before it
    CHECK_FALSE(kvg_seq_rm(c, 0, 40, -1, err, sizeof err)); // 32..63 lies below both
    CHECK(contains(err, "slots 64..95 and 96..127"));
    CHECK(kvg_seq_pos_max(c, 0) == 75);
    // the message's rule holds: a cut inside either group is accepted
    CHECK_MESSAGE(kvg_seq_rm(c, 0, 70, -1, err, sizeof err), err);
}

TEST_CASE("7: kvg_seq_cp of a prefix of a sequence onto itself rolls it back to the prefix") {
    Owned own;
    const int nv = own.nv;
    const std::vector<int> t = random_tokens(50, nv, 8), cont = random_tokens(5, nv, 9);
    kvg_context * c = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    decode(c, t, 0);
    char err[512] = "";
    REQUIRE_MESSAGE(kvg_seq_cp(c, 0, 0, 0, 20, err, sizeof err), err);
    CHECK(kvg_seq_pos_max(c, 0) == 19);
    CHECK(kvg_seq_n_past(c, 0) == 20);
    // dst continues where the prefix ends: as a context fed those 20 tokens (same batches)
    kvg_context * fresh = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    decode(fresh, std::vector<int>(t.begin(), t.begin() + 20), 0);
    const std::vector<float> got = continue_seq(c, 0, 20, cont, nv), want = continue_seq(fresh, 0, 20, cont, nv);
    if (batchings_agree_bitwise()) CHECK(got == want);
    else CHECK(max_diff(got.data(), want.data(), got.size()) < 1e-3f);
    // a copy of the whole sequence onto itself (p1 < 0 or past its end) changes nothing
    REQUIRE(kvg_seq_cp(c, 0, 0, 0, -1, err, sizeof err));
    REQUIRE(kvg_seq_cp(c, 0, 0, -1, 1000, err, sizeof err));
    CHECK(kvg_seq_pos_max(c, 0) == 24);
}

TEST_CASE("also: an unsupported tensor type is named by number and name") {
    // a GGUF v3 header and one tensor info of type 9 (q8_1, which kvgraph does not run)
    std::string f("GGUF", 4);
    auto u32 = [&](uint32_t x) { f.append((const char *) &x, 4); };
    auto u64 = [&](uint64_t x) { f.append((const char *) &x, 8); };
    u32(3), u64(1), u64(0);
    u64(1), f += "w";
    u32(2), u64(256), u64(4), u32(9), u64(0);
    f.append(64 + 256 * 4, '\0');
    const std::string path = temp_path("seq-hostile", "q8_1.gguf");
    write_file(path, f);
    char err[1024] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    CHECK(m == nullptr);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_FILE);
    INFO(err);
    CHECK(contains(err, "type 9 (q8_1)"));
    std::remove(path.c_str());
}

TEST_CASE("found by fuzz-state: a state naming a type number that is no type is refused by number") {
    Owned own;
    kvg_context * c = own.ctx(params(KVG_KV_F32, KVG_KV_LINEAR, 64));
    decode(c, random_tokens(5, own.nv, 10), 0);
    std::vector<uint8_t> s = seq_state(c, 0);
    const int32_t type = 22216704; // header: the cache type at byte 24
    std::memcpy(&s[24], &type, 4);
    reseal(&s);
    char err[512] = "";
    CHECK_FALSE(kvg_state_seq_set(c, 0, s.data(), s.size(), err, sizeof err));
    CHECK(contains(err, "damaged cache (type 22216704)"));
    CHECK(kvg_seq_pos_max(c, 0) == 4);
}
