// Metrics: counters, gauges and histograms, optionally with labels, and
// their Prometheus text exposition (format 0.0.4).
//
// A Registry owns metric families; a family has a name, help text, type and
// label names, and one child per distinct label-value tuple (created on first
// use and kept for the registry's life, so references to children stay valid).
// Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); kvserve's carry
// the "kvserve:" prefix (docs/metrics.md lists them all).
//
// Histograms have fixed, increasing upper bounds; exposition gives the
// cumulative _bucket{le=...} series, +Inf, _sum and _count, read under the
// histogram's lock so the three always agree.
//
// Thread-safety: everything is thread-safe. Counter/Gauge updates are
// lock-free atomics; child lookup takes the family's mutex (keep the
// returned reference when updating in a loop).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kvs::metrics {

class Counter {
 public:
  void Inc(double v = 1.0);  // v >= 0
  // For totals kept elsewhere (e.g. by the engine): raises the value to v,
  // never lowers it (a counter is monotonic).
  void SetMax(double v);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  // Raises the value to v, never lowers it (peaks updated from several threads).
  void SetMax(double v);
  void Inc(double v = 1.0);
  void Dec(double v = 1.0) { Inc(-v); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // strictly increasing, finite
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // [bounds.size() + 1], the last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
  // Mirrors a histogram kept elsewhere whose counts only grow (an engine's
  // per-step counts): each bucket's count (per bucket, not cumulative;
  // [bounds + 1]) and the sum become the larger of theirs and these.
  void RaiseTo(const std::vector<uint64_t>& counts, double sum);

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; [bounds + 1]
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class MetricType { kCounter, kGauge, kHistogram };

template <typename T>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::vector<double> bounds = {})
      : label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}

  // The child for these label values (as many as label names).
  T& With(const std::vector<std::string>& values);
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Children in label order, for exposition; hidden ones left out.
  std::vector<std::pair<std::vector<std::string>, const T*>> Children() const;

  // Hides (or shows again) every child whose label `label` has `value`: a
  // thing that went away (a replica that left its pool) stops being
  // exported, while references to its children stay valid and a late update
  // neither fails nor brings the series back. No-op without that label.
  void SetHidden(const std::string& label, const std::string& value, bool hidden);

 private:
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
  std::set<std::pair<size_t, std::string>> hidden_;  // (label index, value); guarded by mu_
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each name may be registered once (a second time is a program error).
  Family<Counter>& AddCounter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                  std::vector<std::string> labels = {});

  // Unlabelled shorthands: the family's only child.
  Counter& Counter0(const std::string& name, const std::string& help) { return AddCounter(name, help).With({}); }
  Gauge& Gauge0(const std::string& name, const std::string& help) { return AddGauge(name, help).With({}); }
  Histogram& Histogram0(const std::string& name, const std::string& help, std::vector<double> bounds) {
    return AddHistogram(name, help, std::move(bounds)).With({});
  }

  // Prometheus text exposition of every family, in registration order.
  std::string Render() const;

  // Family::SetHidden on every family with a label named `label`.
  void SetHidden(const std::string& label, const std::string& value, bool hidden);

 private:
  struct Entry {
    std::string name, help;
    MetricType type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  void CheckNew(const std::string& name) const;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

// Exposition helpers (exposed for tests).
std::string FormatMetricValue(double v);         // "1", "0.25", "+Inf", "NaN"
std::string EscapeLabelValue(const std::string& v);  // \ " and newline escaped
bool IsValidMetricName(const std::string& name);

// Bucket bounds: start, start*factor, ... (count bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// The q-quantile (0 <= q <= 1) of the observations between two snapshots
// of one histogram (`before` may be null: since start), interpolated
// linearly inside the bucket as Prometheus' histogram_quantile does; the
// +Inf bucket answers its lower bound. NaN when nothing was observed.
double HistogramQuantile(double q, const Histogram::Snapshot& now, const Histogram::Snapshot* before);

// Resident set size of this process in bytes (0 if unknown).
uint64_t ProcessResidentBytes();

}  // namespace kvs::metrics
