// The online benchmark's HTML report: checks, a summary per run, TTFT and
// TPOT against input length, latency CDFs, throughput against offered rate
// (or concurrency), and the server's KV use, queue and running requests
// over time, each as an inline SVG; plus the per-length tables. One
// self-contained file (see html.h).
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/load_report.h"

namespace kvs::bench {

std::string BenchHtml(const BenchReport& report, const std::vector<RunResult>& results, const nlohmann::json& meta);

// The charts alone (also written as SVG files for docs): name -> SVG.
std::vector<std::pair<std::string, std::string>> BenchCharts(const BenchReport& report,
                                                            const std::vector<RunResult>& results);

}  // namespace kvs::bench
