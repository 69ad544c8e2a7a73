#include "bench/soak.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "bench/endpoint.h"
#include "bench/load_report.h"
#include "bench/load_runner.h"
#include "bench/workload.h"

namespace kvs::bench {

namespace {

using Clock = std::chrono::steady_clock;

int Fail(const Status& st) {
  std::fprintf(stderr, "error: %s\n", st.message().c_str());
  return 2;
}

// One window's line, started `start` seconds into the soak: requests,
// errors by class, probes, server figures.
std::string WindowLine(double start, const RunResult& run) {
  std::vector<const RequestRecord*> plain, probes;
  for (const RequestRecord& r : run.requests) (r.probe.kind == ProbeKind::kNone ? plain : probes).push_back(&r);
  const Figures f = ComputeFigures(plain, run.duration, {});
  const MetricsPeaks peaks = ComputePeaks(run.metrics);
  std::string s = fmt::format("[{:6.0f} s] {} requests, {} ok", start, f.sent, f.ok);
  for (auto& [k, n] : f.errors) s += fmt::format(", {} x{}", k, n);
  for (const ProbeTally& t : TallyProbes(probes)) s += fmt::format("; {} {}/{}", ProbeKindName(t.kind), t.ok, t.sent);
  if (peaks.rss_bytes) s += fmt::format("; RSS {:.1f} MiB", *peaks.rss_bytes / 1048576.0);
  if (peaks.kv_peak) s += fmt::format("; peak KV {:.1f} %", *peaks.kv_peak * 100);
  return s;
}

}  // namespace

int RunSoak(const SoakOptions& in) {
  SoakOptions o = in;
  if (o.seed == 0) o.seed = std::random_device{}() | 1u;
  if (!(o.duration_seconds > 0)) return Fail(InvalidArgument("--duration must be > 0"));
  if (o.concurrency < 1) return Fail(InvalidArgument("--concurrency must be >= 1"));
  const double window =
      o.window_seconds > 0 ? o.window_seconds : std::clamp(o.duration_seconds / 10, 5.0, 60.0);
  EndpointOptions eo;
  eo.url = o.url;
  eo.api_key = o.api_key;
  eo.model = o.model;
  eo.request_timeout_seconds = o.request_timeout;
  eo.metrics_urls = o.replica_metrics;
  auto ep_or = Endpoint::Create(eo);
  if (!ep_or.ok()) return Fail(ep_or.status());
  Endpoint& ep = **ep_or;
  auto info = ep.Discover();
  if (!info.ok()) return Fail(info.status());
  auto counter_or = ep.CounterOrLocal(o.tokenizer);
  if (!counter_or.ok()) return Fail(counter_or.status());
  std::unique_ptr<TokenCounter> counter = std::move(*counter_or);

  WorkloadSpec spec;
  spec.name = "soak";
  if (o.api == "chat") {
    spec.api = ApiKind::kChat;
  } else if (o.api != "completions") {
    return Fail(InvalidArgument("--api must be completions or chat, not '{}'", o.api));
  }
  spec.concurrency = {o.concurrency};
  spec.output_len = o.output_len;
  spec.duration_seconds = window;
  auto mix = ParseMix(o.mix);
  if (!mix.ok()) return Fail(mix.status().WithContext("--mix"));
  // Lengths that do not fit the context are left out (over-length probes
  // test that case on purpose).
  for (auto& [len, w] : *mix) {
    if (!info->context || len + o.output_len <= *info->context) spec.mix.emplace_back(len, w);
  }
  if (spec.mix.empty()) return Fail(InvalidArgument("no length of --mix {} fits the context", o.mix));
  if (!o.probes.empty()) {
    auto p = ParseProbes(o.probes);
    if (!p.ok()) return Fail(p.status());
    spec.probes = *p;
  }
  if (Status st = ValidateSpec(spec); !st.ok()) return Fail(st);
  std::fprintf(stderr,
               "soak %s (%s): model %s, %.0f s in windows of %.0f s, concurrency %d, mix %s, probes %s (seed %llu)\n",
               ep.url().ToString().c_str(), info->server.empty() ? "?" : info->server.c_str(), info->model.c_str(),
               o.duration_seconds, window, o.concurrency, o.mix.c_str(), o.probes.c_str(),
               static_cast<unsigned long long>(o.seed));

  // Windows until the duration is spent. Each sends what it can in its
  // time: the request count is planned from the last window's rate.
  std::vector<RunResult> results;  // one per window
  std::vector<double> starts;       // each window's start, seconds since the soak began
  const Clock::time_point t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  int64_t planned = static_cast<int64_t>(o.concurrency) * 8;
  std::string lost;  // why the soak stopped early, when the endpoint went away
  for (int w = 0; elapsed() < o.duration_seconds; ++w) {
    WorkloadSpec s = spec;
    s.seed = o.seed + static_cast<uint64_t>(w) * 1000003u;
    s.duration_seconds = std::min(window, std::max(o.duration_seconds - elapsed(), 1.0));
    s.num_requests = planned;
    auto runs = ExpandRuns(s);
    if (!runs.ok()) return Fail(runs.status());
    auto prepared = PreparePrompts(runs->front(), *counter, {}, info->context);
    if (!prepared.ok() && !ep.Get("/health", 5).ok()) {
      // The endpoint answered discovery but no longer answers at all: it
      // went away during the soak (a crash is what a soak is for).
      lost = prepared.status().message();
      std::fprintf(stderr, "[%6.0f s] the endpoint stopped answering: %s\n", elapsed(), lost.c_str());
      break;
    }
    if (!prepared.ok()) return Fail(prepared.status().WithContext("preparing prompts"));
    LoadOptions lo;
    lo.metrics_interval_seconds = info->has_metrics ? 1.0 : 0;
    lo.progress = false;
    const double start = elapsed();
    RunResult run = RunLoad(ep, *prepared, lo);
    const double took = std::max(elapsed() - start, 1e-3);
    int64_t sent = 0;
    for (const RequestRecord& r : run.requests) sent += r.sent >= 0;
    // Ran out of requests before the window's end: plan more next time.
    planned = std::clamp<int64_t>(static_cast<int64_t>(1.5 * static_cast<double>(sent) / took * window),
                                  static_cast<int64_t>(o.concurrency) * 4, static_cast<int64_t>(o.concurrency) * 64);
    if (o.progress) std::fprintf(stderr, "%s\n", WindowLine(start, run).c_str());
    results.push_back(std::move(run));
    starts.push_back(start);
  }

  // Idle: KV back to 0, and the endpoint still there.
  std::optional<double> idle_kv;
  double idle_after = 0;
  if (info->has_metrics) {
    const double until = elapsed() + o.kv_idle_seconds;
    const double idle_t0 = elapsed();
    for (;;) {
      auto p = ReadMetricsPoint(ep, elapsed());
      if (p.ok() && p->g.kv_usage) {
        idle_kv = *p->g.kv_usage;
        idle_after = elapsed() - idle_t0;
        if (*idle_kv <= 0) break;
      }
      if (elapsed() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  auto health = ep.Get("/health", 10);
  const bool healthy = health.ok() && health->status == 200;

  CheckOptions co;
  co.answers_min = o.answers_min;
  co.memory_ratio_max = o.memory_ratio_max;
  co.kv_watermark_max = o.kv_watermark_max;
  co.behind_gateway = info->server == "kvserve gateway" && o.replica_metrics.empty();
  BenchReport report = AnalyzeRuns(results, {}, co);
  std::vector<Check> checks;
  {
    Check c;
    c.name = "alive";
    int64_t refused = 0;
    for (const RunResult& r : results) {
      for (const RequestRecord& q : r.requests) refused += q.error_kind == "connect";
    }
    c.value = static_cast<double>(refused);
    c.status = refused == 0 && healthy && lost.empty() ? CheckStatus::kPass : CheckStatus::kFail;
    c.detail = fmt::format("{} refused connections in {} windows; /health afterwards: {}", refused, results.size(),
                           health.ok() ? fmt::format("HTTP {}", health->status) : health.status().message());
    if (!lost.empty()) c.detail += "; stopped early: " + lost;
    checks.push_back(c);
  }
  for (const Check& c : report.checks) {
    if (c.name != "ttft_growth" && c.name != "preemptions") checks.push_back(c);
  }
  {
    Check c;
    c.name = "kv_idle";
    c.threshold = 0;
    if (!idle_kv) {
      c.detail = "the endpoint exports no KV cache usage (--replica-metrics for the replicas behind a gateway)";
    } else {
      c.value = *idle_kv;
      c.status = *idle_kv <= 0 ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = *idle_kv <= 0 ? fmt::format("KV use back to 0 {:.1f} s after the last request", idle_after)
                               : fmt::format("KV use still {:.2f} % {:.0f} s after the last request (blocks leaked)",
                                             *idle_kv * 100, o.kv_idle_seconds);
    }
    checks.push_back(c);
  }
  // RSS over the whole soak: (seconds since start, bytes), the largest
  // source's figure at each sample.
  std::vector<std::pair<double, double>> rss;
  for (size_t i = 0; i < results.size(); ++i) {
    for (const MetricsPoint& m : results[i].metrics) {
      if (m.g.rss_bytes) rss.emplace_back(starts[i] + m.t, *m.g.rss_bytes);
    }
  }
  {
    Check c;
    c.name = "rss_growth";
    c.threshold = o.rss_growth_max;
    const double base_at = std::min(300.0, 0.2 * o.duration_seconds);
    auto base = std::find_if(rss.begin(), rss.end(), [&](const auto& p) { return p.first >= base_at; });
    if (rss.size() < 2 || base == rss.end() || base->second <= 0) {
      c.detail = "no resident memory in the endpoint's /metrics (kvserve:process_resident_memory_bytes)";
    } else {
      const double growth = (rss.back().second - base->second) / base->second;
      c.value = growth;
      c.status = growth < o.rss_growth_max ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = fmt::format("RSS {:.1f} MiB at {:.0f} s -> {:.1f} MiB at {:.0f} s: {:+.1f} % ({} {:.0f} %)",
                             base->second / 1048576.0, base->first, rss.back().second / 1048576.0, rss.back().first,
                             growth * 100, c.status == CheckStatus::kPass ? "<" : ">=", o.rss_growth_max * 100);
    }
    checks.push_back(c);
  }

  // Totals by kind and class.
  std::map<std::string, std::map<std::string, int64_t>> classes;  // kind -> class -> n
  int64_t total = 0;
  for (const RunResult& r : results) {
    for (const RequestRecord& q : r.requests) {
      if (q.sent < 0) continue;
      ++total;
      const std::string kind = q.probe.kind == ProbeKind::kNone ? "ordinary" : ProbeKindName(q.probe.kind);
      const std::string cls = q.status > 0 ? std::to_string(q.status) : q.error_kind;
      ++classes[kind][q.status == 200 && !q.error.empty() ? q.error_kind : cls];
    }
  }
  std::printf("=== soak: %lld requests in %.0f s (%zu windows)\n", static_cast<long long>(total), elapsed(),
              results.size());
  for (auto& [kind, m] : classes) {
    std::string line;
    for (auto& [cls, n] : m) line += fmt::format("{}{} x{}", line.empty() ? "" : ", ", cls, n);
    std::printf("  %-12s %s\n", kind.c_str(), line.c_str());
  }
  std::printf("=== checks\n");
  bool passed = true;
  for (const Check& c : checks) {
    std::printf("%s\n", c.Line().c_str());
    passed = passed && c.status != CheckStatus::kFail;
  }
  std::fflush(stdout);

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["tool"] = "kvserve soak";
    j["url"] = o.url;
    j["endpoint"] = info->ToJson();
    j["seed"] = o.seed;
    j["settings"] = {{"duration_seconds", o.duration_seconds}, {"window_seconds", window},
                     {"concurrency", o.concurrency},          {"api", o.api},
                     {"mix", o.mix},                          {"output_len", o.output_len},
                     {"probes", o.probes}};
    nlohmann::json ws = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const RunReport& rr = report.runs[i];
      nlohmann::json probes = nlohmann::json::array();
      for (const ProbeTally& t : rr.probes) probes.push_back(t.ToJson());
      auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
      ws.push_back({{"start", starts[i]},
                    {"figures", rr.all.ToJson()},
                    {"probes", probes},
                    {"kv_usage_peak", opt(rr.peaks.kv_peak)},
                    {"rss_bytes_peak", opt(rr.peaks.rss_bytes)}});
    }
    j["windows"] = ws;
    nlohmann::json series = nlohmann::json::array();
    for (auto& [t, b] : rss) series.push_back({t, b});
    j["rss_series"] = series;
    j["classes"] = classes;
    nlohmann::json cs = nlohmann::json::array();
    for (const Check& c : checks) cs.push_back(c.ToJson());
    j["checks"] = cs;
    j["passed"] = passed;
    std::ofstream out(o.json_path);
    out << j.dump(2) << "\n";
    if (!out) return Fail(Internal("cannot write {}", o.json_path));
    std::fprintf(stderr, "wrote %s\n", o.json_path.c_str());
  }
  return passed ? 0 : 1;
}

}  // namespace kvs::bench
