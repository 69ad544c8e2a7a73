#include "gateway/prompt_counter.h"

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "api/error.h"
#include "api/routes.h"
#include "grammar/template_tool_format.h"
#include "template/chat_render.h"
#include "template/chat_template.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::gateway {

PromptCounter::~PromptCounter() = default;

StatusOr<std::unique_ptr<PromptCounter>> PromptCounter::Load(const std::string& gguf_path,
                                                                 const std::string& chat_template) {
  std::unique_ptr<PromptCounter> c(new PromptCounter());
  c->path_ = gguf_path;
  KVS_ASSIGN_OR_RETURN(c->file_, gguf::GgufFile::Open(gguf_path));
  auto tok = tok::Tokenizer::FromGguf(*c->file_);
  if (!tok.ok()) return tok.status().WithContext("tokenizer of " + gguf_path);
  c->tok_ = std::move(*tok);
  KVS_ASSIGN_OR_RETURN(tmpl::ModelChatTemplate chat, tmpl::LoadModelChatTemplate(*c->tok_, [&] {
    tmpl::ChatTemplateLoadOptions o;
    o.override = chat_template;  // the replicas' model.chat_template
    return o;
  }()));
  c->template_ = std::make_unique<tmpl::ChatTemplate>(std::move(chat.tmpl));
  // The syntax the replica's polyfills write tool calls in
  // (EngineBackend::Load), so that the counted prompt is the replica's.
  grammar::UseToolCallFormatFor(c->template_.get());
  return c;
}

int32_t PromptCounter::vocab_size() const { return tok_->vocab_size(); }

std::optional<api::ApiError> PromptCounter::Count(api::Endpoint endpoint, const api::Json& body, CountedRequest* out,
                                                  api::Dialect dialect) const {
  using api::BadRequest;
  const bool chat = endpoint == api::Endpoint::kChatCompletions;
  if (auto e = api::ParseGenerateRequest(endpoint, dialect, body, &out->req)) return e;
  const api::ParsedRequest& req = out->req;
  if (chat) {
    // The replica's own rendering (EngineBackend::RenderChatPrompt): message
    // text never becomes control tokens, and the count equals the replica's.
    // With the request's template variables (chat_template_kwargs,
    // reasoning_effort, Anthropic's thinking), as the replica renders it.
    auto r = tmpl::RenderChat(*template_, *tok_,
                              tmpl::MakeChatRequest(*tok_, req.messages, req.tools, /*add_generation_prompt=*/true,
                                                    req.template_kwargs));
    if (!r.ok()) {
      // The server's answer to the same request (400 on messages).
      return BadRequest("cannot apply the chat template: " + r.status().message(), "messages");
    }
    out->prompts.push_back(std::move(r->tokens));
    out->prompt_text = std::move(r->text);
  } else {
    const int32_t vocab = tok_->vocab_size();
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      const api::PromptInput& in = req.prompts[i];
      const std::string param = req.prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
      std::vector<int32_t> ids;
      if (in.text) {
        ids = tok_->Encode(*in.text, /*add_special=*/true, /*parse_special=*/true);
        if (!out->prompt_text.empty()) out->prompt_text += "\n";
        out->prompt_text += *in.text;
      } else {
        for (int32_t id : in.tokens) {
          if (id >= vocab) {
            return BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab), param);
          }
        }
        ids = in.tokens;
      }
      if (ids.empty()) return BadRequest("the prompt is empty (it has no tokens)", param);
      out->prompts.push_back(std::move(ids));
    }
  }
  for (const auto& p : out->prompts) {
    const int64_t n = static_cast<int64_t>(p.size());
    out->max_prompt_tokens = std::max(out->max_prompt_tokens, n);
    out->total_prompt_tokens += n;
  }
  return std::nullopt;
}

}  // namespace kvs::gateway
