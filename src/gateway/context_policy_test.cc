// Content cleaning and the policy names (context_policy.h). Truncation needs
// the model's tokenizer and template: tests/gateway/context_test.mjs drives
// it through a real gateway and replica.
#include "gateway/context_policy.h"

#include <gtest/gtest.h>

namespace kvs::gateway {
namespace {

TEST(CleanTextTest, RemovesInvisibleAndControlCharacters) {
  // ZWSP, RLO, a tag character ("ASCII smuggling"), BOM, a C0 and a C1
  // control, DEL, soft hyphen, word joiner, LRM.
  std::string s = "Hel\u200Blo \u202Ewor\U000E0041ld\uFEFF\x01\u0085\x7F co\u00ADop\u2060\u200E!";
  EXPECT_EQ(CleanText(&s), 10);
  EXPECT_EQ(s, "Hello world coop!");
}

TEST(CleanTextTest, KeepsWhitespaceJoinersAndMalformedBytes) {
  // Tab, newlines, ZWNJ (Persian), ZWJ (an emoji sequence), a variation
  // selector, and a byte that is not UTF-8: all stay.
  const std::string kept = "a\tb\r\nc \u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645 \U0001F468\u200D\U0001F469 \u2764\uFE0F \xFF";
  std::string s = kept;
  EXPECT_EQ(CleanText(&s), 0);
  EXPECT_EQ(s, kept);
}

TEST(CleanTextTest, CleansEveryDialectsClientText) {
  api::Json chat = api::Json::parse(R"({"model": "m", "messages": [
      {"role": "system", "content": "s\u200By"},
      {"role": "user", "content": [{"type": "text", "text": "t\u202Ex"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c\u200B", "type": "function",
       "function": {"name": "f", "arguments": "{\"a\": \"\u200B\"}"}}]}]})");
  EXPECT_EQ(CleanRequestBody(api::Endpoint::kChatCompletions, api::Dialect::kOpenAI, &chat), 2);
  EXPECT_EQ(chat["messages"][0]["content"], "sy");
  EXPECT_EQ(chat["messages"][1]["content"][0]["text"], "tx");
  // Tool calls are the model's own output, not client text: untouched.
  EXPECT_EQ(chat["messages"][2]["tool_calls"][0]["id"], "c\u200B");

  api::Json messages = api::Json::parse(R"({"model": "m", "max_tokens": 5, "system": "a\u200Bb",
      "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                    "content": [{"type": "text", "text": "r\u2060s"}]}]}]})");
  EXPECT_EQ(CleanRequestBody(api::Endpoint::kChatCompletions, api::Dialect::kAnthropic, &messages), 2);
  EXPECT_EQ(messages["system"], "ab");
  EXPECT_EQ(messages["messages"][0]["content"][0]["content"][0]["text"], "rs");

  api::Json responses = api::Json::parse(R"({"model": "m", "instructions": "i\u200B",
      "input": [{"role": "user", "content": "u\u200B"}, {"type": "function_call_output", "call_id": "c",
                 "output": "o\u200B"}]})");
  EXPECT_EQ(CleanRequestBody(api::Endpoint::kChatCompletions, api::Dialect::kResponses, &responses), 3);
  EXPECT_EQ(responses["input"][1]["output"], "o");

  api::Json completions = api::Json::parse(R"({"model": "m", "prompt": ["p\u200Bq", "r"]})");
  EXPECT_EQ(CleanRequestBody(api::Endpoint::kCompletions, api::Dialect::kOpenAI, &completions), 1);
  EXPECT_EQ(completions["prompt"][0], "pq");
}

TEST(OverflowPolicyTest, NamesRoundTrip) {
  for (OverflowPolicy p : {OverflowPolicy::kReject, OverflowPolicy::kTruncateOldestTurns, OverflowPolicy::kTruncateMiddle}) {
    EXPECT_EQ(ParseOverflowPolicy(OverflowPolicyName(p)), p);
  }
  EXPECT_EQ(ParseOverflowPolicy("bogus"), OverflowPolicy::kReject);
}

}  // namespace
}  // namespace kvs::gateway
