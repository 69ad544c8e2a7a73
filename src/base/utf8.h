// UTF-8 decoding and encoding: the one implementation every module uses
// (tokenizer, template, gguf, server).
//
// "Well-formed" follows the Unicode standard's table of well-formed byte
// sequences (Unicode 15, section 3.9, table 3-7): no overlong forms, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Malformed input is
// never an error here: the strict functions report where it is, and the
// lenient decoder (NextCodePointLenient) turns each bad byte into one code
// point with the byte's value, for callers that must accept any bytes.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvs {

// Length in bytes (1..4) of the well-formed code point starting at s[i], or 0
// when the bytes there are not one (bad lead byte, bad or missing
// continuation, overlong, surrogate, > U+10FFFF) or i >= s.size(). *cp gets
// the code point when the result is non-zero.
size_t Utf8Next(std::string_view s, size_t i, uint32_t* cp);

// Decodes the code point at s[*i] and advances *i past it; a byte that does
// not start a well-formed sequence decodes as itself (its value, 0x80..0xFF)
// and advances by one. REQUIRES: *i < s.size().
uint32_t NextCodePointLenient(std::string_view s, size_t* i);

// Length of the longest prefix of s that is well-formed UTF-8.
size_t Utf8ValidPrefix(std::string_view s);
inline bool IsValidUtf8(std::string_view s) { return Utf8ValidPrefix(s) == s.size(); }

// Length of s minus a trailing incomplete, but so far well-formed, multi-byte
// sequence: what a streaming decoder may emit now, holding back bytes that a
// later chunk may complete. Bytes that can never become well-formed are not
// held back.
size_t Utf8CompletePrefix(std::string_view s);

// Appends the UTF-8 encoding of cp (REQUIRES: cp <= 0x10FFFF).
void AppendUtf8(uint32_t cp, std::string* out);

// s with every malformed part replaced by U+FFFD: a bad lead byte together
// with the continuation bytes after it counts as one part.
std::string SanitizeUtf8(std::string_view s);

}  // namespace kvs
