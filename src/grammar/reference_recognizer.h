// A reference recognizer for tests: decides membership and viable-prefix
// questions directly on the Grammar IR (sets of end positions per
// expression, memoized per rule and position), sharing no code with the
// automaton/matcher it checks. Exponential corner cases are fine: tests
// use short strings. Requires a grammar without left recursion (the
// compiler rejects those anyway). Also: random grammars and random strings
// derived from a grammar. Test-only.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kvs::grammar::testing {

class ReferenceRecognizer {
 public:
  explicit ReferenceRecognizer(const Grammar& g);

  // Whether the whole text is in the language.
  bool Matches(std::string_view text);
  // Whether some string in the language starts with text.
  bool IsViablePrefix(std::string_view text);

 private:
  struct Result {
    std::set<size_t> ends;
    bool reaches_end = false;  // a partial match ran into the end of the text
  };
  Result Run(std::string_view text);
  Result MatchExpr(int32_t id, size_t pos);
  Result MatchRule(int32_t rule, size_t pos);

  const Grammar& g_;
  std::vector<uint8_t> productive_expr_;
  std::string_view text_;
  std::map<std::pair<int32_t, size_t>, Result> memo_;
  std::set<std::pair<int32_t, size_t>> active_;
};

// A random string of the grammar's language, derived top-down; nullopt when
// the derivation grew past `budget` expansions (try again).
std::optional<std::string> SampleString(const Grammar& g, std::mt19937_64& rng, int32_t budget = 400);

// A random grammar over a small alphabet with multi-byte characters
// (a b c é € 😀): literals, classes (also negated), rule references,
// sequences, choices and all repetition forms. May be rejected by the
// compiler (left recursion, a rule that never finishes): callers skip those.
Grammar RandomGrammar(std::mt19937_64& rng, int32_t num_rules = 4);

}  // namespace kvs::grammar::testing
