// UTF-8 encodings of code point ranges as sequences of byte ranges, so that a
// character class compiles to a byte-level automaton (the matcher works on
// bytes because tokens may end in the middle of a character).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace kvs::grammar {

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
  bool operator==(const ByteRange&) const = default;
};

// A sequence of byte ranges: matches one byte from each range in turn.
using ByteSequence = std::vector<ByteRange>;

// Appends to *out byte sequences whose union is exactly the UTF-8 encodings
// of the code points in [lo, hi] (which must not contain surrogates: the
// caller normalizes classes first). Sequences are disjoint.
void Utf8RangeSequences(uint32_t lo, uint32_t hi, std::vector<ByteSequence>* out);

}  // namespace kvs::grammar
