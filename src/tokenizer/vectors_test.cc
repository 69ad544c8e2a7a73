// Exactness against the reference vectors in ../shared/vocab: every case of
// every ggml-vocab-*.gguf.inp must encode to the ids in the matching .out
// (produced by the models' own Hugging Face tokenizers, without BOS), and
// decode back to the input text.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tok {
namespace vectors_test {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Cases are terminated by "\n__ggml_vocab_test__\n"; a case's text excludes
// that newline.
std::vector<std::string> SplitCases(const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    cases.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return cases;
}

std::vector<std::vector<int32_t>> ParseOut(const std::string& out) {
  std::vector<std::vector<int32_t>> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    int64_t id;
    while (ids >> id) row.push_back(static_cast<int32_t>(id));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string Ids(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) s += std::to_string(id) + " ";
  return s;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EncodeMatchesAndDecodeRoundTrips) {
  const std::string name = "ggml-vocab-" + GetParam() + ".gguf";
  KVS_REQUIRE_SHARED(path, "vocab/" + name);
  const std::string inp_path = path + ".inp";
  const std::string out_path = path + ".out";
  ASSERT_TRUE(std::filesystem::exists(inp_path) && std::filesystem::exists(out_path)) << name;
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();

  const std::vector<std::string> cases = SplitCases(ReadAll(inp_path));
  const std::vector<std::vector<int32_t>> expected = ParseOut(ReadAll(out_path));
  ASSERT_EQ(cases.size(), expected.size()) << name;
  ASSERT_GT(cases.size(), 30u);

  int encode_ok = 0;
  int decode_ok = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& text = cases[i];
    const std::vector<int32_t> ids = (*tok)->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, expected[i]) << name << " case " << i << " text '" << text << "'\n got      " << Ids(ids)
                                << "\n expected " << Ids(expected[i]);
    encode_ok += ids == expected[i];
    const std::string back = (*tok)->Decode(expected[i], /*skip_special=*/true);
    EXPECT_EQ(back, text) << name << " case " << i << " does not round-trip";
    decode_ok += back == text;
    // With BOS (when the vocabulary adds one) the text still round-trips,
    // and streaming the ids one at a time gives the same text.
    const std::vector<int32_t> with_bos = (*tok)->Encode(text, /*add_special=*/true, false);
    EXPECT_EQ((*tok)->Decode(with_bos, /*skip_special=*/true), text) << name << " case " << i;
    IncrementalDecoder dec(**tok, /*skip_special=*/true, /*at_sequence_start=*/true);
    std::string streamed;
    for (int32_t id : with_bos) streamed += dec.Add(id);
    streamed += dec.Flush();
    EXPECT_EQ(streamed, text) << name << " case " << i << " streamed";
  }
  std::printf("%s: encode %d/%zu exact, decode %d/%zu round-trip\n", name.c_str(), encode_ok, cases.size(),
              decode_ok, cases.size());
}

// Arbitrary bytes (mostly malformed UTF-8, some special-token text) never
// crash, give ids in range, and stream to well-formed UTF-8.
TEST_P(VocabVectors, ArbitraryBytesAreSafe) {
  const std::string name = "ggml-vocab-" + GetParam() + ".gguf";
  KVS_REQUIRE_SHARED(path, "vocab/" + name);
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::mt19937 rng(99);
  const char* const kBits[] = {"<s>", "</s>", "<|endoftext|>", "\xE2\x96\x81", " ", "\n", "'s", "\xF0\x9F"};
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (int n = static_cast<int>(rng() % 24); n > 0; --n) {
      if (rng() % 4 == 0) s += kBits[rng() % 8];
      else s.push_back(static_cast<char>(rng() % 256));
    }
    for (bool parse : {false, true}) {
      const std::vector<int32_t> ids = (*tok)->Encode(s, true, parse);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < (*tok)->vocab_size());
      (void)(*tok)->Decode(ids, false);
      IncrementalDecoder dec(**tok, false, true);
      std::string streamed;
      for (int32_t id : ids) streamed += dec.Add(id);
      streamed += dec.Flush();
      EXPECT_EQ(SanitizeUtf8(streamed), streamed);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

// Every vocabulary in ../shared/vocab is covered by the list above.
TEST(VocabVectors, ListCoversSharedFiles) {
  KVS_REQUIRE_SHARED(dir, "vocab");
  const std::vector<std::string> known = {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon"};
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("ggml-vocab-", 0) != 0 || e.path().extension() != ".gguf") continue;
    const std::string stem = f.substr(11, f.size() - 11 - 5);
    EXPECT_NE(std::find(known.begin(), known.end(), stem), known.end()) << "new vocabulary " << f;
  }
}

}  // namespace vectors_test
}  // namespace kvs::tok
