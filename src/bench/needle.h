// `kvserve needle`: needle-in-a-haystack recall over a grid of context
// lengths x depths, with RULER-style variants.
//
// A case hides one or more facts ("needles", e.g. "The pass key is 48213.
// Remember it.") in a haystack of filler, prose or the user's text, at a
// depth (0 = the start of the haystack, 1 = its end, just before the
// question), asks for them at temperature 0 and scores by exact match: each
// expected value must appear in the answer as a whole token (not inside a
// longer number or word). Every trial draws fresh values and keys.
//
// Variants (RULER's names):
//   single      one needle, one question;
//   multikey    several needles of the same form with different keys; one,
//               at the cell's depth, is asked (the others are distractors);
//   multivalue  one key with several values; the answer must hold them all;
//   multiquery  several keys, all asked in one question;
//   vt          variable tracking: "VAR QKZMB = 48213." then a chain of
//               "VAR HWTXA = VAR QKZMB." (hops) spread from the cell's depth
//               on; every variable of the chain must be named (other chains,
//               --distractors, are distractors);
//   cwe         common words: a numbered list where a few words appear many
//               times and the rest a few times; the answer must name the
//               common ones (--common-words);
//   fwe         frequent words: coded words drawn from a Zipf law; the
//               answer must name the three most frequent.
// vt, cwe and fwe (needle_tasks.h) have no depth of a fact (cwe and fwe are
// run at depth 0 only). --distractors N adds N more same-form needles with
// other keys to any retrieval variant, at random depths, never asked.
// Values (--value-kind): digits (default), uuid or words.
//
// The prompt has exactly the cell's token count (the endpoint's /tokenize
// or a local tokenizer), in completions mode (the prompt ends with the
// answer's prefix: "... What is the pass key? The pass key is") or chat
// mode (the question closes the user message).
// Thread-safety: value types and pure functions; BuildCase calls the
// counter from the calling thread only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/stats.h"
#include "bench/prompt_fit.h"
#include "bench/text_gen.h"
#include "bench/workload.h"

namespace kvs::bench {

enum class NeedleVariant { kSingle, kMultiKey, kMultiValue, kMultiQuery, kVariableTracking, kCommonWords, kFrequentWords };
// vt, cwe, fwe: built by needle_tasks.h, not by BuildCase.
bool IsTaskVariant(NeedleVariant v);
const char* NeedleVariantName(NeedleVariant v);
StatusOr<NeedleVariant> ParseNeedleVariant(const std::string& s);

// Templates with {key} and {value} placeholders. A question for several
// keys (multiquery) is the question per key, joined by spaces.
struct NeedleTemplate {
  std::string fact;           // "The secret number of {key} is {value}."
  std::string question;       // "What is the secret number of {key}?"
  std::string answer_prefix;  // "The secret number of {key} is" (completions mode)
};
// The default template of each variant (those the bundled model was trained
// on where it was: pass key for single, "secret number of NAME" for keyed).
NeedleTemplate DefaultTemplate(NeedleVariant v);

struct NeedleSpec {
  std::vector<int64_t> lengths;  // total prompt tokens per row
  std::vector<double> depths;    // in [0, 1]
  int trials = 3;
  NeedleVariant variant = NeedleVariant::kSingle;
  int needles = 4;      // multikey: needles in all (one asked)
  int values = 3;       // multivalue: values of the one key
  int queries = 2;      // multiquery: keys asked
  int distractors = 0;  // extra, never asked
  NeedleTemplate tmpl;  // empty fields: DefaultTemplate(variant)
  std::vector<std::string> keys;  // key pool (default: given names)
  int value_digits = 5;
  std::string value_kind = "digits";  // "digits", "uuid" or "words"
  int hops = 4;           // vt: assignments after the first in the asked chain
  int common_words = 10;  // cwe: words asked for
  std::string haystack = "filler";  // "filler", "prose" or a text file
  ApiKind api = ApiKind::kCompletions;
  int64_t max_tokens = 0;  // 0: enough for the expected answer
  double threshold = 0.9;  // for the effective context length
  uint64_t seed = 1;

  // The template in use, the defaults filled in.
  NeedleTemplate EffectiveTemplate() const;
  nlohmann::json ToJson() const;
};

Status ValidateNeedleSpec(const NeedleSpec& spec);

struct Needle {
  std::string key;    // "" for key-less templates
  std::string value;
  double depth = 0;   // where it was placed, in [0, 1]
  bool asked = false;
  std::string text;   // the fact sentence
};

struct NeedleCase {
  int64_t length = 0;  // target tokens
  double depth = 0;
  int trial = 0;
  std::vector<Needle> needles;
  std::vector<std::string> expected;  // values the answer must contain
  std::string prompt;                 // completions mode: the whole prompt
  std::string user_message;           // chat mode: the one user message
  int64_t tokens = 0;                 // its measured count (== length when exact)
  bool exact = false;
  int64_t max_tokens = 0;
};

// Builds the case of one grid cell and trial (fresh needles from the spec's
// seed, the cell and the trial).
StatusOr<NeedleCase> BuildCase(const NeedleSpec& spec, int64_t length, double depth, int trial,
                               const TextSource& haystack, TokenCounter& counter);

// A fresh value of a kind: `digits` random digits (no leading zero), a
// UUID, or a word.
std::string NeedleValue(Rng& rng, const std::string& kind, int digits);

// Fits c->needles (text and depth set) into a haystack of c->length tokens
// with the question (and, in completions mode, the answer prefix) at the
// end: whole sentences, needles at the sentence boundaries nearest their
// depths. Sets the prompt or user message, tokens and exact.
Status FitHaystack(const NeedleSpec& spec, const TextSource& haystack, TokenCounter& counter, Rng& rng,
                   const std::string& question, const std::string& answer_prefix, NeedleCase* c);

// max_tokens of each request: the spec's, else enough for the values.
int64_t AnswerTokenBudget(const NeedleSpec& spec);

// Whether `value` occurs in `answer` as a whole token: not preceded or
// followed by a letter or digit (so "48213" is not found in "148213").
bool ContainsValue(const std::string& answer, const std::string& value);
// Fraction of the expected values found.
double ScoreAnswer(const std::string& answer, const std::vector<std::string>& expected);

struct NeedleResult {
  int64_t length = 0;
  double depth = 0;
  int trial = 0;
  int64_t prompt_tokens = 0;  // as the server counted them (usage), else ours
  bool hit = false;           // every expected value found
  double score = 0;           // fraction found
  std::string answer;
  std::vector<std::string> expected;
  // Values of the needles not asked (multikey, distractors): a miss that
  // answers one of them took the wrong needle.
  std::vector<std::string> others;
  std::string error;          // non-empty: the request failed (counts as a miss)
  double latency_seconds = 0;
  // "" for a hit; else error, distractor (another needle's value), partial
  // (some of several expected values) or none.
  std::string MissKind() const;
};

struct NeedleCell {
  int64_t length = 0;
  double depth = 0;
  int trials = 0, hits = 0, errors = 0;
  double recall() const { return trials > 0 ? static_cast<double>(hits) / trials : 0.0; }
};

struct NeedleSummary {
  std::vector<int64_t> lengths;
  std::vector<double> depths;
  std::vector<std::vector<NeedleCell>> cells;  // [length][depth]
  std::vector<double> recall_by_length;
  std::vector<ProportionInterval> interval_by_length;  // Wilson 95 %, the depths pooled
  double overall = 0;
  ProportionInterval overall_interval;
  int64_t requests = 0, hits = 0, errors = 0;
  // The largest tested length at which no depth is shown below the
  // threshold: every depth's Wilson 95 % upper bound >= threshold (so one
  // unlucky miss among few trials does not decide it; a depth recalled
  // clearly worse does).
  std::optional<int64_t> effective_length;
  // Shorter lengths that fall below the threshold although a longer one
  // passes (the effective length is then not a clean cut-off).
  std::vector<int64_t> failing_below_effective;
  // One line per length where late depths are recalled worse than early
  // ones (the sign the length is past the model's effective range).
  std::vector<std::string> late_position_warnings;
  // Misses by NeedleResult::MissKind.
  std::map<std::string, int64_t> misses;
  // Cases with one asked value among several needles: the recall of a guess
  // among the values in the context (mean of 1 / needles), which a recall
  // at or below it does not beat.
  std::optional<double> chance_level;
  double threshold = 0.9;
  nlohmann::json ToJson() const;
};

NeedleSummary SummarizeNeedle(const std::vector<NeedleResult>& results, const std::vector<int64_t>& lengths,
                              const std::vector<double>& depths, double threshold);

// "0:1:0.1" (from:to:step), or a list "0,0.25,0.5"; values in [0, 1] (or
// percentages > 1 up to 100).
StatusOr<std::vector<double>> ParseDepths(const std::string& s);

}  // namespace kvs::bench
