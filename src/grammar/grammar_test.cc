// GBNF parsing, printing and matching semantics (byte vocabulary), and the
// compile-time checks (undefined rules, left recursion, limits).
#include <gtest/gtest.h>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/test_util.h"
#include "grammar/testdata_json_gbnf.h"
#include "grammar/utf8_ranges.h"
#include "base/utf8.h"

namespace kvs::grammar {
namespace grammar_test {

using testing::CompileError;
using testing::Matches;

TEST(Gbnf, ParsesAJsonObjectGrammar) {
  // A whole JSON grammar as users send it (comments, classes with escapes,
  // bounded repetition, mutual recursion).
  const char* kJson = testing::kJsonObjectGbnf;
  EXPECT_TRUE(Matches(kJson, R"({"a": [1, 2.5, -3e4, "x\n\u00e9"], "b": {"c": null}})"));
  EXPECT_TRUE(Matches(kJson, "{}"));
  EXPECT_TRUE(Matches(kJson, "{\n  \"k\": true\n}"));
  EXPECT_FALSE(Matches(kJson, "{"));
  EXPECT_FALSE(Matches(kJson, R"({"a" 1})"));
  EXPECT_FALSE(Matches(kJson, "[1]"));  // root is an object
  EXPECT_FALSE(Matches(kJson, "{\"a\": \"\x01\"}"));
}

TEST(Gbnf, LiteralsAndEscapes) {
  EXPECT_TRUE(Matches(R"(root ::= "a\"b\\c\n\t\x41\u00e9\U0001F600")", "a\"b\\c\n\tA\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches("root ::= \"h\xC3\xA9llo\"", "h\xC3\xA9llo"));  // raw UTF-8 in the text
  EXPECT_TRUE(Matches(R"(root ::= "")", ""));
  EXPECT_FALSE(Matches(R"(root ::= "ab")", "a"));
  EXPECT_FALSE(Matches(R"(root ::= "ab")", "abc"));
}

TEST(Gbnf, CharacterClasses) {
  const char* g = R"(root ::= [a-c0-9_\-]+)";
  EXPECT_TRUE(Matches(g, "ab9_-c"));
  EXPECT_FALSE(Matches(g, "abd"));
  EXPECT_TRUE(Matches(R"(root ::= [^a-z]*)", "ABC \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(R"(root ::= [^a-z]*)", "AbC"));
  // Negated classes and '.' match whole characters, never stray bytes.
  EXPECT_FALSE(Matches(R"(root ::= [^a]*)", "\xC3"));
  EXPECT_FALSE(Matches(R"(root ::= .*)", "\xFF"));
  EXPECT_FALSE(Matches(R"(root ::= .*)", "\xED\xA0\x80"));  // a UTF-8 encoded surrogate
  EXPECT_TRUE(Matches(R"(root ::= .)", "\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_TRUE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\xA9"));
  EXPECT_FALSE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\x9F"));
  EXPECT_TRUE(Matches(R"(root ::= [\]\[]{2})", "]["));
  EXPECT_TRUE(Matches(R"(root ::= [-a])", "-"));
}

TEST(Gbnf, Repetition) {
  const char* g = R"(root ::= "a"{2,4} "b"{3} "c"{2,} "d"{,1})";
  EXPECT_TRUE(Matches(g, "aabbbcc"));
  EXPECT_TRUE(Matches(g, "aaaabbbcccccd"));
  EXPECT_FALSE(Matches(g, "abbbcc"));
  EXPECT_FALSE(Matches(g, "aaaaabbbcc"));
  EXPECT_FALSE(Matches(g, "aabbbc"));
  EXPECT_FALSE(Matches(g, "aabbbccdd"));
  EXPECT_TRUE(Matches(R"(root ::= ("x" "y"?)* "z"+)", "xxyxz"));
  EXPECT_TRUE(Matches(R"(root ::= ("ab" | "a")* "b")", "abab"));  // needs backtracking-free ambiguity
}

TEST(Gbnf, RulesRecursionAndContinuationLines) {
  const char* g = R"gbnf(
# balanced parentheses
root ::= item*
item ::= "(" root ")"
       | "x"
)gbnf";
  EXPECT_TRUE(Matches(g, "(x(x))x()"));
  EXPECT_FALSE(Matches(g, "(x"));
  EXPECT_FALSE(Matches(g, "x)"));
  // Nullable rules and right recursion.
  const char* g2 = R"(root ::= a b "!"
a ::= "a" a | ""
b ::= "b"?)";
  EXPECT_TRUE(Matches(g2, "!"));
  EXPECT_TRUE(Matches(g2, "aaab!"));
  EXPECT_FALSE(Matches(g2, "ba!"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(CompileError("root ::= foo").find("'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(CompileError("rot ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(CompileError("root ::= \"a").find("unterminated literal"), std::string::npos);
  EXPECT_NE(CompileError("root ::= [a-").find("line 1"), std::string::npos);
  EXPECT_NE(CompileError("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(CompileError("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(CompileError("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(CompileError("root ::= \"a\"{3,1}").find("below its minimum"), std::string::npos);
  EXPECT_NE(CompileError("root ::= \"a\"{100000}").find("limit"), std::string::npos);
  EXPECT_NE(CompileError("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(CompileError("root ::= <[42]>").find("token references"), std::string::npos);
  const std::string left = CompileError("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]");
  EXPECT_NE(left.find("left recursion"), std::string::npos) << left;
  EXPECT_NE(left.find("expr -> expr"), std::string::npos) << left;
  // Hidden left recursion through a nullable prefix.
  const std::string hidden = CompileError("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= \"\" | \"z\"");
  EXPECT_NE(hidden.find("left recursion"), std::string::npos) << hidden;
  const std::string never = CompileError("root ::= \"a\" loop\nloop ::= \"x\" loop");
  EXPECT_NE(never.find("'loop' can never finish"), std::string::npos) << never;
  EXPECT_NE(CompileError("root ::= []").find("matches nothing"), std::string::npos);
  std::string deep = "root ::= ";
  for (int i = 0; i < 300; ++i) deep += "(";
  EXPECT_NE(CompileError(deep).find("nested too deeply"), std::string::npos);
  // Expansion limits.
  EXPECT_NE(CompileError("root ::= (((\"abcdefgh\"{1000}){1000}){1000})").find("too large"), std::string::npos);
}

TEST(Gbnf, PrintThenParseGivesTheSameGrammar) {
  const char* src = R"(root ::= (item ("," item)*)? tail
item ::= [a-z\u00e9\U0001F600] "q\"\\\n" | "" | other{2,5} | other{3,}
other ::= [^\]\-\[\\]? "x"* "y"+
tail ::= "end"{2}
)";
  auto g = ParseGbnf(src);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string printed = g->ToGbnf();
  auto g2 = ParseGbnf(printed);
  ASSERT_TRUE(g2.ok()) << g2.status().ToString() << "\n" << printed;
  EXPECT_EQ(printed, g2->ToGbnf());
  ASSERT_EQ(g->rules().size(), g2->rules().size());
  // Rules mentioned before they are defined print in a stable order too.
  auto j = ParseGbnf(testing::kJsonObjectGbnf);
  ASSERT_TRUE(j.ok());
  auto j2 = ParseGbnf(j->ToGbnf());
  ASSERT_TRUE(j2.ok());
  EXPECT_EQ(j->ToGbnf(), j2->ToGbnf());
}

TEST(Utf8Ranges, CoverExactlyTheRange) {
  // Every code point in a set of tricky ranges is matched by exactly one
  // sequence, and nothing outside is matched.
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0, 0x10FFFF}, {0x7F, 0x80}, {0x7FF, 0x800}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}, {0x41, 0x41},
      {0x3B1, 0x4FF}, {0xFFF, 0x1001}, {0x1F600, 0x1F64F}};
  for (auto [lo, hi] : ranges) {
    std::vector<ByteSequence> seqs;
    if (lo <= 0xD7FF && hi >= 0xE000) {
      Utf8RangeSequences(lo, 0xD7FF, &seqs);
      Utf8RangeSequences(0xE000, hi, &seqs);
    } else {
      Utf8RangeSequences(lo, hi, &seqs);
    }
    auto count = [&](const std::string& enc) {
      int n = 0;
      for (const ByteSequence& s : seqs) {
        if (s.size() != enc.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < s.size(); ++i) {
          const auto b = static_cast<uint8_t>(enc[i]);
          ok &= s[i].lo <= b && b <= s[i].hi;
        }
        n += ok;
      }
      return n;
    };
    const uint32_t step = hi - lo > 70000 ? 7 : 1;
    for (uint32_t cp = lo > 8 ? lo - 8 : 0; cp <= std::min<uint32_t>(hi + 8, 0x10FFFF); cp += step) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string enc;
      AppendUtf8(cp, &enc);
      EXPECT_EQ(count(enc), (cp >= lo && cp <= hi) ? 1 : 0) << std::hex << cp << " in " << lo << ".." << hi;
    }
  }
}

TEST(Automaton, InlinesSmallRulesAndComputesMinBytes) {
  auto g = ParseGbnf("root ::= \"{\" ws \"}\"\nws ::= [ \\t]*");
  ASSERT_TRUE(g.ok());
  auto a = BuildAutomaton(*g);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->call_edges.empty());  // ws was inlined
  EXPECT_EQ(a->rule_min_bytes[a->root_rule], 2);
  auto g2 = ParseGbnf("root ::= list\nlist ::= \"[\" (\"x\" | list) \"]\"");
  ASSERT_TRUE(g2.ok());
  auto a2 = BuildAutomaton(*g2);
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  EXPECT_EQ(a2->rule_min_bytes[a2->root_rule], 3);
}

TEST(Matcher, MasksRollbackAndTermination) {
  auto vocab = testing::VocabularyOf({"a", "b", "ab", "abc", "c", "ba"});
  auto g = testing::CompileOrDie(R"(root ::= "ab"+ "c")", vocab);
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(vocab->mask_words());
  auto allowed = [&]() {
    std::string s;
    EXPECT_TRUE(m.FillNextTokenMask(mask).ok());
    for (int32_t id = 0; id < vocab->size(); ++id) {
      if (MaskTest(mask, id)) s += "[" + vocab->token_bytes(id) + "]";
    }
    return s;
  };
  EXPECT_EQ(allowed(), "[a][ab][abc]");
  ASSERT_TRUE(m.AcceptToken(2).ok());  // "ab"
  EXPECT_EQ(allowed(), "[a][ab][abc][c]");
  EXPECT_FALSE(m.AcceptToken(1).ok());  // "b"
  ASSERT_TRUE(m.AcceptToken(0).ok());   // "a"
  EXPECT_EQ(allowed(), "[b][ba]");
  ASSERT_TRUE(m.Rollback(1).ok());
  ASSERT_TRUE(m.AcceptToken(3).ok());  // "abc"
  EXPECT_TRUE(m.CanEnd());
  EXPECT_EQ(allowed(), "[</s>]");
  GrammarMatcher fork = m.Clone();
  ASSERT_TRUE(m.AcceptToken(6).ok());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.FillNextTokenMask(mask).ok());
  EXPECT_FALSE(fork.IsTerminated());
  EXPECT_TRUE(fork.IsTokenAllowed(6));
  EXPECT_EQ(fork.MinCompletionBytes(), 0);
}

}  // namespace grammar_test
}  // namespace kvs::grammar

namespace kvs::grammar {
namespace grammar_test {

TEST(Matcher, AmbiguityAndWorkAreBounded) {
  // Each "a" opens more pending parses; the stack sets grow until the limit.
  auto g = testing::CompileOrDie("root ::= s\ns ::= \"a\" s s | \"b\" | \"\"", testing::ByteVocabulary());
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(g->vocabulary().mask_words());
  Status st;
  int accepted = 0;
  for (; accepted < 400; ++accepted) {
    st = m.FillNextTokenMask(mask);
    if (!st.ok()) break;
    st = m.AcceptToken('a');
    if (!st.ok()) break;
  }
  // Either everything fits the limits or the failure is a clean, named one.
  if (!st.ok()) {
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
    EXPECT_NE(st.message().find("ambiguous"), std::string::npos) << st.ToString();
  }
  // A tiny work budget turns an expensive mask into the same clean error.
  CompileOptions tight;
  tight.pda.max_work = 50;
  auto g2 = CompiledGrammar::FromGbnf("root ::= [a-z]+ \"!\"", testing::ByteVocabulary(), tight);
  ASSERT_TRUE(g2.ok());
  GrammarMatcher m2(*g2);
  const Status st2 = m2.FillNextTokenMask(mask);
  EXPECT_EQ(st2.code(), StatusCode::kResourceExhausted) << st2.ToString();
}

}  // namespace grammar_test
}  // namespace kvs::grammar
