// PromptCounter: the gateway's exact count of a request's prompt tokens.
//
// It loads the model's tokenizer and chat template from the GGUF file (the
// mapping is opened, no weights are read or converted) as the replica does
// (api::LoadPromptTemplate), and runs the same code as the server: the
// request parsers and validators of every dialect (api/openai_request.h,
// api/routes.h) and the one prompt preparation (api::PreparePrompt: the chat
// template rendered, the prompts tokenized). A request the server would
// refuse as malformed gets the same 400 here, before it costs a replica
// anything.
// Thread-safety: immutable after Load; Count may run on many threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "api/openai_request.h"
#include "api/prompt.h"
#include "template/fwd.h"

namespace kvs::gguf {
class GgufFile;
}

namespace kvs::gateway {

struct CountedRequest {
  api::ParsedRequest req;
  std::vector<std::vector<int32_t>> prompts;  // the token ids of each prompt (chat: one)
  int64_t max_prompt_tokens = 0;
  int64_t total_prompt_tokens = 0;
  std::string prompt_text;  // chat: the rendered template; completions: the text prompts joined
};

class PromptCounter {
 public:
  // chat_template: "" for the GGUF's own, else what the replicas'
  // model.chat_template names (a built-in name or a .jinja file).
  static StatusOr<std::unique_ptr<PromptCounter>> Load(const std::string& gguf_path,
                                                       const std::string& chat_template = "");
  ~PromptCounter();

  // body: the parsed JSON object (in the client's key order), read as the
  // route of (endpoint, dialect) reads it (api::ParseGenerateRequest): the
  // Responses and Messages dialects are chat requests underneath, rendered
  // with the chat template as chat completions are.
  std::optional<api::ApiError> Count(api::Endpoint endpoint, const api::Json& body, CountedRequest* out,
                                     api::Dialect dialect = api::Dialect::kOpenAI) const;
  int32_t vocab_size() const;
  // The replicas' tokenizer (context_policy.cc cuts prompts on its tokens).
  const tok::Tokenizer& tokenizer() const { return *tok_; }
  const std::string& path() const { return path_; }

 private:
  PromptCounter() = default;
  std::string path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<tmpl::ChatTemplate> template_;
  std::unique_ptr<api::TemplatePromptModel> model_;  // over tok_ and template_
};

}  // namespace kvs::gateway
