#include "metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include <fmt/format.h>
#include <unistd.h>

#include "base/status.h"

namespace kvs::metrics {

namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::string EscapeHelp(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} plus an optional extra label (le="..."); "" when empty.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra_name + "=\"" + EscapeLabelValue(extra_value) + "\"";
  }
  if (!out.empty()) out += "}";
  return out;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

void Counter::Inc(double v) {
  if (v > 0) AtomicAdd(value_, v);
}

void Counter::SetMax(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (v > cur && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void Gauge::Inc(double v) { AtomicAdd(value_, v); }

void Gauge::SetMax(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (v > cur && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    KVS_CHECK(std::isfinite(bounds_[i]));
    if (i > 0) KVS_CHECK(bounds_[i] > bounds_[i - 1]);
  }
}

void Histogram::Observe(double v) {
  // Bucket i holds values in (bounds[i-1], bounds[i]]; the last is +Inf.
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::RaiseTo(const std::vector<uint64_t>& counts, double sum) {
  KVS_CHECK(counts.size() == counts_.size());
  std::lock_guard<std::mutex> lock(mu_);
  count_ = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    counts_[i] = std::max(counts_[i], counts[i]);
    count_ += counts_[i];
  }
  sum_ = std::max(sum_, sum);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t acc = 0;
  for (uint64_t c : counts_) {
    acc += c;
    s.cumulative.push_back(acc);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

template <typename T>
T& Family<T>::With(const std::vector<std::string>& values) {
  KVS_CHECK_MSG(values.size() == label_names_.size(), "{} label values for {} labels", values.size(),
                label_names_.size());
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = children_[values];
  if (!slot) {
    if constexpr (std::is_same_v<T, Histogram>) {
      slot = std::make_unique<Histogram>(bounds_);
    } else {
      slot = std::make_unique<T>();
    }
  }
  return *slot;
}

template <typename T>
std::vector<std::pair<std::vector<std::string>, const T*>> Family<T>::Children() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::vector<std::string>, const T*>> out;
  for (const auto& [k, v] : children_) {
    bool hidden = false;
    for (const auto& [i, value] : hidden_) hidden = hidden || k[i] == value;
    if (!hidden) out.emplace_back(k, v.get());
  }
  return out;
}

template <typename T>
void Family<T>::SetHidden(const std::string& label, const std::string& value, bool hidden) {
  const auto it = std::find(label_names_.begin(), label_names_.end(), label);
  if (it == label_names_.end()) return;
  const auto key = std::make_pair(static_cast<size_t>(it - label_names_.begin()), value);
  std::lock_guard<std::mutex> lock(mu_);
  if (hidden) {
    hidden_.insert(key);
  } else {
    hidden_.erase(key);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::CheckNew(const std::string& name) const {
  KVS_CHECK_MSG(IsValidMetricName(name), "invalid metric name {}", name);
  for (const auto& e : entries_) KVS_CHECK_MSG(e->name != name, "metric {} registered twice", name);
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNew(name);
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = MetricType::kCounter;
  e->counter = std::make_unique<Family<Counter>>(std::move(labels));
  auto& f = *e->counter;
  entries_.push_back(std::move(e));
  return f;
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNew(name);
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = MetricType::kGauge;
  e->gauge = std::make_unique<Family<Gauge>>(std::move(labels));
  auto& f = *e->gauge;
  entries_.push_back(std::move(e));
  return f;
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<double> bounds, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNew(name);
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = MetricType::kHistogram;
  e->histogram = std::make_unique<Family<Histogram>>(std::move(labels), std::move(bounds));
  auto& f = *e->histogram;
  entries_.push_back(std::move(e));
  return f;
}

void Registry::SetHidden(const std::string& label, const std::string& value, bool hidden) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_) {
    if (e->counter) e->counter->SetHidden(label, value, hidden);
    if (e->gauge) e->gauge->SetHidden(label, value, hidden);
    if (e->histogram) e->histogram->SetHidden(label, value, hidden);
  }
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& e : entries_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", e->name, EscapeHelp(e->help), e->name, TypeName(e->type));
    switch (e->type) {
      case MetricType::kCounter:
        for (const auto& [labels, c] : e->counter->Children()) {
          out += e->name + LabelSet(e->counter->label_names(), labels) + " " + FormatMetricValue(c->Value()) + "\n";
        }
        break;
      case MetricType::kGauge:
        for (const auto& [labels, g] : e->gauge->Children()) {
          out += e->name + LabelSet(e->gauge->label_names(), labels) + " " + FormatMetricValue(g->Value()) + "\n";
        }
        break;
      case MetricType::kHistogram:
        for (const auto& [labels, h] : e->histogram->Children()) {
          const auto& names = e->histogram->label_names();
          const Histogram::Snapshot s = h->Read();
          for (size_t i = 0; i <= s.bounds.size(); ++i) {
            const std::string le = i < s.bounds.size() ? FormatMetricValue(s.bounds[i]) : "+Inf";
            out += e->name + "_bucket" + LabelSet(names, labels, "le", le) + " " + std::to_string(s.cumulative[i]) +
                   "\n";
          }
          out += e->name + "_sum" + LabelSet(names, labels) + " " + FormatMetricValue(s.sum) + "\n";
          out += e->name + "_count" + LabelSet(names, labels) + " " + std::to_string(s.count) + "\n";
        }
        break;
    }
  }
  return out;
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);  // shortest representation that round-trips
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool IsValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

double HistogramQuantile(double q, const Histogram::Snapshot& now, const Histogram::Snapshot* before) {
  const size_t n = now.cumulative.size();
  std::vector<double> cum(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t b = before && i < before->cumulative.size() ? before->cumulative[i] : 0;
    cum[i] = static_cast<double>(now.cumulative[i] >= b ? now.cumulative[i] - b : 0);
  }
  if (n == 0 || cum[n - 1] <= 0) return std::nan("");
  const double rank = q * cum[n - 1];
  size_t i = 0;
  while (i < n - 1 && cum[i] < rank) ++i;
  if (i == n - 1) return now.bounds.empty() ? std::nan("") : now.bounds.back();  // the +Inf bucket
  const double lo = i == 0 ? 0.0 : now.bounds[i - 1];
  const double hi = now.bounds[i];
  const double below = i == 0 ? 0.0 : cum[i - 1];
  const double in_bucket = cum[i] - below;
  return in_bucket > 0 ? lo + (hi - lo) * (rank - below) / in_bucket : hi;
}

uint64_t ProcessResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace kvs::metrics
