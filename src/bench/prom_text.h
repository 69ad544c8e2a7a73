// Reading a serving engine's /metrics (parsed by metrics/prom_parse.h): the
// mapping from each engine's metric names to the few figures the benchmark
// samples: KV cache use, queue length, running requests, preemptions.
// Thread-safety: value types and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "metrics/prom_parse.h"

namespace kvs::bench {

using metrics::ParsePrometheusText;
using metrics::PromPage;
using metrics::PromSample;

// The figures sampled during a run; absent when the server exports none.
struct ServerGauges {
  std::optional<double> kv_usage;     // fraction of the KV cache in use, [0, 1]
  std::optional<double> queue;        // requests waiting
  std::optional<double> running;      // requests running (holding KV)
  std::optional<double> preemptions;  // cumulative count (a counter)
  std::string source;                 // which naming matched: "kvserve", "vllm", ...
  // kvserve only: the engine's per-step KV peak since the server started
  // (kvserve:kv_cache_usage_peak_ratio; samples miss short peaks), the
  // process's resident memory and its start-up memory plan (the sum of
  // kvserve:memory_bytes{account}).
  std::optional<double> kv_peak_since_start;
  std::optional<double> rss_bytes;
  std::optional<double> plan_bytes;
};

// Names to look for, in order of preference for each figure. A family that
// is a percentage (0-100) rather than a fraction is flagged.
struct MetricNames {
  std::vector<std::string> kv_usage, queue, running, preemptions;
  std::vector<std::string> kv_usage_percent;  // of those, the ones in percent
};

// kvserve (kvserve: and kvserve_gateway:), vLLM (current and older names),
// SGLang, llama.cpp's server, TGI, TensorRT-LLM, LMDeploy.
const MetricNames& KnownMetricNames();

// Extracts the figures: the first name present wins for each; values of
// several series of one name (labels: model, replica) are summed for counts
// and the maximum is taken for the KV fraction.
ServerGauges ExtractGauges(const PromPage& page, const MetricNames& names = KnownMetricNames());

// Several servers' figures as one (the replicas behind a gateway): the
// largest KV fraction, peak, RSS and plan; queue, running and preemptions
// summed. Empty input: no figures.
ServerGauges Combine(const std::vector<ServerGauges>& each);

}  // namespace kvs::bench
