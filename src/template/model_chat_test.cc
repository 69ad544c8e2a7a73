// The chat side of a loaded model (LoadModelChatTemplate, SetSpecialTokens).
#include "template/model_chat.h"

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {
namespace {

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

}  // namespace
}  // namespace kvs::tmpl
