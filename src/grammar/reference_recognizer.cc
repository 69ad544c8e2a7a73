#include "grammar/reference_recognizer.h"

#include <algorithm>

#include "base/utf8.h"

namespace kvs::grammar::testing {

namespace {

// The code points whose UTF-8 encoding starts with `prefix` (an incomplete
// but so far valid sequence) form one range; returns false if none do.
bool PrefixCodePointRange(std::string_view prefix, uint32_t* lo, uint32_t* hi) {
  const auto b0 = static_cast<uint8_t>(prefix[0]);
  int n = 0;
  uint8_t second_lo = 0x80, second_hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) second_lo = 0xA0;
    if (b0 == 0xED) second_hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) second_lo = 0x90;
    if (b0 == 0xF4) second_hi = 0x8F;
  } else {
    return false;
  }
  if (static_cast<int>(prefix.size()) >= n) return false;
  std::string min(prefix), max(prefix);
  for (size_t i = 1; i < prefix.size(); ++i) {
    const auto b = static_cast<uint8_t>(prefix[i]);
    const uint8_t l = i == 1 ? second_lo : 0x80, h = i == 1 ? second_hi : 0xBF;
    if (b < l || b > h) return false;
  }
  for (int i = static_cast<int>(prefix.size()); i < n; ++i) {
    min.push_back(static_cast<char>(i == 1 ? second_lo : 0x80));
    max.push_back(static_cast<char>(i == 1 ? second_hi : 0xBF));
  }
  return Utf8Next(min, 0, lo) == static_cast<size_t>(n) && Utf8Next(max, 0, hi) == static_cast<size_t>(n);
}

bool InRanges(const std::vector<CharRange>& ranges, uint32_t lo, uint32_t hi) {
  for (CharRange r : ranges) {
    if (r.lo <= hi && lo <= r.hi) return true;
  }
  return false;
}

}  // namespace

ReferenceRecognizer::ReferenceRecognizer(const Grammar& g) : g_(g) {
  // productive_expr_: the expression matches at least one string.
  const size_t n = g.exprs().size();
  productive_expr_.assign(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (productive_expr_[i]) continue;
      const Expr& e = g.expr(static_cast<int32_t>(i));
      bool p = false;
      switch (e.kind) {
        case Expr::Kind::kEmpty:
        case Expr::Kind::kLiteral: p = true; break;
        case Expr::Kind::kClass: p = !e.ranges.empty(); break;
        case Expr::Kind::kRuleRef: p = productive_expr_[g.rules()[e.rule].body] != 0; break;
        case Expr::Kind::kSequence:
          p = std::all_of(e.children.begin(), e.children.end(), [&](int32_t c) { return productive_expr_[c] != 0; });
          break;
        case Expr::Kind::kChoice:
          p = std::any_of(e.children.begin(), e.children.end(), [&](int32_t c) { return productive_expr_[c] != 0; });
          break;
        case Expr::Kind::kRepeat: p = e.min == 0 || productive_expr_[e.children[0]]; break;
      }
      if (p) {
        productive_expr_[i] = 1;
        changed = true;
      }
    }
  }
}

ReferenceRecognizer::Result ReferenceRecognizer::Run(std::string_view text) {
  text_ = text;
  memo_.clear();
  active_.clear();
  return MatchRule(g_.root(), 0);
}

bool ReferenceRecognizer::Matches(std::string_view text) { return Run(text).ends.count(text.size()) > 0; }

bool ReferenceRecognizer::IsViablePrefix(std::string_view text) {
  const Result r = Run(text);
  return r.reaches_end || r.ends.count(text.size()) > 0;
}

ReferenceRecognizer::Result ReferenceRecognizer::MatchRule(int32_t rule, size_t pos) {
  const auto key = std::make_pair(rule, pos);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  if (!active_.insert(key).second) return {};  // left recursion (not expected)
  Result r = MatchExpr(g_.rules()[rule].body, pos);
  active_.erase(key);
  memo_[key] = r;
  return r;
}

ReferenceRecognizer::Result ReferenceRecognizer::MatchExpr(int32_t id, size_t pos) {
  const Expr& e = g_.expr(id);
  const size_t len = text_.size();
  Result r;
  switch (e.kind) {
    case Expr::Kind::kEmpty:
      r.ends.insert(pos);
      break;
    case Expr::Kind::kLiteral: {
      const std::string_view rest = text_.substr(pos);
      if (rest.substr(0, e.text.size()) == e.text) {
        r.ends.insert(pos + e.text.size());
      } else if (rest.size() < e.text.size() && std::string_view(e.text).substr(0, rest.size()) == rest) {
        r.reaches_end = true;
      }
      break;
    }
    case Expr::Kind::kClass: {
      if (pos == len) {
        r.reaches_end = !e.ranges.empty();
        break;
      }
      uint32_t cp = 0;
      const size_t n = Utf8Next(text_, pos, &cp);
      if (n > 0) {
        if (InRanges(e.ranges, cp, cp)) r.ends.insert(pos + n);
        break;
      }
      // Possibly a character cut by the end of the text.
      const size_t avail = len - pos;
      uint32_t lo = 0, hi = 0;
      if (avail < 4 && PrefixCodePointRange(text_.substr(pos), &lo, &hi)) r.reaches_end = InRanges(e.ranges, lo, hi);
      break;
    }
    case Expr::Kind::kRuleRef:
      r = MatchRule(e.rule, pos);
      break;
    case Expr::Kind::kSequence: {
      std::set<size_t> cur = {pos};
      for (size_t i = 0; i < e.children.size() && !cur.empty(); ++i) {
        const bool rest_ok = std::all_of(e.children.begin() + static_cast<std::ptrdiff_t>(i) + 1, e.children.end(),
                                         [&](int32_t c) { return productive_expr_[c] != 0; });
        std::set<size_t> next;
        for (size_t p : cur) {
          const Result cr = MatchExpr(e.children[i], p);
          next.insert(cr.ends.begin(), cr.ends.end());
          if (cr.reaches_end && rest_ok) r.reaches_end = true;
        }
        cur = std::move(next);
      }
      r.ends = std::move(cur);
      break;
    }
    case Expr::Kind::kChoice:
      for (int32_t c : e.children) {
        const Result cr = MatchExpr(c, pos);
        r.ends.insert(cr.ends.begin(), cr.ends.end());
        r.reaches_end |= cr.reaches_end;
      }
      break;
    case Expr::Kind::kRepeat: {
      const int32_t child = e.children[0];
      std::set<size_t> cur = {pos}, seen;
      if (e.min == 0) {
        r.ends.insert(pos);
        seen.insert(pos);
      }
      for (int32_t count = 1; (e.max < 0 || count <= e.max) && !cur.empty(); ++count) {
        const bool rest_ok = count >= e.min || productive_expr_[child];
        std::set<size_t> next;
        for (size_t p : cur) {
          const Result cr = MatchExpr(child, p);
          next.insert(cr.ends.begin(), cr.ends.end());
          if (cr.reaches_end && rest_ok) r.reaches_end = true;
        }
        if (count >= e.min) {
          r.ends.insert(next.begin(), next.end());
          if (e.max < 0) {
            std::set<size_t> fresh;
            for (size_t p : next) {
              if (seen.insert(p).second) fresh.insert(p);
            }
            next = std::move(fresh);
          }
        }
        cur = std::move(next);
      }
      break;
    }
  }
  return r;
}

namespace {

bool Sample(const Grammar& g, int32_t id, std::mt19937_64& rng, int32_t* budget, std::string* out) {
  if (--*budget < 0) return false;
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case Expr::Kind::kEmpty: return true;
    case Expr::Kind::kLiteral: *out += e.text; return true;
    case Expr::Kind::kClass: {
      if (e.ranges.empty()) return false;
      const CharRange r = e.ranges[rng() % e.ranges.size()];
      AppendUtf8(r.lo + static_cast<uint32_t>(rng() % (r.hi - r.lo + 1)), out);
      return true;
    }
    case Expr::Kind::kRuleRef: return Sample(g, g.rules()[e.rule].body, rng, budget, out);
    case Expr::Kind::kSequence:
      for (int32_t c : e.children) {
        if (!Sample(g, c, rng, budget, out)) return false;
      }
      return true;
    case Expr::Kind::kChoice:
      if (e.children.empty()) return false;
      return Sample(g, e.children[rng() % e.children.size()], rng, budget, out);
    case Expr::Kind::kRepeat: {
      const int32_t extra = e.max < 0 ? static_cast<int32_t>(rng() % 4) : static_cast<int32_t>(rng() % (e.max - e.min + 1));
      for (int32_t i = 0; i < e.min + extra; ++i) {
        if (!Sample(g, e.children[0], rng, budget, out)) return false;
      }
      return true;
    }
  }
  return false;
}

const std::vector<uint32_t> kAlphabet = {'a', 'b', 'c', 0xE9, 0x20AC, 0x1F600};

int32_t RandomExpr(Grammar& g, std::mt19937_64& rng, int32_t num_rules, int depth) {
  const int kind = static_cast<int>(rng() % (depth >= 3 ? 3 : 7));
  switch (kind) {
    case 0: {
      std::string s;
      for (size_t i = 0, n = 1 + rng() % 3; i < n; ++i) AppendUtf8(kAlphabet[rng() % kAlphabet.size()], &s);
      return g.Literal(s);
    }
    case 1: {
      std::vector<CharRange> ranges;
      for (size_t i = 0, n = 1 + rng() % 3; i < n; ++i) {
        const uint32_t a = kAlphabet[rng() % kAlphabet.size()];
        const uint32_t b = rng() % 3 == 0 ? kAlphabet[rng() % kAlphabet.size()] : a;
        ranges.push_back({std::min(a, b), std::max(a, b)});
      }
      return g.Class(std::move(ranges), rng() % 5 == 0);
    }
    case 2: return g.Ref(static_cast<int32_t>(rng() % num_rules));
    case 3:
    case 4: {
      std::vector<int32_t> ch;
      for (size_t i = 0, n = 2 + rng() % 2; i < n; ++i) ch.push_back(RandomExpr(g, rng, num_rules, depth + 1));
      return kind == 3 ? g.Sequence(std::move(ch)) : g.Choice(std::move(ch));
    }
    default: {
      const int32_t c = RandomExpr(g, rng, num_rules, depth + 1);
      switch (rng() % 5) {
        case 0: return g.Optional(c);
        case 1: return g.Star(c);
        case 2: return g.Plus(c);
        case 3: {
          const auto m = static_cast<int32_t>(rng() % 3);
          return g.Repeat(c, m, m + static_cast<int32_t>(rng() % 3));
        }
        default: return g.Repeat(c, static_cast<int32_t>(rng() % 3), -1);
      }
    }
  }
}

}  // namespace

std::optional<std::string> SampleString(const Grammar& g, std::mt19937_64& rng, int32_t budget) {
  std::string out;
  if (!Sample(g, g.rules()[g.root()].body, rng, &budget, &out)) return std::nullopt;
  return out;
}

Grammar RandomGrammar(std::mt19937_64& rng, int32_t num_rules) {
  Grammar g;
  for (int32_t r = 0; r < num_rules; ++r) g.RuleId(r == 0 ? "root" : "r" + std::to_string(r));
  for (int32_t r = 0; r < num_rules; ++r) g.SetBody(r, RandomExpr(g, rng, num_rules, 0));
  return g;
}

}  // namespace kvs::grammar::testing
