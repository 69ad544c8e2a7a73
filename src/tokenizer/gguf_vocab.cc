#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {

namespace {

StatusOr<std::vector<std::string>> StringArray(const gguf::GgufFile& f, std::string_view key) {
  KVS_ASSIGN_OR_RETURN(const gguf::Array* a, f.GetArray(key));
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const gguf::Value& v : a->items) {
    const std::string* s = v.AsString();
    if (s == nullptr) return InvalidArgument("{}: expected an array of strings", key);
    out.push_back(*s);
  }
  return out;
}

Status OptionalId(const gguf::GgufFile& f, std::string_view key, std::optional<int64_t>* out) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) return Status::Ok();
  if (auto i = v->AsInt()) {
    *out = *i;
  } else if (v->AsUint()) {
    *out = -1;  // does not fit: certainly not a valid id
  } else {
    return InvalidArgument("{}: expected an integer token id", key);
  }
  return Status::Ok();
}

Status OptionalBool(const gguf::GgufFile& f, std::string_view key, std::optional<bool>* out) {
  if (f.Find(key) == nullptr) return Status::Ok();
  KVS_ASSIGN_OR_RETURN(bool b, f.GetBool(key));
  *out = b;
  return Status::Ok();
}

}  // namespace

StatusOr<GgufVocab> ReadGgufVocab(const gguf::GgufFile& f) {
  GgufVocab v;
  if (f.Find("tokenizer.ggml.model") == nullptr) return NotFound("file has no tokenizer (tokenizer.ggml.model)");
  KVS_ASSIGN_OR_RETURN(v.model, f.GetString("tokenizer.ggml.model"));
  KVS_ASSIGN_OR_RETURN(v.pre, f.GetStringOr("tokenizer.ggml.pre", ""));
  KVS_ASSIGN_OR_RETURN(v.tokens, StringArray(f, "tokenizer.ggml.tokens"));
  const size_t n = v.tokens.size();
  if (f.Find("tokenizer.ggml.scores") != nullptr) {
    KVS_ASSIGN_OR_RETURN(const gguf::Array* a, f.GetArray("tokenizer.ggml.scores"));
    if (a->items.size() != n) {
      return InvalidArgument("tokenizer.ggml.scores has {} entries for {} tokens", a->items.size(), n);
    }
    v.scores.reserve(n);
    for (const gguf::Value& x : a->items) {
      auto d = x.AsFloat();
      if (!d) return InvalidArgument("tokenizer.ggml.scores: expected numbers");
      v.scores.push_back(static_cast<float>(*d));
    }
  }
  if (f.Find("tokenizer.ggml.token_type") != nullptr) {
    KVS_ASSIGN_OR_RETURN(const gguf::Array* a, f.GetArray("tokenizer.ggml.token_type"));
    if (a->items.size() != n) {
      return InvalidArgument("tokenizer.ggml.token_type has {} entries for {} tokens", a->items.size(), n);
    }
    v.token_types.reserve(n);
    for (const gguf::Value& x : a->items) {
      auto i = x.AsInt();
      if (!i) return InvalidArgument("tokenizer.ggml.token_type: expected integers");
      v.token_types.push_back(static_cast<int32_t>(std::clamp<int64_t>(*i, -1, 7)));
    }
  }
  if (f.Find("tokenizer.ggml.merges") != nullptr) {
    KVS_ASSIGN_OR_RETURN(v.merges, StringArray(f, "tokenizer.ggml.merges"));
  }
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.bos_token_id", &v.bos_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.eos_token_id", &v.eos_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.eot_token_id", &v.eot_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.eom_token_id", &v.eom_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.unknown_token_id", &v.unk_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.padding_token_id", &v.pad_id));
  KVS_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.seperator_token_id", &v.sep_id));
  KVS_RETURN_IF_ERROR(OptionalBool(f, "tokenizer.ggml.add_bos_token", &v.add_bos));
  KVS_RETURN_IF_ERROR(OptionalBool(f, "tokenizer.ggml.add_eos_token", &v.add_eos));
  KVS_RETURN_IF_ERROR(OptionalBool(f, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
  KVS_ASSIGN_OR_RETURN(v.chat_template, f.GetStringOr("tokenizer.chat_template", ""));
  KVS_ASSIGN_OR_RETURN(v.general_name, f.GetStringOr("general.name", ""));
  return v;
}

StatusOr<TokenizerSpec> SpecFromGgufVocab(GgufVocab v) {
  TokenizerSpec s;
  s.name = v.general_name.empty() ? v.model : v.general_name;
  const size_t n = v.tokens.size();
  if (n == 0) return InvalidArgument("tokenizer.ggml.tokens is empty");
  if (!v.scores.empty() && v.scores.size() != n) return InvalidArgument("scores and tokens differ in size");
  if (!v.token_types.empty() && v.token_types.size() != n) {
    return InvalidArgument("token types and tokens differ in size");
  }
  s.tokens = std::move(v.tokens);
  for (size_t i = 0; i < n; ++i) {
    // An empty token can never be matched or produced; give it a name that
    // cannot collide with text (as llama.cpp does).
    if (s.tokens[i].empty()) s.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  s.types.resize(n, TokenType::kNormal);
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    const int32_t t = v.token_types[i];
    s.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::kUndefined;
  }

  bool add_bos = false;
  bool add_eos = false;
  if (v.model == "llama") {
    s.model = ModelKind::kSentencePiece;
    s.scores = std::move(v.scores);
    s.bos_id = 1;
    s.eos_id = 2;
    s.unk_id = 0;
    add_bos = true;
    const bool space_prefix = v.add_space_prefix.value_or(true);
    std::vector<NormalizerStep> norm;
    if (space_prefix) norm.push_back({NormalizerStep::Kind::kPrepend, " ", ""});
    norm.push_back({NormalizerStep::Kind::kReplace, " ", std::string(kSpaceMarker)});
    s.pipeline = TextPipeline(std::move(norm), {});
    s.byte_fallback = true;
    s.strip_leading_space = space_prefix;
  } else if (v.model == "gpt2") {
    s.model = ModelKind::kBpe;
    if (v.merges.empty()) return InvalidArgument("BPE vocabulary without tokenizer.ggml.merges");
    s.merges.reserve(v.merges.size());
    for (const std::string& m : v.merges) {
      // The separator is the first space after the first character: a
      // left part may itself be a lone space in non-byte-level vocabularies.
      const size_t pos = m.find(' ', 1);
      if (pos == std::string::npos) return InvalidArgument("malformed merge '{}'", m);
      s.merges.emplace_back(m.substr(0, pos), m.substr(pos + 1));
    }
    bool known = true;
    std::vector<std::string> patterns = PreTokenizerPatterns(v.pre, &known);
    if (!known) {
      spdlog::warn("tokenizer: unknown pre-tokenizer '{}', using GPT-2's; tokenization may differ from the model's",
                   v.pre);
    } else if (v.pre.empty()) {
      spdlog::warn("tokenizer: no tokenizer.ggml.pre in the file, using the 'default' pre-tokenizer");
    }
    std::vector<PreTokenizerStep> steps;
    for (const std::string& p : patterns) {
      KVS_ASSIGN_OR_RETURN(auto re, Regex::Compile(p));
      PreTokenizerStep st;
      st.kind = PreTokenizerStep::Kind::kSplit;
      st.regex = std::move(re);
      steps.push_back(std::move(st));
    }
    PreTokenizerStep bl;
    bl.kind = PreTokenizerStep::Kind::kByteLevel;
    steps.push_back(std::move(bl));
    s.pipeline = TextPipeline({}, std::move(steps));
    s.decode_byte_level = true;
    const std::string& pre = v.pre;
    if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "tekken") {
      s.ignore_merges = true;
      add_bos = true;
    }
    if (pre == "chameleon") add_bos = true;
  } else {
    return Unimplemented("tokenizer model '{}' is not supported (only 'llama' and 'gpt2')", v.model);
  }

  auto take = [&](const std::optional<int64_t>& id, int32_t* dst, const char* what) {
    if (!id) return;
    if (*id >= 0 && *id < static_cast<int64_t>(n)) {
      *dst = static_cast<int32_t>(*id);
    } else if (*id != 0xFFFFFFFFll && *id != -1) {
      spdlog::warn("tokenizer: {} token id {} is outside the vocabulary; ignored", what, *id);
    }
  };
  take(v.bos_id, &s.bos_id, "BOS");
  take(v.eos_id, &s.eos_id, "EOS");
  take(v.eot_id, &s.eot_id, "EOT");
  take(v.eom_id, &s.eom_id, "EOM");
  take(v.unk_id, &s.unk_id, "UNK");
  take(v.pad_id, &s.pad_id, "PAD");
  take(v.sep_id, &s.sep_id, "SEP");
  s.add_bos = v.add_bos.value_or(add_bos) && s.bos_id >= 0;
  s.add_eos = v.add_eos.value_or(add_eos) && s.eos_id >= 0;
  s.chat_template = std::move(v.chat_template);

  // Phi-3's special tokens swallow the whitespace after them (rstrip in its
  // tokenizer.json), which GGUF has no field for.
  const std::string lname = AsciiLower(v.general_name);
  if (lname.find("phi-3") != std::string::npos || lname.find("phi3") != std::string::npos) {
    s.rstrip.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const TokenType t = s.types[i];
      if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) s.rstrip[i] = 1;
    }
    for (size_t i = 0; i < n; ++i) {
      if (s.tokens[i] == "<unk>" || s.tokens[i] == "<s>" || s.tokens[i] == "<|endoftext|>") s.rstrip[i] = 0;
    }
  }
  return s;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  KVS_ASSIGN_OR_RETURN(GgufVocab v, ReadGgufVocab(file));
  KVS_ASSIGN_OR_RETURN(TokenizerSpec spec, SpecFromGgufVocab(std::move(v)));
  return FromSpec(std::move(spec));
}

}  // namespace kvs::tok
