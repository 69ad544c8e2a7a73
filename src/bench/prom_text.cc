#include "bench/prom_text.h"

#include <algorithm>
#include <cmath>

namespace kvs::bench {

const MetricNames& KnownMetricNames() {
  static const MetricNames names = [] {
    MetricNames n;
    n.kv_usage = {"kvserve:kv_cache_usage_ratio",  "kvserve_gateway:kv_cache_usage_ratio",
                  "vllm:kv_cache_usage_perc",      "vllm:gpu_cache_usage_perc",
                  "sglang:token_usage",            "lmdeploy:gpu_cache_usage_perc",
                  "trtllm_kv_cache_utilization",   "llamacpp:kv_cache_usage_ratio"};
    n.queue = {"kvserve:num_requests_waiting", "kvserve_gateway:num_requests_waiting",
               "vllm:num_requests_waiting",    "sglang:num_queue_reqs",
               "lmdeploy:num_requests_waiting", "trtllm_num_requests_waiting",
               "tgi_queue_size",               "llamacpp:requests_deferred"};
    n.running = {"kvserve:num_requests_running", "kvserve_gateway:num_requests_running",
                 "vllm:num_requests_running",    "sglang:num_running_reqs",
                 "lmdeploy:num_requests_running", "trtllm_num_requests_running",
                 "tgi_batch_current_size",       "llamacpp:requests_processing"};
    n.preemptions = {"kvserve:num_preemptions_total", "kvserve_gateway:num_preemptions_total",
                     "vllm:num_preemptions_total",    "vllm:num_preemptions",
                     "sglang:num_retracted_requests_total"};
    return n;
  }();
  return names;
}

ServerGauges ExtractGauges(const PromPage& page, const MetricNames& names) {
  ServerGauges g;
  auto find = [&](const std::vector<std::string>& candidates, bool take_max,
                  std::string* matched) -> std::optional<double> {
    for (const std::string& name : candidates) {
      std::optional<double> v;
      for (const PromSample& s : page.samples) {
        if (s.name != name || std::isnan(s.value)) continue;
        v = !v ? s.value : (take_max ? std::max(*v, s.value) : *v + s.value);
      }
      if (v) {
        if (matched) *matched = name;
        return v;
      }
    }
    return std::nullopt;
  };
  std::string kv_name, queue_name;
  g.kv_usage = find(names.kv_usage, true, &kv_name);
  if (g.kv_usage && std::find(names.kv_usage_percent.begin(), names.kv_usage_percent.end(), kv_name) !=
                        names.kv_usage_percent.end()) {
    *g.kv_usage /= 100.0;
  }
  g.queue = find(names.queue, false, &queue_name);
  g.running = find(names.running, false, nullptr);
  g.preemptions = find(names.preemptions, false, nullptr);
  g.kv_peak_since_start = find({"kvserve:kv_cache_usage_peak_ratio"}, true, nullptr);
  g.rss_bytes = find({"kvserve:process_resident_memory_bytes", "process_resident_memory_bytes"}, true, nullptr);
  g.plan_bytes = find({"kvserve:memory_bytes"}, false, nullptr);
  const std::string& any = !kv_name.empty() ? kv_name : queue_name;
  if (!any.empty()) {
    const size_t colon = any.find(':');
    const size_t under = any.find('_');
    g.source = any.substr(0, colon != std::string::npos ? colon : under);
  }
  return g;
}

ServerGauges Combine(const std::vector<ServerGauges>& each) {
  ServerGauges g;
  const auto max = [](std::optional<double>& acc, const std::optional<double>& v) {
    if (v) acc = acc ? std::max(*acc, *v) : *v;
  };
  const auto sum = [](std::optional<double>& acc, const std::optional<double>& v) {
    if (v) acc = acc ? *acc + *v : *v;
  };
  for (const ServerGauges& s : each) {
    max(g.kv_usage, s.kv_usage);
    sum(g.queue, s.queue);
    sum(g.running, s.running);
    sum(g.preemptions, s.preemptions);
    max(g.kv_peak_since_start, s.kv_peak_since_start);
    max(g.rss_bytes, s.rss_bytes);
    max(g.plan_bytes, s.plan_bytes);
    if (g.source.empty()) g.source = s.source;
  }
  return g;
}

}  // namespace kvs::bench
