// ExportHuggingFaceJson: a tokenizer.json equivalent of a Tokenizer.
#include <algorithm>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tokenizer/hf_export.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {

namespace {

using json = nlohmann::ordered_json;

const char* BehaviorName(SplitBehavior b) {
  switch (b) {
    case SplitBehavior::kIsolated: return "Isolated";
    case SplitBehavior::kRemoved: return "Removed";
    case SplitBehavior::kMergedWithPrevious: return "MergedWithPrevious";
    case SplitBehavior::kMergedWithNext: return "MergedWithNext";
    case SplitBehavior::kContiguous: return "Contiguous";
  }
  return "Isolated";
}

const char* PrependName(PrependScheme p) {
  switch (p) {
    case PrependScheme::kAlways: return "always";
    case PrependScheme::kFirst: return "first";
    case PrependScheme::kNever: return "never";
  }
  return "always";
}

bool Mergeable(TokenType t) {
  return t != TokenType::kControl && t != TokenType::kUnknown && t != TokenType::kByte;
}

// SentencePiece pieces as BPE merges: every split of a piece into two pieces
// is a merge, ranked by the merged piece's score (highest first), as the
// bigram algorithm would choose them.
std::vector<std::pair<std::string, std::string>> MergesFromScores(const TokenizerSpec& s) {
  std::unordered_map<std::string_view, int32_t> piece;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (Mergeable(s.types[i])) piece.emplace(s.tokens[i], static_cast<int32_t>(i));
  }
  struct M { float score; int32_t id; size_t left_len; };
  std::vector<M> ms;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (!Mergeable(s.types[i])) continue;
    const std::string& t = s.tokens[i];
    uint32_t cp;
    size_t k = 0;
    while (k < t.size()) {
      size_t len = Utf8Next(t, k, &cp);
      k += len == 0 ? 1 : len;
      if (k >= t.size()) break;
      if (piece.count(std::string_view(t).substr(0, k)) && piece.count(std::string_view(t).substr(k))) {
        ms.push_back({s.scores.empty() ? 0.0f : s.scores[i], static_cast<int32_t>(i), k});
      }
    }
  }
  std::stable_sort(ms.begin(), ms.end(), [](const M& a, const M& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.id != b.id) return a.id < b.id;
    return a.left_len < b.left_len;
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(ms.size());
  for (const M& m : ms) {
    const std::string& t = s.tokens[m.id];
    out.emplace_back(t.substr(0, m.left_len), t.substr(m.left_len));
  }
  return out;
}

}  // namespace

StatusOr<std::string> ExportHuggingFaceJson(const Tokenizer& tok) {
  const TokenizerSpec& s = tok.spec();
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  json added = json::array();
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const TokenType t = s.types[i];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
    if (s.tokens[i].empty()) continue;
    added.push_back({{"id", i}, {"content", s.tokens[i]}, {"single_word", false},
                     {"lstrip", !s.lstrip.empty() && s.lstrip[i]}, {"rstrip", !s.rstrip.empty() && s.rstrip[i]},
                     {"normalized", false}, {"special", t != TokenType::kUserDefined}});
  }
  j["added_tokens"] = added;

  json norm = json::array();
  for (const NormalizerStep& n : s.pipeline.normalizer()) {
    if (n.kind == NormalizerStep::Kind::kPrepend) {
      norm.push_back({{"type", "Prepend"}, {"prepend", n.a}});
    } else {
      norm.push_back({{"type", "Replace"}, {"pattern", {{"String", n.a}}}, {"content", n.b}});
    }
  }
  j["normalizer"] = norm.empty() ? json(nullptr) : json({{"type", "Sequence"}, {"normalizers", norm}});

  json pre = json::array();
  for (const PreTokenizerStep& p : s.pipeline.pre()) {
    switch (p.kind) {
      case PreTokenizerStep::Kind::kSplit:
        pre.push_back({{"type", "Split"}, {"pattern", {{"Regex", p.regex->pattern()}}},
                       {"behavior", BehaviorName(p.behavior)}, {"invert", p.invert}});
        break;
      case PreTokenizerStep::Kind::kByteLevel:
        if (p.regex && p.regex->pattern() != kGpt2Pattern) {
          return Unimplemented("ByteLevel with a custom regex has no tokenizer.json form");
        }
        pre.push_back({{"type", "ByteLevel"}, {"add_prefix_space", p.add_prefix_space}, {"trim_offsets", false},
                       {"use_regex", p.regex != nullptr}});
        break;
      case PreTokenizerStep::Kind::kMetaspace:
        pre.push_back({{"type", "Metaspace"}, {"replacement", p.replacement},
                       {"prepend_scheme", PrependName(p.prepend)}, {"split", p.split}});
        break;
    }
  }
  j["pre_tokenizer"] = pre.empty() ? json(nullptr) : json({{"type", "Sequence"}, {"pretokenizers", pre}});
  j["post_processor"] = nullptr;

  if (s.decode_byte_level) {
    j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  } else {
    json d = json::array();
    d.push_back({{"type", "Replace"}, {"pattern", {{"String", std::string(kSpaceMarker)}}}, {"content", " "}});
    d.push_back({{"type", "ByteFallback"}});
    d.push_back({{"type", "Fuse"}});
    if (s.strip_leading_space) d.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", d}};
  }

  // First id of each distinct piece, in id order. Appended to the ordered
  // map's vector directly: its operator[] and contains() search linearly,
  // which made exporting a 65K-entry vocabulary quadratic.
  json::object_t vocab_entries;
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (!s.tokens[i].empty() && seen.insert(s.tokens[i]).second) {
      static_cast<json::object_t::Container&>(vocab_entries).emplace_back(s.tokens[i], i);
    }
  }
  json vocab(std::move(vocab_entries));
  const auto merges = s.model == ModelKind::kSentencePiece ? MergesFromScores(s) : s.merges;
  json jm = json::array();
  for (const auto& [a, b] : merges) jm.push_back(json::array({a, b}));
  const bool spm = s.model == ModelKind::kSentencePiece;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", s.unk_id >= 0 ? json(s.tokens[s.unk_id]) : json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", s.fuse_unk},
                {"byte_fallback", spm || s.byte_fallback},
                {"ignore_merges", s.ignore_merges},
                {"vocab", vocab},
                {"merges", jm}};
  return j.dump();
}

}  // namespace kvs::tok
