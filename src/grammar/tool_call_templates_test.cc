// The chat templates of ../shared/templates are the oracle of their own
// tool-call syntax. For every template, DetectToolCallFormat gives the
// format of the table below. For every template that renders tool calls,
// a conversation (user, assistant with calls, tool results) is rendered
// through the project's Jinja engine, the assistant's turn is cut out (the
// text the model would generate), and:
//   - ParseToolCalls gives back exactly the calls (names, JSON-equal
//     arguments with nested objects, unicode and quotes; one call, and two
//     where the template renders several) and the content;
//   - the stream parser, fed the text split at every position (and byte
//     by byte), sends deltas that add up to the same calls and content;
//   - the forced-call grammar (tool_choice "required") accepts the text;
//   - with the format's markers as control tokens of a vocabulary, the
//     text generated token by token reaches the parser whole when the
//     server gives back the text of the dropped markers
//     (ToolCallMarkerTokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/test_util.h"
#include "grammar/shared_vocab.h"
#include "grammar/test_util.h"
#include "grammar/tool_call_syntax.h"
#include "grammar/tool_calls.h"
#include "template/chat_template.h"

namespace kvs::grammar {
namespace tool_call_templates_test {

using Json = nlohmann::ordered_json;
using F = ToolCallFormat;

// Every template in ../shared/templates and the format it is recognised as.
// "none": no tool support (Phi-3.5 mini, RWKV World: tools never reach the
// prompt).
const std::vector<std::pair<std::string, ToolCallFormat>>& DetectionTable() {
  static const std::vector<std::pair<std::string, ToolCallFormat>> table = {
      {"Apertus-8B-Instruct", F::kApertus},
      {"Apriel-1.6-15b-Thinker-fixed", F::kApriel},
      {"ByteDance-Seed-OSS", F::kSeedOss},
      {"Cohere2MoE", F::kCommandR},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::kCommandR},
      {"GLM-4.6", F::kGlm45},
      {"GigaChat3-10B-A1.8B", F::kGigaChat3},
      {"GigaChat3.1-10B-A1.8B", F::kGigaChat31},
      {"Kimi-K2-Instruct", F::kKimiK2},
      {"Kimi-K2-Thinking", F::kKimiK2},
      {"LFM2-8B-A1B", F::kLfm2},
      {"LFM2.5-8B-A1B", F::kLfm2},
      {"MiMo-VL", F::kHermes},
      {"MiniMax-M1", F::kMiniMaxM1},
      {"MiniMax-M3", F::kMiniMaxM3},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::kMistral},
      {"NVIDIA-Nemotron-Nano-v2", F::kNemotron},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::kHermes},
      {"Qwen-QwQ-32B", F::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::kHermes},
      {"Qwen3-Coder", F::kQwen3Coder},
      {"Qwen3.5-4B", F::kQwen3Coder},
      {"StepFun3.5-Flash", F::kQwen3Coder},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::kDeepSeekV3},
      {"deepseek-ai-DeepSeek-V3.1", F::kDeepSeekV31},
      {"deepseek-ai-DeepSeek-V3.2", F::kDeepSeekV32},
      {"deepseek-ai-DeepSeek-V4", F::kDeepSeekV4},
      {"fireworks-ai-llama-3-firefunction-v2", F::kFirefunction},
      {"google-gemma-4-31B-it-interleaved", F::kGemma4},
      {"google-gemma-4-31B-it", F::kGemma4},
      {"ibm-granite-granite-4.0", F::kHermes},
      {"ibm-granite-granite-4.1", F::kHermes},
      {"llama-cpp-rwkv-world", F::kNone},
      {"meetkai-functionary-medium-v3.1", F::kFunctionary},
      {"meta-llama-Llama-3.1-8B-Instruct", F::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct", F::kLlama3},
      {"microsoft-Phi-3.5-mini-instruct", F::kNone},
      {"mistralai-Ministral-3-14B-Reasoning-2512", F::kMistral},
      {"moonshotai-Kimi-K2", F::kKimiK2},
      {"muse-glimmer", F::kAtem},
      {"openbmb-MiniCPM5-1B", F::kMiniCpm5},
      {"poolside-Laguna-S-2.1", F::kGlm45},
      {"poolside-Laguna-XS.2", F::kGlm45},
      {"tencent-Hy3", F::kHy3},
      {"unsloth-mistral-Devstral-Small-2507", F::kMistral},
      {"upstage-Solar-Open-100B", F::kSolarOpen},
  };
  return table;
}

// How to render a template and cut the assistant's turn out of it.
struct Case {
  std::string file;
  ToolCallFormat format;
  std::vector<std::string> ends;  // the turn ends at the first of these
  std::string think_end = "</think>";  // reasoning before it is not the tool parser's
  bool parallel = true;                // the template renders several calls
  std::string cut_after;               // the turn ends right after this (Apertus)
  std::string id_prefix = "call_";     // ids the template is given ("" for Solar's 10 characters)
  Json extra = Json::object();         // template variables
  std::string bos = "";
  bool null_content = true;            // no content is null (LFM2.5 needs "")
};

Case C(std::string file, ToolCallFormat format, std::vector<std::string> ends, std::string think_end = "</think>",
       bool parallel = true, std::string cut_after = "") {
  Case c;
  c.file = std::move(file);
  c.format = format;
  c.ends = std::move(ends);
  c.think_end = std::move(think_end);
  c.parallel = parallel;
  c.cut_after = std::move(cut_after);
  return c;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c = {
        C("Apertus-8B-Instruct", F::kApertus, {"<|assistant_end|>"}, "", true, "<|tools_suffix|>"),
        C("Apriel-1.6-15b-Thinker-fixed", F::kApriel, {"\n<|end|>"}),
        C("ByteDance-Seed-OSS", F::kSeedOss, {"<seed:eos>"}, "</seed:think>"),
        C("Cohere2MoE", F::kCommandR, {"<|END_OF_TURN_TOKEN|>"}, "<|END_THINKING|>"),
        C("CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::kCommandR, {"<|END_OF_TURN_TOKEN|>"}, "<|END_THINKING|>"),
        C("GLM-4.6", F::kGlm45, {"<|observation|>", "<|user|>"}),
        C("GigaChat3-10B-A1.8B", F::kGigaChat3, {"<|message_sep|>\n\nfunction result"}, "", false),
        C("GigaChat3.1-10B-A1.8B", F::kGigaChat31, {"<|message_sep|>"}, "", false),
        C("Kimi-K2-Instruct", F::kKimiK2, {"<|im_end|>"}),
        C("Kimi-K2-Thinking", F::kKimiK2, {"<|im_end|>"}),
        C("LFM2.5-8B-A1B", F::kLfm2, {"<|im_end|>"}),
        C("MiniMax-M1", F::kMiniMaxM1, {"<end_of_sentence>"}),
        C("MiniMax-M3", F::kMiniMaxM3, {"[e~["}, "</mm:think>"),
        C("NVIDIA-Nemotron-Nano-v2", F::kNemotron, {"\n<SPECIAL_12>"}),
        C("deepseek-ai-DeepSeek-V3.2", F::kDeepSeekV32, {"<｜end▁of▁sentence｜>"}),
        C("deepseek-ai-DeepSeek-V4", F::kDeepSeekV4, {"<｜end▁of▁sentence｜>"}),
        C("fireworks-ai-llama-3-firefunction-v2", F::kFirefunction, {"<|eot_id|>"}),
        C("google-gemma-4-31B-it", F::kGemma4, {"<|tool_response>", "<turn|>"}),
        C("google-gemma-4-31B-it-interleaved", F::kGemma4, {"<|tool_response>", "<turn|>"}),
        C("moonshotai-Kimi-K2", F::kKimiK2, {"<|im_end|>"}),
        C("muse-glimmer", F::kAtem, {"<|eot|>"}),
        C("openbmb-MiniCPM5-1B", F::kMiniCpm5, {"<|im_end|>"}),
        C("poolside-Laguna-S-2.1", F::kGlm45, {"</assistant>"}),
        C("poolside-Laguna-XS.2", F::kGlm45, {"</assistant>"}),
        C("tencent-Hy3", F::kHy3, {"<｜hy_eos:opensource｜>"}, "</think:opensource>"),
        C("upstage-Solar-Open-100B", F::kSolarOpen, {"<|begin|>tool"}),
        // The formats that had their own template tests before: the
        // every-split and grammar checks hold for them too.
        C("Qwen-Qwen2.5-7B-Instruct", F::kHermes, {"<|im_end|>"}),
        C("Qwen3-Coder", F::kQwen3Coder, {"<|im_end|>"}),
        C("StepFun3.5-Flash", F::kQwen3Coder, {"<|im_end|>"}),
        C("ibm-granite-granite-4.1", F::kHermes, {"<|end_of_text|>"}),
        C("deepseek-ai-DeepSeek-V3.1", F::kDeepSeekV31, {"<｜end▁of▁sentence｜>"}),
        C("meetkai-functionary-medium-v3.1", F::kFunctionary, {"<|eot_id|>", "<|eom_id|>"}),
    };
    for (Case& k : c) {
      if (k.format == F::kSolarOpen) k.id_prefix = "";
      if (k.format == F::kLfm2) k.null_content = false;
      if (k.format == F::kFirefunction) k.extra = {{"functions", "[]"}, {"datetime", "2024-05-01"}};
    }
    return c;
  }();
  return cases;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
        "days": {"type": "integer", "description": "Days ahead"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_web", "description": "Search the web",
      "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "Query"},
        "filters": {"type": "object", "description": "Filters",
          "properties": {"site": {"type": "string"}, "recent": {"type": "boolean"}}}},
        "required": ["query"]}}}
  ])");
}

// The calls of the round trips: quotes, unicode, a nested object.
std::vector<std::pair<std::string, Json>> Calls(size_t n) {
  std::vector<std::pair<std::string, Json>> calls = {
      {"get_weather", Json::parse(R"({"city": "Oslo, \"Norway\"", "unit": "celsius", "days": 3})")}};
  if (n > 1) {
    calls.push_back(
        {"search_web", Json::parse(R"({"query": "tides é 😀", "filters": {"site": "x.org", "recent": true}})")});
  }
  return calls;
}

const char* kContent = "Let me check that.";

// The assistant turn with tool calls (and content first when asked), as the
// model would generate it: what the rendered conversation adds after the
// prompt, up to the end of the turn.
std::string GeneratedText(const Case& c, const tmpl::ChatTemplate& t, bool with_content, size_t n_calls) {
  const auto calls = Calls(n_calls);
  Json tool_calls = Json::array(), results = Json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string id = c.id_prefix.empty() ? "a1b2c3d4e" + std::to_string(k) : c.id_prefix + std::to_string(k);
    tool_calls.push_back(
        {{"id", id}, {"type", "function"}, {"function", {{"name", calls[k].first}, {"arguments", calls[k].second}}}});
    results.push_back(
        {{"role", "tool"}, {"tool_call_id", id}, {"name", calls[k].first}, {"content", "{\"ok\": true}"}});
  }
  tmpl::ChatRequest req;
  req.bos_token = c.bos;
  req.tools = Tools();
  req.now_unix = 1700000000;
  req.extra = c.extra;
  req.messages = Json::array({{{"role", "user"}, {"content", "Weather in Oslo, and search for tides?"}}});
  req.add_generation_prompt = true;
  auto prompt = t.Render(req);
  if (!prompt.ok()) {
    ADD_FAILURE() << prompt.status().ToString();
    return "";
  }
  req.messages.push_back(
      {{"role", "assistant"},
       {"content", with_content ? Json(kContent) : c.null_content ? Json() : Json("")},
       {"tool_calls", tool_calls}});
  for (const Json& r : results) req.messages.push_back(r);
  req.add_generation_prompt = false;
  auto full = t.Render(req);
  if (!full.ok()) {
    ADD_FAILURE() << full.status().ToString();
    return "";
  }
  // The model's text follows the longest common prefix; where the prompt
  // goes on differently (a thinking prompt's "<think>"), back to the last
  // line or tag.
  size_t lcp = 0;
  while (lcp < prompt->size() && lcp < full->size() && (*prompt)[lcp] == (*full)[lcp]) ++lcp;
  if (lcp < prompt->size()) {
    while (lcp > 0 && (*full)[lcp - 1] != '\n' && (*full)[lcp - 1] != '>') --lcp;
  }
  EXPECT_GT(lcp + 48, prompt->size()) << "prompt and history diverge early:\n" << *prompt << "\n---\n" << *full;
  std::string text = full->substr(lcp);
  size_t end = text.size();
  for (const std::string& e : c.ends) end = std::min(end, text.find(e));
  if (!c.cut_after.empty()) {
    if (const size_t p = text.find(c.cut_after); p != std::string::npos) end = std::min(end, p + c.cut_after.size());
  }
  text.resize(end);
  // Reasoning is the reasoning parser's business.
  if (!c.think_end.empty()) {
    if (const size_t p = text.find(c.think_end); p != std::string::npos) text.erase(0, p + c.think_end.size());
  }
  // The answer starts at its first character (a template may put a newline
  // after the generation prompt or the reasoning).
  text.erase(0, std::min(text.size(), text.find_first_not_of("\n")));
  return text;
}

// Feeds `pieces` to a stream parser; checks that the deltas add up to the
// parser's own result (ids and names once, first, in order) and returns
// that result.
ParsedOutput StreamPieces(ToolCallFormat f, const std::vector<std::string_view>& pieces,
                          const ToolCallParseOptions& o) {
  ToolCallStreamParser p(f, o);
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  auto take = [&](const StreamDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index >= static_cast<int32_t>(calls.size())) {
        EXPECT_EQ(t.index, static_cast<int32_t>(calls.size())) << "calls must be announced in order";
        EXPECT_TRUE(t.name.has_value() && t.id.has_value()) << "a call's first delta carries id and name";
        calls.push_back({t.id.value_or(""), t.name.value_or(""), ""});
      } else {
        EXPECT_FALSE(t.name.has_value()) << "the name is sent once";
      }
      calls[t.index].arguments += t.arguments;
    }
  };
  for (std::string_view piece : pieces) take(p.Feed(piece));
  take(p.Finish());
  const ParsedOutput& r = p.result();
  EXPECT_EQ(content, r.content);
  EXPECT_EQ(reasoning, r.reasoning);
  EXPECT_EQ(calls.size(), r.tool_calls.size());
  for (size_t i = 0; i < std::min(calls.size(), r.tool_calls.size()); ++i) {
    EXPECT_EQ(calls[i].name, r.tool_calls[i].name);
    EXPECT_EQ(calls[i].arguments, r.tool_calls[i].arguments);
  }
  return r;
}

class TemplateOracle : public ::testing::TestWithParam<Case> {};

TEST_P(TemplateOracle, RenderedCallsParseBackWholeAndAtEverySplit) {
  const Case& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file + ".jinja");
  auto tmpl = tmpl::ChatTemplate::Parse(ReadFile(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ToolCallParseOptions opts;
  opts.tools = Tools();
  int next_id = 0;
  opts.make_id = [&] { return "id" + std::to_string(next_id++); };
  for (const size_t n_calls : {size_t{1}, size_t{2}}) {
    if (n_calls > 1 && !c.parallel) continue;
    SCOPED_TRACE(std::to_string(n_calls) + " call(s)");
    const auto calls = Calls(n_calls);
    for (const bool with_content : {false, true}) {
      SCOPED_TRACE(with_content ? "with content" : "calls only");
      const std::string text = GeneratedText(c, *tmpl, with_content, n_calls);
      ASSERT_FALSE(text.empty());
      SCOPED_TRACE("generated: " + text);
      const ParsedOutput whole = ParseToolCalls(c.format, text, opts);
      ASSERT_EQ(whole.tool_calls.size(), calls.size()) << "content: " << whole.content;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(whole.tool_calls[i].name, calls[i].first);
        // Key order is the template's (Gemma sorts them): compare unordered.
        EXPECT_EQ(nlohmann::json::parse(whole.tool_calls[i].arguments, nullptr, false), nlohmann::json(calls[i].second))
            << whole.tool_calls[i].arguments;
      }
      // The template may leave content out of a turn with calls.
      const bool content_rendered = text.find(kContent) != std::string::npos;
      EXPECT_EQ(whole.content, content_rendered ? kContent : "");
      EXPECT_EQ(whole.reasoning, "");

      // Every split point, and byte by byte: the same calls and content.
      std::vector<std::vector<std::string_view>> feeds;
      const std::string_view all(text);
      for (size_t cut = 0; cut <= text.size(); ++cut) feeds.push_back({all.substr(0, cut), all.substr(cut)});
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < text.size(); ++i) bytes.push_back(all.substr(i, 1));
      feeds.push_back(bytes);
      for (size_t k = 0; k < feeds.size() && !HasFailure(); ++k) {
        SCOPED_TRACE(k < text.size() + 1 ? "split at " + std::to_string(k) : "byte by byte");
        const ParsedOutput s = StreamPieces(c.format, feeds[k], opts);
        ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size());
        for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
          EXPECT_EQ(s.tool_calls[i].name, whole.tool_calls[i].name);
          EXPECT_EQ(s.tool_calls[i].arguments, whole.tool_calls[i].arguments);
        }
        EXPECT_EQ(s.content, whole.content);
      }

      // tool_choice "required" forces text of this shape: the grammar accepts
      // the template's own rendering of the calls.
      if (!with_content) {
        auto g = ToolCallGrammar(c.format, Tools(), {}, /*parallel_tool_calls=*/n_calls > 1);
        ASSERT_TRUE(g.ok()) << g.status().ToString();
        EXPECT_TRUE(testing::Matches(g->ToGbnf(), text)) << g->ToGbnf();
      }
    }
  }
}

// Whether `format` decodes its arguments into JSON (tags, XML, Python,
// Gemma literals) rather than passing the model's JSON text on.
bool DecodedArguments(ToolCallFormat format) {
  using B = internal::TaggedSyntax::Body;
  if (format == F::kQwen3Coder) return true;
  const internal::TaggedSyntax* s = internal::TaggedSyntaxOf(format);
  return s != nullptr && s->body != B::kJsonList && s->body != B::kJsonObjects && s->body != B::kJsonArgs;
}

// A reply cut at every byte (max_tokens, or the model's own stop inside a
// call): what the whole-text parser and the stream parser (fed byte by
// byte) make of it is the same, and it follows the rule of tool_calls.h:
//   - a call whose name the stream had announced when the text stopped is
//     a call; one it had not is content as written, unless Finish finds it
//     complete (LFM2's list, decided at its close);
//   - a call's arguments are a JSON object of the parameters complete
//     before the cut (decoded syntaxes; the set only grows with the text),
//     or the JSON text as far as it was written (JSON syntaxes): never
//     markup;
//   - content is the full reply's content so far, plus, for a call left
//     before its name, that call's text as written (a suffix of the text).
TEST_P(TemplateOracle, ReplyCutAtEveryByteIsCallsOrContentNeverMarkupInArguments) {
  const Case& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file + ".jinja");
  auto tmpl = tmpl::ChatTemplate::Parse(ReadFile(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ToolCallParseOptions opts;
  opts.tools = Tools();
  opts.make_id = [] { return std::string("id"); };
  const bool decoded = DecodedArguments(c.format);
  for (const bool with_content : {false, true}) {
    SCOPED_TRACE(with_content ? "with content" : "calls only");
    const std::string text = GeneratedText(c, *tmpl, with_content, c.parallel ? 2 : 1);
    ASSERT_FALSE(text.empty());
    SCOPED_TRACE("generated: " + text);
    const ParsedOutput full = ParseToolCalls(c.format, text, opts);
    ASSERT_EQ(full.tool_calls.size(), c.parallel ? 2u : 1u);
    // Where the stream announces each call (bytes fed when its name came).
    std::vector<size_t> announced_at;
    {
      ToolCallStreamParser p(c.format, opts);
      for (size_t i = 0; i < text.size(); ++i) {
        for (const ToolCallDelta& d : p.Feed(std::string_view(text).substr(i, 1)).tool_calls) {
          if (d.name) announced_at.push_back(i + 1);
        }
      }
    }
    std::vector<size_t> members(full.tool_calls.size(), 0);
    for (size_t cut = 0; cut <= text.size() && !HasFailure(); ++cut) {
      const std::string_view prefix = std::string_view(text).substr(0, cut);
      SCOPED_TRACE("cut at " + std::to_string(cut) + ": " + std::string(prefix));
      const ParsedOutput whole = ParseToolCalls(c.format, prefix, opts);
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < cut; ++i) bytes.push_back(prefix.substr(i, 1));
      const ParsedOutput streamed = StreamPieces(c.format, bytes, opts);
      ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size()) << "content: " << whole.content;
      EXPECT_EQ(streamed.content, whole.content);
      const size_t announced = static_cast<size_t>(
          std::count_if(announced_at.begin(), announced_at.end(), [&](size_t at) { return at <= cut; }));
      ASSERT_GE(whole.tool_calls.size(), announced) << "an announced call is gone; content: " << whole.content;
      ASSERT_LE(whole.tool_calls.size(), full.tool_calls.size());
      for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
        const ToolCall& got = whole.tool_calls[i];
        const ToolCall& want = full.tool_calls[i];
        EXPECT_EQ(streamed.tool_calls[i].arguments, got.arguments);
        EXPECT_EQ(got.name, want.name);
        const auto args = nlohmann::json::parse(got.arguments, nullptr, false);
        const auto want_args = nlohmann::json::parse(want.arguments);
        if (i >= announced) {  // completed by Finish: only when it was whole
          EXPECT_EQ(args, want_args) << got.arguments;
        } else if (decoded) {
          ASSERT_TRUE(args.is_object()) << "arguments: " << got.arguments;
          for (const auto& [k, v] : args.items()) {
            EXPECT_TRUE(want_args.contains(k) && want_args[k] == v) << k << " in " << got.arguments;
          }
          EXPECT_GE(args.size(), members[i]) << "a complete parameter went missing: " << got.arguments;
          members[i] = args.size();
        } else {
          EXPECT_TRUE(got.arguments == "{}" || want.arguments.compare(0, got.arguments.size(), got.arguments) == 0)
              << "not a prefix of " << want.arguments << ": " << got.arguments;
        }
      }
      size_t same = 0;
      while (same < whole.content.size() && same < full.content.size() && whole.content[same] == full.content[same]) {
        ++same;
      }
      std::string_view rest = std::string_view(whole.content).substr(same);
      rest = rest.substr(0, rest.find_last_not_of(" \n") + 1);
      if (!rest.empty()) {
        EXPECT_LT(whole.tool_calls.size(), full.tool_calls.size()) << "content past the calls: " << whole.content;
        // (Trailing whitespace next to calls is no content.)
        const std::string_view written = prefix.substr(0, prefix.find_last_not_of(" \n") + 1);
        EXPECT_TRUE(written.ends_with(rest)) << "content that is not the unfinished call as written: " << rest;
      }
    }
  }
}

// GPT-2's byte-level BPE vocabulary with `format`'s markers added as
// control tokens (one per format, built once).
const tok::Tokenizer* MarkerTokenizer(ToolCallFormat format) {
  static std::map<ToolCallFormat, std::unique_ptr<tok::Tokenizer>> built;
  auto& slot = built[format];
  if (slot) return slot.get();
  auto base = testing::LoadSharedTokenizer("gpt-2");
  if (!base.ok()) return nullptr;
  tok::TokenizerSpec spec = (*base)->spec();
  for (const std::string& m : ToolCallMarkers(format)) {
    if (std::find(spec.tokens.begin(), spec.tokens.end(), m) != spec.tokens.end()) continue;
    spec.tokens.push_back(m);
    spec.types.push_back(tok::TokenType::kControl);
    if (!spec.scores.empty()) spec.scores.push_back(0.0f);
    if (!spec.lstrip.empty()) spec.lstrip.push_back(0);
    if (!spec.rstrip.empty()) spec.rstrip.push_back(0);
  }
  auto t = tok::Tokenizer::FromSpec(std::move(spec));
  if (t.ok()) slot = std::move(*t);
  return slot.get();
}

TEST_P(TemplateOracle, ControlTokenMarkersReachTheParser) {
  const Case& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file + ".jinja");
  KVS_REQUIRE_SHARED(vocab_path, "vocab/ggml-vocab-gpt-2.gguf");
  auto tmpl = tmpl::ChatTemplate::Parse(ReadFile(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  const tok::Tokenizer* t = MarkerTokenizer(c.format);
  ASSERT_NE(t, nullptr);
  const auto marker_tokens = ToolCallMarkerTokens(*t, c.format);
  ASSERT_EQ(marker_tokens.size(), ToolCallMarkers(c.format).size());
  const std::map<int32_t, std::string> marker_text(marker_tokens.begin(), marker_tokens.end());
  const size_t n_calls = c.parallel ? 2 : 1;
  const std::string text = GeneratedText(c, *tmpl, /*with_content=*/true, n_calls);
  SCOPED_TRACE("generated: " + text);
  std::string parser_text;
  size_t markers_seen = 0;
  tok::IncrementalDecoder decoder(*t, /*skip_special=*/true, /*at_sequence_start=*/true);
  for (int32_t id : t->Encode(text, /*add_special=*/false, /*parse_special=*/true)) {
    parser_text += decoder.Add(id);
    if (auto it = marker_text.find(id); it != marker_text.end()) {
      parser_text += it->second;
      ++markers_seen;
    }
  }
  parser_text += decoder.Flush();
  EXPECT_EQ(parser_text, text);
  if (c.format != F::kFunctionary) {  // its <function=..> calls are plain text
    EXPECT_GT(markers_seen, 0u);
  }
  ToolCallParseOptions opts;
  opts.tools = Tools();
  const ParsedOutput parsed = ParseToolCalls(c.format, parser_text, opts);
  EXPECT_EQ(parsed.tool_calls.size(), n_calls);
}

INSTANTIATE_TEST_SUITE_P(Shared, TemplateOracle, ::testing::ValuesIn(Cases()), [](const auto& info) {
  std::string n = info.param.file;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
});

TEST(ToolCallDetection, EveryTemplateGetsItsFormat) {
  KVS_REQUIRE_SHARED(dir, "templates");
  size_t files = 0;
  for (const auto& [file, format] : DetectionTable()) {
    const std::string text = ReadFile(dir + "/" + file + ".jinja");
    ASSERT_FALSE(text.empty()) << file;
    EXPECT_EQ(ToolCallFormatName(DetectToolCallFormat(text)), std::string(ToolCallFormatName(format))) << file;
    ++files;
  }
  // The table covers the whole directory.
  size_t on_disk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) on_disk += entry.path().extension() == ".jinja";
  EXPECT_EQ(files, on_disk);
}

}  // namespace tool_call_templates_test
}  // namespace kvs::grammar
