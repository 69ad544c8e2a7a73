// ChatCapabilities: what a chat template does with the shapes of an OpenAI
// tool loop (a system prompt, tool definitions, an assistant's tool calls
// with null content, a tool result), found by probe renders at load
// (DetectChatCapabilities in model_chat.h), and the polyfills that follow
// from it (chat_polyfill.h rewrites a conversation before rendering so that
// such a template renders it anyway).
//
// Invariant: a default-constructed ChatCapabilities (probed == false) says
// "everything native", so nothing is polyfilled for a template that was never
// probed (tests, `kvserve template` on a raw template, the oracle test).
// Thread-safety: a plain value.
#pragma once

#include <string>
#include <vector>

namespace kvs::tmpl {

// How the template wants tool_calls[].function.arguments.
enum class ArgumentsForm {
  kAny,     // the API's JSON string and an object both render (left as given)
  kObject,  // only an object renders right (arguments|items, arguments|tojson): JSON strings are parsed
  kString,  // only a string renders (concatenated with '+'): objects are written as JSON text
};

// What an assistant message with tool calls needs in `content`.
enum class ContentWithCalls {
  kAsIs,         // null and "" both render the calls
  kNullToEmpty,  // null fails (or hides the calls): it becomes ""
  kEmptyToNull,  // the calls render only with null content (DeepSeek R1 distills): "" becomes null
};

struct ChatCapabilities {
  // False: the template was not probed, or fails even a plain user message
  // (it needs variables only its clients pass): no polyfill applies.
  bool probed = false;
  bool system_role = true;     // a system message's text appears in the prompt
  bool tools = true;           // a tool definition (its name) appears in the prompt
  bool tool_calls = true;      // an assistant's tool call (its name and arguments) appears
  bool tool_role = true;       // a tool result's text appears (after a tool call)
  bool any_call_id = true;     // false: ids must be 9 alphanumerics (Mistral's templates raise otherwise)
  bool null_tools = true;      // false: fails without a tools list (iterates `tools` unchecked): none -> []
  bool descriptions_optional = true;  // false: fails on a tool or parameter without "description"
  ArgumentsForm arguments = ArgumentsForm::kAny;
  ContentWithCalls content_with_calls = ContentWithCalls::kAsIs;

  // The polyfills these capabilities call for, by name, in the order they
  // are applied: "null-content", "empty-content", "object-arguments",
  // "string-arguments", "call-ids", "tool-calls-as-text", "tool-results-as-user",
  // "tools-list", "tool-descriptions", "tool-definitions-in-system",
  // "system-into-user". Empty: none.
  std::vector<std::string> Polyfills() const;
  bool NeedsPolyfill() const { return !Polyfills().empty(); }
  // One line per capability ("tool calls: no (polyfilled: written into the
  // assistant's content)"), for `kvserve template --explain`.
  std::vector<std::string> Describe() const;
};


}  // namespace kvs::tmpl
