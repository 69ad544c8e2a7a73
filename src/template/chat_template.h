// Chat templates: turning an OpenAI-style conversation into the prompt text a
// model was trained on, by rendering the model's `tokenizer.chat_template`
// (Jinja) the way transformers' apply_chat_template does.
//
// The template sees these variables:
//   messages               the conversation (list of {role, content, ...});
//                          content is a string, a list of parts
//                          ({"type": "text", "text": ...}) or null; assistant
//                          messages may carry tool_calls, tool messages
//                          tool_call_id and name
//   tools                  the tool definitions, or none
//   documents              none (as transformers passes it)
//   add_generation_prompt  whether to open the assistant's turn
//   bos_token, eos_token   the model's special token strings
//   ...                    every key of ChatRequest::extra (e.g. enable_thinking)
// and the globals raise_exception(msg), strftime_now(fmt), range, namespace.
//
// Fallback templates for models without one are built in: chatml, llama2,
// llama3, mistral, gemma (see Builtin).
//
// JSON is nlohmann::ordered_json so that objects keep their key order: a tool
// schema rendered with `tojson` must keep the order the client sent.
//
// Capabilities: a ChatTemplate also carries what the start-up probe found it
// can render (chat_capabilities.h; DetectChatCapabilities in model_chat.h)
// and the tool-call syntax the polyfills write in (chat_polyfill.h).
// Render/RenderTracked never polyfill (they render exactly what they are
// given); RenderChat (chat_render.h) applies the polyfills first.
//
// Thread-safety: a ChatTemplate is immutable after Parse/Builtin and the
// setters below, which run before it is shared; Render is const and safe to
// call from many threads at once.
//
// (Rendering and tokenizing a conversation in one go, with the caller's data
// never parsed for special tokens, is RenderChat in chat_render.h.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/chat_capabilities.h"
#include "template/template.h"

namespace kvs::gguf {
class GgufFile;
}

namespace kvs::tmpl {

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null or an array of tool definitions
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  // Extra template variables (an object), e.g. {"enable_thinking": false}.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // Pins strftime_now() to this many seconds since the epoch (tests).
  std::optional<int64_t> now_unix;
};

class ChatTemplate {
 public:
  // Parses a template; syntax errors and unsupported constructs name their
  // line and column.
  static StatusOr<ChatTemplate> Parse(std::string source);
  // A built-in fallback template by name (see BuiltinNames()).
  static StatusOr<ChatTemplate> Builtin(std::string_view name);
  static const std::vector<std::string>& BuiltinNames();
  // The template a GGUF model carries: tokenizer.chat_template, or
  // tokenizer.chat_template.<name> (e.g. "tool_use") when name is given.
  // NotFound when the model has none.
  static StatusOr<ChatTemplate> FromGguf(const gguf::GgufFile& file, std::string_view name = {});
  // The model's BOS and EOS token strings (tokenizer.ggml.bos_token_id /
  // eos_token_id looked up in tokenizer.ggml.tokens); "" for one the model
  // does not declare. These are what templates see as bos_token/eos_token.
  static StatusOr<std::pair<std::string, std::string>> SpecialTokensFromGguf(const gguf::GgufFile& file);

  // The variables the template sees (validates the request: messages must be
  // a list of objects with a string role, tools null or a list, extra an
  // object).
  static StatusOr<nlohmann::ordered_json> BuildContext(const ChatRequest& request);

  // The prompt text. Template errors, including raise_exception(), and
  // exceeded budgets come back as an error Status naming the line and column.
  StatusOr<std::string> Render(const ChatRequest& request, const RenderLimits& limits = {}) const;
  StatusOr<std::string> RenderContext(const nlohmann::ordered_json& context,
                                      std::optional<int64_t> now_unix = std::nullopt,
                                      const RenderLimits& limits = {}) const;

  // The prompt text and which bytes of it are the caller's data: every string
  // of messages, tools and extra counts as content, except a message role
  // that is one of kTrustedRoles (templates build role markers such as
  // `'<|' + role + '|>'` from it). bos_token/eos_token are template text.
  StatusOr<RenderedText> RenderTracked(const ChatRequest& request, const RenderLimits& limits = {}) const;
  static const std::vector<std::string>& TrustedRoles();

  const std::string& source() const { return template_.source(); }

  // Default: not probed, so nothing is polyfilled.
  const ChatCapabilities& capabilities() const { return capabilities_; }
  void set_capabilities(ChatCapabilities caps) { capabilities_ = std::move(caps); }
  // A grammar::ToolCallFormatName ("hermes", "mistral", ...); "" is hermes.
  const std::string& tool_call_syntax() const { return tool_call_syntax_; }
  void set_tool_call_syntax(std::string syntax) { tool_call_syntax_ = std::move(syntax); }

 private:
  explicit ChatTemplate(Template t) : template_(std::move(t)) {}
  Template template_;
  ChatCapabilities capabilities_;
  std::string tool_call_syntax_;
};

}  // namespace kvs::tmpl
