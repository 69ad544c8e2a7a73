#include "grammar/regex.h"

#include <algorithm>

#include "base/utf8.h"

namespace kvs::grammar {

namespace {

std::vector<CharRange> Digits() { return {{'0', '9'}}; }
std::vector<CharRange> Word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
std::vector<CharRange> Space(bool ecmascript) {
  if (ecmascript) {
    return {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
            {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  }
  return {{'\t', '\r'}, {0x1C, ' '}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
}
std::vector<CharRange> LineTerminators(bool ecmascript) {
  if (ecmascript) return {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
  return {{'\n', '\n'}};
}

// The JSON string form of one code point ("\\n", "\\\"", "é", ...), as a
// GBNF literal.
std::string JsonCharLiteral(uint32_t cp) {
  std::string raw;
  switch (cp) {
    case '"': raw = "\\\""; break;
    case '\\': raw = "\\\\"; break;
    case '\n': raw = "\\n"; break;
    case '\r': raw = "\\r"; break;
    case '\t': raw = "\\t"; break;
    case '\b': raw = "\\b"; break;
    case '\f': raw = "\\f"; break;
    default:
      if (cp < 0x20) {
        static const char* kHex = "0123456789abcdef";
        raw = std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
      } else {
        AppendUtf8(cp, &raw);
      }
  }
  return GbnfQuote(raw);
}

class RegexParser {
 public:
  RegexParser(std::string_view p, const RegexOptions& o) : p_(p), o_(o) {}

  StatusOr<std::string> Parse() {
    if (Utf8ValidPrefix(p_) != p_.size()) return InvalidArgument("regex is not valid UTF-8");
    std::vector<std::string> alts;
    while (true) {
      bool start_anchor = false;
      if (Peek() == '^') {
        ++pos_;
        start_anchor = true;
      } else if (p_.substr(pos_, 2) == "\\A") {
        pos_ += 2;
        start_anchor = true;
      }
      end_anchor_ = false;
      KVS_ASSIGN_OR_RETURN(std::string seq, ParseSequence(0));
      if (o_.search) {
        if (!start_anchor) seq = AnyString() + " " + seq;
        if (!end_anchor_) seq = seq + " " + AnyString();
      }
      alts.push_back(seq);
      if (AtEnd()) break;
      if (Peek() == '|') {
        ++pos_;
        continue;
      }
      return Error("unbalanced ')'");
    }
    return Join(alts);
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : '\0'; }
  Status Error(std::string_view what) const {
    return InvalidArgument("regex: {} at position {}", what, pos_);
  }

  static std::string Join(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
  }

  // Any sequence of characters (search mode's unanchored ends).
  std::string AnyString() const {
    if (o_.json_string) return "([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt])*";
    return ".*";
  }

  // One character from a set, as GBNF (JSON-escaped when asked).
  std::string CharSet(std::vector<CharRange> ranges) const {
    ranges = NormalizeRanges(std::move(ranges));
    if (!o_.json_string) return GbnfClass(ranges);
    // Characters a JSON string must escape become escape literals.
    std::vector<CharRange> raw;
    std::vector<std::string> alts;
    for (CharRange r : ranges) {
      for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x20; ++cp) alts.push_back(JsonCharLiteral(cp));
      if (r.lo <= '"' && '"' <= r.hi) alts.push_back(JsonCharLiteral('"'));
      if (r.lo <= '\\' && '\\' <= r.hi) alts.push_back(JsonCharLiteral('\\'));
      raw.push_back(r);
    }
    raw = NormalizeRanges(raw);
    const std::vector<CharRange> specials = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    std::vector<CharRange> keep = ComplementRanges(specials);
    std::vector<CharRange> both;
    for (CharRange a : raw) {
      for (CharRange b : keep) {
        const uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
        if (lo <= hi) both.push_back({lo, hi});
      }
    }
    if (!both.empty()) alts.insert(alts.begin(), GbnfClass(NormalizeRanges(both)));
    if (alts.empty()) return "[]";
    return Join(alts);
  }

  std::string Literal(uint32_t cp) const {
    if (o_.json_string) return JsonCharLiteral(cp);
    std::string s;
    AppendUtf8(cp, &s);
    return GbnfQuote(s);
  }

  StatusOr<std::string> ParseAlternatives(int depth) {
    std::vector<std::string> alts;
    while (true) {
      KVS_ASSIGN_OR_RETURN(std::string seq, ParseSequence(depth));
      alts.push_back(seq);
      if (Peek() != '|') break;
      ++pos_;
    }
    return Join(alts);
  }

  StatusOr<std::string> ParseSequence(int depth) {
    std::vector<std::string> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' || p_.substr(pos_, 2) == "\\Z" || p_.substr(pos_, 2) == "\\z") {
        const size_t len = Peek() == '$' ? 1 : 2;
        const char after = pos_ + len < p_.size() ? p_[pos_ + len] : '\0';
        if (depth == 0 && (after == '\0' || after == '|')) {
          pos_ += len;
          end_anchor_ = true;
          break;
        }
        return Error("an anchor ($, \\Z) inside the pattern is not supported");
      }
      if (Peek() == '^') return Error("an anchor (^) inside the pattern is not supported");
      KVS_ASSIGN_OR_RETURN(std::string atom, ParseAtom(depth));
      KVS_ASSIGN_OR_RETURN(atom, ParseQuantifier(std::move(atom)));
      items.push_back(std::move(atom));
    }
    if (items.empty()) return std::string("\"\"");
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i ? " " : "") + items[i];
    return items.size() == 1 ? s : "(" + s + ")";
  }

  StatusOr<std::string> ParseQuantifier(std::string atom) {
    while (true) {
      const char c = Peek();
      int64_t min = 0, max = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        const size_t save = pos_;
        ++pos_;
        bool has_min = false, has_max = false;
        min = ReadInt(&has_min);
        if (Peek() == '}') {
          max = min;
        } else if (Peek() == ',') {
          ++pos_;
          max = ReadInt(&has_max);
          if (!has_max) max = -1;
        }
        if (Peek() != '}' || (!has_min && !has_max)) {
          pos_ = save;  // not a quantifier: a literal '{' (as Python reads it)
          return atom;
        }
        ++pos_;
        if (max >= 0 && max < min) return Error("quantifier maximum below its minimum");
        if (min > o_.max_repeat || max > o_.max_repeat) {
          return Error("repetition count above " + std::to_string(o_.max_repeat));
        }
      } else {
        return atom;
      }
      if (Peek() == '?') ++pos_;  // lazy: same language
      else if (Peek() == '+') return Error("possessive quantifiers are not supported");
      if (min == 0 && max == 1) {
        atom = atom + "?";
      } else if (min == 0 && max < 0) {
        atom = atom + "*";
      } else if (min == 1 && max < 0) {
        atom = atom + "+";
      } else if (max < 0) {
        atom = atom + "{" + std::to_string(min) + ",}";
      } else {
        atom = atom + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
      }
      atom = "(" + atom + ")";
    }
  }

  int64_t ReadInt(bool* present) {
    int64_t v = 0;
    *present = false;
    while (Peek() >= '0' && Peek() <= '9') {
      *present = true;
      v = std::min<int64_t>(v * 10 + (Peek() - '0'), int64_t{1} << 40);
      ++pos_;
    }
    return v;
  }

  StatusOr<std::string> ParseAtom(int depth) {
    const char c = Peek();
    if (c == '(') {
      if (depth + 1 > o_.max_nesting) return Error("groups nested too deeply");
      ++pos_;
      if (Peek() == '?') {
        const std::string_view rest = p_.substr(pos_);
        if (rest.substr(0, 2) == "?:") {
          pos_ += 2;
        } else if (rest.substr(0, 3) == "?P<" || (rest.substr(0, 2) == "?<" && rest.substr(0, 3) != "?<=" &&
                                                   rest.substr(0, 3) != "?<!")) {
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ = close + 1;
        } else if (rest.substr(0, 2) == "?=" || rest.substr(0, 2) == "?!" || rest.substr(0, 3) == "?<=" ||
                   rest.substr(0, 3) == "?<!") {
          return Error("lookaround assertions are not supported");
        } else if (rest.substr(0, 3) == "?P=") {
          return Error("backreferences are not supported");
        } else {
          return Error("inline flags and other (? groups are not supported");
        }
      }
      KVS_ASSIGN_OR_RETURN(std::string inner, ParseAlternatives(depth + 1));
      if (Peek() != ')') return Error("missing ')'");
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return CharSet(ComplementRanges(LineTerminators(o_.ecmascript)));
    }
    if (c == '*' || c == '+' || c == '?') return Error("quantifier without anything to repeat");
    if (c == '\\') {
      std::vector<CharRange> set;
      KVS_ASSIGN_OR_RETURN(bool is_set, ParseEscape(/*in_class=*/false, &set));
      if (is_set) return CharSet(std::move(set));
      return Literal(set[0].lo);
    }
    uint32_t cp = 0;
    const size_t n = Utf8Next(p_, pos_, &cp);
    pos_ += n;
    return Literal(cp);
  }

  // After '\': a single code point (returned as a one-element set,
  // *is_set false) or a class escape (\d ...). Advances past the escape.
  StatusOr<bool> ParseEscape(bool in_class, std::vector<CharRange>* out) {
    ++pos_;
    if (AtEnd()) return Error("pattern ends with '\\'");
    const char e = Peek();
    ++pos_;
    auto single = [&](uint32_t cp) -> StatusOr<bool> {
      out->assign(1, CharRange{cp, cp});
      return false;
    };
    switch (e) {
      case 'd': *out = Digits(); return true;
      case 'D': *out = ComplementRanges(Digits()); return true;
      case 'w': *out = Word(); return true;
      case 'W': *out = ComplementRanges(Word()); return true;
      case 's': *out = Space(o_.ecmascript); return true;
      case 'S': *out = ComplementRanges(Space(o_.ecmascript)); return true;
      case 'n': return single('\n');
      case 'r': return single('\r');
      case 't': return single('\t');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case '0': return single(0);
      case 'b':
        if (in_class) return single('\b');
        --pos_;
        return Error("word boundaries (\\b) are not supported");
      case 'x': return ParseHexEscape(2, out);
      case 'u':
        if (Peek() == '{') {
          ++pos_;
          const size_t close = p_.find('}', pos_);
          if (close == std::string_view::npos || close == pos_ || close - pos_ > 6) return Error("bad \\u{...} escape");
          uint32_t v = 0;
          for (; pos_ < close; ++pos_) {
            const int d = HexDigit(Peek());
            if (d < 0) return Error("bad \\u{...} escape");
            v = v * 16 + static_cast<uint32_t>(d);
          }
          ++pos_;
          if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error("escape is not a Unicode scalar value");
          return single(v);
        }
        return ParseHexEscape(4, out);
      case 'U': return ParseHexEscape(8, out);
      default: break;
    }
    if (e >= '1' && e <= '9') {
      pos_ -= 2;
      return Error("backreferences are not supported");
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      pos_ -= 2;
      return Error(std::string("the escape \\") + e + " is not supported");
    }
    // Escaped punctuation (or any other non-letter) stands for itself.
    pos_ -= 1;
    uint32_t cp = 0;
    const size_t n = Utf8Next(p_, pos_, &cp);
    pos_ += n;
    return single(cp);
  }

  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  StatusOr<bool> ParseHexEscape(int digits, std::vector<CharRange>* out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = HexDigit(Peek());
      if (d < 0) return Error("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error("escape is not a Unicode scalar value");
    out->assign(1, CharRange{v, v});
    return false;
  }

  StatusOr<std::string> ParseClass() {
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CharRange> ranges;
    bool first = true;
    while (!AtEnd() && (Peek() != ']' || (first && !o_.ecmascript))) {
      first = false;
      uint32_t lo = 0;
      std::vector<CharRange> set;
      if (Peek() == '\\') {
        KVS_ASSIGN_OR_RETURN(bool is_set, ParseEscape(/*in_class=*/true, &set));
        if (is_set) {
          ranges.insert(ranges.end(), set.begin(), set.end());
          continue;
        }
        lo = set[0].lo;
      } else if (Peek() == '[' && Peek(1) == ':') {
        return Error("POSIX classes ([:alpha:]) are not supported");
      } else {
        const size_t n = Utf8Next(p_, pos_, &lo);
        pos_ += n;
      }
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
        ++pos_;
        if (Peek() == '\\') {
          KVS_ASSIGN_OR_RETURN(bool is_set, ParseEscape(/*in_class=*/true, &set));
          if (is_set) return Error("a class escape cannot end a range");
          hi = set[0].lo;
        } else {
          const size_t n = Utf8Next(p_, pos_, &hi);
          pos_ += n;
        }
        if (hi < lo) return Error("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    if (AtEnd()) return Error("missing ']'");
    ++pos_;
    return CharSet(negated ? ComplementRanges(ranges) : ranges);
  }

  std::string_view p_;
  const RegexOptions& o_;
  size_t pos_ = 0;
  bool end_anchor_ = false;
};

}  // namespace

StatusOr<std::string> RegexToGbnf(std::string_view pattern, const RegexOptions& options) {
  return RegexParser(pattern, options).Parse();
}

StatusOr<Grammar> RegexToGrammar(std::string_view pattern, const RegexOptions& options) {
  KVS_ASSIGN_OR_RETURN(std::string expr, RegexToGbnf(pattern, options));
  return ParseGbnf("root ::= " + expr);
}

StatusOr<Grammar> ChoiceToGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return InvalidArgument("guided_choice needs at least one choice");
  Grammar g;
  std::vector<int32_t> alts;
  for (const std::string& c : choices) alts.push_back(g.Literal(c));
  g.SetBody(g.RuleId("root"), g.Choice(std::move(alts)));
  return g;
}

}  // namespace kvs::grammar
