// Reading a server's /metrics: a parser of the Prometheus text exposition
// format (0.0.4, also what OpenMetrics text mostly is). The benchmark reads
// serving engines' pages with it (bench/prom_text.h maps their metric
// names), the gateway its replicas' (gateway/health.h).
//
// The parser is lenient where servers differ (optional timestamps, blank
// lines, "# EOF", NaN/+Inf values) and skips a malformed line rather than
// failing the whole page; it counts what it skipped.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::metrics {

struct PromSample {
  std::string name;                           // e.g. "vllm:num_requests_waiting"
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct PromPage {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types;  // family name -> "counter", "gauge", ...
  int64_t skipped_lines = 0;                 // malformed lines ignored
};

PromPage ParsePrometheusText(std::string_view text);

}  // namespace kvs::metrics
