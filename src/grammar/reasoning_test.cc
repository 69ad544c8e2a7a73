// Reasoning sections (reasoning.h): the format and the start state of real
// chat templates from ../shared/templates (rendered with thinking on and
// off), the stream parser fed whole, byte by byte and split at every byte,
// and the grammar wrapper (the end tag never inside the free reasoning, the
// constraint after it, random walks whose content parses as JSON).
#include "grammar/reasoning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "base/test_util.h"
#include "grammar/json_schema.h"
#include "grammar/test_util.h"
#include "grammar/tool_calls.h"
#include "template/chat_template.h"

namespace kvs::grammar {
namespace reasoning_test {

using Json = nlohmann::ordered_json;
using testing::Matches;

ReasoningFormat Format(const char* name) {
  auto f = ReasoningFormatByName(name);
  EXPECT_TRUE(f.ok()) << name;
  return f.ok() ? *f : ReasoningFormat{};
}

// --- templates ---------------------------------------------------------------

struct TemplateCase {
  std::string file;
  std::string format;       // "" : none
  Json on, off;             // template variables that turn thinking on / off (null: not renderable)
  ReasoningStart start_on;  // where a reply starts with `on`
  ReasoningStart start_off;
};

const std::vector<TemplateCase>& TemplateCases() {
  using S = ReasoningStart;
  const Json et = {{"enable_thinking", true}}, ef = {{"enable_thinking", false}}, none = Json::object();
  static const std::vector<TemplateCase> cases = {
      {"Qwen3.5-4B.jinja", "think", none, ef, S::kInside, S::kContent},
      {"Qwen-QwQ-32B.jinja", "think", et, none, S::kInside, S::kContent},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "think", none, nullptr, S::kInside, S::kInside},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "think", et, none, S::kInside, S::kContent},
      {"deepseek-ai-DeepSeek-V3.2.jinja", "think", et, none, S::kInside, S::kContent},
      {"deepseek-ai-DeepSeek-V4.jinja", "think", et, none, S::kInside, S::kContent},
      {"Kimi-K2-Thinking.jinja", "think", none, nullptr, S::kMaybe, S::kMaybe},
      {"GLM-4.6.jinja", "think", none, ef, S::kMaybe, S::kContent},
      {"StepFun3.5-Flash.jinja", "think", none, nullptr, S::kInside, S::kInside},
      {"openbmb-MiniCPM5-1B.jinja", "think", et, ef, S::kInside, S::kContent},
      // Nemotron turns thinking off with "/no_think" in the system prompt, not a variable.
      {"NVIDIA-Nemotron-Nano-v2.jinja", "think", none, nullptr, S::kInside, S::kInside},
      {"poolside-Laguna-XS.2.jinja", "think", et, none, S::kInside, S::kContent},
      {"ByteDance-Seed-OSS.jinja", "seed_oss", none, {{"thinking_budget", 0}}, S::kMaybe, S::kContent},
      {"MiniMax-M3.jinja", "minimax", {{"thinking_mode", "enabled"}}, {{"thinking_mode", "disabled"}}, S::kInside,
       S::kContent},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral", none, nullptr, S::kMaybe, S::kMaybe},
      {"Cohere2MoE.jinja", "command", none, {{"reasoning_effort", "none"}}, S::kInside, S::kContent},
      {"google-gemma-4-31B-it.jinja", "gemma4", et, none, S::kMaybe, S::kContent},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "", none, nullptr, S::kContent, S::kContent},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "", none, nullptr, S::kContent, S::kContent},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "", none, nullptr, S::kContent, S::kContent},
      {"Qwen3-Coder.jinja", "", none, nullptr, S::kContent, S::kContent},
  };
  return cases;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void PrintTo(const TemplateCase& c, std::ostream* os) { *os << c.file; }

class TemplateTest : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(TemplateTest, FormatAndStartFromTheRenderedPrompt) {
  const TemplateCase& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file);
  const std::string source = ReadFile(path);
  const ReasoningFormat f = DetectReasoningFormat(source);
  EXPECT_EQ(f.name, c.format);
  auto tmpl = tmpl::ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  for (int on = 1; on >= 0; --on) {
    const Json& vars = on ? c.on : c.off;
    if (vars.is_null()) continue;
    tmpl::ChatRequest req;
    req.messages = Json::parse(R"([{"role": "user", "content": "What is 2+2?"}])");
    req.add_generation_prompt = true;
    req.bos_token = "<s>";
    req.eos_token = "</s>";
    req.extra = vars;
    req.now_unix = 1764680000;
    auto prompt = tmpl->Render(req);
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    const std::string tail = prompt->substr(prompt->size() - std::min<size_t>(prompt->size(), 60));
    EXPECT_EQ(std::string(ReasoningStartName(ReasoningStartOf(f, *prompt))),
              ReasoningStartName(on ? c.start_on : c.start_off))
        << (on ? "on: " : "off: ") << vars.dump() << " prompt ends " << Json(tail).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(SharedTemplates, TemplateTest, ::testing::ValuesIn(TemplateCases()),
                         [](const ::testing::TestParamInfo<TemplateCase>& i) {
                           std::string n = i.param.file.substr(0, i.param.file.find(".jinja"));
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(ReasoningFormatTest, NamesAndAliases) {
  for (const std::string& name : ReasoningFormatNames()) {
    auto f = ReasoningFormatByName(name);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->name, name);
    EXPECT_FALSE(f->start.empty());
    EXPECT_FALSE(f->end.empty());
  }
  EXPECT_EQ(Format("deepseek_r1").name, "think");
  EXPECT_EQ(Format("qwen3").start, "<think>");
  EXPECT_EQ(Format("gpt_oss").name, "harmony");
  EXPECT_TRUE(Format("gpt_oss").harmony);
  auto none = ReasoningFormatByName("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
  EXPECT_FALSE(ReasoningFormatByName("thinkk").ok());
  EXPECT_EQ(ReasoningMarkers(Format("gemma4")), (std::vector<std::string>{"<|channel>", "<channel|>"}));
}

TEST(ReasoningStartTest, FromPromptEnds) {
  const ReasoningFormat f = Format("think");
  EXPECT_EQ(ReasoningStartOf(f, "<|im_start|>assistant\n<think>\n"), ReasoningStart::kInside);
  EXPECT_EQ(ReasoningStartOf(f, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), ReasoningStart::kContent);
  EXPECT_EQ(ReasoningStartOf(f, "<|im_start|>assistant\n"), ReasoningStart::kMaybe);
  // An earlier turn's closed section does not count.
  EXPECT_EQ(ReasoningStartOf(f, "<think>a</think>b<|im_end|><|im_start|>assistant\n"), ReasoningStart::kMaybe);
  EXPECT_EQ(ReasoningStartOf(ReasoningFormat{}, "<think>\n"), ReasoningStart::kContent);
}

// --- stream parser -------------------------------------------------------------

struct ParseCase {
  std::string format;
  ReasoningStart start;
  std::string text;
  std::string reasoning;
  std::string content;
};

const std::vector<ParseCase>& ParseCases() {
  using S = ReasoningStart;
  static const std::vector<ParseCase> cases = {
      {"think", S::kInside, "Let me see.\n</think>\n\nThe answer is 4.", "Let me see.", "The answer is 4."},
      {"think", S::kMaybe, "\n<think>\nhmm, 2+2\n</think>\n\nHi", "hmm, 2+2", "Hi"},
      {"think", S::kMaybe, "Hello <think> there</think>", "", "Hello <think> there</think>"},
      {"think", S::kMaybe, "  \n", "", "  \n"},
      {"think", S::kMaybe, "<think>\n\n</think>\n\nAnswer", "", "Answer"},
      {"think", S::kMaybe, "<thin", "", "<thin"},
      {"think", S::kInside, "I am thinking </thi", "I am thinking </thi", ""},
      {"think", S::kInside, "never closes \n\n", "never closes", ""},
      {"think", S::kContent, "<think>x</think>y", "", "<think>x</think>y"},
      {"think", S::kInside, "a <thin b </think2 c < /think></think>d", "a <thin b </think2 c < /think>", "d"},
      {"think", S::kInside, "x<<</think>y", "x<<", "y"},
      {"think", S::kInside, "caf\xC3\xA9 \xE2\x98\x95</think>r\xC3\xA9sum\xC3\xA9", "caf\xC3\xA9 \xE2\x98\x95",
       "r\xC3\xA9sum\xC3\xA9"},
      {"think", S::kInside, "r</think>c</think>d", "r", "c</think>d"},
      {"think", S::kInside, " line 1\n\n line 2 \n</think>", "line 1\n\n line 2", ""},
      {"mistral", S::kMaybe, "[THINK]plan it[/THINK]answer", "plan it", "answer"},
      {"command", S::kInside, "plan<|END_THINKING|><|START_RESPONSE|>ok", "plan", "<|START_RESPONSE|>ok"},
      {"gemma4", S::kMaybe, "<|channel>thought\nplan<channel|>answer", "plan", "answer"},
      {"seed_oss", S::kMaybe, "<seed:think>a</seed:think>b", "a", "b"},
      {"harmony", S::kMaybe,
       "<|channel|>analysis<|message|>think a<|end|><|start|>assistant<|channel|>analysis<|message|>think "
       "b<|end|><|start|>assistant<|channel|>final<|message|>Hello",
       "think a\nthink b", "<|start|>assistant<|channel|>final<|message|>Hello"},
      {"harmony", S::kMaybe, "<|channel|>final<|message|>Hi", "", "<|channel|>final<|message|>Hi"},
  };
  return cases;
}

ReasoningDelta FeedPieces(const ParseCase& c, const std::vector<std::string_view>& pieces) {
  ReasoningStreamParser p(Format(c.format.c_str()), c.start);
  ReasoningDelta all;
  for (std::string_view piece : pieces) {
    ReasoningDelta d = p.Feed(piece);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ReasoningDelta d = p.Finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

TEST(ReasoningParserTest, WholeAndSplitAtEveryByte) {
  for (const ParseCase& c : ParseCases()) {
    SCOPED_TRACE(c.format + " " + ReasoningStartName(c.start) + " " + Json(c.text).dump());
    const ReasoningDelta whole = ParseReasoning(Format(c.format.c_str()), c.start, c.text);
    EXPECT_EQ(whole.reasoning, c.reasoning);
    EXPECT_EQ(whole.content, c.content);
    const std::string_view t = c.text;
    for (size_t i = 0; i <= t.size(); ++i) {
      const ReasoningDelta d = FeedPieces(c, {t.substr(0, i), t.substr(i)});
      ASSERT_EQ(d.reasoning, c.reasoning) << "split at " << i;
      ASSERT_EQ(d.content, c.content) << "split at " << i;
      for (size_t j = i; j <= t.size(); j += 3) {  // three pieces, every first cut
        const ReasoningDelta d3 = FeedPieces(c, {t.substr(0, i), t.substr(i, j - i), t.substr(j)});
        ASSERT_EQ(d3.reasoning, c.reasoning) << "split at " << i << ", " << j;
        ASSERT_EQ(d3.content, c.content) << "split at " << i << ", " << j;
      }
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < t.size(); ++i) bytes.push_back(t.substr(i, 1));
    const ReasoningDelta b = FeedPieces(c, bytes);
    EXPECT_EQ(b.reasoning, c.reasoning) << "byte by byte";
    EXPECT_EQ(b.content, c.content) << "byte by byte";
  }
}

TEST(ReasoningParserTest, ReleasesTextAsSoonAsItIsDecided) {
  ReasoningStreamParser p(Format("think"), ReasoningStart::kInside);
  ReasoningDelta d = p.Feed("\nfirst thought </th");
  EXPECT_EQ(d.reasoning, "first thought");  // the space and the partial tag wait
  EXPECT_TRUE(p.in_reasoning());
  d = p.Feed("ink>\n\nThe");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "The");
  EXPECT_FALSE(p.in_reasoning());
  d = p.Feed(" end");
  EXPECT_EQ(d.content, " end");
  EXPECT_TRUE(p.saw_reasoning());

  ReasoningStreamParser maybe(Format("think"), ReasoningStart::kMaybe);
  EXPECT_EQ(maybe.Feed("\n<thi").content, "");  // may still open a section
  EXPECT_FALSE(maybe.saw_reasoning());
  d = maybe.Feed("nk>ok");
  EXPECT_EQ(d.reasoning, "ok");
  EXPECT_TRUE(maybe.in_reasoning());
  EXPECT_TRUE(maybe.saw_reasoning());
}

TEST(ReasoningParserTest, HarmonyContentGoesToTheToolCallParser) {
  const std::string out =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>";
  const ReasoningDelta d = ParseReasoning(Format("harmony"), ReasoningStart::kMaybe, out);
  EXPECT_EQ(d.reasoning, "Need the weather.");
  const ParsedOutput calls = ParseToolCalls(ToolCallFormat::kHarmony, d.content);
  ASSERT_EQ(calls.tool_calls.size(), 1u);
  EXPECT_EQ(calls.tool_calls[0].name, "get_weather");
  EXPECT_EQ(calls.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(calls.reasoning, "");
  const ReasoningDelta f = ParseReasoning(
      Format("harmony"), ReasoningStart::kMaybe,
      "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Hello there");
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kHarmony, f.content).content, "Hello there");
}

TEST(ReasoningParserTest, ToolCallsAreParsedFromTheContentOnly) {
  // A call the model drafts while thinking is reasoning, not a call.
  const std::string out =
      "I could write <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> but let me check.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const ReasoningDelta d = ParseReasoning(Format("think"), ReasoningStart::kInside, out);
  EXPECT_NE(d.reasoning.find("<tool_call>"), std::string::npos);
  const ParsedOutput calls = ParseToolCalls(ToolCallFormat::kHermes, d.content);
  ASSERT_EQ(calls.tool_calls.size(), 1u);
  EXPECT_EQ(calls.tool_calls[0].name, "get_weather");
  EXPECT_EQ(calls.content, "");
}

// --- grammar -------------------------------------------------------------------

std::string Wrapped(const std::string& gbnf, const char* format, ReasoningStart start, bool tool_call = false) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  auto w = WithReasoningSection(*g, Format(format), start, tool_call);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? w->ToGbnf() : std::string();
}

TEST(ReasoningGrammarTest, TheConstraintStartsAfterTheEndTag) {
  const std::string inside = Wrapped(R"(root ::= "{" [a-z]* "}")", "think", ReasoningStart::kInside);
  EXPECT_TRUE(Matches(inside, "</think>{}"));
  EXPECT_TRUE(Matches(inside, "Free text: {not json} <b>\n</think>\n\n{ab}"));
  EXPECT_FALSE(Matches(inside, "{ab}"));                       // the section must close first
  EXPECT_FALSE(Matches(inside, "a</think>b</think>{ab}"));     // the first end tag ends it
  EXPECT_FALSE(Matches(inside, "a</think>{ab} trailing"));

  const std::string maybe = Wrapped(R"(root ::= "{" [a-z]* "}")", "think", ReasoningStart::kMaybe);
  EXPECT_TRUE(Matches(maybe, "{ab}"));
  EXPECT_TRUE(Matches(maybe, "<think>plan</think>{ab}"));
  EXPECT_TRUE(Matches(maybe, "\n<think>\nplan\n</think>\n\n{ab}"));
  EXPECT_FALSE(Matches(maybe, "plan</think>{ab}"));

  const std::string content = Wrapped(R"(root ::= "{" [a-z]* "}")", "think", ReasoningStart::kContent);
  EXPECT_TRUE(Matches(content, "{ab}"));
  EXPECT_FALSE(Matches(content, "</think>{ab}"));
}

TEST(ReasoningGrammarTest, ARecursiveRootStaysTheContent) {
  const std::string g = Wrapped(R"g(root ::= "(" root? ")")g", "think", ReasoningStart::kInside);
  EXPECT_TRUE(Matches(g, "x</think>(())"));
  EXPECT_FALSE(Matches(g, "x</think>(</think>())"));
}

TEST(ReasoningGrammarTest, BodyExcludesExactlyTheEndTag) {
  // Random text over the tag's letters: accepted before the tag exactly when
  // it does not contain the tag (the reasoning cannot run past it).
  const std::string g = Wrapped(R"(root ::= "ok")", "think", ReasoningStart::kInside);
  const std::vector<std::string> alphabet = {"<", "/", "t", "h", "i", "n", "k", ">", "a", "\xC3\xA9", "</think>"};
  std::mt19937_64 rng(7);
  int with_tag = 0;
  for (int i = 0; i < 400; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 12);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % (i % 2 ? alphabet.size() : alphabet.size() - 1)];
    const bool has = s.find("</think>") != std::string::npos;
    with_tag += has;
    ASSERT_EQ(Matches(g, s + "</think>ok"), !has) << Json(s).dump();
  }
  EXPECT_GT(with_tag, 20);
  for (const char* end : {"[/THINK]", "<|END_THINKING|>", "<channel|>", "</seed:think>"}) {
    const std::string s = std::string("x") + end[0] + end[0] + std::string(end).substr(0, 3);
    const char* name = end[0] == '[' ? "mistral" : end[1] == '|' ? "command" : end[1] == 'c' ? "gemma4" : "seed_oss";
    const std::string w = Wrapped(R"(root ::= "ok")", name, ReasoningStart::kInside);
    EXPECT_TRUE(Matches(w, s + end + "ok")) << name;
    EXPECT_FALSE(Matches(w, s + end + "x" + end + "ok")) << name;
  }
}

TEST(ReasoningGrammarTest, Harmony) {
  const std::string plain = Wrapped(R"(root ::= "{}")", "harmony", ReasoningStart::kMaybe);
  EXPECT_TRUE(Matches(plain, "<|channel|>final<|message|>{}"));
  EXPECT_TRUE(Matches(plain,
                      "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>{}"));
  EXPECT_FALSE(Matches(plain, "{}"));
  const std::string call = Wrapped(R"(root ::= "<|channel|>commentary to=functions.f<|message|>{}<|call|>")",
                                   "harmony", ReasoningStart::kMaybe, /*tool_call=*/true);
  EXPECT_TRUE(Matches(call, "<|channel|>commentary to=functions.f<|message|>{}<|call|>"));
  EXPECT_TRUE(Matches(call, "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary "
                            "to=functions.f<|message|>{}<|call|>"));
}

TEST(ReasoningGrammarTest, RandomWalksParseBackToValidJson) {
  auto schema = JsonSchemaToGrammar(Json::parse(
      R"({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})"));
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  for (ReasoningStart start : {ReasoningStart::kInside, ReasoningStart::kMaybe}) {
    auto g = WithReasoningSection(*schema, Format("think"), start, false);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto compiled = testing::CompileOrDie(g->ToGbnf(), testing::ByteVocabulary());
    std::mt19937_64 rng(11);
    int reasoned = 0;
    for (int i = 0; i < 30; ++i) {
      const testing::WalkResult w = testing::RandomWalk(compiled, rng, 40);
      ASSERT_TRUE(w.finished);
      const ReasoningDelta d = ParseReasoning(Format("think"), start, w.text);
      reasoned += !d.reasoning.empty();
      const Json j = Json::parse(d.content, nullptr, false);
      ASSERT_TRUE(j.is_object()) << Json(w.text).dump();
      EXPECT_TRUE(j.contains("answer")) << d.content;
    }
    EXPECT_GT(reasoned, 0);
  }
}

TEST(ReasoningGrammarTest, AForcedToolCallAfterTheReasoning) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  auto call = ToolCallGrammar(ToolCallFormat::kHermes, tools, ToolChoice{}, /*parallel_tool_calls=*/false);
  ASSERT_TRUE(call.ok()) << call.status().ToString();
  auto g = WithReasoningSection(*call, Format("think"), ReasoningStart::kInside, /*tool_call=*/true);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto compiled = testing::CompileOrDie(g->ToGbnf(), testing::ByteVocabulary());
  std::mt19937_64 rng(5);
  for (int i = 0; i < 10; ++i) {
    const testing::WalkResult w = testing::RandomWalk(compiled, rng, 30);
    ASSERT_TRUE(w.finished);
    const ReasoningDelta d = ParseReasoning(Format("think"), ReasoningStart::kInside, w.text);
    const ParsedOutput calls = ParseToolCalls(ToolCallFormat::kHermes, d.content);
    ASSERT_EQ(calls.tool_calls.size(), 1u) << Json(w.text).dump();
    EXPECT_EQ(calls.tool_calls[0].name, "get_weather");
    EXPECT_TRUE(Json::parse(calls.tool_calls[0].arguments).contains("city"));
  }
}

}  // namespace reasoning_test
}  // namespace kvs::grammar
