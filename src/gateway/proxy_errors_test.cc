// The proxy's own answers: the error each limit gives (status, code, param,
// the figures named, Retry-After) and the stream-event helpers that decide
// what is held back before the first token.
#include "gateway/proxy_errors.h"

#include <gtest/gtest.h>

#include "gateway/sse_relay.h"

namespace kvs::gateway {
namespace {

using nlohmann::json;

TEST(ProxyErrorsTest, ContextTooLongBlamesMaxTokensOnlyWhenThePromptFits) {
  api::ApiError e = ContextTooLong("messages", "max_completion_tokens", 1000, 200, 1024);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "max_completion_tokens");
  EXPECT_NE(e.message.find("needs 1200 tokens (1000 in the prompt + 200 max_tokens)"), std::string::npos) << e.message;
  EXPECT_EQ(e.extra["max_context_length"], 1024);

  // The prompt alone is too long: the prompt is the parameter to change.
  e = ContextTooLong("prompt", "max_tokens", 2000, 16, 1024);
  EXPECT_EQ(e.param, "prompt");
  // No max_tokens sent: the message does not mention lowering it.
  e = ContextTooLong("messages", "", 1024, 1, 1024);
  EXPECT_EQ(e.param, "messages");
  // /v1/responses names its own fields.
  e = ContextTooLong("input", "max_output_tokens", 1000, 200, 1024);
  EXPECT_EQ(e.param, "max_output_tokens");
  EXPECT_NE(e.message.find("lower max_output_tokens"), std::string::npos) << e.message;
  e = ContextTooLong("input", "", 1024, 1, 1024);
  EXPECT_EQ(e.param, "input");
  EXPECT_NE(e.message.find("the prompt is 1024 tokens"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("lower"), std::string::npos) << e.message;
}

TEST(ProxyErrorsTest, ModelNotFoundListsWhatIsServed) {
  api::ApiError e = ModelNotFound("gpt-4", {"a", "b"});
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  EXPECT_NE(e.message.find("'gpt-4' does not exist; this gateway serves 'a', 'b'"), std::string::npos) << e.message;
}

TEST(ProxyErrorsTest, RateLimitedNamesTheLimitAndWhenToRetry) {
  TenantLimits l;
  l.tokens_per_minute = 5000;
  AdmitResult r;
  r.reason = LimitReason::kTokens;
  r.tokens_used = 4900;
  r.retry_after_seconds = 2.3;
  api::ApiError e = RateLimited(r, l, "acme", 0, 300);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.code, "rate_limit_exceeded");
  EXPECT_EQ(e.retry_after_seconds, 3);  // rounded up
  EXPECT_EQ(e.extra["limit"], LimitReasonName(LimitReason::kTokens));
  EXPECT_NE(e.message.find("tenant 'acme' on tokens per minute: limit 5000, used 4900, requested 300"),
            std::string::npos) << e.message;
  EXPECT_NE(e.message.find("try again in 2.3s"), std::string::npos) << e.message;

  // Larger than the whole budget: no retry can succeed, so no Retry-After.
  r.reason = LimitReason::kTooLarge;
  e = RateLimited(r, l, "acme", 0, 9000);
  EXPECT_EQ(e.code, "request_too_large");
  EXPECT_FALSE(e.retry_after_seconds.has_value());

  // A sub-second wait still asks for at least one second.
  r.reason = LimitReason::kGlobalRequests;
  r.retry_after_seconds = 0.01;
  e = RateLimited(r, l, "acme", 50, 1);
  EXPECT_EQ(e.retry_after_seconds, 1);
  EXPECT_NE(e.message.find("50 requests/s for all tenants"), std::string::npos) << e.message;

  r.reason = LimitReason::kUnavailable;
  e = RateLimited(r, l, "acme", 0, 1);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "rate_limit_store_unavailable");
}

TEST(ProxyErrorsTest, UnavailableAnswersAskForARetryAndTimeoutsAre504) {
  for (const api::ApiError& e : {QueueFull("long", 8), QueueTimeout("long", 2.5), NoReplica(), GatewayOverloaded()}) {
    EXPECT_EQ(e.status, 503) << e.message;
    EXPECT_EQ(e.retry_after_seconds, 1) << e.message;
  }
  EXPECT_NE(QueueFull("long", 8).message.find("pool long is busy and 8 requests wait"), std::string::npos);
  EXPECT_EQ(QueueTimeout("long", 2.5).code, "queue_timeout");
  EXPECT_EQ(UpstreamFailed(true, 3, "x").status, 504);
  api::ApiError f = UpstreamFailed(false, 3, "connection refused");
  EXPECT_EQ(f.status, 502);
  EXPECT_NE(f.message.find("(3 attempts; last: connection refused)"), std::string::npos) << f.message;
  EXPECT_FALSE(f.retry_after_seconds.has_value());
}

TEST(SseRelayTest, RoleDeltasAndEmptyDeltasCarryNoToken) {
  EXPECT_FALSE(CarriesToken(json::parse(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})")));
  EXPECT_FALSE(CarriesToken(json::parse(R"({"choices":[{"index":0,"text":""}],"usage":null})")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"choices":[{"index":0,"text":"x"}]})")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"choices":[{"delta":{"tool_calls":[]}}]})")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"choices":[],"usage":{"prompt_tokens":3}})")));
  // What it does not recognise is passed on at once.
  EXPECT_TRUE(CarriesToken(json::parse(R"([1,2])")));
  EXPECT_TRUE(CarriesToken(json::parse(R"({"object":"something.else"})")));
}

TEST(SseRelayTest, StripNullUsageRemovesOnlyTheMember) {
  std::string d = R"({"id":"x","choices":[{"text":",\"usage\":null"}],"usage":null})";
  StripNullUsage(&d);
  // The text inside the string is escaped differently and stays.
  EXPECT_EQ(d, R"({"id":"x","choices":[{"text":",\"usage\":null"}]})");
  std::string u = R"({"choices":[],"usage":{"prompt_tokens":1}})";
  StripNullUsage(&u);
  EXPECT_EQ(u, R"({"choices":[],"usage":{"prompt_tokens":1}})");
}

}  // namespace
}  // namespace kvs::gateway
