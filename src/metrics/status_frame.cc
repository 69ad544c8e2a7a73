#include "metrics/status_frame.h"

#include <algorithm>

#include <fmt/format.h>

#include "metrics/status_page.h"

namespace kvs::metrics {

using nlohmann::json;

double StatusFrame::Interval::Rate(const std::string& key, double cumulative) {
  next_counters_[key] = cumulative;
  if (dt_ <= 0) return 0;
  auto it = frame_->counters_.find(key);
  const double before = it == frame_->counters_.end() ? 0 : it->second;
  return (cumulative - before) / dt_;
}

double StatusFrame::Interval::Quantile(const std::string& key, double q, const Histogram::Snapshot& now) {
  next_histograms_[key] = now;
  auto it = frame_->histograms_.find(key);
  return HistogramQuantile(q, now, it == frame_->histograms_.end() ? nullptr : &it->second);
}

StatusFrame::StatusFrame(std::string title, const ProcessMetrics* process, std::vector<Series> series, size_t capacity)
    : title_(std::move(title)),
      process_(process),
      series_(std::move(series)),
      capacity_(capacity),
      last_t_(UnixNowSeconds()) {}

void StatusFrame::Sample(const std::function<std::vector<double>(Interval&)>& values) {
  const double now = UnixNowSeconds();
  std::lock_guard<std::mutex> lock(mu_);
  Interval in(this, last_t_ > 0 ? now - last_t_ : 0);
  std::vector<double> v = values(in);
  v.resize(series_.size(), 0);
  for (auto& [key, value] : in.next_counters_) counters_[key] = value;
  for (auto& [key, snapshot] : in.next_histograms_) histograms_[key] = std::move(snapshot);
  last_t_ = now;
  samples_.emplace_back(now, std::move(v));
  while (samples_.size() > capacity_) samples_.pop_front();
}

json StatusFrame::Document(std::string_view state, const Facts& facts) const {
  json j;
  j["title"] = title_;
  j["state"] = state;
  j["uptime_seconds"] = process_->uptime_seconds();
  j["version"] = BuildVersion();
  j["revision"] = BuildRevision();
  json f = json::array();
  for (const auto& [label, text] : facts) f.push_back(json::array({label, text}));
  f.push_back(json::array({"Version", fmt::format("{} ({})", BuildVersion(), BuildRevision())}));
  j["facts"] = std::move(f);
  json series = json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < series_.size(); ++i) {
    json points = json::array();
    for (const auto& [t, values] : samples_) points.push_back(json::array({t, NumberOrNull(values[i])}));
    series.push_back({{"label", series_[i].label}, {"format", series_[i].format}, {"points", std::move(points)}});
  }
  j["series"] = std::move(series);
  return j;
}

json StatusFrame::Stat(std::string_view label, double value, std::string_view format, std::string_view metric) {
  return json{{"label", label}, {"value", value}, {"format", format}, {"metric", metric}};
}

double StatusFrame::StatusClassSum(const Family<Counter>& family, char cls, std::string_view api_prefix) {
  const auto& names = family.label_names();
  const auto index = [&](const char* l) {
    return static_cast<size_t>(std::find(names.begin(), names.end(), l) - names.begin());
  };
  const size_t status = index("status"), path = index("path");
  double sum = 0;
  for (const auto& [labels, c] : family.Children()) {
    if (status >= labels.size() || labels[status].size() != 3 || (cls != '0' && labels[status][0] != cls)) continue;
    if (!api_prefix.empty() && (path >= labels.size() || labels[path].rfind(api_prefix, 0) != 0)) continue;
    sum += c->Value();
  }
  return sum;
}

json StatusFrame::StatusClassStat(std::string_view label, const Family<Counter>& family, std::string_view name,
                                  char cls, std::string_view api_prefix) {
  const double sum = StatusClassSum(family, cls, api_prefix);
  const std::string paths = api_prefix.empty() ? "" : fmt::format("path=~\"{}.+\",", api_prefix);
  return Stat(label, sum, "int", fmt::format("sum({}{{{}status=~\"{}..\"}})", name, paths, cls));
}

json StatusFrame::Breakdown(std::string_view title, std::string_view format, json parts) {
  return json{{"title", title}, {"format", format}, {"parts", std::move(parts)}};
}

json StatusFrame::Table(std::string_view title, const std::vector<std::string>& columns, json rows) {
  return json{{"title", title}, {"columns", columns}, {"rows", std::move(rows)}};
}

size_t StatusFrame::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_.size();
}

}  // namespace kvs::metrics
