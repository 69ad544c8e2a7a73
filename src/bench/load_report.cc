#include "bench/load_report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace kvs::bench {

namespace {

nlohmann::json SummaryJson(const Summary& s, const std::vector<double>& percentiles) {
  nlohmann::json j = {{"count", s.count}, {"mean", s.mean}, {"stddev", s.stddev}, {"p50", s.p50},
                      {"p90", s.p90},     {"p99", s.p99},   {"max", s.max},       {"min", s.min}};
  for (double p : percentiles) j[fmt::format("p{:g}", p)] = s.At(p);
  return j;
}

std::string Pct(double v) { return fmt::format("{:.1f} %", v * 100); }

// Input length of a request for bucketing: the server's prompt count for
// multi-turn (the history grows), else the target.
int64_t LengthOf(const RequestRecord& r, bool multi) {
  if (multi && r.prompt_tokens > 0) return r.prompt_tokens;
  return r.input_tokens;
}

}  // namespace

nlohmann::json Figures::ToJson() const {
  nlohmann::json j = {{"planned", planned},
                      {"sent", sent},
                      {"ok", ok},
                      {"failed", failed},
                      {"good", good},
                      {"errors", errors},
                      {"duration_seconds", duration},
                      {"request_throughput", request_throughput},
                      {"input_token_throughput", input_throughput},
                      {"output_token_throughput", output_throughput},
                      {"goodput", goodput},
                      {"prompt_tokens", prompt_tokens},
                      {"output_tokens", output_tokens},
                      {"cached_share", cached_share ? nlohmann::json(*cached_share) : nlohmann::json(nullptr)},
                      {"max_send_lag_seconds", max_send_lag},
                      {"tokens_per_chunk", tokens_per_chunk ? nlohmann::json(*tokens_per_chunk) : nlohmann::json(nullptr)},
                      {"ttft", SummaryJson(ttft, percentiles)},
                      {"tpot", SummaryJson(tpot, percentiles)},
                      {"itl", SummaryJson(itl, percentiles)},
                      {"e2e", SummaryJson(e2e, percentiles)}};
  return j;
}

std::string SmallSampleNote(const Summary& s) {
  if (s.count == 0 || s.count >= 100) return "";
  return fmt::format("{} samples: {} the largest value (p90 needs 10 or more, p99 100)", s.count,
                     s.count < 10 ? "p90 and p99 only repeat" : "p99 only repeats");
}

std::vector<std::string> RunNotes(const Figures& f) {
  std::vector<std::string> notes;
  if (std::string n = SmallSampleNote(f.ttft); !n.empty()) notes.push_back(std::move(n));
  if (f.tokens_per_chunk && *f.tokens_per_chunk > 1.05) {
    notes.push_back(fmt::format("{:.2f} tokens per stream chunk: ITL is per chunk; TPOT is per token",
                                *f.tokens_per_chunk));
  }
  if (f.skipped > 0) {
    notes.push_back(fmt::format("{} dataset prompts are longer than the model's context: not sent", f.skipped));
  }
  return notes;
}

Figures ComputeFigures(const std::vector<const RequestRecord*>& records, double duration,
                       const std::vector<Slo>& slos, const std::vector<double>& percentiles) {
  Figures f;
  f.duration = duration;
  f.percentiles = percentiles;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t cached = 0, cached_prompt = 0, chunked_tokens = 0, chunks = 0;
  for (const RequestRecord* r : records) {
    ++f.planned;
    if (r->sent < 0) {
      f.skipped += r->error_kind == "skipped";
      continue;
    }
    ++f.sent;
    f.max_send_lag = std::max(f.max_send_lag, r->sent - r->scheduled);
    if (!r->ok()) {
      ++f.failed;
      std::string kind = r->error_kind;
      if (kind == "http_4xx" || kind == "http_5xx") kind = fmt::format("http_{}", r->status);
      ++f.errors[kind.empty() ? "other" : kind];
      continue;
    }
    ++f.ok;
    const int64_t prompt = r->prompt_tokens >= 0 ? r->prompt_tokens : r->input_tokens;
    f.prompt_tokens += prompt;
    f.output_tokens += r->OutputTokens();
    if (r->cached_tokens >= 0) {
      cached += r->cached_tokens;
      cached_prompt += prompt;
    }
    SloInput in;
    in.ok = true;
    in.prompt_tokens = prompt;
    in.ttft = r->Ttft();
    in.tpot = r->Tpot();
    in.e2e = r->E2e();
    const auto gaps = r->Itls();
    if (!gaps.empty()) in.max_itl = *std::max_element(gaps.begin(), gaps.end());
    if (MeetsSlos(in, slos)) ++f.good;
    if (in.ttft) ttft.push_back(*in.ttft);
    if (in.tpot) tpot.push_back(*in.tpot);
    if (in.e2e) e2e.push_back(*in.e2e);
    itl.insert(itl.end(), gaps.begin(), gaps.end());
    if (r->completion_tokens > 0 && !r->chunk_times.empty()) {
      chunked_tokens += r->completion_tokens;
      chunks += static_cast<int64_t>(r->chunk_times.size());
    }
  }
  if (chunks > 0) f.tokens_per_chunk = static_cast<double>(chunked_tokens) / static_cast<double>(chunks);
  if (duration > 0) {
    f.request_throughput = static_cast<double>(f.ok) / duration;
    f.input_throughput = static_cast<double>(f.prompt_tokens) / duration;
    f.output_throughput = static_cast<double>(f.output_tokens) / duration;
    f.goodput = static_cast<double>(f.good) / duration;
  }
  if (cached_prompt > 0) f.cached_share = static_cast<double>(cached) / static_cast<double>(cached_prompt);
  f.ttft = Summarize(std::move(ttft));
  f.tpot = Summarize(std::move(tpot));
  f.itl = Summarize(std::move(itl));
  f.e2e = Summarize(std::move(e2e));
  return f;
}

MetricsPeaks ComputePeaks(const std::vector<MetricsPoint>& points) {
  MetricsPeaks p;
  p.samples = static_cast<int>(points.size());
  if (points.empty()) return p;
  auto peak = [](std::optional<double>& acc, const std::optional<double>& v) {
    if (v) acc = acc ? std::max(*acc, *v) : *v;
  };
  std::optional<double> first_pre, last_pre;
  for (const MetricsPoint& m : points) {
    if (p.source.empty()) p.source = m.g.source;
    peak(p.kv_peak, m.g.kv_usage);
    peak(p.queue_peak, m.g.queue);
    peak(p.running_peak, m.g.running);
    if (m.g.preemptions) {
      if (!first_pre) first_pre = m.g.preemptions;
      last_pre = m.g.preemptions;
    }
  }
  if (first_pre) p.preemptions = std::max(0.0, *last_pre - *first_pre);
  p.span = points.back().t - points.front().t;
  // Per source: a peak gauge that rose between the first reading (before
  // the first request) and the last (after the last) is the run's exact
  // peak there; one that did not rise says only that the run stayed at or
  // below it, and the samples stand.
  const size_t n = points.front().sources.size();
  bool all_same = true;
  for (const MetricsPoint& m : points) all_same &= m.sources.size() == n;
  if (all_same) {
    std::optional<double> exact;
    for (size_t i = 0; i < n; ++i) {
      const auto& before = points.front().sources[i].kv_peak_since_start;
      const auto& after = points.back().sources[i].kv_peak_since_start;
      if (before && after && *after > *before + 1e-12) exact = exact ? std::max(*exact, *after) : *after;
      for (const MetricsPoint& m : points) {
        const ServerGauges& g = m.sources[i];
        if (!g.rss_bytes || !g.plan_bytes || *g.plan_bytes <= 0) continue;
        const double ratio = *g.rss_bytes / *g.plan_bytes;
        if (!p.memory_ratio || ratio > *p.memory_ratio) {
          p.memory_ratio = ratio;
          p.rss_bytes = g.rss_bytes;
          p.plan_bytes = g.plan_bytes;
        }
      }
    }
    if (exact && (!p.kv_peak || *exact >= *p.kv_peak)) {
      p.kv_peak = exact;
      p.kv_peak_exact = true;
    }
  }
  return p;
}

bool BenchReport::passed() const {
  return std::none_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == CheckStatus::kFail; });
}

BenchReport AnalyzeRuns(const std::vector<RunResult>& results, const std::vector<Slo>& slos,
                        const CheckOptions& options) {
  BenchReport rep;
  rep.slos = slos;
  for (const RunResult& run : results) {
    RunReport rr;
    std::vector<const RequestRecord*> all, probes;
    for (const RequestRecord& r : run.requests) (r.probe.kind == ProbeKind::kNone ? all : probes).push_back(&r);
    rr.all = ComputeFigures(all, run.duration, slos, options.percentiles);
    rr.probes = TallyProbes(probes);
    rr.peaks = ComputePeaks(run.metrics);
    // Buckets: each distinct length when there are few, else powers of two.
    const bool multi = run.plan.multi_turn.conversations > 0;
    std::set<int64_t> lens;
    for (const RequestRecord* r : all) {
      if (r->sent >= 0) lens.insert(LengthOf(*r, multi));
    }
    const bool exact = !multi && lens.size() <= 12;
    std::map<int64_t, std::vector<const RequestRecord*>> groups;  // key: bucket upper bound
    for (const RequestRecord* r : all) {
      const int64_t l = LengthOf(*r, multi);
      int64_t key = l;
      if (!exact) {
        key = 1;
        while (key < l) key *= 2;
      }
      groups[key].push_back(r);
    }
    for (auto& [key, recs] : groups) {
      BucketFigures b;
      b.hi = key;
      b.lo = exact ? key : key / 2 + 1;
      b.label = exact ? std::to_string(key) : fmt::format("{}-{}", b.lo, b.hi);
      b.f = ComputeFigures(recs, run.duration, slos, options.percentiles);
      rr.buckets.push_back(std::move(b));
    }
    rep.runs.push_back(std::move(rr));
  }

  // Length series: runs with a fixed input length grouped by everything
  // else; a mixed run's buckets form a series of their own.
  std::map<std::string, std::map<int64_t, std::vector<const RequestRecord*>>> series;
  for (size_t i = 0; i < results.size(); ++i) {
    const RunPlan& p = results[i].plan;
    // Conversations, datasets and lengths drawn from a distribution have
    // lengths of their own making (a request or two per length): no series.
    if (p.multi_turn.conversations > 0 || p.dataset) continue;
    std::set<int64_t> distinct;
    for (const RequestRecord& r : results[i].requests) distinct.insert(r.input_tokens);
    if (distinct.size() > 12) continue;
    std::string label = p.rate > 0 ? fmt::format("rate={:g}/s", p.rate) : fmt::format("c={}", p.concurrency);
    label += fmt::format(" out={} {}", p.output_len, ApiKindName(p.api));
    if (p.input_len == 0) label += fmt::format(" mix (run {})", i + 1);
    for (const RequestRecord& r : results[i].requests) {
      if (r.probe.kind == ProbeKind::kNone) series[label][r.input_tokens].push_back(&r);
    }
  }
  for (auto& [label, by_len] : series) {
    LengthSeries s;
    s.label = label;
    for (auto& [len, recs] : by_len) {
      Figures f = ComputeFigures(recs, 0, {});
      if (f.ttft.count == 0) continue;
      double work = 0;
      int64_t n = 0;
      for (const RequestRecord* r : recs) {
        if (!r->ok()) continue;
        const int64_t prompt = r->prompt_tokens >= 0 ? r->prompt_tokens : r->input_tokens;
        work += static_cast<double>(std::max<int64_t>(prompt - std::max<int64_t>(r->cached_tokens, 0), 1));
        ++n;
      }
      s.points.push_back({len, f.ttft.count, n > 0 ? work / static_cast<double>(n) : static_cast<double>(len),
                          f.ttft.p50, f.ttft.p90, f.tpot.p50, f.e2e.p50});
    }
    if (!s.points.empty()) rep.length_series.push_back(std::move(s));
  }

  // --- checks ---
  {
    Check c;
    c.name = "ttft_growth";
    c.threshold = options.ttft_jump_max;
    double worst = 0;
    std::string where;
    for (const LengthSeries& s : rep.length_series) {
      for (size_t k = 1; k < s.points.size(); ++k) {
        const LengthPoint& a = s.points[k - 1];
        const LengthPoint& b = s.points[k];
        if (a.ttft_p50 <= 0) continue;
        const double grow = b.ttft_p50 / a.ttft_p50;
        const double work = b.work / a.work;
        const double rel = grow / work;
        if (rel > worst || where.empty()) {
          worst = rel;
          where = fmt::format("{} -> {} tokens ({}): TTFT p50 {} -> {}, x{:.2f} for x{:.2f} the uncached prompt "
                              "tokens",
                              a.length, b.length, s.label, FormatSeconds(a.ttft_p50), FormatSeconds(b.ttft_p50), grow,
                              work);
        }
      }
    }
    if (where.empty()) {
      c.status = CheckStatus::kSkip;
      c.detail = "needs runs at two or more input lengths (e.g. --input-lengths 512:4096)";
    } else {
      c.value = worst;
      c.status = worst <= options.ttft_jump_max ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = fmt::format("largest TTFT jump relative to the prefill work's growth {:.2f} ({} {:g}); {}", worst,
                             c.status == CheckStatus::kPass ? "<=" : ">", options.ttft_jump_max, where);
    }
    rep.checks.push_back(c);
  }
  {
    Check c;
    c.name = "kv_watermark";
    c.threshold = options.kv_watermark_max;
    std::optional<double> peak;
    std::string at;
    bool exact = false;  // the peak came from a server's peak gauge
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& p = rep.runs[i].peaks.kv_peak;
      if (p && (!peak || *p > *peak)) {
        peak = p;
        at = results[i].plan.name;
        exact = rep.runs[i].peaks.kv_peak_exact;
      }
    }
    if (!peak) {
      c.status = CheckStatus::kSkip;
      c.detail = "the endpoint exports no KV cache usage in /metrics";
      if (options.behind_gateway) {
        // A go-live check through the gateway must not pass by skipping.
        c.status = CheckStatus::kFail;
        c.detail = "a kvserve gateway exports no replica KV peaks on its public port: pass --replica-metrics "
                   "http://REPLICA:PORT for each replica behind it";
      }
    } else {
      c.value = *peak;
      c.status = *peak <= options.kv_watermark_max ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = fmt::format("peak KV cache use {} {} {} (run {}; {})", Pct(*peak),
                             c.status == CheckStatus::kPass ? "<=" : ">", Pct(options.kv_watermark_max), at,
                             exact ? "the server's per-step peak gauge" : "sampled from /metrics: short peaks may be missed");
    }
    rep.checks.push_back(c);
  }
  {
    Check c;
    c.name = "memory";
    c.threshold = options.memory_ratio_max;
    const MetricsPeaks* worst = nullptr;
    std::string at;
    for (size_t i = 0; i < results.size(); ++i) {
      const MetricsPeaks& p = rep.runs[i].peaks;
      if (p.memory_ratio && (!worst || *p.memory_ratio > *worst->memory_ratio)) {
        worst = &p;
        at = results[i].plan.name;
      }
    }
    if (!worst) {
      c.status = CheckStatus::kSkip;
      c.detail = "no server exports both its resident memory and its memory plan (kvserve does)";
    } else {
      c.value = *worst->memory_ratio;
      c.status = *worst->memory_ratio <= options.memory_ratio_max ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = fmt::format("peak resident memory {:.1f} MiB is {:.0f} % of the memory plan's {:.1f} MiB ({} {:.0f} %; "
                             "run {})",
                             *worst->rss_bytes / 1048576.0, *worst->memory_ratio * 100, *worst->plan_bytes / 1048576.0,
                             c.status == CheckStatus::kPass ? "<=" : ">", options.memory_ratio_max * 100, at);
    }
    rep.checks.push_back(c);
  }
  {
    Check c;
    c.name = "server_errors";
    c.threshold = 0;
    int64_t bad = 0, sent = 0;
    std::map<std::string, int64_t> kinds;
    for (const RunResult& run : results) {
      for (const RequestRecord& r : run.requests) {
        // Probes are judged by their own checks (a malformed request's 400
        // is right; its 5xx fails expected_errors).
        if (r.sent < 0 || r.probe.kind != ProbeKind::kNone) continue;
        ++sent;
        const bool server_side = r.status >= 500 || r.error_kind == "stream" || r.error_kind == "disconnected" ||
                                 r.error_kind == "connect" || r.error_kind == "protocol";
        if (!r.ok() && server_side) {
          ++bad;
          ++kinds[r.status >= 500 ? fmt::format("HTTP {}", r.status) : r.error_kind];
        }
      }
    }
    c.value = static_cast<double>(bad);
    c.status = bad == 0 ? CheckStatus::kPass : CheckStatus::kFail;
    std::vector<std::string> parts;
    for (auto& [k, n] : kinds) parts.push_back(fmt::format("{} x{}", k, n));
    c.detail = bad == 0 ? fmt::format("no 5xx, in-stream error or dropped connection in {} requests", sent)
                        : fmt::format("{} of {} requests: {}", bad, sent, fmt::join(parts, ", "));
    rep.checks.push_back(c);
  }
  {
    Check c;
    c.name = "preemptions";
    c.threshold = options.preemptions_per_minute_max;
    double total = 0, span = 0;
    bool any = false;
    for (const RunReport& r : rep.runs) {
      if (!r.peaks.preemptions) continue;
      any = true;
      total += *r.peaks.preemptions;
      span += r.peaks.span;
    }
    if (!any) {
      c.status = CheckStatus::kSkip;
      c.detail = "the endpoint exports no preemption counter in /metrics";
    } else if (span <= 0) {
      c.status = CheckStatus::kSkip;
      c.detail = "too few /metrics samples to measure a rate";
    } else {
      const double per_min = total / (span / 60.0);
      c.value = per_min;
      c.status = per_min <= options.preemptions_per_minute_max ? CheckStatus::kPass : CheckStatus::kFail;
      c.detail = fmt::format("{:g} preemptions in {:.1f} s sampled = {:.2f}/min {} {:g}/min", total, span, per_min,
                             c.status == CheckStatus::kPass ? "<=" : ">", options.preemptions_per_minute_max);
    }
    rep.checks.push_back(c);
  }
  for (Check& c : ProbeChecks(results, options.answers_min)) rep.checks.push_back(std::move(c));
  return rep;
}

nlohmann::json BenchReportJson(const BenchReport& report, const std::vector<RunResult>& results,
                               const nlohmann::json& meta) {
  nlohmann::json j = meta.is_object() ? meta : nlohmann::json::object();
  nlohmann::json slos = nlohmann::json::array();
  for (const Slo& s : report.slos) slos.push_back(s.ToString());
  j["slos"] = slos;
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const RunResult& run = results[i];
    const RunReport& rr = report.runs[i];
    nlohmann::json r;
    r["settings"] = run.plan.ToJson();
    r["started"] = run.started_utc;
    r["figures"] = rr.all.ToJson();
    nlohmann::json buckets = nlohmann::json::array();
    for (const BucketFigures& b : rr.buckets) {
      buckets.push_back({{"label", b.label}, {"min_tokens", b.lo}, {"max_tokens", b.hi}, {"figures", b.f.ToJson()}});
    }
    r["by_input_length"] = buckets;
    nlohmann::json probes = nlohmann::json::array();
    for (const ProbeTally& t : rr.probes) probes.push_back(t.ToJson());
    r["probes"] = probes;
    nlohmann::json series = nlohmann::json::array();
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    for (const MetricsPoint& m : run.metrics) {
      series.push_back({{"t", m.t},
                        {"kv_usage", opt(m.g.kv_usage)},
                        {"queue", opt(m.g.queue)},
                        {"running", opt(m.g.running)},
                        {"preemptions", opt(m.g.preemptions)},
                        {"kv_peak_since_start", opt(m.g.kv_peak_since_start)},
                        {"rss_bytes", opt(m.g.rss_bytes)}});
    }
    r["server_metrics"] = {{"samples", rr.peaks.samples},
                           {"source", rr.peaks.source},
                           {"note", run.metrics_note},
                           {"kv_usage_peak", opt(rr.peaks.kv_peak)},
                           {"kv_usage_peak_from", rr.peaks.kv_peak_exact ? "peak gauge" : "samples"},
                           {"memory_ratio_peak", opt(rr.peaks.memory_ratio)},
                           {"rss_bytes_peak", opt(rr.peaks.rss_bytes)},
                           {"plan_bytes", opt(rr.peaks.plan_bytes)},
                           {"queue_peak", opt(rr.peaks.queue_peak)},
                           {"running_peak", opt(rr.peaks.running_peak)},
                           {"preemptions", opt(rr.peaks.preemptions)},
                           {"series", series}};
    nlohmann::json reqs = nlohmann::json::array();
    for (const RequestRecord& q : run.requests) reqs.push_back(q.ToJson());
    r["requests"] = reqs;
    runs.push_back(r);
  }
  j["runs"] = runs;
  nlohmann::json ls = nlohmann::json::array();
  for (const LengthSeries& s : report.length_series) {
    nlohmann::json pts = nlohmann::json::array();
    for (const LengthPoint& p : s.points) {
      pts.push_back({{"input_tokens", p.length},
                     {"requests", p.n},
                     {"uncached_prompt_tokens", p.work},
                     {"ttft_p50", p.ttft_p50},
                     {"ttft_p90", p.ttft_p90},
                     {"tpot_p50", p.tpot_p50},
                     {"e2e_p50", p.e2e_p50}});
    }
    ls.push_back({{"label", s.label}, {"points", pts}});
  }
  j["ttft_vs_input_length"] = ls;
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : report.checks) checks.push_back(c.ToJson());
  j["checks"] = checks;
  j["passed"] = report.passed();
  return j;
}

namespace {

std::string Row(const char* name, const Summary& s) {
  if (s.count == 0) return fmt::format("  {:<6} {:>11} {:>11} {:>11} {:>11}\n", name, "-", "-", "-", "-");
  return fmt::format("  {:<6} {:>11} {:>11} {:>11} {:>11}\n", name, FormatSeconds(s.p50), FormatSeconds(s.p90),
                     FormatSeconds(s.p99), FormatSeconds(s.max));
}

}  // namespace

std::string FormatBenchTable(const BenchReport& report, const std::vector<RunResult>& results) {
  std::string o;
  for (size_t i = 0; i < results.size(); ++i) {
    const RunResult& run = results[i];
    const RunReport& rr = report.runs[i];
    const Figures& f = rr.all;
    o += fmt::format("=== run {}/{}: {} ({} requests: {} ok, {} failed", i + 1, results.size(), run.plan.name, f.planned,
                     f.ok, f.failed);
    if (f.sent < f.planned) o += fmt::format(", {} not sent", f.planned - f.sent);
    o += fmt::format("; {:.2f} s)\n", f.duration);
    o += fmt::format("  {:<6} {:>11} {:>11} {:>11} {:>11}\n", "", "p50", "p90", "p99", "max");
    o += Row("TTFT", f.ttft);
    o += Row("TPOT", f.tpot);
    o += Row("ITL", f.itl);
    o += Row("E2E", f.e2e);
    auto spread = [](const char* name, const Summary& s) {
      return s.count ? fmt::format("{} {} +- {}", name, FormatSeconds(s.mean), FormatSeconds(s.stddev)) : "";
    };
    o += fmt::format("  mean +- stddev: {}, {}, {}\n", spread("TTFT", f.ttft), spread("TPOT", f.tpot),
                     spread("E2E", f.e2e));
    for (double pc : f.percentiles) {
      if (f.ttft.count == 0) break;
      o += fmt::format("  p{:g}: TTFT {}, TPOT {}, ITL {}, E2E {}\n", pc, FormatSeconds(f.ttft.At(pc)),
                       f.tpot.count ? FormatSeconds(f.tpot.At(pc)) : "-", f.itl.count ? FormatSeconds(f.itl.At(pc)) : "-",
                       FormatSeconds(f.e2e.At(pc)));
    }
    o += fmt::format("  throughput {:.2f} req/s, {:.1f} input tok/s, {:.1f} output tok/s", f.request_throughput,
                     f.input_throughput, f.output_throughput);
    if (!report.slos.empty()) o += fmt::format("; goodput {:.2f} req/s ({}/{} met the SLOs)", f.goodput, f.good, f.ok);
    o += "\n";
    if (!f.errors.empty()) {
      std::vector<std::string> parts;
      for (auto& [k, n] : f.errors) parts.push_back(fmt::format("{} x{}", k, n));
      o += fmt::format("  errors: {}\n", fmt::join(parts, ", "));
    }
    for (const std::string& n : RunNotes(f)) o += "  note: " + n + "\n";
    for (const ProbeTally& t : rr.probes) {
      o += "  probes: " + t.Line() + "\n";
      for (const std::string& e : t.examples) o += "    " + e + "\n";
    }
    if (f.cached_share) o += fmt::format("  cached prompt tokens: {:.1f} %\n", *f.cached_share * 100);
    if (run.plan.OpenLoop() && f.max_send_lag > 0.05) {
      o += fmt::format("  note: the client sent up to {} late (it could not keep the arrival schedule)\n",
                       FormatSeconds(f.max_send_lag));
    }
    const MetricsPeaks& p = rr.peaks;
    if (p.samples > 0) {
      auto v = [](const std::optional<double>& x, bool pct) {
        return !x ? std::string("n/a") : pct ? fmt::format("{:.1f} %", *x * 100) : fmt::format("{:g}", *x);
      };
      o += fmt::format("  server ({}, {} samples): peak KV use {}{}, peak queue {}, peak running {}, preemptions {}\n",
                       p.source.empty() ? "?" : p.source, p.samples, v(p.kv_peak, true),
                       p.kv_peak && p.kv_peak_exact ? " (peak gauge)" : p.kv_peak ? " (sampled)" : "",
                       v(p.queue_peak, false), v(p.running_peak, false), v(p.preemptions, false));
      if (p.memory_ratio) {
        o += fmt::format("  memory: peak RSS {:.1f} MiB, {:.0f} % of the plan's {:.1f} MiB\n", *p.rss_bytes / 1048576.0,
                         *p.memory_ratio * 100, *p.plan_bytes / 1048576.0);
      }
    } else if (!run.metrics_note.empty()) {
      o += fmt::format("  server metrics: none ({})\n", run.metrics_note);
    }
    if (rr.buckets.size() > 1) {
      o += fmt::format("  {:>11} {:>5} {:>10} {:>10} {:>10} {:>10} {:>7}\n", "input", "ok", "TTFT p50", "TTFT p90",
                       "TPOT p50", "E2E p50", "errors");
      for (const BucketFigures& b : rr.buckets) {
        o += fmt::format("  {:>11} {:>5} {:>10} {:>10} {:>10} {:>10} {:>7}\n", b.label, b.f.ok,
                         b.f.ttft.count ? FormatSeconds(b.f.ttft.p50) : "-",
                         b.f.ttft.count ? FormatSeconds(b.f.ttft.p90) : "-",
                         b.f.tpot.count ? FormatSeconds(b.f.tpot.p50) : "-",
                         b.f.e2e.count ? FormatSeconds(b.f.e2e.p50) : "-", b.f.failed);
      }
    }
  }
  if (!report.length_series.empty()) {
    for (const LengthSeries& s : report.length_series) {
      if (s.points.size() < 2) continue;
      o += fmt::format("=== TTFT vs input length ({})\n", s.label);
      o += fmt::format("  {:>8} {:>5} {:>10} {:>10} {:>10}\n", "input", "n", "TTFT p50", "TTFT p90", "TPOT p50");
      for (const LengthPoint& p : s.points) {
        o += fmt::format("  {:>8} {:>5} {:>10} {:>10} {:>10}\n", p.length, p.n, FormatSeconds(p.ttft_p50),
                         FormatSeconds(p.ttft_p90), p.tpot_p50 > 0 ? FormatSeconds(p.tpot_p50) : "-");
      }
    }
  }
  o += "=== checks\n";
  for (const Check& c : report.checks) o += c.Line() + "\n";
  return o;
}

}  // namespace kvs::bench
