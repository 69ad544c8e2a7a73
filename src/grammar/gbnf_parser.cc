// ParseGbnf: recursive descent over GBNF text (syntax in grammar.h).
#include <cstring>

#include "grammar/grammar.h"
#include "base/utf8.h"

namespace kvs::grammar {

namespace {


bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {}

  StatusOr<Grammar> Parse() {
    if (s_.size() > limits_.max_text_bytes) {
      return InvalidArgument("grammar is {} bytes; the limit is {}", s_.size(), limits_.max_text_bytes);
    }
    if (Utf8ValidPrefix(s_) != s_.size()) {
      pos_ = Utf8ValidPrefix(s_);
      return Error("invalid UTF-8");
    }
    SkipSpace(/*newline_ok=*/true);
    while (pos_ < s_.size()) {
      KVS_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    for (const Rule& r : g_.rules()) {
      if (r.body < 0) {
        pos_ = first_use_[&r - &g_.rules()[0]];
        return Error("rule '" + r.name + "' is used but never defined");
      }
    }
    if (g_.root() < 0) return InvalidArgument("the grammar has no 'root' rule (the start rule must be named root)");
    return std::move(g_);
  }

 private:
  Status Error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string near;
    if (pos_ < s_.size()) {
      near = std::string(s_.substr(pos_, 16));
      if (const size_t nl = near.find('\n'); nl != std::string::npos) near.resize(nl);
    }
    return InvalidArgument("GBNF line {} column {}: {}{}", line, col, what,
                           near.empty() ? std::string(" (at the end)") : " near '" + near + "'");
  }

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }

  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  int32_t UseRule(std::string_view name, size_t at) {
    const size_t before = g_.rules().size();
    const int32_t id = g_.RuleId(name);
    if (g_.rules().size() != before) first_use_.push_back(at);
    return id;
  }

  Status ParseRule() {
    const size_t name_pos = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(false);
    if (s_.substr(pos_, 3) != "::=") return Error("expected '::=' after the rule name");
    pos_ += 3;
    SkipSpace(true);
    const int32_t id = UseRule(name, name_pos);
    if (g_.rules()[id].body >= 0) return Error("rule '" + std::string(name) + "' is defined twice");
    if (static_cast<int32_t>(g_.rules().size()) > limits_.max_rules) {
      return InvalidArgument("grammar has more than {} rules", limits_.max_rules);
    }
    KVS_ASSIGN_OR_RETURN(int32_t body, ParseAlternatives(/*depth=*/0));
    g_.SetBody(id, body);
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') return Error("expected the end of the line");
    return Status::Ok();
  }

  // At top level (depth 0) a newline ends the rule unless the next
  // non-blank line continues the alternation with '|'.
  bool ContinuationBar() {
    size_t save = pos_;
    SkipSpace(true);
    if (Peek() == '|') return true;
    pos_ = save;
    return false;
  }

  StatusOr<int32_t> ParseAlternatives(int depth) {
    std::vector<int32_t> alts;
    while (true) {
      KVS_ASSIGN_OR_RETURN(int32_t seq, ParseSequence(depth));
      alts.push_back(seq);
      if (Peek() != '|' && !(depth == 0 && ContinuationBar())) break;
      ++pos_;  // '|'
      SkipSpace(true);
    }
    return g_.Choice(std::move(alts));
  }

  StatusOr<int32_t> ParseSequence(int depth) {
    std::vector<int32_t> items;
    while (!AtEnd()) {
      const char c = Peek();
      int32_t item = -1;
      if (c == '"') {
        KVS_ASSIGN_OR_RETURN(item, ParseLiteral());
      } else if (c == '[') {
        KVS_ASSIGN_OR_RETURN(item, ParseClass());
      } else if (c == '.') {
        ++pos_;
        item = g_.AnyChar();
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) return Error("parentheses nested too deeply");
        ++pos_;
        SkipSpace(true);
        KVS_ASSIGN_OR_RETURN(item, ParseAlternatives(depth + 1));
        if (Peek() != ')') return Error("expected ')'");
        ++pos_;
      } else if (IsNameChar(c)) {
        const size_t save = pos_;
        const std::string_view name = ParseName();
        // "name ::=" starts the next rule: only legal after a newline, which
        // the caller handles; here it means a missing newline.
        size_t look = pos_;
        while (look < s_.size() && (s_[look] == ' ' || s_[look] == '\t')) ++look;
        if (s_.substr(look, 3) == "::=") {
          pos_ = save;
          return Error("a new rule must start on its own line");
        }
        item = g_.Ref(UseRule(name, save));
      } else if (c == '<') {
        return Error("token references (<...>) are not supported");
      } else {
        break;  // '|', ')', newline, or something the caller reports
      }
      KVS_ASSIGN_OR_RETURN(item, ParsePostfix(item));
      items.push_back(item);
      SkipSpace(/*newline_ok=*/depth > 0);
    }
    if (!AtEnd() && Peek() != '|' && Peek() != ')' && Peek() != '\n' && Peek() != '\r') {
      return Error("unexpected character");
    }
    if (AtEnd() && depth > 0) return Error("expected ')'");
    return g_.Sequence(std::move(items));
  }

  StatusOr<int32_t> ParsePostfix(int32_t item) {
    while (true) {
      SkipSpace(false);
      const char c = Peek();
      if (c == '*') {
        ++pos_;
        item = g_.Star(item);
      } else if (c == '+') {
        ++pos_;
        item = g_.Plus(item);
      } else if (c == '?') {
        ++pos_;
        item = g_.Optional(item);
      } else if (c == '{') {
        ++pos_;
        SkipSpace(false);
        int64_t min = 0, max = -1;
        bool has_min = false;
        KVS_RETURN_IF_ERROR(ParseInt(&min, &has_min));
        SkipSpace(false);
        if (Peek() == '}') {
          if (!has_min) return Error("expected a number in '{}'");
          max = min;
        } else if (Peek() == ',') {
          ++pos_;
          SkipSpace(false);
          bool has_max = false;
          KVS_RETURN_IF_ERROR(ParseInt(&max, &has_max));
          if (!has_max) max = -1;
          SkipSpace(false);
        } else {
          return Error("expected ',' or '}' in a repetition");
        }
        if (Peek() != '}') return Error("expected '}'");
        ++pos_;
        if (max >= 0 && max < min) return Error("repetition maximum is below its minimum");
        if (min > limits_.max_repeat || max > limits_.max_repeat) {
          return Error("repetition bound above the limit of " + std::to_string(limits_.max_repeat));
        }
        item = g_.Repeat(item, static_cast<int32_t>(min), static_cast<int32_t>(max));
      } else {
        return item;
      }
    }
  }

  Status ParseInt(int64_t* v, bool* present) {
    *present = false;
    *v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      *present = true;
      *v = *v * 10 + (Peek() - '0');
      if (*v > (int64_t{1} << 40)) return Error("number too large");
      ++pos_;
    }
    return Status::Ok();
  }

  // One (possibly escaped) code point inside a literal or class.
  StatusOr<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unterminated literal or class");
    if (Peek() != '\\') {
      uint32_t cp = 0;
      const size_t n = Utf8Next(s_, pos_, &cp);
      if (n == 0) return Error("invalid UTF-8");
      pos_ += n;
      return cp;
    }
    ++pos_;
    if (AtEnd()) return Error("unterminated escape");
    const char e = Peek();
    ++pos_;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '0': return uint32_t{0};
      case 'x': return ParseHex(2);
      case 'u': return ParseHex(4);
      case 'U': return ParseHex(8);
      default: break;
    }
    // Escaped punctuation stands for itself (\\ \" \[ \] \- \^ \/ ...).
    if (std::strchr("\\\"[]-^/.|()*+?{}$'#", e) != nullptr && e != '\0') return static_cast<uint32_t>(e);
    --pos_;
    return Error(std::string("unknown escape '\\") + e + "'");
  }

  StatusOr<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return Error("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error("escape is not a Unicode scalar value");
    return v;
  }

  StatusOr<int32_t> ParseLiteral() {
    ++pos_;  // '"'
    std::string bytes;
    while (!AtEnd() && Peek() != '"') {
      if (Peek() == '\n' || Peek() == '\r') return Error("newline inside a literal");
      KVS_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
      AppendUtf8(cp, &bytes);
    }
    if (AtEnd()) return Error("unterminated literal");
    ++pos_;
    return g_.Literal(std::move(bytes));
  }

  StatusOr<int32_t> ParseClass() {
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CharRange> ranges;
    while (!AtEnd() && Peek() != ']') {
      if (Peek() == '\n' || Peek() == '\r') return Error("newline inside a character class");
      KVS_ASSIGN_OR_RETURN(uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
        ++pos_;
        KVS_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("character range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;
    return g_.Class(std::move(ranges), negated);
  }

  std::string_view s_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  Grammar g_;
  std::vector<size_t> first_use_;  // [rule] text position of the first mention
};

}  // namespace

StatusOr<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits) {
  return GbnfParser(text, limits).Parse();
}

}  // namespace kvs::grammar
