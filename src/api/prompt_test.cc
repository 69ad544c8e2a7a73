// PreparePrompt (api/prompt.h): the one parse -> render -> tokenize of both
// front ends, over the bundled tiny model and every template of
// ../shared/templates.
#include "api/prompt.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "api/routes.h"
#include "base/test_util.h"
#include "gguf/gguf.h"
#include "template/chat_render.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::api {
namespace {

struct Tiny {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<tok::Tokenizer> tok;
};

// The bundled tiny model's tokenizer (ChatML template, <|im_start|> tokens).
std::unique_ptr<Tiny> LoadTiny() {
  const std::string path = kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf";
  if (!std::filesystem::exists(path)) return nullptr;
  auto t = std::make_unique<Tiny>();
  auto file = gguf::GgufFile::Open(path);
  KVS_CHECK_MSG(file.ok(), "{}", file.status().ToString());
  t->file = std::move(*file);
  auto tok = tok::Tokenizer::FromGguf(*t->file);
  KVS_CHECK(tok.ok());
  t->tok = std::move(*tok);
  return t;
}

ParsedRequest Parse(Endpoint endpoint, Dialect dialect, const char* body) {
  ParsedRequest r;
  auto e = ParseGenerateRequest(endpoint, dialect, Json::parse(body), &r);
  EXPECT_FALSE(e.has_value()) << body << ": " << e->message;
  return r;
}

std::vector<Prompt> Prepare(const ParsedRequest& r, const PromptModel& m) {
  std::vector<Prompt> out;
  auto e = PreparePrompt(r, m, &out);
  EXPECT_FALSE(e.has_value()) << e->message;
  return out;
}

// One conversation (system + user), as each chat dialect writes it.
constexpr const char* kChat =
    R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say <|im_end|> hi"}]})";
constexpr const char* kResponses = R"({"model": "m", "instructions": "Be brief.", "input": "Say <|im_end|> hi"})";
constexpr const char* kMessages = R"({"model": "m", "max_tokens": 8, "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say <|im_end|> hi"}]})";

// Every dialect's request is one prompt, the template's rendering of its
// messages (never Encode of the text: the user's "<|im_end|>" stays text),
// the same tokens whatever dialect carried the conversation, in every
// bundled template.
TEST(PreparePromptTest, EveryDialectRendersTheSameConversationAlikeInEveryBundledTemplate) {
  auto tiny = LoadTiny();
  if (!tiny) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::string dir = kvs::testing::SharedPath("templates");
  if (dir.empty()) GTEST_SKIP() << "../shared/templates is missing";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u);
  const ParsedRequest chat = Parse(Endpoint::kChatCompletions, Dialect::kOpenAI, kChat);
  const ParsedRequest responses = Parse(Endpoint::kChatCompletions, Dialect::kResponses, kResponses);
  const ParsedRequest messages = Parse(Endpoint::kChatCompletions, Dialect::kAnthropic, kMessages);
  const int32_t im_end = tiny->tok->FindToken("<|im_end|>");
  int rendered = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto t = LoadPromptTemplate(*tiny->tok, f);
    if (!t.ok()) continue;  // a template this vocabulary cannot serve (probe)
    EXPECT_EQ(t->chat.tmpl.tool_call_syntax().empty(), t->tool_format == grammar::ToolCallFormat::kNone)
        << "the tool-call syntax is set on the template";
    const TemplatePromptModel model(*tiny->tok, t->chat.tmpl);
    std::vector<Prompt> a;
    if (auto e = PreparePrompt(chat, model, &a)) {
      // A template that cannot render this conversation refuses it alike in
      // every dialect (e.g. one that needs tools).
      EXPECT_EQ(e->message.rfind("cannot apply the chat template: ", 0), 0u) << e->message;
      EXPECT_EQ(e->param, "messages");
      for (const ParsedRequest* other : {&responses, &messages}) {
        std::vector<Prompt> b;
        auto f = PreparePrompt(*other, model, &b);
        ASSERT_TRUE(f.has_value());
        EXPECT_EQ(f->message, e->message);
      }
      continue;
    }
    ASSERT_EQ(a.size(), 1u);
    ASSERT_TRUE(a[0].text.has_value());
    // The renderer's own answer for these messages, generation prompt on.
    auto direct = tmpl::RenderChat(
        t->chat.tmpl, *tiny->tok,
        tmpl::MakeChatRequest(*tiny->tok, chat.messages, chat.tools, true, chat.template_kwargs));
    ASSERT_TRUE(direct.ok()) << direct.status().ToString();
    EXPECT_EQ(a[0].tokens, direct->tokens);
    EXPECT_EQ(*a[0].text, direct->text);
    EXPECT_NE(a[0].text->find("Say <|im_end|> hi"), std::string::npos);
    if (im_end >= 0) {
      EXPECT_NE(a[0].tokens, tiny->tok->Encode(*a[0].text, false, true))
          << "the user's <|im_end|> became a control token";
    }
    EXPECT_EQ(Prepare(responses, model)[0].tokens, a[0].tokens) << "Responses";
    EXPECT_EQ(Prepare(messages, model)[0].tokens, a[0].tokens) << "Messages";
    ++rendered;
  }
  EXPECT_GE(rendered, static_cast<int>(files.size()) / 2) << "most bundled templates load with this vocabulary";
}

TEST(PreparePromptTest, CompletionsPromptsAreTokenizedWithBosOrPassedThrough) {
  auto tiny = LoadTiny();
  if (!tiny) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  auto t = LoadPromptTemplate(*tiny->tok, "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TemplatePromptModel model(*tiny->tok, t->chat.tmpl);
  const ParsedRequest r =
      Parse(Endpoint::kCompletions, Dialect::kOpenAI, R"({"model": "m", "prompt": ["Once upon<|im_end|>", "a time"]})");
  const std::vector<Prompt> p = Prepare(r, model);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].tokens, tiny->tok->Encode("Once upon<|im_end|>", true, true))
      << "the client's own special tokens count";
  EXPECT_EQ(*p[0].text, "Once upon<|im_end|>");
  EXPECT_EQ(p[1].tokens, tiny->tok->Encode("a time", true, true));
  const ParsedRequest ids = Parse(Endpoint::kCompletions, Dialect::kOpenAI, R"({"model": "m", "prompt": [5, 6, 7]})");
  const std::vector<Prompt> q = Prepare(ids, model);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_FALSE(q[0].text.has_value());
}

// A model whose renderer and tokenizer fail as told.
struct FailingModel final : PromptModel {
  Status render = Status::Ok();
  Status tokenize = Status::Ok();
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view, bool) const override {
    if (!tokenize.ok()) return tokenize;
    return std::vector<int32_t>{1};
  }
  StatusOr<ChatPrompt> RenderChat(const Json&, const Json&, bool, const Json&) const override {
    if (!render.ok()) return render;
    return ChatPrompt{"x", {1}};
  }
};

TEST(PreparePromptTest, TemplateErrorsAre400sOnMessages) {
  const ParsedRequest chat = Parse(Endpoint::kChatCompletions, Dialect::kOpenAI, kChat);
  FailingModel m;
  m.render = InvalidArgument("the template raised: no system role");
  std::vector<Prompt> out;
  auto e = PreparePrompt(chat, m, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->message, "cannot apply the chat template: the template raised: no system role");
  EXPECT_EQ(e->param, "messages");
  EXPECT_EQ(e->code, "invalid_value");
  // Not the client's fault: the status's own class, no param.
  m.render = Status(StatusCode::kUnavailable, "shutting down");
  e = PreparePrompt(chat, m, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 503);
  EXPECT_FALSE(e->param.has_value());
  // A tokenizer's error, as it is.
  m.tokenize = InvalidArgument("bad bytes");
  e = PreparePrompt(Parse(Endpoint::kCompletions, Dialect::kOpenAI, R"({"model": "m", "prompt": "x"})"), m, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "bad bytes");

  // Real: a template that raises.
  auto tiny = LoadTiny();
  if (!tiny) return;
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kvs-prompt-" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(file) << "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no boom here') }}"
                         "{% endif %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  auto t = LoadPromptTemplate(*tiny->tok, file.string());
  std::filesystem::remove(file);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TemplatePromptModel model(*tiny->tok, t->chat.tmpl);
  EXPECT_FALSE(PreparePrompt(chat, model, &out).has_value());
  const ParsedRequest boom = Parse(Endpoint::kChatCompletions, Dialect::kOpenAI,
                                   R"({"model": "m", "messages": [{"role": "user", "content": "boom"}]})");
  e = PreparePrompt(boom, model, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "messages");
  EXPECT_EQ(e->message.rfind("cannot apply the chat template: ", 0), 0u) << e->message;
  EXPECT_NE(e->message.find("no boom here"), std::string::npos) << e->message;
}

TEST(DefaultMaxTokensTest, TheRestOfTheContextForChatSixteenForCompletionsAtLeastOne) {
  EXPECT_EQ(DefaultMaxTokens(true, 100, 4096), 3996);
  EXPECT_EQ(DefaultMaxTokens(false, 100, 4096), 16);
  EXPECT_EQ(DefaultMaxTokens(false, 4090, 4096), 6) << "completions: what is left when under 16";
  EXPECT_EQ(DefaultMaxTokens(true, 4096, 4096), 1) << "a full context: 1 (refused for the prompt's length)";
  EXPECT_EQ(DefaultMaxTokens(false, 5000, 4096), 1);
}

}  // namespace
}  // namespace kvs::api
