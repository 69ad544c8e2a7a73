// The gateway counts exactly the tokens the replica will see: PromptCounter
// against the server's EngineBackend, both loaded with each template of
// ../shared/templates (model.chat_template) over the bundled tiny model, on
// conversations with tools and a tool loop (so the tool-call syntax the
// polyfills write, chosen at load, is part of what must agree).
#include "gateway/prompt_counter.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "api/routes.h"
#include "base/test_util.h"
#include "server/engine_backend.h"

namespace kvs::gateway {
namespace {

std::string TinyModel() {
  const std::string p = kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf";
  return std::filesystem::exists(p) ? p : "";
}

server::ServeConfig ReplicaConfig(const std::string& model, const std::string& chat_template) {
  server::ServeConfig c;
  c.model.path = model;
  c.model.chat_template = chat_template;
  c.model.max_context_length = 512;
  c.runtime.threads = 1;
  c.runtime.max_concurrent_requests = 1;
  return c;
}

constexpr const char* kBodies[] = {
    R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say <|im_end|> hi"}]})",
    R"({"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather",
          "description": "The weather in a city", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "messages": [{"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}],
        "chat_template_kwargs": {"enable_thinking": false}})",
};

TEST(PromptCounterTest, CountsTheReplicasTokensInEveryBundledTemplate) {
  const std::string model = TinyModel();
  if (model.empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::string dir = kvs::testing::SharedPath("templates");
  if (dir.empty()) GTEST_SKIP() << "../shared/templates is missing";
  std::vector<std::string> files = {""};  // the model's own first
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") files.push_back(e.path().string());
  }
  std::sort(files.begin() + 1, files.end());
  int compared = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f.empty() ? "the model's template" : f);
    auto replica = server::EngineBackend::Load(ReplicaConfig(model, f));
    auto counter = PromptCounter::Load(model, f);
    ASSERT_EQ(counter.ok(), replica.ok()) << "one loads the template, the other refuses it: "
                                          << (counter.ok() ? replica.status() : counter.status()).ToString();
    if (!replica.ok()) continue;
    for (const char* body : kBodies) {
      CountedRequest counted;
      auto e = (*counter)->Count(api::Endpoint::kChatCompletions, api::Json::parse(body), &counted);
      api::ParsedRequest req;
      ASSERT_FALSE(api::ParseGenerateRequest(api::Endpoint::kChatCompletions, api::Dialect::kOpenAI,
                                             api::Json::parse(body), &req));
      auto seen = (*replica)->RenderChatPrompt(req.messages, req.tools, true, req.template_kwargs);
      ASSERT_EQ(e.has_value(), !seen.ok()) << (e ? e->message : seen.status().ToString());
      if (e) {
        EXPECT_EQ(e->message, "cannot apply the chat template: " + seen.status().message());
        continue;
      }
      ASSERT_EQ(counted.prompts.size(), 1u);
      EXPECT_EQ(counted.prompts[0], seen->tokens);
      EXPECT_EQ(counted.prompt_text, seen->text);
      EXPECT_EQ(counted.total_prompt_tokens, static_cast<int64_t>(seen->tokens.size()));
      ++compared;
    }
    // Completions: the replica's tokenization of the client's text.
    CountedRequest counted;
    ASSERT_FALSE((*counter)->Count(api::Endpoint::kCompletions,
                                   api::Json::parse(R"({"model": "m", "prompt": ["Once upon", "<|im_start|>a time"]})"),
                                   &counted));
    ASSERT_EQ(counted.prompts.size(), 2u);
    EXPECT_EQ(counted.prompts[0], *(*replica)->Tokenize("Once upon", true));
    EXPECT_EQ(counted.prompts[1], *(*replica)->Tokenize("<|im_start|>a time", true));
    EXPECT_EQ(counted.prompt_text, "Once upon\n<|im_start|>a time");
  }
  EXPECT_GE(compared, static_cast<int>(files.size())) << "most templates render both conversations";
}

}  // namespace
}  // namespace kvs::gateway
