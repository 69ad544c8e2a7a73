// The matcher on the real vocabularies in ../shared/vocab (SentencePiece and
// byte-level BPE): token bytes come from the tokenizer, so walks through the
// masks decode to grammar-valid text, canonical tokenizations of valid text
// pass the masks, and special tokens are handled (stop only at the end,
// control tokens never). Skips cleanly without ../shared.
#include <gtest/gtest.h>

#include <random>

#include "grammar/reference_recognizer.h"
#include "grammar/shared_vocab.h"
#include "grammar/test_util.h"
#include "grammar/testdata_json_gbnf.h"

namespace kvs::grammar {
namespace grammar_vocab_test {

class VocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabTest, JsonWalksDecodeToValidTextAndValidTextPasses) {
  auto tok_or = testing::LoadSharedTokenizer(GetParam());
  if (!tok_or.ok()) GTEST_SKIP() << tok_or.status().message();
  const tok::Tokenizer& tok = **tok_or;
  auto vocab_or = Vocabulary::FromTokenizer(tok);
  ASSERT_TRUE(vocab_or.ok()) << vocab_or.status().ToString();
  const auto vocab = *vocab_or;
  EXPECT_EQ(vocab->stop_ids(), tok.end_of_generation_ids());
  auto grammar = ParseGbnf(testing::kJsonObjectGbnf);
  ASSERT_TRUE(grammar.ok());
  const auto cg = testing::CompileOrDie(testing::kJsonObjectGbnf, vocab);
  ASSERT_NE(cg, nullptr);
  testing::ReferenceRecognizer ref(*grammar);
  std::mt19937_64 rng(1234);
  for (int w = 0; w < 6; ++w) {
    const testing::WalkResult r = testing::RandomWalk(cg, rng, /*budget=*/30);
    ASSERT_TRUE(r.finished) << r.text;
    EXPECT_TRUE(ref.Matches(r.text)) << r.text;
    // The tokenizer's own decoding of the ids is the text the masks allowed.
    tok::IncrementalDecoder dec(tok, /*skip_special=*/true, /*at_sequence_start=*/false);
    std::string decoded;
    for (int32_t id : r.tokens) decoded += dec.Add(id);
    decoded += dec.Flush();
    EXPECT_EQ(decoded, r.text);
  }
  // Valid JSON, tokenized the way the model would see it, passes the masks.
  std::vector<uint32_t> mask(vocab->mask_words());
  int checked = 0;
  for (int k = 0; k < 40; ++k) {
    const auto s = testing::SampleString(*grammar, rng, 300);
    if (!s) continue;
    // Encoded after a newline, as text inside a conversation: SentencePiece
    // adds its space prefix to the newline, not to the JSON.
    const std::vector<int32_t> all = tok.Encode("\n" + *s, /*add_special=*/false, /*parse_special=*/false);
    std::vector<int32_t> ids;
    std::string pieces;
    for (size_t k = all.size(); k-- > 0;) {
      pieces = tok.TokenPiece(all[k]) + pieces;
      ids.insert(ids.begin(), all[k]);
      if (pieces.size() >= s->size()) break;
    }
    if (pieces != *s) continue;  // a token spans the newline and the JSON
    ++checked;
    GrammarMatcher m(cg);
    for (int32_t id : ids) {
      ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
      ASSERT_TRUE(MaskTest(mask, id)) << "token " << id << " '" << tok.TokenPiece(id) << "' of " << *s;
      ASSERT_TRUE(m.AcceptToken(id).ok());
    }
    ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
    for (int32_t stop : tok.end_of_generation_ids()) EXPECT_TRUE(MaskTest(mask, stop));
  }
  EXPECT_GT(checked, 5);
}

TEST_P(VocabTest, SpecialTokensOnlyAsStops) {
  auto tok_or = testing::LoadSharedTokenizer(GetParam());
  if (!tok_or.ok()) GTEST_SKIP() << tok_or.status().message();
  const tok::Tokenizer& tok = **tok_or;
  const auto vocab = *Vocabulary::FromTokenizer(tok);
  const auto cg = testing::CompileOrDie("root ::= [^x]* \"x\"", vocab);
  ASSERT_NE(cg, nullptr);
  GrammarMatcher m(cg);
  std::vector<uint32_t> mask(vocab->mask_words());
  ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const bool special = tok.token_type(id) == tok::TokenType::kControl || id == tok.bos_id();
    if (special) {
      ASSERT_FALSE(MaskTest(mask, id)) << "special token " << id << " allowed";
    }
  }
  ASSERT_TRUE(m.AcceptBytes("abc x").ok());
  ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
  for (int32_t id = 0; id < vocab->size(); ++id) {
    ASSERT_EQ(MaskTest(mask, id), tok.IsEndOfGeneration(id)) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabTest, ::testing::ValuesIn(testing::SharedVocabNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(QwenSizedVocabulary, HasTheRightShape) {
  auto v = testing::QwenSizedVocabulary();
  if (!v.ok()) GTEST_SKIP() << v.status().message();
  EXPECT_EQ((*v)->size(), 151936);
  EXPECT_EQ((*v)->stop_ids().size(), 2u);
  auto ids = testing::TokenizeForQwenSized(**v, "{\"name\": \"Ada\", \"age\": 36}");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  std::string text;
  for (int32_t id : *ids) text += (*v)->token_bytes(id);
  EXPECT_EQ(text, "{\"name\": \"Ada\", \"age\": 36}");
}

}  // namespace grammar_vocab_test
}  // namespace kvs::grammar
