// Scanning helpers for the tool-call parsers (tool_calls.h): markers that
// may be cut by a chunk boundary, and the extent of a JSON value read
// piece by piece.
// Thread-safety: JsonValueScanner is per stream.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::grammar::internal {

// How much of buf can be released: buf minus its longest suffix that is a
// proper prefix of one of the markers (that suffix may become a marker).
size_t SafePrefixLength(std::string_view buf, const std::vector<std::string>& markers);

// Finds the extent of one JSON value fed in pieces. Leading whitespace must
// be skipped by the caller. Objects, arrays and strings end at their
// closing character; a bare scalar (number, true, ...) ends before the
// first character that cannot continue it, or at EndOfInput.
class JsonValueScanner {
 public:
  void Reset() { *this = JsonValueScanner(); }
  // Returns how many characters of text belong to the value (less than
  // text.size() only when the value ended inside text).
  size_t Feed(std::string_view text);
  void EndOfInput() { if (started_) done_ = true; }
  bool started() const { return started_; }
  bool done() const { return done_; }

 private:
  bool started_ = false, done_ = false, in_string_ = false, escape_ = false, scalar_ = false;
  int depth_ = 0;
};

}  // namespace kvs::grammar::internal
