// Helpers shared by the tests that read the third-party models and fixtures.
#pragma once

#include "edges-common.h"
#include "ggml.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

// $KVG_SHARED_DIR if set, else the directory CMake configured (../shared by default).
inline std::string shared_dir() {
    if (const char * e = std::getenv("KVG_SHARED_DIR")) return e;
    return KVG_SHARED_DIR;
}
inline std::string model_path(const std::string & name) { return shared_dir() + "/models/" + name; }
inline std::string fixture_path(const std::string & name) { return shared_dir() + "/fixtures/" + name; }

// A per-process temporary file name: tests running in parallel do not collide.
inline std::string temp_path(const std::string & prefix, const std::string & name) {
    return (std::filesystem::temp_directory_path() / ("kvg-" + prefix + "-" + std::to_string(getpid()) + "-" + name)).string();
}
inline std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}
// Whitespace-separated integers (the fixtures' *.tokens.txt, *.greedy.txt); throws if the
// file cannot be read (the test fails).
inline std::vector<int> read_ids(const std::string & path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::vector<int> ids;
    for (int x; f >> x;) ids.push_back(x);
    return ids;
}
// Little-endian float32 values (the fixtures' *.logits.f32), whatever the host's byte order;
// throws if the file cannot be read.
inline std::vector<float> read_f32(const std::string & path) {
    if (!std::ifstream(path)) throw std::runtime_error("cannot read " + path);
    const std::string s = read_file(path);
    std::vector<float> v(s.size() / 4);
    for (size_t i = 0; i < v.size(); ++i) {
        const uint8_t * b = (const uint8_t *) s.data() + 4 * i;
        const uint32_t u = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t) b[3] << 24;
        std::memcpy(&v[i], &u, 4);
    }
    return v;
}
inline void write_file(const std::string & path, const std::string & data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(data.data(), (std::streamsize) data.size());
}

// The decode graph's tensor "<what>_l<il>_c<c>" (llama-graph.h names them), or nullptr.
inline ggml_tensor * graph_tensor(ggml_cgraph * gf, const std::string & what, int il, int c) {
    return ggml_graph_get_tensor(gf, (what + "_l" + std::to_string(il) + "_c" + std::to_string(c)).c_str());
}
