#include "api/openai_request.h"

#include <gtest/gtest.h>

namespace kvs::api {
namespace {

using json = nlohmann::ordered_json;

ParsedRequest Completion(const std::string& body) {
  json j;
  EXPECT_FALSE(ParseJsonObject(body, &j).has_value());
  ParsedRequest r;
  auto e = ParseCompletionRequest(j, &r);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return r;
}

ApiError CompletionError(const std::string& body) {
  json j;
  if (auto e = ParseJsonObject(body, &j)) return *e;
  ParsedRequest r;
  auto e = ParseCompletionRequest(j, &r);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

ApiError ChatError(const std::string& body) {
  json j;
  if (auto e = ParseJsonObject(body, &j)) return *e;
  ParsedRequest r;
  auto e = ParseChatRequest(j, &r);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

TEST(OpenAiRequestTest, CompletionWithEveryField) {
  ParsedRequest r = Completion(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,
    "top_k":40,"min_p":0.1,"presence_penalty":1,"frequency_penalty":-1,"seed":-7,"n":2,"stop":["a","b"],
    "logprobs":3,"stream":true,"stream_options":{"include_usage":true},"user":"u","best_of":2,"echo":false,
    "unknown_field":{"x":1}})");
  EXPECT_EQ(r.endpoint, Endpoint::kCompletions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(*r.prompts[0].text, "hi");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1);
  EXPECT_EQ(*r.sampling.seed, static_cast<uint64_t>(-7));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*r.sampling.logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_EQ(Completion(R"({"model":"m","prompt":[1,2,3]})").prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  auto r = Completion(R"({"model":"m","prompt":["a","b"]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(*r.prompts[1].text, "b");
  r = Completion(R"({"model":"m","prompt":[[1],[2,3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{2, 3}));
  EXPECT_FALSE(r.max_tokens.has_value());  // the endpoint's default applies
  EXPECT_FALSE(r.sampling.logprobs.has_value());
  // null is absent
  r = Completion(R"({"model":"m","prompt":"x","max_tokens":null,"stop":null,"temperature":null})");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
}

TEST(OpenAiRequestTest, InvalidJsonAndNonObjects) {
  ApiError e = CompletionError("{not json");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_NE(e.message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(CompletionError("[1,2]").code, "invalid_json");
  EXPECT_EQ(CompletionError("").code, "invalid_json");
}

// A number too large for a double made nlohmann throw out_of_range (not a
// parse_error) while the message was built: an uncaught exception on a prep
// thread (found by request_fuzzer). The quoted token is clipped.
TEST(OpenAiRequestTest, OverflowingNumbersAreInvalidJsonNotACrash) {
  for (const std::string& body : {std::string("5555e57176605"), std::string(R"({"model":"m","prompt":"x","n":1e400})"),
                                 "{\"max_tokens\":" + std::string(100000, '9') + "e999}"}) {
    ApiError e = CompletionError(body);
    EXPECT_EQ(e.status, 400) << body.substr(0, 40);
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_LT(e.message.size(), 400u);
  }
}

struct FieldCase {
  std::string body;
  std::string param;
  std::string fragment;
};

// The parser reads sampling fields against the engine's table
// (engine::SamplingLimits): an out-of-range value gets the engine's message,
// and every in-range value passes SamplingParams::Validate.
TEST(OpenAiRequestTest, SamplingBoundsAreTheEnginesTable) {
  using L = engine::SamplingLimits;
  const engine::ParamLimit floats[] = {L::kTemperature, L::kTopP, L::kMinP, L::kPresencePenalty,
                                       L::kFrequencyPenalty, L::kRepetitionPenalty};
  for (const engine::ParamLimit& l : floats) {
    for (double v : {l.lo - 1, l.hi + 1}) {
      Json body = Json::parse(R"({"model": "m", "prompt": "x"})");
      body[l.param] = v;
      ParsedRequest r;
      auto e = ParseCompletionRequest(body, &r);
      ASSERT_TRUE(e) << l.param << " " << v;
      EXPECT_EQ(e->status, 400);
      EXPECT_EQ(e->param.value_or(""), l.param);
      EXPECT_EQ(e->message, l.Message(body[l.param].dump()));  // the value as the client wrote it
    }
    for (double v : {l.lo_open ? l.lo + 0.001 : l.lo, l.hi}) {
      Json body = Json::parse(R"({"model": "m", "prompt": "x"})");
      body[l.param] = v;
      ParsedRequest r;
      ASSERT_FALSE(ParseCompletionRequest(body, &r)) << l.param << " " << v;
      r.sampling.max_tokens = 1;
      EXPECT_TRUE(r.sampling.Validate(8).ok()) << l.param << " " << v;
    }
  }
}

TEST(OpenAiRequestTest, CompletionErrorsNameTheField) {
  const std::vector<FieldCase> cases = {
      {R"({"prompt":"x"})", "model", "model"},
      {R"({"model":3,"prompt":"x"})", "model", "string"},
      {R"({"model":"m"})", "prompt", "prompt"},
      {R"({"model":"m","prompt":[]})", "prompt", "empty"},
      {R"({"model":"m","prompt":{"a":1}})", "prompt", "token ids"},
      {R"({"model":"m","prompt":[1,-2]})", "prompt", "item 1"},
      {R"({"model":"m","prompt":["a",3]})", "prompt", "item 1"},
      {R"({"model":"m","prompt":"x","max_tokens":0})", "max_tokens", "[1,"},
      {R"({"model":"m","prompt":"x","max_tokens":"5"})", "max_tokens", "integer"},
      {R"({"model":"m","prompt":"x","max_tokens":2.5})", "max_tokens", "integer"},
      {R"({"model":"m","prompt":"x","temperature":3})", "temperature", "[0, 2]"},
      {R"({"model":"m","prompt":"x","temperature":"hot"})", "temperature", "number"},
      {R"({"model":"m","prompt":"x","top_p":0})", "top_p", "(0, 1]"},
      {R"({"model":"m","prompt":"x","top_k":-2})", "top_k", "[-1,"},
      {R"({"model":"m","prompt":"x","min_p":1.5})", "min_p", "[0, 1]"},
      {R"({"model":"m","prompt":"x","presence_penalty":-3})", "presence_penalty", "[-2, 2]"},
      {R"({"model":"m","prompt":"x","frequency_penalty":9})", "frequency_penalty", "[-2, 2]"},
      {R"({"model":"m","prompt":"x","n":0})", "n", "[1, 128]"},
      {R"({"model":"m","prompt":"x","n":500})", "n", "[1, 128]"},
      {R"({"model":"m","prompt":"x","seed":"s"})", "seed", "integer"},
      {R"({"model":"m","prompt":"x","stop":[1]})", "stop", "item 0"},
      {R"({"model":"m","prompt":"x","stop":""})", "stop", "empty"},
      {R"({"model":"m","prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
       "stop", "at most 16"},
      {R"({"model":"m","prompt":"x","logprobs":21})", "logprobs", "[0, 20]"},
      {R"({"model":"m","prompt":"x","logprobs":true})", "logprobs", "integer"},
      {R"({"model":"m","prompt":"x","stream":"yes"})", "stream", "boolean"},
      {R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})", "stream_options", "stream"},
      {R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":1}})",
       "stream_options.include_usage", "boolean"},
      {R"({"model":"m","prompt":"x","suffix":"end"})", "suffix", "not supported"},
      {R"({"model":"m","prompt":"x","logit_bias":{"1":500}})", "logit_bias", "[-100, 100]"},
      {R"({"model":"m","prompt":"x","logit_bias":{"a":5}})", "logit_bias", "token ids"},
      {R"({"model":"m","prompt":"x","best_of":3})", "best_of", "not supported"},
      {R"({"model":"m","prompt":"x","echo":true,"logprobs":1})", "echo", "not supported"},
      {R"({"model":"m","prompt":"x","user":5})", "user", "string"},
      {R"({"model":"m","prompt":["a","b"],"n":100})", "n", "prompts x n"},
  };
  for (const auto& c : cases) {
    ApiError e = CompletionError(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param.value_or("<none>"), c.param) << c.body << ": " << e.message;
    EXPECT_NE(e.message.find(c.fragment), std::string::npos) << c.body << ": " << e.message;
    const json j = e.ToJson();
    EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("type") && j["error"].contains("param") &&
                j["error"].contains("code"));
  }
}

TEST(OpenAiRequestTest, ChatParsesAndFlattensContent) {
  json body = json::parse(R"({"model":"m","messages":[
      {"role":"system","content":"be nice"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"1"}]},
      {"role":"tool","content":"r","tool_call_id":"1"}],
    "max_tokens":3,"max_completion_tokens":7,"logprobs":true,"top_logprobs":2,
    "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",
    "response_format":{"type":"text"},"parallel_tool_calls":false})");
  ParsedRequest r;
  auto e = ParseChatRequest(body, &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[3]["tool_call_id"], "1");
  EXPECT_EQ(*r.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(r.max_tokens_param, "max_completion_tokens");
  EXPECT_EQ(*r.sampling.logprobs, 2);
  EXPECT_EQ(r.tools.size(), 1u);
  // tool_choice none: the tools do not reach the template.
  body["tool_choice"] = "none";
  ASSERT_FALSE(ParseChatRequest(body, &r).has_value());
  EXPECT_TRUE(r.tools.empty());
}

TEST(OpenAiRequestTest, ChatKeepsTheClientsKeyOrder) {
  // Templates may render tool schemas with tojson: the order must survive.
  const std::string raw =
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}],"name":"z"}],)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{"zeta":1,"alpha":2}}}]})";
  ParsedRequest r;
  auto e = ParseChatRequest(json::parse(raw), &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(r.tools.dump(), R"([{"type":"function","function":{"name":"f","parameters":{"zeta":1,"alpha":2}}}])");
  EXPECT_EQ(r.messages[0].dump(), R"({"role":"user","content":"x","name":"z"})");
}

TEST(OpenAiRequestTest, ChatTemplateInputs) {
  ParsedRequest r;
  auto e = ParseChatRequest(json::parse(R"({"model":"m","messages":[{"role":"user","content":"x"}],
      "reasoning_effort":"low","chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"high","x":{"y":[1]}}})"),
                            &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  // The kwargs win over reasoning_effort (the more specific field); key order is kept.
  EXPECT_EQ(r.template_kwargs.dump(), R"({"reasoning_effort":"high","enable_thinking":false,"x":{"y":[1]}})");
  e = ParseChatRequest(json::parse(R"({"model":"m","messages":[{"role":"user","content":"x"}]})"), &r);
  ASSERT_FALSE(e.has_value());
  EXPECT_TRUE(r.template_kwargs.is_object());
  EXPECT_TRUE(r.template_kwargs.empty());
  // Bounded: the variables are rendered into the prompt.
  json big = json::parse(R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  big["chat_template_kwargs"] = {{"blob", std::string(kMaxTemplateKwargsBytes, 'a')}};
  const ApiError err = ChatError(big.dump());
  EXPECT_EQ(err.param.value_or(""), "chat_template_kwargs");
  EXPECT_NE(err.message.find("at most 65536 bytes"), std::string::npos) << err.message;
}

TEST(OpenAiRequestTest, ChatErrorsNameTheField) {
  const std::vector<FieldCase> cases = {
      {R"({"model":"m"})", "messages", "messages"},
      {R"({"model":"m","messages":[]})", "messages", "at least one"},
      {R"({"model":"m","messages":"hi"})", "messages", "array"},
      {R"({"model":"m","messages":[{"content":"x"}]})", "messages[0].role", "role"},
      {R"({"model":"m","messages":[{"role":"king","content":"x"}]})", "messages[0].role", "king"},
      {R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content", "required"},
      {R"({"model":"m","messages":[{"role":"user","content":5}]})", "messages[0].content", "string"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})",
       "messages[0].content[0].type", "image_url"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs", "logprobs"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":30})",
       "top_logprobs", "[0, 20]"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
       "max_completion_tokens", "[1,"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "tool_choice",
       "'tools' is empty"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"any"})", "tool_choice", "required"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":{"type":"function","function":{"name":"g"}}})", "tool_choice", "not in 'tools'"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":"required","guided_regex":"a"})", "tool_choice", "cannot be combined"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})",
       "response_format", "json_schema"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":{}})", "tools", "array"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":"x"})",
       "chat_template_kwargs", "an object"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}})",
       "chat_template_kwargs.messages", "cannot be set"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"bos_token":""}})",
       "chat_template_kwargs.bos_token", "cannot be set"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":1})", "reasoning_effort",
       "a string"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":""})", "reasoning_effort",
       "1 to 64 bytes"},
  };
  for (const auto& c : cases) {
    ApiError e = ChatError(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param.value_or("<none>"), c.param) << c.body << ": " << e.message;
    EXPECT_NE(e.message.find(c.fragment), std::string::npos) << c.body << ": " << e.message;
  }
}

TEST(OpenAiRequestTest, ErrorJsonCarriesExtraFields) {
  ApiError e = BadRequest("too long", "prompt", "context_length_exceeded");
  e.extra["prompt_tokens"] = 10;
  e.extra["max_context_length"] = 8;
  const json j = e.ToJson();
  EXPECT_EQ(j["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(j["error"]["prompt_tokens"], 10);
  EXPECT_EQ(j["error"]["max_context_length"], 8);
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "prompt");
}

// Issue 10 item 1: a 200 KB body nested 100,000 deep crashed the server
// (recursive copies and dumps of the parsed value). Refused before parsing.
TEST(OpenAiRequestTest, DeepNestingIsRefusedNamingTheLimit) {
  const std::string deep = R"({"model":"m","prompt":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  json j;
  auto e = ParseJsonObject(deep, &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(std::to_string(kMaxJsonDepth)), std::string::npos) << e->message;
  // Brackets inside strings do not count; the limit itself is fine.
  std::string ok = R"({"s":"[[[[[[[[[[{{{{{{","a":)" + std::string(kMaxJsonDepth - 1, '[') +
                   std::string(kMaxJsonDepth - 1, ']') + "}";
  EXPECT_FALSE(ParseJsonObject(ok, &j).has_value());
  EXPECT_EQ(JsonNestingDepth(R"(["\"[", {"a":[1]}])", 100), 3u);
}

// An object of 100,000 members took ordered_json's parser 10 s (each key is
// found by a linear search of its object): refused before parsing, naming
// the limit; a logit_bias at the limit still parses.
std::string ObjectOfMembers(size_t n, const char* key_prefix) {
  std::string s = "{";
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}\"{}{}\":0", i > 0 ? "," : "", key_prefix, i);
  return s + "}";
}

TEST(OpenAiRequestTest, ObjectsWithTooManyMembersAreRefusedNamingTheLimit) {
  json j;
  const std::string ok = R"({"model":"m","logit_bias":)" + ObjectOfMembers(kMaxObjectMembers, "") + "}";
  EXPECT_FALSE(ParseJsonObject(ok, &j).has_value());
  EXPECT_EQ(j["logit_bias"].size(), kMaxObjectMembers);
  const std::string big = R"({"model":"m","metadata":)" + ObjectOfMembers(100000, "k") + "}";
  auto e = ParseJsonObject(big, &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("100000 members"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find(std::to_string(kMaxObjectMembers)), std::string::npos) << e->message;
  // Many objects each under the limit: bounded in all.
  std::string many = R"({"model":"m","x":[)";
  for (size_t i = 0; i * 1000 <= kMaxBodyMembers; ++i) many += (i > 0 ? "," : "") + ObjectOfMembers(1000, "k");
  e = ParseJsonObject(many + "]}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find(std::to_string(kMaxBodyMembers)), std::string::npos) << e->message;
}

TEST(OpenAiRequestTest, ArraysWithTooManyElementsAreRefusedBeforeParsing) {
  json j;
  auto zeros = [](size_t n) {
    std::string s = "[0";
    for (size_t i = 1; i < n; ++i) s += ",0";
    return s + "]";
  };
  EXPECT_FALSE(ParseJsonObject(R"({"model":"m","prompt":)" + zeros(kMaxArrayElements) + "}", &j).has_value());
  EXPECT_EQ(j["prompt"].size(), kMaxArrayElements);
  auto e = ParseJsonObject(R"({"model":"m","prompt":)" + zeros(kMaxArrayElements + 1) + "}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(std::to_string(kMaxArrayElements) + " per array"), std::string::npos) << e->message;
  // Many arrays each under the limit: bounded in all.
  const std::string half = zeros(kMaxArrayElements / 2 + 1);
  e = ParseJsonObject(R"({"model":"m","a":[)" + half + "," + half + "," + half + "," + half + "]}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find(std::to_string(kMaxBodyElements)), std::string::npos) << e->message;
}

TEST(OpenAiRequestTest, ErrorMessagesNeverQuoteAValueWhole) {
  const std::string big(1 << 20, 'x');
  ApiError e = ChatError(R"({"model":"m","messages":[{"role":")" + big + R"(","content":"x"}]})");
  EXPECT_LT(e.message.size(), 300u);
  e = CompletionError(R"({"model":"m","prompt":[1,[)" + std::string(50, '7') + R"(]]})");
  EXPECT_LT(e.message.size(), 300u);
  EXPECT_NE(e.message.find("an array"), std::string::npos) << e.message;
}

// Issue 10 item 4: fields that cost memory per choice or engine time per
// token are bounded (docs/api.md).
TEST(OpenAiRequestTest, FieldsAreBounded) {
  const std::string long_stop(kMaxStopBytes + 1, 's');
  EXPECT_EQ(CompletionError(R"({"model":"m","prompt":"x","stop":")" + long_stop + R"("})").param, "stop");
  std::string ids = "[";
  for (size_t i = 0; i <= kMaxStopTokenIds; ++i) ids += (i ? "," : "") + std::to_string(i);
  ids += "]";
  EXPECT_EQ(CompletionError(R"({"model":"m","prompt":"x","stop_token_ids":)" + ids + "}").param, "stop_token_ids");
  const std::string salt(kMaxCacheSaltBytes + 1, 'k');
  EXPECT_EQ(CompletionError(R"({"model":"m","prompt":"x","cache_salt":")" + salt + R"("})").param, "cache_salt");
  // At the limits: fine.
  Completion(R"({"model":"m","prompt":"x","stop":")" + long_stop.substr(1) + R"(","cache_salt":")" + salt.substr(1) +
             R"("})");
}

}  // namespace
}  // namespace kvs::api
