// Unicode facts the byte-level BPE pre-tokenizers need: UTF-8 decoding that keeps each
// character's bytes, and the letter / number / mark / punctuation / white-space classes of
// code points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvg {

// One character of a UTF-8 string: its code point (U+FFFD for a byte that does not start a
// valid sequence, which then stands alone) and where its bytes are.
struct utf8_char {
    uint32_t cp;
    size_t begin, len;
};
std::vector<utf8_char> utf8_chars(const std::string & s);
// The UTF-8 encoding of a code point (<= U+10FFFF).
std::string utf8_encode(uint32_t cp);

// Whether cp is in one of r's inclusive [first, last] ranges (sorted, disjoint).
template <size_t N> bool in_ranges(const uint32_t (&r)[N][2], uint32_t cp) {
    size_t lo = 0, hi = N; // first range whose end >= cp
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (r[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < N && r[lo][0] <= cp;
}

bool is_letter(uint32_t cp); // general category L*
bool is_number(uint32_t cp); // general category N*
bool is_mark(uint32_t cp);   // general category M* (combining marks)
bool is_punct(uint32_t cp);  // general category P*
bool is_space(uint32_t cp);  // white space (as Python's str.isspace, the \s of the pre-tokenizer regexes)

} // namespace kvg
