// FileMapping: a model file's bytes, mapped or read into (huge-page) memory.
#include "model-impl.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

namespace kvg {

FileMapping::~FileMapping() {
    if (mapped && data) munmap(const_cast<uint8_t *>(data), size);
    if (copy) munmap(copy, copy_size);
}

bool FileMapping::open(const std::string & path, bool use_mmap, std::string * err, size_t read_max, size_t lead) {
    const int fd = open_regular(path, err);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ::close(fd);
        return fail(err, KVG_STATUS_IO, strfmt("cannot stat '%s': %s", path.c_str(), strerror(errno)));
    }
    size = (size_t) st.st_size;
    if (size == 0) {
        ::close(fd);
        return fail(err, strfmt("'%s' is empty", path.c_str()));
    }
    const bool small = size <= read_max;
    if (use_mmap && !small) {
        void * p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            data = (const uint8_t *) p;
            mapped = true;
            ::close(fd);
            return true;
        }
    }
    const size_t huge = (size_t) 2 << 20, page = 4096;
    const size_t round = small ? page : huge;
    copy_size = (lead + size + round - 1) / round * round;
    copy = mmap(nullptr, copy_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (small ? MAP_POPULATE : 0),
                -1, 0);
    if (copy == MAP_FAILED) {
        copy = nullptr;
        ::close(fd);
        return fail(err, KVG_STATUS_OUT_OF_MEMORY,
                    strfmt("'%s': cannot allocate %zu bytes for its contents", path.c_str(), size));
    }
    if (!small) madvise(copy, copy_size, MADV_HUGEPAGE); // a hint: without transparent huge pages it does nothing
    uint8_t * dst = (uint8_t *) copy + lead;
    // large files in parallel slices: the page faults of fresh memory (zeroing, and finding
    // huge pages) cost more than the copy, and they run on every core
    const size_t slice_min = (size_t) 64 << 20;
    const size_t cores = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    const unsigned n_slices = (unsigned) std::max<size_t>(1, std::min(cores, size / slice_min));
    std::vector<size_t> failed_at(n_slices, SIZE_MAX);
    auto read_slice = [&](unsigned i) {
        const size_t begin = size / n_slices * i, end = i + 1 == n_slices ? size : size / n_slices * (i + 1);
        for (size_t at = begin; at < end;) {
            const ssize_t n = ::pread(fd, dst + at, end - at, (off_t) at);
            if (n <= 0) {
                failed_at[i] = at;
                return;
            }
            at += (size_t) n;
        }
    };
    std::vector<std::thread> readers;
    for (unsigned i = 1; i < n_slices; ++i) {
        try {
            readers.emplace_back(read_slice, i);
        } catch (const std::system_error &) {
            read_slice(i); // no thread to be had: this one reads the slice
        }
    }
    read_slice(0);
    for (auto & t : readers) t.join();
    ::close(fd);
    for (size_t at : failed_at) {
        if (at != SIZE_MAX)
            return fail(err, KVG_STATUS_IO, strfmt("'%s': read failed at offset %zu", path.c_str(), at));
    }
    data = dst;
    return true;
}

} // namespace kvg
