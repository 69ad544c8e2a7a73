// UTF-8 text helpers for the Jinja interpreter: code point iteration,
// whitespace and simple case mapping.
//
// Strings are UTF-8 bytes. Lengths, indexing and slicing count code points
// (as Python does). Malformed bytes decode as one code point each (their
// byte value), so no input is an error here.
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic;
// other scripts are left unchanged.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace kvs::tmpl::text {

// Decodes the code point at s[*i] and advances *i past it (base/utf8.h).
inline uint32_t NextCodePoint(std::string_view s, size_t* i) { return NextCodePointLenient(s, i); }
using ::kvs::AppendUtf8;
size_t CodePointCount(std::string_view s);
// The code points of s, each as its own UTF-8 string.
std::vector<std::string> SplitCodePoints(std::string_view s);
// Byte offset where each code point starts, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(std::string_view s);

// The whitespace set of JavaScript's trim() and \s (ASCII 9-13 and space,
// U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000,
// U+FEFF), which @huggingface/jinja uses for trim, strip and `-` markers.
bool IsSpace(uint32_t cp);
std::string_view TrimStart(std::string_view s);
std::string_view TrimEnd(std::string_view s);
std::string_view Trim(std::string_view s);
// Python's str.strip(chars): removes any code point of `chars`.
std::string_view StripChars(std::string_view s, std::string_view chars, bool left, bool right);

uint32_t ToUpper(uint32_t cp);
uint32_t ToLower(uint32_t cp);
std::string Upper(std::string_view s);  // also ß -> SS
std::string Lower(std::string_view s);
// Uppercases the first ASCII word character after each non-word character
// (JavaScript's /\b\w/ rule, the oracle's `title`), leaving the rest.
std::string TitleCase(std::string_view s);
// First code point uppercased, the rest unchanged (the oracle's capitalize).
std::string Capitalize(std::string_view s);

// Replaces occurrences of `from` by `to`, at most `count` times (< 0: all).
// An empty `from` inserts `to` around every code point, as Python does.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, long count);

}  // namespace kvs::tmpl::text
