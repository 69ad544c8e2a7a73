// Vocabulary: a model's tokens as byte strings, arranged in a trie, for
// computing grammar token masks. Built once per model and shared (read-only)
// by every compiled grammar for that model.
//
// Each token is one of:
//   - text: its bytes (the tokenizer's own token-to-bytes function, so
//     SentencePiece "▁" is a space, byte-level BPE "Ġ" is a space, <0xXX>
//     byte tokens are their byte) are matched against the grammar;
//   - stop: an end-of-generation token (EOS, EOT, <|im_end|>, ...), allowed
//     exactly when the grammar can end;
//   - excluded: control tokens and empty tokens, never allowed.
// Control tokens listed in VocabularyOptions::special_tokens_as_text are
// text tokens instead (e.g. Mistral's "[TOOL_CALLS]", which a tool-call
// grammar spells out).
//
// Token masks are bitmasks over [0, mask_vocab_size): word i / 32, bit
// i % 32 (the layout xgrammar and vLLM use); mask_vocab_size may exceed the
// tokenizer's vocabulary (padded logits); the extra ids are never allowed.
//
// Invariants: trie nodes are in preorder; node 0 is the root (empty
// string); node_end[i] is one past the last node of i's subtree.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace kvs::tok {
class Tokenizer;
}

namespace kvs::grammar {

struct VocabularyOptions {
  // Default: the tokenizer's end-of-generation ids.
  std::optional<std::vector<int32_t>> stop_token_ids;
  // Control tokens (by exact vocabulary text) that grammars may produce.
  std::vector<std::string> special_tokens_as_text;
  // Width of the model's logits; 0: the tokenizer's vocabulary size.
  int32_t mask_vocab_size = 0;
};

class Vocabulary {
 public:
  enum class Kind : uint8_t { kText, kStop, kExcluded };

  static StatusOr<std::shared_ptr<const Vocabulary>> FromTokenizer(const tok::Tokenizer& tokenizer,
                                                                    const VocabularyOptions& options = {});
  // bytes[i]: token i's bytes; kinds[i]: its kind. mask_vocab_size 0: bytes.size().
  static StatusOr<std::shared_ptr<const Vocabulary>> FromTokens(std::vector<std::string> bytes,
                                                                 std::vector<Kind> kinds,
                                                                 int32_t mask_vocab_size = 0);

  int32_t size() const { return mask_vocab_size_; }          // token ids in masks
  int32_t num_tokens() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t mask_words() const { return (mask_vocab_size_ + 31) / 32; }
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }
  Kind kind(int32_t id) const { return kinds_[id]; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // [mask_words] the text tokens.
  const std::vector<uint32_t>& text_mask() const { return text_mask_; }
  int32_t max_token_bytes() const { return max_token_bytes_; }

  // Trie over the text tokens, preorder.
  int32_t num_nodes() const { return static_cast<int32_t>(node_byte_.size()); }
  uint8_t node_byte(int32_t i) const { return node_byte_[i]; }
  int32_t node_depth(int32_t i) const { return node_depth_[i]; }
  int32_t node_end(int32_t i) const { return node_end_[i]; }
  int32_t node_parent(int32_t i) const { return node_parent_[i]; }
  // The node where text token `id` ends (-1 for other tokens).
  int32_t token_node(int32_t id) const { return token_node_[id]; }
  // Tokens whose bytes are exactly the path to node i.
  std::span<const int32_t> node_tokens(int32_t i) const {
    return {trie_tokens_.data() + node_tok_begin_[i], trie_tokens_.data() + node_tok_begin_[i + 1]};
  }

 private:
  Vocabulary() = default;
  Status Build();

  int32_t mask_vocab_size_ = 0;
  std::vector<std::string> bytes_;        // [num_tokens]
  std::vector<Kind> kinds_;               // [num_tokens]
  std::vector<int32_t> stop_ids_;
  std::vector<uint32_t> text_mask_;       // [mask_words]
  int32_t max_token_bytes_ = 0;
  std::vector<uint8_t> node_byte_;        // [nodes] the byte leading to the node
  std::vector<int32_t> node_depth_;       // [nodes]
  std::vector<int32_t> node_end_;         // [nodes]
  std::vector<int32_t> node_parent_;      // [nodes] -1 for the root
  std::vector<int32_t> token_node_;       // [num_tokens]
  std::vector<int32_t> node_tok_begin_;   // [nodes + 1] into trie_tokens_
  std::vector<int32_t> trie_tokens_;      // text token ids in byte order
};

// Bitmask helpers (mask layout above).
inline bool MaskTest(std::span<const uint32_t> mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }
inline void MaskSet(std::span<uint32_t> mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }
inline void MaskClear(std::span<uint32_t> mask, int32_t id) { mask[id >> 5] &= ~(1u << (id & 31)); }
int32_t MaskCount(std::span<const uint32_t> mask);

}  // namespace kvs::grammar
