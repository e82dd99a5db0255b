// Helpers shared by the tests that read the third-party models and fixtures.
#pragma once

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
