// Differential test against @huggingface/tokenizers (tests/oracles, run with
// node): each vocabulary in ../shared is exported as tokenizer.json, a seeded
// set of random Unicode strings (CJK, emoji, combining marks, whitespace
// runs, digits, code, special-token text) is encoded by both, and the ids
// must agree. The same JSON loaded back with FromHuggingFace must agree too,
// and our encodings must decode back to the input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_export.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {
namespace oracle_test {

std::string Cp(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

// Random text built from pieces that stress pre-tokenizers and merges.
class TextGen {
 public:
  explicit TextGen(uint32_t seed) : rng_(seed) {}

  std::string Next(bool allow_special) {
    std::string s;
    const int parts = Uniform(1, 12);
    for (int i = 0; i < parts; ++i) s += Part(allow_special);
    return s;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  uint32_t Range(uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_); }
  template <size_t N>
  const char* Pick(const char* const (&a)[N]) { return a[Uniform(0, N - 1)]; }

  std::string Part(bool allow_special) {
    static const char* const kWords[] = {"the", "Hello", "world", "tokenizer", "isn", "don", "WHAT", "McDonald",
                                         "naïve", "café", "straße", "Ärger", "über", "été", "niño", "ǅemal"};
    static const char* const kPunct[] = {"!", "?", "...", "!!!", "''", "```", "\"", "--", "===", ".", ",", ";",
                                         "(", ")", "[]", "{", "}", "->", "<=", "#", "@", "$", "%", "^", "&",
                                         "*", "~", "|", "\\", "/", "_", "+", "…", "—", "«", "»", "、", "。", "！"};
    static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE",
                                                "'Ve", "'LL", "'D", "'M"};
    static const char* const kSpaces[] = {" ", "  ", "   ", "      ", "\t", "\n", "\r\n", "\n\n", "\n\n\n",
                                          " \n", "\n ", " \t ", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x83",
                                          "\xE2\x80\xA8", "\x0B", "\x0C"};
    static const char* const kCode[] = {"def foo(x):\n    return x + 1\n", "int main() {", "}", "#include <stdio.h>",
                                        "for (i = 0; i < n; ++i)", "x=3.14", "a->b", "0x1F", "1e-9",
                                        "std::vector<int>", "if __name__ == '__main__':"};
    static const char* const kSpecial[] = {"<s>", "</s>", "<unk>", "<|endoftext|>", "<|end|>", "<|user|>",
                                           "<|assistant|>", ">>TITLE<<", "<|EOT|>", "[PAD32011]"};
    switch (Uniform(0, allow_special ? 13 : 12)) {
      case 0: case 1: {
        std::string w = Pick(kWords);
        if (Uniform(0, 1)) w = " " + w;
        return w;
      }
      case 2: {  // random ASCII letters
        std::string w = Uniform(0, 1) ? " " : "";
        for (int n = Uniform(1, 10); n > 0; --n) w.push_back(static_cast<char>(Uniform(0, 1) ? Range('a', 'z') : Range('A', 'Z')));
        return w;
      }
      case 3: {  // digits
        std::string w = Uniform(0, 2) == 0 ? " " : "";
        for (int n = Uniform(1, 12); n > 0; --n) w.push_back(static_cast<char>(Range('0', '9')));
        if (Uniform(0, 3) == 0) w += "." + std::to_string(Uniform(0, 999));
        return w;
      }
      case 4: return Pick(kPunct);
      case 5: return Pick(kContractions);
      case 6: return Pick(kSpaces);
      case 7: {  // CJK, kana, hangul
        std::string w;
        for (int n = Uniform(1, 6); n > 0; --n) {
          switch (Uniform(0, 3)) {
            case 0: w += Cp(Range(0x4E00, 0x9FA5)); break;
            case 1: w += Cp(Range(0x3041, 0x3096)); break;
            case 2: w += Cp(Range(0x30A1, 0x30FA)); break;
            default: w += Cp(Range(0xAC00, 0xD7A3)); break;
          }
        }
        return w;
      }
      case 8: {  // emoji, with ZWJ / variation selector / skin tone sometimes
        std::string w = Cp(Uniform(0, 1) ? Range(0x1F600, 0x1F64F) : Range(0x1F300, 0x1F5FF));
        switch (Uniform(0, 4)) {
          case 0: w += Cp(0x200D) + Cp(Range(0x1F600, 0x1F64F)); break;
          case 1: w += Cp(0xFE0F); break;
          case 2: w += Cp(Range(0x1F3FB, 0x1F3FF)); break;
          case 3: w = Cp(Range(0x1F1E6, 0x1F1FF)) + Cp(Range(0x1F1E6, 0x1F1FF)); break;
          default: break;
        }
        return w;
      }
      case 9: {  // base letters with combining marks
        std::string w = Uniform(0, 1) ? " " : "";
        w.push_back(static_cast<char>(Range('a', 'z')));
        for (int n = Uniform(1, 3); n > 0; --n) w += Cp(Range(0x0300, 0x036F));
        return w;
      }
      case 10: {  // other scripts
        std::string w = Uniform(0, 1) ? " " : "";
        uint32_t lo, hi;
        switch (Uniform(0, 5)) {
          case 0: lo = 0x0410; hi = 0x044F; break;  // Cyrillic
          case 1: lo = 0x03B1; hi = 0x03C9; break;  // Greek
          case 2: lo = 0x05D0; hi = 0x05EA; break;  // Hebrew
          case 3: lo = 0x0627; hi = 0x064A; break;  // Arabic
          case 4: lo = 0x0905; hi = 0x0939; break;  // Devanagari
          default: lo = 0x0E01; hi = 0x0E2E; break;  // Thai
        }
        for (int n = Uniform(1, 8); n > 0; --n) w += Cp(Range(lo, hi));
        return w;
      }
      case 11: return Pick(kCode);
      case 12: return Cp(Range(0xA0, 0x24F));  // Latin-1 and Latin Extended
      default: return Pick(kSpecial);
    }
  }

  std::mt19937 rng_;
};

std::string Describe(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    char b[8];
    if (c >= 0x20 && c < 0x7F) out.push_back(static_cast<char>(c));
    else { std::snprintf(b, sizeof(b), "\\x%02X", c); out += b; }
  }
  return out;
}

std::string IdList(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) s += std::to_string(id) + " ";
  return s;
}

// Byte-level vocabularies may lack tokens for some bytes (falcon has none
// for \v and a dozen other C0 controls, or for 0xF2); text with such a byte
// cannot be represented and loses it, in Hugging Face's tokenizer too.
bool Representable(const Tokenizer& tok, const std::string& text) {
  if (!tok.spec().decode_byte_level) return true;  // SentencePiece: byte fallback
  for (char c : text) {
    std::string mapped;
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &mapped);
    if (tok.FindToken(mapped) < 0) return false;
  }
  return true;
}

bool NodeOracleAvailable(std::string* why) {
  const std::string mod = testing::SourceDir() + "/tests/oracles/node_modules/@huggingface/tokenizers/package.json";
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    *why = "node is not installed";
    return false;
  }
  if (!std::filesystem::exists(mod)) {
    *why = "tests/oracles/node_modules lacks @huggingface/tokenizers (run scripts/setup.sh)";
    return false;
  }
  return true;
}

// Runs the node oracle on `texts` with tokenizer.json text `tj`; returns
// the ids per text (empty optional, with a test failure, if node failed).
std::optional<std::vector<std::vector<int32_t>>> RunOracle(const std::string& label, const std::string& tj,
                                                           const std::vector<std::string>& texts) {
  const auto dir = testing::TempDir("oracle_" + label);
  const std::string tj_path = (dir / "tokenizer.json").string();
  const std::string in = (dir / "inputs.json").string();
  const std::string out = (dir / "outputs.json").string();
  std::ofstream(tj_path, std::ios::binary) << tj;
  std::ofstream(in, std::ios::binary) << nlohmann::json(texts).dump();
  const std::string cmd = "node '" + testing::SourceDir() + "/tests/oracles/hf_tokenize.mjs' '" + tj_path + "' '" +
                          in + "' '" + out + "'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "failed: " << cmd;
    return std::nullopt;
  }
  std::ifstream res(out, std::ios::binary);
  std::stringstream ss;
  ss << res.rdbuf();
  const nlohmann::json results = nlohmann::json::parse(ss.str());
  std::vector<std::vector<int32_t>> ids;
  for (const auto& r : results) ids.push_back(r["ids"].get<std::vector<int32_t>>());
  std::filesystem::remove_all(dir);
  return ids;
}

// Counts agreements of ours (parse_special: HF always recognises added
// tokens) with theirs, reporting the first few differences.
int Compare(const std::string& label, const Tokenizer& tok, const std::vector<std::string>& texts,
            const std::vector<std::vector<int32_t>>& theirs) {
  int agree = 0, reports = 0;
  for (size_t i = 0; i < texts.size() && i < theirs.size(); ++i) {
    const std::vector<int32_t> ours = tok.Encode(texts[i], false, /*parse_special=*/true);
    if (ours == theirs[i]) {
      ++agree;
    } else if (reports++ < 8) {
      ADD_FAILURE() << label << " string " << i << " '" << Describe(texts[i]) << "'\n ours   " << IdList(ours)
                    << "\n theirs " << IdList(theirs[i]);
    }
  }
  std::printf("%s: %d/%zu random strings agree with @huggingface/tokenizers\n", label.c_str(), agree,
              texts.size());
  return agree;
}

struct Texts {
  std::vector<std::string> texts;
  std::vector<bool> has_special;
};

Texts MakeTexts(int n, uint32_t seed) {
  Texts t;
  TextGen gen(seed);
  for (int i = 0; i < n; ++i) {
    const bool special = i % 4 == 3;
    t.texts.push_back(gen.Next(special));
    t.has_special.push_back(special);
  }
  return t;
}

std::unique_ptr<Tokenizer> LoadGguf(const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

class Oracle : public ::testing::TestWithParam<std::string> {};

TEST_P(Oracle, MatchesHuggingFaceTokenizersJs) {
  KVS_REQUIRE_SHARED(path, GetParam());
  std::string why;
  if (!NodeOracleAvailable(&why)) GTEST_SKIP() << why << "; skipping the differential test";
  auto tok = LoadGguf(path);
  ASSERT_NE(tok, nullptr);
  auto exported = ExportHuggingFaceJson(*tok);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  auto reloaded = Tokenizer::FromHuggingFace(*exported, "");
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();

  const std::string base = std::filesystem::path(path).filename().string();
  const int kStrings = testing::SanitizerSample(400);
  const Texts t = MakeTexts(kStrings, 12345);
  auto theirs = RunOracle(base, *exported, t.texts);
  ASSERT_TRUE(theirs.has_value());
  ASSERT_EQ(theirs->size(), t.texts.size());
  EXPECT_EQ(Compare(base, *tok, t.texts, *theirs), kStrings);
  int round_trips = 0;
  for (size_t i = 0; i < t.texts.size(); ++i) {
    const std::vector<int32_t> ours = tok->Encode(t.texts[i], false, true);
    EXPECT_EQ((*reloaded)->Encode(t.texts[i], false, true), ours) << "FromHuggingFace(export) differs, string " << i;
    if (!t.has_special[i] && Representable(*tok, t.texts[i])) {
      const std::vector<int32_t> plain = tok->Encode(t.texts[i], false, false);
      EXPECT_EQ(tok->Decode(plain, true), t.texts[i]) << base << " string " << i << " does not round-trip";
      ++round_trips;
    }
  }
  std::printf("%s: %d strings checked for decode(encode(x)) == x\n", base.c_str(), round_trips);
}

INSTANTIATE_TEST_SUITE_P(Shared, Oracle,
                         ::testing::Values("models/stories260K.gguf", "vocab/ggml-vocab-llama-spm.gguf",
                                           "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                                           "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-falcon.gguf"),
                         [](const auto& info) {
                           std::string n = std::filesystem::path(info.param).stem().string();
                           for (char& c : n) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Hugging Face pipeline components that no GGUF in ../shared uses, put on
// real vocabularies: loaded with FromHuggingFace and compared with node.
struct Variant {
  const char* name;
  const char* vocab;  // under ../shared
  const char* edit;   // JSON object merged over the exported tokenizer.json
};

const Variant kVariants[] = {
    {"metaspace_first", "vocab/ggml-vocab-llama-spm.gguf",
     R"({"normalizer": null,
         "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
         "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false}})"},
    // split=true is left out: tokenizers.js groups a run of U+2581 into one
    // word where Hugging Face's Rust crate (the reference) starts a word at
    // each; hf_json_test pins the Rust behaviour.
    {"metaspace_always", "vocab/ggml-vocab-llama-spm.gguf",
     R"({"normalizer": null,
         "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": false}})"},
    {"bytelevel_prefix_space", "vocab/ggml-vocab-gpt-2.gguf",
     R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}})"},
    {"digits_bytelevel", "vocab/ggml-vocab-gpt-2.gguf",
     R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
           {"type": "Digits", "individual_digits": true},
           {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}})"},
    {"llama3_regex_ignore_merges", "vocab/ggml-vocab-gpt-2.gguf",
     R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
            "behavior": "Isolated", "invert": false},
           {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
         "model": {"ignore_merges": true}})"},
    {"split_removed", "vocab/ggml-vocab-deepseek-coder.gguf",
     R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false},
           {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}})"},
};

class OracleVariant : public ::testing::TestWithParam<Variant> {};

TEST_P(OracleVariant, MatchesHuggingFaceTokenizersJs) {
  const Variant& v = GetParam();
  KVS_REQUIRE_SHARED(path, v.vocab);
  std::string why;
  if (!NodeOracleAvailable(&why)) GTEST_SKIP() << why << "; skipping the differential test";
  auto tok = LoadGguf(path);
  ASSERT_NE(tok, nullptr);
  auto exported = ExportHuggingFaceJson(*tok);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  nlohmann::json j = nlohmann::json::parse(*exported);
  j.merge_patch(nlohmann::json::parse(v.edit));
  if (j["normalizer"].is_null()) j["normalizer"] = nullptr;  // merge_patch deletes nulls
  auto ours = Tokenizer::FromHuggingFace(j.dump(), "");
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  const int kStrings = testing::SanitizerSample(300);
  const Texts t = MakeTexts(kStrings, 777);
  auto theirs = RunOracle(v.name, j.dump(), t.texts);
  ASSERT_TRUE(theirs.has_value());
  ASSERT_EQ(theirs->size(), t.texts.size());
  EXPECT_EQ(Compare(v.name, **ours, t.texts, *theirs), kStrings);
}

INSTANTIATE_TEST_SUITE_P(Shared, OracleVariant, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace oracle_test
}  // namespace kvs::tok
