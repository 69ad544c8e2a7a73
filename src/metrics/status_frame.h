// StatusFrame: what every status document (the JSON of GET /status that
// the status page renders, status_page.h) has in common, whichever front
// end serves it: the header (title, state, uptime, version, revision), the
// facts with the build's version last, the stat / breakdown / table objects
// of the page's schema, and the history behind its time series: a ring of
// the last 10 minutes, one sample every 2 s, each sample one value per
// series. `kvserve serve` (server/status.h) and `kvserve gateway`
// (gateway/status_board.h) each add what only they show.
// Thread-safety: Sample and Document may be called from any thread (one
// mutex guards the history); the static builders are pure.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/metrics.h"
#include "metrics/process_metrics.h"

namespace kvs::metrics {

class StatusFrame {
 public:
  static constexpr size_t kSamples = 300;  // 10 minutes at one per 2 s
  static constexpr double kSampleSeconds = 2.0;

  struct Series {
    std::string label;   // "TTFT p50"
    std::string format;  // the page's formats: "seconds", "rate", "percent", "int", "bytes"
  };
  using Facts = std::vector<std::pair<std::string, std::string>>;  // [label, text] rows

  // Figures over the time since the previous sample, from cumulative
  // readings taken now; each reading is remembered under its key for the
  // next sample (the first sample compares with zero at construction).
  class Interval {
   public:
    // (cumulative - its previous value) per second; 0 when no time passed.
    double Rate(const std::string& key, double cumulative);
    // Quantile q of the observations since the previous sample; NaN when
    // there were none.
    double Quantile(const std::string& key, double q, const Histogram::Snapshot& now);

   private:
    friend class StatusFrame;
    Interval(StatusFrame* frame, double dt) : frame_(frame), dt_(dt) {}
    StatusFrame* frame_;
    double dt_;
    std::map<std::string, double> next_counters_;
    std::map<std::string, Histogram::Snapshot> next_histograms_;
  };

  StatusFrame(std::string title, const ProcessMetrics* process, std::vector<Series> series,
              size_t capacity = kSamples);

  // One sample now: `values` returns one value per series, in order (NaN
  // draws a gap). Read the metrics before calling: `values` runs under the
  // frame's lock and should only compute.
  void Sample(const std::function<std::vector<double>(Interval&)>& values);

  // The header, `facts` then the build's version, and the series; the
  // caller adds "stats", "breakdown" and "table".
  nlohmann::json Document(std::string_view state, const Facts& facts) const;

  // {"label", "value", "format", "metric"}: one stat card and the series of
  // /metrics it mirrors.
  static nlohmann::json Stat(std::string_view label, double value, std::string_view format, std::string_view metric);
  // A Stat counting the responses of one status class ('4': 4xx, '5': 5xx)
  // in `family` (a counter with a "status" label), named
  // sum(NAME{status=~"C.."}) after the series it mirrors. With api_prefix
  // (e.g. "/v1/"), only series whose "path" starts with it count (not the
  // probes: a loading server's /ready 503s are not failures), named
  // sum(NAME{path=~"PREFIX.+",status=~"C.."}).
  // The sum behind a StatusClassStat (cls '0': every status).
  static double StatusClassSum(const Family<Counter>& family, char cls, std::string_view api_prefix = "");
  static nlohmann::json StatusClassStat(std::string_view label, const Family<Counter>& family, std::string_view name,
                                        char cls, std::string_view api_prefix = "");
  // {"title", "format", "parts"}: parts are {"label", "value", "metric"}.
  static nlohmann::json Breakdown(std::string_view title, std::string_view format, nlohmann::json parts);
  // {"title", "columns", "rows"}.
  static nlohmann::json Table(std::string_view title, const std::vector<std::string>& columns, nlohmann::json rows);

  size_t size() const;  // samples held

 private:
  const std::string title_;
  const ProcessMetrics* process_;
  const std::vector<Series> series_;
  const size_t capacity_;
  mutable std::mutex mu_;
  // guarded by mu_: samples oldest first, each the time then one value per series
  std::deque<std::pair<double, std::vector<double>>> samples_;
  double last_t_;                                       // guarded by mu_
  std::map<std::string, double> counters_;              // guarded by mu_
  std::map<std::string, Histogram::Snapshot> histograms_;  // guarded by mu_
};

}  // namespace kvs::metrics
