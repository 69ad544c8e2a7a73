#include "tokenizer/hf_json.h"

#include <functional>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tokenizer/unicode.h"

namespace kvs::tok {

namespace {

using json = nlohmann::json;

struct AddedToken {
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// Escapes a literal so PCRE2/Oniguruma match it verbatim.
std::string QuoteRegex(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// "pattern": {"String": s} or {"Regex": r}; returns a regex source.
StatusOr<std::string> PatternOf(const json& p, const char* where) {
  if (p.is_object() && p.contains("Regex")) return p["Regex"].get<std::string>();
  if (p.is_object() && p.contains("String")) return QuoteRegex(p["String"].get<std::string>());
  return InvalidArgument("{}: pattern must be {{\"String\"}} or {{\"Regex\"}}", where);
}

StatusOr<SplitBehavior> BehaviorOf(const json& j) {
  const std::string b = j.value("behavior", std::string("Isolated"));
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgument("unknown split behavior '{}'", b);
}

Status AddSplit(const std::string& pattern, SplitBehavior behavior, bool invert,
                std::vector<PreTokenizerStep>* steps) {
  KVS_ASSIGN_OR_RETURN(auto re, Regex::Compile(pattern));
  PreTokenizerStep st;
  st.kind = PreTokenizerStep::Kind::kSplit;
  st.regex = std::move(re);
  st.behavior = behavior;
  st.invert = invert;
  steps->push_back(std::move(st));
  return Status::Ok();
}

Status ParseNormalizer(const json& n, std::vector<NormalizerStep>* out) {
  if (n.is_null()) return Status::Ok();
  const std::string type = n.value("type", std::string());
  if (type == "Sequence") {
    for (const json& c : n.at("normalizers")) KVS_RETURN_IF_ERROR(ParseNormalizer(c, out));
  } else if (type == "Prepend") {
    out->push_back({NormalizerStep::Kind::kPrepend, n.at("prepend").get<std::string>(), ""});
  } else if (type == "Replace") {
    const json& p = n.at("pattern");
    if (!p.contains("String")) return Unimplemented("normalizer Replace with a regex pattern");
    out->push_back({NormalizerStep::Kind::kReplace, p["String"].get<std::string>(), n.at("content").get<std::string>()});
  } else if (type == "NFC") {
    // Text reaching a server is almost always NFC already; full composition
    // tables are not worth carrying for the rare exception.
    spdlog::warn("tokenizer: NFC normalizer treated as identity");
  } else {
    return Unimplemented("normalizer '{}'", type);
  }
  return Status::Ok();
}

StatusOr<PrependScheme> PrependOf(const json& j) {
  if (j.contains("prepend_scheme")) {
    const std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    return InvalidArgument("unknown prepend_scheme '{}'", s);
  }
  return j.value("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

Status ParsePreTokenizer(const json& p, std::vector<PreTokenizerStep>* out) {
  if (p.is_null()) return Status::Ok();
  const std::string type = p.value("type", std::string());
  if (type == "Sequence") {
    for (const json& c : p.at("pretokenizers")) KVS_RETURN_IF_ERROR(ParsePreTokenizer(c, out));
  } else if (type == "Split") {
    KVS_ASSIGN_OR_RETURN(std::string pattern, PatternOf(p.at("pattern"), "Split"));
    KVS_ASSIGN_OR_RETURN(SplitBehavior b, BehaviorOf(p));
    KVS_RETURN_IF_ERROR(AddSplit(pattern, b, p.value("invert", false), out));
  } else if (type == "ByteLevel") {
    PreTokenizerStep st;
    st.kind = PreTokenizerStep::Kind::kByteLevel;
    st.add_prefix_space = p.value("add_prefix_space", false);
    if (p.value("use_regex", true)) {
      KVS_ASSIGN_OR_RETURN(st.regex, Regex::Compile(kGpt2Pattern));
    }
    out->push_back(std::move(st));
  } else if (type == "Metaspace") {
    PreTokenizerStep st;
    st.kind = PreTokenizerStep::Kind::kMetaspace;
    st.replacement = p.value("replacement", std::string(kSpaceMarker));
    KVS_ASSIGN_OR_RETURN(st.prepend, PrependOf(p));
    st.split = p.value("split", true);
    out->push_back(std::move(st));
  } else if (type == "Digits") {
    KVS_RETURN_IF_ERROR(AddSplit(p.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                                 SplitBehavior::kIsolated, false, out));
  } else if (type == "Punctuation") {
    // Rust's is_ascii_punctuation plus Unicode P*; one character per match so
    // that the behavior (default Isolated) decides how runs group.
    KVS_ASSIGN_OR_RETURN(SplitBehavior b, BehaviorOf(p));
    KVS_RETURN_IF_ERROR(AddSplit("[\\p{P}!-/:-@\\[-`{-~]", b, false, out));
  } else {
    return Unimplemented("pre-tokenizer '{}'", type);
  }
  return Status::Ok();
}

// Fills decode flags from the decoder; false when it is of no known kind.
bool ParseDecoder(const json& d, TokenizerSpec* s) {
  if (d.is_null()) return false;
  const std::string type = d.value("type", std::string());
  if (type == "Sequence") {
    bool any = false;
    for (const json& c : d.at("decoders")) any = ParseDecoder(c, s) || any;
    return any;
  }
  if (type == "ByteLevel") { s->decode_byte_level = true; return true; }
  if (type == "Metaspace") {
    auto scheme = PrependOf(d);
    s->strip_leading_space = scheme.ok() && *scheme != PrependScheme::kNever;
    return true;
  }
  if (type == "Strip") {
    s->strip_leading_space = d.value("start", 0) > 0 && d.value("content", std::string(" ")) == " ";
    return true;
  }
  return type == "Replace" || type == "ByteFallback" || type == "Fuse";
}

// Text of a tokenizer_config special-token entry: "x" or {"content": "x"}.
std::string TokenContent(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return "";
}

StatusOr<TokenizerSpec> Parse(const json& tj, const json& cj) {
  TokenizerSpec s;
  s.name = "tokenizer.json";
  const json& model = tj.at("model");
  const std::string mtype = model.value("type", model.contains("merges") ? std::string("BPE") : std::string());
  if (mtype != "BPE") return Unimplemented("tokenizer model '{}' (only BPE)", mtype);
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(k) && !model[k].is_null() && !model[k].get<std::string>().empty()) {
      return Unimplemented("BPE {}", k);
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0) {
    return Unimplemented("BPE dropout");
  }
  s.model = ModelKind::kBpe;
  s.byte_fallback = model.value("byte_fallback", false);
  s.fuse_unk = model.value("fuse_unk", false);
  s.ignore_merges = model.value("ignore_merges", false);

  // Vocabulary: model.vocab plus added tokens (tokenizer.json, then config).
  std::map<int64_t, std::string> by_id;
  if (!model.at("vocab").is_object()) return InvalidArgument("model.vocab must be an object");
  for (const auto& [text, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = text;
  std::map<int64_t, AddedToken> added;
  auto add = [&](int64_t id, const json& a) {
    AddedToken t;
    t.content = a.at("content").get<std::string>();
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    added[id] = t;
    by_id[id] = t.content;
  };
  if (tj.contains("added_tokens")) {
    for (const json& a : tj["added_tokens"]) add(a.at("id").get<int64_t>(), a);
  }
  if (cj.is_object() && cj.contains("added_tokens_decoder")) {
    for (const auto& [id, a] : cj["added_tokens_decoder"].items()) add(std::stoll(id), a);
  }
  if (by_id.empty()) return InvalidArgument("empty vocabulary");
  if (by_id.begin()->first < 0 || by_id.rbegin()->first >= (int64_t{1} << 24) * 16) {
    return InvalidArgument("token ids out of range");
  }
  const size_t n = static_cast<size_t>(by_id.rbegin()->first) + 1;
  s.tokens.assign(n, "");
  s.types.assign(n, TokenType::kUnused);  // ids no entry names stay unused
  for (auto& [id, text] : by_id) {
    s.tokens[id] = text;
    s.types[id] = (s.byte_fallback && ParseByteToken(text) >= 0) ? TokenType::kByte : TokenType::kNormal;
  }
  s.lstrip.assign(n, 0);
  s.rstrip.assign(n, 0);
  for (const auto& [id, a] : added) {
    s.types[id] = a.special ? TokenType::kControl : TokenType::kUserDefined;
    s.lstrip[id] = a.lstrip;
    s.rstrip[id] = a.rstrip;
  }

  for (const json& m : model.at("merges")) {
    if (m.is_array() && m.size() == 2) {
      s.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      const std::string line = m.get<std::string>();
      const size_t pos = line.find(' ', 1);
      if (pos == std::string::npos) return InvalidArgument("malformed merge '{}'", line);
      s.merges.emplace_back(line.substr(0, pos), line.substr(pos + 1));
    }
  }

  std::vector<NormalizerStep> norm;
  std::vector<PreTokenizerStep> pre;
  KVS_RETURN_IF_ERROR(ParseNormalizer(tj.value("normalizer", json()), &norm));
  KVS_RETURN_IF_ERROR(ParsePreTokenizer(tj.value("pre_tokenizer", json()), &pre));
  s.pipeline = TextPipeline(std::move(norm), std::move(pre));
  if (!ParseDecoder(tj.value("decoder", json()), &s)) s.decode_byte_level = s.pipeline.byte_level();

  auto find = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    for (size_t i = 0; i < n; ++i) {
      if (s.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
  };
  if (model.contains("unk_token") && model["unk_token"].is_string()) s.unk_id = find(model["unk_token"]);

  // BOS/EOS come from the post-processor's template, else from the config.
  const json post = tj.value("post_processor", json());
  std::function<void(const json&)> scan_post = [&](const json& p) {
    if (p.is_null()) return;
    const std::string type = p.value("type", std::string());
    if (type == "Sequence") {
      for (const json& c : p.at("processors")) scan_post(c);
    } else if (type == "TemplateProcessing") {
      bool before = true;
      for (const json& piece : p.at("single")) {
        if (piece.contains("Sequence")) { before = false; continue; }
        if (!piece.contains("SpecialToken")) continue;
        const std::string name = piece["SpecialToken"].at("id").get<std::string>();
        int32_t id = -1;
        if (p.contains("special_tokens") && p["special_tokens"].contains(name)) {
          const json& ids = p["special_tokens"][name].at("ids");
          if (!ids.empty()) id = ids[0].get<int32_t>();
        }
        if (id < 0) id = find(name);
        if (before) { s.bos_id = id; s.add_bos = id >= 0; }
        else { s.eos_id = id; s.add_eos = id >= 0; }
      }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      s.bos_id = p.at("cls")[1].get<int32_t>();
      s.eos_id = p.at("sep")[1].get<int32_t>();
      s.add_bos = s.add_eos = true;
    }
  };
  scan_post(post);
  if (cj.is_object()) {
    if (cj.contains("bos_token")) {
      const int32_t id = find(TokenContent(cj["bos_token"]));
      if (id >= 0) s.bos_id = id;
    }
    if (cj.contains("eos_token")) {
      const int32_t id = find(TokenContent(cj["eos_token"]));
      if (id >= 0) s.eos_id = id;
    }
    if (cj.contains("unk_token") && s.unk_id < 0) s.unk_id = find(TokenContent(cj["unk_token"]));
    if (cj.contains("pad_token")) s.pad_id = find(TokenContent(cj["pad_token"]));
    if (cj.contains("add_bos_token") && cj["add_bos_token"].is_boolean()) s.add_bos = cj["add_bos_token"].get<bool>();
    if (cj.contains("add_eos_token") && cj["add_eos_token"].is_boolean()) s.add_eos = cj["add_eos_token"].get<bool>();
    if (cj.contains("chat_template")) {
      const json& ct = cj["chat_template"];
      if (ct.is_string()) {
        s.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        for (const json& t : ct) {
          if (t.value("name", std::string()) == "default" || s.chat_template.empty()) {
            s.chat_template = t.value("template", std::string());
          }
        }
      }
    }
  }
  s.add_bos = s.add_bos && s.bos_id >= 0;
  s.add_eos = s.add_eos && s.eos_id >= 0;
  return s;
}

}  // namespace

StatusOr<TokenizerSpec> SpecFromHuggingFace(const std::string& tokenizer_json,
                                            const std::string& tokenizer_config_json) {
  const json tj = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tj.is_discarded() || !tj.is_object()) return InvalidArgument("tokenizer.json is not a JSON object");
  json cj;
  if (!tokenizer_config_json.empty()) {
    cj = json::parse(tokenizer_config_json, nullptr, false);
    if (cj.is_discarded() || !cj.is_object()) return InvalidArgument("tokenizer_config.json is not a JSON object");
  }
  try {
    return Parse(tj, cj);
  } catch (const json::exception& e) {
    return InvalidArgument("tokenizer.json: {}", e.what());
  }
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHuggingFace(const std::string& tokenizer_json,
                                                                const std::string& tokenizer_config_json) {
  KVS_ASSIGN_OR_RETURN(TokenizerSpec spec, SpecFromHuggingFace(tokenizer_json, tokenizer_config_json));
  return FromSpec(std::move(spec));
}

}  // namespace kvs::tok
