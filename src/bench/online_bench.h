// `kvserve bench --url`: the online load benchmark from start to end.
// Discovers the endpoint, builds the runs (flags or a YAML workload file),
// prepares every prompt with exact token counts, sends a warm-up, runs each
// workload with a progress bar, prints the table and the checks, and writes
// the JSON and HTML reports. Returns the process exit code: 0 when every
// check passed (or was skipped), 1 when one failed, 2 for bad options or an
// endpoint that cannot be used.
// Thread-safety: call from one thread.
#pragma once

#include <string>
#include <vector>

#include "bench/load_report.h"
#include "bench/workload.h"

namespace kvs::bench {

struct OnlineBenchOptions {
  std::string url;
  std::string api_key;
  std::string model;            // served model id ("" = the endpoint's first)
  std::string tokenizer;        // local GGUF for token counts when the endpoint has no /tokenize
  WorkloadSpec spec;            // from the flags
  std::string workload_file;    // YAML; overrides the flag workload
  std::vector<std::string> slos;
  CheckOptions checks;
  int warmup = 1;               // requests before the first run (not recorded)
  double metrics_interval = 0.5;
  std::vector<std::string> replica_metrics;  // EndpointOptions::metrics_urls
  double request_timeout = 600;
  std::string json_path, html_path;
  std::string svg_dir;          // also write each chart as DIR/NAME.svg
  bool progress = true;
};

int RunOnlineBench(const OnlineBenchOptions& options);

}  // namespace kvs::bench
