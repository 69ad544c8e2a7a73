// libFuzzer target: GBNF text. ParseGbnf must refuse with a message or give
// a grammar that prints and re-parses to the same text; a grammar that
// compiles must drive a matcher whose masks and accepts agree (every token
// in the mask is accepted, IsTokenAllowed matches the mask), within limits
// small enough that no input runs long.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/test_util.h"
#include "grammar/vocabulary.h"

namespace {

using namespace kvs::grammar;

// Bytes, a few multi-byte tokens and a stop token.
std::shared_ptr<const Vocabulary> FuzzVocabulary() {
  static const auto v = [] {
    std::vector<std::string> tokens = kvs::grammar::testing::ByteTokens();
    for (const char* t : {"ab", "abc", "\xC3\xA9", "\xC3", "{\"", "\": ", "12", "true", " x"}) tokens.push_back(t);
    return kvs::grammar::testing::VocabularyOf(tokens);
  }();
  return v;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "gbnf_fuzzer: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  GrammarLimits limits;
  limits.max_text_bytes = 1 << 14;
  limits.max_repeat = 64;
  limits.max_nfa_states = 20000;
  limits.max_dfa_states = 2000;
  limits.max_compile_work = 1'000'000;
  auto g = ParseGbnf(text, limits);
  if (!g.ok()) return 0;
  const std::string printed = g->ToGbnf();
  auto g2 = ParseGbnf(printed);
  Check(g2.ok(), "printed grammar does not parse");
  Check(g2->ToGbnf() == printed, "print -> parse -> print changed the text");
  CompileOptions opts;
  opts.limits = limits;
  opts.pda.max_work = 2'000'000;
  auto cg = CompiledGrammar::Compile(*g, FuzzVocabulary(), opts);
  if (!cg.ok()) return 0;
  GrammarMatcher m(*cg);
  std::vector<uint32_t> mask(FuzzVocabulary()->mask_words());
  // Walk: the input's bytes choose among the allowed tokens.
  for (size_t step = 0; step < 24; ++step) {
    if (!m.FillNextTokenMask(mask).ok()) return 0;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < FuzzVocabulary()->size(); ++id) {
      if (MaskTest(mask, id)) allowed.push_back(id);
    }
    Check(!allowed.empty(), "empty mask without an error");
    for (int32_t id = 0; id < FuzzVocabulary()->size(); id += 37) {
      const bool a = m.IsTokenAllowed(id);
      Check(a == MaskTest(mask, id) || m.last_walk_hit_limit(), "IsTokenAllowed disagrees with the mask");
    }
    const int32_t pick = allowed[data[step % size] % allowed.size()];
    const auto st = m.AcceptToken(pick);
    if (!st.ok()) {
      Check(st.code() == kvs::StatusCode::kResourceExhausted, "an allowed token was rejected");
      return 0;
    }
    if (m.IsTerminated()) return 0;
  }
  return 0;
}
