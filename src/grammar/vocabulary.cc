#include "grammar/vocabulary.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace kvs::grammar {

int32_t MaskCount(std::span<const uint32_t> mask) {
  int32_t n = 0;
  for (uint32_t w : mask) n += std::popcount(w);
  return n;
}

StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokenizer(const tok::Tokenizer& tokenizer,
                                                                       const VocabularyOptions& options) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<Kind> kinds(n, Kind::kText);
  for (int32_t id = 0; id < n; ++id) {
    const tok::TokenType type = tokenizer.token_type(id);
    const bool special = type == tok::TokenType::kControl || type == tok::TokenType::kUnknown;
    bytes[id] = tokenizer.TokenPiece(id);
    if (special || id == tokenizer.bos_id()) {
      const bool as_text = std::find(options.special_tokens_as_text.begin(), options.special_tokens_as_text.end(),
                                     tokenizer.TokenText(id)) != options.special_tokens_as_text.end();
      kinds[id] = as_text ? Kind::kText : Kind::kExcluded;
      if (as_text) bytes[id] = tokenizer.TokenText(id);
    }
  }
  for (const std::string& text : options.special_tokens_as_text) {
    if (tokenizer.FindToken(text) < 0) return InvalidArgument("special token '{}' is not in the vocabulary", text);
  }
  const std::vector<int32_t> stops = options.stop_token_ids ? *options.stop_token_ids
                                                            : tokenizer.end_of_generation_ids();
  for (int32_t id : stops) {
    if (id < 0 || id >= n) return InvalidArgument("stop token id {} is outside the vocabulary", id);
    kinds[id] = Kind::kStop;
  }
  return FromTokens(std::move(bytes), std::move(kinds), options.mask_vocab_size);
}

StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokens(std::vector<std::string> bytes,
                                                                    std::vector<Kind> kinds,
                                                                    int32_t mask_vocab_size) {
  if (bytes.size() != kinds.size()) return InvalidArgument("token bytes and kinds differ in length");
  const auto n = static_cast<int32_t>(bytes.size());
  if (mask_vocab_size == 0) mask_vocab_size = n;
  if (mask_vocab_size < n) {
    return InvalidArgument("mask vocabulary size {} is below the tokenizer's {} tokens", mask_vocab_size, n);
  }
  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->mask_vocab_size_ = mask_vocab_size;
  v->bytes_ = std::move(bytes);
  v->kinds_ = std::move(kinds);
  KVS_RETURN_IF_ERROR(v->Build());
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

Status Vocabulary::Build() {
  const int32_t n = num_tokens();
  text_mask_.assign(mask_words(), 0);
  std::vector<int32_t> text_ids;
  for (int32_t id = 0; id < n; ++id) {
    if (kinds_[id] == Kind::kText && bytes_[id].empty()) kinds_[id] = Kind::kExcluded;  // would never advance
    if (kinds_[id] == Kind::kStop) stop_ids_.push_back(id);
    if (kinds_[id] != Kind::kText) continue;
    text_ids.push_back(id);
    MaskSet(text_mask_, id);
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(bytes_[id].size()));
  }
  std::stable_sort(text_ids.begin(), text_ids.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });

  // Preorder trie: walk the sorted strings keeping the current path.
  node_byte_ = {0};
  node_depth_ = {0};
  node_end_ = {0};
  node_parent_ = {-1};
  token_node_.assign(n, -1);
  std::vector<int32_t> node_of_token;  // node where each sorted token ends
  std::vector<int32_t> path = {0};     // path[d]: node at depth d
  const std::string* prev = nullptr;
  for (int32_t id : text_ids) {
    const std::string& s = bytes_[id];
    size_t lcp = 0;
    if (prev != nullptr) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    // Close the nodes below the common prefix.
    while (path.size() > lcp + 1) {
      node_end_[path.back()] = num_nodes();
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      node_byte_.push_back(static_cast<uint8_t>(s[d]));
      node_depth_.push_back(static_cast<int32_t>(d) + 1);
      node_end_.push_back(0);
      node_parent_.push_back(path.back());
      path.push_back(num_nodes() - 1);
    }
    node_of_token.push_back(path.back());
    token_node_[id] = path.back();
    prev = &s;
  }
  while (!path.empty()) {
    node_end_[path.back()] = num_nodes();
    path.pop_back();
  }
  // Tokens per node, in node order (sorted tokens end at non-decreasing nodes).
  node_tok_begin_.assign(num_nodes() + 1, 0);
  for (int32_t node : node_of_token) ++node_tok_begin_[node + 1];
  std::partial_sum(node_tok_begin_.begin(), node_tok_begin_.end(), node_tok_begin_.begin());
  trie_tokens_ = text_ids;
  return Status::Ok();
}

}  // namespace kvs::grammar
