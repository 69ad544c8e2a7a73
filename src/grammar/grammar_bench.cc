// Token-mask cost on a Qwen-sized vocabulary (151,936 ids, synthesized from
// ../shared/vocab: see shared_vocab.h), per generated token, for JSON
// constraints. One thread.
//   build/release/src/grammar/grammar_bench [--benchmark_filter=...]
// *_Warm: the grammar's per-state token caches are already filled (any
// request after the first with the same constraint, or after
// PrecomputeAll); the time is FillNextTokenMask + AcceptToken per token.
// WarmMaxToken: the slowest single FillNextTokenMask of the document.
// *_Cold: compile + first use, i.e. what the first request with a new
// constraint pays over its whole output.
// Precompute: CompiledGrammar::PrecomputeAll for the whole grammar.
// Constraints: json_schema (the document's schema), json_object
// (response_format json_object) and a JSON-object GBNF grammar (testdata_json_gbnf.h).
#include <benchmark/benchmark.h>

#include <ctime>
#include <cstdio>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
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

// The schema the document follows (what a client's response_format sends).
const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "email": {"type": "string", "format": "email"}, "active": {"type": "boolean"},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
    "zip": {"type": "string"}}, "required": ["street", "city", "zip"], "additionalProperties": false},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
  "scores": {"type": "array", "items": {"type": "number"}},
  "summary": {"type": "string"},
  "children": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
    "born": {"type": "integer"}}, "required": ["name", "born"], "additionalProperties": false}}},
  "required": ["name", "age", "email", "active", "address", "tags", "scores", "summary", "children"],
  "additionalProperties": false})";

enum class Kind { kJsonGbnf, kJsonObject, kJsonSchema };

StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Fixture& f, Kind kind) {
  switch (kind) {
    case Kind::kJsonGbnf: return CompiledGrammar::FromGbnf(testing::kJsonObjectGbnf, f.vocab);
    case Kind::kJsonObject: return CompiledGrammar::Compile(JsonObjectGrammar(), f.vocab);
    case Kind::kJsonSchema: {
      KVS_ASSIGN_OR_RETURN(Grammar g, JsonSchemaToGrammar(std::string_view(kSchema)));
      return CompiledGrammar::Compile(g, f.vocab);
    }
  }
  return Internal("unknown kind");
}

// The fixture's grammar of `kind`, compiled and warmed by one run of the
// document (*mask sized for it); null (the benchmark skipped with the
// reason) when the fixture, the compile or the document fails.
std::shared_ptr<const CompiledGrammar> WarmGrammar(benchmark::State& state, const Fixture& f, Kind kind,
                                                   std::vector<uint32_t>* mask) {
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return nullptr;
  }
  auto g = Compile(f, kind);
  if (!g.ok()) {
    state.SkipWithError(g.status().ToString().c_str());
    return nullptr;
  }
  mask->assign(f.vocab->mask_words(), 0);
  if (!RunDocument(*g, f.tokens, *mask)) {
    state.SkipWithError("document rejected");
    return nullptr;
  }
  return *g;
}

void BM_Warm(benchmark::State& state, Kind kind) {
  const Fixture& f = GetFixture();
  std::vector<uint32_t> mask;
  const std::shared_ptr<const CompiledGrammar> g = WarmGrammar(state, f, kind, &mask);
  if (!g) return;
  for (auto _ : state) benchmark::DoNotOptimize(RunDocument(g, f.tokens, mask));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.tokens.size()));
  state.counters["us_per_token"] = benchmark::Counter(
      static_cast<double>(f.tokens.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  state.counters["tokens"] = static_cast<double>(f.tokens.size());
}

// CPU time of this thread (the shared machine's load does not count).
double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The worst single token of the document (warm, thread CPU time), the tail
// that matters for a decode step's latency.
void BM_WarmMaxToken(benchmark::State& state, Kind kind) {
  const Fixture& f = GetFixture();
  std::vector<uint32_t> mask;
  const std::shared_ptr<const CompiledGrammar> g = WarmGrammar(state, f, kind, &mask);
  if (!g) return;
  double worst_us = 0;
  for (auto _ : state) {
    GrammarMatcher m(g);
    for (int32_t id : f.tokens) {
      const double t0 = ThreadCpuSeconds();
      benchmark::DoNotOptimize(m.FillNextTokenMask(mask));
      worst_us = std::max(worst_us, (ThreadCpuSeconds() - t0) * 1e6);
      (void)m.AcceptToken(id);
    }
  }
  state.counters["worst_mask_us"] = worst_us;
}

void BM_Cold(benchmark::State& state, Kind kind) {
  const Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  std::vector<uint32_t> mask(f.vocab->mask_words());
  for (auto _ : state) {
    auto g = Compile(f, kind);
    benchmark::DoNotOptimize(RunDocument(*g, f.tokens, mask));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.tokens.size()));
}

void BM_Precompute(benchmark::State& state, Kind kind) {
  const Fixture& f = GetFixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  for (auto _ : state) {
    auto g = Compile(f, kind);
    (*g)->PrecomputeAll();
    state.counters["states"] = (*g)->automaton().num_states();
  }
}

BENCHMARK_CAPTURE(BM_Warm, json_schema, Kind::kJsonSchema)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Warm, json_object, Kind::kJsonObject)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Warm, json_object_gbnf, Kind::kJsonGbnf)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_WarmMaxToken, json_schema, Kind::kJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_WarmMaxToken, json_object, Kind::kJsonObject)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Cold, json_schema, Kind::kJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_Cold, json_object, Kind::kJsonObject)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_Precompute, json_schema, Kind::kJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Precompute, json_object, Kind::kJsonObject)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace kvs::grammar

BENCHMARK_MAIN();
