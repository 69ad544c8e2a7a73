// Regular expressions -> grammar, for vLLM's `guided_regex` /
// `structured_outputs.regex` (the whole output must match) and for JSON
// Schema `pattern` (ECMA-262, matches anywhere in the string unless
// anchored, applied to the decoded string inside a JSON string literal).
//
// Supported: literals and escapes (\t \n \r \f \v \0 \xHH \uHHHH \u{H..}
// and escaped punctuation), `.`, classes [..] [^..] with ranges and \d \w \s
// \D \W \S (ASCII digits and word characters, as xgrammar and re.ASCII do),
// groups ( ) (?: ) (?P<n> ) (?<n> ), alternation, quantifiers * + ? {n}
// {n,} {n,m} and their lazy forms (same language), and ^ $ \A \Z \z at the
// start/end of the pattern or of a top-level alternative. Everything else
// (backreferences, lookaround, \b, \p{..}, inline flags, possessive
// quantifiers, anchors in the middle) is an InvalidArgument error naming the
// construct and its position.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace kvs::grammar {

struct RegexOptions {
  // `.` excludes \n only (Python, vLLM's regexes) or also \r, U+2028,
  // U+2029 (ECMA-262, JSON Schema).
  bool ecmascript = false;
  // JSON Schema semantics: the pattern may match anywhere unless anchored.
  bool search = false;
  // Emit the characters as they appear inside a JSON string literal: '"',
  // '\' and control characters as escapes (\" \\ \n \u001f ...).
  bool json_string = false;
  int32_t max_repeat = 1000;
  int32_t max_nesting = 100;
};

// The regex as one GBNF expression (no rule definitions), e.g. for
// "a[0-9]+" -> `"a" [0-9]+`.
StatusOr<std::string> RegexToGbnf(std::string_view pattern, const RegexOptions& options = {});

// A grammar whose root is exactly the regex (full match).
StatusOr<Grammar> RegexToGrammar(std::string_view pattern, const RegexOptions& options = {});

// vLLM's guided_choice: the output is exactly one of the strings. An empty
// list is an error.
StatusOr<Grammar> ChoiceToGrammar(const std::vector<std::string>& choices);

}  // namespace kvs::grammar
