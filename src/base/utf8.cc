#include "base/utf8.h"

namespace kvs {
namespace {

// The sequence a lead byte starts: its length and the allowed range of the
// second byte (the range is what rules out overlongs after E0/F0, surrogates
// after ED and code points above U+10FFFF after F4). len 0: not a lead byte.
struct Lead {
  uint8_t len;
  uint8_t lo, hi;
};

Lead LeadOf(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes of s[i..] (at most the sequence's length) are a well-formed
// prefix of the sequence the lead byte s[i] starts.
size_t WellFormedBytes(std::string_view s, size_t i, const Lead& lead) {
  size_t k = 1;
  for (; k < lead.len && i + k < s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return k;
}

}  // namespace

size_t Utf8Next(std::string_view s, size_t i, uint32_t* cp) {
  if (i >= s.size()) return 0;
  const auto b0 = static_cast<uint8_t>(s[i]);
  const Lead lead = LeadOf(b0);
  if (lead.len == 0) return 0;
  if (lead.len == 1) {
    *cp = b0;
    return 1;
  }
  if (WellFormedBytes(s, i, lead) != lead.len) return 0;
  uint32_t c = b0 & (0x7F >> lead.len);
  for (size_t k = 1; k < lead.len; ++k) c = (c << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  *cp = c;
  return lead.len;
}

uint32_t NextCodePointLenient(std::string_view s, size_t* i) {
  uint32_t cp;
  const size_t len = Utf8Next(s, *i, &cp);
  if (len == 0) return static_cast<uint8_t>(s[(*i)++]);
  *i += len;
  return cp;
}

size_t Utf8ValidPrefix(std::string_view s) {
  size_t i = 0;
  uint32_t cp;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8Next(s, i, &cp);
    if (len == 0) break;
    i += len;
  }
  return i;
}

size_t Utf8CompletePrefix(std::string_view s) {
  // An unfinished sequence starts at most 3 bytes before the end.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const Lead lead = LeadOf(b);
    // Hold back only a proper prefix that later bytes could still complete.
    if (lead.len > back && WellFormedBytes(s, n - back, lead) == back) return n - back;
    return n;
  }
  return n;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t valid = Utf8ValidPrefix(s.substr(i));
    out.append(s.substr(i, valid));
    i += valid;
    if (i < s.size()) {
      out.append("\xEF\xBF\xBD");
      // Skip the lead byte and any continuation bytes after it.
      ++i;
      while (i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) ++i;
    }
  }
  return out;
}

}  // namespace kvs
