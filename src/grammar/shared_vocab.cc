#include "grammar/shared_vocab.h"

#include <algorithm>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "base/test_util.h"
#include "gguf/gguf.h"

namespace kvs::grammar::testing {

const std::vector<std::string>& SharedVocabNames() {
  static const std::vector<std::string> names = {"gpt-2", "llama-spm", "phi-3", "deepseek-coder", "falcon"};
  return names;
}

StatusOr<std::unique_ptr<tok::Tokenizer>> LoadSharedTokenizer(const std::string& name) {
  const std::string path = kvs::testing::SharedPath("vocab/ggml-vocab-" + name + ".gguf");
  if (path.empty()) return NotFound("../shared/vocab/ggml-vocab-{}.gguf is absent", name);
  KVS_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::Open(path));
  return tok::Tokenizer::FromGguf(*file);
}

StatusOr<std::shared_ptr<const Vocabulary>> QwenSizedVocabulary() {
  constexpr int32_t kSize = 151936;
  std::vector<std::string> bytes;
  std::unordered_set<std::string> seen;
  for (const std::string& name : SharedVocabNames()) {
    KVS_ASSIGN_OR_RETURN(auto tok, LoadSharedTokenizer(name));
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      const auto type = tok->token_type(id);
      if (type == tok::TokenType::kControl || type == tok::TokenType::kUnknown) continue;
      std::string piece = tok->TokenPiece(id);
      if (!piece.empty() && seen.insert(piece).second) bytes.push_back(std::move(piece));
    }
  }
  std::mt19937_64 rng(151936);
  const size_t base = bytes.size();
  while (bytes.size() < static_cast<size_t>(kSize) - 3) {
    std::string s = bytes[rng() % base] + bytes[rng() % base];
    if (s.size() <= 24 && seen.insert(s).second) bytes.push_back(std::move(s));
  }
  std::vector<Vocabulary::Kind> kinds(bytes.size(), Vocabulary::Kind::kText);
  for (const char* stop : {"<|endoftext|>", "<|im_end|>", "<|im_start|>"}) {
    bytes.emplace_back(stop);
    kinds.push_back(std::string(stop) == "<|im_start|>" ? Vocabulary::Kind::kExcluded : Vocabulary::Kind::kStop);
  }
  return Vocabulary::FromTokens(std::move(bytes), std::move(kinds));
}

StatusOr<std::vector<int32_t>> TokenizeForQwenSized(const Vocabulary& v, const std::string& text) {
  std::unordered_map<std::string, int32_t> index;
  for (int32_t id = 0; id < v.num_tokens(); ++id) {
    if (v.kind(id) == Vocabulary::Kind::kText) index.emplace(v.token_bytes(id), id);
  }
  KVS_ASSIGN_OR_RETURN(auto gpt2, LoadSharedTokenizer("gpt-2"));
  std::vector<int32_t> out;
  for (int32_t id : gpt2->Encode(text, /*add_special=*/false, /*parse_special=*/false)) {
    auto it = index.find(gpt2->TokenPiece(id));
    if (it == index.end()) return Internal("GPT-2 token {} is missing from the synthesized vocabulary", id);
    out.push_back(it->second);
  }
  return out;
}

}  // namespace kvs::grammar::testing
