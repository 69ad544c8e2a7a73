#include "grammar/grammar.h"

#include <algorithm>

namespace kvs::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

void AppendHex(uint32_t v, int digits, std::string* out) {
  static const char* kHex = "0123456789ABCDEF";
  for (int i = digits - 1; i >= 0; --i) out->push_back(kHex[(v >> (4 * i)) & 0xF]);
}

// One code point as it appears inside a GBNF class or literal.
void AppendEscapedCodePoint(uint32_t cp, bool in_class, std::string* out) {
  switch (cp) {
    case '\n': *out += "\\n"; return;
    case '\r': *out += "\\r"; return;
    case '\t': *out += "\\t"; return;
    case '\\': *out += "\\\\"; return;
    default: break;
  }
  if (!in_class && cp == '"') { *out += "\\\""; return; }
  if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^')) {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
    return;
  }
  if (cp < 0x20 || cp == 0x7F) { *out += "\\x"; AppendHex(cp, 2, out); return; }
  if (cp < 0x80) { out->push_back(static_cast<char>(cp)); return; }
  // Non-ASCII: escaped so that the printed grammar is plain ASCII.
  if (cp <= 0xFFFF) { *out += "\\u"; AppendHex(cp, 4, out); return; }
  *out += "\\U";
  AppendHex(cp, 8, out);
}

}  // namespace

std::vector<CharRange> NormalizeRanges(std::vector<CharRange> ranges) {
  std::vector<CharRange> split;
  for (CharRange r : ranges) {
    if (r.lo > r.hi) std::swap(r.lo, r.hi);
    if (r.lo > kMaxCodePoint) continue;
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      split.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) split.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) split.push_back({kSurrogateHi + 1, r.hi});
  }
  std::sort(split.begin(), split.end(), [](CharRange a, CharRange b) { return a.lo < b.lo; });
  std::vector<CharRange> out;
  for (CharRange r : split) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CharRange> ComplementRanges(const std::vector<CharRange>& ranges) {
  std::vector<CharRange> norm = NormalizeRanges(ranges);
  std::vector<CharRange> out;
  uint32_t next = 0;
  for (CharRange r : norm) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return NormalizeRanges(std::move(out));  // drops the surrogate block
}

int32_t Grammar::Add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<int32_t>(exprs_.size()) - 1;
}

int32_t Grammar::Empty() { return Add(Expr{}); }

int32_t Grammar::Literal(std::string bytes) {
  if (bytes.empty()) return Empty();
  Expr e;
  e.kind = Expr::Kind::kLiteral;
  e.text = std::move(bytes);
  return Add(std::move(e));
}

int32_t Grammar::Class(std::vector<CharRange> ranges, bool negated) {
  Expr e;
  e.kind = Expr::Kind::kClass;
  e.ranges = negated ? ComplementRanges(ranges) : NormalizeRanges(std::move(ranges));
  return Add(std::move(e));
}

int32_t Grammar::AnyChar() { return Class({{0, kMaxCodePoint}}); }

int32_t Grammar::Ref(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::kRuleRef;
  e.rule = rule;
  return Add(std::move(e));
}

int32_t Grammar::Sequence(std::vector<int32_t> children) {
  if (children.empty()) return Empty();
  if (children.size() == 1) return children[0];
  Expr e;
  e.kind = Expr::Kind::kSequence;
  e.children = std::move(children);
  return Add(std::move(e));
}

int32_t Grammar::Choice(std::vector<int32_t> children) {
  if (children.size() == 1) return children[0];
  Expr e;
  e.kind = Expr::Kind::kChoice;
  e.children = std::move(children);
  return Add(std::move(e));
}

int32_t Grammar::Repeat(int32_t child, int32_t min, int32_t max) {
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.children = {child};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

int32_t Grammar::RuleId(std::string_view name) {
  int32_t id = FindRule(name);
  if (id >= 0) return id;
  rules_.push_back(Rule{std::string(name), -1});
  id = static_cast<int32_t>(rules_.size()) - 1;
  rule_index_.emplace(std::string(name), id);
  return id;
}

int32_t Grammar::FindRule(std::string_view name) const {
  const auto it = rule_index_.find(std::string(name));
  return it == rule_index_.end() ? -1 : it->second;
}

std::string Grammar::FreshName(std::string_view base) const {
  std::string name(base);
  for (int i = 1; FindRule(name) >= 0; ++i) name = std::string(base) + "-" + std::to_string(i);
  return name;
}

int32_t Grammar::AddRule(std::string_view base, int32_t body) {
  int32_t id = RuleId(FreshName(base));
  SetBody(id, body);
  return id;
}

std::string Grammar::RenameRule(int32_t id, std::string_view base) {
  std::string name = FreshName(base);
  rule_index_.erase(rules_[id].name);
  rules_[id].name = name;
  rule_index_.emplace(name, id);
  return name;
}

Status Grammar::Validate() const {
  const int32_t num_exprs = static_cast<int32_t>(exprs_.size());
  const int32_t num_rules = static_cast<int32_t>(rules_.size());
  for (const Rule& r : rules_) {
    if (r.body < 0 || r.body >= num_exprs) return InvalidArgument("rule '{}' is referenced but never defined", r.name);
  }
  for (int32_t i = 0; i < num_exprs; ++i) {
    const Expr& e = exprs_[i];
    for (int32_t c : e.children) {
      if (c < 0 || c >= num_exprs) return Internal("expression {} has a bad child {}", i, c);
    }
    switch (e.kind) {
      case Expr::Kind::kRuleRef:
        if (e.rule < 0 || e.rule >= num_rules) return Internal("expression {} references rule {}", i, e.rule);
        break;
      case Expr::Kind::kClass:
        for (size_t k = 0; k < e.ranges.size(); ++k) {
          const CharRange r = e.ranges[k];
          const bool bad = r.lo > r.hi || r.hi > kMaxCodePoint || (k > 0 && r.lo <= e.ranges[k - 1].hi + 1) ||
                           !(r.hi < kSurrogateLo || r.lo > kSurrogateHi);
          if (bad) return Internal("expression {}: class ranges are not normalized", i);
        }
        break;
      case Expr::Kind::kRepeat:
        if (e.children.size() != 1 || e.min < 0 || (e.max >= 0 && e.max < e.min)) {
          return Internal("expression {}: bad repetition", i);
        }
        break;
      default:
        break;
    }
  }
  if (root() < 0) return InvalidArgument("the grammar has no 'root' rule");
  return Status::Ok();
}

std::string GbnfQuote(std::string_view bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      AppendEscapedCodePoint(b, /*in_class=*/false, &out);
      ++i;
      continue;
    }
    // A well-formed multi-byte sequence is copied as is; a bad byte is \xHH.
    size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    bool ok = len > 0 && i + len <= bytes.size() && b >= 0xC2 && b <= 0xF4;
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<uint8_t>(bytes[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out += "\\x";
      AppendHex(b, 2, &out);
      ++i;
    }
  }
  out += "\"";
  return out;
}

std::string GbnfClass(const std::vector<CharRange>& ranges) {
  std::string out = "[";
  for (CharRange r : ranges) {
    AppendEscapedCodePoint(r.lo, true, &out);
    if (r.hi != r.lo) {
      out += "-";
      AppendEscapedCodePoint(r.hi, true, &out);
    }
  }
  out += "]";
  return out;
}

namespace {

void PrintExpr(const Grammar& g, int32_t id, bool atom_needed, std::string* out) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case Expr::Kind::kEmpty:
      *out += "\"\"";
      return;
    case Expr::Kind::kLiteral:
      *out += GbnfQuote(e.text);
      return;
    case Expr::Kind::kClass:
      *out += GbnfClass(e.ranges);
      return;
    case Expr::Kind::kRuleRef:
      *out += g.rules()[e.rule].name;
      return;
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice: {
      if (atom_needed) *out += "(";
      const bool seq = e.kind == Expr::Kind::kSequence;
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i > 0) *out += seq ? " " : " | ";
        PrintExpr(g, e.children[i], /*atom_needed=*/seq, out);
      }
      if (atom_needed) *out += ")";
      return;
    }
    case Expr::Kind::kRepeat: {
      // A repeated repetition is parenthesised: "(x?)*", never "x?*".
      const bool nested = g.expr(e.children[0]).kind == Expr::Kind::kRepeat;
      if (nested) *out += "(";
      PrintExpr(g, e.children[0], /*atom_needed=*/true, out);
      if (nested) *out += ")";
      if (e.min == 0 && e.max == 1) {
        *out += "?";
      } else if (e.min == 0 && e.max < 0) {
        *out += "*";
      } else if (e.min == 1 && e.max < 0) {
        *out += "+";
      } else if (e.max < 0) {
        *out += "{" + std::to_string(e.min) + ",}";
      } else if (e.min == e.max) {
        *out += "{" + std::to_string(e.min) + "}";
      } else {
        *out += "{" + std::to_string(e.min) + "," + std::to_string(e.max) + "}";
      }
      return;
    }
  }
}

}  // namespace

namespace {

// Rule references in the order they are printed.
void CollectRefs(const Grammar& g, int32_t id, std::vector<int32_t>* out) {
  const Expr& e = g.expr(id);
  if (e.kind == Expr::Kind::kRuleRef) out->push_back(e.rule);
  for (int32_t c : e.children) CollectRefs(g, c, out);
}

}  // namespace

std::string Grammar::ToGbnf() const {
  // Rules in order of first mention in the printed text (breadth first from
  // each rule not printed yet), so that ParseGbnf, which numbers rules by
  // first mention, gives back the same numbering and printing is stable.
  std::vector<uint8_t> queued(rules_.size(), 0);
  std::vector<int32_t> order;
  for (size_t start = 0; start < rules_.size(); ++start) {
    if (queued[start]) continue;
    queued[start] = 1;
    order.push_back(static_cast<int32_t>(start));
    for (size_t i = order.size() - 1; i < order.size(); ++i) {
      const Rule& r = rules_[order[i]];
      if (r.body < 0) continue;
      std::vector<int32_t> refs;
      CollectRefs(*this, r.body, &refs);
      for (int32_t q : refs) {
        if (!queued[q]) {
          queued[q] = 1;
          order.push_back(q);
        }
      }
    }
  }
  std::string out;
  for (int32_t id : order) {
    const Rule& r = rules_[id];
    out += r.name;
    out += " ::= ";
    if (r.body >= 0) PrintExpr(*this, r.body, /*atom_needed=*/false, &out);
    out += "\n";
  }
  return out;
}

}  // namespace kvs::grammar
