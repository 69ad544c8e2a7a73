// Argument values of the tool-call syntaxes that do not write JSON: a
// parameter's text decoded by its schema type (strings raw, other values
// JSON or Python), Python literals ({'a': True}), Gemma 4's argument
// literals (city:<|"|>Oslo<|"|>), LFM2's pythonic call lists
// ([f(a=1), g(b='x')]) and MiniMax-M3's nested XML values. All of them
// produce JSON; none throws. Internal to the grammar module.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvs::grammar::internal {

using ToolJson = nlohmann::ordered_json;

// The JSON schema of `function`'s parameter `param` among `tools` (OpenAI
// form, or bare function objects); null when not declared.
ToolJson ParameterSchema(const ToolJson& tools, std::string_view function, std::string_view param);
// The schema's "type" when it is one string ("" otherwise).
std::string SchemaType(const ToolJson& schema);

// A parameter value written as text: a string when the schema says so (or
// when the text is no JSON or Python literal), else the literal's value.
ToolJson TextValue(std::string_view raw, const ToolJson& schema);

// A Python literal (dict, list, tuple, str, int, float, True/False/None;
// JSON's spellings too) making up the whole text (surrounding whitespace
// allowed).
std::optional<ToolJson> ParsePythonLiteral(std::string_view text);

// Gemma 4's arguments: the text between "call:NAME{" and "}<tool_call|>",
// i.e. `key:value,...` with strings as <|"|>text<|"|>, bare or quoted keys.
std::optional<ToolJson> ParseGemmaArguments(std::string_view text);

// The arguments of a Gemma call that did not end well (cut by the end of
// the output, or malformed): the pairs before the first that is not
// followed by ',' or '}' (a value may go on until one of them comes).
// `text` starts after "call:NAME{"; a '}' ends the list.
ToolJson GemmaArgumentsPrefix(std::string_view text);

// LFM2's calls: "[name(key=value, ...), ...]" (values Python literals).
std::optional<std::vector<std::pair<std::string, ToolJson>>> ParsePythonicCalls(std::string_view text);

// MiniMax-M3's invoke body: (NS<key>VALUE NS</key>)* where VALUE is text
// (typed by `schema`, the function's parameters schema) or, for objects
// and arrays, more such elements (arrays as NS<item>..NS</item>).
std::optional<ToolJson> ParseMiniMaxXml(std::string_view body, std::string_view ns, const ToolJson& schema);
// The elements of a MiniMax-M3 body that did not end well before the first
// that is not closed or does not decode (an object).
ToolJson MiniMaxXmlPrefix(std::string_view body, std::string_view ns, const ToolJson& schema);

}  // namespace kvs::grammar::internal
