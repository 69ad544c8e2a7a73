// Tool-call parsing: for each supported chat template in ../shared/templates,
// a conversation with tool calls is rendered through the Jinja engine, the
// assistant's part is cut out (the text the model would generate, up to its
// end-of-turn token) and parsed, whole and streamed in random chunks; the
// calls come back with their names and arguments. Also hand-written outputs
// (content around calls, malformed calls, gpt-oss harmony).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "base/test_util.h"
#include "grammar/shared_vocab.h"
#include "grammar/tool_calls.h"
#include "template/chat_template.h"

namespace kvs::grammar {
namespace tool_calls_test {

using Json = nlohmann::ordered_json;

struct TemplateCase {
  std::string file;
  ToolCallFormat format;
  std::string bos, eos;
  bool parallel = true;           // the template renders several calls
  bool string_arguments = false;  // the template wants arguments as a JSON string
  bool nine_char_ids = false;     // Mistral: ids of 9 alphanumerics
  bool content_with_calls = true; // the template renders content and calls together
  bool null_content = true;       // no content is null (else "")
};

const std::vector<TemplateCase>& Cases() {
  static const std::vector<TemplateCase> cases = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::kHermes, "<|begin_of_text|>",
       "<|im_end|>"},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes, "", "<|im_end|>"},
      {"Qwen-QwQ-32B.jinja", ToolCallFormat::kHermes, "", "<|im_end|>"},
      {"MiMo-VL.jinja", ToolCallFormat::kHermes, "", "<|im_end|>"},
      {"ibm-granite-granite-4.0.jinja", ToolCallFormat::kHermes, "", "<|end_of_text|>"},
      {"Qwen3-Coder.jinja", ToolCallFormat::kQwen3Coder, "", "<|im_end|>"},
      {"Qwen3.5-4B.jinja", ToolCallFormat::kQwen3Coder, "", "<|im_end|>"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3, "<|begin_of_text|>", "<|eot_id|>",
       /*parallel=*/false},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3, "<|begin_of_text|>", "<|eot_id|>",
       /*parallel=*/false},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::kMistral, "<s>", "</s>", true, false, true},
      {"unsloth-mistral-Devstral-Small-2507.jinja", ToolCallFormat::kMistral, "<s>", "</s>", true, false, true, true,
       /*null_content=*/false},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", ToolCallFormat::kMistral, "<s>", "</s>", true, false, true,
       true, /*null_content=*/false},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", ToolCallFormat::kDeepSeekV3, "<｜begin▁of▁sentence｜>",
       "<｜end▁of▁sentence｜>", true, /*string_arguments=*/true, false, /*content_with_calls=*/false},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::kDeepSeekV31, "<｜begin▁of▁sentence｜>",
       "<｜end▁of▁sentence｜>"},
      {"meetkai-functionary-medium-v3.1.jinja", ToolCallFormat::kFunctionary, "<|begin_of_text|>", "<|eot_id|>"},
  };
  return cases;
}

std::string ReadTemplate(const std::string& path) {
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
        "filters": {"type": "object", "properties": {"site": {"type": "string"}}, "description": "Filters"}},
        "required": ["query"]}}}
  ])");
}

// The calls the assistant makes in the round trips.
std::vector<std::pair<std::string, Json>> Calls(bool parallel) {
  std::vector<std::pair<std::string, Json>> calls = {
      {"get_weather", Json::parse(R"({"city": "Oslo, \"Norway\"", "unit": "celsius", "days": 3})")}};
  if (parallel) calls.push_back({"search_web", Json::parse(R"({"query": "tides é 😀", "filters": {"site": "x.org"}})")});
  return calls;
}

// Splits text into random chunks and streams them through a parser; checks
// that the deltas reassemble into the parser's own result.
ParsedOutput Stream(ToolCallFormat f, const std::string& text, std::mt19937_64& rng, const ToolCallParseOptions& o) {
  ToolCallStreamParser p(f, o);
  std::string content;
  std::vector<ToolCall> calls;
  auto take = [&](const StreamDelta& d) {
    content += d.content;
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
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min<size_t>(1 + rng() % 7, text.size() - pos);
    take(p.Feed(std::string_view(text).substr(pos, n)));
    pos += n;
  }
  take(p.Finish());
  const ParsedOutput& r = p.result();
  EXPECT_EQ(content, r.content);
  EXPECT_EQ(calls.size(), r.tool_calls.size());
  for (size_t i = 0; i < std::min(calls.size(), r.tool_calls.size()); ++i) {
    EXPECT_EQ(calls[i].name, r.tool_calls[i].name);
    EXPECT_EQ(calls[i].id, r.tool_calls[i].id);
    EXPECT_EQ(calls[i].arguments, r.tool_calls[i].arguments);
  }
  return r;
}

class TemplateRoundTrip : public ::testing::TestWithParam<TemplateCase> {};

// The text the model generates for the assistant turn with tool calls
// (and content first when with_content) in template `t`: the rendered
// conversation after the prompt, up to the end-of-turn token.
std::string GeneratedText(const TemplateCase& c, const tmpl::ChatTemplate& t, bool with_content) {
  const auto calls = Calls(c.parallel);
  Json tool_calls = Json::array();
  int k = 0;
  for (const auto& [name, args] : calls) {
    const std::string id = c.nine_char_ids ? "abc12345" + std::to_string(k) : "call_" + std::to_string(k);
    tool_calls.push_back({{"id", id},
                          {"type", "function"},
                          {"function", {{"name", name}, {"arguments", c.string_arguments ? Json(args.dump()) : args}}}});
    ++k;
  }
  tmpl::ChatRequest req;
  req.bos_token = c.bos;
  req.eos_token = c.eos;
  req.tools = Tools();
  req.now_unix = 1700000000;
  req.messages = Json::array({{{"role", "user"}, {"content", "Weather in Oslo, and search for tides?"}}});
  req.add_generation_prompt = true;
  auto prompt = t.Render(req);
  if (!prompt.ok()) {
    ADD_FAILURE() << prompt.status().ToString();
    return "";
  }
  Json assistant = {{"role", "assistant"}, {"content", with_content ? Json("Let me check that.") : c.null_content ? Json() : Json("")},
                    {"tool_calls", tool_calls}};
  req.messages.push_back(assistant);
  req.add_generation_prompt = false;
  auto full = t.Render(req);
  if (!full.ok()) {
    ADD_FAILURE() << full.status().ToString();
    return "";
  }
  // What the model generates follows the longest common prefix (a
  // thinking template's prompt may end in "<think>\n", which the rendered
  // history leaves out).
  size_t lcp = 0;
  while (lcp < prompt->size() && lcp < full->size() && (*prompt)[lcp] == (*full)[lcp]) ++lcp;
  if (lcp < prompt->size()) {  // diverged: back off to the end of the last line or tag
    while (lcp > 0 && (*full)[lcp - 1] != '\n' && (*full)[lcp - 1] != '>') --lcp;
  }
  EXPECT_GT(lcp + 32, prompt->size()) << "prompt and history diverge early:\n" << *prompt << "\n---\n" << *full;
  std::string generated = full->substr(lcp);
  // A reasoning block is the reasoning parser's (part 2) business.
  if (const size_t think = generated.find("</think>"); think != std::string::npos) {
    generated = generated.substr(think + 8);
    generated.erase(0, generated.find_first_not_of(" \n"));
  }
  // The model stops at its end-of-turn token: cut there.
  for (const std::string& eot : {c.eos, std::string("<|eom_id|>"), std::string("<|im_end|>")}) {
    if (const size_t p = generated.find(eot); !eot.empty() && p != std::string::npos) generated.resize(p);
  }
  return generated;
}

TEST_P(TemplateRoundTrip, RenderedCallsParseBack) {
  const TemplateCase& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file);
  const std::string source = ReadTemplate(path);
  EXPECT_EQ(DetectToolCallFormat(source), c.format);
  auto tmpl = tmpl::ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  std::mt19937_64 rng(99);
  for (const bool with_content : {false, true}) {
    if (with_content && !c.content_with_calls) continue;
    SCOPED_TRACE(with_content ? "with content" : "calls only");
    const auto calls = Calls(c.parallel);
    const std::string generated = GeneratedText(c, *tmpl, with_content);
    ASSERT_FALSE(generated.empty());
    SCOPED_TRACE(generated);
    ToolCallParseOptions opts;
    opts.tools = Tools();
    int next_id = 0;
    opts.make_id = [&] { return "id" + std::to_string(next_id++); };
    const ParsedOutput whole = ParseToolCalls(c.format, generated, opts);
    ASSERT_EQ(whole.tool_calls.size(), calls.size()) << "content: " << whole.content;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(whole.tool_calls[i].name, calls[i].first);
      const Json args = Json::parse(whole.tool_calls[i].arguments, nullptr, false);
      EXPECT_EQ(args, calls[i].second) << whole.tool_calls[i].arguments;
      EXPECT_FALSE(whole.tool_calls[i].id.empty());
    }
    // Content survives when the template renders it before the calls.
    if (with_content && generated.find("Let me check that.") != std::string::npos) {
      EXPECT_EQ(whole.content, "Let me check that.");
    }
    if (!with_content) {
      EXPECT_EQ(whole.content, "");
    }
    for (int trial = 0; trial < 5; ++trial) {
      next_id = 0;
      const ParsedOutput streamed = Stream(c.format, generated, rng, opts);
      ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size());
      for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
        EXPECT_EQ(streamed.tool_calls[i].name, whole.tool_calls[i].name);
        EXPECT_EQ(streamed.tool_calls[i].arguments, whole.tool_calls[i].arguments);
      }
      EXPECT_EQ(streamed.content, whole.content);
    }
  }
}

// A shared byte-level BPE vocabulary (as Mistral's Tekken and DeepSeek's
// are) with every format's markers added as control tokens; built once.
const tok::Tokenizer* MarkerTokenizer() {
  static const std::unique_ptr<tok::Tokenizer> tokenizer = [] {
    std::unique_ptr<tok::Tokenizer> out;
    auto base = testing::LoadSharedTokenizer("gpt-2");
    if (!base.ok()) return out;
    tok::TokenizerSpec spec = (*base)->spec();
    for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral,
                             ToolCallFormat::kDeepSeekV3, ToolCallFormat::kHarmony}) {
      for (const std::string& m : ToolCallMarkers(f)) {
        if (std::find(spec.tokens.begin(), spec.tokens.end(), m) != spec.tokens.end()) continue;
        spec.tokens.push_back(m);
        spec.types.push_back(tok::TokenType::kControl);
        if (!spec.scores.empty()) spec.scores.push_back(0.0f);
        if (!spec.lstrip.empty()) spec.lstrip.push_back(0);
        if (!spec.rstrip.empty()) spec.rstrip.push_back(0);
      }
    }
    if (auto t = tok::Tokenizer::FromSpec(std::move(spec)); t.ok()) out = std::move(*t);
    return out;
  }();
  return tokenizer.get();
}

// Token level: a model whose vocabulary has the format's markers as control
// tokens (Mistral's [TOOL_CALLS], DeepSeek's <｜tool▁calls▁begin｜>, ...) and
// generates the rendered calls token by token. The content decoder drops
// special tokens; the server hands the parser each dropped marker's text
// (ToolCallMarkerTokens -> TokenOutput::marker_text), as emulated here, and
// the calls come back; the content text alone loses the markers.
TEST_P(TemplateRoundTrip, ControlTokenMarkersReachTheParser) {
  const TemplateCase& c = GetParam();
  KVS_REQUIRE_SHARED(path, "templates/" + c.file);
  KVS_REQUIRE_SHARED(vocab_path, "vocab/ggml-vocab-gpt-2.gguf");
  auto tmpl = tmpl::ChatTemplate::Parse(ReadTemplate(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  const tok::Tokenizer* tokenizer = MarkerTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const tok::Tokenizer& t = *tokenizer;
  const std::vector<std::string> markers = ToolCallMarkers(c.format);
  const auto marker_tokens = ToolCallMarkerTokens(t, c.format);
  ASSERT_EQ(marker_tokens.size(), markers.size());
  const std::map<int32_t, std::string> marker_text(marker_tokens.begin(), marker_tokens.end());

  const std::string generated = GeneratedText(c, *tmpl, /*with_content=*/false);
  ASSERT_FALSE(generated.empty());
  SCOPED_TRACE(generated);
  const std::vector<int32_t> ids = t.Encode(generated, /*add_special=*/false, /*parse_special=*/true);
  size_t marker_ids = 0;
  tok::IncrementalDecoder decoder(t, /*skip_special=*/true, /*at_sequence_start=*/true);
  std::string content_text, parser_text;
  for (int32_t id : ids) {
    const std::string text = decoder.Add(id);
    content_text += text;
    parser_text += text;
    if (auto it = marker_text.find(id); it != marker_text.end()) {
      parser_text += it->second;
      ++marker_ids;
    }
  }
  const std::string tail = decoder.Flush();
  content_text += tail;
  parser_text += tail;
  EXPECT_EQ(parser_text, generated);
  const bool uses_markers = c.format != ToolCallFormat::kLlama3 && c.format != ToolCallFormat::kFunctionary;
  if (uses_markers) {
    EXPECT_GT(marker_ids, 0u);
  }
  ToolCallParseOptions opts;
  opts.tools = Tools();
  const ParsedOutput parsed = ParseToolCalls(c.format, parser_text, opts);
  const auto calls = Calls(c.parallel);
  ASSERT_EQ(parsed.tool_calls.size(), calls.size()) << "content: " << parsed.content;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(parsed.tool_calls[i].name, calls[i].first);
    EXPECT_EQ(Json::parse(parsed.tool_calls[i].arguments, nullptr, false), calls[i].second);
  }
  if (uses_markers) {
    // Without the markers the calls are lost (what the fix is for).
    EXPECT_NE(content_text, generated);
    EXPECT_NE(ParseToolCalls(c.format, content_text, opts).tool_calls.size(), calls.size()) << content_text;
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, TemplateRoundTrip, ::testing::ValuesIn(Cases()), [](const auto& info) {
  std::string n = info.param.file.substr(0, info.param.file.find(".jinja"));
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
});

TEST(ToolCalls, DetectsNoFormatForTemplatesWithoutTools) {
  EXPECT_EQ(DetectToolCallFormat("{{ messages[0].content }}"), ToolCallFormat::kNone);
  // GLM's <tool_call> is no Hermes JSON (tool_call_templates_test.cc has all the templates).
  EXPECT_EQ(DetectToolCallFormat("<tool_call>{{ name }}<arg_key>"), ToolCallFormat::kGlm45);
}

TEST(ToolCalls, HandWrittenOutputs) {
  std::mt19937_64 rng(1);
  ToolCallParseOptions o;
  int n = 0;
  o.make_id = [&] { return "c" + std::to_string(n++); };
  struct Case {
    ToolCallFormat f;
    std::string text;
    std::string content;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments JSON
    std::string reasoning = "";
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes, "Sure.\n<tool_call>\n{\"arguments\": {\"a\": [1, {\"b\": \"}\"}]}, \"name\": \"f\"}\n</tool_call>",
       "Sure.", {{"f", "{\"a\": [1, {\"b\": \"}\"}]}"}}},
      {ToolCallFormat::kHermes, "no calls here <tool_ at all", "no calls here <tool_ at all", {}},
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }}\n</tool_call>",  // bad JSON
       "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }}\n</tool_call>", {}},
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n</tool_call>",  // lenient: no }
       "", {{"f", "{\"x\": 1}"}}},
      {ToolCallFormat::kLlama3, "{\"name\": \"g\", \"parameters\": {\"q\": \"x\"}}", "", {{"g", "{\"q\": \"x\"}"}}},
      {ToolCallFormat::kLlama3, "{\"answer\": 42}", "{\"answer\": 42}", {}},  // JSON that is not a call
      {ToolCallFormat::kLlama3, "<|python_tag|>brave_search.call(query=\"weather oslo\")", "",
       {{"brave_search", "{\"query\":\"weather oslo\"}"}}},
      {ToolCallFormat::kLlama3, "<|python_tag|>print(1 + 1)", "", {{"python", "{\"code\":\"print(1 + 1)\"}"}}},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abcdefghi\"}, "
                                 "{\"name\": \"g\", \"arguments\": {}}]",
       "", {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
      {ToolCallFormat::kMistral, "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]{}", "",
       {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
      {ToolCallFormat::kFunctionary, "<function=f>{\"a\": \"<x>\"}</function><function=g>{}</function>", "",
       {{"f", "{\"a\": \"<x>\"}"}, {"g", "{}"}}},
      {ToolCallFormat::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
       "</function>\n</tool_call>",
       "", {{"get_weather", "{\"city\": \"Oslo\", \"days\": 3}"}}},
      {ToolCallFormat::kHarmony,
       "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
       "", {{"get_weather", "{\"city\":\"Oslo\"}"}}, "Need weather."},
      {ToolCallFormat::kHarmony,
       "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
       "Hello!", {}, "Simple."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const ParsedOutput whole = ParseToolCalls(c.f, c.text, o);
    EXPECT_EQ(whole.content, c.content);
    EXPECT_EQ(whole.reasoning, c.reasoning);
    ASSERT_EQ(whole.tool_calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.tool_calls[i].name, c.calls[i].first);
      EXPECT_EQ(Json::parse(whole.tool_calls[i].arguments), Json::parse(c.calls[i].second));
    }
    for (int t = 0; t < 4; ++t) {
      const ParsedOutput s = Stream(c.f, c.text, rng, o);
      if (!c.calls.empty()) {
        EXPECT_EQ(s.content, whole.content);
        ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size());
      }
    }
  }
}

TEST(ToolCalls, StreamingHoldsBackPartialMarkers) {
  ToolCallStreamParser p(ToolCallFormat::kHermes);
  StreamDelta d = p.Feed("Hello <tool");
  EXPECT_EQ(d.content, "Hello");  // " <tool" might start a call
  d = p.Feed("_call>\n{\"name\": \"f\", \"argu");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name.value_or(""), "f");
  d = p.Feed("ments\": {\"x\":");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"x\":");
  d = p.Feed(" 1}}\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, " 1}");
  EXPECT_FALSE(d.tool_calls[0].name.has_value());
  d = p.Finish();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(p.result().tool_calls.at(0).arguments, "{\"x\": 1}");
}

TEST(ToolCalls, MistralIdsAreNineAlphanumerics) {
  const std::string id = MakeToolCallId(ToolCallFormat::kMistral);
  EXPECT_EQ(id.size(), 9u);
  const std::string other = MakeToolCallId(ToolCallFormat::kHermes);
  EXPECT_EQ(other.rfind("call_", 0), 0u);
  EXPECT_EQ(other.size(), 29u);
}

}  // namespace tool_calls_test
}  // namespace kvs::grammar
