#include "api/response.h"

#include "api/dialect.h"
#include "base/status.h"

namespace kvs::api {

using nlohmann::json;

namespace {

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

ChoiceText::ChoiceText(std::shared_ptr<const std::vector<std::string>> stops, bool logprobs)
    : stop_(std::move(stops)), logprobs_(logprobs) {}

bool ChoiceText::AddToken(TokenOutput t, std::string* out) {
  if (done_) return cut_by_stop_;
  const size_t start = generated_bytes_;
  generated_bytes_ += t.text.size();
  StopMatcher::Result r = stop_.Push(t.text);
  if (logprobs_) pending_.push_back({std::move(t), start, generated_bytes_});
  *out += r.released;
  released_bytes_ += r.released.size();
  if (r.stopped) {
    done_ = true;
    cut_by_stop_ = true;
    matched_stop_ = std::move(r.matched);
  }
  return r.stopped;
}

bool ChoiceText::End(std::string_view tail, std::string* out) {
  if (done_) return cut_by_stop_;
  done_ = true;
  StopMatcher::Result r = stop_.Push(tail);
  *out += r.released;
  released_bytes_ += r.released.size();
  if (r.stopped) {
    cut_by_stop_ = true;
    matched_stop_ = std::move(r.matched);
    return true;
  }
  const std::string rest = stop_.Flush();
  *out += rest;
  released_bytes_ += rest.size();
  return false;
}

std::vector<LogprobToken> ChoiceText::TakeReadyLogprobs() {
  std::vector<LogprobToken> ready;
  while (!pending_.empty()) {
    const LogprobToken& f = pending_.front();
    const bool send = f.end <= released_bytes_ || (done_ && !cut_by_stop_) ||
                      (done_ && cut_by_stop_ && f.start < released_bytes_);
    if (!send) break;
    ready.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  if (done_) pending_.clear();
  return ready;
}

ResponseShape::ResponseShape(std::string id, int64_t created, std::string model, bool chat, bool include_usage)
    : id_(std::move(id)), created_(created), model_(std::move(model)), chat_(chat), include_usage_(include_usage) {}

json ResponseShape::ChunkBase() const {
  json j = {{"id", id_},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_}};
  if (include_usage_) j["usage"] = nullptr;
  return j;
}

json ResponseShape::StartChunk(int index, const std::string& echo_text) const {
  json chunk = ChunkBase();
  if (chat_) {
    chunk["choices"] = json::array({{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    return chunk;
  }
  if (echo_text.empty()) return nullptr;
  chunk["choices"] =
      json::array({{{"index", index}, {"text", echo_text}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return chunk;
}

json ResponseShape::DeltaChunk(int index, const std::string& text, json logprobs) const {
  json chunk = ChunkBase();
  json choice = {{"index", index}};
  if (chat_) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = nullptr;
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json ResponseShape::FinishChunk(int index, const std::string& finish_reason) const {
  json chunk = ChunkBase();
  json choice = {{"index", index}};
  if (chat_) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json ResponseShape::ToolCallsChunk(int index, json tool_calls) const {
  json chunk = ChunkBase();
  json choice = {{"index", index}};
  choice["delta"] = {{"tool_calls", std::move(tool_calls)}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json ResponseShape::ReasoningChunk(int index, const std::string& text) const {
  json chunk = ChunkBase();
  chunk["choices"] = json::array(
      {{{"index", index}, {"delta", {{"reasoning_content", text}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return chunk;
}

json ResponseShape::UsageChunk(const Usage& u) const {
  json chunk = ChunkBase();
  chunk["choices"] = json::array();
  chunk["usage"] = UsageJson(u);
  return chunk;
}

json ResponseShape::UsageJson(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (u.reasoning_tokens) j["completion_tokens_details"] = {{"reasoning_tokens", *u.reasoning_tokens}};
  return j;
}

json ResponseShape::Body(const std::vector<FinalChoice>& choices, const Usage& u) const {
  json body = {{"id", id_},
               {"object", chat_ ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_}};
  json out = json::array();
  for (const FinalChoice& c : choices) {
    json choice = {{"index", c.index}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (!c.tool_calls.is_null()) {
        if (c.text.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = c.tool_calls;
      }
      if (c.reasoning) {
        choice["message"]["reasoning_content"] = c.reasoning->empty() ? json(nullptr) : json(*c.reasoning);
      }
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = c.logprobs;
    choice["finish_reason"] = c.finish_reason;
    out.push_back(std::move(choice));
  }
  body["choices"] = std::move(out);
  body["usage"] = UsageJson(u);
  return body;
}

json ResponseShape::Logprobs(size_t offset_base, const std::vector<LogprobToken>& toks) const {
  if (chat_) {
    json content = json::array();
    for (const auto& p : toks) {
      json top = json::array();
      for (const auto& a : p.token.top_logprobs) {
        top.push_back({{"token", a.piece}, {"logprob", a.logprob}, {"bytes", Bytes(a.piece)}});
      }
      content.push_back({{"token", p.token.piece},
                         {"logprob", p.token.logprob},
                         {"bytes", Bytes(p.token.piece)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& p : toks) {
    tokens.push_back(p.token.piece);
    token_logprobs.push_back(p.token.logprob);
    json alts = json::object();
    for (const auto& a : p.token.top_logprobs) {
      if (!alts.contains(a.piece)) alts[a.piece] = a.logprob;
    }
    top.push_back(alts);
    offsets.push_back(offset_base + p.start);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

void ResponseShape::AppendLogprobs(json& acc, const json& add) {
  if (acc.is_null()) {
    acc = add;
    return;
  }
  for (auto it = add.begin(); it != add.end(); ++it) {
    if (it.value().is_array()) {
      for (const auto& v : it.value()) acc[it.key()].push_back(v);
    }
  }
}

// The Chat Completions and Completions dialects (api/dialect.h) over
// ResponseShape: a stream sends a start chunk per choice, then per choice
// its deltas and finish chunk, then the usage chunk (include_usage) and
// "data: [DONE]"; a whole response gathers each choice's output for Body().
namespace {

class OpenAIShape : public DialectShape {
 public:
  OpenAIShape(ShapeOptions o, bool chat)
      : o_(std::move(o)), shape_(o_.id, o_.created, o_.model, chat, o_.include_usage), choices_(o_.choice_echo.size()) {
    for (size_t i = 0; i < choices_.size(); ++i) choices_[i].final.index = static_cast<int>(i);
  }

  std::vector<SseOut> Start(const Usage&) override {
    std::vector<SseOut> ev;
    for (size_t i = 0; i < choices_.size(); ++i) {
      json start = shape_.StartChunk(static_cast<int>(i), o_.choice_echo[i]);
      if (!start.is_null()) ev.push_back({"", std::move(start)});
    }
    return ev;
  }

  std::vector<SseOut> Reasoning(int choice, std::string_view text) override {
    if (!o_.stream) {
      At(choice).reasoning += text;
      return {};
    }
    if (text.empty()) return {};
    return {{"", shape_.ReasoningChunk(choice, std::string(text))}};
  }

  std::vector<SseOut> Text(int choice, std::string_view text, std::vector<LogprobToken> logprobs) override {
    Choice& c = At(choice);
    if (!o_.stream) {
      c.final.text += text;
      for (LogprobToken& t : logprobs) c.logprobs.push_back(std::move(t));
      return {};
    }
    if (text.empty() && logprobs.empty()) return {};
    json lp = logprobs.empty() ? json(nullptr) : shape_.Logprobs(Offset(choice), logprobs);
    return {{"", shape_.DeltaChunk(choice, std::string(text), std::move(lp))}};
  }

  std::vector<SseOut> ToolCalls(int choice, std::span<const grammar::ToolCallDelta> calls) override {
    if (calls.empty()) return {};
    if (!o_.stream) {
      Choice& c = At(choice);
      if (c.final.tool_calls.is_null()) c.final.tool_calls = json::array();
      for (const grammar::ToolCallDelta& d : calls) {
        json& list = c.final.tool_calls;
        if (d.id || d.index >= static_cast<int32_t>(list.size())) {
          list.push_back({{"id", d.id.value_or("")},
                          {"type", "function"},
                          {"function", {{"name", d.name.value_or("")}, {"arguments", d.arguments}}}});
        } else {
          json& args = list[static_cast<size_t>(d.index)]["function"]["arguments"];
          args = args.get<std::string>() + d.arguments;
        }
      }
      return {};
    }
    json out = json::array();
    for (const grammar::ToolCallDelta& t : calls) {
      json call = {{"index", t.index}};
      json fn = json::object();
      if (t.id) {
        call["id"] = *t.id;
        call["type"] = "function";
      }
      if (t.name) fn["name"] = *t.name;
      fn["arguments"] = t.arguments;
      call["function"] = std::move(fn);
      out.push_back(std::move(call));
    }
    return {{"", shape_.ToolCallsChunk(choice, std::move(out))}};
  }

  std::vector<SseOut> FinishChoice(int choice, const ChoiceEnd& end) override {
    At(choice).final.finish_reason = end.finish_reason;
    if (!o_.stream) return {};
    return {{"", shape_.FinishChunk(choice, end.finish_reason)}};
  }

  std::vector<SseOut> End(const Usage& usage) override {
    usage_ = usage;
    std::vector<SseOut> ev;
    if (!o_.stream) return ev;
    if (o_.include_usage) ev.push_back({"", shape_.UsageChunk(usage)});
    ev.push_back({"", nullptr, /*done=*/true});
    return ev;
  }

  json Body() const override {
    std::vector<FinalChoice> out;
    out.reserve(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i) {
      FinalChoice f = choices_[i].final;
      // The echoed prompt comes first; logprobs offsets count it.
      f.text = o_.choice_echo[i] + f.text;
      if (o_.logprobs) f.logprobs = shape_.Logprobs(Offset(static_cast<int>(i)), choices_[i].logprobs);
      if (o_.reasoning) f.reasoning = choices_[i].reasoning;
      out.push_back(std::move(f));
    }
    return shape_.Body(out, usage_);
  }

  SseOut StreamError(const ApiError& e) override { return {"error", e.ToJson()}; }
  std::vector<SseOut> FailStream(const ApiError& e) override {
    return {StreamError(e), {"", nullptr, /*done=*/true}};
  }
  json ErrorBody(const ApiError& e) const override { return e.ToJson(); }

 private:
  struct Choice {
    FinalChoice final;  // text, tool_calls and finish_reason so far (whole responses)
    std::vector<LogprobToken> logprobs;
    std::string reasoning;
  };

  Choice& At(int choice) {
    KVS_CHECK(choice >= 0 && static_cast<size_t>(choice) < choices_.size());
    return choices_[static_cast<size_t>(choice)];
  }
  size_t Offset(int choice) const { return o_.choice_echo[static_cast<size_t>(choice)].size(); }

  ShapeOptions o_;
  ResponseShape shape_;
  std::vector<Choice> choices_;
  Usage usage_;
};

}  // namespace

std::unique_ptr<DialectShape> MakeChatShape(ShapeOptions options) {
  return std::make_unique<OpenAIShape>(std::move(options), /*chat=*/true);
}

std::unique_ptr<DialectShape> MakeCompletionsShape(ShapeOptions options) {
  return std::make_unique<OpenAIShape>(std::move(options), /*chat=*/false);
}

}  // namespace kvs::api
