#include "template/model_chat.h"

#include <fmt/format.h>

namespace kvs::tmpl {
namespace {

using nlohmann::ordered_json;

struct Probe {
  const char* name;
  ordered_json messages;
  ordered_json tools;
};

const char* const kTools = R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]}}}])";

// The probes after the minimal one (a user message, with or without tools).
std::vector<Probe> RicherProbes(bool with_tools) {
  std::vector<Probe> probes;
  probes.push_back({"system, user, assistant, user", ordered_json::parse(R"([
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "What is 2 + 2?"},
      {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3 + 3?"}])"),
                    nullptr});
  if (with_tools) {
    const ordered_json tools = ordered_json::parse(kTools);
    probes.push_back({"a system prompt with tools", ordered_json::parse(R"([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Weather in Paris?"}])"),
                      tools});
    probes.push_back({"a tool call and its result", ordered_json::parse(R"([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C, sunny"},
        {"role": "user", "content": "Thanks!"}])"),
                      tools});
  }
  return probes;
}

bool IsBudget(const Status& s) {
  return s.code() == StatusCode::kResourceExhausted || s.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace

Status ProbeChatTemplate(const ChatTemplate& chat, const std::string& bos_token, const std::string& eos_token,
                         const RenderLimits& limits, ProbeReport* report) {
  const bool with_tools = chat.source().find("tools") != std::string::npos;
  auto render = [&](const Probe& p) -> Status {
    ChatRequest r;
    r.messages = p.messages;
    r.tools = p.tools;
    r.add_generation_prompt = true;
    r.bos_token = bos_token;
    r.eos_token = eos_token;
    auto text = chat.Render(r, limits);
    if (!text.ok()) return text.status();
    if (text->empty()) return InvalidArgument("the template renders nothing");
    return Status::Ok();
  };
  auto exceeded = [](const Probe& p, const Status& s) {
    return Status(s.code(), fmt::format("the chat template exceeds a render budget on the start-up probe ({}): {}",
                                        p.name, s.message()));
  };
  // The minimal conversation: a user message; a template written for tool
  // use may need tools with it.
  const ordered_json user = ordered_json::parse(R"([{"role": "user", "content": "Hello!"}])");
  const Probe minimal{"a user message", user, nullptr};
  const Status plain = render(minimal);
  if (IsBudget(plain)) return exceeded(minimal, plain);
  if (!plain.ok()) {
    const Probe with{"a user message with tools", user, ordered_json::parse(kTools)};
    const Status tooled = with_tools ? render(with) : plain;
    if (IsBudget(tooled)) return exceeded(with, tooled);
    if (tooled.ok()) {
      report->notes.push_back(fmt::format("the chat template needs tools: without them it fails: {}", plain.message()));
    } else {
      report->warnings.push_back(
          fmt::format("the chat template fails on the start-up probe (a user message): {}{}; chat requests will "
                      "fail the same way unless they pass what the template needs (chat_template_kwargs)",
                      plain.message(), with_tools ? "; with a tool: " + tooled.message() : std::string()));
    }
  }
  for (const Probe& p : RicherProbes(with_tools)) {
    const Status s = render(p);
    if (IsBudget(s)) return exceeded(p, s);
    if (!s.ok()) report->notes.push_back(fmt::format("the chat template declines {}: {}", p.name, s.message()));
  }
  return Status::Ok();
}

StatusOr<ModelChatTemplate> LoadModelChatTemplate(const tok::Tokenizer& tok, const ChatTemplateLoadOptions& options) {
  auto chatml = [&](std::string note) -> StatusOr<ModelChatTemplate> {
    KVS_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Builtin("chatml"));
    ModelChatTemplate m{std::move(t), true, {}};
    if (!note.empty()) m.probe.warnings.push_back(std::move(note));
    return m;
  };
  const std::string& source = tok.chat_template();
  if (source.empty()) return chatml("");
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) {
    Status s = t.status().WithContext("the model's chat template");
    if (!options.fall_back_if_broken) return s;
    return chatml(s.message() + "; using ChatML instead");
  }
  ChatRequest special;
  SetSpecialTokens(tok, &special);
  ModelChatTemplate m{std::move(*t), false, {}};
  Status probe = ProbeChatTemplate(m.tmpl, special.bos_token, special.eos_token, options.limits, &m.probe);
  if (!probe.ok() || (!m.probe.warnings.empty() && options.fall_back_if_broken)) {
    if (!options.fall_back_if_broken) return probe;
    return chatml((probe.ok() ? m.probe.warnings.front() : probe.message()) + "; using ChatML instead");
  }
  return m;
}

void SetSpecialTokens(const tok::Tokenizer& tok, ChatRequest* request) {
  if (tok.bos_id() >= 0) request->bos_token = tok.TokenText(tok.bos_id());
  if (tok.eos_id() >= 0) request->eos_token = tok.TokenText(tok.eos_id());
}

}  // namespace kvs::tmpl
