#include "template/chat_template.h"

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"

namespace kvs::tmpl {
namespace chat_template_test {

using nlohmann::ordered_json;

ChatRequest Conversation() {
  ChatRequest r;
  r.messages = ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": [{"type": "text", "text": "Bye"}, {"type": "text", "text": "?"}]}
  ])");
  r.add_generation_prompt = true;
  r.bos_token = "<s>";
  r.eos_token = "</s>";
  return r;
}

std::string RenderBuiltin(const std::string& name, const ChatRequest& r) {
  auto t = ChatTemplate::Builtin(name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return "";
  auto out = t->Render(r);
  EXPECT_TRUE(out.ok()) << name << ": " << out.status().ToString();
  return out.ok() ? *out : "";
}

TEST(ChatTemplateTest, BuiltinTemplates) {
  const ChatRequest r = Conversation();
  EXPECT_EQ(RenderBuiltin("chatml", r),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(RenderBuiltin("llama2", r),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye? [/INST]");
  EXPECT_EQ(RenderBuiltin("llama3", r),
            "<s><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderBuiltin("mistral", r), "<s>[INST] You are terse.\n\nHi [/INST] Hello!</s>[INST] Bye? [/INST]");
  EXPECT_EQ(RenderBuiltin("gemma", r),
            "<s><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye?<end_of_turn>\n<start_of_turn>model\n");
  for (const std::string& name : ChatTemplate::BuiltinNames()) EXPECT_TRUE(ChatTemplate::Builtin(name).ok()) << name;
  auto missing = ChatTemplate::Builtin("vicuna");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("chatml"), std::string::npos);
}

TEST(ChatTemplateTest, ContextHasTheTransformersVariables) {
  ChatRequest r = Conversation();
  r.extra = ordered_json::parse(R"({"enable_thinking": false, "bos_token": "<BOS>"})");
  auto ctx = ChatTemplate::BuildContext(r);
  ASSERT_TRUE(ctx.ok());
  EXPECT_TRUE(ctx->at("tools").is_null());
  EXPECT_TRUE(ctx->at("documents").is_null());
  EXPECT_EQ(ctx->at("add_generation_prompt"), true);
  EXPECT_EQ(ctx->at("eos_token"), "</s>");
  EXPECT_EQ(ctx->at("bos_token"), "<BOS>");  // extra variables win
  EXPECT_EQ(ctx->at("enable_thinking"), false);

  auto t = ChatTemplate::Parse(
      "{{ tools is none }} {{ documents is none }} {{ enable_thinking }} {{ messages | length }} {{ bos_token }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(r).value(), "true true false 4 <BOS>");
}

TEST(ChatTemplateTest, ValidatesTheRequest) {
  ChatRequest r;
  r.messages = ordered_json::object();
  EXPECT_EQ(ChatTemplate::BuildContext(r).status().code(), StatusCode::kInvalidArgument);
  r.messages = ordered_json::parse(R"([{"content": "no role"}])");
  EXPECT_NE(ChatTemplate::BuildContext(r).status().message().find("messages[0].role"), std::string::npos);
  r.messages = ordered_json::parse(R"([{"role": "user", "content": 5}])");
  EXPECT_NE(ChatTemplate::BuildContext(r).status().message().find("messages[0].content"), std::string::npos);
  r.messages = ordered_json::parse(R"([{"role": "user", "content": null}])");
  EXPECT_TRUE(ChatTemplate::BuildContext(r).ok());
  r.tools = ordered_json::object();
  EXPECT_NE(ChatTemplate::BuildContext(r).status().message().find("tools"), std::string::npos);
}

TEST(ChatTemplateTest, ToolSchemasKeepTheirKeyOrder) {
  ChatRequest r;
  r.messages = ordered_json::parse(R"([{"role": "user", "content": "weather?"}])");
  r.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "w", "parameters":
      {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}])");
  auto t = ChatTemplate::Parse("{% for tool in tools %}{{ tool | tojson }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(r).value(),
            R"({"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": )"
            R"({"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}})");
}

TEST(ChatTemplateTest, ErrorsComeBackAsStatus) {
  auto bad = ChatTemplate::Parse("{% for m in messages %}\n{{ m.role }\n{% endfor %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();

  auto t = ChatTemplate::Parse(
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(Conversation());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("raise_exception: Conversation roles must be user or assistant"),
            std::string::npos);
}

TEST(ChatTemplateTest, StrftimeNowCanBePinned) {
  setenv("TZ", "UTC", 1);
  tzset();
  ChatRequest r = Conversation();
  r.now_unix = 1735734840;  // 2025-01-01 12:34:00 UTC
  auto t = ChatTemplate::Parse("Today Date: {{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(r).value(), "Today Date: 01 Jan 2025");
}

TEST(ChatTemplateTest, RendersConcurrently) {
  auto t = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(t.ok());
  const ChatRequest r = Conversation();
  const std::string want = t->Render(r).value();
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 100; ++k) good += t->Render(r).value() == want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 600);
}

TEST(ChatTemplateTest, RealTemplateWithTools) {
  KVS_REQUIRE_SHARED(path, "templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = ChatTemplate::Parse(ss.str());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ChatRequest r;
  r.messages = ordered_json::parse(R"([{"role": "user", "content": "Weather in Oslo?"}])");
  r.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  r.add_generation_prompt = true;
  auto out = t->Render(r);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(out->find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos)
      << *out;
  const std::string tail = "<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n";
  ASSERT_GE(out->size(), tail.size());
  EXPECT_EQ(out->substr(out->size() - tail.size()), tail);
}

TEST(ChatTemplateTest, FromGguf) {
  KVS_REQUIRE_SHARED(phi3, "vocab/ggml-vocab-phi-3.gguf");
  auto file = gguf::GgufFile::Open(phi3);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto t = ChatTemplate::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto special = ChatTemplate::SpecialTokensFromGguf(**file);
  ASSERT_TRUE(special.ok()) << special.status().ToString();
  EXPECT_EQ(special->first, "<s>");
  EXPECT_FALSE(special->second.empty());
  ChatRequest r;
  r.messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                       {"role": "user", "content": "Bye"}])");
  r.bos_token = special->first;
  r.eos_token = special->second;
  EXPECT_EQ(t->Render(r).value(), "<s><|user|>\nHi<|end|>\n<|assistant|>\nHello<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n");
  EXPECT_EQ(ChatTemplate::FromGguf(**file, "tool_use").status().code(), StatusCode::kNotFound);

  KVS_REQUIRE_SHARED(spm, "vocab/ggml-vocab-llama-spm.gguf");
  auto no_template = gguf::GgufFile::Open(spm);
  ASSERT_TRUE(no_template.ok());
  EXPECT_EQ(ChatTemplate::FromGguf(**no_template).status().code(), StatusCode::kNotFound);
}

}  // namespace chat_template_test
}  // namespace kvs::tmpl
