// The RPC server's tensor cache (kvg-rpc-server -c): bytes a client marked for caching in
// SET_TENSOR (weights above ggml's 10 MiB threshold) are kept on disk, one file per tensor
// named by the 16 hex digits of their FNV-1a hash, so a client that loads the same model
// again sends SET_TENSOR_HASH and no data. The layout and the directory are those of
// llama.cpp's rpc-server, so the two servers can share a cache.
//
// A file is written under a temporary name and renamed into place, so a reader never sees
// a partial file (several sessions may store at once); a file is served only if its bytes
// still hash to its name, so a damaged cache costs a resend and never wrong weights.
#include "rpc-server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvg::rpc {

uint64_t fnv1a64(const uint8_t * data, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= data[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string default_cache_dir() {
    auto env = [](const char * name) -> std::string {
        const char * v = std::getenv(name);
        return v && *v ? v : "";
    };
    std::string base = env("LLAMA_CACHE");
    if (base.empty() && !env("XDG_CACHE_HOME").empty()) base = env("XDG_CACHE_HOME") + "/llama.cpp";
    if (base.empty() && !env("HOME").empty()) base = env("HOME") + "/.cache/llama.cpp";
    if (base.empty()) return "";
    return base + "/rpc";
}

bool make_dirs(const std::string & path, std::string * why) {
    for (size_t i = 1; i <= path.size(); ++i) {
        if (i < path.size() && path[i] != '/') continue;
        const std::string part = path.substr(0, i);
        if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
            *why = "cannot create " + part + ": " + std::strerror(errno);
            return false;
        }
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        *why = path + " is not a directory";
        return false;
    }
    return true;
}

namespace {

std::string entry_path(const std::string & dir, uint64_t hash) {
    char name[17];
    std::snprintf(name, sizeof name, "%016" PRIx64, hash);
    return dir + "/" + name;
}

bool write_all(int fd, const uint8_t * p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= (size_t) w;
    }
    return true;
}

bool read_all(int fd, uint8_t * p, size_t n) {
    while (n > 0) {
        const ssize_t r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= (size_t) r;
    }
    return true;
}

} // namespace

bool cache_store(const std::string & dir, const uint8_t * data, size_t size, std::string * why) {
    const std::string path = entry_path(dir, fnv1a64(data, size));
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && (uint64_t) st.st_size == size) return true; // kept already
    static std::atomic<unsigned> serial{0};
    const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *why = "cannot create " + tmp + ": " + std::strerror(errno);
        return false;
    }
    const bool written = write_all(fd, data, size);
    const bool closed = ::close(fd) == 0;
    if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
        *why = "cannot write " + path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

int64_t cache_size(const std::string & dir, uint64_t hash) {
    struct stat st;
    if (stat(entry_path(dir, hash).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (int64_t) st.st_size;
}

bool cache_load(const std::string & dir, uint64_t hash, uint8_t * out, size_t size) {
    const int fd = ::open(entry_path(dir, hash).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    const bool ok = fstat(fd, &st) == 0 && (uint64_t) st.st_size == size && read_all(fd, out, size);
    ::close(fd);
    return ok && fnv1a64(out, size) == hash;
}

} // namespace kvg::rpc
