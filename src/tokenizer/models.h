// Internal: the two merge algorithms over one pre-tokenized word.
//
// Both treat the word as a chain of symbols (UTF-8 characters; a malformed
// byte is a symbol of its own) and repeatedly merge the best adjacent pair
// whose concatenation the vocabulary allows; merged symbols stay contiguous
// in the word, so a pair is always a substring and lookups need no copies.
// Thread-safety: ModelTables is immutable after Build; the Encode functions
// keep all state on the stack.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/spec.h"

namespace kvs::tok::internal {

struct ModelTables {
  // Pieces the merge algorithms may produce: every token except control,
  // unknown-type and byte tokens (SentencePiece never forms those from text).
  std::unordered_map<std::string_view, int32_t> piece_to_id;
  // BPE: merged text -> (length of the left part, rank). A merged string can
  // come from several splits, hence the small list.
  struct Merge {
    uint32_t left_len;
    int32_t rank;
  };
  std::unordered_map<std::string_view, std::vector<Merge>> merges;
  std::vector<std::string> merged_text;  // storage the merge keys point into
  // The token for each byte when a character has no token of its own
  // (<0xXX> tokens, else the one-byte token, else unk, else -1).
  std::array<int32_t, 256> byte_token{};
  // SentencePiece: no mergeable piece has U+2581 right after another
  // character, so no merge can cross the point before such a U+2581 and the
  // text can be encoded in independent chunks cut there (same result, and
  // each merge queue stays small).
  bool spm_cut_before_space = false;

  void Build(const TokenizerSpec& spec);
  int32_t Rank(std::string_view merged, size_t left_len) const;
};

// Memo of word -> ids for one Encode call (natural text repeats words a
// lot). Not shared between calls, so it needs no locking.
class WordCache {
 public:
  // Appends the cached ids of `word` to *out and returns true, if present.
  bool Lookup(std::string_view word, std::vector<int32_t>* out) const;
  void Insert(std::string_view word, const int32_t* ids, size_t n);

 private:
  static constexpr size_t kMaxWords = 1 << 16;
  static constexpr size_t kMaxWordBytes = 64;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  // word -> [offset, count) in ids_
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> index_;
  std::vector<int32_t> ids_;
};

// SentencePiece BPE: merge the pair whose result has the highest score
// (leftmost first on ties); characters without a token fall back to bytes.
void EncodeSentencePiece(const TokenizerSpec& spec, const ModelTables& t, std::string_view word,
                         WordCache* cache, std::vector<int32_t>* out);

// Rank BPE: merge the lowest-ranked pair (leftmost first on ties).
void EncodeBpe(const TokenizerSpec& spec, const ModelTables& t, std::string_view word, WordCache* cache,
               std::vector<int32_t>* out);

}  // namespace kvs::tok::internal
