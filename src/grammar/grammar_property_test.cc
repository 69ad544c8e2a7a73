// Property tests of the matcher against the reference recognizer, on random
// grammars and a vocabulary with multi-character and partial-UTF-8 tokens:
//  - every string the grammar derives can be produced token by token
//    through the masks (any segmentation into tokens), ending with a stop;
//  - at every step of a random walk through the masks, a token is allowed
//    exactly when text + token is a prefix of some string of the language,
//    and the stop token exactly when the text is in the language.
#include <gtest/gtest.h>

#include <random>

#include "grammar/reference_recognizer.h"
#include "grammar/test_util.h"
#include "base/utf8.h"

namespace kvs::grammar {
namespace grammar_property_test {

// All single bytes, the alphabet's characters and their partial encodings,
// pairs, and some longer strings.
std::shared_ptr<const Vocabulary> MixedVocabulary() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<uint32_t> alphabet = {'a', 'b', 'c', 0xE9, 0x20AC, 0x1F600};
  std::vector<std::string> chars;
  for (uint32_t cp : alphabet) {
    std::string s;
    AppendUtf8(cp, &s);
    chars.push_back(s);
    if (s.size() > 1) {
      toks.push_back(s);
      for (size_t k = 2; k < s.size(); ++k) toks.push_back(s.substr(0, k));  // a cut character
      toks.push_back(s.substr(1));                                           // its tail
    }
  }
  for (const auto& x : chars) {
    for (const auto& y : chars) toks.push_back(x + y);
  }
  for (const char* s : {"abc", "aaaa", "cab", "ba", "zz", "a\xE2\x82", "\xAC" "b"}) toks.push_back(s);
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  return testing::VocabularyOf(toks);
}

// Splits text into random vocabulary tokens (single bytes always exist).
std::vector<int32_t> RandomSegmentation(const Vocabulary& v, const std::string& text, std::mt19937_64& rng) {
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    std::vector<int32_t> cands;
    for (int32_t id = 0; id < v.num_tokens(); ++id) {
      if (v.kind(id) != Vocabulary::Kind::kText) continue;
      const std::string& t = v.token_bytes(id);
      if (text.compare(pos, t.size(), t) == 0) cands.push_back(id);
    }
    const int32_t id = cands[rng() % cands.size()];
    out.push_back(id);
    pos += v.token_bytes(id).size();
  }
  return out;
}

TEST(GrammarProperty, RandomGrammarsAgreeWithTheReference) {
  const auto vocab = MixedVocabulary();
  const int32_t stop = vocab->stop_ids()[0];
  std::mt19937_64 rng(20240601);
  int compiled = 0, strings = 0, steps = 0;
  std::vector<uint32_t> mask(vocab->mask_words());
  for (int trial = 0; trial < 300 && compiled < 40; ++trial) {
    const Grammar g = testing::RandomGrammar(rng, 1 + static_cast<int32_t>(rng() % 4));
    auto compiled_or = CompiledGrammar::Compile(g, vocab);
    if (!compiled_or.ok()) continue;  // left recursion, a rule that never finishes: not this test's subject
    ++compiled;
    const auto cg = *compiled_or;
    testing::ReferenceRecognizer ref(g);
    SCOPED_TRACE(g.ToGbnf());

    // 1. Derived strings go through the masks.
    for (int k = 0; k < 15; ++k) {
      const auto s = testing::SampleString(g, rng);
      if (!s) continue;
      ++strings;
      ASSERT_TRUE(ref.Matches(*s)) << "reference rejects a derived string '" << *s << "'";
      GrammarMatcher m(cg);
      for (int32_t id : RandomSegmentation(*vocab, *s, rng)) {
        ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
        ASSERT_TRUE(MaskTest(mask, id)) << "token '" << vocab->token_bytes(id) << "' of '" << *s << "' masked out";
        ASSERT_TRUE(m.AcceptToken(id).ok());
      }
      ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
      ASSERT_TRUE(MaskTest(mask, stop)) << "stop not allowed after '" << *s << "'";
    }

    // 2. Random walks: the mask is exactly the viable continuations.
    for (int w = 0; w < 4; ++w) {
      GrammarMatcher m(cg);
      std::string text;
      for (int step = 0; step < 12; ++step) {
        ASSERT_TRUE(m.FillNextTokenMask(mask).ok()) << "after '" << text << "'";
        ++steps;
        ASSERT_EQ(MaskTest(mask, stop), ref.Matches(text)) << "stop after '" << text << "'";
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->size(); ++id) {
          if (MaskTest(mask, id) && id != stop) allowed.push_back(id);
        }
        // Check the multi-byte tokens and a sample of the rest.
        for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
          if (id == stop || (vocab->token_bytes(id).size() == 1 && rng() % 8 != 0)) continue;
          ASSERT_EQ(MaskTest(mask, id), ref.IsViablePrefix(text + vocab->token_bytes(id)))
              << "token '" << vocab->token_bytes(id) << "' after '" << text << "'";
        }
        for (int32_t id : allowed) {
          if (vocab->token_bytes(id).size() == 1) {
            ASSERT_TRUE(ref.IsViablePrefix(text + vocab->token_bytes(id)));
          }
        }
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.AcceptToken(pick).ok());
        text += vocab->token_bytes(pick);
      }
    }
  }
  EXPECT_GE(compiled, 30);
  EXPECT_GE(strings, 200);
  EXPECT_GE(steps, 400);
}

// Hand-written grammars with ambiguity, nullable rules and deep recursion:
// the same two properties, plus masks match token-by-token checks.
TEST(GrammarProperty, AmbiguousAndRecursiveGrammars) {
  const auto vocab = MixedVocabulary();
  const int32_t stop = vocab->stop_ids()[0];
  const std::vector<std::string> grammars = {
      "root ::= x*\nx ::= \"a\" | \"a\" \"b\" | y\ny ::= \"ab\" | \"b\"",
      "root ::= (a | b)+ \"c\"?\na ::= \"a\" a?\nb ::= \"b\"* \"a\"",
      "root ::= \"(\" root \")\" root | \"\"",
      "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s | \"\"",
      "root ::= n (\"+\" n)*\nn ::= [0-9]+ | \"(\" root \")\"",
      "root ::= ([a-c\\u00e9] | \"\\u20ac\" \"\\U0001F600\"?){1,6} [^a]",
      "root ::= e? e? e? \"a\"\ne ::= \"\" | \"a\"",
  };
  std::mt19937_64 rng(7);
  std::vector<uint32_t> mask(vocab->mask_words());
  for (const std::string& src : grammars) {
    SCOPED_TRACE(src);
    auto g = ParseGbnf(src);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const auto cg = testing::CompileOrDie(src, vocab);
    ASSERT_NE(cg, nullptr);
    testing::ReferenceRecognizer ref(*g);
    for (int k = 0; k < 20; ++k) {
      const auto s = testing::SampleString(*g, rng);
      if (!s) continue;
      GrammarMatcher m(cg);
      for (int32_t id : RandomSegmentation(*vocab, *s, rng)) {
        ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
        ASSERT_TRUE(MaskTest(mask, id)) << "in '" << *s << "'";
        ASSERT_TRUE(m.AcceptToken(id).ok());
      }
      ASSERT_TRUE(m.CanEnd()) << *s;
    }
    for (int w = 0; w < 5; ++w) {
      GrammarMatcher m(cg);
      std::string text;
      for (int step = 0; step < 15; ++step) {
        ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
        ASSERT_EQ(MaskTest(mask, stop), ref.Matches(text)) << text;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
          if (id == stop) continue;
          const bool in_mask = MaskTest(mask, id);
          ASSERT_EQ(in_mask, m.IsTokenAllowed(id)) << "token '" << vocab->token_bytes(id) << "' after '" << text << "'";
          ASSERT_EQ(in_mask, ref.IsViablePrefix(text + vocab->token_bytes(id)))
              << "token '" << vocab->token_bytes(id) << "' after '" << text << "'";
          if (in_mask) allowed.push_back(id);
        }
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.AcceptToken(pick).ok());
        text += vocab->token_bytes(pick);
      }
    }
  }
}

TEST(GrammarProperty, DepthLimitIsEnforcedConsistently) {
  const auto vocab = MixedVocabulary();
  CompileOptions opts;
  opts.pda.max_depth = 12;
  auto cg = CompiledGrammar::FromGbnf("root ::= \"a\" root \"b\" | \"c\"", vocab, opts);
  ASSERT_TRUE(cg.ok());
  GrammarMatcher m(*cg);
  std::vector<uint32_t> mask(vocab->mask_words());
  int32_t a = -1, c = -1;
  for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
    if (vocab->token_bytes(id) == "a") a = id;
    if (vocab->token_bytes(id) == "c") c = id;
  }
  int depth = 0;
  while (true) {
    ASSERT_TRUE(m.FillNextTokenMask(mask).ok());
    ASSERT_EQ(MaskTest(mask, a), m.IsTokenAllowed(a));
    if (!MaskTest(mask, a)) break;
    ASSERT_TRUE(m.AcceptToken(a).ok());
    ++depth;
    ASSERT_LT(depth, 100);
  }
  EXPECT_GT(depth, 3);
  EXPECT_TRUE(MaskTest(mask, c));  // the way out stays open
  ASSERT_TRUE(m.AcceptToken(c).ok());
}

}  // namespace grammar_property_test
}  // namespace kvs::grammar
