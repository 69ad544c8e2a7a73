// The chat side of a loaded model, shared by `kvserve run --chat` and the
// server's /v1/chat/completions: which template it uses, the special-token
// strings that templates see, and a start-up check that the template renders.
//
// Start-up probe: the template is rendered once at load with small probe
// conversations (ProbeChatTemplate), so a broken template is reported when
// the model loads, not on the first request. Policy:
//  - a template that does not parse, or that exceeds a render budget on a
//    probe (a hostile or pathological template: it would fail or burn the
//    budget on every request), is broken: loading fails with an error naming
//    the template line and column;
//  - a template that fails to render a single user message (with tools too,
//    when it mentions them) for another reason is kept, with a warning for
//    the start-up log: such templates usually need variables only the
//    caller can pass (chat_template_kwargs: firefunction's `functions`),
//    and ChatML in their place would silently change the prompt format;
//  - a template that declines a richer probe (system role, tools, tool
//    calls; usually with raise_exception) is fine: that is its contract,
//    reported as a note.
// ChatTemplateLoadOptions::fall_back_if_broken replaces a broken or warned
// template by ChatML instead (with the reason as a warning).
//
// Capabilities: the probe also finds what the template does with the shapes
// of a tool loop (DetectChatCapabilities: chat_capabilities.h), stored on the
// loaded ChatTemplate, so that RenderChat polyfills what is missing.
//
// Override: ChatTemplateLoadOptions::override replaces the model's template
// by a built-in (a name of ChatTemplate::BuiltinNames()) or a .jinja file
// (the server's model.chat_template); a file that cannot be read or a
// template that does not parse is an error naming it, whatever
// fall_back_if_broken says (the operator asked for exactly this template).
// Thread-safety: free functions over immutable inputs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {

struct ChatTemplateLoadOptions {
  RenderLimits limits;               // budgets of the probe renders (as for requests)
  bool fall_back_if_broken = false;  // a broken template: use ChatML (with a note) instead of failing
  std::string override;              // "": the model's; else a built-in name or a .jinja file path
};

// What the start-up probe found, for the start-up log.
struct ProbeReport {
  std::vector<std::string> warnings;  // the minimal conversation fails (see the header comment)
  std::vector<std::string> notes;     // richer conversations the template declines
};

struct ModelChatTemplate {
  ChatTemplate tmpl;         // with its capabilities set (tmpl.capabilities())
  bool is_fallback = false;  // ChatML: the model has none, or its own was replaced (probe.warnings says why)
  std::string origin;        // for logs: "the model's", "built-in chatml", "file PATH", "built-in ChatML fallback"
  ProbeReport probe;
};

// The model's own template (tokenizer.chat_template), else built-in ChatML.
// A template that does not parse or fails the probe is an error naming it
// (or ChatML with a note, when options.fall_back_if_broken).
StatusOr<ModelChatTemplate> LoadModelChatTemplate(const tok::Tokenizer& tok, const ChatTemplateLoadOptions& options = {});

// Renders the probe conversations: a user message (also with a tool, when
// the template mentions tools); system, user, assistant, user; and, when the
// template mentions tools, a system prompt with a tool and a tool-call round
// trip. Returns the error that makes the template broken (an exceeded
// budget); fills *report with the rest (see the header comment).
Status ProbeChatTemplate(const ChatTemplate& chat, const std::string& bos_token, const std::string& eos_token,
                         const RenderLimits& limits, ProbeReport* report);

// What the template does with the shapes of a tool loop, by probe renders
// with marker strings (chat_capabilities.h): a system message; a tool
// definition; an assistant message with tool_calls, content null or "",
// arguments as the API's JSON text or as an object, a generic call id or 9
// alphanumerics; a tool result after it. Returns an error only for an
// exceeded budget (as ProbeChatTemplate); a template that fails a plain
// user message gets probed == false (nothing polyfilled).
StatusOr<ChatCapabilities> DetectChatCapabilities(const ChatTemplate& chat, const std::string& bos_token,
                                                  const std::string& eos_token, const RenderLimits& limits = {});

// Sets request->bos_token / eos_token to the model's BOS and EOS text.
void SetSpecialTokens(const tok::Tokenizer& tok, ChatRequest* request);

}  // namespace kvs::tmpl
