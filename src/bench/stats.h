// Statistics for the load benchmark: percentiles, summaries, empirical
// CDFs, and service-level objectives (SLOs) with goodput.
//
// Percentiles interpolate linearly between the closest ranks (NumPy's
// default, "linear"), so p50 of {1, 2} is 1.5 and p100 is the maximum.
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvs::bench {

// p in [0, 100]; `sorted` ascending and non-empty.
double Percentile(std::span<const double> sorted, double p);

struct Summary {
  int64_t count = 0;
  double mean = 0, stddev = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // stddev: sample (n - 1)
  std::vector<double> sorted;  // the values, ascending: any other percentile (At)
  double At(double p) const { return sorted.empty() ? 0 : Percentile(sorted, p); }
};
// All zeros (count 0) for no values.
Summary Summarize(std::vector<double> values);

// The Wilson score interval of a proportion (hits of n trials) at z
// standard deviations (1.96: 95 %): {lo, hi} in [0, 1]; {0, 1} for n == 0.
// Unlike hits/n +- z*se it stays inside [0, 1] and is honest at 0 or n hits.
struct ProportionInterval {
  double lo = 0, hi = 1;
};
ProportionInterval WilsonInterval(int64_t hits, int64_t n, double z = 1.96);

// The empirical CDF as (value, fraction of values <= value) points, in
// increasing order, ending at (max, 1). With more than max_points values it
// keeps evenly spaced ranks (always the first and the last).
std::vector<std::pair<double, double>> Cdf(std::vector<double> values, size_t max_points = 200);

// What an SLO bounds.
enum class SloMetric { kTtft, kTpot, kItl, kE2e };
const char* SloMetricName(SloMetric m);

// "metric <= limit", for requests whose prompt has at most max_prompt_tokens
// tokens (all requests when absent). kItl bounds a request's worst
// inter-token gap.
struct Slo {
  SloMetric metric = SloMetric::kTtft;
  double limit_seconds = 0;
  std::optional<int64_t> max_prompt_tokens;
  std::string ToString() const;  // "ttft<=2s@4096"
};

// Parses "ttft:2s", "tpot:50ms", "e2e<=10s", "ttft:500" (plain numbers are
// milliseconds, as vLLM's --goodput takes them), with an optional prompt
// bound "@4096", "@<=4096" or "@4k" (x1024): "ttft:2s@4k".
StatusOr<Slo> ParseSlo(std::string_view spec);

// The per-request figures the SLOs look at; nullopt: not measured (e.g.
// TPOT of a one-token answer), which never violates an SLO.
struct SloInput {
  bool ok = false;  // the request succeeded
  int64_t prompt_tokens = 0;
  std::optional<double> ttft, tpot, max_itl, e2e;
};

// A request is "good" when it succeeded and meets every SLO that applies to
// its prompt length.
bool MeetsSlos(const SloInput& r, std::span<const Slo> slos);

// "1.23 s", "45.6 ms", "789 us": a duration with three significant digits.
std::string FormatSeconds(double s);

}  // namespace kvs::bench
