// RULER's tasks beyond retrieval for `kvserve needle` (variants vt, cwe,
// fwe; needle.h has the retrieval ones), and the suite that runs several
// tasks and scores them together (`--tasks`).
//
//   vt   variable tracking: one chain "VAR A = 48213." ... "VAR B = VAR A."
//        ... of hops + 1 variables spread from the cell's depth to the end
//        of a filler haystack, plus --distractors chains with other values;
//        the answer must name every variable of the asked chain;
//   cwe  common words extraction: a numbered list in which common_words
//        words appear often (up to 30 times, fewer when the length leaves
//        no room) and the others two or three times, shuffled; the answer
//        must name the common ones;
//   fwe  frequent words extraction: coded words drawn from a Zipf law
//        (exponent 2); the answer must name the three most frequent of the
//        text as fitted.
// Words are made up (syllables), so no model knows them beforehand.
// Thread-safety: pure functions; the counter is called from the calling
// thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/needle.h"

namespace kvs::bench {

// Any variant's case: BuildCase for the retrieval variants, the builders
// above for vt, cwe and fwe.
StatusOr<NeedleCase> BuildAnyCase(const NeedleSpec& spec, int64_t length, double depth, int trial,
                                  const TextSource& haystack, TokenCounter& counter);

// "ruler" (every variant), or a list of variant names.
StatusOr<std::vector<NeedleVariant>> ParseNeedleTasks(const std::string& s);

// One task's result in a suite: its summary and, per length, the mean
// score (the share of expected values found, RULER's partial credit) and
// the recall (cases with every value found).
struct TaskScore {
  NeedleVariant task = NeedleVariant::kSingle;
  NeedleSummary summary;
  std::vector<double> score_by_length;  // [lengths]
  double score = 0;                     // over all its cases
};

// The table of a suite: a row per task (score per length and overall) and
// the aggregate (the tasks' mean) per length and overall.
std::string TaskTable(const std::vector<TaskScore>& tasks, const std::vector<int64_t>& lengths);
// Per length, the mean of the tasks' scores.
std::vector<double> AggregateByLength(const std::vector<TaskScore>& tasks, size_t lengths);
// The suite as a self-contained HTML page: the score table with the
// aggregate, then each task's recall heatmap.
std::string TaskSuiteHtml(const std::vector<TaskScore>& tasks, const std::vector<int64_t>& lengths,
                          const std::string& model, const std::string& url);

// `--haystack needles`: RULER's all-distractor haystack, sentences of the
// needle's own form ("The secret number of Kobami is 38120.") with made-up
// keys that no question asks for (never one of the key pool's names).
std::unique_ptr<TextSource> MakeNeedleFormSource(const NeedleSpec& spec);

}  // namespace kvs::bench
