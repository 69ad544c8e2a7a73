#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {

namespace {

// Byte trie over the texts of special (control, unknown-type, user-defined)
// tokens, for leftmost-longest matching inside text.
class SpecialTrie {
 public:
  void Insert(std::string_view text, int32_t id) {
    if (text.empty()) return;
    if (nodes_.empty()) nodes_.emplace_back();
    first_byte_[static_cast<uint8_t>(text[0])] = true;
    int32_t n = 0;
    for (char c : text) {
      const uint8_t b = static_cast<uint8_t>(c);
      int32_t child = Child(n, b);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[n].children.emplace_back(b, child);
        nodes_.emplace_back();
      }
      n = child;
    }
    if (nodes_[n].id < 0) nodes_[n].id = id;
  }

  bool MayStart(uint8_t b) const { return first_byte_[b]; }

  // Longest token text at text[i..] accepted by allowed(id, end) (end: the
  // position after the match); returns its length (0 if none) and sets *id.
  template <typename Allowed>
  size_t Longest(std::string_view text, size_t i, const Allowed& allowed, int32_t* id) const {
    size_t best = 0;
    int32_t n = 0;
    for (size_t k = i; k < text.size(); ++k) {
      n = Child(n, static_cast<uint8_t>(text[k]));
      if (n < 0) break;
      if (nodes_[n].id >= 0 && allowed(nodes_[n].id, k + 1)) {
        best = k + 1 - i;
        *id = nodes_[n].id;
      }
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t id = -1;
  };
  int32_t Child(int32_t n, uint8_t b) const {
    for (const auto& [c, idx] : nodes_[n].children) {
      if (c == b) return idx;
    }
    return -1;
  }
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

// Length of the Unicode whitespace character ending at s[end-1], or 0.
size_t WhitespaceBefore(std::string_view s, size_t begin, size_t end) {
  size_t start = end;
  while (start > begin && end - start < 4) {
    --start;
    if ((static_cast<uint8_t>(s[start]) & 0xC0) != 0x80) break;
  }
  uint32_t cp;
  const size_t len = Utf8Next(s, start, &cp);
  return (len != 0 && start + len == end && IsUnicodeWhitespace(cp)) ? len : 0;
}

size_t WhitespaceAt(std::string_view s, size_t i) {
  uint32_t cp;
  const size_t len = Utf8Next(s, i, &cp);
  return (len != 0 && IsUnicodeWhitespace(cp)) ? len : 0;
}

// Tokens that end a turn, by text, in priority order for picking EOT.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
};
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
};

}  // namespace

struct Tokenizer::Impl {
  internal::ModelTables tables;
  std::unordered_map<std::string_view, int32_t> exact;  // any token by text
  SpecialTrie specials;
  bool has_specials = false;
};

Tokenizer::Tokenizer(TokenizerSpec spec) : spec_(std::move(spec)), impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(TokenizerSpec spec) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(spec)));
  KVS_RETURN_IF_ERROR(t->Build());
  return t;
}

Status Tokenizer::Build() {
  TokenizerSpec& s = spec_;
  const size_t n = s.tokens.size();
  if (n == 0) return InvalidArgument("tokenizer {}: empty vocabulary", s.name);
  if (n > static_cast<size_t>(INT32_MAX)) return InvalidArgument("tokenizer {}: vocabulary too large", s.name);
  if (s.types.empty()) s.types.assign(n, TokenType::kNormal);
  if (s.types.size() != n) {
    return InvalidArgument("tokenizer {}: {} token types for {} tokens", s.name, s.types.size(), n);
  }
  if (!s.scores.empty() && s.scores.size() != n) {
    return InvalidArgument("tokenizer {}: {} scores for {} tokens", s.name, s.scores.size(), n);
  }
  if ((!s.lstrip.empty() && s.lstrip.size() != n) || (!s.rstrip.empty() && s.rstrip.size() != n)) {
    return InvalidArgument("tokenizer {}: lstrip/rstrip sizes do not match the vocabulary", s.name);
  }
  for (int32_t* id : {&s.bos_id, &s.eos_id, &s.eot_id, &s.eom_id, &s.unk_id, &s.pad_id, &s.sep_id}) {
    if (*id < -1 || *id >= static_cast<int32_t>(n)) {
      return InvalidArgument("tokenizer {}: special token id {} outside the vocabulary of {}", s.name, *id, n);
    }
  }
  if (s.add_bos && s.bos_id < 0) return InvalidArgument("tokenizer {}: add_bos without a BOS token", s.name);
  if (s.add_eos && s.eos_id < 0) return InvalidArgument("tokenizer {}: add_eos without an EOS token", s.name);

  impl_->exact.reserve(n * 2);
  for (size_t id = 0; id < n; ++id) impl_->exact.emplace(s.tokens[id], static_cast<int32_t>(id));

  // End of generation: EOS/EOT/EOM plus turn-ending tokens known by text;
  // those are control tokens whatever the file says, so they never come out
  // of ordinary text.
  if (s.eot_id < 0) {
    for (std::string_view text : kEndOfTurnTexts) {
      const int32_t id = FindToken(text);
      if (id >= 0) { s.eot_id = id; break; }
    }
  }
  std::vector<int32_t> eog;
  for (int32_t id : {s.eos_id, s.eot_id, s.eom_id}) {
    if (id >= 0) eog.push_back(id);
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    const int32_t id = FindToken(text);
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  for (int32_t id : eog) {
    if (s.types[id] != TokenType::kControl && id != s.eos_id) s.types[id] = TokenType::kControl;
  }
  eog_ids_ = std::move(eog);

  for (size_t id = 0; id < n; ++id) {
    const TokenType ty = s.types[id];
    if (ty == TokenType::kControl || ty == TokenType::kUserDefined || ty == TokenType::kUnknown) {
      impl_->specials.Insert(s.tokens[id], static_cast<int32_t>(id));
      impl_->has_specials = true;
    }
  }
  impl_->tables.Build(s);
  return Status::Ok();
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = impl_->exact.find(text);
  return it == impl_->exact.end() ? -1 : it->second;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size()) return kEmpty;
  return spec_.tokens[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return spec_.types[id];
}

bool Tokenizer::IsControl(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

void Tokenizer::EncodeFragment(std::string_view text, bool at_input_start, internal::WordCache* cache,
                               std::vector<int32_t>* out) const {
  std::string buf;
  std::vector<TextPipeline::Span> words;
  spec_.pipeline.Run(text, at_input_start, &buf, &words);
  for (const TextPipeline::Span& span : words) {
    const std::string_view w = std::string_view(buf).substr(span.b, span.e - span.b);
    if (spec_.model == ModelKind::kSentencePiece) {
      internal::EncodeSentencePiece(spec_, impl_->tables, w, cache, out);
    } else {
      internal::EncodeBpe(spec_, impl_->tables, w, cache, out);
    }
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special, bool parse_special) const {
  return EncodeImpl(text, add_special, parse_special, {});
}

std::vector<int32_t> Tokenizer::EncodeWithPlainRanges(std::string_view text, bool add_special,
                                                      std::span<const TextRange> plain) const {
  return EncodeImpl(text, add_special, /*parse_special=*/true, plain);
}

std::vector<int32_t> Tokenizer::EncodeImpl(std::string_view text, bool add_special, bool parse_special,
                                           std::span<const TextRange> plain) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && spec_.add_bos) out.push_back(spec_.bos_id);
  // The plain range at or after position i (ranges are sorted).
  size_t next_plain = 0;
  size_t limit = text.size();  // control tokens must end by here: the next plain range's start
  bool in_plain = false;
  auto allowed = [&](int32_t id, size_t end) {
    if (spec_.types[id] == TokenType::kUserDefined) return true;
    return parse_special && !in_plain && end <= limit;
  };
  internal::WordCache cache;
  size_t frag = 0;  // start of the pending raw-text fragment
  size_t i = 0;
  if (impl_->has_specials) {
    while (i < text.size()) {
      if (!impl_->specials.MayStart(static_cast<uint8_t>(text[i]))) { ++i; continue; }
      while (next_plain < plain.size() && plain[next_plain].end <= i) ++next_plain;
      in_plain = next_plain < plain.size() && plain[next_plain].begin <= i;
      limit = next_plain < plain.size() ? std::max(plain[next_plain].begin, i) : text.size();
      int32_t id = -1;
      const size_t len = impl_->specials.Longest(text, i, allowed, &id);
      if (len == 0) { ++i; continue; }
      size_t left_end = i;
      if (!spec_.lstrip.empty() && spec_.lstrip[id]) {
        while (size_t ws = WhitespaceBefore(text, frag, left_end)) left_end -= ws;
      }
      if (left_end > frag) EncodeFragment(text.substr(frag, left_end - frag), frag == 0, &cache, &out);
      out.push_back(id);
      i += len;
      if (!spec_.rstrip.empty() && spec_.rstrip[id]) {
        while (size_t ws = WhitespaceAt(text, i)) i += ws;
      }
      frag = i;
    }
  }
  if (frag < text.size()) EncodeFragment(text.substr(frag), frag == 0, &cache, &out);
  if (add_special && spec_.add_eos) out.push_back(spec_.eos_id);
  return out;
}

void Tokenizer::AppendPiece(int32_t id, bool skip_special, bool* strip, std::string* out) const {
  if (id < 0 || id >= vocab_size()) return;
  const std::string& text = spec_.tokens[id];
  const size_t start = out->size();
  switch (spec_.types[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      if (skip_special) return;
      out->append(text);
      break;
    case TokenType::kUserDefined:
      out->append(text);
      break;
    case TokenType::kByte: {
      const int b = ParseByteToken(text);
      if (b >= 0) out->push_back(static_cast<char>(b));
      else out->append(text);
      break;
    }
    default:
      if (spec_.decode_byte_level) {
        AppendFromByteLevel(text, out);
      } else {
        out->append(ReplaceAll(text, kSpaceMarker, " "));
      }
      break;
  }
  if (*strip && out->size() > start) {
    if ((*out)[start] == ' ') out->erase(start, 1);
    *strip = false;
  }
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool strip = spec_.strip_leading_space;
  for (int32_t id : ids) {
    if (!skip_special && id == spec_.bos_id && id >= 0 && IsControl(id)) {
      out.append(spec_.tokens[id]);  // shown, but still leaves the strip pending
      continue;
    }
    AppendPiece(id, skip_special, &strip, &out);
    if (id >= 0 && id < vocab_size() && id != spec_.bos_id) strip = false;
  }
  return out;
}

std::string Tokenizer::TokenPiece(int32_t id) const {
  std::string out;
  bool strip = false;
  if (id == spec_.bos_id && id >= 0) return spec_.tokens[id];
  AppendPiece(id, /*skip_special=*/false, &strip, &out);
  return out;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special, bool at_sequence_start)
    : tok_(tokenizer), skip_special_(skip_special),
      strip_(at_sequence_start && tokenizer.spec().strip_leading_space) {}

std::string IncrementalDecoder::Add(int32_t id) {
  const bool is_bos = id >= 0 && id == tok_.bos_id();
  if (is_bos && tok_.IsControl(id)) {
    if (!skip_special_) pending_.append(tok_.TokenText(id));
  } else {
    tok_.AppendPiece(id, skip_special_, &strip_, &pending_);
    if (id >= 0 && id < tok_.vocab_size()) strip_ = false;
  }
  const size_t keep = Utf8CompletePrefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, keep));
  pending_.erase(0, keep);
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvs::tok
