// Hand-written replies in the formats of tool_call_syntax.h (what the
// templates do not render: calls without arguments, reasoning and answer
// blocks, Python and Gemma literals, CDATA, DSML's string attribute,
// MiniMax-M3 arrays, prose that merely mentions a marker, malformed calls),
// parsed whole and at every split point; and the value decoders of
// tool_call_values.h on their own.
#include <gtest/gtest.h>

#include "grammar/tool_call_values.h"
#include "grammar/tool_calls.h"

namespace kvs::grammar {
namespace tool_call_formats_test {

using Json = nlohmann::json;  // unordered: key order is the writer's
using F = ToolCallFormat;

struct Reply {
  ToolCallFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments JSON
  std::string reasoning = "";
};

ParsedOutput Streamed(ToolCallFormat f, std::string_view a, std::string_view b, const ToolCallParseOptions& o) {
  ToolCallStreamParser p(f, o);
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  auto take = [&](const StreamDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index >= static_cast<int32_t>(calls.size())) calls.push_back({"", t.name.value_or(""), ""});
      calls[t.index].arguments += t.arguments;
    }
  };
  take(p.Feed(a));
  take(p.Feed(b));
  take(p.Finish());
  ParsedOutput out;
  out.content = content;
  out.reasoning = reasoning;
  out.tool_calls = calls;
  EXPECT_EQ(content, p.result().content);
  return out;
}

TEST(ToolCallFormats, HandWrittenReplies) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "code": {"type": "string"}}}}}])");
  const std::string ns = "]<]minimax[>[";
  const std::vector<Reply> replies = {
      {F::kGlm45,
       "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n"
       "<arg_value>3</arg_value>\n<arg_key>code</arg_key>\n<arg_value>007</arg_value>\n</tool_call>",
       "Sure.", {{"get_weather", R"({"city": "Oslo", "days": 3, "code": "007"})"}}},
      {F::kGlm45,
       "<tool_call>list_files</tool_call><tool_call>f<arg_key>a</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
       "", {{"list_files", "{}"}, {"f", R"({"a": [1, 2]})"}}},
      {F::kGlm45, "Use <tool_call> tags, like <b>this</b>.", "Use <tool_call> tags, like <b>this</b>.", {}},
      {F::kKimiK2,
       "On it.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
       "{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>",
       "On it.", {{"get_weather", R"({"city": "Oslo"})"}}},
      {F::kSolarOpen,
       "<|think|>Need weather.<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>"
       "get_weather<|tool_call:args|>{\"city\":\"Oslo\"}<|tool_call:end|><|calls|>",
       "", {{"get_weather", R"({"city": "Oslo"})"}}, "Need weather."},
      {F::kSolarOpen, "<|content|>Hello!<|end|>", "Hello!", {}},
      {F::kDeepSeekV32,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"code\" string=\"true\">42"
       "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"o\" string=\"false\">{\"a\": [1]}</｜DSML｜parameter>\n"
       "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
       "", {{"get_weather", R"({"code": "42", "o": {"a": [1]}})"}}},
      {F::kMiniCpm5,
       "<function name=\"write\"><param name=\"text\"><![CDATA[a<b & c\nd]]></param><param name=\"n\">2</param>"
       "<param name=\"o\">{'k': True, 'l': [1, 'x'], 'u': '\\u00e9'}</param></function>",
       "", {{"write", R"({"text": "a<b & c\nd", "n": 2, "o": {"k": true, "l": [1, "x"], "u": "é"}})"}}},
      {F::kSeedOss, "<seed:tool_call>\n<function=get_weather>\n<parameter=city>New York</parameter>\n</function>\n"
                    "</seed:tool_call>",
       "", {{"get_weather", R"({"city": "New York"})"}}},
      {F::kMiniMaxM3,
       ns + "<tool_call>\n" + ns + "<invoke name=\"f\">" + ns + "<tags>" + ns + "<item>a" + ns + "</item>" + ns +
           "<item>b" + ns + "</item>" + ns + "</tags>" + ns + "<n>5" + ns + "</n>" + ns + "</invoke>\n" + ns +
           "</tool_call>",
       "", {{"f", R"({"tags": ["a", "b"], "n": 5})"}}},
      {F::kGemma4, "<|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:[1,2.5],c:{d:true,e:<|\"|>}<|\"|>}}<tool_call|>", "",
       {{"f", R"({"a": "x, y", "b": [1, 2.5], "c": {"d": true, "e": "}"}})"}}},
      {F::kLfm2, "<|tool_call_start|>[f(a='it\\'s', b=True, c=None, d=[1, 2.5]), g()]<|tool_call_end|>Done.", "Done.",
       {{"f", R"({"a": "it's", "b": true, "c": null, "d": [1, 2.5]})"}, {"g", "{}"}}},
      {F::kLfm2, "<|tool_call_start|>[f(a=]<|tool_call_end|>", "<|tool_call_start|>[f(a=]<|tool_call_end|>", {}},
      {F::kNemotron, "<TOOLCALL>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]</TOOLCALL>", "", {{"f", R"({"a": 1})"}}},
      {F::kCommandR,
       "<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"f\", "
       "\"parameters\": {\"a\": 1}}\n]<|END_ACTION|>",
       "", {{"f", R"({"a": 1})"}}, "plan"},
      {F::kCommandR, "<|START_RESPONSE|>Hi there<|END_RESPONSE|>", "Hi there", {}},
      {F::kApriel, "Sure.\n<tool_calls>[{\"name\": \"f\", \"arguments\": {}}]</tool_calls>", "Sure.", {{"f", "{}"}}},
      {F::kMiniMaxM1,
       "<tool_calls>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
       "{\"name\": \"g\", \"arguments\": {}}\n</tool_calls>",
       "", {{"f", R"({"a": 1})"}, {"g", "{}"}}},
      {F::kFirefunction, "I used functools.partial here.", "I used functools.partial here.", {}},
      {F::kFirefunction, " functools[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", "", {{"f", R"({"a": 1})"}}},
      {F::kGigaChat3,
       "Answer<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
       "Answer", {{"f", R"({"a": 1})"}}},
      {F::kGigaChat31, "<|function_call|>{\"name\": \"f\", \"arguments\": {}}", "", {{"f", "{}"}}},
      {F::kApertus, "<|tools_prefix|>[{\"f\": {\"a\": 1}}, {\"g\": {}}]<|tools_suffix|>", "",
       {{"f", R"({"a": 1})"}, {"g", "{}"}}},
      {F::kAtem, " to=self<|message|>thinking<|eom|><|start|>assistant to=user<|message|>Hello!<|eot|>", "Hello!", {},
       "thinking"},
      {F::kAtem, "Hello there", "Hello there", {}},
      {F::kHy3,
       "<tool_calls:opensource>\n<tool_call:opensource>f<tool_sep:opensource>\n"
       "<arg_key:opensource>a</arg_key:opensource>"
       "\n<arg_value:opensource>x</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
       "", {{"f", R"({"a": "x"})"}}},
      // Arguments that do not decode: the reply stays text.
      {F::kGemma4, "<|tool_call>call:f{a:}<tool_call|>", "<|tool_call>call:f{a:}<tool_call|>", {}},
  };
  ToolCallParseOptions o;
  o.tools = tools;
  for (const Reply& r : replies) {
    SCOPED_TRACE(std::string(ToolCallFormatName(r.format)) + ": " + r.text);
    const ParsedOutput whole = ParseToolCalls(r.format, r.text, o);
    EXPECT_EQ(whole.content, r.content);
    EXPECT_EQ(whole.reasoning, r.reasoning);
    ASSERT_EQ(whole.tool_calls.size(), r.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      EXPECT_EQ(whole.tool_calls[i].name, r.calls[i].first);
      EXPECT_EQ(Json::parse(whole.tool_calls[i].arguments), Json::parse(r.calls[i].second));
    }
    // ParseToolCalls' fallback to text (undecodable arguments) is not the stream's.
    if (Streamed(r.format, r.text, "", o).tool_calls.size() != whole.tool_calls.size()) continue;
    for (size_t cut = 0; cut <= r.text.size() && !HasFailure(); ++cut) {
      SCOPED_TRACE("split at " + std::to_string(cut));
      const ParsedOutput s = Streamed(r.format, std::string_view(r.text).substr(0, cut),
                                      std::string_view(r.text).substr(cut), o);
      EXPECT_EQ(s.content, whole.content);
      EXPECT_EQ(s.reasoning, whole.reasoning);
      ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size());
      for (size_t i = 0; i < s.tool_calls.size(); ++i) {
        EXPECT_EQ(s.tool_calls[i].name, whole.tool_calls[i].name);
        EXPECT_EQ(s.tool_calls[i].arguments, whole.tool_calls[i].arguments);
      }
    }
  }
}

// Replies that end inside a call (max_tokens), as tool_calls.h says: before
// the name the call is content as written; after it, a call whose arguments
// are JSON (decoded syntaxes: the parameters complete before the cut; JSON
// syntaxes: the text as written, without a cut-off end marker). The stream,
// split anywhere, gives the same as the whole text.
TEST(ToolCallFormats, RepliesCutInsideACall) {
  const std::string ns = "]<]minimax[>[";
  const std::string hy3_call =
      "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n"
      "<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Oslo</arg_value:opensource>\n"
      "<arg_key:opensource>unit</arg_key:opensource>\n<arg_value:opensource>c</arg_value:opensource>\n"
      "</tool_call:opensource>";
  const std::vector<Reply> replies = {
      // The forced Hy3 call of the bug report, cut in its last closing tag.
      {F::kHy3, hy3_call.substr(0, hy3_call.find("</arg_value:opensource>\n</tool_call")) + "</arg_value:opensour", "",
       {{"get_weather", R"({"city": "Oslo"})"}}},
      {F::kHy3, hy3_call.substr(0, hy3_call.find("unit")) + "un", "", {{"get_weather", R"({"city": "Oslo"})"}}},
      {F::kHy3, hy3_call + "\n</tool_calls:open", "", {{"get_weather", R"({"city": "Oslo", "unit": "c"})"}}},
      {F::kHy3, "Sure.\n" + hy3_call.substr(0, 55), "Sure.\n" + hy3_call.substr(0, 55), {}},
      {F::kHy3, "Sure.\n<tool_calls:opensource>\n", "Sure.\n<tool_calls:opensource>\n", {}},
      {F::kGlm45, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Os", "", {{"get_weather", "{}"}}},
      {F::kGlm45, "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>\n<tool_call>g",
       "<tool_call>g",
       {{"f", R"({"a": 1})"}}},
      {F::kKimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
       "{\"city\": \"Oslo\"}<|tool_call_e",
       "", {{"get_weather", R"({"city": "Oslo"})"}}},
      {F::kKimiK2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_beg",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_beg", {}},
      {F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</para", "",
       {{"get_weather", R"({"city": "Oslo"})"}}},
      {F::kQwen3Coder, "<tool_call>\n<function=get_wea", "<tool_call>\n<function=get_wea", {}},
      {F::kSeedOss, "<seed:tool_call>\n<function=f>\n<parameter=a>1</parameter>\n<parameter=b>x y", "",
       {{"f", R"({"a": 1})"}}},
      {F::kDeepSeekV32,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">1"
       "</｜DSML｜parameter>\n<｜DSML｜param",
       "", {{"f", R"({"a": "1"})"}}},
      {F::kGemma4, "<|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:[1,2", "", {{"f", R"({"a": "x, y"})"}}},
      {F::kGemma4, "<|tool_call>call:f{a:<|\"|>x<|\"|>,b:3}<tool_c", "", {{"f", R"({"a": "x", "b": 3})"}}},
      {F::kMiniMaxM3,
       ns + "<tool_call>\n" + ns + "<invoke name=\"f\">" + ns + "<n>5" + ns + "</n>" + ns + "<tags>" + ns + "<item>a" +
           ns + "</item>",
       "", {{"f", R"({"n": 5})"}}},
      {F::kLfm2, "<|tool_call_start|>[f(a=1), g(b=", "<|tool_call_start|>[f(a=1), g(b=", {}},
      {F::kHermes, "<tool_call>\n{\"name\": \"get_wea", "<tool_call>\n{\"name\": \"get_wea", {}},
      {F::kMistral, "[TOOL_CALLS]get_wea", "[TOOL_CALLS]get_wea", {}},
      {F::kMistral, "[TOOL_CALLS]f[ARGS]{\"x\": 1}[TOOL_CALLS]g[AR", "[TOOL_CALLS]g[AR", {{"f", R"({"x": 1})"}}},
      {F::kDeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea", {}},
      {F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_ca", "", {{"f", R"({"x": 1})"}}},
      {F::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"x\": 1}<｜tool▁call▁en", "",
       {{"f", R"({"x": 1})"}}},
  };
  ToolCallParseOptions o;
  o.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}])");
  for (const Reply& r : replies) {
    SCOPED_TRACE(std::string(ToolCallFormatName(r.format)) + ": " + r.text);
    const ParsedOutput whole = ParseToolCalls(r.format, r.text, o);
    EXPECT_EQ(whole.content, r.content);
    ASSERT_EQ(whole.tool_calls.size(), r.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      EXPECT_EQ(whole.tool_calls[i].name, r.calls[i].first);
      EXPECT_EQ(Json::parse(whole.tool_calls[i].arguments), Json::parse(r.calls[i].second));
    }
    for (size_t cut = 0; cut <= r.text.size() && !HasFailure(); ++cut) {
      SCOPED_TRACE("split at " + std::to_string(cut));
      const ParsedOutput s = Streamed(r.format, std::string_view(r.text).substr(0, cut),
                                      std::string_view(r.text).substr(cut), o);
      EXPECT_EQ(s.content, whole.content);
      ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size());
      for (size_t i = 0; i < s.tool_calls.size(); ++i) {
        EXPECT_EQ(s.tool_calls[i].arguments, whole.tool_calls[i].arguments);
      }
    }
  }
  // JSON arguments cut in the middle are sent as written (a prefix).
  const ParsedOutput cut_json =
      ParseToolCalls(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": \"a", o);
  ASSERT_EQ(cut_json.tool_calls.size(), 1u);
  EXPECT_EQ(cut_json.tool_calls[0].arguments, "{\"x\": 1, \"y\": \"a");
  // A finished tagged call that does not decode: the stream has sent its
  // name, so its arguments are the parameters before the fault (JSON); the
  // whole text falls back to content, as for malformed JSON.
  const std::string bad = "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>b</arg_key>2</tool_call>";
  EXPECT_EQ(Streamed(F::kGlm45, bad, "", o).tool_calls.at(0).arguments, R"({"a":1})");
  EXPECT_EQ(ParseToolCalls(F::kGlm45, bad, o).content, bad);
}

// A long argument (a file's text) streamed a few bytes at a time arrives
// whole; each buffered call and pythonic section is scanned once.
TEST(ToolCallFormats, LongBufferedArgumentsStreamInSmallPieces) {
  const std::string value(100000, 'x');
  const std::vector<std::pair<ToolCallFormat, std::string>> replies = {
      {F::kGlm45, "<tool_call>write\n<arg_key>text</arg_key>\n<arg_value>" + value + "</arg_value>\n</tool_call>"},
      {F::kLfm2, "<|tool_call_start|>[write(text='" + value + "')]<|tool_call_end|>"},
      {F::kKimiK2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0<|tool_call_argument_begin|>"
                   "{\"text\": \"" + value + "\"}<|tool_call_end|><|tool_calls_section_end|>"},
  };
  for (const auto& [format, text] : replies) {
    SCOPED_TRACE(ToolCallFormatName(format));
    ToolCallStreamParser p(format);
    for (size_t i = 0; i < text.size(); i += 3) (void)p.Feed(std::string_view(text).substr(i, 3));
    (void)p.Finish();
    ASSERT_EQ(p.result().tool_calls.size(), 1u);
    EXPECT_EQ(Json::parse(p.result().tool_calls[0].arguments), Json({{"text", value}}));
    EXPECT_EQ(p.result().content, "");
  }
}

TEST(ToolCallFormats, SolarIdsAreTenLowercaseAlphanumerics) {
  for (int i = 0; i < 20; ++i) {
    const std::string id = MakeToolCallId(F::kSolarOpen);
    ASSERT_EQ(id.size(), 10u);
    EXPECT_EQ(id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789"), std::string::npos) << id;
  }
}

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
  // Cut or malformed: the pairs that a ',' or '}' ended.
  using internal::GemmaArgumentsPrefix;
  EXPECT_EQ(Json(GemmaArgumentsPrefix("q:<|\"|>a,b<|\"|>,n:2")), Json::parse(R"({"q": "a,b"})"));
  EXPECT_EQ(Json(GemmaArgumentsPrefix("q:1,n:2}<tool_c")), Json::parse(R"({"q": 1, "n": 2})"));
  EXPECT_EQ(Json(GemmaArgumentsPrefix("q:[1,2")), Json::object());
  EXPECT_EQ(Json(GemmaArgumentsPrefix("q:1,n:}")), Json::parse(R"({"q": 1})"));
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
  // Cut or malformed: the top-level elements closed before the fault.
  EXPECT_EQ(Json(internal::MiniMaxXmlPrefix(ns + "<e>" + ns + "</e>" + ns + "<l>" + ns + "<item>1" + ns + "</item>" + ns +
                                                "<item>2",
                                            ns, schema)),
            Json::parse(R"({"e": []})"));
  EXPECT_EQ(Json(internal::MiniMaxXmlPrefix(ns + "<l>" + ns + "<item>1" + ns + "</item>" + ns + "</l>" + ns + "</inv",
                                            ns, schema)),
            Json::parse(R"({"l": [1]})"));
}

}  // namespace tool_call_formats_test
}  // namespace kvs::grammar
