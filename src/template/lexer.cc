#include "template/lexer.h"

#include <charconv>

#include "template/text.h"

namespace kvs::tmpl {

const char* TokName(Tok t) {
  switch (t) {
    case Tok::kText: return "text";
    case Tok::kNumber: return "number";
    case Tok::kString: return "string";
    case Tok::kIdent: return "identifier";
    case Tok::kEquals: return "'='";
    case Tok::kLParen: return "'('";
    case Tok::kRParen: return "')'";
    case Tok::kOpenStmt: return "'{%'";
    case Tok::kCloseStmt: return "'%}'";
    case Tok::kOpenExpr: return "'{{'";
    case Tok::kCloseExpr: return "'}}'";
    case Tok::kLBracket: return "'['";
    case Tok::kRBracket: return "']'";
    case Tok::kLBrace: return "'{'";
    case Tok::kRBrace: return "'}'";
    case Tok::kComma: return "','";
    case Tok::kDot: return "'.'";
    case Tok::kColon: return "':'";
    case Tok::kPipe: return "'|'";
    case Tok::kAdditive: return "operator";
    case Tok::kMultiplicative: return "operator";
    case Tok::kPower: return "'**'";
    case Tok::kCompare: return "comparison";
    case Tok::kUnary: return "unary operator";
    case Tok::kComment: return "comment";
  }
  return "?";
}

std::string SourceMap::Describe(uint32_t pos) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < source_.size() && i < pos;) {
    if (source_[i] == '\n') {
      ++line, col = 1, ++i;
    } else {
      text::NextCodePoint(source_, &i);
      ++col;
    }
  }
  return fmt::format("line {}, column {}", line, col);
}

namespace {

// Text after a preprocessing step, with the original offset of every byte.
struct Mapped {
  std::string text;
  std::vector<uint32_t> orig;
  void Append(const Mapped& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    orig.insert(orig.end(), from.orig.begin() + begin, from.orig.begin() + end);
  }
};

// Length of the whitespace code point at s[i], or 0.
size_t SpaceAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t j = i;
  return text::IsSpace(text::NextCodePoint(s, &j)) ? j - i : 0;
}

// Length of a JavaScript line terminator ending at s[i-1] (so that i is a line start), or 0.
bool AtLineStart(std::string_view s, size_t i) {
  if (i == 0) return true;
  const char c = s[i - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 / U+2029 are E2 80 A8 / E2 80 A9.
  return i >= 3 && static_cast<uint8_t>(s[i - 3]) == 0xE2 && static_cast<uint8_t>(s[i - 2]) == 0x80 &&
         (static_cast<uint8_t>(c) == 0xA8 || static_cast<uint8_t>(c) == 0xA9);
}

Mapped LstripBlocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t i = 0, copied = 0;
  while (i < s.size()) {
    if (AtLineStart(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        out.Append(in, copied, i);
        copied = j;
        i = j + 2;
        continue;
      }
    }
    ++i;
  }
  out.Append(in, copied, s.size());
  return out;
}

Mapped TrimBlocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t copied = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    if (s[i] == '\n' && s[i - 1] == '}' && (s[i - 2] == '#' || s[i - 2] == '%' || s[i - 2] == '-')) {
      out.Append(in, copied, i);
      copied = i + 1;
    }
  }
  out.Append(in, copied, s.size());
  return out;
}

// Matches `{%-? \s* (end)?generation \s* -?%}` at s[i]; returns its length
// (0 if none) and whether it has each `-`.
size_t MatchGenerationTag(std::string_view s, size_t i, bool* lstrip, bool* rstrip) {
  if (s.compare(i, 2, "{%") != 0) return 0;
  size_t j = i + 2;
  *lstrip = j < s.size() && s[j] == '-';
  if (*lstrip) ++j;
  while (size_t n = SpaceAt(s, j)) j += n;
  if (s.compare(j, 3, "end") == 0 && s.compare(j + 3, 10, "generation") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return 0;
  j += 10;
  while (size_t n = SpaceAt(s, j)) j += n;
  *rstrip = j < s.size() && s[j] == '-';
  if (*rstrip) ++j;
  if (s.compare(j, 2, "%}") != 0) return 0;
  return j + 2 - i;
}

Mapped DropGenerationTags(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t last = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != '{' || s[i + 1] != '%') continue;
    bool lstrip = false, rstrip = false;
    const size_t len = MatchGenerationTag(s, i, &lstrip, &rstrip);
    if (len == 0) continue;
    size_t end = i;
    if (lstrip) {
      // Strip whitespace before the tag, back to the previous match.
      while (end > last) {
        size_t k = end - 1;
        while (k > last && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
        if (SpaceAt(s, k) != end - k) break;
        end = k;
      }
    }
    out.Append(in, last, end);
    size_t after = i + len;
    size_t ws_end = after;
    while (size_t n = SpaceAt(s, ws_end)) ws_end += n;
    if (!rstrip) out.Append(in, after, ws_end);
    last = ws_end;
    i = ws_end - 1;
  }
  out.Append(in, last, s.size());
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
}

class Lexer {
 public:
  Lexer(const Mapped& m, const SourceMap& map) : src_(m.text), orig_(m.orig), map_(map) {}

  StatusOr<std::vector<Token>> Run();

 private:
  uint32_t Orig(size_t i) const { return i < orig_.size() ? orig_[i] : static_cast<uint32_t>(map_.source().size()); }
  Status Error(size_t at, const std::string& what) const {
    return InvalidArgument("template syntax error at {}: {}", map_.Describe(Orig(at)), what);
  }
  void Push(Tok t, std::string v, size_t at) { tokens_.push_back(Token{t, std::move(v), Orig(at)}); }
  void StripTrailingWhitespace() {
    if (!tokens_.empty() && tokens_.back().type == Tok::kText) {
      tokens_.back().value = std::string(text::TrimEnd(tokens_.back().value));
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }
  void SkipWhitespace() {
    while (size_t n = SpaceAt(src_, pos_)) pos_ += n;
  }
  bool TryRaw();
  Status LexString(char quote);
  Status LexNumber(std::string prefix, size_t start, bool allow_fraction);

  const std::string& src_;
  const std::vector<uint32_t>& orig_;
  const SourceMap& map_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

// `{% raw %}...{% endraw %}` (with optional `-` markers) at pos_: emits the
// body as a text token.
bool Lexer::TryRaw() {
  auto match_tag = [&](size_t i, std::string_view word, bool* lstrip, bool* rstrip) -> size_t {
    if (src_.compare(i, 2, "{%") != 0) return 0;
    size_t j = i + 2;
    *lstrip = j < src_.size() && src_[j] == '-';
    if (*lstrip) ++j;
    while (size_t n = SpaceAt(src_, j)) j += n;
    if (src_.compare(j, word.size(), word) != 0) return 0;
    j += word.size();
    while (size_t n = SpaceAt(src_, j)) j += n;
    *rstrip = j < src_.size() && src_[j] == '-';
    if (*rstrip) ++j;
    if (src_.compare(j, 2, "%}") != 0) return 0;
    return j + 2 - i;
  };
  bool l1 = false, r1 = false;
  const size_t open = match_tag(pos_, "raw", &l1, &r1);
  if (open == 0) return false;
  size_t body = pos_ + open;
  for (size_t i = body; i + 1 < src_.size(); ++i) {
    bool l2 = false, r2 = false;
    const size_t close = match_tag(i, "endraw", &l2, &r2);
    if (close == 0) continue;
    if (l1) StripTrailingWhitespace();
    std::string_view content(src_.data() + body, i - body);
    if (r1) content = text::TrimStart(content);
    if (l2) content = text::TrimEnd(content);
    // A comment token ends text mode without output, like a real tag.
    if (!content.empty()) Push(Tok::kText, std::string(content), body);
    Push(Tok::kComment, "", i);
    pos_ = i + close;
    if (r2) SkipWhitespace();
    return true;
  }
  return false;
}

Status Lexer::LexString(char quote) {
  const size_t start = pos_ - 1;
  std::string out;
  uint32_t pending_high = 0;  // a \uD8xx waiting for its low half
  auto flush_high = [&] {
    if (pending_high) text::AppendUtf8(0xFFFD, &out);
    pending_high = 0;
  };
  while (true) {
    if (pos_ >= src_.size()) return Error(start, "unterminated string literal");
    const char c = src_[pos_];
    if (c == quote) break;
    ++pos_;
    if (c != '\\') {
      flush_high();
      out.push_back(c);
      continue;
    }
    if (pos_ >= src_.size()) return Error(start, "unterminated string literal");
    const char e = src_[pos_++];
    if (e == 'x' || e == 'u' || e == 'U') {
      const size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t cp = 0;
      auto r = std::from_chars(src_.data() + pos_, src_.data() + std::min(src_.size(), pos_ + len), cp, 16);
      if (r.ec != std::errc() || r.ptr != src_.data() + pos_ + len) {
        return Error(pos_ - 2, fmt::format("invalid \\{} escape in string literal", e));
      }
      pos_ += len;
      if (cp >= 0xDC00 && cp <= 0xDFFF && pending_high) {
        cp = 0x10000 + ((pending_high - 0xD800) << 10) + (cp - 0xDC00);
        pending_high = 0;
      } else {
        flush_high();
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          pending_high = cp;
          continue;
        }
        if ((cp >= 0xDC00 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
      }
      text::AppendUtf8(cp, &out);
      continue;
    }
    flush_high();
    switch (e) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'v': out.push_back('\v'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '\n': break;  // line continuation, as in Python
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = e - '0';
          for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
            cp = cp * 8 + (src_[pos_++] - '0');
          }
          text::AppendUtf8(cp, &out);
        } else {
          // Python keeps unknown escapes as written.
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  flush_high();
  ++pos_;  // closing quote
  Push(Tok::kString, std::move(out), start);
  return Status::Ok();
}

Status Lexer::LexNumber(std::string prefix, size_t start, bool allow_fraction) {
  std::string num = std::move(prefix);
  while (pos_ < src_.size() && IsDigit(src_[pos_])) num.push_back(src_[pos_++]);
  if (allow_fraction && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
    num.push_back(src_[pos_++]);
    while (pos_ < src_.size() && IsDigit(src_[pos_])) num.push_back(src_[pos_++]);
  }
  Push(Tok::kNumber, std::move(num), start);
  return Status::Ok();
}

StatusOr<std::vector<Token>> Lexer::Run() {
  struct Rule {
    const char* seq;
    Tok type;
  };
  // Longer sequences first where they share a first character.
  static const Rule kRules[] = {
      {"{%", Tok::kOpenStmt}, {"%}", Tok::kCloseStmt}, {"{{", Tok::kOpenExpr}, {"}}", Tok::kCloseExpr},
      {"(", Tok::kLParen},    {")", Tok::kRParen},     {"{", Tok::kLBrace},    {"}", Tok::kRBrace},
      {"[", Tok::kLBracket},  {"]", Tok::kRBracket},   {",", Tok::kComma},     {".", Tok::kDot},
      {":", Tok::kColon},     {"|", Tok::kPipe},       {"<=", Tok::kCompare},  {">=", Tok::kCompare},
      {"==", Tok::kCompare},  {"!=", Tok::kCompare},   {"<", Tok::kCompare},   {">", Tok::kCompare},
      {"+", Tok::kAdditive},  {"-", Tok::kAdditive},   {"~", Tok::kAdditive},  {"**", Tok::kPower},
      {"*", Tok::kMultiplicative}, {"//", Tok::kMultiplicative}, {"/", Tok::kMultiplicative},
      {"%", Tok::kMultiplicative}, {"=", Tok::kEquals},
  };
  const size_t n = src_.size();
  while (pos_ < n) {
    const bool in_text = tokens_.empty() || tokens_.back().type == Tok::kCloseStmt ||
                         tokens_.back().type == Tok::kCloseExpr || tokens_.back().type == Tok::kComment;
    if (in_text) {
      size_t end = pos_;
      while (true) {
        end = src_.find('{', end);
        if (end == std::string::npos) {
          end = n;
          break;
        }
        const char next = end + 1 < n ? src_[end + 1] : '\0';
        if (next == '%' || next == '{' || next == '#') break;
        ++end;
      }
      if (end > pos_) {
        Push(Tok::kText, src_.substr(pos_, end - pos_), pos_);
        pos_ = end;
        continue;
      }
      if (TryRaw()) continue;
    }
    if (src_[pos_] == '{') {
      const char next = pos_ + 1 < n ? src_[pos_ + 1] : '\0';
      if (next == '#') {
        const size_t start = pos_;
        pos_ += 2;
        const bool strip_before = pos_ < n && src_[pos_] == '-';
        if (strip_before) ++pos_;
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) return Error(start, "missing end of comment tag '#}'");
        std::string comment = src_.substr(pos_, end - pos_);
        const bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) StripTrailingWhitespace();
        Push(Tok::kComment, std::move(comment), start);
        pos_ = end + 2;
        if (strip_after) SkipWhitespace();
        continue;
      }
      if (pos_ + 2 < n && src_[pos_ + 2] == '-' && (next == '%' || next == '{')) {
        StripTrailingWhitespace();
        Push(next == '%' ? Tok::kOpenStmt : Tok::kOpenExpr, next == '%' ? "{%" : "{{", pos_);
        if (next == '{') curly_depth_ = 0;
        pos_ += 3;
        continue;
      }
    }
    SkipWhitespace();
    if (pos_ >= n) return Error(pos_, "unexpected end of template inside a tag");
    const char c = src_[pos_];
    if (c == '-' && pos_ + 2 < n && src_[pos_ + 2] == '}') {
      const char next = src_[pos_ + 1];
      if (next == '%' || next == '}') {
        Push(next == '%' ? Tok::kCloseStmt : Tok::kCloseExpr, next == '%' ? "%}" : "}}", pos_);
        pos_ += 3;
        SkipWhitespace();
        continue;
      }
    }
    if (c == '-' || c == '+') {
      const Tok last = tokens_.empty() ? Tok::kText : tokens_.back().type;
      if (tokens_.empty() || last == Tok::kText) return Error(pos_, fmt::format("unexpected character '{}'", c));
      if (last != Tok::kIdent && last != Tok::kNumber && last != Tok::kString && last != Tok::kRParen &&
          last != Tok::kRBracket) {
        const size_t start = pos_++;
        if (pos_ < n && IsDigit(src_[pos_])) {
          KVS_RETURN_IF_ERROR(LexNumber(std::string(1, c), start, true));
        } else {
          Push(Tok::kUnary, std::string(1, c), start);
        }
        continue;
      }
    }
    bool matched = false;
    for (const Rule& r : kRules) {
      const std::string_view seq(r.seq);
      if (seq[0] != c) continue;
      if (r.type == Tok::kCloseExpr && curly_depth_ > 0) continue;
      if (src_.compare(pos_, seq.size(), seq) != 0) continue;
      Push(r.type, std::string(seq), pos_);
      if (r.type == Tok::kOpenExpr) curly_depth_ = 0;
      if (r.type == Tok::kLBrace) ++curly_depth_;
      if (r.type == Tok::kRBrace) --curly_depth_;
      pos_ += seq.size();
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      ++pos_;
      KVS_RETURN_IF_ERROR(LexString(c));
      continue;
    }
    if (IsDigit(c)) {
      const bool after_dot = !tokens_.empty() && tokens_.back().type == Tok::kDot;
      KVS_RETURN_IF_ERROR(LexNumber("", pos_, !after_dot));
      continue;
    }
    if (IsWordChar(c)) {
      const size_t start = pos_;
      while (pos_ < n && IsWordChar(src_[pos_])) ++pos_;
      Push(Tok::kIdent, src_.substr(start, pos_ - start), start);
      continue;
    }
    size_t j = pos_;
    const uint32_t cp = text::NextCodePoint(src_, &j);
    std::string shown;
    text::AppendUtf8(cp, &shown);
    return Error(pos_, fmt::format("unexpected character '{}'", shown));
  }
  return std::move(tokens_);
}

}  // namespace

StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& opt, const SourceMap& map) {
  if (source.size() >= (1u << 31)) return OutOfRange("template of {} bytes is too large", source.size());
  Mapped m;
  m.text.assign(source);
  m.orig.resize(source.size());
  for (size_t i = 0; i < source.size(); ++i) m.orig[i] = static_cast<uint32_t>(i);
  if (!m.text.empty() && m.text.back() == '\n') {
    m.text.pop_back();
    m.orig.pop_back();
  }
  if (opt.lstrip_blocks) m = LstripBlocks(m);
  if (opt.trim_blocks) m = TrimBlocks(m);
  m = DropGenerationTags(m);
  Lexer lexer(m, map);
  return lexer.Run();
}

}  // namespace kvs::tmpl
