// Prompts with exact token counts.
//
// A TokenCounter says how many tokens the server will count for a
// completions prompt or a chat conversation: the endpoint's own /tokenize
// when it has one (bench/endpoint.h), else the tokenizer and chat template
// of a local GGUF file (LocalTokenCounter, no weights loaded).
//
// FitWords finds how many words of a word stream make a prompt of exactly
// the target count. Counts are nearly additive in words but not exactly
// (merges across word boundaries), so it estimates, corrects with a few
// secant steps, and closes the last gap with short words; it never returns
// more tokens than the target.
// Thread-safety: LocalTokenCounter is immutable and thread-safe; FitWords
// is a pure function of its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/text_gen.h"
#include "template/fwd.h"

namespace kvs::bench {

struct ChatMessage {
  std::string role;
  std::string content;
};

class TokenCounter {
 public:
  virtual ~TokenCounter() = default;
  // Tokens of a /v1/completions prompt as the server counts them (its BOS
  // included when it adds one).
  virtual StatusOr<int64_t> CountPrompt(const std::string& text) = 0;
  // Tokens of a /v1/chat/completions conversation: the chat template
  // rendered with the generation prompt, then tokenized.
  virtual StatusOr<int64_t> CountChat(const std::vector<ChatMessage>& messages) = 0;
  virtual std::string Describe() const = 0;
};

// The tokenizer and chat template of a GGUF model file, read from its
// metadata only.
class LocalTokenCounter final : public TokenCounter {
 public:
  static StatusOr<std::unique_ptr<LocalTokenCounter>> FromGguf(const std::string& path);
  ~LocalTokenCounter() override;
  StatusOr<int64_t> CountPrompt(const std::string& text) override;
  StatusOr<int64_t> CountChat(const std::vector<ChatMessage>& messages) override;
  std::string Describe() const override;

 private:
  LocalTokenCounter() = default;
  std::string path_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<tmpl::ChatTemplate> template_;
};

struct FitResult {
  std::string text;     // the prompt (or message content)
  int64_t tokens = 0;   // its count; == target when exact
  bool exact = false;
  int64_t words = 0;    // words of the stream used
  int count_calls = 0;  // tokenizer calls spent
};

// render(words, pad): the prompt made of the first `words` words of the
// stream plus the pad text (pieces appended to close the last gap, each
// after a space; "" at first). count(text): its token count. Needs a stream
// long enough for the target (about target / 0.5 words is plenty for
// English). pad_pieces: what the pad is made of (default: short words).
StatusOr<FitResult> FitWords(size_t max_words, int64_t target,
                             const std::function<std::string(size_t words, const std::string& pad)>& render,
                             const std::function<StatusOr<int64_t>(const std::string&)>& count,
                             const std::vector<std::string>* pad_pieces = nullptr);

// Short whole sentences to pad a text that keeps its sentences whole.
const std::vector<std::string>& SentencePadPieces();

// The common case: a completions prompt of `target` tokens made of the
// stream's first words.
StatusOr<FitResult> FitPrompt(const WordStream& words, int64_t target, TokenCounter& counter);
// A one-message chat conversation (role "user") of `target` tokens.
StatusOr<FitResult> FitChatMessage(const WordStream& words, int64_t target, TokenCounter& counter);

}  // namespace kvs::bench
