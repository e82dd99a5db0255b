// Resource errors and bad input as a user meets them: a ggml arena that is too small (an
// abort by ggml's design, checked in a child process), and the kvg-generate example on bad
// files, bad context lengths and prompts longer than the context: non-zero exit with a
// message, never a signal. The API-level errors are in test-runtime-errors.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ggml-impl.h"
#include "ggml.h"
#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ChildResult {
    bool exited = false; // normal exit (else killed by a signal)
    int code = -1;       // exit code or signal number
    std::string output;  // stdout + stderr
};

// Forks a child running fn with stdout and stderr into a pipe; *out is the pipe's read end.
pid_t spawn(const std::function<void()> & fn, int * out) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[1]);
        fn();
        std::fflush(nullptr);
        _exit(0);
    }
    close(fds[1]);
    *out = fds[0];
    return pid;
}

// Runs fn in a forked child with stdout and stderr captured.
ChildResult run_child(const std::function<void()> & fn) {
    int fd = -1;
    const pid_t pid = spawn(fn, &fd);
    ChildResult r;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) r.output.append(buf, (size_t) n);
    close(fd);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    return r;
}

bool contains(const std::string & s, const std::string & part) { return s.find(part) != std::string::npos; }

std::string temp_path(const std::string & name) { return ::temp_path("test-robust", name); }

// kvg-generate: $KVG_GENERATE, else bin/ of the build tree (this test runs from <build>/tests).
// An example binary of the build tree (this test runs from <build>/tests), "" if not built.
std::string example_path(const char * name) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "";
    self[n] = '\0';
    const std::filesystem::path dir = std::filesystem::path(self).parent_path();
    for (const auto & p : {dir.parent_path() / "bin" / name, dir / "bin" / name}) {
        if (std::filesystem::exists(p)) return p.string();
    }
    return "";
}

std::string generate_path() {
    if (const char * e = std::getenv("KVG_GENERATE")) return e;
    return example_path("kvg-generate");
}

// Runs the program exe with args in a child, output captured.
ChildResult run_program(const std::string & exe, const std::vector<std::string> & args) {
    return run_child([&] {
        std::vector<char *> argv = {const_cast<char *>(exe.c_str())};
        for (const std::string & a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(exe.c_str(), argv.data());
        std::perror("execv");
        _exit(127);
    });
}

ChildResult run_generate(const std::vector<std::string> & args) { return run_program(generate_path(), args); }

// Exit status 1 with "error: ..." naming the problem; no signal.
void check_clean_failure(const ChildResult & r, const std::vector<std::string> & parts) {
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "error: "));
    for (const std::string & p : parts) CHECK_MESSAGE(contains(r.output, p), p);
}

} // namespace

TEST_CASE("arena too small: the abort message names the bytes needed and available") {
    SUBCASE("tensor data") {
        const size_t mem = 4096;
        size_t used = 0;
        const ChildResult r = run_child([&] {
            ggml_context * ctx = ggml_init({mem, nullptr, false});
            ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
            std::printf("used %zu\n", ggml_used_mem(ctx));
            ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1024); // 4 KiB of data alone: cannot fit
            std::printf("not reached\n");
        });
        INFO(r.output);
        CHECK_FALSE(r.exited);
        CHECK(r.code == SIGABRT);
        REQUIRE(std::sscanf(r.output.c_str(), "used %zu", &used) == 1);
        // the new object: header + tensor struct + 4096 bytes of data, padded to the alignment
        const size_t needed = GGML_OBJECT_SIZE + ((GGML_TENSOR_SIZE + 1024 * sizeof(float) + GGML_MEM_ALIGN - 1) /
                                                  GGML_MEM_ALIGN * GGML_MEM_ALIGN);
        CHECK(used > 0);
        CHECK(contains(r.output, std::to_string(needed) + " bytes needed"));
        CHECK(contains(r.output, std::to_string(mem - used) + " available"));
        CHECK_FALSE(contains(r.output, "not reached"));
    }
    SUBCASE("metadata only (no_alloc)") {
        const size_t mem = 2 * ggml_tensor_overhead();
        const ChildResult r = run_child([&] {
            ggml_context * ctx = ggml_init({mem, nullptr, true});
            ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 1 << 20, 1 << 10); // no data: fits
            ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
            std::printf("two fit\n");
            ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
            std::printf("not reached\n");
        });
        INFO(r.output);
        CHECK_FALSE(r.exited);
        CHECK(r.code == SIGABRT);
        CHECK(contains(r.output, "two fit"));
        CHECK(contains(r.output, std::to_string(ggml_tensor_overhead()) + " bytes needed, 0 available"));
        CHECK_FALSE(contains(r.output, "not reached"));
    }
}

// The files the kvg-generate cases start from (and damage); false: kvg-generate is not built.
struct generate_inputs {
    std::string model = model_path("stories260K.bin"), tok = model_path("tok512.bin");
    std::string ckpt, tokfile;
    bool load() {
        if (generate_path().empty()) {
            MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
            return false;
        }
        ckpt = read_file(model);
        tokfile = read_file(tok);
        REQUIRE(ckpt.size() > 1000);
        REQUIRE(tokfile.size() > 100);
        return true;
    }
};

TEST_CASE("kvg-generate: bad files exit with status 1 and a message, never a signal") {
    generate_inputs in;
    if (!in.load()) return;
    const std::string & model = in.model, & tok = in.tok, & ckpt = in.ckpt, & tokfile = in.tokfile;

    SUBCASE("a good run, for comparison") {
        const ChildResult r = run_generate({"-m", model, "-z", tok, "-p", "Once upon", "-n", "4", "-c", "32", "-t", "1",
                                            "--temp", "0"});
        INFO(r.output);
        CHECK(r.exited);
        CHECK(r.code == 0);
        CHECK(contains(r.output, "Once upon"));
    }
    SUBCASE("missing model file") {
        check_clean_failure(run_generate({"-m", temp_path("does-not-exist.bin")}), {"cannot open"});
    }
    SUBCASE("truncated llama2.c checkpoint") {
        const std::string p = temp_path("truncated.bin");
        write_file(p, ckpt.substr(0, 1000));
        check_clean_failure(run_generate({"-m", p, "-n", "2"}), {"truncated llama2.c checkpoint", "offset"});
        std::filesystem::remove(p);
    }
    SUBCASE("a tokenizer given as the model") {
        check_clean_failure(run_generate({"-m", tok, "-n", "2"}), {"not a llama2.c checkpoint", "offset"});
    }
    SUBCASE("damaged GGUF header") {
        const std::string p = temp_path("bad.gguf");
        std::string g = "GGUF";
        g += std::string("\x03\x00\x00\x00", 4);
        g += std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8); // absurd tensor count
        g += std::string(8, '\0');
        write_file(p, g);
        check_clean_failure(run_generate({"-m", p}), {"gguf: ", "n_tensors", "offset"});
        std::filesystem::remove(p);
    }
    SUBCASE("truncated tokenizer") {
        const std::string p = temp_path("tok-truncated.bin");
        write_file(p, tokfile.substr(0, tokfile.size() / 2));
        check_clean_failure(run_generate({"-m", model, "-z", p}), {"tokenizer", "offset"});
        std::filesystem::remove(p);
    }
    SUBCASE("tokenizer with a NaN score") {
        const std::string p = temp_path("tok-nan.bin");
        std::string t = tokfile;
        const float nan = std::nanf("");
        std::memcpy(&t[4], &nan, 4); // token 0's score
        write_file(p, t);
        check_clean_failure(run_generate({"-m", model, "-z", p}), {"score of token 0 at byte offset 4 is NaN"});
        std::filesystem::remove(p);
    }
    SUBCASE("llama2.c header whose heads do not divide the width") {
        const std::string p = temp_path("heads.bin");
        std::string c = ckpt;
        const int32_t heads = 7;
        std::memcpy(&c[12], &heads, 4);
        write_file(p, c);
        check_clean_failure(run_generate({"-m", p}), {"offsets 0..27", "not a multiple of n_head 7"});
        std::filesystem::remove(p);
    }
    SUBCASE("tokenizer with a different vocabulary size") {
        check_clean_failure(run_generate({"-m", model, "-z", model_path("tokenizer.bin")}), {"tokenizer"});
    }
}

TEST_CASE("kvg-generate: limits and bad option values exit with status 1 and a message, never a signal") {
    generate_inputs in;
    if (!in.load()) return;
    const std::string & model = in.model, & tok = in.tok, & ckpt = in.ckpt;

    SUBCASE("context longer than the model's") {
        check_clean_failure(run_generate({"-m", model, "-z", tok, "-c", "100000"}), {"n_ctx = 100000", "1..512"});
    }
    SUBCASE("prompt longer than the context") {
        std::string prompt;
        for (int i = 0; i < 20; ++i) prompt += "Once upon a time there was a cat. ";
        check_clean_failure(run_generate({"-m", model, "-z", tok, "-p", prompt, "-c", "16", "-n", "4"}),
                            {"context holds only 16"});
    }
    SUBCASE("prompt longer than a static (committed) linear cache; a ring cache takes it") {
        std::string prompt;
        for (int i = 0; i < 20; ++i) prompt += "Once upon a time there was a cat. ";
        check_clean_failure(run_generate({"-m", model, "-z", tok, "-p", prompt, "-c", "16", "-n", "4", "--kv-static",
                                          "-t", "1"}),
                            {"context holds only 16"});
        const ChildResult r = run_generate({"-m", model, "-z", tok, "-p", prompt, "-c", "16", "-n", "4", "--kv-mode",
                                            "ring", "--sink", "2", "-t", "1"});
        INFO(r.output);
        CHECK(r.exited);
        CHECK(r.code == 0);
    }
    SUBCASE("ring cache parameters that do not fit the context") {
        check_clean_failure(run_generate({"-m", model, "-c", "16", "--kv-mode", "ring", "--sink", "16"}),
                            {"n_sink = 16 must be in 0..15"});
    }
    SUBCASE("--check-tensors: one NaN weight fails the load; without the flag the model runs") {
        const std::string p = temp_path("one-nan.bin");
        std::string c = ckpt;
        int32_t h[7];
        std::memcpy(h, c.data(), sizeof h);
        // blk.0.attn_q.weight follows the embedding [vocab][dim] and rms_att [layers][dim]
        const size_t wq = 28 + 4 * ((size_t) h[5] * h[0] + (size_t) h[2] * h[0]);
        const float nan = std::nanf("");
        std::memcpy(&c[wq + 4 * 77], &nan, 4);
        write_file(p, c);
        check_clean_failure(run_generate({"-m", p, "-n", "2", "-t", "1", "--check-tensors"}),
                            {p + ": tensor 'blk.0.attn_q.weight' holds a non-finite value (nan) at element 77 (row 1, column 13)"});
        const ChildResult r = run_generate({"-m", p, "-n", "2", "-t", "1"});
        INFO(r.output);
        CHECK(r.exited);
        CHECK(r.code == 0);
        const ChildResult ok = run_generate({"-m", model, "-n", "2", "-t", "1", "--check-tensors"});
        INFO(ok.output);
        CHECK(ok.code == 0);
        std::filesystem::remove(p);
    }
    SUBCASE("--max-kv-mib: a cache over the limit") {
        // 5 layers x (K + V) x 4 sequences x 512 slots x 32 KV values x 4 bytes (f32)
        const size_t need = 5 * 2 * 4 * 512 * 32 * 4;
        check_clean_failure(run_generate({"-m", model, "-c", "512", "--parallel", "4", "-n", "2", "-t", "1",
                                          "--max-kv-mib", "2.4"}),
                            {"the KV cache needs " + std::to_string(need) + " bytes (n_ctx 512 x 4 sequences, f32), "
                             "more than the limit of " + std::to_string((size_t) (2.4 * 1024 * 1024)) + " bytes"});
        const ChildResult r = run_generate({"-m", model, "-c", "512", "--parallel", "4", "-n", "2", "-t", "1",
                                            "--max-kv-mib", "2.5"}); // exactly 2621440 bytes
        INFO(r.output);
        CHECK(r.exited);
        CHECK(r.code == 0);
        CHECK(contains(r.output, "KV cache:  " + std::to_string(need) + " bytes"));
        check_clean_failure(run_generate({"-m", model, "--max-kv-mib", "0"}), {"--max-kv-mib must be a positive"});
    }
    SUBCASE("a prompt without a tokenizer") {
        check_clean_failure(run_generate({"-m", model, "-p", "hello"}), {"no tokenizer"});
    }
    SUBCASE("bad option values") {
        check_clean_failure(run_generate({"-m", model, "-n", "many"}), {"not a number"});
        check_clean_failure(run_generate({"-m", model, "--kv-type", "q4"}), {"f32 or f16"});
        check_clean_failure(run_generate({"-m"}), {"needs a value"});
    }
}

TEST_CASE("kvg-generate: a malformed value for any numeric option fails at once, naming the option") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const std::vector<std::string> options = {"-n", "-t", "-c", "-b", "--parallel", "--window", "--sink", "--top-k",
                                              "--temp", "--top-p", "--seed", "--max-weights-mib", "--max-kv-mib",
                                              "--min-p", "--repeat-penalty", "--repeat-last-n", "--presence-penalty",
                                              "--frequency-penalty", "--n-predict", "--threads", "--ctx-size"};
    const std::vector<std::string> bad = {"abc", "nan", "1e20", "-7", "", "3x", "inf", "99999999999999999999999"};
    for (const std::string & opt : options) {
        for (const std::string & v : bad) {
            // any finite temperature is valid (<= 0: greedy), and so is any finite additive penalty
            if ((opt == "--temp" || opt == "--presence-penalty" || opt == "--frequency-penalty") && v == "-7") continue;
            CAPTURE(opt);
            CAPTURE(v);
            const auto t0 = std::chrono::steady_clock::now();
            const ChildResult r = run_generate({"-m", model, opt, v, "-n", "1"});
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            check_clean_failure(r, {opt});
            CHECK(s < 1.0);
        }
    }
    // the clock seed is printed, so a good sample can be reproduced
    const ChildResult r = run_generate({"-m", model, "-n", "1", "-t", "1", "--seed", "-1"});
    CHECK(r.code == 0);
    CHECK(contains(r.output, "seed: "));
}

namespace {
// The generated text of a greedy run (stdout and stderr together), which must succeed.
std::string greedy_text(std::vector<std::string> args) {
    args.insert(args.end(), {"--temp", "0", "-t", "1"});
    const ChildResult r = run_generate(args);
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.code == 0);
    return r.output;
}
size_t count_of(const std::string & s, const std::string & part) {
    size_t n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
    return n;
}
} // namespace

TEST_CASE("kvg-generate: llama.cpp's flags (long names, -f, -e, stop strings, penalties, ignore-eos, help)") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const ChildResult help = run_child([&] {
        // stdout only: --help prints there (stderr closed)
        close(2);
        const std::string exe = generate_path();
        execl(exe.c_str(), exe.c_str(), "--help", (char *) nullptr);
        _exit(127);
    });
    CHECK(help.code == 0);
    CHECK(contains(help.output, "--repeat-penalty"));
    CHECK(contains(help.output, "--n-predict"));
    // long names mean what the short ones do
    const std::string shorts = greedy_text({"-m", model, "-p", "And God said", "-n", "40", "-c", "128"});
    const std::string longs = greedy_text({"--model", model, "--prompt", "And God said", "--n-predict", "40", "--ctx-size", "128",
                                           "--threads", "1", "--batch-size", "64"});
    auto text_of = [](const std::string & out) { return out.substr(out.find("And"), out.find("prompt:") - out.find("And")); };
    CHECK(text_of(shorts) == text_of(longs));
    // the greedy text loops; a repeat penalty breaks the loop
    const std::string phrase = "thou shalt not be a stranger";
    const std::string loop = greedy_text({"-m", model, "-p", "And God said", "-n", "120"});
    const std::string pen = greedy_text({"-m", model, "-p", "And God said", "-n", "120", "--repeat-penalty", "1.5"});
    CHECK(count_of(loop, phrase) >= 3);
    CHECK(count_of(pen, phrase) < count_of(loop, phrase));
    // -r: the text stops right after the stop string
    const std::string stopped = greedy_text({"-m", model, "-p", "And God said", "-n", "-1", "-r", "parable"});
    CHECK(contains(stopped, "parable\n"));
    CHECK(contains(stopped, "(stop string)"));
    CHECK_FALSE(contains(stopped, "midst"));
    // -f: one prompt from a file, -e its escapes; --no-display-prompt: only the new text
    const std::string pf = temp_path("prompt.txt");
    { std::ofstream(pf) << "And God\\nsaid"; }
    const std::string esc = greedy_text({"-m", model, "-f", pf, "-e", "-n", "3"});
    CHECK(contains(esc, "And God\nsaid"));
    const std::string quiet = greedy_text({"-m", model, "-f", pf, "-n", "3", "--no-display-prompt"});
    CHECK_FALSE(contains(quiet, "And God"));
    // -n -1 ends at a full context; with --ignore-eos the end of text does not stop it either
    const std::string full = greedy_text({"-m", model, "-p", "And", "-n", "-1", "-c", "24", "--ignore-eos"});
    CHECK(contains(full, "(context full)"));
    // a sample from a printed clock seed is reproduced by passing that seed
    const ChildResult a = run_generate({"-m", model, "-p", "And", "-n", "12", "-t", "1"});
    const size_t at = a.output.find("seed: ");
    REQUIRE(at != std::string::npos);
    const std::string seed = a.output.substr(at + 6, a.output.find('\n', at) - at - 6);
    const ChildResult b = run_generate({"-m", model, "-p", "And", "-n", "12", "-t", "1", "--seed", seed});
    CHECK(text_of(a.output) == text_of(b.output));
    std::remove(pf.c_str());
}

TEST_CASE("kvg-generate --prompt-cache: a later run reuses the saved prompt, prints the same text, refuses a foreign file") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const std::string cache = temp_path("prompt-cache.kvgs");
    std::remove(cache.c_str());
    auto text_of = [](const std::string & out) { return out.substr(out.find("And"), out.find("prompt:") - out.find("And")); };
    const std::vector<std::string> args = {"-m", model, "-p", "And God said, Let there be light", "-n", "24",
                                           "--temp", "0", "--kv-type", "q8_0", "--prompt-cache", cache};
    const ChildResult first = run_generate(args), second = run_generate(args);
    INFO(first.output);
    INFO(second.output);
    CHECK(first.code == 0);
    CHECK_FALSE(contains(first.output, "prompt cache: reused")); // nothing saved yet
    CHECK(contains(second.output, "prompt cache: reused 10 of the prompt's 11 tokens"));
    CHECK(text_of(first.output) == text_of(second.output));
    // a prompt that shares only a prefix reuses that prefix and prints what a run without the cache prints
    std::vector<std::string> other = args;
    other[3] = "And God said, Let there be darkness";
    const ChildResult part = run_generate(other);
    other.resize(other.size() - 2);
    CHECK(contains(part.output, "prompt cache: reused 9 of"));
    CHECK(text_of(part.output) == text_of(run_generate(other).output));
    // a file of another model is reported and not used
    const ChildResult foreign = run_generate({"-m", std::string(KVG_SHARED_DIR) + "/models/stories260K.bin", "-z",
                                              std::string(KVG_SHARED_DIR) + "/models/tok512.bin", "-p", "And", "-n", "2",
                                              "--prompt-cache", cache});
    CHECK(foreign.code == 0);
    CHECK(contains(foreign.output, "another model; not used"));
    std::remove(cache.c_str());
}

TEST_CASE("kvg-generate --parallel with one prompt decodes it once and shares it; each sequence writes the greedy text") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const ChildResult one = run_generate({"-m", model, "-p", "And God said", "-n", "30", "--temp", "0", "-t", "1"});
    const ChildResult par = run_generate({"-m", model, "-p", "And God said", "-n", "30", "--temp", "0", "-t", "1",
                                          "--parallel", "3"});
    INFO(par.output);
    CHECK(par.code == 0);
    CHECK(contains(par.output, "prompts: 2 sequences share"));
    const std::string text = one.output.substr(one.output.find("And God"), one.output.find('\n', one.output.find("And God")) -
                                                                              one.output.find("And God"));
    for (const char * tag : {"[1] ", "[2] ", "[3] "}) CHECK(contains(par.output, std::string(tag) + text));
}

TEST_CASE("kvg-generate --context-shift: a full linear cache drops half and goes on; a q8_0 cache refuses clearly") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const ChildResult full = run_generate({"-m", model, "-p", "And God said", "-n", "100", "-c", "32", "-t", "1"});
    CHECK(contains(full.output, "(context full)"));
    const ChildResult shifted = run_generate({"-m", model, "-p", "And God said", "-n", "100", "-c", "32", "-t", "1",
                                              "--context-shift", "--keep", "4"});
    INFO(shifted.output);
    CHECK(shifted.code == 0);
    CHECK(contains(shifted.output, "[context shift: kept 4 positions, dropped 14]"));
    CHECK(contains(shifted.output, "generated:   100 tokens"));
    const ChildResult q8 = run_generate({"-m", model, "-p", "And God said", "-n", "100", "-c", "32", "-t", "1",
                                         "--context-shift", "--kv-type", "q8_0"});
    CHECK(q8.code == 1);
    CHECK(contains(q8.output, "error: context shift: kvg_seq_add: positions can be shifted in linear f32 and f16"));
}

TEST_CASE("kvg-speculative: its text is the target's greedy text, linear and ring, every cache type; a foreign draft refused") {
    const std::string exe = example_path("kvg-speculative");
    if (exe.empty() || generate_path().empty()) {
        MESSAGE("kvg-speculative or kvg-generate not built: skipped");
        return;
    }
    const std::string target = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const std::string draft = temp_path("draft-q4_0.gguf"), foreign = temp_path("foreign.gguf");
    char err[512];
    kvg_model * m = kvg_model_load(target.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    REQUIRE(m != nullptr);
    REQUIRE(kvg_model_save_gguf(m, draft.c_str(), KVG_FTYPE_Q4_0, false, err, sizeof err)); // the shipped model in q4_0
    kvg_model_free(m);
    m = kvg_model_load((std::string(KVG_SHARED_DIR) + "/models/stories260K.bin").c_str(),
                       (std::string(KVG_SHARED_DIR) + "/models/tok512.bin").c_str(), kvg_model_default_params(), err,
                       sizeof err);
    REQUIRE(m != nullptr);
    REQUIRE(kvg_model_save_gguf(m, foreign.c_str(), KVG_FTYPE_F32, false, err, sizeof err));
    kvg_model_free(m);
    auto run_spec = [&](const std::vector<std::string> & args) {
        return run_child([&] {
            std::vector<char *> argv = {const_cast<char *>(exe.c_str())};
            for (const std::string & a : args) argv.push_back(const_cast<char *>(a.c_str()));
            argv.push_back(nullptr);
            execv(exe.c_str(), argv.data());
            _exit(127);
        });
    };
    auto stdout_of = [](const std::string & out) { // the text: from the prompt to the report
        return out.substr(out.find("And God"), out.find("\nprompt:") - out.find("And God"));
    };
    const std::vector<std::vector<std::string>> cases = {
        {"-n", "100"},
        {"-n", "100", "--kv-type", "q8_0"},
        {"-n", "100", "--kv-type", "f16"},
        {"-n", "150", "-c", "64", "--kv-mode", "ring", "--window", "40", "--sink", "4"},
        {"-n", "150", "-c", "96", "--kv-mode", "ring", "--window", "60", "--sink", "4", "--kv-type", "q8_0"},
        {"-n", "-1", "-c", "48"},
    };
    for (const auto & c : cases) {
        std::vector<std::string> spec = {"-m", target, "-md", draft, "--draft", "6", "-p", "And God said", "-t", "1"};
        std::vector<std::string> gen = {"-m", target, "--temp", "0", "-p", "And God said", "-t", "1"};
        spec.insert(spec.end(), c.begin(), c.end());
        gen.insert(gen.end(), c.begin(), c.end());
        const ChildResult a = run_spec(spec), b = run_generate(gen);
        INFO(a.output);
        CHECK(a.code == 0);
        CHECK(stdout_of(a.output) == stdout_of(b.output));
        CHECK(contains(a.output, "accepted"));
    }
    const ChildResult bad = run_spec({"-m", target, "-md", foreign, "-p", "And", "-n", "4"});
    CHECK(bad.code == 1);
    CHECK(contains(bad.output, "vocabulary differs"));
    std::remove(draft.c_str());
    std::remove(foreign.c_str());
}

TEST_CASE("kvg-generate: weights that are all NaN or infinite run to the end without a crash") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped");
        return;
    }
    std::string ckpt = read_file(model_path("stories260K.bin"));
    REQUIRE(ckpt.size() > 28);
    for (float bad : {std::nanf(""), INFINITY}) {
        CAPTURE(bad);
        for (size_t off = 28; off + 4 <= ckpt.size(); off += 4) std::memcpy(&ckpt[off], &bad, 4);
        const std::string p = temp_path("nan.bin");
        write_file(p, ckpt);
        for (const char * temp : {"0", "0.8"}) {
            const ChildResult r = run_generate({"-m", p, "-z", model_path("tok512.bin"), "-p", "Once", "-n", "8", "-c",
                                                "32", "-t", "2", "--temp", temp, "--seed", "1"});
            INFO(r.output);
            CHECK(r.exited);             // no signal
            CHECK((r.code == 0 || r.code == 1));
            if (r.code == 1) CHECK(contains(r.output, "error: "));
        }
        std::filesystem::remove(p);
    }
}

namespace {

// Runs kvg-generate for at most `seconds` (less once its output holds every string of
// `until`), then kills it; what it printed by then.
std::string generate_output_within(const std::vector<std::string> & args, double seconds,
                                   const std::vector<std::string> & until = {}) {
    const std::string exe = generate_path();
    int fd = -1;
    const pid_t pid = spawn([&] {
        std::vector<char *> argv = {const_cast<char *>(exe.c_str())};
        for (const std::string & a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(exe.c_str(), argv.data());
        _exit(127);
    }, &fd);
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        const double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
        if (left <= 0) break;
        pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int) (left * 1000) + 1) <= 0) break;
        char buf[4096];
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, (size_t) n);
        if (!until.empty() && std::all_of(until.begin(), until.end(),
                                          [&](const std::string & u) { return out.find(u) != std::string::npos; }))
            break;
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fd);
    return out;
}

// The shipped model with token `id` replaced by a user-defined piece `text`.
std::string model_with_piece(int id, const std::string & text) {
    const std::string src = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    ggml_context * data = nullptr;
    gguf_init_params p = {false, &data};
    gguf_context * g = gguf_init_from_file(src.c_str(), p);
    REQUIRE(g != nullptr);
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, g);
    const int64_t tk = gguf_find_key(g, "tokenizer.ggml.tokens"), ty = gguf_find_key(g, "tokenizer.ggml.token_type");
    REQUIRE(tk >= 0);
    REQUIRE(ty >= 0);
    std::vector<std::string> tokens;
    for (size_t i = 0; i < gguf_get_arr_n(g, tk); ++i) tokens.push_back(gguf_get_arr_str(g, tk, i));
    tokens[id] = text;
    std::vector<const char *> ptrs;
    for (const std::string & t : tokens) ptrs.push_back(t.c_str());
    gguf_set_arr_str(out, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    std::vector<int32_t> types((const int32_t *) gguf_get_arr_data(g, ty), (const int32_t *) gguf_get_arr_data(g, ty) + gguf_get_arr_n(g, ty));
    types[id] = 4; // user-defined: matched whole
    gguf_set_arr_data(out, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) gguf_add_tensor(out, t);
    const std::string path = temp_path("long-piece.gguf");
    REQUIRE(gguf_write_to_file(out, path.c_str(), false));
    gguf_free(out);
    gguf_free(g);
    ggml_free(data);
    return path;
}

} // namespace

TEST_CASE("kvg-generate: long pieces, streaming --parallel with -n -1, and the context limit with --parallel") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    SUBCASE("a 300-byte piece is printed whole") {
        const std::string piece(300, 'Q');
        const std::string path = model_with_piece(900, piece);
        const ChildResult r = run_generate({"-m", path, "-p", piece, "-n", "1", "-t", "1"});
        INFO(r.output);
        CHECK(r.code == 0);
        CHECK(contains(r.output, piece));
        std::remove(path.c_str());
    }
    // the program never ends (-n -1, ring): both sequences must stream while it runs (the
    // deadline is generous: a loaded Debug build took more than one second)
    SUBCASE("--parallel with -n -1 in ring mode prints both sequences while it runs") {
        const std::string out =
            generate_output_within({"-m", model, "-p", "And God said", "--parallel", "2", "-n", "-1", "--kv-mode",
                                    "ring", "-c", "32", "-t", "1", "--temp", "1"},
                                   20.0, {"[1] ", "[2] "});
        INFO(out);
        CHECK(contains(out, "[1] "));
        CHECK(contains(out, "[2] "));
    }
    SUBCASE("at a full context every sequence generates as many tokens as one alone") {
        const ChildResult one = run_generate({"-m", model, "-p", "And", "-n", "300", "-c", "8", "-t", "1", "--temp", "0"});
        const ChildResult four = run_generate({"-m", model, "-p", "And", "-n", "300", "-c", "8", "-t", "1", "--temp", "0",
                                               "--parallel", "4"});
        INFO(one.output);
        INFO(four.output);
        int n1 = -1, n4 = -1;
        const size_t a = one.output.find("generated:"), b = four.output.find("generated:");
        REQUIRE(a != std::string::npos);
        REQUIRE(b != std::string::npos);
        std::sscanf(one.output.c_str() + a, "generated: %d", &n1);
        std::sscanf(four.output.c_str() + b, "generated: %d", &n4);
        CHECK(n1 > 0);
        CHECK(n4 == 4 * n1);
    }
}

TEST_CASE("kvg-bench: an error after the model is loaded exits 1, the model freed (LeakSanitizer in CI)") {
    const std::string exe = example_path("kvg-bench");
    if (exe.empty()) {
        MESSAGE("kvg-bench not built: skipped");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const ChildResult r = run_child([&] {
        const char * argv[] = {exe.c_str(), "-m", model.c_str(), "-t", "99999", "-r", "1", nullptr};
        execv(exe.c_str(), const_cast<char **>(argv));
        _exit(127);
    });
    INFO(r.output);
    CHECK(r.exited);
    CHECK(r.code == 1); // a leak report would change the exit code under ASan
    CHECK(contains(r.output, "n_threads = 99999 is invalid"));
}

TEST_CASE("kvg-perplexity: llama.cpp's definition, against token-by-token decoding through the API") {
    const std::string exe = example_path("kvg-perplexity");
    if (exe.empty()) {
        MESSAGE("kvg-perplexity not built: skipped");
        return;
    }
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const std::string text = "In the beginning God created the heaven and the earth. And the earth was without form, and "
                             "void; and darkness was upon the face of the deep. And God said, Let there be light.";
    const std::string path = temp_path("ppl.txt");
    { std::ofstream(path) << text; }
    const int n_ctx = 16;
    const ChildResult r = run_child([&] {
        execl(exe.c_str(), exe.c_str(), "-m", model.c_str(), "-f", path.c_str(), "-c", "16", "-t", "1", (char *) nullptr);
        _exit(127);
    });
    INFO(r.output);
    REQUIRE(r.code == 0);
    const size_t at = r.output.find("PPL = ");
    REQUIRE(at != std::string::npos);
    const double got = std::strtod(r.output.c_str() + at + 6, nullptr);

    // the same by hand: each chunk from position 0 with BOS first, one token per decode call
    char err[512];
    kvg_model * m = kvg_model_load(model.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    REQUIRE(m);
    std::vector<kvg_token> toks(512);
    toks.resize((size_t) kvg_tokenize(m, text.c_str(), true, toks.data(), (int32_t) toks.size()));
    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    kvg_context * c = kvg_context_new(m, cp, err, sizeof err);
    REQUIRE(c);
    const int n_vocab = kvg_model_n_vocab(m);
    double sum = 0;
    int count = 0;
    for (size_t chunk = 0; chunk + 1 <= toks.size() / n_ctx; ++chunk) {
        for (int j = 0; j < n_ctx - 1; ++j) {
            const kvg_token t = j == 0 ? kvg_model_bos(m) : toks[chunk * n_ctx + j];
            const float * l = kvg_decode(c, &t, 1, j, err, sizeof err);
            REQUIRE(l);
            if (j < n_ctx / 2) continue;
            double mx = -1e30, z = 0;
            for (int i = 0; i < n_vocab; ++i) mx = std::max(mx, (double) l[i]);
            for (int i = 0; i < n_vocab; ++i) z += std::exp((double) l[i] - mx);
            sum += std::log(z) + mx - l[toks[chunk * n_ctx + j + 1]];
            ++count;
        }
    }
    REQUIRE(count > 0);
    CHECK(contains(r.output, "over " + std::to_string(count) + " tokens"));
    CHECK(got == doctest::Approx(std::exp(sum / count)).epsilon(1e-3));
    kvg_context_free(c);
    kvg_model_free(m);
    std::remove(path.c_str());
}

// Scripts and CI read the exit status: a run that printed an error must not end with 0.
TEST_CASE("every example exits non-zero after an error, with the message") {
    const std::string model = std::string(KVG_SOURCE_DIR) + "/models/kjv-tiny.gguf";
    const std::string missing = temp_path("no-such-model.gguf");
    struct Case {
        const char * exe;
        std::vector<std::string> args;
        const char * message;
    };
    const std::vector<Case> cases = {
        // a section after the table fails: its error used to end with status 0
        {"kvg-bench",
         {"-m", model, "--residency", "--only-kv", "--residency-ctx", "2000000000", "-t", "1"},
         "cannot commit"},
        {"kvg-bench", {"-m", missing, "--kv-modes", "--only-kv"}, "error: "},
        {"kvg-bench", {"-m", missing, "-r", "1"}, "error: "},
        {"kvg-generate", {"-m", missing}, "error: "},
        {"kvg-perplexity", {"-m", missing, "-f", model}, "error: "},
        {"kvg-speculative", {"-m", missing, "-md", missing}, "error: "},
        {"kvg-convert-llama2c", {missing, temp_path("out.gguf")}, "error: "},
        {"kvg-bench-executor", {"--reps", "0"}, "must be >= 1"},
        {"kvg-bench-edges", {"--bogus"}, "usage: "},
        {"kvg-bench-matmul", {"--bogus"}, "usage: "},
    };
    for (const Case & c : cases) {
        const std::string exe = example_path(c.exe);
        if (exe.empty()) {
            MESSAGE(c.exe << " not built: skipped");
            continue;
        }
        const ChildResult r = run_program(exe, c.args);
        INFO(c.exe << " " << c.args.front() << " ... " << c.args.back() << "\n" << r.output);
        CHECK(r.exited);
        CHECK(r.code == 1);
        CHECK(contains(r.output, c.message));
    }
}
