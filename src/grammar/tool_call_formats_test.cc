// The value decoders of tool_call_values.h: Python literals, text values
// typed by a schema, LFM2's pythonic calls, Gemma 4's arguments and
// MiniMax-M3's nested XML values.
#include <gtest/gtest.h>

#include "grammar/tool_call_values.h"

namespace kvs::grammar {
namespace {

using Json = nlohmann::json;  // unordered: key order is the writer's

TEST(ToolCallValues, PythonLiterals) {
  using internal::ParsePythonLiteral;
  auto j = [](const std::optional<nlohmann::ordered_json>& v) { return v ? Json(*v) : Json("<none>"); };
  EXPECT_EQ(j(ParsePythonLiteral("{'a': (1, 2), \"b\": None, 'c': -1.5e3}")),
            Json::parse(R"({"a": [1, 2], "b": null, "c": -1500.0})"));
  EXPECT_EQ(j(ParsePythonLiteral(R"("\ud83d\ude00 \u00e9\n")")), Json("😀 é\n"));
  EXPECT_EQ(j(ParsePythonLiteral("[True, False, true, null,]")), Json::parse("[true, false, true, null]"));
  for (const char* bad : {"{'a': }", "[1, 2", "'open", "abc", "{1: 2}", "1 2", "\"\\ud800\""}) {
    EXPECT_FALSE(ParsePythonLiteral(bad).has_value()) << bad;
  }
  // Nesting past the limit is refused, not recursed into.
  EXPECT_FALSE(ParsePythonLiteral(std::string(5000, '[') + std::string(5000, ']')).has_value());
  EXPECT_TRUE(ParsePythonLiteral(std::string(20, '[') + std::string(20, ']')).has_value());
}

TEST(ToolCallValues, TextValuesFollowTheSchemaType) {
  using internal::TextValue;
  const nlohmann::ordered_json str = {{"type", "string"}}, num = {{"type", "integer"}};
  EXPECT_EQ(Json(TextValue("007", str)), Json("007"));
  EXPECT_EQ(Json(TextValue("7", num)), Json(7));
  EXPECT_EQ(Json(TextValue("7", nullptr)), Json(7));
  EXPECT_EQ(Json(TextValue("Oslo", nullptr)), Json("Oslo"));
  EXPECT_EQ(Json(TextValue("{'a': True}", nullptr)), Json::parse(R"({"a": true})"));
}

TEST(ToolCallValues, PythonicCallsAndGemmaArguments) {
  auto calls = internal::ParsePythonicCalls("[a.b(x=1), c(y='z', w={\"k\": [1]})]");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].first, "a.b");
  EXPECT_EQ(Json((*calls)[1].second), Json::parse(R"({"y": "z", "w": {"k": [1]}})"));
  EXPECT_FALSE(internal::ParsePythonicCalls("[]").has_value());
  EXPECT_FALSE(internal::ParsePythonicCalls("[f(1)]").has_value());  // positional: not a call we can name
  auto gemma = internal::ParseGemmaArguments("q:<|\"|>a:b<|\"|>,\"n\":2,l:[<|\"|>x<|\"|>]");
  ASSERT_TRUE(gemma.has_value());
  EXPECT_EQ(Json(*gemma), Json::parse(R"({"q": "a:b", "n": 2, "l": ["x"]})"));
  EXPECT_FALSE(internal::ParseGemmaArguments("q:<|\"|>open").has_value());
}

TEST(ToolCallValues, MiniMaxNestedValues) {
  const std::string ns = "]<]minimax[>[";
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
    "o": {"type": "object", "properties": {"id": {"type": "string"}, "on": {"type": "boolean"}}},
    "l": {"type": "array", "items": {"type": "integer"}}, "e": {"type": "array"}}})");
  auto v = internal::ParseMiniMaxXml(ns + "<o>" + ns + "<id>12" + ns + "</id>" + ns + "<on>true" + ns + "</on>" + ns +
                                         "</o>" + ns + "<l>" + ns + "<item>1" + ns + "</item>" + ns + "<item>2" + ns +
                                         "</item>" + ns + "</l>" + ns + "<e>" + ns + "</e>",
                                     ns, schema);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(Json(*v), Json::parse(R"({"o": {"id": "12", "on": true}, "l": [1, 2], "e": []})"));
  EXPECT_FALSE(internal::ParseMiniMaxXml(ns + "<o>unclosed", ns, schema).has_value());
}

}  // namespace
}  // namespace kvs::grammar
