// The dialect-aware parts of sse_relay.h, checked against the events the
// replicas' own dialect shapes (api/responses_api.h, api/messages_api.h)
// write, so the proxy's idea of "carries a token" and "usage" follows what
// a replica really sends.
#include "gateway/sse_relay.h"

#include <gtest/gtest.h>

#include "api/messages_api.h"
#include "api/responses_api.h"
#include "http/sse_parser.h"

namespace kvs::gateway {
namespace {

using nlohmann::json;
using api::Dialect;

api::DialectEnd End(int64_t prompt, int64_t cached, int64_t completion) {
  api::DialectEnd end;
  end.finish_reason = "length";
  end.usage.prompt_tokens = prompt;
  end.usage.cached_tokens = cached;
  end.usage.completion_tokens = completion;
  return end;
}

// The whole stream of a shape, its events in order.
struct Stream {
  std::vector<api::SseOut> events;
};

Stream RunShape(api::DialectShape& shape) {
  Stream s;
  api::Usage u;
  u.prompt_tokens = 40;
  for (auto& e : shape.Start(u)) s.events.push_back(std::move(e));
  for (auto& e : shape.Text("Once")) s.events.push_back(std::move(e));
  for (auto& e : shape.Text(" upon")) s.events.push_back(std::move(e));
  for (auto& e : shape.Finish(End(40, 32, 2))) s.events.push_back(std::move(e));
  return s;
}

// Events held before the first token: exactly those before the first text delta.
size_t LeadingTokenless(Dialect d, const Stream& s) {
  size_t n = 0;
  while (n < s.events.size() && !DialectEventCarriesToken(d, s.events[n].event)) ++n;
  return n;
}

TEST(SseRelayTest, AnthropicStreamsAreHeldUntilTheFirstTextDelta) {
  auto shape = api::MakeMessagesShape("msg_1", "m");
  const Stream s = RunShape(*shape);
  const size_t held = LeadingTokenless(Dialect::kAnthropic, s);
  ASSERT_LT(held, s.events.size());
  EXPECT_EQ(s.events[held].event, "content_block_delta");
  EXPECT_EQ(held, 3u);  // message_start, ping, content_block_start
  int deltas = 0;
  for (const auto& e : s.events) deltas += DialectEventIsDelta(Dialect::kAnthropic, e.event) ? 1 : 0;
  EXPECT_EQ(deltas, 2);
  // Everything after the first delta goes out as it comes; so do errors.
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kAnthropic, "message_delta"));
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kAnthropic, "message_stop"));
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kAnthropic, "error"));
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kAnthropic, "something_new"));
}

TEST(SseRelayTest, ResponsesStreamsAreHeldUntilTheFirstTextDelta) {
  auto shape = api::MakeResponsesShape("resp_1", 0, "m", json::object());
  const Stream s = RunShape(*shape);
  const size_t held = LeadingTokenless(Dialect::kResponses, s);
  ASSERT_LT(held, s.events.size());
  EXPECT_EQ(s.events[held].event, "response.output_text.delta");
  EXPECT_EQ(held, 4u);  // created, in_progress, output_item.added, content_part.added
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kResponses, "response.completed"));
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kResponses, "response.function_call_arguments.delta"));
  EXPECT_TRUE(DialectEventCarriesToken(Dialect::kResponses, "error"));
  EXPECT_FALSE(DialectEventCarriesToken(Dialect::kResponses, "response.reasoning_summary_part.added"));
}

TEST(SseRelayTest, UsageIsReadFromEachDialectsFinalEvent) {
  // Anthropic: message_start knows the prompt; message_delta has it all,
  // input_tokens being the uncached part only.
  auto messages = api::MakeMessagesShape("msg_1", "m");
  const Stream a = RunShape(*messages);
  const json start = a.events.front().data;
  ASSERT_EQ(a.events.front().event, "message_start");
  const json* u = EventUsage(Dialect::kAnthropic, "message_start", start);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(ReadUsage(Dialect::kAnthropic, *u).prompt, 40);
  const api::SseOut& delta = a.events[a.events.size() - 2];
  ASSERT_EQ(delta.event, "message_delta");
  u = EventUsage(Dialect::kAnthropic, delta.event, delta.data);
  ASSERT_NE(u, nullptr);
  UsageReport r = ReadUsage(Dialect::kAnthropic, *u);
  EXPECT_EQ(r.prompt, 40);
  EXPECT_EQ(r.completion, 2);
  EXPECT_EQ(r.cached, 32);
  // The same figures from the whole body.
  r = ReadUsage(Dialect::kAnthropic, messages->Body()["usage"]);
  EXPECT_EQ(r.prompt, 40);
  EXPECT_EQ(r.completion, 2);
  // Anthropic's own message_delta carries output_tokens only: the prompt is message_start's.
  EXPECT_EQ(ReadUsage(Dialect::kAnthropic, json::parse(R"({"output_tokens":5})")).prompt, -1);

  auto responses = api::MakeResponsesShape("resp_1", 0, "m", json::object());
  const Stream s = RunShape(*responses);
  const api::SseOut& done = s.events.back();
  ASSERT_EQ(done.event, "response.incomplete");
  EXPECT_EQ(EventUsage(Dialect::kResponses, "response.created", s.events.front().data), nullptr);
  u = EventUsage(Dialect::kResponses, done.event, done.data);
  ASSERT_NE(u, nullptr);
  r = ReadUsage(Dialect::kResponses, *u);
  EXPECT_EQ(r.prompt, 40);
  EXPECT_EQ(r.completion, 2);
  EXPECT_EQ(r.cached, 32);
  r = ReadUsage(Dialect::kResponses, responses->Body()["usage"]);
  EXPECT_EQ(r.prompt, 40);

  r = ReadUsage(Dialect::kOpenAI,
                json::parse(R"({"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":0}})"));
  EXPECT_EQ(r.prompt, 7);
  EXPECT_EQ(r.completion, 3);
  EXPECT_EQ(r.cached, 0);
  EXPECT_EQ(ReadUsage(Dialect::kOpenAI, json(nullptr)).prompt, -1);
}

// The gateway's in-band error reads as the replica's own would.
TEST(SseRelayTest, StreamErrorsTakeTheDialectsShape) {
  const api::ApiError e =
      api::MakeError(502, "the upstream replica failed mid-stream", "upstream_error", "upstream_failed");
  http::SseParser p;
  auto ev = p.Feed(StreamErrorEvents(Dialect::kAnthropic, e, 7));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event, "error");
  json j = json::parse(ev[0].data);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "api_error");
  EXPECT_EQ(j["error"]["message"], e.message);

  ev = p.Feed(StreamErrorEvents(Dialect::kResponses, e, 7));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event, "error");
  j = json::parse(ev[0].data);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["code"], "upstream_failed");
  EXPECT_EQ(j["sequence_number"], 7);

  ev = p.Feed(StreamErrorEvents(Dialect::kOpenAI, e, 0));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(json::parse(ev[0].data)["error"]["code"], "upstream_failed");
  EXPECT_EQ(ev[1].data, "[DONE]");
}

}  // namespace
}  // namespace kvs::gateway
