#include "api/response.h"

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

}  // namespace kvs::api
