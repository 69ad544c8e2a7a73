#include "tokenizer/unicode.h"

#include <array>

namespace kvs::tok {

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

}  // namespace kvs::tok
