// Prompt preparation, one implementation for both front ends: a parsed
// generation request (api/openai_request.h: chat of any dialect, or
// completions) -> its prompts as token ids, rendered with the model's chat
// template and tokenized with its tokenizer.
//
// The server's prep pool runs it before a request reaches the engine, and the
// gateway's prompt counter runs it to count (and route by) the tokens the
// replica will see: both go through PreparePrompt over a PromptModel, so the
// gateway's count is the replica's by construction. The server reaches its
// model through its backend (EngineBackend: a TemplatePromptModel's
// RenderChatPrompt; a test fake: its own rendering); the gateway holds a
// TemplatePromptModel over the tokenizer and template it loaded with
// LoadPromptTemplate, as the replica does.
//
// What it does not do: validate the tokens against a model's limits (the
// server's engine::ValidateRequest, the gateway's own checks) or choose
// max_tokens (DefaultMaxTokens, below, is the one rule both apply).
// Thread-safety: pure functions; a PromptModel's methods may run on many
// threads at once (TemplatePromptModel: over an immutable tokenizer and
// template).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/error.h"
#include "api/openai_request.h"
#include "base/status.h"
#include "grammar/tool_calls.h"
#include "template/fwd.h"
#include "template/model_chat.h"

namespace kvs::api {

// A chat conversation rendered with a model's template.
struct ChatPrompt {
  std::string text;             // the rendered prompt (logs, echo)
  std::vector<int32_t> tokens;  // its token ids, BOS included where the template writes it
};

// The one rendering of a conversation into a prompt: tmpl::RenderChat of
// tmpl::MakeChatRequest, so that text from the request (content, names,
// tool calls and results, tool definitions, template variables) never
// becomes control tokens. messages: OpenAI-style, content flattened to
// strings; tools: [] or the request's; template_kwargs: an object of extra
// template variables. Errors are InvalidArgument with the renderer's message.
StatusOr<ChatPrompt> RenderChatPrompt(const tmpl::ChatTemplate& chat, const tok::Tokenizer& tok, const Json& messages,
                                      const Json& tools, bool add_generation_prompt, const Json& template_kwargs);

// What PreparePrompt needs of a model.
class PromptModel {
 public:
  virtual ~PromptModel() = default;
  // A completions prompt's text: special-token text in it is recognised (it
  // is the client's own formatting, as llama.cpp and vLLM read it).
  virtual StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const = 0;
  // A chat conversation (RenderChatPrompt's contract).
  virtual StatusOr<ChatPrompt> RenderChat(const Json& messages, const Json& tools, bool add_generation_prompt,
                                          const Json& template_kwargs) const = 0;
};

// A PromptModel over a model's tokenizer and chat template (both must
// outlive it): what the replica's EngineBackend and the gateway render with.
class TemplatePromptModel final : public PromptModel {
 public:
  TemplatePromptModel(const tok::Tokenizer& tok, const tmpl::ChatTemplate& chat) : tok_(tok), chat_(chat) {}
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override;
  StatusOr<ChatPrompt> RenderChat(const Json& messages, const Json& tools, bool add_generation_prompt,
                                  const Json& template_kwargs) const override;

 private:
  const tok::Tokenizer& tok_;
  const tmpl::ChatTemplate& chat_;
};

// A model's chat template as prompts are rendered with it:
// tmpl::LoadModelChatTemplate (override: "" for the GGUF's own, else a
// built-in name or a .jinja file: model.chat_template), with the syntax its
// polyfills write tool calls in set (grammar::UseToolCallFormatFor): the
// replica parses replies in that syntax, and a tool call in the history is
// written in it, so the gateway must load its counting template this way too.
struct PromptTemplate {
  tmpl::ModelChatTemplate chat;
  grammar::ToolCallFormat tool_format = grammar::ToolCallFormat::kNone;
};
StatusOr<PromptTemplate> LoadPromptTemplate(const tok::Tokenizer& tok, const std::string& override_template);

// One prompt of a request, as the model will see it.
struct Prompt {
  std::vector<int32_t> tokens;
  // Chat: the rendered template; a completions text prompt: the client's
  // text; nullopt for a completions token-id prompt (its tokens as sent,
  // not yet checked against the vocabulary).
  std::optional<std::string> text;
};

// The prompts of `req` (chat: one, rendered with the generation prompt and
// the request's template variables; completions: each prompt tokenized with
// BOS). Errors: the chat template's (400 "cannot apply the chat template:
// ...", param "messages", or the status's own class), the tokenizer's.
std::optional<ApiError> PreparePrompt(const ParsedRequest& req, const PromptModel& model, std::vector<Prompt>* out);

// The max_tokens of a request that sets none, with `prompt_tokens` in the
// prompt and `context` tokens of context: the rest of the context for chat,
// 16 for completions (as OpenAI), never below 1 (a prompt that fills the
// context is then refused for its length, not for its max_tokens).
int64_t DefaultMaxTokens(bool chat, int64_t prompt_tokens, int64_t context);

}  // namespace kvs::api
