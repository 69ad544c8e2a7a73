// The chat side of a loaded model, shared by `kvserve run --chat` and the
// server's /v1/chat/completions: which template it uses and the special-token
// strings that templates see.
// Thread-safety: free functions over immutable inputs.
#pragma once

#include "base/status.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tmpl {

struct ModelChatTemplate {
  ChatTemplate tmpl;
  bool is_fallback = false;  // the model has no template: ChatML
};

// The model's own template (tokenizer.chat_template), else built-in ChatML.
// A template that does not parse is an error naming it.
StatusOr<ModelChatTemplate> LoadModelChatTemplate(const tok::Tokenizer& tok);

// Sets request->bos_token / eos_token to the model's BOS and EOS text.
void SetSpecialTokens(const tok::Tokenizer& tok, ChatRequest* request);

}  // namespace kvs::tmpl
