// What a run's probes (bench/probes.h) say: per kind the probes answered
// correctly with a Wilson interval, the kinds of misses and a few examples;
// and the two go-live checks over all runs:
//   answers          arithmetic / json / recall: no kind shown below
//                    answers_min: each kind's Wilson 95 % upper bound
//                    reaches it (a correct server under load answers as it
//                    does idle; the limit allows a small model's own
//                    mistakes, the interval a few probes' chance);
//   expected_errors  over_length / malformed: every one refused with a 4xx
//                    and a JSON error (there is nothing to allow for); cancel:
//                    no 5xx before the client went away.
// A check without probes of its kinds is SKIP, naming --probes.
// Thread-safety: pure functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/check.h"
#include "bench/load_runner.h"
#include "bench/stats.h"

namespace kvs::bench {

struct ProbeTally {
  ProbeKind kind = ProbeKind::kNone;
  int64_t sent = 0, ok = 0;
  std::map<std::string, int64_t> misses;  // miss kind -> count
  std::vector<std::string> examples;      // up to 3: "request 12: wrong_number: expected 7, got 8: ..."
  ProportionInterval interval;            // Wilson 95 % of ok / sent
  double Share() const { return sent > 0 ? static_cast<double>(ok) / static_cast<double>(sent) : 0; }
  std::string Line() const;               // "arithmetic 9/10 right (56-98 %); wrong_number x1"
  nlohmann::json ToJson() const;
};

// One tally per probe kind present among the records (sent ones only), in
// ProbeKind order.
std::vector<ProbeTally> TallyProbes(const std::vector<const RequestRecord*>& records);

// The `answers` and `expected_errors` checks over every run's records.
std::vector<Check> ProbeChecks(const std::vector<RunResult>& results, double answers_min);

}  // namespace kvs::bench
