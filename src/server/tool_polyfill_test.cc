// The polyfills' tool-call text (template/chat_polyfill.h, below grammar)
// against the parser that reads replies (grammar/tool_calls.h): what the
// polyfill writes into the history, and teaches in its instruction, in the
// syntax EngineBackend picks, parses back to the same calls.
#include <gtest/gtest.h>

#include "grammar/tool_calls.h"
#include "template/chat_polyfill.h"

namespace kvs::server {
namespace {

using nlohmann::ordered_json;
using grammar::ToolCallFormat;

TEST(ToolPolyfillTest, WrittenCallsParseBackInEverySyntax) {
  const ordered_json tools = ordered_json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"tz": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  const ordered_json calls = ordered_json::parse(R"([
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "UTC", "n": 2}}}])");
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kQwen3Coder, ToolCallFormat::kLlama3,
                           ToolCallFormat::kMistral, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                           ToolCallFormat::kFunctionary, ToolCallFormat::kHarmony, ToolCallFormat::kLfm2}) {
    const std::string name = grammar::ToolCallFormatName(f);
    SCOPED_TRACE(name);
    const std::string text = tmpl::WriteToolCalls(name, calls);
    grammar::ToolCallParseOptions o;
    o.tools = tools;
    const grammar::ParsedOutput out = grammar::ParseToolCalls(f, text, o);
    ASSERT_EQ(out.tool_calls.size(), 2u) << text;
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(ordered_json::parse(out.tool_calls[0].arguments), ordered_json({{"city", "Paris"}}));
    EXPECT_EQ(out.tool_calls[1].name, "get_time");
    EXPECT_EQ(ordered_json::parse(out.tool_calls[1].arguments), ordered_json({{"tz", "UTC"}, {"n", 2}}));
    EXPECT_EQ(out.content, "") << text;
    // The instruction teaches a call in the same syntax (its example: the
    // first tool with its first argument).
    const std::string example = tmpl::WriteToolCalls(name, ordered_json::parse(R"([{"type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"...\"}"}}])"));
    EXPECT_NE(tmpl::ToolInstruction(name, tools).find(example), std::string::npos) << example;
    const grammar::ParsedOutput taught = grammar::ParseToolCalls(f, example, o);
    ASSERT_EQ(taught.tool_calls.size(), 1u) << example;
    EXPECT_EQ(taught.tool_calls[0].name, "get_weather");
  }
  // A template without a syntax of its own ("none") is written and taught Hermes's.
  EXPECT_EQ(tmpl::WriteToolCalls(grammar::ToolCallFormatName(ToolCallFormat::kNone), calls),
            tmpl::WriteToolCalls("hermes", calls));
}

}  // namespace
}  // namespace kvs::server
