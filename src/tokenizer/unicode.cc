#include "tokenizer/unicode.h"

#include <array>

namespace kvs::tok {

size_t Utf8Next(std::string_view s, size_t i, uint32_t* cp) {
  const size_t n = s.size();
  if (i >= n) return 0;
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len;
  uint32_t c;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2; c = b0 & 0x1F; min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3; c = b0 & 0x0F; min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4; c = b0 & 0x07; min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return len;
}

size_t Utf8ValidPrefix(std::string_view s) {
  size_t i = 0;
  uint32_t cp;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) { ++i; continue; }
    const size_t len = Utf8Next(s, i, &cp);
    if (len == 0) break;
    i += len;
  }
  return i;
}

size_t Utf8CompletePrefix(std::string_view s) {
  // Look back at most 3 bytes for the start of an unfinished sequence.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = 0;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    if (need > back) {
      // Hold back only if what we have so far could still become valid.
      uint32_t cp;
      std::string probe(s.substr(n - back));
      // Complete with the smallest continuation bytes and check the form.
      while (probe.size() < need) probe.push_back(static_cast<char>(0x80));
      std::string probe_hi(s.substr(n - back));
      while (probe_hi.size() < need) probe_hi.push_back(static_cast<char>(0xBF));
      if (Utf8Next(probe, 0, &cp) != 0 || Utf8Next(probe_hi, 0, &cp) != 0) return n - back;
    }
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

bool IsUnicodeWhitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code points < 324 only
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t ByteToUnicode(uint8_t b) { return Tables().to_cp[b]; }

int UnicodeToByte(uint32_t cp) {
  return cp < Tables().from_cp.size() ? Tables().from_cp[cp] : -1;
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const auto& t = Tables();
  for (char c : bytes) AppendUtf8(t.to_cp[static_cast<uint8_t>(c)], out);
}

void AppendFromByteLevel(std::string_view text, std::string* out) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t len = Utf8Next(text, i, &cp);
    if (len == 0) {
      out->push_back(text[i]);
      ++i;
      continue;
    }
    const int b = UnicodeToByte(cp);
    if (b >= 0) {
      out->push_back(static_cast<char>(b));
    } else {
      out->append(text.substr(i, len));
    }
    i += len;
  }
}

std::string ByteTokenText(uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
}

int ParseByteToken(std::string_view t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hexval = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hexval(t[3]);
  const int lo = hexval(t[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  if (from.empty()) return std::string(s);
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace kvs::tok
