#include "api/dialect.h"

#include <fmt/format.h>

#include "api/messages_api.h"
#include "api/responses_api.h"
#include "base/status.h"

namespace kvs::api {

std::vector<SseOut> DialectShape::Finish(const DialectEnd& end) {
  std::vector<SseOut> ev = FinishChoice(0, {end.finish_reason, end.stop_string});
  for (SseOut& e : End(end.usage)) ev.push_back(std::move(e));
  return ev;
}

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

namespace kvs::api::dialect {

const Json* Field(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> WrongType(const std::string& param, const char* want, const Json& got) {
  return BadRequest(fmt::format("'{}' must be {}, got {}", param, want, JsonTypeName(got)), param, "invalid_type");
}

std::optional<ApiError> NotSupported(const std::string& param, const std::string& why) {
  return BadRequest(fmt::format("'{}' is not supported: {}", param, why), param, "unsupported_parameter");
}

std::optional<ApiError> RequiredString(const Json& obj, const char* name, const std::string& p, std::string* out) {
  const Json* f = nullptr;
  if (auto e = Required(obj, name, p, &f)) return e;
  if (!f->is_string()) return WrongType(p + "." + name, "a string", *f);
  *out = f->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> Required(const Json& obj, const char* name, const std::string& p, const Json** out) {
  *out = Field(obj, name);
  if (!*out) return BadRequest(fmt::format("'{}.{}' is required", p, name), p + "." + name, "missing_required_parameter");
  return std::nullopt;
}

std::optional<ApiError> JoinedText(const Json& content, const std::string& param, const char* parts, const char* part,
                                   const PartText& part_text, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(param, fmt::format("a string or an array of {}", parts).c_str(), content);
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& item = content[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!item.is_object()) return WrongType(p, part, item);
    std::string text;
    if (auto e = part_text(item, p, &text)) return e;
    if (i) joined += "\n";
    joined += text;
  }
  *out = std::move(joined);
  return std::nullopt;
}

ApiError RenameParam(ApiError e, const std::vector<std::pair<std::string, std::string>>& prefixes) {
  if (!e.param) return e;
  for (const auto& [from, to] : prefixes) {
    if (e.param->compare(0, from.size(), from) != 0) continue;
    std::string msg;
    // Replace whole mentions of the field ('from' followed by a quote, '.' or '[').
    for (size_t i = 0; i < e.message.size();) {
      if (e.message.compare(i, from.size(), from) == 0 && (i == 0 || e.message[i - 1] == '\'')) {
        msg += to;
        i += from.size();
      } else {
        msg += e.message[i++];
      }
    }
    e.message = std::move(msg);
    *e.param = to + e.param->substr(from.size());
    break;
  }
  return e;
}

}  // namespace kvs::api::dialect
