// libFuzzer target: every request body parser (OpenAI, Responses, Anthropic
// Messages) on arbitrary bytes.
// The first byte picks the endpoint, the rest is the body. Each parser must
// either accept the body with its documented limits holding, or refuse it
// with a 4xx ApiError whose message is non-empty and whose JSON form is
// small (error messages never dump untrusted values unbounded).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/messages_api.h"
#include "api/openai_request.h"
#include "api/responses_api.h"

namespace {

using namespace kvs::api;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckError(const std::optional<ApiError>& e, size_t body_size) {
  if (!e) return;
  Check(e->status >= 400 && e->status < 500);
  Check(!e->message.empty());
  // A bounded message: quotes are clipped, values are named by type.
  Check(Dump(e->ToJson()).size() < 4096 + body_size / 8);
}

void CheckParsed(const ParsedRequest& r) {
  Check(r.n >= 1 && r.n <= kMaxN);
  Check(r.stop.size() <= kMaxStops);
  for (const auto& s : r.stop) Check(!s.empty() && s.size() <= kMaxStopBytes);
  Check(r.cache_salt.size() <= kMaxCacheSaltBytes);
  Check(r.prompts.size() <= kMaxPrompts);
  Check(r.prompts.size() * static_cast<size_t>(r.n) <= static_cast<size_t>(kMaxN));
  if (r.max_tokens) Check(*r.max_tokens >= 0);
  Check(r.messages.is_array() && r.tools.is_array());
  // The values handed to templates survive a dump (bounded depth).
  (void)Dump(nlohmann::json::parse(r.messages.dump()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t which = data[0] % 6;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  Json json;
  if (auto e = ParseJsonObject(body, &json)) {
    CheckError(e, body.size());
    return 0;
  }
  Check(json.is_object());
  Check(JsonNestingDepth(json.dump(), kMaxJsonDepth + 1) <= kMaxJsonDepth);
  switch (which) {
    case 0: {
      ParsedRequest r;
      auto e = ParseCompletionRequest(json, &r);
      CheckError(e, body.size());
      if (!e) {
        Check(!r.prompts.empty());
        CheckParsed(r);
      }
      break;
    }
    case 1: {
      ParsedRequest r;
      auto e = ParseChatRequest(json, &r);
      CheckError(e, body.size());
      if (!e) {
        Check(!r.messages.empty());
        CheckParsed(r);
      }
      break;
    }
    case 2: {
      TokenizeRequest r;
      auto e = ParseTokenizeRequest(json, &r);
      CheckError(e, body.size());
      if (!e) Check(r.prompt.has_value() || !r.chat.messages.empty());
      break;
    }
    case 4:
    case 5: {
      // /v1/responses and /v1/messages: rewritten into chat requests.
      ParsedRequest r;
      auto e = which == 4 ? ParseResponsesRequest(json, &r) : ParseMessagesRequest(json, &r);
      CheckError(e, body.size());
      if (!e) {
        Check(!r.messages.empty() && r.n == 1);
        Check(r.dialect == (which == 4 ? Dialect::kResponses : Dialect::kAnthropic));
        CheckParsed(r);
      }
      break;
    }
    default: {
      DetokenizeRequest r;
      CheckError(ParseDetokenizeRequest(json, &r), body.size());
      break;
    }
  }
  return 0;
}
