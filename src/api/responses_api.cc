#include "api/responses_api.h"

#include <map>

#include <fmt/format.h>

#include "api/request_fields.h"

namespace kvs::api {

namespace {

using json = nlohmann::json;
using Err = std::optional<ApiError>;

using dialect::Field;
using dialect::NotSupported;
using dialect::RequiredString;
using dialect::WrongType;

// The text of a message's content: a string, or parts of type input_text /
// output_text (joined with "\n"); other part types are refused.
Err ContentText(const Json& content, const std::string& param, std::string* out) {
  return dialect::JoinedText(content, param, "content parts", "an object", [](const Json& part, const std::string& p, std::string* out_text) -> Err {
    const Json* type = Field(part, "type");
    if (!type || !type->is_string()) return BadRequest(fmt::format("'{}.type' must be a string", p), p + ".type");
    const std::string& t = type->get_ref<const std::string&>();
    if (t != "input_text" && t != "output_text" && t != "text") {
      return NotSupported(p + ".type", fmt::format("content parts of type '{}' (this server serves text: input_text, output_text)", Clip(t, 32)));
    }
    const Json* text = Field(part, "text");
    if (!text || !text->is_string()) return BadRequest(fmt::format("'{}.text' must be a string", p), p + ".text");
    *out_text = text->get<std::string>();
    return std::nullopt;
  }, out);
}

// The text of a reasoning input item (its reasoning_text content, else its
// summary), "" when it has none in a readable shape: such items were
// skipped before reasoning was served, so a malformed one still is.
std::string ReasoningItemText(const Json& item) {
  for (const char* key : {"content", "summary"}) {
    const Json* parts = Field(item, key);
    if (!parts || !parts->is_array()) continue;
    std::string text;
    for (const Json& p : *parts) {
      const Json* t = p.is_object() ? Field(p, "text") : nullptr;
      if (!t || !t->is_string()) continue;
      if (!text.empty()) text += "\n";
      text += t->get<std::string>();
    }
    if (!text.empty()) return text;
  }
  return "";
}

// input items -> chat messages (appended to *messages). A reasoning item
// becomes the reasoning_content of the assistant turn that follows it
// (templates of reasoning models render it for the turns after the last
// user message).
Err InputItems(const Json& input, Json* messages) {
  std::map<std::string, std::string> call_names;  // call_id -> function name
  std::string reasoning;                          // of the next assistant turn
  auto attach_reasoning = [&](Json& turn) {
    if (reasoning.empty()) return;
    turn["reasoning_content"] = std::move(reasoning);
    reasoning.clear();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string p = fmt::format("input[{}]", i);
    if (!item.is_object()) return WrongType(p, "an object", item);
    std::string type = "message";
    if (const Json* t = Field(item, "type")) {
      if (!t->is_string()) return WrongType(p + ".type", "a string", *t);
      type = t->get<std::string>();
    }
    if (type == "message") {
      std::string role;
      if (auto e = RequiredString(item, "role", p, &role)) return e;
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        return BadRequest(fmt::format("'{}.role' must be one of user, assistant, system, developer; got '{}'", p, Clip(role, 32)),
                          p + ".role");
      }
      const Json* content = nullptr;
      if (auto e = dialect::Required(item, "content", p, &content)) return e;
      std::string text;
      if (auto e = ContentText(*content, p + ".content", &text)) return e;
      messages->push_back({{"role", role}, {"content", text}});
      if (role == "assistant") attach_reasoning(messages->back());
    } else if (type == "function_call") {
      std::string call_id, name, arguments;
      if (auto e = RequiredString(item, "call_id", p, &call_id)) return e;
      if (auto e = RequiredString(item, "name", p, &name)) return e;
      if (auto e = RequiredString(item, "arguments", p, &arguments)) return e;
      call_names[call_id] = name;
      Json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
      // Consecutive calls (and a text reply before them) form one assistant turn.
      if (messages->empty() || messages->back().value("role", "") != "assistant") {
        messages->push_back({{"role", "assistant"}, {"content", ""}});  // "": templates that concatenate content
      }
      attach_reasoning(messages->back());
      Json& turn = messages->back();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = Json::array();
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      std::string call_id;
      if (auto e = RequiredString(item, "call_id", p, &call_id)) return e;
      const Json* output = nullptr;
      if (auto e = dialect::Required(item, "output", p, &output)) return e;
      std::string text;
      if (auto e = ContentText(*output, p + ".output", &text)) return e;
      Json msg = {{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}};
      if (auto it = call_names.find(call_id); it != call_names.end()) msg["name"] = it->second;
      messages->push_back(std::move(msg));
    } else if (type == "reasoning") {
      const std::string text = ReasoningItemText(item);
      if (!text.empty()) reasoning += (reasoning.empty() ? "" : "\n") + text;
    } else {
      return NotSupported(p + ".type", fmt::format("input items of type '{}' (message, function_call and "
                                                   "function_call_output are served)",
                                                   Clip(type, 32)));
    }
  }
  return std::nullopt;
}

// Responses tools (flat) -> chat tools ({"type": "function", "function": {...}}).
Err ResponsesTools(const Json& tools, Json* out) {
  if (!tools.is_array()) return WrongType("tools", "an array", tools);
  *out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) return WrongType(p, "an object", t);
    const Json* type = Field(t, "type");
    if (!type || !type->is_string()) return BadRequest(fmt::format("'{}.type' must be a string", p), p + ".type");
    if (*type != "function") {
      return NotSupported(p + ".type", fmt::format("tools of type '{}' (only function tools are served)",
                                                   Clip(type->get<std::string>(), 32)));
    }
    std::string name;
    if (auto e = RequiredString(t, "name", p, &name)) return e;
    Json fn = {{"name", name}};
    for (const char* k : {"description", "parameters", "strict"}) {
      if (const Json* f = Field(t, k)) fn[k] = *f;
    }
    out->push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return std::nullopt;
}

Err ResponsesToolChoice(const Json& tc, Json* out) {
  if (tc.is_string()) {
    *out = tc;  // auto / none / required: ParseChatRequest checks the value
    return std::nullopt;
  }
  if (!tc.is_object()) return WrongType("tool_choice", "a string or an object", tc);
  const Json* type = Field(tc, "type");
  const Json* name = Field(tc, "name");
  if (!type || *type != "function" || !name || !name->is_string()) {
    return BadRequest("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}",
                      "tool_choice");
  }
  *out = {{"type", "function"}, {"function", {{"name", *name}}}};
  return std::nullopt;
}

Err TextFormat(const Json& text, Json* chat) {
  if (!text.is_object()) return WrongType("text", "an object", text);
  const Json* format = Field(text, "format");
  if (!format) return std::nullopt;
  if (!format->is_object()) return WrongType("text.format", "an object", *format);
  const Json* type = Field(*format, "type");
  if (!type || !type->is_string()) return BadRequest("'text.format.type' must be a string", "text.format.type");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    (*chat)["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (*type == "json_schema") {
    Json js = Json::object();
    for (const char* k : {"name", "schema", "strict", "description"}) {
      if (const Json* f = Field(*format, k)) js[k] = *f;
    }
    (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
    return std::nullopt;
  }
  return BadRequest(fmt::format("'text.format.type' must be text, json_object or json_schema, got '{}'",
                                Clip(type->get<std::string>(), 32)),
                    "text.format.type");
}

}  // namespace

std::optional<ApiError> ParseResponsesRequest(const Json& body, ParsedRequest* out) {
  for (const char* k : {"previous_response_id", "conversation", "prompt"}) {
    if (Field(body, k)) return NotSupported(k, "kvserve keeps no conversation state; send the whole input");
  }
  if (const Json* bg = Field(body, "background"); bg && *bg == true) {
    return NotSupported("background", "responses are generated while the request is open");
  }
  if (const Json* t = Field(body, "truncation"); t && *t != "disabled") {
    return NotSupported("truncation", "only \"disabled\" (input beyond the context is a 400)");
  }
  if (const Json* t = Field(body, "top_logprobs"); t && *t != 0) return NotSupported("top_logprobs", "no logprobs on /v1/responses");
  if (Field(body, "max_tool_calls")) return NotSupported("max_tool_calls", "use parallel_tool_calls false for one call");
  if (const Json* inc = Field(body, "include"); inc && inc->is_array()) {
    for (const Json& v : *inc) {
      if (v == "message.output_text.logprobs") return NotSupported("include", "no logprobs on /v1/responses");
    }
  }

  Json chat = Json::object();
  for (const char* k : {"model", "stream", "temperature", "top_p", "parallel_tool_calls", "user", "seed", "top_k", "min_p",
                        "presence_penalty", "frequency_penalty", "repetition_penalty", "cache_salt", "priority"}) {
    if (auto it = body.find(k); it != body.end()) chat[k] = *it;
  }
  if (const Json* m = Field(body, "max_output_tokens")) chat["max_tokens"] = *m;
  Json messages = Json::array();
  if (const Json* ins = Field(body, "instructions")) {
    if (!ins->is_string()) return WrongType("instructions", "a string", *ins);
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  const Json* input = Field(body, "input");
  if (!input) return BadRequest("you must provide an input parameter", "input", "missing_required_parameter");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (auto e = InputItems(*input, &messages)) return e;
  } else {
    return WrongType("input", "a string or an array of input items", *input);
  }
  chat["messages"] = std::move(messages);
  if (const Json* tools = Field(body, "tools")) {
    Json t;
    if (auto e = ResponsesTools(*tools, &t)) return e;
    chat["tools"] = std::move(t);
  }
  if (const Json* tc = Field(body, "tool_choice")) {
    Json t;
    if (auto e = ResponsesToolChoice(*tc, &t)) return e;
    chat["tool_choice"] = std::move(t);
  }
  if (const Json* text = Field(body, "text")) {
    if (auto e = TextFormat(*text, &chat)) return e;
  }
  if (const Json* reasoning = Field(body, "reasoning")) {
    // {"effort", "summary"}: the effort is the template's reasoning_effort;
    // no summary is written (the reasoning item holds the text itself).
    if (!reasoning->is_object()) return WrongType("reasoning", "an object", *reasoning);
    if (const Json* effort = Field(*reasoning, "effort")) {
      if (!effort->is_string()) return WrongType("reasoning.effort", "a string", *effort);
      chat["reasoning_effort"] = *effort;
    }
    for (const char* k : {"summary", "generate_summary"}) {
      const Json* f = Field(*reasoning, k);
      if (f && !f->is_string()) return WrongType(std::string("reasoning.") + k, "a string", *f);
    }
  }
  ParsedRequest r;
  if (auto e = ParseChatRequest(chat, &r)) {
    return dialect::RenameParam(std::move(*e), {{"max_tokens", "max_output_tokens"},
                                                {"messages", "input"},
                                                {"response_format.json_schema", "text.format"},
                                                {"response_format", "text.format"},
                                                {"reasoning_effort", "reasoning.effort"}});
  }
  r.dialect = Dialect::kResponses;
  auto echo_of = [&](const char* k, json dflt) {
    const Json* f = Field(body, k);
    return f ? json::parse(f->dump()) : dflt;
  };
  r.dialect_echo = {{"instructions", echo_of("instructions", nullptr)},
                    {"max_output_tokens", echo_of("max_output_tokens", nullptr)},
                    {"temperature", echo_of("temperature", 1.0)},
                    {"top_p", echo_of("top_p", 1.0)},
                    {"tools", echo_of("tools", json::array())},
                    {"tool_choice", echo_of("tool_choice", "auto")},
                    {"parallel_tool_calls", echo_of("parallel_tool_calls", true)},
                    {"text", echo_of("text", {{"format", {{"type", "text"}}}})},
                    {"metadata", echo_of("metadata", json::object())},
                    {"reasoning", echo_of("reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
                    {"user", echo_of("user", nullptr)}};
  *out = std::move(r);
  return std::nullopt;
}

namespace {

class ResponsesShape : public DialectShape {
 public:
  ResponsesShape(std::string id, int64_t created_at, std::string model, json echo)
      : id_(std::move(id)), created_(created_at), model_(std::move(model)), echo_(std::move(echo)) {}

  std::vector<SseOut> Start(const Usage&) override {
    std::vector<SseOut> ev;
    ev.push_back(Event("response.created", {{"response", Response()}}));
    ev.push_back(Event("response.in_progress", {{"response", Response()}}));
    return ev;
  }

  std::vector<SseOut> Reasoning(int, std::string_view text) override {
    std::vector<SseOut> ev;
    if (text.empty()) return ev;
    if (open_ != Open::kReasoning) {
      Close("completed", &ev);
      open_ = Open::kReasoning;
      text_.clear();
      items_.push_back(
          {{"id", ItemId("rs")}, {"type", "reasoning"}, {"summary", json::array()}, {"status", "in_progress"}});
      ev.push_back(Event("response.output_item.added", {{"output_index", Index()}, {"item", items_.back()}}));
      ev.push_back(Event("response.content_part.added", {{"item_id", items_.back()["id"]},
                                                         {"output_index", Index()},
                                                         {"content_index", 0},
                                                         {"part", ReasoningPart("")}}));
    }
    text_ += text;
    ev.push_back(Event("response.reasoning_text.delta", {{"item_id", items_.back()["id"]},
                                                         {"output_index", Index()},
                                                         {"content_index", 0},
                                                         {"delta", std::string(text)}}));
    return ev;
  }

  std::vector<SseOut> Text(int, std::string_view text, std::vector<LogprobToken>) override {
    std::vector<SseOut> ev;
    if (text.empty()) return ev;
    if (open_ != Open::kMessage) {
      Close("completed", &ev);
      open_ = Open::kMessage;
      text_.clear();
      items_.push_back({{"id", ItemId("msg")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                        {"content", json::array()}});
      ev.push_back(Event("response.output_item.added", {{"output_index", Index()}, {"item", items_.back()}}));
      ev.push_back(Event("response.content_part.added", {{"item_id", items_.back()["id"]},
                                                         {"output_index", Index()},
                                                         {"content_index", 0},
                                                         {"part", Part("")}}));
    }
    text_ += text;
    ev.push_back(Event("response.output_text.delta", {{"item_id", items_.back()["id"]},
                                                      {"output_index", Index()},
                                                      {"content_index", 0},
                                                      {"delta", std::string(text)},
                                                      {"logprobs", json::array()}}));
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
    const bool incomplete = end.finish_reason == "length";
    Close(incomplete ? "incomplete" : "completed", &ev);
    status_ = incomplete ? "incomplete" : "completed";
    if (incomplete) incomplete_ = {{"reason", "max_output_tokens"}};
    usage_ = {{"input_tokens", usage.prompt_tokens},
              {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
              {"output_tokens", usage.completion_tokens},
              {"output_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens.value_or(0)}}},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
    ev.push_back(Event(incomplete ? "response.incomplete" : "response.completed", {{"response", Response()}}));
    return ev;
  }

  json Body() const override { return Response(); }

  SseOut StreamError(const ApiError& e) override {
    return Event("error", {{"code", e.code}, {"message", e.message}, {"param", e.param ? json(*e.param) : json(nullptr)}});
  }
  json ErrorBody(const ApiError& e) const override { return e.ToJson(); }

 private:
  // One tool-call fragment.
  std::vector<SseOut> OneCall(const grammar::ToolCallDelta& d) {
    std::vector<SseOut> ev;
    if (d.name || open_ != Open::kCall) {
      Close("completed", &ev);
      open_ = Open::kCall;
      args_.clear();
      items_.push_back({{"id", ItemId("fc")},
                        {"type", "function_call"},
                        {"status", "in_progress"},
                        {"call_id", d.id.value_or("")},
                        {"name", d.name.value_or("")},
                        {"arguments", ""}});
      ev.push_back(Event("response.output_item.added", {{"output_index", Index()}, {"item", items_.back()}}));
    }
    if (!d.arguments.empty()) {
      args_ += d.arguments;
      ev.push_back(Event("response.function_call_arguments.delta",
                         {{"item_id", items_.back()["id"]}, {"output_index", Index()}, {"delta", d.arguments}}));
    }
    return ev;
  }

  enum class Open { kNone, kReasoning, kMessage, kCall };

  SseOut Event(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = seq_++;
    return {type, std::move(data)};
  }
  static json Part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
  }
  static json ReasoningPart(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }
  int Index() const { return static_cast<int>(items_.size()) - 1; }
  std::string ItemId(const char* prefix) const {
    // Unique within the response, and across responses through its id.
    return fmt::format("{}_{}_{}", prefix, id_.substr(id_.find('_') + 1), items_.size());
  }
  // Ends the open output item (its .done events).
  void Close(const char* status, std::vector<SseOut>* ev) {
    if (open_ == Open::kNone) return;
    json& item = items_.back();
    item["status"] = status;
    if (open_ == Open::kReasoning) {
      item["content"] = json::array({ReasoningPart(text_)});
      ev->push_back(Event("response.reasoning_text.done",
                          {{"item_id", item["id"]}, {"output_index", Index()}, {"content_index", 0}, {"text", text_}}));
      ev->push_back(Event("response.content_part.done", {{"item_id", item["id"]},
                                                         {"output_index", Index()},
                                                         {"content_index", 0},
                                                         {"part", ReasoningPart(text_)}}));
    } else if (open_ == Open::kMessage) {
      item["content"] = json::array({Part(text_)});
      ev->push_back(Event("response.output_text.done", {{"item_id", item["id"]},
                                                        {"output_index", Index()},
                                                        {"content_index", 0},
                                                        {"text", text_},
                                                        {"logprobs", json::array()}}));
      ev->push_back(Event("response.content_part.done",
                          {{"item_id", item["id"]}, {"output_index", Index()}, {"content_index", 0}, {"part", Part(text_)}}));
    } else {
      item["arguments"] = args_;
      ev->push_back(Event("response.function_call_arguments.done",
                          {{"item_id", item["id"]}, {"output_index", Index()}, {"arguments", args_}}));
    }
    ev->push_back(Event("response.output_item.done", {{"output_index", Index()}, {"item", item}}));
    open_ = Open::kNone;
  }
  json Response() const {
    json r = {{"id", id_},
              {"object", "response"},
              {"created_at", created_},
              {"status", status_},
              {"error", nullptr},
              {"incomplete_details", incomplete_},
              {"model", model_},
              {"output", items_},
              {"usage", usage_},
              {"previous_response_id", nullptr},
              {"store", false}};
    for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
    return r;
  }

  ChoiceEnd end_;  // the choice's end (FinishChoice)
  std::string id_;
  int64_t created_;
  std::string model_;
  json echo_;
  int64_t seq_ = 0;
  json items_ = json::array();
  Open open_ = Open::kNone;
  std::string text_;  // the open message's (or reasoning item's) text
  std::string args_;  // the open call's arguments
  std::string status_ = "in_progress";
  json incomplete_ = nullptr;
  json usage_ = nullptr;
};

}  // namespace

std::unique_ptr<DialectShape> MakeResponsesShape(std::string id, int64_t created_at, std::string model, json echo) {
  return std::make_unique<ResponsesShape>(std::move(id), created_at, std::move(model), std::move(echo));
}

}  // namespace kvs::api
