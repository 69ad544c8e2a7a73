// Constrained decoding and logit_bias through the engine: every sampled
// token comes from the grammar's mask, the output is a complete match, the
// grammar's stop token ends the sequence, mask failures end it with an error;
// logit_bias shifts the draw (OpenAI semantics).
#include <gtest/gtest.h>

#include <string>

#include "engine/engine_test_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace kvs::engine {
namespace {

using testing::Collected;
using testing::Drain;
using testing::MakeEngine;
using testing::MakePrompt;
using testing::RunToCompletion;

constexpr int32_t kVocab = 64;

// Token 0: stop; 1..: single characters of a small JSON alphabet, then
// multi-byte tokens that span several grammar terminals.
std::shared_ptr<const grammar::Vocabulary> TestVocabulary() {
  const std::string chars = "{}[]\":, 0123456789abcdefghijklmnopqrstuvwxyz-.";
  std::vector<std::string> bytes = {""};
  std::vector<grammar::Vocabulary::Kind> kinds = {grammar::Vocabulary::Kind::kStop};
  for (char c : chars) {
    bytes.push_back(std::string(1, c));
    kinds.push_back(grammar::Vocabulary::Kind::kText);
  }
  for (const char* t : {"{\"", "\":", "\": ", ", \"", "12", "ab", "true", "false", "null", "\"}"}) {
    bytes.push_back(t);
    kinds.push_back(grammar::Vocabulary::Kind::kText);
  }
  while (bytes.size() < static_cast<size_t>(kVocab)) {
    bytes.push_back("<unused" + std::to_string(bytes.size()) + ">");
    kinds.push_back(grammar::Vocabulary::Kind::kExcluded);
  }
  auto v = grammar::Vocabulary::FromTokens(std::move(bytes), std::move(kinds), kVocab);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return std::move(v).value();
}

std::shared_ptr<const grammar::CompiledGrammar> Compile(const std::string& gbnf) {
  auto g = grammar::CompiledGrammar::FromGbnf(gbnf, TestVocabulary());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

// A small JSON-ish grammar: an object with a key and a number or a word.
const char* kGrammar = R"(root ::= "{\"" key "\": " value "}"
key ::= [a-z] [a-z]?
value ::= "-"? [1-9] [0-9]? | "true" | "false" | "null" | "\"" [a-z]+ "\"")";

std::string Text(const grammar::Vocabulary& v, const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s += v.token_bytes(t);
  return s;
}

struct Case {
  int32_t engine_eos;  // -1: the grammar's stop token is not an engine EOS id
  float temperature;
};

class ConstrainedEngine : public ::testing::TestWithParam<Case> {};

TEST_P(ConstrainedEngine, EveryOutputIsACompleteMatch) {
  const Case c = GetParam();
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  opts.eos_token_id = c.engine_eos;
  EngineConfig config;
  config.max_context_length = 256;
  auto t = MakeEngine(opts, config);
  const auto g = Compile(kGrammar);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 24; ++i) {
    Request r;
    r.prompt_token_ids = MakePrompt(5 + i % 7, static_cast<uint64_t>(i), kVocab);
    r.sampling.temperature = c.temperature;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.sampling.max_tokens = 64;
    r.grammar = g;
    auto s = t.engine->Submit(std::move(r));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  RunToCompletion(*t.engine);
  int distinct = 0;
  std::string first;
  for (auto& s : streams) {
    const Collected out = Drain(*s);
    ASSERT_EQ(out.num_finals, 1);
    EXPECT_EQ(out.last.finish_reason, FinishReason::kStop) << out.last.error.ToString();
    EXPECT_EQ(out.last.stop_token_id, 0);
    // The output (without the stop token) is accepted by a fresh matcher and complete.
    grammar::GrammarMatcher m(g);
    for (int32_t tok : out.tokens) ASSERT_TRUE(m.AcceptToken(tok).ok()) << Text(g->vocabulary(), out.tokens);
    EXPECT_TRUE(m.CanEnd()) << Text(g->vocabulary(), out.tokens);
    const std::string text = Text(g->vocabulary(), out.tokens);
    EXPECT_EQ(text.substr(0, 2), "{\"");
    if (first.empty()) first = text;
    if (text != first) ++distinct;
  }
  if (c.temperature > 0) {
    EXPECT_GT(distinct, 0) << "sampling should vary across seeds";
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, ConstrainedEngine,
                         ::testing::Values(Case{0, 1.0f}, Case{-1, 1.0f}, Case{0, 0.0f}, Case{-1, 0.7f}));

TEST(ConstrainedEngine, MaxTokensCutsAnUnfinishedMatch) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  auto t = MakeEngine(opts, EngineConfig{});
  Request r;
  r.prompt_token_ids = {1, 2, 3};
  r.sampling.max_tokens = 3;
  r.grammar = Compile(R"(root ::= "{" [a-z]{10} "}")");
  auto s = t.engine->Submit(std::move(r));
  ASSERT_TRUE(s.ok());
  RunToCompletion(*t.engine);
  const Collected out = Drain(**s);
  EXPECT_EQ(out.last.finish_reason, FinishReason::kLength);
  ASSERT_EQ(out.tokens.size(), 3u);
  EXPECT_EQ(out.tokens[0], 1);  // "{" is token 1
}

// Near max_tokens the sampler steers to a valid end: an unbounded string
// value gets closed in time, so every reply is a complete match that ends
// with the stop token within max_tokens, whatever the (random) model prefers.
TEST(ConstrainedEngine, SteersToAValidEndNearMaxTokens) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  opts.eos_token_id = 0;
  auto t = MakeEngine(opts, EngineConfig{});
  // Shortest reply: {"a": ""} is 9 bytes, then the stop token.
  const auto g = Compile(R"(root ::= "{\"" [a-z]+ "\": \"" [a-z]* "\"}")");
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 16; ++i) {
    Request r;
    r.prompt_token_ids = MakePrompt(4 + i % 5, static_cast<uint64_t>(i), kVocab);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(100 + i);
    r.sampling.max_tokens = 12 + i % 4;
    r.grammar = g;
    auto s = t.engine->Submit(std::move(r));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  RunToCompletion(*t.engine);
  int lengthy = 0;
  for (auto& s : streams) {
    const Collected out = Drain(*s);
    ASSERT_EQ(out.num_finals, 1);
    EXPECT_EQ(out.last.finish_reason, FinishReason::kStop) << Text(g->vocabulary(), out.tokens);
    grammar::GrammarMatcher m(g);
    for (int32_t tok : out.tokens) ASSERT_TRUE(m.AcceptToken(tok).ok()) << Text(g->vocabulary(), out.tokens);
    EXPECT_TRUE(m.CanEnd()) << Text(g->vocabulary(), out.tokens);
    lengthy += Text(g->vocabulary(), out.tokens).size() > 12 ? 1 : 0;
  }
  EXPECT_GT(lengthy, 0) << "steering only near the end: replies use their budget";
}

// Far from max_tokens the draw is free, but one token may open an optional
// part whose rest alone outgrows the tokens left (a tool call's optional
// parameter with long closing tags). Such a draw is drawn again, so the
// reply still ends within max_tokens; with room enough the optional part
// is still taken.
TEST(ConstrainedEngine, AFreeDrawNeverPutsTheEndOutOfReach) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  opts.eos_token_id = 0;
  auto t = MakeEngine(opts, EngineConfig{});
  // Shortest: {"a":1} (7 bytes); the optional part adds 24 bytes at once.
  const auto g = Compile(R"(root ::= "{\"a\":" [0-9]+ ("," "\"bbbbbbbbbbbbbbbbbbbb\":" [0-9])? "}")");
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<int32_t> budgets;
  for (int i = 0; i < 48; ++i) {
    Request r;
    r.prompt_token_ids = MakePrompt(3 + i % 5, static_cast<uint64_t>(i), kVocab);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(7 + i);
    r.sampling.max_tokens = i < 32 ? 12 + i % 12 : 48;
    budgets.push_back(r.sampling.max_tokens);
    r.grammar = g;
    auto s = t.engine->Submit(std::move(r));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  RunToCompletion(*t.engine);
  int optional = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    const Collected out = Drain(*streams[i]);
    const std::string text = Text(g->vocabulary(), out.tokens);
    ASSERT_EQ(out.num_finals, 1);
    EXPECT_EQ(out.last.finish_reason, FinishReason::kStop) << "max_tokens " << budgets[i] << ": " << text;
    EXPECT_LE(static_cast<int32_t>(out.tokens.size()), budgets[i]);
    grammar::GrammarMatcher m(g);
    for (int32_t tok : out.tokens) ASSERT_TRUE(m.AcceptToken(tok).ok()) << text;
    EXPECT_TRUE(m.CanEnd()) << text;
    optional += text.find("bbb") != std::string::npos ? 1 : 0;
  }
  EXPECT_GT(optional, 0) << "the optional part is still written when it fits";
}

TEST(ConstrainedEngine, GrammarForAnotherVocabularyIsRefused) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab * 2;
  auto t = MakeEngine(opts, EngineConfig{});
  Request r;
  r.prompt_token_ids = {1, 2, 3};
  r.grammar = Compile(kGrammar);
  auto s = t.engine->Submit(std::move(r));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("vocabulary of 64 tokens"), std::string::npos) << s.status().ToString();
}

TEST(ConstrainedEngine, MaskFailureEndsTheRequestWithAnError) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  auto t = MakeEngine(opts, EngineConfig{});
  // No token spells "~", so only deeper nesting continues: past the
  // matcher's depth limit no token is allowed.
  grammar::CompileOptions co;
  co.pda.max_depth = 4;
  auto g = grammar::CompiledGrammar::FromGbnf(R"(root ::= "[" root "]" | "~")", TestVocabulary(), co);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt_token_ids = MakePrompt(4, static_cast<uint64_t>(i), kVocab);
    r.sampling.seed = static_cast<uint64_t>(i);
    r.sampling.max_tokens = 40;
    r.grammar = *g;
    streams.push_back(*t.engine->Submit(std::move(r)));
  }
  RunToCompletion(*t.engine);
  int errors = 0;
  for (auto& s : streams) {
    const Collected out = Drain(*s);
    ASSERT_EQ(out.num_finals, 1);
    if (out.last.finish_reason == FinishReason::kError) {
      ++errors;
      EXPECT_NE(out.last.error.message().find("constrained decoding"), std::string::npos) << out.last.error.ToString();
    }
  }
  EXPECT_EQ(errors, 8);
  EXPECT_EQ(t.engine->GetStats().num_running, 0);
}

TEST(LogitBias, ForcesAndBansTokens) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = kVocab;
  auto t = MakeEngine(opts, EngineConfig{});
  const auto run = [&](SamplingParams p) {
    Request r;
    r.prompt_token_ids = {4, 5, 6};
    p.max_tokens = 12;
    r.sampling = p;
    auto s = t.engine->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    RunToCompletion(*t.engine);
    return Drain(**s).tokens;
  };
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> free = run(greedy);
  ASSERT_EQ(free.size(), 12u);
  SamplingParams forced = greedy;
  forced.logit_bias = {{17, 100.0f}};
  EXPECT_EQ(run(forced), std::vector<int32_t>(12, 17));
  SamplingParams banned = greedy;
  banned.logit_bias = {{free[0], -100.0f}};
  banned.seed = 3;
  const std::vector<int32_t> out = run(banned);
  EXPECT_NE(out[0], free[0]);
  for (int32_t tok : out) EXPECT_NE(tok, free[0]);
  SamplingParams sampled;
  sampled.seed = 9;
  sampled.logit_bias = {{free[0], -100.0f}};
  for (int32_t tok : run(sampled)) EXPECT_NE(tok, free[0]);
}

TEST(LogitBias, InvalidEntriesAreRefused) {
  SamplingParams p;
  p.logit_bias = {{kVocab, 1.0f}};
  EXPECT_NE(p.Validate(kVocab).message().find("logit_bias token id 64"), std::string::npos);
  p.logit_bias = {{3, 101.0f}};
  EXPECT_NE(p.Validate(kVocab).message().find("[-100, 100]"), std::string::npos);
  p.logit_bias = {{3, -100.0f}, {4, 100.0f}};
  EXPECT_TRUE(p.Validate(kVocab).ok());
}

}  // namespace
}  // namespace kvs::engine
