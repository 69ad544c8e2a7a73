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

#include "base/status.h"
#include "base/utf8.h"

namespace kvs::tmpl::text {

// Decodes the code point at s[*i] and advances *i past it (base/utf8.h).
inline uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto b = static_cast<uint8_t>(s[*i]);
  if (b < 0x80) {
    ++*i;
    return b;
  }
  return NextCodePointLenient(s, i);
}
using ::kvs::AppendUtf8;
size_t CodePointCount(std::string_view s);
// The code points of s, each as its own UTF-8 string.
std::vector<std::string> SplitCodePoints(std::string_view s);
// Byte offset of code point `index` in s (s.size() when index is past the end).
size_t ByteOffset(std::string_view s, size_t index);
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

// The pieces of Python's s.replace(from, to, count): appends to *out, in
// order, the runs of s kept and the copies of `to`, calling keep(b, e) for a
// run s[b, e) and insert() for a copy of `to`; stops at the first error
// either returns. An empty `from` inserts `to` around every code point, as
// Python does; count < 0 replaces all.
template <typename Keep, typename Insert>
Status ReplacePieces(std::string_view s, std::string_view from, long count, Keep keep, Insert insert);

template <typename Keep, typename Insert>
Status ReplacePieces(std::string_view s, std::string_view from, long count, Keep keep, Insert insert) {
  long left = count < 0 ? -1 : count;
  if (from.empty()) {
    for (size_t i = 0; i <= s.size();) {
      if (left != 0) {
        KVS_RETURN_IF_ERROR(insert());
        if (left > 0) --left;
      }
      if (i == s.size()) break;
      if (left == 0) return keep(i, s.size());
      const size_t start = i;
      NextCodePoint(s, &i);
      KVS_RETURN_IF_ERROR(keep(start, i));
    }
    return Status::Ok();
  }
  size_t pos = 0;
  while (left != 0) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    KVS_RETURN_IF_ERROR(keep(pos, hit));
    KVS_RETURN_IF_ERROR(insert());
    pos = hit + from.size();
    if (left > 0) --left;
  }
  return keep(pos, s.size());
}

}  // namespace kvs::tmpl::text
