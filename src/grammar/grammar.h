// Grammar: a context-free grammar whose rule bodies are regular expressions
// over terminals (byte strings, Unicode character classes) and rule
// references: the model of llama.cpp's GBNF. This is the intermediate form
// every constraint is turned into (GBNF text, JSON Schema, regex, choice,
// tool-call syntax) before CompileGrammar (compiler.h) builds a matcher.
//
// GBNF text form (ParseGbnf), compatible with llama.cpp's grammars:
//   name ::= body              a rule; `root` is the start rule
//   "text"                     a literal (UTF-8), escapes \n \r \t \\ \" \xHH
//                              \uHHHH \UHHHHHHHH
//   [a-z0-9_] [^"\\]           a character class (code points), ranges and
//                              negation; `.` is any character
//   a b                        sequence;  a | b  alternation;  ( ... ) group
//   x* x+ x?  x{m} x{m,} x{m,n} x{,n}   repetition
//   # comment                  to the end of the line
// A rule ends at the end of its line unless inside parentheses, or unless
// the next line starts with `|` (a continuation; llama.cpp requires
// parentheses there). Characters are Unicode code points: a class or `.`
// matches exactly the valid UTF-8 encodings of its code points (never a
// surrogate, never invalid UTF-8).
//
// Invariants (checked by Validate): every expression index is valid,
// references name existing rules, class ranges are sorted, disjoint, within
// U+0000..U+10FFFF and contain no surrogates; repeat bounds min <= max.
// Thread-safety: a value type; const methods are safe from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvs::grammar {

// Limits that protect the server from hostile grammars. Exceeding one is an
// InvalidArgument/ResourceExhausted error naming the limit.
struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;     // GBNF text
  int32_t max_rules = 20000;
  int32_t max_nesting = 200;           // parenthesis depth in GBNF text
  int32_t max_repeat = 10000;          // bound of {m,n}
  int64_t max_nfa_states = 2000000;    // after expanding repetitions
  int64_t max_dfa_states = 200000;     // all rules together
  int64_t max_compile_work = 50000000; // NFA states and edges visited building the DFAs (~1 s)
};

// A code point range, inclusive.
struct CharRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
  bool operator==(const CharRange&) const = default;
};

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,     // matches ""
    kLiteral,   // `text` (bytes, usually UTF-8)
    kClass,     // one code point from `ranges`
    kRuleRef,   // rule `rule`
    kSequence,  // children in order
    kChoice,    // one of children
    kRepeat,    // children[0] between min and max times (max -1: unbounded)
  };
  Kind kind = Kind::kEmpty;
  std::string text;
  std::vector<CharRange> ranges;
  int32_t rule = -1;
  std::vector<int32_t> children;
  int32_t min = 0;
  int32_t max = 0;
  bool operator==(const Expr&) const = default;
};

struct Rule {
  std::string name;
  int32_t body = -1;  // expression index
};

class Grammar {
 public:
  // --- building (used by the parser and the converters) ---------------------
  int32_t Empty();
  int32_t Literal(std::string bytes);
  // ranges need not be sorted or disjoint; surrogates are removed. negated:
  // the complement within U+0000..U+10FFFF.
  int32_t Class(std::vector<CharRange> ranges, bool negated = false);
  int32_t AnyChar();
  int32_t Ref(int32_t rule);
  int32_t Sequence(std::vector<int32_t> children);
  int32_t Choice(std::vector<int32_t> children);
  int32_t Repeat(int32_t child, int32_t min, int32_t max);  // max -1: unbounded
  int32_t Optional(int32_t child) { return Repeat(child, 0, 1); }
  int32_t Star(int32_t child) { return Repeat(child, 0, -1); }
  int32_t Plus(int32_t child) { return Repeat(child, 1, -1); }

  // Returns the id of rule `name`, declaring it (without a body) if new.
  int32_t RuleId(std::string_view name);
  // -1 when absent.
  int32_t FindRule(std::string_view name) const;
  void SetBody(int32_t rule, int32_t expr) { rules_[rule].body = expr; }
  // A name not used yet, built from `base` (base, base-1, base-2, ...).
  std::string FreshName(std::string_view base) const;
  // Defines a new rule with a fresh name from `base`; returns its id.
  int32_t AddRule(std::string_view base, int32_t body);
  // Gives rule `id` a fresh name built from `base` (references are by id, so
  // they follow it); returns the name. Frees the old name, e.g. "root" for a
  // new start rule that wraps the old one.
  std::string RenameRule(int32_t id, std::string_view base);

  // --- reading ----------------------------------------------------------------
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<Expr>& exprs() const { return exprs_; }
  const Expr& expr(int32_t id) const { return exprs_[id]; }
  int32_t root() const { return FindRule("root"); }

  // Checks the invariants above and that every rule has a body and `root`
  // exists. The parser and converters produce valid grammars; this guards
  // hand-built ones.
  Status Validate() const;

  // GBNF text that ParseGbnf turns back into an equal grammar (rules in
  // order, one per line).
  std::string ToGbnf() const;

 private:
  int32_t Add(Expr e);
  std::vector<Rule> rules_;
  std::vector<Expr> exprs_;
  std::unordered_map<std::string, int32_t> rule_index_;  // name -> rule id
};

// Parses GBNF text. Errors name the line and column and what was expected.
StatusOr<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits = {});

// GBNF literal for `bytes`: quoted, with escapes for quotes, backslashes and
// control characters ("a\"b" -> "\"a\\\"b\""). GBNF escapes are code
// points (\xE9 is U+00E9, as in llama.cpp), so bytes that are not UTF-8 have
// no GBNF form: each becomes \xHH, i.e. that byte's Latin-1 character.
std::string GbnfQuote(std::string_view bytes);

// GBNF class text for code point ranges, e.g. "[a-z\u00E9]" ("[]" when
// empty: matches nothing).
std::string GbnfClass(const std::vector<CharRange>& ranges);

// The code point ranges of the complement of `ranges` (sorted, disjoint)
// within U+0000..U+10FFFF, surrogates excluded.
std::vector<CharRange> ComplementRanges(const std::vector<CharRange>& ranges);
// Sorts, merges and removes surrogates.
std::vector<CharRange> NormalizeRanges(std::vector<CharRange> ranges);

}  // namespace kvs::grammar
