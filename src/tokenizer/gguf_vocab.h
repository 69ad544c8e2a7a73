// The `tokenizer.ggml.*` metadata of a GGUF file as plain data, and the
// rules (as llama.cpp applies them) that turn it into a TokenizerSpec.
// Tests build GgufVocab values in memory; Tokenizer::FromGguf reads one from
// a file.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace kvs::gguf {
class GgufFile;
}

namespace kvs::tok {

struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "llama" | "gpt2"
  std::string pre;                   // tokenizer.ggml.pre (BPE pre-tokenizer name)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (may be empty)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (may be empty)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right"
  // Ids as stored; values outside the vocabulary are ignored with a warning
  // (files use 0xFFFFFFFF for "none").
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, pad_id, sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;         // tokenizer.chat_template
  std::string general_name;          // general.name (a few per-model rules key on it)
};

// Reads the tokenizer metadata. NotFound when the file has no vocabulary,
// InvalidArgument when a key has the wrong type or arrays disagree in size.
StatusOr<GgufVocab> ReadGgufVocab(const gguf::GgufFile& file);

// Applies the per-model defaults and rules. Unimplemented for tokenizer
// models other than "llama" and "gpt2"; an unknown `pre` falls back to the
// GPT-2 regex with a logged warning.
StatusOr<TokenizerSpec> SpecFromGgufVocab(GgufVocab vocab);

}  // namespace kvs::tok
