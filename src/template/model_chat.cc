#include "template/model_chat.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "template/chat_polyfill.h"

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

namespace {

// Marker strings of the capability probes: unlikely in any template's text.
constexpr char kSysText[] = "KvsProbeSystemText";
constexpr char kUserText[] = "KvsProbeUserText";
constexpr char kToolName[] = "kvs_probe_tool";
constexpr char kArgValue[] = "KvsProbeArgValue";
constexpr char kArgsText[] = R"({"kvs_probe_arg": "KvsProbeArgValue"})";
constexpr char kEscapedArgKey[] = R"(\"kvs_probe_arg\")";  // the arguments printed as a JSON string
constexpr char kResultText[] = "KvsProbeResultText";

// Renders probe conversations; remembers the first exceeded budget, which
// makes the template broken.
class CapabilityProber {
 public:
  CapabilityProber(const ChatTemplate& chat, const std::string& bos, const std::string& eos, const RenderLimits& limits)
      : chat_(chat), bos_(bos), eos_(eos), limits_(limits) {}

  // tools: the probe's own, or (null) the default: none, [] or the probe's
  // tools for a template that fails without them.
  std::optional<std::string> Render(const ordered_json& messages, const ordered_json& tools = nullptr) {
    ChatRequest r;
    r.messages = messages;
    r.tools = tools.is_null() ? default_tools_ : tools;
    r.add_generation_prompt = true;
    r.bos_token = bos_;
    r.eos_token = eos_;
    auto text = chat_.Render(r, limits_);
    if (!text.ok()) {
      if (IsBudget(text.status()) && budget_.ok()) budget_ = text.status();
      return std::nullopt;
    }
    return std::move(text).value();
  }
  void set_default_tools(ordered_json tools) { default_tools_ = std::move(tools); }
  const Status& budget() const { return budget_; }

  // One tool; with_descriptions: the function and its parameter described.
  static ordered_json Tools(bool with_descriptions = true) {
    ordered_json t = ordered_json::parse(R"([{"type": "function", "function": {"name": "kvs_probe_tool",
        "description": "KvsProbeToolDescription", "parameters": {"type": "object",
        "properties": {"kvs_probe_arg": {"type": "string", "description": "KvsProbeArgDescription"}},
        "required": ["kvs_probe_arg"]}}}])");
    if (!with_descriptions) {
      t[0]["function"].erase("description");
      t[0]["function"]["parameters"]["properties"]["kvs_probe_arg"].erase("description");
    }
    return t;
  }
  static ordered_json User() { return {{"role", "user"}, {"content", kUserText}}; }
  // user -> assistant tool call -> tool result.
  static ordered_json Loop(const std::string& id, bool object_args, bool null_content) {
    ordered_json args = object_args ? ordered_json::parse(kArgsText) : ordered_json(kArgsText);
    ordered_json call = {{"id", id}, {"type", "function"}, {"function", {{"name", kToolName}, {"arguments", args}}}};
    ordered_json assistant = {{"role", "assistant"}, {"content", null_content ? ordered_json() : ordered_json("")},
                              {"tool_calls", ordered_json::array({call})}};
    return ordered_json::array(
        {User(), assistant, {{"role", "tool"}, {"tool_call_id", id}, {"content", kResultText}}});
  }

 private:
  const ChatTemplate& chat_;
  const std::string& bos_;
  const std::string& eos_;
  const RenderLimits& limits_;
  ordered_json default_tools_;
  Status budget_;
};

bool Has(const std::optional<std::string>& text, const char* what) {
  return text && text->find(what) != std::string::npos;
}

}  // namespace

StatusOr<ChatCapabilities> DetectChatCapabilities(const ChatTemplate& chat, const std::string& bos_token,
                                                  const std::string& eos_token, const RenderLimits& limits) {
  CapabilityProber p(chat, bos_token, eos_token, limits);
  ChatCapabilities caps;
  const ordered_json user = ordered_json::array({CapabilityProber::User()});
  const ordered_json tools = CapabilityProber::Tools();
  if (!Has(p.Render(user), kUserText)) {
    // Iterating `tools` without a check needs a list (Hermes 2 Pro); a
    // template written for tool use may need one.
    if (Has(p.Render(user, ordered_json::array()), kUserText)) {
      caps.null_tools = false;
      p.set_default_tools(ordered_json::array());
    } else if (Has(p.Render(user, tools), kUserText)) {
      p.set_default_tools(tools);
    } else {
      if (!p.budget().ok()) return p.budget();
      return caps;
    }
  }
  caps.probed = true;
  const ordered_json system = {{"role", "system"}, {"content", kSysText}};
  const ordered_json system_user = ordered_json::array({system, CapabilityProber::User()});
  caps.system_role = Has(p.Render(system_user), kSysText);
  caps.tools = Has(p.Render(user, tools), kToolName) || Has(p.Render(system_user, tools), kToolName);
  // Tools without descriptions (clients often leave them out) where the
  // template concatenates them ('+' on undefined, |trim).
  caps.descriptions_optional = !caps.tools || Has(p.Render(user, CapabilityProber::Tools(false)), kUserText) ||
                               !Has(p.Render(user, tools), kUserText);

  // The call in every shape: [string args, object args][null content, ""],
  // first with an OpenAI-style id, then with 9 alphanumerics (Mistral).
  std::optional<std::string> out[2][2];
  bool any_rendered = false;
  for (const char* id : {"call_kvsprobe1", "kvsProbe1"}) {
    for (int obj = 0; obj < 2; ++obj) {
      for (int null = 0; null < 2; ++null) {
        out[obj][null] = p.Render(CapabilityProber::Loop(id, obj == 1, null == 0), tools);
        any_rendered = any_rendered || out[obj][null].has_value();
      }
    }
    if (any_rendered) {
      caps.any_call_id = std::string(id) == "call_kvsprobe1";
      break;
    }
  }
  // [0][0] string args, null content; [1][1] object args, "" content.
  auto string_ok = [&](int null) { return Has(out[0][null], kArgsText) && Has(out[0][null], kToolName); };
  auto object_ok = [&](int null) {
    return Has(out[1][null], kArgValue) && Has(out[1][null], kToolName) && !Has(out[1][null], kEscapedArgKey);
  };
  const bool strings = string_ok(0) || string_ok(1);
  const bool objects = object_ok(0) || object_ok(1);
  caps.tool_calls = strings || objects;
  if (caps.tool_calls) {
    caps.arguments = strings && objects ? ArgumentsForm::kAny : strings ? ArgumentsForm::kString : ArgumentsForm::kObject;
    auto shows = [&](int null) { return strings ? string_ok(null) : object_ok(null); };
    const bool with_null = shows(0), with_empty = shows(1);
    caps.content_with_calls = with_null == with_empty ? ContentWithCalls::kAsIs
                              : with_empty           ? ContentWithCalls::kNullToEmpty
                                                     : ContentWithCalls::kEmptyToNull;
  }
  // The tool role: the loop as the polyfills so far leave it (calls written
  // as text where the template does not render them), tool role as is.
  ChatRequest loop;
  loop.messages = CapabilityProber::Loop("call_kvsprobe1", false, true);
  auto polyfilled = ApplyChatPolyfills(caps, "hermes", loop);
  if (!polyfilled.ok()) return polyfilled.status();
  caps.tool_role = Has(p.Render(polyfilled->messages, tools), kResultText);
  if (!p.budget().ok()) return p.budget();
  return caps;
}

namespace {

StatusOr<std::string> ReadTemplateFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("chat template file {}: cannot open it", path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLoss("chat template file {}: cannot read it", path);
  return ss.str();
}

// Detects the capabilities of m->tmpl and stores them; notes when even the
// polyfilled tool loop fails.
Status AddCapabilities(const tok::Tokenizer& tok, const ChatTemplateLoadOptions& options, ModelChatTemplate* m) {
  ChatRequest special;
  SetSpecialTokens(tok, &special);
  auto caps = DetectChatCapabilities(m->tmpl, special.bos_token, special.eos_token, options.limits);
  if (!caps.ok()) {
    return Status(caps.status().code(), fmt::format("the chat template exceeds a render budget on the "
                                                    "capability probe: {}", caps.status().message()));
  }
  m->tmpl.set_capabilities(*caps);
  if (!caps->probed) return Status::Ok();
  ChatRequest loop;
  loop.messages = ordered_json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}])");
  loop.tools = ordered_json::parse(kTools);
  loop.add_generation_prompt = true;
  loop.bos_token = special.bos_token;
  loop.eos_token = special.eos_token;
  KVS_ASSIGN_OR_RETURN(ChatRequest polyfilled, ApplyChatPolyfills(*caps, m->tmpl.tool_call_syntax(), loop));
  if (auto text = m->tmpl.Render(polyfilled, options.limits); !text.ok()) {
    if (IsBudget(text.status())) return text.status();
    m->probe.notes.push_back(fmt::format("the chat template fails an OpenAI tool loop even with polyfills: {}",
                                         text.status().message()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelChatTemplate> LoadModelChatTemplate(const tok::Tokenizer& tok, const ChatTemplateLoadOptions& options) {
  auto chatml = [&](std::string note) -> StatusOr<ModelChatTemplate> {
    KVS_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Builtin("chatml"));
    ModelChatTemplate m{std::move(t), true, "built-in ChatML fallback", {}};
    if (!note.empty()) m.probe.warnings.push_back(std::move(note));
    KVS_RETURN_IF_ERROR(AddCapabilities(tok, options, &m));
    return m;
  };
  const auto& builtins = ChatTemplate::BuiltinNames();
  const bool builtin = std::find(builtins.begin(), builtins.end(), options.override) != builtins.end();
  std::string source = tok.chat_template();
  std::string origin = "the model's";
  if (builtin) {
    origin = "built-in " + options.override;
  } else if (!options.override.empty()) {
    KVS_ASSIGN_OR_RETURN(source, ReadTemplateFile(options.override));
    if (source.empty()) return InvalidArgument("chat template file {} is empty", options.override);
    origin = "file " + options.override;
  }
  if (source.empty() && !builtin) return chatml("");
  auto t = builtin ? ChatTemplate::Builtin(options.override) : ChatTemplate::Parse(source);
  if (!t.ok()) {
    Status s = t.status().WithContext(options.override.empty() ? "the model's chat template"
                                                               : "chat template " + options.override);
    if (!options.fall_back_if_broken || !options.override.empty()) return s;
    return chatml(s.message() + "; using ChatML instead");
  }
  ChatRequest special;
  SetSpecialTokens(tok, &special);
  ModelChatTemplate m{std::move(*t), false, origin, {}};
  Status probe = ProbeChatTemplate(m.tmpl, special.bos_token, special.eos_token, options.limits, &m.probe);
  if (!probe.ok() && !options.override.empty()) return probe.WithContext("chat template " + options.override);
  if (!probe.ok() || (!m.probe.warnings.empty() && options.fall_back_if_broken && options.override.empty())) {
    if (!options.fall_back_if_broken) return probe;
    return chatml((probe.ok() ? m.probe.warnings.front() : probe.message()) + "; using ChatML instead");
  }
  KVS_RETURN_IF_ERROR(AddCapabilities(tok, options, &m));
  return m;
}

void SetSpecialTokens(const tok::Tokenizer& tok, ChatRequest* request) {
  if (tok.bos_id() >= 0) request->bos_token = tok.TokenText(tok.bos_id());
  if (tok.eos_id() >= 0) request->eos_token = tok.TokenText(tok.eos_id());
}

}  // namespace kvs::tmpl
