// Vocabularies from ../shared/vocab for grammar tests and benchmarks.
// Test/benchmark-only (kvs_grammar_testlib).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace kvs::grammar::testing {

// The vocabulary names in ../shared/vocab (ggml-vocab-NAME.gguf).
const std::vector<std::string>& SharedVocabNames();

// The tokenizer of ../shared/vocab/ggml-vocab-NAME.gguf; NotFound when
// ../shared is absent.
StatusOr<std::unique_ptr<tok::Tokenizer>> LoadSharedTokenizer(const std::string& name);

// A Qwen-sized (151,936 ids, like Qwen2/2.5/3 logits) vocabulary built from
// every shared vocabulary's token bytes (deduplicated), padded with
// concatenations of existing tokens (as BPE merges would make) by a fixed
// seed, and 3 stop tokens at the end. NotFound when ../shared is absent.
StatusOr<std::shared_ptr<const Vocabulary>> QwenSizedVocabulary();

// Token ids of `text` in a vocabulary from QwenSizedVocabulary: the GPT-2
// tokenization, mapped by bytes (every GPT-2 token is in it).
StatusOr<std::vector<int32_t>> TokenizeForQwenSized(const Vocabulary& v, const std::string& text);

}  // namespace kvs::grammar::testing
