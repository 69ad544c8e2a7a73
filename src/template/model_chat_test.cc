// The chat side of a loaded model (LoadModelChatTemplate, SetSpecialTokens).
#include "template/model_chat.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {
namespace model_chat_test {

using tok::Tokenizer;

// The chat side of a model: its own template and BOS/EOS strings, or ChatML
// for a model without a template (stories260K has none).
TEST(ModelChat, OwnTemplateOrChatml) {
  auto file = gguf::GgufFile::Open(kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto chat = LoadModelChatTemplate(**t);
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_FALSE(chat->is_fallback);
  ChatRequest r;
  r.messages.push_back({{"role", "user"}, {"content", "Hi"}});
  r.add_generation_prompt = true;
  SetSpecialTokens(**t, &r);
  EXPECT_EQ(r.bos_token, "<|bos|>");
  auto text = chat->tmpl.Render(r);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "<|bos|><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto sfile = gguf::GgufFile::Open(path);
  ASSERT_TRUE(sfile.ok());
  auto st = Tokenizer::FromGguf(**sfile);
  ASSERT_TRUE(st.ok());
  auto fallback = LoadModelChatTemplate(**st);
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_TRUE(fallback->is_fallback);
  ChatRequest sr;
  SetSpecialTokens(**st, &sr);
  EXPECT_EQ(sr.bos_token, "<s>");
  EXPECT_EQ(sr.eos_token, "</s>");
}

}  // namespace model_chat_test
}  // namespace kvs::tmpl

namespace kvs::tmpl {
namespace model_chat_test {

// The bundled tiny model's tokenizer with another chat template.
std::unique_ptr<tok::Tokenizer> TinyWithTemplate(const std::string& source) {
  auto file = gguf::GgufFile::Open(kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf");
  KVS_CHECK(file.ok());
  auto t = tok::Tokenizer::FromGguf(**file);
  KVS_CHECK(t.ok());
  tok::TokenizerSpec spec = (*t)->spec();
  spec.chat_template = source;
  auto out = tok::Tokenizer::FromSpec(std::move(spec));
  KVS_CHECK(out.ok());
  return std::move(out).value();
}

TEST(ModelChatProbe, BrokenTemplatesAreReportedAtLoad) {
  // Exceeds a budget on a small conversation: refused, naming the budget.
  auto hostile = LoadModelChatTemplate(*TinyWithTemplate(
      "{% set ns = namespace(x=[1]) %}{% for i in range(64) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}"));
  ASSERT_FALSE(hostile.ok());
  EXPECT_TRUE(hostile.status().code() == StatusCode::kResourceExhausted ||
              hostile.status().code() == StatusCode::kDeadlineExceeded)
      << hostile.status().ToString();
  EXPECT_NE(hostile.status().message().find("exceeds a render budget on the start-up probe (a user message)"),
            std::string::npos)
      << hostile.status().message();
  // Does not parse: refused.
  EXPECT_FALSE(LoadModelChatTemplate(*TinyWithTemplate("{% if %}")).ok());
  // Fails on every conversation: kept, with a warning naming line and column.
  auto failing = LoadModelChatTemplate(*TinyWithTemplate("{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}"));
  ASSERT_TRUE(failing.ok()) << failing.status().ToString();
  EXPECT_FALSE(failing->is_fallback);
  ASSERT_EQ(failing->probe.warnings.size(), 1u);
  EXPECT_NE(failing->probe.warnings[0].find("start-up probe (a user message): template error at line 1, column"),
            std::string::npos)
      << failing->probe.warnings[0];
  // Unless the caller prefers ChatML, for all three.
  ChatTemplateLoadOptions fall_back;
  fall_back.fall_back_if_broken = true;
  for (const char* source : {"{% if %}", "{{ messages[0].content | no_such_filter }}",
                             "{% for i in range(100000000) %}{% endfor %}"}) {
    auto chatml = LoadModelChatTemplate(*TinyWithTemplate(source), fall_back);
    ASSERT_TRUE(chatml.ok()) << chatml.status().ToString();
    EXPECT_TRUE(chatml->is_fallback) << source;
    ASSERT_EQ(chatml->probe.warnings.size(), 1u) << source;
    EXPECT_NE(chatml->probe.warnings[0].find("using ChatML instead"), std::string::npos);
  }
}

TEST(ModelChatProbe, TemplatesMayDeclineRicherConversations) {
  auto strict = LoadModelChatTemplate(*TinyWithTemplate(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"));
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_FALSE(strict->is_fallback);
  EXPECT_TRUE(strict->probe.warnings.empty());
  ASSERT_EQ(strict->probe.notes.size(), 1u);
  EXPECT_NE(strict->probe.notes[0].find("System role not supported"), std::string::npos) << strict->probe.notes[0];
}

// A template that raises on the system role gets it polyfilled: the system
// prompt joins the first user message; the loaded template carries its
// capabilities.
TEST(ModelChatProbe, CapabilitiesAreDetectedAtLoad) {
  auto strict = LoadModelChatTemplate(*TinyWithTemplate(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"));
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  const ChatCapabilities& caps = strict->tmpl.capabilities();
  EXPECT_TRUE(caps.probed);
  EXPECT_FALSE(caps.system_role);
  EXPECT_FALSE(caps.tools);
  EXPECT_TRUE(caps.tool_role);  // "<|im_start|>tool\n..." shows the result
  EXPECT_EQ(strict->origin, "the model's");
  // The bundled model: ChatML without tools.
  auto file = gguf::GgufFile::Open(kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf");
  ASSERT_TRUE(file.ok());
  auto tiny = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tiny.ok());
  auto chat = LoadModelChatTemplate(**tiny);
  ASSERT_TRUE(chat.ok());
  const std::vector<std::string> expected = {"tool-calls-as-text", "tool-definitions-in-system"};
  EXPECT_EQ(chat->tmpl.capabilities().Polyfills(), expected);
}

// ChatTemplateLoadOptions::override: a built-in or a file replaces the
// model's template; what cannot be read or parsed is an error naming it,
// even with fall_back_if_broken.
TEST(ModelChatProbe, OverrideByBuiltinOrFile) {
  auto file = gguf::GgufFile::Open(kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf");
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  ChatTemplateLoadOptions o;
  o.override = "llama3";
  auto llama3 = LoadModelChatTemplate(**tok, o);
  ASSERT_TRUE(llama3.ok()) << llama3.status().ToString();
  EXPECT_EQ(llama3->origin, "built-in llama3");
  EXPECT_FALSE(llama3->is_fallback);
  EXPECT_NE(llama3->tmpl.source().find("<|start_header_id|>"), std::string::npos);
  EXPECT_TRUE(llama3->tmpl.capabilities().probed);

  const std::string dir = kvs::testing::TempDir("chat_override").string();
  const std::string good = dir + "/good.jinja", broken = dir + "/broken.jinja";
  std::ofstream(good) << "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
  std::ofstream(broken) << "{% for m in messages %}\n{% if %}";
  o.override = good;
  auto from_file = LoadModelChatTemplate(**tok, o);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->origin, "file " + good);
  ChatRequest r;
  r.messages.push_back({{"role", "user"}, {"content", "Hi"}});
  EXPECT_EQ(*from_file->tmpl.Render(r), "[user]Hi");

  o.fall_back_if_broken = true;
  o.override = broken;
  auto bad = LoadModelChatTemplate(**tok, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(broken), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().ToString();
  o.override = dir + "/missing.jinja";
  auto missing = LoadModelChatTemplate(**tok, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.jinja: cannot open it"), std::string::npos)
      << missing.status().ToString();
}

// No real template in ../shared/templates is refused by the probe (no false
// alarms); what they decline is printed.
TEST(ModelChatProbe, RealTemplatesPass) {
  KVS_REQUIRE_SHARED(dir, "templates");
  int n = 0, warned = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".jinja") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto chat = ChatTemplate::Parse(ss.str());
    ASSERT_TRUE(chat.ok()) << e.path() << ": " << chat.status().ToString();
    ProbeReport report;
    Status s = ProbeChatTemplate(*chat, "<s>", "</s>", RenderLimits{}, &report);
    EXPECT_TRUE(s.ok()) << e.path().filename() << ": " << s.ToString();
    for (const std::string& w : report.warnings) std::cout << e.path().filename().string() << ": warning: " << w << "\n";
    for (const std::string& n : report.notes) std::cout << e.path().filename().string() << ": " << n << "\n";
    warned += report.warnings.empty() ? 0 : 1;
    ++n;
  }
  EXPECT_GT(n, 0);
  // One template needs variables only its own clients pass (firefunction's
  // `functions` and `datetime`): a warning, never a refusal.
  EXPECT_LE(warned, 1);
}

}  // namespace model_chat_test
}  // namespace kvs::tmpl
