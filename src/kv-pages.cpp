// Copy-on-write page sharing for the KV cache (kv-pages.h explains the scheme).
#include "kv-pages.h"

#include <algorithm>
#include <new>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kvg {

SharedPages::~SharedPages() {
    if (mem) munmap(mem, size());
    if (fd >= 0) close(fd);
}

bool SharedPages::init(size_t bytes, std::string * err) {
    page = (size_t) sysconf(_SC_PAGESIZE);
    n_pages = file_pages = (bytes + page - 1) / page;
    fd = memfd_create("kvgraph-kv-cache", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t) size()) != 0) {
        if (err) *err = "cannot create a memory file of " + std::to_string(size()) + " bytes for the KV cache";
        return false;
    }
    void * m = mmap(nullptr, size(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (m == MAP_FAILED) {
        if (err) *err = "cannot reserve " + std::to_string(size()) + " bytes of address space for the KV cache";
        return false;
    }
    mem = m;
    madvise(mem, size(), MADV_NOHUGEPAGE); // 4 KiB granularity: residency follows the rows written
    return true;
}

uint64_t SharedPages::file_page(uint64_t v) const {
    const auto it = remapped.find(v);
    return it == remapped.end() ? v : it->second;
}

uint32_t SharedPages::count(uint64_t f) const {
    const auto it = refs.find(f);
    return it == refs.end() ? 1 : it->second;
}

// One fewer page shows f; a file page nobody shows is emptied and reused.
void SharedPages::drop(uint64_t f) {
    const uint32_t c = count(f) - 1;
    if (c == 1) refs.erase(f); // the default
    else refs[f] = c;
    if (c > 0) return;
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) (f * page), (off_t) page);
    free_pages.push_back(f);
}

void SharedPages::map(uint64_t v, uint64_t f) {
    const uint64_t old = file_page(v);
    if (old == f) return;
    refs[f] = count(f) + 1;
    drop(old);
    mmap((char *) mem + v * page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t) (f * page));
    if (f == v) remapped.erase(v);
    else remapped[v] = f;
    if (refs[f] == 1) refs.erase(f);
}

uint64_t SharedPages::new_file_page() {
    if (!free_pages.empty()) {
        const uint64_t f = free_pages.back();
        free_pages.pop_back();
        refs[f] = 0; // shown by nobody until mapped
        return f;
    }
    const uint64_t f = file_pages++;
    if (ftruncate(fd, (off_t) (file_pages * page)) != 0) throw std::bad_alloc();
    refs[f] = 0;
    return f;
}

void SharedPages::share(size_t dst, size_t src, size_t len) {
    char * b = (char *) mem;
    size_t done = 0;
    while (done < len) {
        const size_t d = dst + done, s = src + done;
        const bool whole = d % page == 0 && s % page == 0 && len - done >= page;
        if (whole) {
            map(d / page, file_page(s / page));
            done += page;
            continue;
        }
        // up to the next page boundary of dst: a copy into dst's own page
        const size_t n = std::min(len - done, page - d % page);
        make_private(d, n);
        std::memmove(b + d, b + s, n);
        done += n;
    }
}

void SharedPages::make_private(size_t off, size_t len) {
    if (remapped.empty()) return; // every page shows its own file page: nothing is shared
    for (uint64_t v = off / page; v * page < off + len; ++v) {
        const uint64_t f = file_page(v);
        if (count(f) <= 1) continue;
        const uint64_t g = new_file_page();
        if (pwrite(fd, (char *) mem + v * page, page, (off_t) (g * page)) != (ssize_t) page) throw std::bad_alloc();
        map(v, g);
    }
}

void SharedPages::release_all() {
    for (const auto & r : std::vector<std::pair<uint64_t, uint64_t>>(remapped.begin(), remapped.end())) {
        mmap((char *) mem + r.first * page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             (off_t) (r.first * page));
    }
    remapped.clear();
    refs.clear();
    free_pages.clear();
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t) (file_pages * page));
    file_pages = n_pages;
    ftruncate(fd, (off_t) size());
}

} // namespace kvg
