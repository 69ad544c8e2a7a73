// Structured output and logit biasing, as clients ask for them: OpenAI's
// response_format ({"type": "text" | "json_object" | "json_schema"}) and
// logit_bias, and vLLM's guided_json / guided_regex / guided_choice /
// guided_grammar (and the newer structured_outputs {json, regex, choice,
// grammar}). Each constraint is converted here, where the request enters,
// to a grammar (src/grammar); a construct the converters cannot guarantee
// is a 400 naming it and where it is. The service compiles the grammar for
// the model's vocabulary and the engine masks every sampled token with it.
//
// At most one constraint per request (400 otherwise). logit_bias keys are
// token ids as strings ("50256"), values numbers in [-100, 100].
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/error.h"
#include "api/request_fields.h"
#include "grammar/grammar.h"

namespace kvs::api {

// A request's output constraint (ParsedRequest::constraint, ::constraint_param).
struct OutputConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;  // nullptr: free text
  std::string param;  // the field it came from ("response_format", "guided_regex", ...)
};

// Fills *out from the body's response_format, guided_* or
// structured_outputs fields (left empty for free text).
std::optional<ApiError> ParseConstraint(const Json& body, OutputConstraint* out);

// The body's logit_bias as (token id, bias) pairs (SamplingParams::logit_bias).
std::optional<ApiError> ParseLogitBias(const Json& body, std::vector<std::pair<int32_t, float>>* out);

// Limits of constraint inputs (docs/api.md).
inline constexpr size_t kMaxConstraintBytes = 64 * 1024;  // a schema (as sent), regex or grammar
inline constexpr size_t kMaxChoices = 256;

}  // namespace kvs::api
