// RenderChat: a conversation -> the model's prompt text and token ids, in one
// call, so that the caller's data can never become control tokens.
//
// The chat template's own text (role markers such as <|im_start|>, BOS,
// turn ends) is tokenized with special-token parsing; everything that came
// from the request (message content, names, tool calls and their arguments,
// tool definitions, extra template variables) is tokenized as plain text
// unless options.parse_special_in_content is set. A user who sends
// "<|im_end|><|im_start|>system ..." gets those characters as ordinary text
// tokens, not a forged system turn. The renderer tracks, byte by byte, which
// output came from the request (spans.h: exact through concatenation,
// slicing, strip, split, replace, join, format, indent, tojson; whole-string
// for case changes and escaping), and the tokenizer recognises a control
// token only where its whole text lies in template text
// (Tokenizer::EncodeWithPlainRanges). Message roles in
// ChatTemplate::TrustedRoles() count as template text, because templates
// build role markers from them (Phi-3: '<|' + role + '|>').
//
// For a conversation whose content holds no special-token text, the tokens
// equal Tokenizer::Encode(text, add_special, /*parse_special=*/true) of the
// same text: the protection changes nothing for honest input.
//
// Usage (the server's chat path; `tok` and `chat` are loaded once per model):
//   RenderChatOptions opt;
//   opt.limits.max_seconds = config_seconds;
//   KVS_ASSIGN_OR_RETURN(RenderedChat p, RenderChat(chat, tok, messages, tools, add_generation_prompt, opt));
//   // p.tokens -> the engine; p.text for logs / echo.
// Thread-safety: pure functions over immutable inputs; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {

struct RenderChatOptions {
  // Parse special-token text inside the caller's data too (the behaviour of
  // tokenizing the whole prompt). Off by default; only for callers whose
  // content is trusted.
  bool parse_special_in_content = false;
  // Add the BOS/EOS the vocabulary asks for around the prompt. Off by
  // default: chat templates write BOS themselves.
  bool add_special = false;
  RenderLimits limits;  // budgets of the render (time, bytes, iterations)
};

struct RenderedChat {
  std::string text;             // the prompt
  std::vector<int32_t> tokens;  // its token ids
  Spans content;                // byte ranges of text that came from the request
};

// Renders request with chat and tokenizes the result as described above.
// Errors: invalid requests (InvalidArgument), template errors including
// raise_exception (InvalidArgument naming line and column), exceeded budgets
// (ResourceExhausted, DeadlineExceeded).
StatusOr<RenderedChat> RenderChat(const ChatTemplate& chat, const tok::Tokenizer& tok, const ChatRequest& request,
                                  const RenderChatOptions& options = {});

// A request from the usual inputs: bos_token/eos_token are the model's
// (SetSpecialTokens); tools null or empty means none; extra: the request's
// template variables (chat_template_kwargs, ...), null or {} for none. The
// server and the gateway's prompt counter both build theirs here, so they
// render alike.
ChatRequest MakeChatRequest(const tok::Tokenizer& tok, const nlohmann::ordered_json& messages,
                            const nlohmann::ordered_json& tools, bool add_generation_prompt,
                            const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// RenderChat of MakeChatRequest(tok, messages, tools, add_generation_prompt).
StatusOr<RenderedChat> RenderChat(const ChatTemplate& chat, const tok::Tokenizer& tok,
                                  const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt, const RenderChatOptions& options = {});

}  // namespace kvs::tmpl
