#include "metrics/process_metrics.h"

#include <chrono>
#include <cstdio>
#include <string>

#include <time.h>

#include <gtest/gtest.h>

namespace kvs::metrics {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(ProcessMetricsTest, ReadsThisProcess) {
  const ProcessStats a = ReadProcessStats();
  EXPECT_GT(a.resident_bytes, 0u);
  EXPECT_GE(a.virtual_bytes, a.resident_bytes);
  EXPECT_GT(a.start_time_seconds, Now() - 24 * 3600.0);
  EXPECT_LE(a.start_time_seconds, Now() + 1);
  EXPECT_GT(a.max_fds, 0);
  ASSERT_GE(a.open_fds, 3);  // stdin, stdout, stderr
  // An open file shows; CPU time grows with work.
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  // Burn 0.1 s of this process's CPU time (as the kernel counts it, so a
  // busy shared machine only makes this slower).
  const auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  volatile double x = 0;
  const double cpu0 = cpu_now();
  while (cpu_now() - cpu0 < 0.1) {
    for (int i = 0; i < 1000; ++i) x = x + i * 0.5;
  }
  const ProcessStats b = ReadProcessStats();
  EXPECT_EQ(b.open_fds, a.open_fds + 1);
  EXPECT_GE(b.cpu_seconds - a.cpu_seconds, 0.08);  // clock ticks: 10 ms resolution
  std::fclose(f);
}

TEST(ProcessMetricsTest, StandardNamesAndBuildInfo) {
  Registry r;
  ProcessMetrics p(r, "kvserve:");
  p.Refresh();
  const std::string text = r.Render();
  for (const char* name : {"process_cpu_seconds_total", "process_start_time_seconds", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds"}) {
    EXPECT_NE(text.find(std::string("\n") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
  const std::string info = std::string("kvserve:build_info{version=\"") + BuildVersion() + "\",revision=\"" +
                           BuildRevision() + "\"} 1\n";
  EXPECT_NE(text.find(info), std::string::npos) << text;
  EXPECT_STRNE(BuildVersion(), "0.0.0");
  EXPECT_GE(p.uptime_seconds(), 0.0);
  EXPECT_LT(p.uptime_seconds(), 24 * 3600.0);
}

}  // namespace
}  // namespace kvs::metrics
