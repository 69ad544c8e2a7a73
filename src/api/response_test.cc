#include "api/response.h"

#include <gtest/gtest.h>

#include "api/openai_request.h"

namespace kvs::api {
namespace {

TokenOutput Tok(int32_t id, std::string text) {
  TokenOutput t;
  t.token_id = id;
  t.piece = text;
  t.text = std::move(text);
  t.logprob = -0.5f;
  return t;
}

// A stop string spanning tokens is held back and never released; the
// tokens before the cut keep their logprobs, the stop string's do not.
TEST(ChoiceTextTest, StopStringCutsTextAndLogprobs) {
  ChoiceText c(std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"END"}), /*logprobs=*/true);
  std::string out;
  EXPECT_FALSE(c.AddToken(Tok(1, "ab"), &out));
  EXPECT_FALSE(c.AddToken(Tok(2, "cE"), &out));  // "E" may start the stop string
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(c.TakeReadyLogprobs().size(), 1u);  // "ab" only: "cE" is not wholly released
  EXPECT_TRUE(c.AddToken(Tok(3, "ND!"), &out));
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(c.done());
  EXPECT_TRUE(c.cut_by_stop());
  const std::vector<LogprobToken> ready = c.TakeReadyLogprobs();
  ASSERT_EQ(ready.size(), 1u);  // "cE" begins before the cut; "ND!" does not
  EXPECT_EQ(ready[0].token.token_id, 2);
  EXPECT_EQ(ready[0].start, 2u);
}

TEST(ChoiceTextTest, EndReleasesWhatWasHeldBack) {
  auto stops = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"xyz"});
  ChoiceText c(stops, false);
  std::string out;
  c.AddToken(Tok(1, "hello x"), &out);
  EXPECT_EQ(out, "hello ");
  EXPECT_FALSE(c.End("y", &out));
  EXPECT_EQ(out, "hello xy");
  ChoiceText d(stops, false);
  out.clear();
  d.AddToken(Tok(1, "a xy"), &out);
  EXPECT_TRUE(d.End("z tail", &out));  // the stop string completes in the tail
  EXPECT_EQ(out, "a ");
}

TEST(ResponseShapeTest, ChunksAndBodyHaveOpenAiShapes) {
  ResponseShape chat("chatcmpl-1", 7, "m", /*chat=*/true, /*include_usage=*/true);
  nlohmann::json start = chat.StartChunk(0, "");
  EXPECT_EQ(start["object"], "chat.completion.chunk");
  EXPECT_EQ(start["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(start["usage"].is_null());
  EXPECT_EQ(chat.DeltaChunk(1, "hi", nullptr)["choices"][0]["delta"]["content"], "hi");
  EXPECT_EQ(chat.FinishChunk(0, "stop")["choices"][0]["finish_reason"], "stop");
  Usage u{5, 3, 2, std::nullopt};
  EXPECT_EQ(chat.UsageChunk(u)["usage"]["total_tokens"], 8);
  EXPECT_FALSE(chat.UsageChunk(u)["usage"].contains("completion_tokens_details"));
  ResponseShape text("cmpl-1", 7, "m", false, false);
  EXPECT_TRUE(text.StartChunk(0, "").is_null());  // nothing to echo
  EXPECT_EQ(text.StartChunk(0, "echo")["choices"][0]["text"], "echo");
  nlohmann::json body = text.Body({{0, "abc", nullptr, "length", nullptr, std::nullopt}}, u);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  std::vector<LogprobToken> toks = {{Tok(4, "ab"), 0, 2}};
  nlohmann::json lp = text.Logprobs(10, toks);
  EXPECT_EQ(lp["text_offset"][0], 10);
  EXPECT_EQ(lp["tokens"][0], "ab");
  nlohmann::json acc;
  ResponseShape::AppendLogprobs(acc, lp);
  ResponseShape::AppendLogprobs(acc, lp);
  EXPECT_EQ(acc["tokens"].size(), 2u);
}

TEST(ResponseShapeTest, ReasoningContent) {
  ResponseShape chat("chatcmpl-1", 7, "m", true, false);
  const nlohmann::json chunk = chat.ReasoningChunk(2, "hmm");
  EXPECT_EQ(chunk["choices"][0]["index"], 2);
  EXPECT_EQ(chunk["choices"][0]["delta"], nlohmann::json({{"reasoning_content", "hmm"}}));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  Usage u{5, 10, 0, 7};
  EXPECT_EQ(chat.UsageChunk(u)["usage"]["completion_tokens_details"]["reasoning_tokens"], 7);
  FinalChoice thought{0, "4", nullptr, "stop", nullptr, "two plus two"};
  FinalChoice none{1, "", nullptr, "length", nullptr, ""};
  FinalChoice plain{2, "x", nullptr, "stop", nullptr, std::nullopt};
  const nlohmann::json body = chat.Body({thought, none, plain}, u);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "two plus two");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "4");
  EXPECT_TRUE(body["choices"][1]["message"]["reasoning_content"].is_null());
  EXPECT_EQ(body["choices"][1]["message"]["content"], "");
  EXPECT_FALSE(body["choices"][2]["message"].contains("reasoning_content"));
  EXPECT_EQ(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 7);
}

TEST(TokenizeRequestTest, PromptOrMessages) {
  Json body = Json::parse(R"({"prompt":"hi","return_token_strs":true,"model":"m"})");
  TokenizeRequest r;
  ASSERT_FALSE(ParseTokenizeRequest(body, &r).has_value());
  EXPECT_EQ(*r.prompt, "hi");
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_TRUE(r.return_token_strs);
  EXPECT_EQ(*r.model, "m");
  body = Json::parse(R"({"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false})");
  ASSERT_FALSE(ParseTokenizeRequest(body, &r).has_value());
  EXPECT_FALSE(r.prompt.has_value());
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_EQ(r.chat.messages.size(), 1u);
  body = Json::parse(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},
                         "reasoning_effort":"high"})");
  ASSERT_FALSE(ParseTokenizeRequest(body, &r).has_value());
  EXPECT_EQ(r.chat.template_kwargs, Json::parse(R"({"reasoning_effort":"high","enable_thinking":false})"));
  EXPECT_EQ(ParseTokenizeRequest(Json::parse(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]})"),
                                 &r)
                ->param,
            "chat_template_kwargs");
  EXPECT_EQ(ParseTokenizeRequest(Json::parse(R"({"text":"x"})"), &r)->param, "prompt");
  EXPECT_EQ(ParseTokenizeRequest(Json::parse(R"({"prompt":"x","add_special_tokens":1})"), &r)->param,
            "add_special_tokens");
  DetokenizeRequest d;
  ASSERT_FALSE(ParseDetokenizeRequest(Json::parse(R"({"tokens":[1,2]})"), &d).has_value());
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ParseDetokenizeRequest(Json::parse(R"({"tokens":[1,-5]})"), &d)->param, "tokens");
}

}  // namespace
}  // namespace kvs::api
