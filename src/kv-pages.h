// The KV cache's memory: one range of pages that sequences can share copy-on-write.
//
// The bytes live in a memory file (memfd) mapped once; each page of the range normally shows
// its own page of the file. share() points pages of one range at the file pages of another
// (a prefix several sequences hold is resident once); before anything writes into a shared
// page, make_private() gives it a copy of its own. Pages become resident when first written
// (dynamic residency) and release() gives them back (reads then see zeros). Only pages that
// were shared or copied have entries in the tables, so a huge reservation costs nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvg {

class SharedPages {
public:
    SharedPages() = default;
    ~SharedPages();
    SharedPages(const SharedPages &) = delete;
    SharedPages & operator=(const SharedPages &) = delete;

    // Reserves bytes (rounded up to pages); false + message if the file or mapping fails.
    bool init(size_t bytes, std::string * err);
    void * base() const { return mem; }
    size_t size() const { return n_pages * page; }

    // Bytes [dst, dst + len) read what [src, src + len) holds now (offsets into the range).
    // Whole pages at the same offset within a page are shared; the rest is copied.
    void share(size_t dst, size_t src, size_t len);
    // Every shared page touching [off, off + len) gets a copy of its own (before a write).
    void make_private(size_t off, size_t len);
    // Gives every page back: each range shows its own zero page again.
    void release_all();
    size_t n_shared_pages() const { return remapped.size(); } // pages showing another's file page

private:
    uint64_t file_page(uint64_t v) const;
    uint32_t count(uint64_t f) const;
    void map(uint64_t v, uint64_t f);
    void drop(uint64_t f);
    uint64_t new_file_page();

    int fd = -1;
    void * mem = nullptr;
    size_t page = 4096;
    uint64_t n_pages = 0, file_pages = 0;
    std::unordered_map<uint64_t, uint64_t> remapped; // range page -> file page, where not the same
    std::unordered_map<uint64_t, uint32_t> refs;     // file page -> pages showing it, where not 1
    std::vector<uint64_t> free_pages;                // file pages nobody shows
};

} // namespace kvg
