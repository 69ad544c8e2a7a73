#include "api/dialect.h"

#include "api/messages_api.h"
#include "api/openai_shape.h"
#include "api/responses_api.h"
#include "base/status.h"

namespace kvs::api {

namespace {

std::unique_ptr<DialectShape> ResponsesShapeOf(ShapeOptions o) {
  return MakeResponsesShape(std::move(o.id), o.created, std::move(o.model), std::move(o.request_echo));
}
std::unique_ptr<DialectShape> MessagesShapeOf(ShapeOptions o) {
  return MakeMessagesShape(std::move(o.id), std::move(o.model));
}
nlohmann::json OpenAIErrorJson(const ApiError& e) { return e.ToJson(); }

// Route order: /v1/completions first, as the public route table lists them.
const DialectEntry kDialects[] = {
    {"/v1/completions", Endpoint::kCompletions, Dialect::kOpenAI, "openai", "cmpl-", ParseCompletionRequest,
     MakeCompletionsShape, OpenAIErrorJson, nullptr},
    {"/v1/chat/completions", Endpoint::kChatCompletions, Dialect::kOpenAI, "openai", "chatcmpl-", ParseChatRequest,
     MakeChatShape, OpenAIErrorJson, nullptr},
    // Responses errors are OpenAI's.
    {"/v1/responses", Endpoint::kChatCompletions, Dialect::kResponses, "responses", "resp_", ParseResponsesRequest,
     ResponsesShapeOf, OpenAIErrorJson, nullptr},
    {"/v1/messages", Endpoint::kChatCompletions, Dialect::kAnthropic, "anthropic", "msg_", ParseMessagesRequest,
     MessagesShapeOf, AnthropicErrorJson, MakeToolUseId},
};

}  // namespace

std::span<const DialectEntry> Dialects() { return kDialects; }

const DialectEntry& FindDialect(Endpoint endpoint, Dialect dialect) {
  for (const DialectEntry& d : kDialects) {
    if (d.endpoint == endpoint && d.dialect == dialect) return d;
  }
  KVS_CHECK_MSG(false, "no dialect for endpoint {} dialect {}", static_cast<int>(endpoint), static_cast<int>(dialect));
  return kDialects[0];
}

}  // namespace kvs::api
