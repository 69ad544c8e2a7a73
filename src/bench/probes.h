// Probes: requests inside a load run whose answers are checked, so that a
// go-live run measures correctness under load beside its latency figures.
// A server that answers fast but wrongly under batching, preemption or a
// full KV pool (a corrupted cache block, a mixed-up sequence, a lost
// history) fails here even when every status is 200.
//
// Kinds (a share of a run's requests each; `--probes arithmetic:0.1,...`):
//   arithmetic   "What is 3 plus 4?" (chat) / "3 plus 4 is" (completions):
//                the answer's first sentence holds the sum and no number
//                other than the operands (LLMPerf's correctness idea, sized
//                for the bundled model, which was trained on single digits);
//   json         a chat request with response_format json_schema: the
//                answer parses and satisfies the schema (checked by
//                valijson, not by the grammar engine that produced it);
//   recall       a fact ("The secret number of Zoe is 4821.") that the
//                answer must give back, the number and no other: in a
//                multi-turn run the conversation's first turn states it and
//                its last turn asks; otherwise the prompt (of the run's
//                length) starts with it and ends with the question. It tests
//                what a server can break under load (the KV cache of a long
//                prompt or of a history, preempted and recomputed) with a
//                task small models do well, unlike arithmetic;
//   over_length  a prompt longer than the model's context: expected a 400
//                (or 413) with an OpenAI-style JSON error, never a 200, a
//                5xx or a dropped connection;
//   malformed    invalid JSON, a wrongly typed field, a missing required
//                field, bytes that are not UTF-8, an out-of-range value
//                (in turn): expected a 400 (or 422) with a JSON error; and
//                an extra field nested 10,000 deep: valid JSON, so a 200 is
//                right too, a 5xx or a dropped connection is not;
//   cancel       an ordinary streamed request whose client goes away after
//                the first chunk (a closed tab, a killed agent): right
//                unless the server answered 5xx before; what it owes the
//                next requests (its KV back, no crash) the soak checks.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/text_gen.h"

namespace kvs::bench {

enum class ProbeKind { kNone, kArithmetic, kJson, kRecall, kOverLength, kMalformed, kCancel };
const char* ProbeKindName(ProbeKind k);  // "arithmetic", "json", "recall", "over_length", "malformed", "cancel"
std::optional<ProbeKind> ProbeKindFromName(std::string_view name);  // '-' or '_'
// over_length and malformed: a correct server refuses them.
bool ExpectsError(ProbeKind k);
// Judged by the answer's content (arithmetic, json, recall), not by how the
// server handled a bad input or a hang-up.
bool ChecksAnswer(ProbeKind k);

// (kind, share of the run's requests; recall: of its conversations).
using ProbeShares = std::vector<std::pair<ProbeKind, double>>;
// "arithmetic:0.1,json:0.05,over-length:0.02". Shares are in (0, 1] and sum
// to at most 1.
StatusOr<ProbeShares> ParseProbes(const std::string& s);
std::string FormatProbes(const ProbeShares& p);

// One probe request: what it sends beyond the prepared prompt text, and
// what its answer must be.
struct Probe {
  ProbeKind kind = ProbeKind::kNone;
  int64_t max_tokens = 0;             // 0: the run's output length
  std::string expected;               // arithmetic, recall: the number
  std::vector<std::string> allowed;   // arithmetic: the operands an answer may repeat
  nlohmann::json schema;              // json: the schema
  std::string variant;                // malformed: "invalid_json", "wrong_type", "missing_field", "deep_nesting",
                                      // "invalid_utf8", "out_of_range"
  nlohmann::json ToJson() const;
};

// The probe's prompt text (arithmetic, json, recall's question) with its
// expectations. `chat`: the request goes to /v1/chat/completions.
struct ProbePrompt {
  std::string text;
  Probe probe;
};
ProbePrompt MakeArithmeticProbe(Rng& rng, bool chat);
ProbePrompt MakeJsonProbe(Rng& rng);
ProbePrompt MakeMalformedProbe(Rng& rng);
// A fact for the first turn of a conversation and the question (with its
// probe) for the last.
struct RecallFact {
  std::string fact;
  ProbePrompt question;
  std::string answer_prefix;  // "The secret number of Zoe is": a completions prompt ends with it
};
RecallFact MakeRecallFact(Rng& rng);
// The over-length probe has no text of its own: its prompt is the run's text
// grown past the context.
Probe MakeOverLengthProbe();
Probe MakeCancelProbe();

// The request body of a malformed probe (its variant) for `model`.
std::string MalformedBody(const Probe& p, const std::string& model, bool chat);

// How a probe's answer went.
struct ProbeVerdict {
  bool ok = false;
  // "" when ok; else the kind of miss: answers: "wrong_number",
  // "no_number", "invalid_json", "schema", "truncated", "http_error",
  // "transport"; expected errors: "accepted" (a 200), "server_error" (5xx),
  // "wrong_status", "no_error_message", "transport"; cancel: "server_error".
  std::string miss;
  std::string detail;  // what was seen (status, the answer's start, the schema error)
  nlohmann::json ToJson() const;
};

// What came back for a probe: the HTTP status (0: no response), the
// generated text (200) or the error body, the finish reason.
struct ProbeOutcome {
  int status = 0;
  bool transport_error = false;
  std::string answer;
  std::string error_body;
  std::string finish_reason;
  bool cancelled = false;  // the client went away on purpose
};
ProbeVerdict ScoreProbe(const Probe& p, const ProbeOutcome& o);

// The integers in the first sentence of `text` (up to the first newline,
// or a '.', '!' or '?' followed by a space or the end), in order.
std::vector<std::string> FirstSentenceNumbers(std::string_view text);

}  // namespace kvs::bench
