// tool_choice grammars: for each format, random walks through the masks of
// the "required" (parallel) and named-function grammars give replies that
// the format's own parser turns into calls of the allowed functions, whose
// arguments ajv accepts against the function's parameters schema.
#include <gtest/gtest.h>

#include <random>

#include "base/test_util.h"
#include "grammar/test_util.h"
#include "grammar/tool_calls.h"

namespace kvs::grammar {
namespace tool_call_grammar_test {

using Json = nlohmann::ordered_json;

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 1,
        "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add_event",
      "parameters": {"$defs": {"when": {"type": "string", "format": "date"}}, "type": "object",
        "properties": {"title": {"type": "string", "enum": ["lunch", "call"]}, "date": {"$ref": "#/$defs/when"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 2}},
        "required": ["title", "date"], "additionalProperties": false}}}
  ])");
}

std::shared_ptr<const Vocabulary> Vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"<tool_call>", "\n", "{\"", "\": ", "\", \"", "[TOOL_CALLS]", "[ARGS]", "<function=", "get_",
                        "weather", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "```json\n", "<|channel|>", "<|message|>"}) {
    toks.push_back(t);
  }
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  return testing::VocabularyOf(toks);
}

// Every format with a forced-call grammar.
std::vector<ToolCallFormat> Formats() {
  std::vector<ToolCallFormat> out;
  for (int f = static_cast<int>(ToolCallFormat::kHermes); f <= static_cast<int>(ToolCallFormat::kApertus); ++f) {
    out.push_back(static_cast<ToolCallFormat>(f));
  }
  return out;
}

// One test over all formats: the arguments of all of them go to one ajv
// run (a node start per format would be most of the test's time).
TEST(ToolChoiceGrammar, WalksParseIntoValidCalls) {
  const Json tools = Tools();
  std::map<std::string, Json> schemas;
  for (const Json& t : tools) schemas[t["function"]["name"].get<std::string>()] = t["function"]["parameters"];
  Json jobs = Json::array();
  std::vector<std::string> job_format;
  // Under the sanitizers (which look for memory errors in the same code
  // paths, 10x slower) 3 walks per grammar instead of 10.
  const int kWalks = ::kvs::testing::SanitizerSample(10, 3);
  for (const ToolCallFormat format : Formats()) {
    SCOPED_TRACE(ToolCallFormatName(format));
    std::mt19937_64 rng(static_cast<uint64_t>(format) * 31 + 7);
    int calls_checked = 0;
    for (const ToolChoice& choice : {ToolChoice{ToolChoice::Mode::kRequired, ""},
                                     ToolChoice{ToolChoice::Mode::kNamed, "add_event"}}) {
      SCOPED_TRACE(choice.mode == ToolChoice::Mode::kNamed ? "named" : "required");
      auto g = ToolCallGrammar(format, tools, choice, /*parallel_tool_calls=*/true);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      auto cg = CompiledGrammar::Compile(*g, Vocab());
      ASSERT_TRUE(cg.ok()) << cg.status().ToString() << "\n" << g->ToGbnf();
      for (int w = 0; w < kWalks; ++w) {
        const testing::WalkResult r = testing::RandomWalk(*cg, rng, /*budget=*/60);
        ASSERT_TRUE(r.finished) << r.text;
        const ParsedOutput out = ParseToolCalls(format, r.text);
        ASSERT_FALSE(out.tool_calls.empty()) << "no call parsed from: " << r.text;
        EXPECT_EQ(out.content, "") << r.text;
        for (const ToolCall& call : out.tool_calls) {
          ASSERT_TRUE(schemas.count(call.name)) << call.name;
          if (choice.mode == ToolChoice::Mode::kNamed) {
            EXPECT_EQ(call.name, "add_event");
          }
          jobs.push_back({{"schema", schemas[call.name]}, {"documents", Json::array({call.arguments})}});
          job_format.push_back(ToolCallFormatName(format));
          ++calls_checked;
        }
        // Single-call syntaxes.
        if (format == ToolCallFormat::kHarmony || format == ToolCallFormat::kGigaChat3 ||
            format == ToolCallFormat::kGigaChat31) {
          EXPECT_EQ(out.tool_calls.size(), 1u);
        }
      }
    }
    EXPECT_GE(calls_checked, 2 * kWalks);
  }
  const std::string missing = testing::AjvMissing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  const Json results = testing::RunAjv(jobs);
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(results[i]["results"][0].is_null())
        << job_format[i] << ": " << jobs[i]["documents"][0].get<std::string>() << "\n  " << results[i]["results"][0];
  }
}

TEST(ToolChoiceGrammar, Errors) {
  const Json tools = Tools();
  auto g = ToolCallGrammar(ToolCallFormat::kHermes, tools, {ToolChoice::Mode::kNamed, "nope"}, false);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'nope'"), std::string::npos);
  EXPECT_FALSE(ToolCallGrammar(ToolCallFormat::kNone, tools, {}, false).ok());
  EXPECT_FALSE(ToolCallGrammar(ToolCallFormat::kHermes, Json::array(), {}, false).ok());
  const Json bad = Json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"n":{"type":"integer","multipleOf":2}}}}}])");
  auto g2 = ToolCallGrammar(ToolCallFormat::kHermes, bad, {}, false);
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("function 'f'"), std::string::npos) << g2.status().message();
  EXPECT_NE(g2.status().message().find("multipleOf"), std::string::npos) << g2.status().message();
}

}  // namespace tool_call_grammar_test
}  // namespace kvs::grammar
