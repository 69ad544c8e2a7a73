// TokenizerSpec: the data a Tokenizer is built from (vocabulary, merges,
// text pipeline, special ids), and the token types and model kinds it
// names. Separate from tokenizer.h so that the merge algorithms
// (models.h), which read a spec, do not depend on the Tokenizer that calls
// them. Plain data: thread-safe to read.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace kvs::tok {

// Token types, numbered as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class ModelKind { kSentencePiece, kBpe };

// Everything a Tokenizer is built from. FromGguf and FromHuggingFace fill
// one; tests may build one in memory.
struct TokenizerSpec {
  ModelKind model = ModelKind::kBpe;
  std::vector<std::string> tokens;   // [vocab] token text as stored in the vocabulary
  std::vector<float> scores;         // [vocab] SentencePiece scores (empty for BPE)
  std::vector<TokenType> types;      // [vocab]
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, rank = index
  TextPipeline pipeline;             // normalizer + pre-tokenizer per text fragment

  bool byte_fallback = false;        // unknown characters -> <0xXX> tokens
  bool ignore_merges = false;        // BPE: a word that is a token is taken whole
  bool fuse_unk = false;             // consecutive unknown tokens collapse to one

  // Decoding: byte_level maps the GPT-2 alphabet back to bytes; otherwise
  // U+2581 becomes ' ' and byte tokens become their byte. strip_leading_space
  // drops one ' ' at the start of a decoded sequence (the space prefix the
  // encoder added).
  bool decode_byte_level = false;
  bool strip_leading_space = false;

  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1;
  int32_t unk_id = -1, pad_id = -1, sep_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  // Whitespace swallowed on the left/right of a recognised special token
  // (Hugging Face added-token lstrip/rstrip), indexed by id; may be empty.
  std::vector<uint8_t> lstrip, rstrip;
  std::string chat_template;
  std::string name;                  // for messages: model or file name
};

}  // namespace kvs::tok
