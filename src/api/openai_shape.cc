#include "api/openai_shape.h"

#include <utility>

#include "base/status.h"

namespace kvs::api {

using nlohmann::json;

// The Chat Completions and Completions dialects (dialect_shape.h) over
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
