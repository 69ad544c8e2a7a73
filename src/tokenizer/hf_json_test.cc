// FromHuggingFace on small tokenizer.json / tokenizer_config.json files
// written here, shaped like the real ones (Llama-2, Qwen2, RoBERTa, Metaspace).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/hf_export.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {
namespace hf_json_test {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;
const std::string kM(kSpaceMarker);

std::string ByteChar(uint8_t b) {
  std::string s;
  AppendUtf8(ByteToUnicode(b), &s);
  return s;
}

// Llama-2 layout: <unk> <s> </s>, <0x00>..<0xFF> (3..258), then pieces.
json Llama2Json() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[ByteTokenText(static_cast<uint8_t>(b))] = 3 + b;
  int id = 259;
  const std::vector<std::string> pieces = {kM,        "h",  "e",       "l",          "o",      "w",  "r",
                                           "d",       "he", "ll",      kM + "h",     kM + "he", "llo",
                                           kM + "hello", kM + "w", "or", kM + "wor", "ld",    kM + "world"};
  for (const std::string& p : pieces) {
    vocab[p] = id++;
  }
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = json::array({
      {{"id", 0}, {"content", "<unk>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}},
      {{"id", 1}, {"content", "<s>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}},
      {{"id", 2}, {"content", "</s>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}},
  });
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kM}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                                   {"content", kM}}})}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kM}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                {"byte_fallback", true}, {"vocab", vocab},
                {"merges", json::array({"h e", "l l", kM + " he", kM + " h", "ll o", kM + "he llo", kM + " w",
                                        "o r", kM + "w or", "l d", kM + "wor ld"})}};
  return j;
}

TEST(HuggingFace, Llama2Style) {
  const json config = {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
                       {"eos_token", {{"content", "</s>"}, {"special", true}}}, {"chat_template", "{{ x }}"}};
  auto t = Tokenizer::FromHuggingFace(Llama2Json().dump(), config.dump());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  const int32_t hello = tok.FindToken(kM + "hello");
  const int32_t world = tok.FindToken(kM + "world");
  EXPECT_EQ(tok.Encode("hello world", true, false), Ids({1, hello, world}));
  // é is not in the vocabulary: byte fallback.
  EXPECT_EQ(tok.Encode("hé", false, false), Ids({tok.FindToken(kM + "h"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.Decode(tok.Encode("hello hé world", true, false), true), "hello hé world");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  EXPECT_EQ(tok.chat_template(), "{{ x }}");
  EXPECT_EQ(tok.token_type(3 + 'A'), TokenType::kByte);
  EXPECT_EQ(tok.token_type(1), TokenType::kControl);
  // The post-processor alone decides BOS when the config is absent.
  auto t2 = Tokenizer::FromHuggingFace(Llama2Json().dump(), "");
  ASSERT_TRUE(t2.ok());
  EXPECT_TRUE((*t2)->add_bos());
  EXPECT_EQ((*t2)->Encode("hello", true, false), Ids({1, hello}));
  // Control tokens only with parse_special; each fragment gets the ▁ prefix.
  EXPECT_EQ(tok.Encode("hello</s>world", false, true), Ids({hello, 2, world}));
  const Ids plain = tok.Encode("hello</s>world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
}

// Byte-level BPE with a Split regex and ByteLevel(use_regex=false), like
// Qwen2 / Llama-3 files.
json ByteLevelJson(const json& pre_tokenizer) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(static_cast<uint8_t>(b))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "c"}, {"a", "t"}, {"Ġc", "at"}, {"1", "2"}};
  json jm = json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    jm.push_back(json::array({a, b}));  // the newer two-element form
  }
  json j;
  j["added_tokens"] = json::array({
      {{"id", 300}, {"content", "<|im_start|>"}, {"special", true}},
      {{"id", 301}, {"content", "<|im_end|>"}, {"special", true}, {"rstrip", true}},
      {{"id", 302}, {"content", "<tool>"}, {"special", false}},
  });
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = pre_tokenizer;
  j["decoder"] = {{"type", "ByteLevel"}};
  j["post_processor"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", jm}, {"ignore_merges", false}};
  return j;
}

TEST(HuggingFace, ByteLevelWithSplitRegex) {
  const json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
                                            "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const json config = {{"eos_token", "<|im_end|>"}, {"chat_template", json::array({{{"name", "default"},
                                                                                      {"template", "T"}}})}};
  auto t = Tokenizer::FromHuggingFace(ByteLevelJson(pre).dump(), config.dump());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  const int32_t the = tok.FindToken("Ġthe");
  const int32_t cat = tok.FindToken("Ġcat");
  EXPECT_EQ(tok.Encode(" the cat", false, false), Ids({the, cat}));
  // \p{N} one digit at a time: "12" is never merged.
  EXPECT_EQ(tok.Encode("12", false, false), Ids({'1', '2'}));
  EXPECT_EQ(tok.Encode("<|im_start|>the<|im_end|>\n<tool>", false, true),
            Ids({300, 't', tok.FindToken("he"), 301, 302}));
  EXPECT_EQ(tok.eos_id(), 301);
  EXPECT_TRUE(tok.IsEndOfGeneration(301));
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.chat_template(), "T");
  EXPECT_EQ(tok.Decode(tok.Encode(" the cat 12\n", false, false), true), " the cat 12\n");
}

TEST(HuggingFace, ByteLevelOwnRegexAndPrefixSpace) {
  const json pre = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  auto t = Tokenizer::FromHuggingFace(ByteLevelJson(pre).dump(), "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // add_prefix_space turns "the" into " the".
  EXPECT_EQ((*t)->Encode("the cat", false, false), Ids({(*t)->FindToken("Ġthe"), (*t)->FindToken("Ġcat")}));
}

TEST(HuggingFace, MetaspacePreTokenizer) {
  json j = Llama2Json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "first"}, {"split", false}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", kM}, {"prepend_scheme", "first"}};
  auto t = Tokenizer::FromHuggingFace(j.dump(), "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  const int32_t hello = tok.FindToken(kM + "hello");
  EXPECT_EQ(tok.Encode("hello", false, false), Ids({hello}));
  // "first": only the fragment at the start of the input gets the prefix.
  EXPECT_EQ(tok.Encode("hello<s>hello", false, true),
            Ids({hello, 1, tok.FindToken("he"), tok.FindToken("llo")}));
  EXPECT_EQ(tok.Decode(Ids({hello, tok.FindToken(kM + "world")}), true), "hello world");
  // split=true cuts before each ▁, so merges cannot cross words; in a run of
  // spaces every ▁ is a word of its own (Rust tokenizers' MergedWithNext:
  // a delimiter joins the next piece only when that piece is not one).
  j["pre_tokenizer"]["split"] = true;
  auto t2 = Tokenizer::FromHuggingFace(j.dump(), "");
  ASSERT_TRUE(t2.ok());
  const int32_t m = (*t2)->FindToken(kM);
  EXPECT_EQ((*t2)->Encode("hello world", false, false), Ids({hello, (*t2)->FindToken(kM + "world")}));
  EXPECT_EQ((*t2)->Encode("hello   world", false, false), Ids({hello, m, m, (*t2)->FindToken(kM + "world")}));
  // Without split the run is one word: "▁▁▁world" -> ▁ ▁ ▁world (no "▁▁").
  EXPECT_EQ(tok.Encode("hello   world", false, false), Ids({hello, m, m, tok.FindToken(kM + "world")}));
}

TEST(HuggingFace, SplitBehaviors) {
  auto run = [](const char* behavior, bool invert) {
    json pre = {{"type", "Sequence"},
                {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"String", "-"}}},
                                                {"behavior", behavior}, {"invert", invert}},
                                               {{"type", "ByteLevel"}, {"use_regex", false}}})}};
    json j = ByteLevelJson(pre);
    // A merge across "-" shows whether "-" stayed with its neighbour.
    j["model"]["vocab"]["a-"] = 400;
    j["model"]["vocab"]["-b"] = 401;
    j["model"]["merges"].push_back(json::array({"a", "-"}));
    j["model"]["merges"].push_back(json::array({"-", "b"}));
    auto t = Tokenizer::FromHuggingFace(j.dump(), "");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return (*t)->Encode("a-b--b", false, false);
  };
  EXPECT_EQ(run("Isolated", false), Ids({'a', '-', 'b', '-', '-', 'b'}));
  EXPECT_EQ(run("Removed", false), Ids({'a', 'b', 'b'}));
  EXPECT_EQ(run("MergedWithPrevious", false), Ids({400, 'b', '-', '-', 'b'}));
  EXPECT_EQ(run("MergedWithNext", false), Ids({'a', 401, '-', 401}));
  EXPECT_EQ(run("Contiguous", false), Ids({'a', '-', 'b', '-', '-', 'b'}));
  EXPECT_EQ(run("Removed", true), Ids({'-', '-', '-'}));
}

TEST(HuggingFace, ExportRoundTrip) {
  auto t = Tokenizer::FromHuggingFace(Llama2Json().dump(), "");
  ASSERT_TRUE(t.ok());
  auto exported = ExportHuggingFaceJson(**t);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  auto back = Tokenizer::FromHuggingFace(*exported, "");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  for (const char* text : {"hello world", " hello  world ", "hé<s>x", ""}) {
    EXPECT_EQ((*back)->Encode(text, false, true), (*t)->Encode(text, false, true)) << text;
  }
}

TEST(HuggingFace, RejectsWhatItCannotDo) {
  EXPECT_EQ(Tokenizer::FromHuggingFace("{not json", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromHuggingFace("[]", "").status().code(), StatusCode::kInvalidArgument);
  json j = Llama2Json();
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "{bad").status().code(), StatusCode::kInvalidArgument);
  j["model"]["type"] = "Unigram";
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "").status().code(), StatusCode::kUnimplemented);
  j = Llama2Json();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "").status().code(), StatusCode::kUnimplemented);
  j = Llama2Json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "").status().code(), StatusCode::kInvalidArgument);
  j = Llama2Json();
  j["model"]["vocab"] = 5;  // wrong type
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "").status().code(), StatusCode::kInvalidArgument);
  j = Llama2Json();
  j["model"]["continuing_subword_prefix"] = "##";
  EXPECT_EQ(Tokenizer::FromHuggingFace(j.dump(), "").status().code(), StatusCode::kUnimplemented);
}

TEST(Regex, OnigurumaSemantics) {
  // \s is Unicode White_Space (includes U+0085, not U+200B).
  auto re = Regex::Compile("\\s+");
  ASSERT_TRUE(re.ok());
  std::vector<std::pair<size_t, size_t>> m;
  (*re)->FindAll("a\xC2\x85" "b\xE2\x80\x8B" "c\xE3\x80\x80" "d", &m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], std::make_pair(size_t{1}, size_t{3}));
  EXPECT_EQ(m[1], std::make_pair(size_t{8}, size_t{11}));
  EXPECT_EQ(TranslateOnigToPcre2("[^\\s\\p{L}]\\S"), "[^\\t-\\r\\x{85}\\p{Z}\\p{L}][^\\t-\\r\\x{85}\\p{Z}]");
  EXPECT_EQ(TranslateOnigToPcre2("\\\\s"), "\\\\s");  // an escaped backslash, then "s"
  EXPECT_EQ(TranslateOnigToPcre2("[]a]"), "[\\]a]");
  // $ is an end of line, as in Oniguruma.
  auto eol = Regex::Compile("b$");
  ASSERT_TRUE(eol.ok());
  m.clear();
  (*eol)->FindAll("ab\nab", &m);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_FALSE(Regex::Compile("(?<").ok());
}

}  // namespace hf_json_test
}  // namespace kvs::tok
