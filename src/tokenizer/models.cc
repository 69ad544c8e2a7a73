#include "tokenizer/models.h"

#include <optional>
#include <queue>

#include "tokenizer/unicode.h"

namespace kvs::tok::internal {

namespace {

struct Symbol {
  uint32_t off;
  uint32_t len;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;  // -1 at the end
};

void SplitSymbols(std::string_view word, std::vector<Symbol>* syms) {
  syms->clear();
  size_t i = 0;
  while (i < word.size()) {
    uint32_t cp;
    size_t len = Utf8Next(word, i, &cp);
    if (len == 0) len = 1;
    const int32_t idx = static_cast<int32_t>(syms->size());
    syms->push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(len), idx - 1,
                     i + len < word.size() ? idx + 1 : -1});
    i += len;
  }
}

// Merges adjacent symbols of `word` into *syms, best candidate pair first,
// until no adjacent pair merges. key_of(merged, left_len) is a pair's key
// (SentencePiece: the piece's score; BPE: the merge's rank), nullopt when the
// pair does not merge; better(a, b): key a goes before key b. Ties go to the
// leftmost pair.
template <typename Key, typename KeyOf, typename Better>
void MergeSymbols(std::string_view word, const KeyOf& key_of, const Better& better, std::vector<Symbol>* out) {
  struct Bigram {
    Key key;
    int32_t left;
    int32_t right;
    uint32_t size;
  };
  auto worse = [&](const Bigram& a, const Bigram& b) {
    return better(b.key, a.key) || (!better(a.key, b.key) && a.left > b.left);
  };
  std::vector<Symbol>& syms = *out;
  SplitSymbols(word, &syms);
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    const std::optional<Key> key = key_of(word.substr(syms[l].off, size), syms[l].len);
    if (key) queue.push({*key, l, r, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    // Lengths only grow, so an unchanged sum means both sides are unchanged.
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
}

// Emits the token of a final symbol, falling back to byte tokens.
// word_start: where this word's ids begin in *out (unknown tokens fuse only
// within a word, as in Hugging Face BPE).
void EmitSymbol(const TokenizerSpec& spec, const ModelTables& t, std::string_view text, bool bytes_first,
                size_t word_start, std::vector<int32_t>* out) {
  auto it = t.piece_to_id.find(text);
  if (it != t.piece_to_id.end()) {
    out->push_back(it->second);
    return;
  }
  if (bytes_first) {
    bool all = true;
    for (char c : text) all = all && t.byte_token[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : text) out->push_back(t.byte_token[static_cast<uint8_t>(c)]);
      return;
    }
  }
  if (spec.unk_id >= 0) {
    if (spec.fuse_unk && out->size() > word_start && out->back() == spec.unk_id) return;
    out->push_back(spec.unk_id);
  }
  // No unknown token either: the character cannot be represented; drop it
  // (what Hugging Face BPE does without unk_token).
}

}  // namespace

bool WordCache::Lookup(std::string_view word, std::vector<int32_t>* out) const {
  if (word.size() > kMaxWordBytes || index_.empty()) return false;
  auto it = index_.find(word);
  if (it == index_.end()) return false;
  out->insert(out->end(), ids_.begin() + it->second.first, ids_.begin() + it->second.first + it->second.second);
  return true;
}

void WordCache::Insert(std::string_view word, const int32_t* ids, size_t n) {
  if (word.size() > kMaxWordBytes || index_.size() >= kMaxWords) return;
  index_.emplace(std::string(word), std::make_pair(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)));
  ids_.insert(ids_.end(), ids, ids + n);
}

void ModelTables::Build(const TokenizerSpec& spec) {
  piece_to_id.clear();
  piece_to_id.reserve(spec.tokens.size() * 2);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType ty = spec.types[id];
    if (ty == TokenType::kControl || ty == TokenType::kUnknown || ty == TokenType::kByte) continue;
    piece_to_id.emplace(spec.tokens[id], static_cast<int32_t>(id));  // first id wins on duplicates
  }
  byte_token.fill(-1);
  std::unordered_map<std::string_view, int32_t> exact;
  for (size_t id = 0; id < spec.tokens.size(); ++id) exact.emplace(spec.tokens[id], static_cast<int32_t>(id));
  for (int b = 0; b < 256; ++b) {
    auto it = exact.find(ByteTokenText(static_cast<uint8_t>(b)));
    if (it != exact.end()) {
      byte_token[b] = it->second;
      continue;
    }
    if (spec.model == ModelKind::kSentencePiece) {
      const std::string one(1, static_cast<char>(b));
      auto it1 = exact.find(one);
      if (it1 != exact.end()) { byte_token[b] = it1->second; continue; }
      byte_token[b] = spec.unk_id;
    }
  }
  spm_cut_before_space = true;
  for (const auto& [text, id] : piece_to_id) {
    for (size_t pos = text.find(kSpaceMarker, 1); pos != std::string_view::npos;
         pos = text.find(kSpaceMarker, pos + 1)) {
      if (text.substr(0, pos).size() < kSpaceMarker.size() ||
          text.substr(pos - kSpaceMarker.size(), kSpaceMarker.size()) != kSpaceMarker) {
        spm_cut_before_space = false;
      }
    }
    if (!spm_cut_before_space) break;
  }
  merges.clear();
  merged_text.clear();
  merged_text.reserve(spec.merges.size());
  for (const auto& [a, b] : spec.merges) merged_text.push_back(a + b);
  merges.reserve(spec.merges.size() * 2);
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    auto& list = merges[merged_text[i]];
    const uint32_t left_len = static_cast<uint32_t>(spec.merges[i].first.size());
    bool seen = false;
    for (const Merge& m : list) seen = seen || m.left_len == left_len;
    if (!seen) list.push_back({left_len, static_cast<int32_t>(i)});
  }
}

int32_t ModelTables::Rank(std::string_view merged, size_t left_len) const {
  auto it = merges.find(merged);
  if (it == merges.end()) return -1;
  for (const Merge& m : it->second) {
    if (m.left_len == left_len) return m.rank;
  }
  return -1;
}

namespace {

void EncodeSentencePieceChunk(const TokenizerSpec& spec, const ModelTables& t, std::string_view word,
                              std::vector<int32_t>* out) {
  // Highest score first.
  std::vector<Symbol> syms;
  MergeSymbols<float>(
      word,
      [&](std::string_view merged, uint32_t) -> std::optional<float> {
        auto it = t.piece_to_id.find(merged);
        if (it == t.piece_to_id.end()) return std::nullopt;
        return spec.scores.empty() ? 0.0f : spec.scores[it->second];
      },
      [](float a, float b) { return a > b; }, &syms);
  const size_t start = out->size();
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    EmitSymbol(spec, t, word.substr(syms[i].off, syms[i].len), /*bytes_first=*/true, start, out);
  }
}

void EncodeSentencePieceCached(const TokenizerSpec& spec, const ModelTables& t, std::string_view chunk,
                               WordCache* cache, std::vector<int32_t>* out) {
  if (cache->Lookup(chunk, out)) return;
  const size_t before = out->size();
  EncodeSentencePieceChunk(spec, t, chunk, out);
  cache->Insert(chunk, out->data() + before, out->size() - before);
}

}  // namespace

void EncodeSentencePiece(const TokenizerSpec& spec, const ModelTables& t, std::string_view word,
                         WordCache* cache, std::vector<int32_t>* out) {
  if (!t.spm_cut_before_space) {
    EncodeSentencePieceChunk(spec, t, word, out);
    return;
  }
  // Cut before every U+2581 that follows something other than U+2581.
  const std::string_view m = kSpaceMarker;
  size_t start = 0;
  size_t pos = word.find(m, 1);
  while (pos != std::string_view::npos) {
    if (pos < m.size() || word.substr(pos - m.size(), m.size()) != m) {
      EncodeSentencePieceCached(spec, t, word.substr(start, pos - start), cache, out);
      start = pos;
    }
    pos = word.find(m, pos + m.size());
  }
  EncodeSentencePieceCached(spec, t, word.substr(start), cache, out);
}

namespace {

void EncodeBpeWord(const TokenizerSpec& spec, const ModelTables& t, std::string_view word, std::vector<int32_t>* out) {
  if (spec.ignore_merges) {
    auto it = t.piece_to_id.find(word);
    if (it != t.piece_to_id.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // Lowest rank first.
  std::vector<Symbol> syms;
  MergeSymbols<int32_t>(
      word,
      [&](std::string_view merged, uint32_t left_len) -> std::optional<int32_t> {
        const int32_t rank = t.Rank(merged, left_len);
        if (rank < 0) return std::nullopt;
        return rank;
      },
      [](int32_t a, int32_t b) { return a < b; }, &syms);
  const size_t start = out->size();
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    EmitSymbol(spec, t, word.substr(syms[i].off, syms[i].len), spec.byte_fallback, start, out);
  }
}

}  // namespace

void EncodeBpe(const TokenizerSpec& spec, const ModelTables& t, std::string_view word, WordCache* cache,
               std::vector<int32_t>* out) {
  if (cache->Lookup(word, out)) return;
  const size_t before = out->size();
  EncodeBpeWord(spec, t, word, out);
  cache->Insert(word, out->data() + before, out->size() - before);
}

}  // namespace kvs::tok::internal
