// What the online benchmark's runs mean: figures per run and per input
// length bucket, the server's /metrics peaks, the go-live checks (PASS /
// FAIL / SKIP with their numbers), the JSON report and the stdout table.
//
// Figures of a set of requests over a duration:
//   TTFT (send -> first text chunk), TPOT ((e2e - ttft) / (tokens - 1)),
//   ITL (gaps between text chunks, pooled over requests), E2E latency:
//   p50 / p90 / p99 / max; request and token throughput; goodput (requests
//   per second that succeeded and met every SLO); errors by kind; the share
//   of prompt tokens the server reported as cached.
// Checks (over all runs):
//   ttft_growth   between neighbouring input lengths of runs that differ only
//                 in length, TTFT p50 grows at most `ttft_jump_max` (10) times
//                 faster than the prefill work: the prompt tokens not served
//                 from the prefix cache (the linear part of the work);
//   kv_watermark  the peak KV use <= kv_watermark_max: from the servers' peak
//                 gauges (kvserve:kv_cache_usage_peak_ratio, read before and
//                 after each run), else from the samples of /metrics;
//   memory        each server's resident memory <= memory_ratio_max times its
//                 memory plan (kvserve:memory_bytes), sampled;
//   server_errors no 5xx, no error inside a stream, no dropped connection;
//   preemptions   preemptions per minute of sampled time <= the maximum;
//   answers, expected_errors  the probes' (bench/probe_report.h).
// Probe requests are scored, not timed: they are left out of the figures.
// A check without data (no /metrics, one length) is SKIP, never PASS.
// Thread-safety: pure functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/check.h"
#include "bench/load_runner.h"
#include "bench/probe_report.h"
#include "bench/stats.h"

namespace kvs::bench {

struct Figures {
  int64_t planned = 0, sent = 0, ok = 0, failed = 0, good = 0;
  int64_t skipped = 0;            // dataset prompts over the context (not sent)
  std::map<std::string, int64_t> errors;  // "http_429", "http_503", "stream", "connect", ...
  double duration = 0;
  double request_throughput = 0;  // ok requests / s
  double input_throughput = 0;    // prompt tokens of ok requests / s
  double output_throughput = 0;   // generated tokens / s
  double goodput = 0;             // good requests / s
  int64_t prompt_tokens = 0, output_tokens = 0;
  std::optional<double> cached_share;  // cached / prompt tokens, where reported
  double max_send_lag = 0;        // Poisson: how late the client sent (its own overload)
  // Streams: generated tokens per text chunk (usage / chunks). Above 1 the
  // server bunches tokens: ITL is per chunk, and TPOT (per token) is lower
  // than the gaps a reader sees.
  std::optional<double> tokens_per_chunk;
  Summary ttft, tpot, itl, e2e;
  std::vector<double> percentiles;  // reported besides p50/p90/p99 (--percentiles)
  nlohmann::json ToJson() const;
};

// "" when a summary's percentiles mean what they say; else a warning that
// p90 (fewer than 10 samples) or p99 (fewer than 100) only repeats the
// largest value.
std::string SmallSampleNote(const Summary& s);
// The warnings about a run's figures, for the text and the HTML report: too
// few samples for p90/p99, tokens bunched into stream chunks.
std::vector<std::string> RunNotes(const Figures& f);

Figures ComputeFigures(const std::vector<const RequestRecord*>& records, double duration,
                       const std::vector<Slo>& slos, const std::vector<double>& percentiles = {});

struct MetricsPeaks {
  int samples = 0;
  std::string source;
  // The run's KV peak: where a source's peak gauge rose during the run, that
  // gauge (exact: every engine step counts); elsewhere the samples' maximum.
  std::optional<double> kv_peak, queue_peak, running_peak;
  bool kv_peak_exact = false;          // kv_peak came from a peak gauge
  std::optional<double> preemptions;  // increase over the run
  // Resident memory against the server's memory plan: the largest
  // RSS / plan of any source, and that source's figures.
  std::optional<double> memory_ratio, rss_bytes, plan_bytes;
  double span = 0;                    // seconds between the first and last sample
};
MetricsPeaks ComputePeaks(const std::vector<MetricsPoint>& points);

struct BucketFigures {
  std::string label;  // "512" or "257-512"
  int64_t lo = 0, hi = 0;
  Figures f;
};

struct RunReport {
  Figures all;                         // ordinary requests (probes are scored, not timed)
  std::vector<BucketFigures> buckets;  // by input length; one when all are equal
  MetricsPeaks peaks;
  std::vector<ProbeTally> probes;      // probe requests by kind (bench/probe_report.h)
};

// TTFT and TPOT against input length for runs that differ only in length
// (or the buckets of one mixed run).
struct LengthPoint {
  int64_t length = 0;
  int64_t n = 0;
  double work = 0;  // mean prompt tokens not served from the prefix cache
  double ttft_p50 = 0, ttft_p90 = 0, tpot_p50 = 0, e2e_p50 = 0;
};
struct LengthSeries {
  std::string label;  // "c=1 out=64"
  std::vector<LengthPoint> points;  // by length
};

struct CheckOptions {
  double kv_watermark_max = 0.90;
  double memory_ratio_max = 1.0;  // process RSS / the server's memory plan
  double preemptions_per_minute_max = 10;
  double ttft_jump_max = 10;
  double answers_min = 0.9;  // probes: the share of right answers each kind needs
  std::vector<double> percentiles;  // figures: percentiles besides p50/p90/p99, e.g. {95, 99.9}
  // The endpoint is a kvserve gateway: a watermark check without KV figures
  // fails (naming --replica-metrics) instead of skipping.
  bool behind_gateway = false;
};

struct BenchReport {
  std::vector<RunReport> runs;  // [results.size()]
  std::vector<LengthSeries> length_series;
  std::vector<Check> checks;
  std::vector<Slo> slos;
  bool passed() const;  // no FAIL
};

BenchReport AnalyzeRuns(const std::vector<RunResult>& results, const std::vector<Slo>& slos,
                        const CheckOptions& options);

// The whole report as JSON: `meta` (tool, url, endpoint, workloads...) is
// merged in at the top; every request's timings are included.
nlohmann::json BenchReportJson(const BenchReport& report, const std::vector<RunResult>& results,
                               const nlohmann::json& meta);

// The human summary for stdout: per run a block of figures (and per input
// length when there are several), then the check lines.
std::string FormatBenchTable(const BenchReport& report, const std::vector<RunResult>& results);

}  // namespace kvs::bench
