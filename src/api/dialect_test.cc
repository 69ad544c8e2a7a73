// The Responses and Messages dialects without a server: requests rewritten
// into chat requests (and refused with the dialect's field names), and the
// event sequences and bodies their shapes build.
#include <gtest/gtest.h>

#include "api/dialect.h"
#include "api/messages_api.h"
#include "api/openai_shape.h"
#include "api/responses_api.h"

namespace kvs::api {
namespace {

using PlainJson = nlohmann::json;

Json J(const char* text) { return Json::parse(text); }

std::vector<std::string> Types(const std::vector<SseOut>& events) {
  std::vector<std::string> t;
  for (const auto& e : events) t.push_back(e.event);
  return t;
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  ParsedRequest r;
  auto e = ParseResponsesRequest(J(R"({"model": "m", "instructions": "Be brief.", "max_output_tokens": 7,
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
              {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
              {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\"x\":1}"},
              {"type": "function_call_output", "call_id": "c2", "output": "done"}],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}, {"type": "function", "name": "g"}],
    "tool_choice": {"type": "function", "name": "g"}})"),
                                  &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.dialect, Dialect::kResponses);
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  EXPECT_EQ(r.max_tokens, 7);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["role"], "assistant");
  ASSERT_EQ(r.messages[2]["tool_calls"].size(), 2u);  // consecutive calls: one turn
  EXPECT_EQ(r.messages[2]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c2");
  EXPECT_EQ(r.messages[3]["name"], "g");
  EXPECT_EQ(r.tools[0]["function"]["name"], "f");
  EXPECT_EQ(r.tool_choice, ParsedRequest::ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "g");
  EXPECT_EQ(r.dialect_echo["instructions"], "Be brief.");
}

TEST(ResponsesRequest, RefusalsNameTheResponsesField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m"})", "input"},
      {R"({"model": "m", "input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"model": "m", "input": []})", "input"},
      {R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "file_search"}]})", "tools[0].type"},
      {R"({"model": "m", "input": [{"type": "item_reference", "id": "x"}]})", "input[0].type"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "s",
          "schema": {"type": "array", "uniqueItems": true}}}})", "text.format.schema"},
      {R"({"model": "m", "input": "x", "temperature": 9})", "temperature"},
  };
  for (const auto& [body, param] : cases) {
    ParsedRequest r;
    auto e = ParseResponsesRequest(J(body), &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param.value_or(""), param) << body << ": " << e->message;
  }
}

TEST(ResponsesShape, StreamAndBodyDescribeTheSameItems) {
  auto shape = MakeResponsesShape("resp_abc", 1, "m", PlainJson::object());
  std::vector<SseOut> ev = shape->Start({});
  for (auto& e : shape->Text("Hel")) ev.push_back(e);
  for (auto& e : shape->Text("lo")) ev.push_back(e);
  for (auto& e : shape->ToolCall({0, "call_1", "f", "{\"a\""})) ev.push_back(e);
  for (auto& e : shape->ToolCall({0, std::nullopt, std::nullopt, ":1}"})) ev.push_back(e);
  DialectEnd end;
  end.finish_reason = "tool_calls";
  end.usage.prompt_tokens = 5;
  end.usage.completion_tokens = 3;
  for (auto& e : shape->Finish(end)) ev.push_back(e);
  const std::vector<std::string> want = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.output_item.added",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(Types(ev), want);
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].data["sequence_number"], i);
    EXPECT_EQ(ev[i].data["type"], ev[i].event);
  }
  const PlainJson body = shape->Body();
  EXPECT_EQ(body, ev.back().data["response"]);
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(body["output"][1]["arguments"], "{\"a\":1}");
  EXPECT_EQ(body["output"][1]["call_id"], "call_1");
  EXPECT_NE(body["output"][0]["id"], body["output"][1]["id"]);
  EXPECT_EQ(body["usage"]["total_tokens"], 8);
}

TEST(ResponsesShape, LengthIsIncomplete) {
  auto shape = MakeResponsesShape("resp_x", 1, "m", PlainJson::object());
  shape->Text("abc");
  DialectEnd end;
  end.finish_reason = "length";
  const auto ev = shape->Finish(end);
  EXPECT_EQ(ev.back().event, "response.incomplete");
  EXPECT_EQ(shape->Body()["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(shape->Body()["output"][0]["status"], "incomplete");
}

TEST(MessagesRequest, BlocksBecomeChatMessages) {
  ParsedRequest r;
  auto e = ParseMessagesRequest(J(R"({"model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "S"}],
    "stop_sequences": ["END"], "top_k": 5,
    "messages": [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": [{"type": "text", "text": "let me see"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                    {"type": "text", "text": "thanks"}]}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})"),
                                 &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.dialect, Dialect::kAnthropic);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.sampling.top_k, 5);
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[2]["content"], "let me see");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["content"], "42");
  EXPECT_EQ(r.messages[4]["content"], "thanks");
  EXPECT_EQ(r.tool_choice, ParsedRequest::ToolChoice::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["type"], "object");
}

TEST(MessagesRequest, Refusals) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stop_sequences": [""]})",
       "stop_sequences"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "tool_choice": {"type": "tool", "name": "nope"}, "tools": [{"name": "f", "input_schema": {}}]})",
       "tool_choice"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "thinking": {"type": "enabled"}})",
       "thinking.budget_tokens"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "thinking": {"type": "enabled", "budget_tokens": "many"}})",
       "thinking.budget_tokens"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "thinking": {"type": "sometimes"}})",
       "thinking.type"},
      {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "thinking": true})",
       "thinking"},
  };
  for (const auto& [body, param] : cases) {
    ParsedRequest r;
    auto e = ParseMessagesRequest(J(body), &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param.value_or(""), param) << body << ": " << e->message;
    const PlainJson a = AnthropicErrorJson(*e);
    EXPECT_EQ(a["type"], "error");
    EXPECT_EQ(a["error"]["type"], "invalid_request_error");
  }
}

TEST(MessagesShape, EventsAndBody) {
  auto shape = MakeMessagesShape("msg_1", "m");
  Usage start;
  start.prompt_tokens = 4;
  std::vector<SseOut> ev = shape->Start(start);
  for (auto& e : shape->Text("Hi")) ev.push_back(e);
  for (auto& e : shape->ToolCall({0, "toolu_9", "f", "{\"x\":"})) ev.push_back(e);
  for (auto& e : shape->ToolCall({0, std::nullopt, std::nullopt, "2}"})) ev.push_back(e);
  DialectEnd end;
  end.finish_reason = "tool_calls";
  end.usage.prompt_tokens = 4;
  end.usage.cached_tokens = 1;
  end.usage.completion_tokens = 6;
  for (auto& e : shape->Finish(end)) ev.push_back(e);
  const std::vector<std::string> want = {"message_start",       "ping",          "content_block_start",
                                         "content_block_delta", "content_block_stop", "content_block_start",
                                         "content_block_delta", "content_block_delta", "content_block_stop",
                                         "message_delta",       "message_stop"};
  EXPECT_EQ(Types(ev), want);
  EXPECT_EQ(ev[7].data["delta"]["partial_json"], "2}");
  EXPECT_EQ(ev[5].data["index"], 1);
  const PlainJson body = shape->Body();
  EXPECT_EQ(body["stop_reason"], "tool_use");
  EXPECT_EQ(body["content"][0]["text"], "Hi");
  EXPECT_EQ(body["content"][1]["input"], PlainJson({{"x", 2}}));
  EXPECT_EQ(body["usage"]["input_tokens"], 3);
  EXPECT_EQ(body["usage"]["cache_read_input_tokens"], 1);

  auto stopped = MakeMessagesShape("msg_2", "m");
  stopped->Text("a");
  DialectEnd s;
  s.finish_reason = "stop";
  s.stop_string = "END";
  stopped->Finish(s);
  EXPECT_EQ(stopped->Body()["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped->Body()["stop_sequence"], "END");
}

TEST(ReasoningInputs, DialectsMapThinkingToTemplateVariables) {
  ParsedRequest r;
  auto e = ParseResponsesRequest(J(R"({"model": "m", "reasoning": {"effort": "low", "summary": "auto"},
    "input": [{"role": "user", "content": "q"},
              {"type": "reasoning", "id": "rs_1", "summary": [],
               "content": [{"type": "reasoning_text", "text": "I should call f."}]},
              {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
              {"type": "function_call_output", "call_id": "c1", "output": "ok"}]})"),
                                  &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.template_kwargs, J(R"({"reasoning_effort": "low"})"));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["reasoning_content"], "I should call f.");
  EXPECT_EQ(r.dialect_echo["reasoning"]["effort"], "low");
  e = ParseResponsesRequest(J(R"({"model": "m", "input": "x", "reasoning": {"effort": 3}})"), &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "reasoning.effort");

  e = ParseMessagesRequest(J(R"({"model": "m", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                                   {"type": "text", "text": "a"}]},
                 {"role": "user", "content": "more"}]})"),
                           &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.template_kwargs, J(R"({"enable_thinking": true})"));
  EXPECT_EQ(r.messages[1]["reasoning_content"], "hmm");
  EXPECT_EQ(r.messages[1]["content"], "a");
  e = ParseMessagesRequest(J(R"({"model": "m", "max_tokens": 9, "thinking": {"type": "disabled"},
    "messages": [{"role": "user", "content": "q"}]})"),
                           &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.template_kwargs, J(R"({"enable_thinking": false})"));
  e = ParseMessagesRequest(J(R"({"model": "m", "max_tokens": 9, "thinking": {"type": "adaptive"},
    "messages": [{"role": "user", "content": "q"}]})"),
                           &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_TRUE(r.template_kwargs.empty());
}

TEST(ResponsesShape, ReasoningItemBeforeTheMessage) {
  auto shape = MakeResponsesShape("resp_r", 1, "m", PlainJson::object());
  std::vector<SseOut> ev = shape->Start({});
  for (auto& e : shape->Reasoning("Two plus")) ev.push_back(e);
  for (auto& e : shape->Reasoning(" two.")) ev.push_back(e);
  for (auto& e : shape->Text("4")) ev.push_back(e);
  DialectEnd end;
  end.finish_reason = "stop";
  end.usage.completion_tokens = 9;
  end.usage.reasoning_tokens = 6;
  for (auto& e : shape->Finish(end)) ev.push_back(e);
  const std::vector<std::string> want = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.reasoning_text.delta", "response.reasoning_text.delta", "response.reasoning_text.done",
      "response.content_part.done", "response.output_item.done", "response.output_item.added",
      "response.content_part.added", "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(Types(ev), want);
  EXPECT_EQ(ev[2].data["item"]["type"], "reasoning");
  EXPECT_EQ(ev[3].data["part"], PlainJson({{"type", "reasoning_text"}, {"text", ""}}));
  EXPECT_EQ(ev[5].data["delta"], " two.");
  EXPECT_EQ(ev[6].data["text"], "Two plus two.");
  const PlainJson body = shape->Body();
  EXPECT_EQ(body["output"][0]["type"], "reasoning");
  EXPECT_EQ(body["output"][0]["summary"], PlainJson::array());
  EXPECT_EQ(body["output"][0]["content"], PlainJson::parse(R"([{"type": "reasoning_text", "text": "Two plus two."}])"));
  EXPECT_EQ(body["output"][0]["status"], "completed");
  EXPECT_EQ(body["output"][1]["content"][0]["text"], "4");
  EXPECT_EQ(body["usage"]["output_tokens_details"]["reasoning_tokens"], 6);
}

TEST(MessagesShape, ThinkingBlockBeforeTheText) {
  auto shape = MakeMessagesShape("msg_t", "m");
  std::vector<SseOut> ev = shape->Start({});
  for (auto& e : shape->Reasoning("Two plus")) ev.push_back(e);
  for (auto& e : shape->Reasoning(" two.")) ev.push_back(e);
  for (auto& e : shape->Text("4")) ev.push_back(e);
  DialectEnd end;
  end.finish_reason = "stop";
  for (auto& e : shape->Finish(end)) ev.push_back(e);
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_delta",
                                         "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",
                                         "message_delta",       "message_stop"};
  EXPECT_EQ(Types(ev), want);
  EXPECT_EQ(ev[2].data["content_block"], PlainJson({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  EXPECT_EQ(ev[3].data["delta"], PlainJson({{"type", "thinking_delta"}, {"thinking", "Two plus"}}));
  EXPECT_EQ(ev[5].data["delta"]["type"], "signature_delta");
  const std::string sig = ev[5].data["delta"]["signature"];
  EXPECT_EQ(sig.rfind("kvs-sha256-", 0), 0u);
  EXPECT_EQ(ev[7].data["index"], 1);
  const PlainJson body = shape->Body();
  EXPECT_EQ(body["content"][0], PlainJson({{"type", "thinking"}, {"thinking", "Two plus two."}, {"signature", sig}}));
  EXPECT_EQ(body["content"][1]["text"], "4");
  EXPECT_EQ(body["stop_reason"], "end_turn");
}

}  // namespace
}  // namespace kvs::api

namespace kvs::api {
namespace {

TEST(DialectRegistry, EveryGenerationRouteIsAnEntry) {
  std::vector<std::string> paths, prefixes;
  for (const DialectEntry& d : Dialects()) {
    paths.push_back(d.path);
    prefixes.push_back(d.id_prefix);
    EXPECT_EQ(&FindDialect(d.endpoint, d.dialect), &d);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages"}));
  EXPECT_EQ(prefixes, (std::vector<std::string>{"cmpl-", "chatcmpl-", "resp_", "msg_"}));
}

ShapeOptions Options(bool stream, std::vector<std::string> echo) {
  ShapeOptions o;
  o.id = "chatcmpl-1";
  o.created = 5;
  o.model = "m";
  o.stream = stream;
  o.choice_echo = std::move(echo);
  return o;
}

LogprobToken Lp(const char* piece, size_t start, size_t end) {
  LogprobToken t;
  t.token.piece = piece;
  t.token.logprob = -0.5f;
  t.start = start;
  t.end = end;
  return t;
}

TEST(ChatShape, StreamsEveryChoiceThenUsageAndDone) {
  ShapeOptions o = Options(true, {"", ""});
  o.include_usage = true;
  auto shape = MakeChatShape(o);
  std::vector<SseOut> ev = shape->Start({});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].data["choices"][0]["index"], 1);
  EXPECT_EQ(ev[1].data["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(shape->Text(0, "", {}).empty());  // nothing to say
  ev = shape->Text(1, "hi", {});
  EXPECT_EQ(ev[0].data["choices"][0]["delta"]["content"], "hi");
  EXPECT_EQ(ev[0].data["choices"][0]["index"], 1);
  EXPECT_TRUE(ev[0].data["usage"].is_null());
  const grammar::ToolCallDelta call{0, "call_1", "f", "{}"};
  ev = shape->ToolCalls(0, std::span(&call, 1));
  EXPECT_EQ(ev[0].data["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "f");
  ev = shape->FinishChoice(0, {"tool_calls", ""});
  EXPECT_EQ(ev[0].data["choices"][0]["finish_reason"], "tool_calls");
  Usage u;
  u.prompt_tokens = 3;
  u.completion_tokens = 4;
  ev = shape->End(u);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data["usage"]["total_tokens"], 7);
  EXPECT_TRUE(ev[1].done);
  const std::vector<SseOut> err = shape->FailStream(BadRequest("x", std::nullopt));
  ASSERT_EQ(err.size(), 2u);
  EXPECT_EQ(err[0].event, "error");
  EXPECT_TRUE(err[1].done);
}

TEST(CompletionsShape, WholeBodyEchoesAndOffsetsLogprobs) {
  ShapeOptions o = Options(false, {"ab", "ab"});
  o.id = "cmpl-1";
  o.logprobs = true;
  auto shape = MakeCompletionsShape(o);
  for (int i = 0; i < 2; ++i) {
    shape->Reasoning(i, "");
    shape->Text(i, i ? "y" : "xz", i ? std::vector<LogprobToken>{} : std::vector<LogprobToken>{Lp("x", 0, 1), Lp("z", 1, 2)});
    shape->FinishChoice(i, {i ? "length" : "stop", ""});
  }
  EXPECT_TRUE(shape->End({}).empty());
  const PlainJson body = shape->Body();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "abxz");
  EXPECT_EQ(body["choices"][0]["logprobs"]["text_offset"], PlainJson::array({2, 3}));
  EXPECT_EQ(body["choices"][1]["text"], "aby");
  EXPECT_EQ(body["choices"][1]["logprobs"]["tokens"], PlainJson::array());
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
}

}  // namespace
}  // namespace kvs::api
