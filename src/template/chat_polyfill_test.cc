// Capability detection (DetectChatCapabilities) and the polyfills
// (chat_polyfill.h): an OpenAI tool loop rendered through RenderChat on
// every real template in ../shared/templates, and the polyfills one by one
// on small hand-written templates.
#include "template/chat_polyfill.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "template/chat_render.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {
namespace chat_polyfill_test {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const tok::Tokenizer& TinyTokenizer() {
  static const std::unique_ptr<tok::Tokenizer> tok = [] {
    auto file = gguf::GgufFile::Open(kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf");
    KVS_CHECK(file.ok());
    auto t = tok::Tokenizer::FromGguf(**file);
    KVS_CHECK(t.ok());
    return std::move(t).value();
  }();
  return *tok;
}

// A template with its capabilities detected, as LoadModelChatTemplate leaves it.
ChatTemplate Probed(const std::string& source, const std::string& syntax = "") {
  auto t = ChatTemplate::Parse(source);
  KVS_CHECK(t.ok());
  auto caps = DetectChatCapabilities(*t, "<s>", "</s>");
  KVS_CHECK(caps.ok());
  t->set_capabilities(*caps);
  t->set_tool_call_syntax(syntax);
  return std::move(t).value();
}

const char kTools[] = R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

// The loop every agent framework sends: the API's shapes (content null,
// arguments as JSON text, OpenAI call ids, no name on the tool message).
ChatRequest ToolLoop() {
  ChatRequest r;
  r.messages = ordered_json::parse(R"([
      {"role": "user", "content": "UserAsksAboutTheWeather"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_Xy12abcDEF", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_Xy12abcDEF", "content": "ToolSaysSunny18C"}])");
  r.tools = ordered_json::parse(kTools);
  r.add_generation_prompt = true;
  r.bos_token = "<s>";
  r.eos_token = "</s>";
  return r;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

// The polyfills each real template needs (by file name). A template missing
// here fails the test, so a new template's detection is reviewed once.
const std::map<std::string, std::string>& ExpectedPolyfills();

// Templates that cannot render the loop even with polyfills, by design, and
// the error they give.
const std::map<std::string, std::string>& ExpectedFailures() {
  static const std::map<std::string, std::string> m = {
      // Needs the `functions` variable that only firefunction's own clients
      // pass (chat_template_kwargs); probed == false, so nothing is polyfilled.
      {"fireworks-ai-llama-3-firefunction-v2.jinja", "Cannot perform operation + on undefined values"},
  };
  return m;
}

TEST(ChatPolyfillRealTemplates, ToolLoopRendersOnEveryTemplate) {
  KVS_REQUIRE_SHARED(dir, "templates");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 40u);
  std::string table;
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    SCOPED_TRACE(name);
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    const ChatTemplate chat = Probed(ss.str());
    const ChatCapabilities& caps = chat.capabilities();
    const std::string polyfills = Join(caps.Polyfills());
    table += name + ": " + (caps.probed ? polyfills : "(not probed)") + "\n";
    auto expected = ExpectedPolyfills().find(name);
    if (expected == ExpectedPolyfills().end()) {
      ADD_FAILURE() << "no expected polyfills listed for " << name << " (detected: " << polyfills << ")";
    } else {
      EXPECT_EQ(polyfills, expected->second);
    }

    const ChatRequest loop = ToolLoop();
    auto r = RenderChat(chat, TinyTokenizer(), loop);
    if (auto fail = ExpectedFailures().find(name); fail != ExpectedFailures().end()) {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find(fail->second), std::string::npos) << r.status().ToString();
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const char* want : {"UserAsksAboutTheWeather", "get_weather", "Paris", "ToolSaysSunny18C"}) {
      EXPECT_NE(r->text.find(want), std::string::npos) << want << " missing from:\n" << r->text;
    }
    // The tool definitions reach the prompt: natively, or listed by the polyfill.
    EXPECT_NE(r->text.find("Current weather in a city"), std::string::npos) << r->text;

    // Native capabilities change nothing. A plain chat (and a system prompt,
    // where the template has the role) renders exactly as without polyfills.
    ChatRequest plain;
    plain.messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "How are you?"}])");
    if (caps.system_role) plain.messages.insert(plain.messages.begin(), ordered_json{{"role", "system"}, {"content", "Be brief."}});
    plain.add_generation_prompt = true;
    plain.bos_token = "<s>";
    plain.eos_token = "</s>";
    auto polyfilled = RenderChat(chat, TinyTokenizer(), plain);
    ASSERT_TRUE(polyfilled.ok()) << polyfilled.status().ToString();
    if (caps.null_tools) {
      auto raw = chat.Render(plain);
      ASSERT_TRUE(raw.ok()) << raw.status().ToString();
      EXPECT_EQ(polyfilled->text, *raw);
    } else {
      // Fails without a tools list: the polyfill passes an empty one.
      EXPECT_FALSE(chat.Render(plain).ok());
      plain.tools = ordered_json::array();
      auto raw = chat.Render(plain);
      ASSERT_TRUE(raw.ok()) << raw.status().ToString();
      EXPECT_EQ(polyfilled->text, *raw);
    }
    // The tool loop in the shapes the template takes natively (object or
    // text arguments, "" or null content, 9-character ids): when the
    // template has tools, calls, the tool role and the system role, the
    // polyfills leave it byte-identical.
    ChatRequest honest = ToolLoop();
    ordered_json& assistant = honest.messages[1];
    ordered_json& call = assistant["tool_calls"][0];
    if (caps.arguments == ArgumentsForm::kObject) call["function"]["arguments"] = {{"city", "Paris"}};
    if (caps.content_with_calls == ContentWithCalls::kNullToEmpty) assistant["content"] = "";
    honest.tools[0]["function"]["parameters"]["properties"]["city"]["description"] = "The city";
    if (!caps.any_call_id) {
      call["id"] = "Xy12abcDE";
      honest.messages[2]["tool_call_id"] = "Xy12abcDE";
    }
    std::vector<std::string> applied;
    auto again = ApplyChatPolyfills(caps, "", honest, &applied);
    ASSERT_TRUE(again.ok());
    if (caps.tools && caps.tool_calls && caps.tool_role && caps.system_role) {
      EXPECT_EQ(Join(applied), "");
      auto native = RenderChat(chat, TinyTokenizer(), honest);
      auto raw_native = chat.Render(honest);
      ASSERT_TRUE(native.ok() && raw_native.ok());
      EXPECT_EQ(native->text, *raw_native);
    }
  }
  std::cout << "detected polyfills per template:\n" << table;
}

// ---- the polyfills one by one, on small templates ----

// Prints only the roles and content it knows, like many simple templates.
const char kPlain[] =
    "{% for m in messages %}{% if m.role == 'user' or m.role == 'assistant' %}<{{ m.role }}>{{ m.content }}"
    "</{{ m.role }}>{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";

TEST(ChatPolyfill, PlainTemplateGetsEveryStructuralPolyfill) {
  const ChatTemplate chat = Probed(kPlain);
  const ChatCapabilities& caps = chat.capabilities();
  EXPECT_TRUE(caps.probed);
  EXPECT_FALSE(caps.system_role);
  EXPECT_FALSE(caps.tools);
  EXPECT_FALSE(caps.tool_calls);
  EXPECT_FALSE(caps.tool_role);
  EXPECT_TRUE(caps.any_call_id);
  EXPECT_EQ(Join(caps.Polyfills()), "tool-calls-as-text,tool-results-as-user,tool-definitions-in-system,system-into-user");
  ChatRequest loop = ToolLoop();
  loop.messages.insert(loop.messages.begin(), ordered_json{{"role", "system"}, {"content", "SysPrompt"}});
  loop.messages.push_back(ordered_json{{"role", "user"}, {"content", "AndTomorrow?"}});
  std::vector<std::string> applied;
  auto r = ApplyChatPolyfills(caps, "hermes", loop, &applied);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Join(applied), Join(caps.Polyfills()));
  auto text = chat.Render(*r);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  // The system prompt and the tool list prefix the first user message; the
  // call is Hermes text in the assistant's turn; the result (naming its
  // tool and call) merges with the user message after it.
  const std::string& t = *text;
  EXPECT_EQ(t.rfind("<user>SysPrompt\n\n# Tools\n\n", 0), 0u) << t;
  EXPECT_NE(t.find(R"({"type":"function","function":{"name":"get_weather")"), std::string::npos) << t;
  EXPECT_NE(t.find("\n\nUserAsksAboutTheWeather</user><assistant><tool_call>\n{\"name\": \"get_weather\", "
                   "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call></assistant>"
                   "<user>Result of the tool call get_weather (id call_Xy12abcDEF):\nToolSaysSunny18C\n\n"
                   "AndTomorrow?</user><assistant>"),
            std::string::npos)
      << t;
  // The example: the first tool with its first argument, in the syntax.
  EXPECT_NE(t.find("like this (one after another for several calls):\n<tool_call>\n"
                   R"({"name": "get_weather", "arguments": {"city":"..."}})"),
            std::string::npos)
      << t;
}

TEST(ChatPolyfill, ShapesOfCallsFollowTheTemplate) {
  // Iterates arguments|items: needs objects; strings parse, invalid JSON stays.
  const ChatTemplate items = Probed(
      "{% for m in messages %}{{ m.role }}:{{ m.content }}{% for c in m.tool_calls or [] %}"
      "[{{ c.function.name }}{% for k, v in c.function.arguments | items %} {{ k }}={{ v }}{% endfor %}]"
      "{% endfor %}{% endfor %}{% for t in tools or [] %}{{ t.function.name }}{% endfor %}");
  EXPECT_EQ(items.capabilities().arguments, ArgumentsForm::kObject);
  EXPECT_EQ(Join(items.capabilities().Polyfills()), "object-arguments");
  ChatRequest r = ToolLoop();
  auto text = RenderChat(items, TinyTokenizer(), r);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->text.find("[get_weather city=Paris]"), std::string::npos) << text->text;
  r.messages[1]["tool_calls"][0]["function"]["arguments"] = "not json";
  auto bad = ApplyChatPolyfills(items.capabilities(), "", r);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->messages[1]["tool_calls"][0]["function"]["arguments"], "not json");

  // Concatenates content and arguments with '+': null fails (-> ""), an
  // object fails (-> its JSON text).
  const ChatTemplate concat = Probed(
      "{% for m in messages %}{{ m.role + ':' + m.content }}{% for c in m.tool_calls or [] %}"
      "{{ '[' + c.function.name + ' ' + c.function.arguments + ']' }}{% endfor %}{% endfor %}"
      "{% for t in tools or [] %}{{ t.function.name }}{% endfor %}");
  EXPECT_EQ(concat.capabilities().arguments, ArgumentsForm::kString);
  EXPECT_EQ(Join(concat.capabilities().Polyfills()), "null-content,string-arguments");
  r = ToolLoop();
  r.messages[1]["tool_calls"][0]["function"]["arguments"] = {{"city", "Paris"}};
  text = RenderChat(concat, TinyTokenizer(), r);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->text.find(R"(assistant:[get_weather {"city":"Paris"}])"), std::string::npos) << text->text;

  // Shows the calls only when content is none (DeepSeek R1 distills): "" -> null.
  const ChatTemplate none_only = Probed(
      "{% for m in messages %}{{ m.role }}:{% if m.content is none %}{% for c in m.tool_calls %}"
      "[{{ c.function.name }} {{ c.function.arguments }}]{% endfor %}{% else %}{{ m.content }}{% endif %}"
      "{% endfor %}{% for t in tools or [] %}{{ t.function.name }}{% endfor %}");
  EXPECT_EQ(none_only.capabilities().content_with_calls, ContentWithCalls::kEmptyToNull);
  r = ToolLoop();
  r.messages[1]["content"] = "";
  text = RenderChat(none_only, TinyTokenizer(), r);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->text.find(R"([get_weather {"city": "Paris"}])"), std::string::npos) << text->text;
}

TEST(ChatPolyfill, NineCharacterCallIds) {
  // Mistral's templates raise on other ids; calls and results map alike.
  const ChatTemplate mistral = Probed(
      "{% for m in messages %}{% for c in m.tool_calls or [] %}{% if c.id | length != 9 %}"
      "{{ raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{% endif %}"
      "[{{ c.id }} {{ c.function.name }} {{ c.function.arguments }}]{% endfor %}"
      "{% if m.role == 'tool' %}({{ m.tool_call_id }} {{ m.content }}){% else %}{{ m.content }}{% endif %}"
      "{% endfor %}{% for t in tools or [] %}{{ t.function.name }}{% endfor %}");
  EXPECT_FALSE(mistral.capabilities().any_call_id);
  EXPECT_EQ(Join(mistral.capabilities().Polyfills()), "call-ids");
  auto text = RenderChat(mistral, TinyTokenizer(), ToolLoop());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const size_t open = text->text.find('[');
  ASSERT_NE(open, std::string::npos);
  const std::string id = text->text.substr(open + 1, 9);
  EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c); })) << id;
  EXPECT_NE(text->text.find("(" + id + " ToolSaysSunny18C)"), std::string::npos) << text->text;
}

TEST(ChatPolyfill, UnprobedOrCapableTemplatesAreLeftAlone) {
  ChatTemplate raw = *ChatTemplate::Parse(kPlain);  // never probed
  EXPECT_FALSE(raw.capabilities().probed);
  EXPECT_TRUE(raw.capabilities().Polyfills().empty());
  std::vector<std::string> applied;
  auto r = ApplyChatPolyfills(raw.capabilities(), "", ToolLoop(), &applied);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(r->messages, ToolLoop().messages);
  // A template that needs a variable the probe cannot know: not probed.
  const ChatTemplate needs = Probed("{{ functions + messages[0].content }}");
  EXPECT_FALSE(needs.capabilities().probed);
}

TEST(ChatPolyfill, ToolCallSyntaxes) {
  const ordered_json calls = ordered_json::parse(R"([
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"y": "z"}}}])");
  EXPECT_EQ(WriteToolCalls("hermes", calls),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"y\":\"z\"}}\n</tool_call>");
  EXPECT_EQ(WriteToolCalls("none", calls), WriteToolCalls("hermes", calls));
  EXPECT_EQ(WriteToolCalls("mistral", calls), "[TOOL_CALLS]f[ARGS]{\"x\": 1}[TOOL_CALLS]g[ARGS]{\"y\":\"z\"}");
  EXPECT_EQ(WriteToolCalls("llama3_json", calls),
            "{\"name\": \"f\", \"parameters\": {\"x\": 1}};{\"name\": \"g\", \"parameters\": {\"y\":\"z\"}}");
  EXPECT_EQ(WriteToolCalls("qwen3_coder", calls),
            "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=g>\n<parameter=y>\nz\n</parameter>\n</function>\n</tool_call>");
  // Arguments that are not JSON are written as a JSON string.
  const ordered_json bad = ordered_json::parse(R"([{"function": {"name": "f", "arguments": "x=1"}}])");
  EXPECT_EQ(WriteToolCalls("hermes", bad), "<tool_call>\n{\"name\": \"f\", \"arguments\": \"x=1\"}\n</tool_call>");
}

const std::map<std::string, std::string>& ExpectedPolyfills() {
  static const std::map<std::string, std::string> m = {
      {"Apertus-8B-Instruct.jinja", "object-arguments,tool-descriptions"},
      {"Apriel-1.6-15b-Thinker-fixed.jinja", "object-arguments"},
      {"ByteDance-Seed-OSS.jinja", "object-arguments,tool-descriptions"},
      {"Cohere2MoE.jinja", "object-arguments"},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "object-arguments"},
      {"GLM-4.6.jinja", "object-arguments"},
      {"GigaChat3-10B-A1.8B.jinja", ""},
      {"GigaChat3.1-10B-A1.8B.jinja", ""},
      {"Kimi-K2-Instruct.jinja", ""},
      {"Kimi-K2-Thinking.jinja", ""},
      {"LFM2-8B-A1B.jinja", "tool-calls-as-text"},
      {"LFM2.5-8B-A1B.jinja", "null-content,object-arguments"},
      {"MiMo-VL.jinja", "object-arguments"},
      {"MiniMax-M1.jinja", "object-arguments"},
      {"MiniMax-M3.jinja", "object-arguments"},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "object-arguments,call-ids"},
      {"NVIDIA-Nemotron-Nano-v2.jinja", ""},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "tools-list,tool-descriptions"},
      {"Qwen-QwQ-32B.jinja", "null-content,object-arguments"},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "object-arguments"},
      {"Qwen3-Coder.jinja", "object-arguments"},
      {"Qwen3.5-4B.jinja", "object-arguments"},
      {"StepFun3.5-Flash.jinja", "object-arguments"},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "empty-content,string-arguments,tool-definitions-in-system"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "object-arguments,tool-definitions-in-system"},
      {"deepseek-ai-DeepSeek-V3.2.jinja", "object-arguments"},
      {"deepseek-ai-DeepSeek-V4.jinja", "object-arguments"},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", ""},
      {"google-gemma-4-31B-it-interleaved.jinja", ""},
      {"google-gemma-4-31B-it.jinja", ""},
      {"ibm-granite-granite-4.0.jinja", ""},
      {"ibm-granite-granite-4.1.jinja", ""},
      {"llama-cpp-rwkv-world.jinja", "tool-calls-as-text,tool-results-as-user,tool-definitions-in-system"},
      {"meetkai-functionary-medium-v3.1.jinja", "object-arguments,tools-list,tool-descriptions"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "object-arguments"},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", "object-arguments"},
      {"microsoft-Phi-3.5-mini-instruct.jinja", "tool-calls-as-text,tool-results-as-user,tool-definitions-in-system"},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "null-content"},
      {"moonshotai-Kimi-K2.jinja", "object-arguments"},
      {"muse-glimmer.jinja", "object-arguments"},
      {"openbmb-MiniCPM5-1B.jinja", "object-arguments"},
      {"poolside-Laguna-S-2.1.jinja", "object-arguments"},
      {"poolside-Laguna-XS.2.jinja", "object-arguments"},
      {"tencent-Hy3.jinja", "object-arguments"},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "null-content"},
      {"upstage-Solar-Open-100B.jinja", ""},
  };
  return m;
}

}  // namespace chat_polyfill_test
}  // namespace kvs::tmpl
