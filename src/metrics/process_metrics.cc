#include "metrics/process_metrics.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/resource.h>
#include <unistd.h>

#ifndef KVSERVE_VERSION
#define KVSERVE_VERSION "0.0.0"
#endif
#ifndef KVSERVE_GIT_REVISION
#define KVSERVE_GIT_REVISION "unknown"
#endif

namespace kvs::metrics {

const char* BuildVersion() { return KVSERVE_VERSION; }
const char* BuildRevision() { return KVSERVE_GIT_REVISION; }

namespace {

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return 0;
}

}  // namespace

ProcessStats ReadProcessStats() {
  ProcessStats s;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  {
    std::ifstream in("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted from the last ')'.
    const size_t close = text.rfind(')');
    if (close != std::string::npos && ticks > 0) {
      std::istringstream fields(text.substr(close + 2));
      std::string f;
      // Field 3 is the first after ')'; utime 14, stime 15, starttime 22.
      double utime = 0, stime = 0, starttime = 0;
      for (int i = 3; i <= 22 && fields >> f; ++i) {
        if (i == 14) utime = std::strtod(f.c_str(), nullptr);
        if (i == 15) stime = std::strtod(f.c_str(), nullptr);
        if (i == 22) starttime = std::strtod(f.c_str(), nullptr);
      }
      s.cpu_seconds = (utime + stime) / ticks;
      const double boot = BootTimeSeconds();
      if (boot > 0) s.start_time_seconds = boot + starttime / ticks;
    }
  }
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long size = 0, resident = 0;
    if (std::fscanf(f, "%llu %llu", &size, &resident) == 2) {
      const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      s.virtual_bytes = size * page;
      s.resident_bytes = resident * page;
    }
    std::fclose(f);
  }
  std::error_code ec;
  int64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) s.open_fds = fds - 1;  // the directory iterator's own descriptor
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) s.max_fds = static_cast<int64_t>(rl.rlim_cur);
  return s;
}

ProcessMetrics::ProcessMetrics(Registry& registry, const std::string& prefix)
    : cpu_(registry.Counter0("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")),
      start_time_(registry.Gauge0("process_start_time_seconds",
                                  "Start time of the process since unix epoch in seconds.")),
      resident_(registry.Gauge0("process_resident_memory_bytes", "Resident memory size in bytes.")),
      virtual_(registry.Gauge0("process_virtual_memory_bytes", "Virtual memory size in bytes.")),
      open_fds_(registry.Gauge0("process_open_fds", "Number of open file descriptors.")),
      max_fds_(registry.Gauge0("process_max_fds", "Maximum number of open file descriptors.")) {
  registry.AddGauge(prefix + "build_info", "Always 1; the labels name the build (version, git revision).",
                    {"version", "revision"})
      .With({BuildVersion(), BuildRevision()})
      .Set(1);
  const ProcessStats s = ReadProcessStats();
  start_time_value_ = s.start_time_seconds > 0
                          ? s.start_time_seconds
                          : std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Refresh();
}

void ProcessMetrics::Refresh() {
  const ProcessStats s = ReadProcessStats();
  cpu_.SetMax(s.cpu_seconds);
  start_time_.Set(start_time_value_);
  resident_.Set(static_cast<double>(s.resident_bytes));
  virtual_.Set(static_cast<double>(s.virtual_bytes));
  if (s.open_fds >= 0) open_fds_.Set(static_cast<double>(s.open_fds));
  if (s.max_fds >= 0) max_fds_.Set(static_cast<double>(s.max_fds));
}

double ProcessMetrics::uptime_seconds() const {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::max(0.0, now - start_time_value_);
}

}  // namespace kvs::metrics
