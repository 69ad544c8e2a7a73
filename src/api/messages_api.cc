#include "api/messages_api.h"

#include <random>

#include <fmt/format.h>

#include "api/request_fields.h"
#include "base/sha256.h"

namespace kvs::api {

namespace {

using json = nlohmann::json;
using Err = std::optional<ApiError>;
using dialect::Field;
using dialect::NotSupported;
using dialect::RequiredString;
using dialect::WrongType;

// The text of a content value: a string, or text blocks (joined with "\n").
Err BlocksText(const Json& content, const std::string& param, std::string* out) {
  return dialect::JoinedText(content, param, "content blocks", "an object", [](const Json& b, const std::string& p, std::string* text) -> Err {
    const Json* type = Field(b, "type");
    if (!type || *type != "text") {
      return NotSupported(p + ".type", fmt::format("blocks of type {} here (text only)", type ? Clip(type->dump(), 32) : "null"));
    }
    return RequiredString(b, "text", p, text);
  }, out);
}

// One Anthropic message -> chat messages (tool results become "tool" turns
// before the user's own text; tool_use blocks an assistant's tool_calls).
Err Message(const Json& m, const std::string& p, Json* messages) {
  if (!m.is_object()) return WrongType(p, "an object", m);
  std::string role;
  if (auto e = RequiredString(m, "role", p, &role)) return e;
  if (role != "user" && role != "assistant") {
    return BadRequest(fmt::format("'{}.role' must be user or assistant, got '{}' (the system prompt is the top-level "
                                  "'system' field)",
                                  p, Clip(role, 32)),
                      p + ".role");
  }
  const Json* content = nullptr;
  if (auto e = dialect::Required(m, "content", p, &content)) return e;
  if (content->is_string()) {
    messages->push_back({{"role", role}, {"content", *content}});
    return std::nullopt;
  }
  if (!content->is_array()) return WrongType(p + ".content", "a string or an array of content blocks", *content);
  std::string text, thinking;
  bool has_text = false;
  Json calls = Json::array();
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& b = (*content)[i];
    const std::string bp = fmt::format("{}.content[{}]", p, i);
    if (!b.is_object()) return WrongType(bp, "an object", b);
    std::string type;
    if (auto e = RequiredString(b, "type", bp, &type)) return e;
    if (type == "text") {
      std::string t;
      if (auto e = RequiredString(b, "text", bp, &t)) return e;
      if (has_text) text += "\n";
      text += t;
      has_text = true;
    } else if (type == "tool_use" && role == "assistant") {
      std::string id, name;
      if (auto e = RequiredString(b, "id", bp, &id)) return e;
      if (auto e = RequiredString(b, "name", bp, &name)) return e;
      const Json* input = Field(b, "input");
      if (!input || !input->is_object()) return BadRequest(fmt::format("'{}.input' must be an object", bp), bp + ".input");
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input->dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      std::string id, result;
      if (auto e = RequiredString(b, "tool_use_id", bp, &id)) return e;
      if (const Json* c = Field(b, "content")) {
        if (auto e = BlocksText(*c, bp + ".content", &result)) return e;
      }
      if (const Json* err = Field(b, "is_error"); err && *err == true) result = "Error: " + result;
      messages->push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else if (type == "thinking" && role == "assistant") {
      // Earlier reasoning: the turn's reasoning_content, which templates of
      // reasoning models render for the turns after the last user message.
      std::string t;
      if (auto e = RequiredString(b, "thinking", bp, &t)) return e;
      thinking += (thinking.empty() ? "" : "\n") + t;
    } else if (type == "thinking" || type == "redacted_thinking") {
      continue;  // encrypted (or misplaced) reasoning: nothing a template can show
    } else {
      return NotSupported(bp + ".type", fmt::format("'{}' blocks in a {} message (text{} are served)", Clip(type, 32), role,
                                                    role == "user" ? ", tool_result" : ", tool_use"));
    }
  }
  if (role == "assistant") {
    Json msg = {{"role", role}, {"content", text}};  // "" rather than null: simple templates concatenate content
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (has_text || msg.contains("tool_calls") || !thinking.empty()) messages->push_back(std::move(msg));
  } else if (has_text) {
    messages->push_back({{"role", role}, {"content", text}});
  }
  return std::nullopt;
}

Err MessagesTools(const Json& tools, Json* out) {
  if (!tools.is_array()) return WrongType("tools", "an array", tools);
  *out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) return WrongType(p, "an object", t);
    if (const Json* type = Field(t, "type"); type && *type != "custom") {
      return NotSupported(p + ".type", fmt::format("server tools ({}); only custom tools with an input_schema are served",
                                                   Clip(type->dump(), 40)));
    }
    std::string name;
    if (auto e = RequiredString(t, "name", p, &name)) return e;
    const Json* schema = Field(t, "input_schema");
    if (!schema) return BadRequest(fmt::format("'{}.input_schema' is required", p), p + ".input_schema", "missing_required_parameter");
    Json fn = {{"name", name}, {"parameters", *schema}};
    if (const Json* d = Field(t, "description")) fn["description"] = *d;
    out->push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return std::nullopt;
}

Err MessagesToolChoice(const Json& tc, Json* chat) {
  if (!tc.is_object()) return WrongType("tool_choice", "an object", tc);
  std::string type;
  if (auto e = RequiredString(tc, "type", "tool_choice", &type)) return e;
  if (type == "auto") {
    (*chat)["tool_choice"] = "auto";
  } else if (type == "any") {
    (*chat)["tool_choice"] = "required";
  } else if (type == "none") {
    (*chat)["tool_choice"] = "none";
  } else if (type == "tool") {
    std::string name;
    if (auto e = RequiredString(tc, "name", "tool_choice", &name)) return e;
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    return BadRequest(fmt::format("'tool_choice.type' must be auto, any, tool or none, got '{}'", Clip(type, 32)),
                      "tool_choice.type");
  }
  if (const Json* d = Field(tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) return WrongType("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    (*chat)["parallel_tool_calls"] = !d->get<bool>();
  }
  return std::nullopt;
}

// thinking: {"type": "enabled", "budget_tokens"} | {"type": "disabled"} |
// {"type": "adaptive"}: on or off is the template's enable_thinking (what
// templates of hybrid reasoning models read); adaptive leaves the template's
// default. The budget is checked, not enforced: max_tokens bounds the reply.
Err Thinking(const Json& th, Json* chat) {
  if (!th.is_object()) return WrongType("thinking", "an object", th);
  std::string type;
  if (auto e = RequiredString(th, "type", "thinking", &type)) return e;
  if (type == "enabled") {
    const Json* budget = Field(th, "budget_tokens");
    if (!budget) {
      return BadRequest("'thinking.budget_tokens' is required", "thinking.budget_tokens", "missing_required_parameter");
    }
    if (!budget->is_number_integer() || budget->get<int64_t>() < 1) {
      return BadRequest("'thinking.budget_tokens' must be a positive integer", "thinking.budget_tokens");
    }
    (*chat)["chat_template_kwargs"] = {{"enable_thinking", true}};
  } else if (type == "disabled") {
    (*chat)["chat_template_kwargs"] = {{"enable_thinking", false}};
  } else if (type != "adaptive" && type != "between_tools") {
    return BadRequest(fmt::format("'thinking.type' must be enabled, disabled or adaptive, got '{}'", Clip(type, 32)),
                      "thinking.type");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseMessagesRequest(const Json& body, ParsedRequest* out) {
  Json chat = Json::object();
  if (const Json* th = Field(body, "thinking")) {
    if (auto e = Thinking(*th, &chat)) return e;
  }
  // cache_salt and priority (vLLM's fields, as on chat completions): the
  // gateway sets them to keep tenants' prefix caches apart and to apply a
  // tenant's priority class; dropping them would share a cache across tenants.
  for (const char* k : {"model", "stream", "temperature", "top_p", "top_k", "cache_salt", "priority"}) {
    if (auto it = body.find(k); it != body.end()) chat[k] = *it;
  }
  const Json* max_tokens = Field(body, "max_tokens");
  if (!max_tokens) return BadRequest("'max_tokens' is required", "max_tokens", "missing_required_parameter");
  chat["max_tokens"] = *max_tokens;
  if (const Json* stops = Field(body, "stop_sequences")) {
    if (!stops->is_array()) return WrongType("stop_sequences", "an array of strings", *stops);
    chat["stop"] = *stops;
  }
  Json messages = Json::array();
  if (const Json* system = Field(body, "system")) {
    std::string text;
    if (auto e = BlocksText(*system, "system", &text)) return e;
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  const Json* msgs = Field(body, "messages");
  if (!msgs) return BadRequest("'messages' is required", "messages", "missing_required_parameter");
  if (!msgs->is_array()) return WrongType("messages", "an array", *msgs);
  if (msgs->empty()) return BadRequest("'messages' must hold at least one message", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    if (auto e = Message((*msgs)[i], fmt::format("messages[{}]", i), &messages)) return e;
  }
  chat["messages"] = std::move(messages);
  if (const Json* tools = Field(body, "tools")) {
    Json t;
    if (auto e = MessagesTools(*tools, &t)) return e;
    chat["tools"] = std::move(t);
  }
  if (const Json* tc = Field(body, "tool_choice")) {
    if (auto e = MessagesToolChoice(*tc, &chat)) return e;
  }
  ParsedRequest r;
  if (auto e = ParseChatRequest(chat, &r)) {
    // Messages were rewritten (tool results split off), so their indices
    // would mislead: name the whole field.
    ApiError err = dialect::RenameParam(std::move(*e), {{"stop", "stop_sequences"}});
    if (err.param && err.param->rfind("messages[", 0) == 0) err.param = "messages";
    return err;
  }
  r.dialect = Dialect::kAnthropic;
  *out = std::move(r);
  return std::nullopt;
}

namespace {

class MessagesShape : public DialectShape {
 public:
  MessagesShape(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}

  std::vector<SseOut> Start(const Usage& u) override {
    json msg = {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", u.prompt_tokens}, {"output_tokens", 0}}}};
    return {Event("message_start", {{"message", std::move(msg)}}), Event("ping", json::object())};
  }

  std::vector<SseOut> Reasoning(int, std::string_view text) override {
    std::vector<SseOut> ev;
    if (text.empty()) return ev;
    if (open_ != Open::kThinking) {
      Close(&ev);
      open_ = Open::kThinking;
      blocks_.push_back({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      ev.push_back(Event("content_block_start", {{"index", Index()}, {"content_block", blocks_.back()}}));
    }
    blocks_.back()["thinking"] = blocks_.back()["thinking"].get<std::string>() + std::string(text);
    ev.push_back(
        Event("content_block_delta", {{"index", Index()}, {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}}));
    return ev;
  }

  std::vector<SseOut> Text(int, std::string_view text, std::vector<LogprobToken>) override {
    std::vector<SseOut> ev;
    if (text.empty()) return ev;
    if (open_ != Open::kText) {
      Close(&ev);
      open_ = Open::kText;
      blocks_.push_back({{"type", "text"}, {"text", ""}});
      ev.push_back(Event("content_block_start", {{"index", Index()}, {"content_block", blocks_.back()}}));
    }
    blocks_.back()["text"] = blocks_.back()["text"].get<std::string>() + std::string(text);
    ev.push_back(Event("content_block_delta", {{"index", Index()}, {"delta", {{"type", "text_delta"}, {"text", text}}}}));
    return ev;
  }

  std::vector<SseOut> ToolCalls(int, std::span<const grammar::ToolCallDelta> calls) override {
    std::vector<SseOut> ev;
    for (const grammar::ToolCallDelta& d : calls) {
      for (SseOut& e : OneCall(d)) ev.push_back(std::move(e));
    }
    return ev;
  }

  std::vector<SseOut> FinishChoice(int, const ChoiceEnd& end) override {
    end_ = end;
    return {};
  }

  std::vector<SseOut> End(const Usage& usage) override {
    const ChoiceEnd& end = end_;
    std::vector<SseOut> ev;
    Close(&ev);
    if (end.finish_reason == "length") {
      stop_reason_ = "max_tokens";
    } else if (end.finish_reason == "tool_calls") {
      stop_reason_ = "tool_use";
    } else if (!end.stop_string.empty()) {
      stop_reason_ = "stop_sequence";
      stop_sequence_ = end.stop_string;
    } else {
      stop_reason_ = "end_turn";
    }
    usage_ = {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
              {"cache_read_input_tokens", usage.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"output_tokens", usage.completion_tokens}};
    // The whole usage: message_start's input_tokens did not know the cached part yet.
    ev.push_back(Event("message_delta", {{"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                                         {"usage", usage_}}));
    ev.push_back(Event("message_stop", json::object()));
    return ev;
  }

  json Body() const override {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", blocks_},
            {"stop_reason", stop_reason_},
            {"stop_sequence", stop_sequence_},
            {"usage", usage_}};
  }

  SseOut StreamError(const ApiError& e) override { return {"error", AnthropicErrorJson(e)}; }
  json ErrorBody(const ApiError& e) const override { return AnthropicErrorJson(e); }

 private:
  // One tool-call fragment.
  std::vector<SseOut> OneCall(const grammar::ToolCallDelta& d) {
    std::vector<SseOut> ev;
    if (d.name || open_ != Open::kToolUse) {
      Close(&ev);
      open_ = Open::kToolUse;
      args_.clear();
      blocks_.push_back({{"type", "tool_use"}, {"id", d.id.value_or(MakeToolUseId())}, {"name", d.name.value_or("")},
                         {"input", json::object()}});
      ev.push_back(Event("content_block_start", {{"index", Index()}, {"content_block", blocks_.back()}}));
    }
    if (!d.arguments.empty()) {
      args_ += d.arguments;
      ev.push_back(Event("content_block_delta",
                         {{"index", Index()}, {"delta", {{"type", "input_json_delta"}, {"partial_json", d.arguments}}}}));
    }
    return ev;
  }

  enum class Open { kNone, kThinking, kText, kToolUse };

  static SseOut Event(const std::string& type, json data) {
    data["type"] = type;
    return {type, std::move(data)};
  }
  int Index() const { return static_cast<int>(blocks_.size()) - 1; }
  void Close(std::vector<SseOut>* ev) {
    if (open_ == Open::kNone) return;
    if (open_ == Open::kToolUse) {
      json input = json::parse(args_, nullptr, /*allow_exceptions=*/false);
      blocks_.back()["input"] = input.is_object() ? input : json::object();
    }
    if (open_ == Open::kThinking) {
      // Anthropic's signature lets its API verify thinking sent back; this
      // server keeps no key and reads thinking blocks of earlier turns as
      // plain text, so the signature only identifies the text (its SHA-256).
      const std::string sig = "kvs-sha256-" + Sha256Hex(blocks_.back()["thinking"].get<std::string>());
      blocks_.back()["signature"] = sig;
      ev->push_back(Event("content_block_delta",
                          {{"index", Index()}, {"delta", {{"type", "signature_delta"}, {"signature", sig}}}}));
    }
    ev->push_back(Event("content_block_stop", {{"index", Index()}}));
    open_ = Open::kNone;
  }

  ChoiceEnd end_;  // the choice's end (FinishChoice)
  std::string id_;
  std::string model_;
  json blocks_ = json::array();
  Open open_ = Open::kNone;
  std::string args_;  // the open tool_use block's input JSON so far
  json stop_reason_ = nullptr;
  json stop_sequence_ = nullptr;
  json usage_ = json::object();
};

}  // namespace

std::unique_ptr<DialectShape> MakeMessagesShape(std::string id, std::string model) {
  return std::make_unique<MessagesShape>(std::move(id), std::move(model));
}

json AnthropicErrorJson(const ApiError& e) {
  const char* type = "api_error";
  switch (e.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    case 504: type = "timeout_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

std::string MakeToolUseId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "toolu_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
  return id;
}

}  // namespace kvs::api
