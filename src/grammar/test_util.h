// Test helpers for the grammar module: small synthetic vocabularies, whole
// string matching, vocabularies from ../shared, and random token walks.
// Test-only (kvs_grammar_testlib); never linked into kvserve.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace kvs::grammar::testing {

// 256 one-byte tokens (id = byte) and a stop token (id 256).
std::shared_ptr<const Vocabulary> ByteVocabulary();
inline constexpr int32_t kByteStop = 256;
// The 256 one-byte token texts (id = byte), to extend with longer tokens.
std::vector<std::string> ByteTokens();

// Tokens from a list of byte strings plus a stop token appended at the end.
std::shared_ptr<const Vocabulary> VocabularyOf(const std::vector<std::string>& tokens);

// Whether the grammar matches `text` exactly (byte vocabulary). Aborts the
// test (ADD_FAILURE + false) if the grammar does not compile.
bool Matches(std::string_view gbnf, std::string_view text);
// The compile error message, or "" when it compiles.
std::string CompileError(std::string_view gbnf);

std::shared_ptr<const CompiledGrammar> CompileOrDie(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab);

// A random token walk through the masks: at each step a random allowed
// token; after `budget` tokens it steers to the shortest completion (among
// the allowed one-byte tokens and a sample of the others). Returns the text
// and checks (gtest assertions) that every step was consistent: the sampled
// token is accepted, the walk ends with a stop token.
struct WalkResult {
  std::string text;
  std::vector<int32_t> tokens;
  bool finished = false;  // ended with a stop token
};
WalkResult RandomWalk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, int32_t budget,
                      int32_t max_steps = 4000);

// The ajv oracle (tests/oracles/validate_json.mjs): why it cannot run here
// ("" when it can), and a run over jobs [{"schema", "documents"}] returning
// its JSON output (per job {"compiled", "results": [null | error]}).
std::string AjvMissing();
nlohmann::ordered_json RunAjv(const nlohmann::ordered_json& jobs);

}  // namespace kvs::grammar::testing
