// response_format / guided_* / structured_outputs / logit_bias parsing: each
// constraint becomes the grammar it asks for (checked by matching texts
// with the reference recognizer), unsupported constructs and bad fields are
// 400s naming them.
#include "api/structured_output.h"

#include <gtest/gtest.h>

#include "api/openai_request.h"
#include "grammar/reference_recognizer.h"

namespace kvs::api {
namespace {

ParsedRequest Chat(const std::string& extra, std::optional<ApiError>* error) {
  Json body;
  EXPECT_FALSE(ParseJsonObject(R"({"model":"m","messages":[{"role":"user","content":"x"}])" + extra + "}", &body));
  ParsedRequest r;
  *error = ParseChatRequest(body, &r);
  return r;
}

ParsedRequest Ok(const std::string& extra) {
  std::optional<ApiError> e;
  ParsedRequest r = Chat(extra, &e);
  EXPECT_FALSE(e.has_value()) << extra << ": " << (e ? e->message : "");
  return r;
}

ApiError Error(const std::string& extra) {
  std::optional<ApiError> e;
  Chat(extra, &e);
  EXPECT_TRUE(e.has_value()) << extra;
  return e.value_or(ApiError{});
}

bool Matches(const ParsedRequest& r, const std::string& text) {
  return grammar::testing::ReferenceRecognizer(*r.constraint).Matches(text);
}

TEST(StructuredOutput, TextAndAbsentMeanNoConstraint) {
  EXPECT_EQ(Ok("").constraint, nullptr);
  EXPECT_EQ(Ok(R"(,"response_format":{"type":"text"})").constraint, nullptr);
}

TEST(StructuredOutput, JsonObject) {
  ParsedRequest r = Ok(R"(,"response_format":{"type":"json_object"})");
  ASSERT_NE(r.constraint, nullptr);
  EXPECT_EQ(r.constraint_param, "response_format");
  EXPECT_TRUE(Matches(r, R"({"a": [1, 2, {"b": null}]})"));
  EXPECT_FALSE(Matches(r, R"([1])"));
  EXPECT_FALSE(Matches(r, R"({"a": 1)"));
}

TEST(StructuredOutput, JsonSchema) {
  ParsedRequest r = Ok(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
    "schema":{"type":"object","properties":{"name":{"type":"string","maxLength":5},"age":{"type":"integer",
    "minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}}})");
  ASSERT_NE(r.constraint, nullptr);
  EXPECT_TRUE(Matches(r, R"({"name": "Ann", "age": 41})"));
  EXPECT_FALSE(Matches(r, R"({"name": "Annabelle", "age": 41})"));
  EXPECT_FALSE(Matches(r, R"({"name": "Ann", "age": 151})"));
  EXPECT_FALSE(Matches(r, R"({"age": 41})"));
}

TEST(StructuredOutput, VllmGuidedFieldsAndStructuredOutputs) {
  ParsedRequest r = Ok(R"(,"guided_choice":["yes","no"])");
  EXPECT_EQ(r.constraint_param, "guided_choice");
  EXPECT_TRUE(Matches(r, "yes"));
  EXPECT_FALSE(Matches(r, "maybe"));
  r = Ok(R"(,"guided_regex":"[0-9]{3}-[a-z]+")");
  EXPECT_TRUE(Matches(r, "123-abc"));
  EXPECT_FALSE(Matches(r, "12-abc"));
  r = Ok(R"(,"guided_grammar":"root ::= \"a\"+ \"b\"")");
  EXPECT_TRUE(Matches(r, "aaab"));
  EXPECT_FALSE(Matches(r, "b"));
  r = Ok(R"(,"guided_json":{"type":"array","items":{"type":"boolean"},"maxItems":2})");
  EXPECT_TRUE(Matches(r, "[true, false]"));
  EXPECT_FALSE(Matches(r, "[true, false, true]"));
  r = Ok(R"(,"guided_json":"{\"enum\":[1,2]}")");  // vLLM also takes the schema as text
  EXPECT_TRUE(Matches(r, "2"));
  r = Ok(R"(,"structured_outputs":{"regex":"x+"})");
  EXPECT_EQ(r.constraint_param, "structured_outputs.regex");
  EXPECT_TRUE(Matches(r, "xxx"));
}

TEST(StructuredOutput, CompletionsTakeConstraintsToo) {
  Json body;
  ASSERT_FALSE(ParseJsonObject(R"({"model":"m","prompt":"x","guided_choice":["a","b"]})", &body));
  ParsedRequest r;
  ASSERT_FALSE(ParseCompletionRequest(body, &r));
  ASSERT_NE(r.constraint, nullptr);
  EXPECT_TRUE(Matches(r, "b"));
}

TEST(StructuredOutput, ErrorsNameTheFieldAndTheConstruct) {
  struct Case {
    std::string extra, param, needle;
  };
  const std::vector<Case> cases = {
      {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","uniqueItems":true}}})",
       "response_format.json_schema.schema", "uniqueItems"},
      {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object",
        "properties":{"a":{"type":"number","multipleOf":3}}}}})",
       "response_format.json_schema.schema", "multipleOf"},
      {R"(,"response_format":{"type":"json_schema"})", "response_format", "json_schema"},
      {R"(,"response_format":{"type":"json_schema","json_schema":{"schema":5}})", "response_format.json_schema.schema",
       "JSON schema"},
      {R"(,"response_format":"json")", "response_format", "object"},
      {R"(,"guided_regex":"(a)\\1")", "guided_regex", "backreference"},
      {R"(,"guided_choice":[])", "guided_choice", "non-empty"},
      {R"(,"guided_choice":["a",1])", "guided_choice", "strings"},
      {R"(,"guided_grammar":"root ::= missing")", "guided_grammar", "missing"},
      {R"(,"guided_regex":"a","guided_choice":["a"])", "guided_choice", "at most one"},
      {R"(,"response_format":{"type":"json_object"},"guided_regex":"a")", "guided_regex", "at most one"},
      {R"(,"structured_outputs":[1])", "structured_outputs", "object"},
      {R"(,"logit_bias":{"-1":1})", "logit_bias", "token ids"},
      {R"(,"logit_bias":{"5":"x"})", "logit_bias", "number"},
      {R"(,"logit_bias":[1])", "logit_bias", "object"},
  };
  for (const Case& c : cases) {
    const ApiError e = Error(c.extra);
    EXPECT_EQ(e.status, 400) << c.extra;
    EXPECT_EQ(e.param.value_or(""), c.param) << c.extra << ": " << e.message;
    EXPECT_NE(e.message.find(c.needle), std::string::npos) << c.extra << ": " << e.message;
  }
}

TEST(LogitBiasParsing, TokenIdsAndBiases) {
  ParsedRequest r = Ok(R"(,"logit_bias":{"50256":-100,"7":2.5,"0":100})");
  ASSERT_EQ(r.sampling.logit_bias.size(), 3u);
  EXPECT_EQ(r.sampling.logit_bias[0], (std::pair<int32_t, float>{50256, -100.0f}));
  EXPECT_EQ(r.sampling.logit_bias[1], (std::pair<int32_t, float>{7, 2.5f}));
  EXPECT_EQ(r.sampling.logit_bias[2], (std::pair<int32_t, float>{0, 100.0f}));
  EXPECT_TRUE(Ok(R"(,"logit_bias":{})").sampling.logit_bias.empty());
}

}  // namespace
}  // namespace kvs::api
