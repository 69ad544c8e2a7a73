// Shared by the forced-call grammar files: tool_call_grammar.cc (the entry
// point and the older formats) and tool_call_grammar_tagged.cc (the formats
// of tool_call_syntax.h). Internal to the grammar module.
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/tool_calls.h"

namespace kvs::grammar::internal {

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // JSON schema of the arguments
};

// One parameter written as text, for the syntaxes that write parameters one
// by one: `item(name, value_rule, is_string)` is the GBNF of one parameter
// given the rule of its value (raw text of `raw_chars` for strings, the
// schema's JSON grammar otherwise). Declared properties in schema order
// (sorted by name when `sorted`), required ones always, `sep` between
// written ones. Schema rules are appended to *rules, named after `prefix`.
struct ParamStyle {
  std::function<std::string(const std::string& name, const std::string& value, bool is_string)> item;
  std::string raw_chars = "[^<]";
  std::string sep;
  bool sorted = false;
  // When set, the rule of a parameter's value (syntaxes with their own
  // nested values: Gemma 4, MiniMax-M3); `prefix` is free for its rules.
  std::function<StatusOr<std::string>(const ToolFunction& f, const std::string& name,
                                      const nlohmann::ordered_json& schema, const std::string& prefix,
                                      std::string* rules)>
      value;
};
// The rule of a string parameter written raw: an enum's values or
// `chars` within the schema's length bounds.
StatusOr<std::string> RawStringRule(const ToolFunction& f, const std::string& name,
                                    const nlohmann::ordered_json& schema, const std::string& chars);
StatusOr<std::string> ParamSequence(const ToolFunction& f, const std::string& prefix, const ParamStyle& style,
                                    std::string* rules);

// The whole GBNF text (root and rules) of a reply of one call (or one or
// more when parallel) to one of `fns`, for a format with a TaggedSyntax.
StatusOr<std::string> TaggedToolCallGbnf(ToolCallFormat format, const std::vector<ToolFunction>& fns, bool parallel);

}  // namespace kvs::grammar::internal
