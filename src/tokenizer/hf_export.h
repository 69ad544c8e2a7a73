// Test-only (library kvs_tokenizer_testing): ExportHuggingFaceJson writes a
// tokenizer.json that Hugging Face `tokenizers` loads as the same tokenizer;
// SentencePiece vocabularies become BPE with merges derived from the piece
// scores (as HF's converters do). It exists so that an independent
// implementation (the npm oracle) can be run on our vocabularies.
// Thread-safety: pure function.
#pragma once

#include <string>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tok {

// tokenizer.json text for `tok`. Unimplemented for pipelines that have no
// Hugging Face equivalent.
StatusOr<std::string> ExportHuggingFaceJson(const Tokenizer& tok);

}  // namespace kvs::tok
