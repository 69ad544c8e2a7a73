#include "template/text.h"

namespace kvs::tmpl::text {

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) NextCodePoint(s, &i);
  return n;
}

std::vector<std::string> SplitCodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    NextCodePoint(s, &i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

size_t ByteOffset(std::string_view s, size_t index) {
  size_t i = 0;
  for (size_t k = 0; k < index && i < s.size(); ++k) NextCodePoint(s, &i);
  return i;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    NextCodePoint(s, &i);
  }
  out.push_back(s.size());
  return out;
}

bool IsSpace(uint32_t cp) {
  if (cp <= 32) return cp == 32 || (cp >= 9 && cp <= 13);
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

std::string_view TrimStart(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!IsSpace(NextCodePoint(s, &j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view TrimEnd(std::string_view s) {
  // Walk forward remembering where the trailing run of spaces begins.
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    if (!IsSpace(NextCodePoint(s, &i))) end = i;
  }
  return s.substr(0, end);
}

std::string_view Trim(std::string_view s) { return TrimEnd(TrimStart(s)); }

std::string_view StripChars(std::string_view s, std::string_view chars, bool left, bool right) {
  std::vector<uint32_t> set;
  for (size_t i = 0; i < chars.size();) set.push_back(NextCodePoint(chars, &i));
  auto in_set = [&](uint32_t cp) {
    for (uint32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  size_t begin = 0;
  if (left) {
    while (begin < s.size()) {
      size_t j = begin;
      if (!in_set(NextCodePoint(s, &j))) break;
      begin = j;
    }
  }
  size_t end = s.size();
  if (right) {
    end = begin;
    for (size_t i = begin; i < s.size();) {
      if (!in_set(NextCodePoint(s, &i))) end = i;
    }
  }
  return s.substr(begin, end - begin);
}

uint32_t ToUpper(uint32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0x80) return cp;
  if (cp == 0xB5) return 0x39C;
  if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp >= 0x100 && cp <= 0x17F) {
    // Latin Extended-A pairs: even upper/odd lower, except 0x139-0x148 and
    // 0x179-0x17E where odd is upper.
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp % 2 == 0) ? cp - 1 : cp;
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if (cp == 0x138 || cp == 0x149) return cp;
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
  if (cp == 0x3C2) return 0x3A3;
  if (cp >= 0x3AC && cp <= 0x3AF) {
    static const uint32_t kMap[] = {0x386, 0x388, 0x389, 0x38A};
    return kMap[cp - 0x3AC];
  }
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  return cp;
}

uint32_t ToLower(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0x80) return cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  if (cp == 0x178) return 0xFF;
  if (cp >= 0x100 && cp <= 0x17F) {
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp % 2 == 1) ? cp + 1 : cp;
    if (cp == 0x130) return 'i';
    if (cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

std::string Upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, &i);
    if (cp == 0xDF) {
      out += "SS";
    } else {
      AppendUtf8(ToUpper(cp), &out);
    }
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) AppendUtf8(ToLower(NextCodePoint(s, &i)), &out);
  return out;
}

static bool IsAsciiWord(uint32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
}

std::string TitleCase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_word = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, &i);
    const bool word = IsAsciiWord(cp);
    AppendUtf8(word && !prev_word ? ToUpper(cp) : cp, &out);
    prev_word = word;
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  if (s.empty()) return std::string();
  size_t i = 0;
  const uint32_t cp = NextCodePoint(s, &i);
  std::string out = Upper(s.substr(0, i));
  (void)cp;
  out.append(s.substr(i));
  return out;
}

}  // namespace kvs::tmpl::text
