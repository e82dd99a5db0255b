// Helpers shared by the tests that read the third-party models and fixtures.
#pragma once

#include <cstdlib>
#include <string>

// $KVG_SHARED_DIR if set, else the directory CMake configured (../shared by default).
inline std::string shared_dir() {
    if (const char * e = std::getenv("KVG_SHARED_DIR")) return e;
    return KVG_SHARED_DIR;
}
inline std::string model_path(const std::string & name) { return shared_dir() + "/models/" + name; }
