// Pieces shared by the programs that write llama.cpp's references for the family tests
// (llama-ref.cpp, llama-quant-ref.cpp; built outside the tree, see scripts/README-family.md).
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

// The id sampler: the tests draw the same ids with the same function.
inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// 64-bit FNV-1a: the tests check that they wrote (or encoded) these very bytes.
inline uint64_t fnv1a(const char * p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char) p[i]) * 0x100000001B3ull;
    return h;
}
inline uint64_t fnv1a(const std::string & s) { return fnv1a(s.data(), s.size()); }

inline std::string slurp(const char * path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The reference file being written: little-endian values and length-prefixed strings.
struct Out {
    std::string buf;
    template <typename T> void put(T v) { buf.append((const char *) &v, sizeof v); } // little-endian hosts only
    void str(const std::string & s) {
        put((uint32_t) s.size());
        buf += s;
    }
};
