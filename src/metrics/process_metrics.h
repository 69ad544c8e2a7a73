// ProcessMetrics: the standard process collector of the Prometheus client
// libraries, under their standard names (no prefix, so generic dashboards
// and alerts work unchanged): process_cpu_seconds_total,
// process_start_time_seconds, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds; plus a
// build-info gauge (`<prefix>build_info{version,revision} 1`) and the
// uptime. Values come from /proc/self at each Refresh (called before a
// scrape renders).
//
// Shared by `kvserve serve` and `kvserve gateway` (each passes its prefix).
// Thread-safety: thread-safe (metrics.h); Refresh may run concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "metrics/metrics.h"

namespace kvs::metrics {

struct ProcessStats {
  double cpu_seconds = 0;          // user + system
  double start_time_seconds = 0;   // unix time the process started
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  int64_t open_fds = -1;           // -1: unknown
  int64_t max_fds = -1;
};

// Reads /proc/self/{stat,statm,fd} and /proc/stat (boot time); fields it
// cannot read keep their defaults.
ProcessStats ReadProcessStats();

// The version of this build ("0.1.0") and the git revision it was
// configured from ("unknown" outside a git checkout).
const char* BuildVersion();
const char* BuildRevision();

class ProcessMetrics {
 public:
  // Registers the families in `registry` (which must outlive this).
  ProcessMetrics(Registry& registry, const std::string& prefix);
  void Refresh();
  double uptime_seconds() const;

 private:
  Counter& cpu_;
  Gauge& start_time_;
  Gauge& resident_;
  Gauge& virtual_;
  Gauge& open_fds_;
  Gauge& max_fds_;
  double start_time_value_ = 0;
};

}  // namespace kvs::metrics
