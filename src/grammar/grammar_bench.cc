// Token-mask cost on a Qwen-sized vocabulary (151,936 ids, synthesized from
// ../shared/vocab: see shared_vocab.h), per generated token, for JSON
// constraints. One thread.
//   build/release/src/grammar/grammar_bench [--benchmark_filter=...]
// *_Warm: the grammar's per-state token caches are already filled (any
// request after the first with the same constraint, or after
// PrecomputeAll); the time is FillNextTokenMask + AcceptToken per token.
// *_Cold: compile + first use, i.e. what the first request with a new
// constraint pays over its whole output, divided per token.
// Precompute: CompiledGrammar::PrecomputeAll for the whole grammar.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/shared_vocab.h"
#include "grammar/testdata_json_gbnf.h"

namespace kvs::grammar {
namespace {

// A typical structured-output answer (~200 tokens).
const char* kDocument = R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "active": true,
 "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"},
 "tags": ["mathematician", "writer", "analyst"], "scores": [98.5, 87.25, 100],
 "summary": "Augusta Ada King, Countess of Lovelace, was an English mathematician and writer, chiefly known for her work on Charles Babbage's proposed mechanical general-purpose computer, the Analytical Engine.",
 "children": [{"name": "Byron", "born": 1836}, {"name": "Anne Isabella", "born": 1837}]})";

struct Fixture {
  std::shared_ptr<const Vocabulary> vocab;
  std::vector<int32_t> tokens;
  std::string error;
};

const Fixture& GetFixture() {
  static const Fixture f = [] {
    Fixture x;
    auto v = testing::QwenSizedVocabulary();
    if (!v.ok()) {
      x.error = v.status().message();
      return x;
    }
    x.vocab = *v;
    auto t = testing::TokenizeForQwenSized(*x.vocab, kDocument);
    if (!t.ok()) {
      x.error = t.status().message();
      return x;
    }
    x.tokens = *t;
    return x;
  }();
  return f;
}

// Runs the document through a matcher; returns false on a rejected token.
bool RunDocument(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& tokens,
                 std::vector<uint32_t>& mask) {
  GrammarMatcher m(g);
  for (int32_t id : tokens) {
    if (!m.FillNextTokenMask(mask).ok() || !MaskTest(mask, id) || !m.AcceptToken(id).ok()) return false;
  }
  return m.FillNextTokenMask(mask).ok() && m.CanEnd();
}

StatusOr<std::shared_ptr<const CompiledGrammar>> CompileJson(const Fixture& f) {
  return CompiledGrammar::FromGbnf(testing::kLlamaCppJsonGbnf, f.vocab);
}

void BM_JsonGbnf_Warm(benchmark::State& state) {
  const Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  auto g = CompileJson(f);
  if (!g.ok()) return state.SkipWithError(g.status().ToString().c_str());
  std::vector<uint32_t> mask(f.vocab->mask_words());
  if (!RunDocument(*g, f.tokens, mask)) return state.SkipWithError("document rejected");
  for (auto _ : state) benchmark::DoNotOptimize(RunDocument(*g, f.tokens, mask));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.tokens.size()));
  state.counters["us_per_token"] = benchmark::Counter(
      static_cast<double>(f.tokens.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_JsonGbnf_Warm)->Unit(benchmark::kMillisecond);

void BM_JsonGbnf_Cold(benchmark::State& state) {
  const Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  std::vector<uint32_t> mask(f.vocab->mask_words());
  for (auto _ : state) {
    auto g = CompileJson(f);
    benchmark::DoNotOptimize(RunDocument(*g, f.tokens, mask));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.tokens.size()));
}
BENCHMARK(BM_JsonGbnf_Cold)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_JsonGbnf_Precompute(benchmark::State& state) {
  const Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  for (auto _ : state) {
    auto g = CompileJson(f);
    (*g)->PrecomputeAll();
    state.counters["states"] = (*g)->automaton().num_states();
  }
}
BENCHMARK(BM_JsonGbnf_Precompute)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace kvs::grammar

BENCHMARK_MAIN();
