// `kvserve soak --url URL`: a long run of mixed traffic against any
// OpenAI-compatible endpoint (a replica, or a gateway with a key), to find
// what only time shows: a crash, memory that grows, KV blocks that leak,
// answers that go wrong after an hour.
//
// The run is cut into windows (default a tenth of the duration, 5-60 s);
// each window is one closed-loop bench run (bench/load_runner.h) at the
// given concurrency, with input lengths drawn from the mix and probes
// (bench/probes.h): answers checked (recall, json), bad inputs
// (over-length, malformed: invalid JSON, wrong types, deep nesting, bytes
// that are not UTF-8, out-of-range values) and clients that hang up after
// the first chunk (cancel). A line per window on stderr gives requests,
// errors by class, probes right, RSS and KV.
//
// Checks at the end (PASS / FAIL / SKIP lines; exit 0, 1, or 2 for bad
// options or an endpoint it cannot use):
//   alive            the endpoint answered every window (no refused
//                    connection) and /health afterwards;
//   server_errors, answers, expected_errors, kv_watermark, memory
//                    as `kvserve bench` (bench/load_report.h);
//   kv_idle          KV use back to 0 within --kv-idle-seconds once idle
//                    (every cancelled or refused request gave its blocks
//                    back);
//   rss_growth       resident memory from the baseline (minute 5, or 20 %
//                    of a shorter run) to the end grew < --rss-growth-max.
// Thread-safety: call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvs::bench {

struct SoakOptions {
  std::string url, api_key, model;
  std::string tokenizer;                  // local GGUF when the endpoint has no /tokenize
  std::vector<std::string> replica_metrics;
  double duration_seconds = 600;
  double window_seconds = 0;              // 0: duration / 10, within [5, 60]
  int concurrency = 8;
  std::string api = "completions";
  std::string mix = "64:0.5,512:0.35,2048:0.15";  // lengths over the context are dropped
  int64_t output_len = 32;
  std::string probes = "recall:0.1,json:0.05,over-length:0.05,malformed:0.1,cancel:0.1";
  double answers_min = 0.9;
  double kv_watermark_max = 0.95;         // a soak runs at saturation
  double rss_growth_max = 0.05;
  double memory_ratio_max = 1.0;          // RSS / the server's memory plan
  double kv_idle_seconds = 15;
  double request_timeout = 120;
  uint64_t seed = 0;                      // 0: random, printed
  std::string json_path;
  bool progress = true;
};

int RunSoak(const SoakOptions& options);

}  // namespace kvs::bench
