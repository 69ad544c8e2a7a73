// Tokenizer: text <-> token ids for the models kvserve runs, built from a
// GGUF file's `tokenizer.ggml.*` metadata or from Hugging Face
// tokenizer.json (+ tokenizer_config.json), matching those reference
// implementations id for id.
//
// Two model algorithms are supported:
//  - kSentencePiece ("llama" in GGUF): bigram merges chosen by the score of
//    the merged piece, spaces as U+2581, optional space prefix, unknown
//    characters as <0xXX> byte tokens.
//  - kBpe ("gpt2" in GGUF, BPE in tokenizer.json): merges chosen by rank,
//    usually after a regex pre-tokenizer and the GPT-2 byte-level alphabet.
//
// Special tokens: control and unknown-type tokens are recognised inside text
// only when Encode's parse_special is true; otherwise their text is encoded
// as ordinary text, so user content cannot inject them. User-defined tokens
// (Hugging Face added tokens with special=false) are always recognised, as
// Hugging Face `tokenizers` and llama.cpp both do; they are plain vocabulary
// the model was trained to see in text.
//
// Invariants: every id in [0, vocab_size()) has a text and a type; special
// ids are -1 (absent) or valid ids.
// Thread-safety: immutable after construction; every method is const and
// safe to call from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/spec.h"

namespace kvs::gguf {
class GgufFile;
}

namespace kvs::tok {

namespace internal {
class WordCache;
}

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

class Tokenizer {
 public:
  // From a GGUF file's metadata (tokenizer.ggml.model "llama" or "gpt2").
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  // From tokenizer.json text and tokenizer_config.json text (may be empty).
  static StatusOr<std::unique_ptr<Tokenizer>> FromHuggingFace(const std::string& tokenizer_json,
                                                              const std::string& tokenizer_config_json);
  // Validates a spec (ids in range, sizes consistent) and builds the lookups.
  static StatusOr<std::unique_ptr<Tokenizer>> FromSpec(TokenizerSpec spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS / append EOS as the vocabulary asks (add_bos(),
  // add_eos()). parse_special: recognise control tokens written in the text.
  // Any byte string is accepted; malformed UTF-8 is encoded byte by byte.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // Encode with special-token parsing, except inside `plain` (sorted,
  // disjoint ranges of text): a control token is recognised only where its
  // whole text lies outside them, so text inside a range can neither contain
  // nor complete one. Used for chat prompts, where the ranges are the
  // caller's message content. Gives the same ids as Encode(text, add_special,
  // true) when no range holds or straddles a control token's text, and as
  // Encode(text, add_special, false) when one range covers all of text.
  std::vector<int32_t> EncodeWithPlainRanges(std::string_view text, bool add_special,
                                             std::span<const TextRange> plain) const;

  // Concatenated pieces. skip_special drops control and unknown-type tokens
  // (a BOS is shown as its text when not skipped). When the vocabulary adds
  // a space prefix (SentencePiece), one leading ' ' is removed from the first
  // token after an optional BOS, so Decode(Encode(x)) == x; ids are taken to
  // start a sequence. No clean-up of spaces before punctuation is done.
  // Ids out of range decode to nothing. The result may be malformed UTF-8
  // when the ids cut a character (use IncrementalDecoder for streaming).
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const;

  // The bytes one token stands for (control tokens: their text).
  // "" for ids out of range.
  std::string TokenPiece(int32_t id) const;
  // The token's text exactly as stored in the vocabulary ("Ġthe", "▁the").
  const std::string& TokenText(int32_t id) const;
  TokenType token_type(int32_t id) const;
  // Exact-text lookup of a vocabulary entry; -1 when absent.
  int32_t FindToken(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  ModelKind model() const { return spec_.model; }
  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  int32_t eot_id() const { return spec_.eot_id; }
  int32_t eom_id() const { return spec_.eom_id; }
  int32_t unk_id() const { return spec_.unk_id; }
  int32_t pad_id() const { return spec_.pad_id; }
  bool add_bos() const { return spec_.add_bos; }
  bool add_eos() const { return spec_.add_eos; }
  // True for EOS, EOT, EOM and the other tokens that end a turn
  // (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...).
  bool IsEndOfGeneration(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  bool IsControl(int32_t id) const;
  const std::string& chat_template() const { return spec_.chat_template; }
  const TokenizerSpec& spec() const { return spec_; }

 private:
  friend class IncrementalDecoder;
  struct Impl;
  explicit Tokenizer(TokenizerSpec spec);
  Status Build();
  void EncodeFragment(std::string_view text, bool at_input_start, internal::WordCache* cache,
                      std::vector<int32_t>* out) const;
  std::vector<int32_t> EncodeImpl(std::string_view text, bool add_special, bool parse_special,
                                  std::span<const TextRange> plain) const;
  // Appends the piece of `id` to *out; strips one leading ' ' when *strip.
  void AppendPiece(int32_t id, bool skip_special, bool* strip, std::string* out) const;

  TokenizerSpec spec_;
  std::vector<int32_t> eog_ids_;
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed ids one at a time, get the text they complete.
// Output is always well-formed UTF-8: bytes that may still be completed by
// later tokens are held back, bytes that can never be are replaced by U+FFFD.
// Thread-safety: one instance per stream; the Tokenizer must outlive it.
class IncrementalDecoder {
 public:
  // at_sequence_start: the ids fed begin a sequence that Encode produced
  // (with or without BOS), so the space prefix a SentencePiece vocabulary
  // added is stripped from the first piece, as Decode does. Pass false when
  // feeding only generated tokens that continue a prompt.
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special, bool at_sequence_start);

  // Returns the text newly completed by `id` (possibly "").
  std::string Add(int32_t id);
  // Returns whatever is held back (as U+FFFD) and resets the hold.
  std::string Flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  bool strip_;      // strip one leading ' ' from the next non-empty piece
  std::string pending_;  // [bytes] an incomplete UTF-8 tail not yet returned
};

}  // namespace kvs::tok
