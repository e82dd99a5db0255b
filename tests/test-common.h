// Helpers shared by the tests that read the third-party models and fixtures.
#pragma once

#include "ggml.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

// $KVG_SHARED_DIR if set, else the directory CMake configured (../shared by default).
inline std::string shared_dir() {
    if (const char * e = std::getenv("KVG_SHARED_DIR")) return e;
    return KVG_SHARED_DIR;
}
inline std::string model_path(const std::string & name) { return shared_dir() + "/models/" + name; }

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
inline void write_file(const std::string & path, const std::string & data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(data.data(), (std::streamsize) data.size());
}

// The decode graph's tensor "<what>_l<il>_c<c>" (llama-graph.h names them), or nullptr.
inline ggml_tensor * graph_tensor(ggml_cgraph * gf, const std::string & what, int il, int c) {
    return ggml_graph_get_tensor(gf, (what + "_l" + std::to_string(il) + "_c" + std::to_string(c)).c_str());
}
// Does t have a control edge of this kind to dep?
inline bool has_dep(const ggml_tensor * t, const ggml_tensor * dep, ggml_dep_kind want) {
    for (int i = 0; i < ggml_n_control_deps(t); ++i) {
        ggml_dep_kind kind;
        if (ggml_get_control_dep(t, i, &kind) == dep && kind == want) return true;
    }
    return false;
}
// Position of t in the graph's node list, -1 if absent.
inline int node_position(ggml_cgraph * gf, const ggml_tensor * t) {
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        if (ggml_graph_node(gf, i) == t) return i;
    }
    return -1;
}
