// Measures the hand-written registry (src/metrics) against prometheus-cpp
// (Debian's prometheus-cpp-dev) on the operations kvserve performs: a
// histogram observation and a counter increment per token, a labelled
// counter lookup + increment per request, and a scrape of the server's
// metric set (about 30 families, 700 series with the histograms).
// Build and run: bash tools/metrics_compare/run.sh (not part of the build:
// the product does not link prometheus-cpp).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "metrics/metrics.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double NsPerOp(int n, F&& f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

const std::vector<double> kBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                      1.0,   2.5,   5.0,  7.5,  10,   20,   40,   80,  160, 640};
constexpr int kHistograms = 14;   // the server's histograms (with the by-length children)
constexpr int kCounters = 14;
constexpr int kGauges = 20;

}  // namespace

int main() {
  const int n = 2'000'000;
  // --- kvserve's registry.
  kvs::metrics::Registry mine;
  std::vector<kvs::metrics::Histogram*> mh;
  for (int i = 0; i < kHistograms; ++i) mh.push_back(&mine.Histogram0("h" + std::to_string(i), "help", kBuckets));
  auto& mc = mine.Counter0("c", "help");
  for (int i = 1; i < kCounters; ++i) mine.Counter0("c" + std::to_string(i), "help").Inc(i);
  for (int i = 0; i < kGauges; ++i) mine.Gauge0("g" + std::to_string(i), "help").Set(i);
  auto& mfam = mine.AddCounter("http", "help", {"path", "status"});
  // --- prometheus-cpp.
  prometheus::Registry theirs;
  std::vector<prometheus::Histogram*> th;
  for (int i = 0; i < kHistograms; ++i) {
    th.push_back(&prometheus::BuildHistogram().Name("h" + std::to_string(i)).Help("help").Register(theirs).Add(
        {}, prometheus::Histogram::BucketBoundaries(kBuckets)));
  }
  auto& tc = prometheus::BuildCounter().Name("c").Help("help").Register(theirs).Add({});
  for (int i = 1; i < kCounters; ++i) prometheus::BuildCounter().Name("c" + std::to_string(i)).Help("help").Register(theirs).Add({}).Increment(i);
  for (int i = 0; i < kGauges; ++i) prometheus::BuildGauge().Name("g" + std::to_string(i)).Help("help").Register(theirs).Add({}).Set(i);
  auto& tfam = prometheus::BuildCounter().Name("http").Help("help").Register(theirs);

  const double m_obs = NsPerOp(n, [&](int i) { mh[0]->Observe(0.001 * (i % 1000)); });
  const double t_obs = NsPerOp(n, [&](int i) { th[0]->Observe(0.001 * (i % 1000)); });
  const double m_inc = NsPerOp(n, [&](int) { mc.Inc(); });
  const double t_inc = NsPerOp(n, [&](int) { tc.Increment(); });
  const char* statuses[] = {"200", "400", "429", "503"};
  const double m_lab = NsPerOp(n / 4, [&](int i) { mfam.With({"/v1/completions", statuses[i & 3]}).Inc(); });
  const double t_lab = NsPerOp(n / 4, [&](int i) { tfam.Add({{"path", "/v1/completions"}, {"status", statuses[i & 3]}}).Increment(); });
  for (int i = 1; i < kHistograms; ++i) {
    for (int j = 0; j < 100; ++j) {
      mh[i]->Observe(j * 0.01);
      th[i]->Observe(j * 0.01);
    }
  }
  size_t mbytes = 0, tbytes = 0;
  const double m_scrape = NsPerOp(2000, [&](int) { mbytes = mine.Render().size(); });
  prometheus::TextSerializer ser;
  const double t_scrape = NsPerOp(2000, [&](int) { tbytes = ser.Serialize(theirs.Collect()).size(); });
  std::printf("operation                          kvserve (ns)  prometheus-cpp (ns)\n");
  std::printf("histogram Observe                  %12.1f  %19.1f\n", m_obs, t_obs);
  std::printf("counter Inc                        %12.1f  %19.1f\n", m_inc, t_inc);
  std::printf("labelled counter lookup + Inc      %12.1f  %19.1f\n", m_lab, t_lab);
  std::printf("scrape (render %zu / %zu bytes)  %12.0f  %19.0f\n", mbytes, tbytes, m_scrape, t_scrape);
  return 0;
}
