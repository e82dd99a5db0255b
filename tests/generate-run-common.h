// Runs kvg-generate through a pipe, as a person's shell would: for the tests of -cnv
// (test-chat, test-chat-families).
#pragma once

#include "test-common.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace generate_run {

// A program of the build tree's bin/ (this test runs from <build>/tests), or $env_var; "" if not built.
inline std::string tool_path(const char * name, const char * env_var) {
    if (const char * e = std::getenv(env_var)) return e;
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "";
    self[n] = '\0';
    const std::filesystem::path p = std::filesystem::path(self).parent_path().parent_path() / "bin" / name;
    return std::filesystem::exists(p) ? p.string() : "";
}

// kvg-generate: $KVG_GENERATE, else bin/ of the build tree; "" if not built.
inline std::string generate_path() { return tool_path("kvg-generate", "KVG_GENERATE"); }

inline std::string shell_quoted(const std::string & s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct Run {
    int code = -1;
    std::string out, err;
};

// `cat INPUT | PROGRAM ARGS` (PROGRAM: kvg-generate unless given), stdout and stderr apart.
inline Run generate(const std::vector<std::string> & args, const std::string & input, std::string program = "") {
    if (program.empty()) program = generate_path();
    const std::string in = temp_path("run", "in.txt"), out = temp_path("run", "out.txt"),
                      err = temp_path("run", "err.txt");
    write_file(in, input);
    std::string cmd = "cat " + shell_quoted(in) + " | " + shell_quoted(program);
    for (const std::string & a : args) cmd += " " + shell_quoted(a);
    cmd += " > " + shell_quoted(out) + " 2> " + shell_quoted(err);
    const int status = std::system(cmd.c_str());
    Run r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    for (const std::string & p : {in, out, err}) std::remove(p.c_str());
    return r;
}

// The number after `key` in the first line of s holding it after `from` (-1 if none).
inline long number_after(const std::string & s, const std::string & key, size_t from = 0) {
    const size_t at = s.find(key, from);
    return at == std::string::npos ? -1 : std::strtol(s.c_str() + at + key.size(), nullptr, 10);
}

} // namespace generate_run
