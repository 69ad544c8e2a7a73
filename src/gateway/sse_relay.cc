#include "gateway/sse_relay.h"

#include <string_view>
#include <utility>

#include "api/messages_api.h"
#include "api/responses_api.h"
#include "http/sse.h"

namespace kvs::gateway {

namespace {

using nlohmann::json;

bool NonEmptyString(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

int64_t IntField(const json& obj, const char* key, int64_t missing) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : missing;
}

std::optional<int64_t> NestedInt(const json& obj, const char* outer, const char* key) {
  auto o = obj.find(outer);
  if (o == obj.end() || !o->is_object()) return std::nullopt;
  auto it = o->find(key);
  if (it == o->end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool CarriesToken(const json& j) {
  if (!j.is_object()) return true;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) return true;
  auto it = j.find("choices");
  if (it == j.end() || !it->is_array()) return true;
  for (const auto& c : *it) {
    if (!c.is_object()) return true;
    if (auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) return true;
    if (NonEmptyString(c, "text")) return true;
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
      if (NonEmptyString(*d, "content")) return true;
      if (d->contains("tool_calls") || d->contains("reasoning_content")) return true;
    }
  }
  return false;
}

void StripNullUsage(std::string* data) {
  static constexpr std::string_view kMember = ",\"usage\":null";
  if (size_t p = data->find(kMember); p != std::string::npos) data->erase(p, kMember.size());
}

bool DialectEventCarriesToken(api::Dialect d, std::string_view event) {
  switch (d) {
    case api::Dialect::kAnthropic:
      // A block opens before its first delta (a tool_use block once its name
      // is parsed): it is held with the opening events, and goes out with that delta.
      return event != "message_start" && event != "ping" && event != "content_block_start";
    case api::Dialect::kResponses:
      // The response and each output item or part are announced (*.added)
      // before their content; the deltas, *.done events and the end carry it.
      return event != "response.created" && event != "response.in_progress" && !EndsWith(event, ".added");
    case api::Dialect::kOpenAI: break;
  }
  return true;  // OpenAI's named events are errors
}

bool DialectEventIsDelta(api::Dialect d, std::string_view event) {
  switch (d) {
    case api::Dialect::kAnthropic: return event == "content_block_delta";
    case api::Dialect::kResponses: return EndsWith(event, ".delta");
    case api::Dialect::kOpenAI: break;
  }
  return false;
}

UsageReport ReadUsage(api::Dialect d, const json& u) {
  UsageReport r;
  if (!u.is_object()) return r;
  switch (d) {
    case api::Dialect::kOpenAI:
      r.prompt = IntField(u, "prompt_tokens", 0);
      r.completion = IntField(u, "completion_tokens", 0);
      r.cached = NestedInt(u, "prompt_tokens_details", "cached_tokens");
      break;
    case api::Dialect::kResponses:
      r.prompt = IntField(u, "input_tokens", 0);
      r.completion = IntField(u, "output_tokens", 0);
      r.cached = NestedInt(u, "input_tokens_details", "cached_tokens");
      break;
    case api::Dialect::kAnthropic: {
      const int64_t input = IntField(u, "input_tokens", -1);
      const int64_t read = IntField(u, "cache_read_input_tokens", 0);
      if (input >= 0) r.prompt = input + read + IntField(u, "cache_creation_input_tokens", 0);
      r.completion = IntField(u, "output_tokens", 0);
      if (u.contains("cache_read_input_tokens")) r.cached = read;
      break;
    }
  }
  return r;
}

bool EventMayReportUsage(api::Dialect d, std::string_view event) {
  switch (d) {
    case api::Dialect::kAnthropic: return event == "message_start" || event == "message_delta";
    case api::Dialect::kResponses:
      return event == "response.completed" || event == "response.incomplete" || event == "response.failed";
    case api::Dialect::kOpenAI: break;
  }
  return false;
}

const json* EventUsage(api::Dialect d, std::string_view event, const json& data) {
  if (!EventMayReportUsage(d, event) || !data.is_object()) return nullptr;
  const json* holder = &data;
  if (event != "message_delta") {  // message_start: message.usage; Responses: response.usage
    auto it = data.find(d == api::Dialect::kAnthropic ? "message" : "response");
    if (it == data.end() || !it->is_object()) return nullptr;
    holder = &*it;
  }
  auto u = holder->find("usage");
  return u != holder->end() && u->is_object() ? &*u : nullptr;
}

json* EventUsage(api::Dialect d, std::string_view event, json& data) {
  return const_cast<json*>(EventUsage(d, event, std::as_const(data)));  // data is the caller's, mutable
}

std::string StreamErrorEvents(api::Dialect d, const api::ApiError& e, int64_t next_sequence_number) {
  switch (d) {
    case api::Dialect::kAnthropic: {
      const api::SseOut ev = api::MakeMessagesShape("", "")->StreamError(e);
      return http::SseEvent(ev.event, api::Dump(ev.data));
    }
    case api::Dialect::kResponses: {
      api::SseOut ev = api::MakeResponsesShape("", 0, "", json::object())->StreamError(e);
      ev.data["sequence_number"] = next_sequence_number;
      return http::SseEvent(ev.event, api::Dump(ev.data));
    }
    case api::Dialect::kOpenAI: break;
  }
  return http::SseEvent("error", api::Dump(e.ToJson())) + std::string(http::kSseDone);
}

}  // namespace kvs::gateway
