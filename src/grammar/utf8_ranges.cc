#include "grammar/utf8_ranges.h"

#include "base/status.h"
#include "base/utf8.h"

namespace kvs::grammar {

namespace {

int EncodedLength(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

}  // namespace

void Utf8RangeSequences(uint32_t lo, uint32_t hi, std::vector<ByteSequence>* out) {
  KVS_CHECK(lo <= hi && hi <= 0x10FFFF);
  // Split where the encoded length changes.
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && max < hi) {
      Utf8RangeSequences(lo, max, out);
      Utf8RangeSequences(max + 1, hi, out);
      return;
    }
  }
  const int n = EncodedLength(lo);
  // Split until lo and hi differ only in a suffix of continuation bytes that
  // spans the whole 0x80..0xBF range, so byte-wise ranges are exact.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8RangeSequences(lo, lo | m, out);
        Utf8RangeSequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8RangeSequences(lo, (hi & ~m) - 1, out);
        Utf8RangeSequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  KVS_CHECK(a.size() == b.size());
  ByteSequence seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out->push_back(std::move(seq));
}

}  // namespace kvs::grammar
