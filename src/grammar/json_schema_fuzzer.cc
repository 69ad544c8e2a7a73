// libFuzzer target: JSON Schema text. The converter must refuse with a
// message or produce a grammar that parses; when it also compiles, a short
// walk through the masks must be consistent, and a finished walk must be
// JSON that parses.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/test_util.h"
#include "grammar/vocabulary.h"

namespace {

using namespace kvs::grammar;

// Bytes, a few multi-byte tokens and a stop token.
std::shared_ptr<const Vocabulary> FuzzVocabulary() {
  static const auto v = [] {
    std::vector<std::string> tokens = kvs::grammar::testing::ByteTokens();
    for (const char* t : {"{\"", "\": ", "\", \"", "12", "true", "null", "\"}"}) tokens.push_back(t);
    return kvs::grammar::testing::VocabularyOf(tokens);
  }();
  return v;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "json_schema_fuzzer: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  JsonSchemaOptions opts;
  opts.max_rules = 500;
  opts.max_items = 20;
  opts.max_length = 20;
  auto gbnf = [&]() -> kvs::StatusOr<std::string> {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return kvs::InvalidArgument("not JSON");
    return JsonSchemaToGbnf(schema, opts);
  }();
  if (!gbnf.ok()) return 0;
  GrammarLimits limits;
  limits.max_nfa_states = 50000;
  limits.max_dfa_states = 5000;
  limits.max_compile_work = 2'000'000;
  auto g = ParseGbnf(*gbnf, limits);
  if (!g.ok()) {
    Check(g.status().code() == kvs::StatusCode::kResourceExhausted ||
              g.status().message().find("limit") != std::string::npos,
          "the converter produced GBNF that does not parse");
    return 0;
  }
  CompileOptions co;
  co.limits = limits;
  co.pda.max_work = 2'000'000;
  auto cg = CompiledGrammar::Compile(*g, FuzzVocabulary(), co);
  if (!cg.ok()) return 0;
  GrammarMatcher m(*cg);
  std::vector<uint32_t> mask(FuzzVocabulary()->mask_words());
  std::string out;
  for (size_t step = 0; step < 64; ++step) {
    if (!m.FillNextTokenMask(mask).ok()) return 0;
    // Prefer finishing: the stop token when allowed, else the input picks.
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < FuzzVocabulary()->size(); ++id) {
      if (MaskTest(mask, id)) allowed.push_back(id);
    }
    Check(!allowed.empty(), "empty mask without an error");
    const int32_t stop = FuzzVocabulary()->stop_ids()[0];
    const int32_t pick = MaskTest(mask, stop) ? stop : allowed[data[step % size] % allowed.size()];
    const auto st = m.AcceptToken(pick);
    if (!st.ok()) {
      Check(st.code() == kvs::StatusCode::kResourceExhausted, "an allowed token was rejected");
      return 0;
    }
    if (m.IsTerminated()) {
      Check(!nlohmann::json::parse(out, nullptr, false).is_discarded(), "a finished document is not JSON");
      return 0;
    }
    out += FuzzVocabulary()->token_bytes(pick);
  }
  return 0;
}
