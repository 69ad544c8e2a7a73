// `kvserve template`: renders a chat template for a conversation and prints
// the prompt exactly (no newline added), as the server would feed it to the
// tokenizer. The template comes from a GGUF model's tokenizer.chat_template
// (-m), a .jinja file (--template) or a built-in fallback (--builtin).
// As in the server, the template is probed for its capabilities
// (tmpl::DetectChatCapabilities) and the conversation polyfilled where it
// lacks one (template/chat_polyfill.h), tool calls written in the syntax the
// server parses for it (grammar::ToolCallFormatFor); --no-polyfill prints
// the template's own render of exactly the conversation given, and
// --explain prints the capabilities and the polyfills before the prompt.
// Exit 0 on success, 1 when the template fails, 2 on bad input.
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "gguf/gguf.h"
#include "grammar/template_tool_format.h"
#include "template/chat_polyfill.h"
#include "template/chat_template.h"
#include "template/model_chat.h"

namespace kvs::cli {
namespace {

using nlohmann::ordered_json;

struct TemplateArgs {
  std::string model, template_file, builtin, template_name;
  std::string messages, tools, extra;
  std::string bos, eos, now;
  bool have_bos = false, have_eos = false;
  bool add_generation_prompt = false;
  bool explain = false, no_polyfill = false;
};

StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<ordered_json> ReadJson(const std::string& path) {
  KVS_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("{}: not valid JSON", path);
  return j;
}

// The template, plus the model's BOS/EOS strings when it comes from a GGUF.
struct Source {
  std::optional<tmpl::ChatTemplate> chat;
  std::string bos, eos;
};

StatusOr<Source> LoadTemplate(const TemplateArgs& a) {
  const int given = !a.model.empty() + !a.template_file.empty() + !a.builtin.empty();
  if (given != 1) return InvalidArgument("give exactly one of -m MODEL.gguf, --template FILE.jinja, --builtin NAME");
  Source s;
  if (!a.template_file.empty()) {
    KVS_ASSIGN_OR_RETURN(std::string text, ReadText(a.template_file));
    KVS_ASSIGN_OR_RETURN(s.chat, tmpl::ChatTemplate::Parse(std::move(text)));
    return s;
  }
  if (!a.builtin.empty()) {
    KVS_ASSIGN_OR_RETURN(s.chat, tmpl::ChatTemplate::Builtin(a.builtin));
    return s;
  }
  KVS_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::Open(a.model));
  auto chat = tmpl::ChatTemplate::FromGguf(*file, a.template_name);
  if (!chat.ok()) {
    if (chat.status().code() == StatusCode::kNotFound) {
      return NotFound("{}: {}; pass --builtin NAME (chatml, llama2, llama3, mistral, gemma)", a.model,
                      chat.status().message());
    }
    return chat.status();
  }
  s.chat = std::move(chat).value();
  KVS_ASSIGN_OR_RETURN(auto special, tmpl::ChatTemplate::SpecialTokensFromGguf(*file));
  s.bos = std::move(special.first);
  s.eos = std::move(special.second);
  return s;
}

// --messages holds a list of messages, or an object with "messages" and
// optionally "tools", "add_generation_prompt", "extra", "bos_token",
// "eos_token" (the format of tests/chat_conversations).
Status LoadConversation(const TemplateArgs& a, tmpl::ChatRequest* r) {
  KVS_ASSIGN_OR_RETURN(ordered_json conv, ReadJson(a.messages));
  if (conv.is_array()) {
    r->messages = std::move(conv);
  } else if (conv.is_object() && conv.contains("messages")) {
    r->messages = conv["messages"];
    if (conv.contains("tools")) r->tools = conv["tools"];
    if (conv.contains("extra")) r->extra = conv["extra"];
    if (conv.value("add_generation_prompt", false)) r->add_generation_prompt = true;
    if (conv.contains("bos_token") && conv["bos_token"].is_string()) r->bos_token = conv["bos_token"];
    if (conv.contains("eos_token") && conv["eos_token"].is_string()) r->eos_token = conv["eos_token"];
  } else {
    return InvalidArgument("{}: expected a list of messages or an object with \"messages\"", a.messages);
  }
  if (!a.tools.empty()) {
    KVS_ASSIGN_OR_RETURN(r->tools, ReadJson(a.tools));
    // Accept {"tools": [...]} as well as a bare list.
    if (r->tools.is_object() && r->tools.contains("tools")) r->tools = ordered_json(r->tools["tools"]);
  }
  if (!a.extra.empty()) {
    KVS_ASSIGN_OR_RETURN(r->extra, ReadJson(a.extra));
  }
  if (a.add_generation_prompt) r->add_generation_prompt = true;
  if (!a.now.empty()) {
    int64_t t = 0;
    auto [p, ec] = std::from_chars(a.now.data(), a.now.data() + a.now.size(), t);
    if (ec != std::errc() || p != a.now.data() + a.now.size()) return InvalidArgument("--now expects seconds since the epoch");
    r->now_unix = t;
  }
  return Status::Ok();
}

int RunTemplate(const TemplateArgs& a) {
  auto source = LoadTemplate(a);
  if (!source.ok()) {
    std::fprintf(stderr, "kvserve template: %s\n", source.status().ToString().c_str());
    return 2;
  }
  tmpl::ChatRequest request;
  request.bos_token = source->bos;
  request.eos_token = source->eos;
  if (Status st = LoadConversation(a, &request); !st.ok()) {
    std::fprintf(stderr, "kvserve template: %s\n", st.ToString().c_str());
    return 2;
  }
  if (a.have_bos) request.bos_token = a.bos;
  if (a.have_eos) request.eos_token = a.eos;
  tmpl::ChatTemplate& chat = *source->chat;
  std::vector<std::string> applied;
  if (!a.no_polyfill) {
    // The server's start-up probe and syntax choice (EngineBackend::Load).
    auto caps = tmpl::DetectChatCapabilities(chat, request.bos_token, request.eos_token);
    if (!caps.ok()) {
      std::fprintf(stderr, "kvserve template: %s\n", caps.status().ToString().c_str());
      return 1;
    }
    chat.set_capabilities(*caps);
    grammar::UseToolCallFormatFor(&chat);
    auto polyfilled = tmpl::ApplyChatPolyfills(chat.capabilities(), chat.tool_call_syntax(), request, &applied);
    if (!polyfilled.ok()) {
      std::fprintf(stderr, "kvserve template: %s\n", polyfilled.status().ToString().c_str());
      return 2;
    }
    request = std::move(polyfilled).value();
  }
  if (a.explain) {
    std::string text = "capabilities (start-up probe):\n";
    if (a.no_polyfill) {
      text += "  not probed (--no-polyfill)\n";
    } else {
      for (const std::string& line : chat.capabilities().Describe()) text += "  " + line + "\n";
      const std::vector<std::string> all = chat.capabilities().Polyfills();
      auto join = [](const std::vector<std::string>& v) {
        std::string out;
        for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
        return out.empty() ? std::string("none") : out;
      };
      text += "tool-call syntax: " + std::string(tmpl::EffectiveToolCallSyntax(chat.tool_call_syntax())) + "\n";
      text += "polyfills for this template: " + join(all) + "\n";
      text += "polyfills applied to this conversation: " + join(applied) + "\n";
    }
    text += "prompt:\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  auto prompt = chat.Render(request);
  if (!prompt.ok()) {
    std::fprintf(stderr, "kvserve template: %s\n", prompt.status().ToString().c_str());
    return 1;
  }
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  std::fflush(stdout);
  return 0;
}

const Registrar kRegister_template(Command{
    "template", "Render a chat template for a conversation and print the prompt",
    [](CLI::App* sub) -> std::function<int()> {
      auto a = std::make_shared<TemplateArgs>();
      sub->add_option("-m,--model", a->model, "GGUF model whose tokenizer.chat_template (and BOS/EOS) to use");
      sub->add_option("--template", a->template_file, "a chat template file (.jinja)");
      sub->add_option("--builtin", a->builtin, "a built-in template: chatml, llama2, llama3, mistral, gemma");
      sub->add_option("--template-name", a->template_name,
                      "with -m: use tokenizer.chat_template.NAME (e.g. tool_use)");
      sub->add_option("--messages", a->messages, "JSON file: a list of messages, or {\"messages\": [...], ...}")
          ->required();
      sub->add_option("--tools", a->tools, "JSON file with the tool definitions (a list)");
      sub->add_option("--extra", a->extra, "JSON file with extra template variables (an object)");
      sub->add_flag("--add-generation-prompt", a->add_generation_prompt, "open the assistant's turn at the end");
      sub->add_option_function<std::string>(
          "--bos", [a](const std::string& s) { a->bos = s, a->have_bos = true; }, "BOS token string (overrides -m)");
      sub->add_option_function<std::string>(
          "--eos", [a](const std::string& s) { a->eos = s, a->have_eos = true; }, "EOS token string (overrides -m)");
      sub->add_option("--now", a->now, "seconds since the epoch for strftime_now (default: the clock)");
      sub->add_flag("--explain", a->explain,
                    "print the template's detected capabilities and the polyfills that apply, then the prompt");
      sub->add_flag("--no-polyfill", a->no_polyfill,
                    "render the conversation exactly as given (no capability probe, no polyfills)");
      return [a] { return RunTemplate(*a); };
    }});

}  // namespace
}  // namespace kvs::cli
