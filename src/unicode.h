// Unicode facts the byte-level BPE pre-tokenizers need: UTF-8 decoding that keeps each
// character's bytes, and the letter / number / white-space classes of code points.
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

bool is_letter(uint32_t cp); // general category L*
bool is_number(uint32_t cp); // general category N*
bool is_space(uint32_t cp);  // white space (as Python's str.isspace, the \s of the pre-tokenizer regexes)

} // namespace kvg
