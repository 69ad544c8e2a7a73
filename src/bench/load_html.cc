#include "bench/load_html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "bench/html.h"
#include "bench/svg.h"

namespace kvs::bench {

namespace {

std::string Sec(double s) { return FormatSeconds(s); }

std::string SecOr(const Summary& s, double v) { return s.count ? Sec(v) : "-"; }

// Tick labels for seconds on a log axis: 1 ms, 10 ms, 1 s.
std::string SecondsTick(double v) {
  std::string s = FormatSeconds(v);
  return s;
}

svg::Series MakeSeries(std::string name, std::vector<std::pair<double, double>> pts) {
  svg::Series s;
  s.name = std::move(name);
  s.points = std::move(pts);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> BenchCharts(const BenchReport& report,
                                                            const std::vector<RunResult>& results) {
  std::vector<std::pair<std::string, std::string>> out;
  // TTFT and TPOT vs input length.
  bool any_series = std::any_of(report.length_series.begin(), report.length_series.end(),
                                [](const LengthSeries& s) { return s.points.size() >= 2; });
  if (any_series) {
    svg::LineChart ttft;
    ttft.title = "Time to first token vs input length";
    ttft.x = {"input tokens", true, {}, {}, {}, {}};
    ttft.y = {"TTFT (seconds)", true, {}, {}, {}, SecondsTick};
    svg::LineChart tpot;
    tpot.title = "Time per output token vs input length";
    tpot.x = ttft.x;
    tpot.y = {"TPOT (seconds)", false, {}, {}, {}, SecondsTick};
    std::vector<double> ticks;
    for (const LengthSeries& s : report.length_series) {
      if (s.points.size() < 2) continue;
      std::vector<std::pair<double, double>> p50, p90, tp;
      for (const LengthPoint& p : s.points) {
        p50.emplace_back(p.length, p.ttft_p50);
        p90.emplace_back(p.length, p.ttft_p90);
        if (p.tpot_p50 > 0) tp.emplace_back(p.length, p.tpot_p50);
        ticks.push_back(static_cast<double>(p.length));
      }
      ttft.series.push_back(MakeSeries("p50 " + s.label, p50));
      auto d = MakeSeries("p90 " + s.label, p90);
      d.dashed = true;
      ttft.series.push_back(d);
      tpot.series.push_back(MakeSeries("p50 " + s.label, tp));
    }
    std::sort(ticks.begin(), ticks.end());
    ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
    if (ticks.size() <= 12) {
      ttft.x.ticks = ticks;
      tpot.x.ticks = ticks;
    }
    out.emplace_back("ttft_vs_length", svg::RenderLineChart(ttft));
    out.emplace_back("tpot_vs_length", svg::RenderLineChart(tpot));
  }
  // Latency CDFs, one series per run (at most 7 runs drawn).
  auto cdf_chart = [&](const std::string& title, const std::string& name,
                       const std::function<std::vector<double>(const RequestRecord&)>& values) {
    svg::LineChart c;
    c.title = title;
    c.x = {"seconds (log scale)", true, {}, {}, {}, SecondsTick};
    c.y = {"fraction of requests", false, 0.0, 1.0, {0, 0.25, 0.5, 0.75, 0.9, 1.0}, {}};
    for (size_t i = 0; i < results.size() && i < 7; ++i) {
      std::vector<double> v;
      for (const RequestRecord& r : results[i].requests) {
        auto x = values(r);
        v.insert(v.end(), x.begin(), x.end());
      }
      auto pts = Cdf(std::move(v), 300);
      if (!pts.empty()) pts.insert(pts.begin(), {pts.front().first, 0.0});  // the step up from 0
      svg::Series s = MakeSeries(results[i].plan.name, std::move(pts));
      s.step = true;
      s.markers = false;
      c.series.push_back(std::move(s));
    }
    out.emplace_back(name, svg::RenderLineChart(c));
  };
  auto one = [](std::optional<double> v) { return v ? std::vector<double>{*v} : std::vector<double>{}; };
  cdf_chart("TTFT distribution (CDF)", "ttft_cdf", [&](const RequestRecord& r) { return one(r.Ttft()); });
  cdf_chart("Inter-token latency distribution (CDF)", "itl_cdf", [](const RequestRecord& r) { return r.Itls(); });
  cdf_chart("End-to-end latency distribution (CDF)", "e2e_cdf", [&](const RequestRecord& r) { return one(r.E2e()); });

  // Throughput vs offered rate (Poisson runs) or concurrency.
  for (int pass = 0; pass < 2; ++pass) {
    const bool rates = pass == 0;
    std::map<std::string, std::vector<std::pair<double, size_t>>> groups;  // by length/output
    for (size_t i = 0; i < results.size(); ++i) {
      const RunPlan& p = results[i].plan;
      const double x = rates ? p.rate : static_cast<double>(p.concurrency);
      if (x <= 0) continue;
      const std::string key = p.multi_turn.conversations > 0 ? "multi-turn"
                              : p.input_len > 0          ? fmt::format("in={} out={}", p.input_len, p.output_len)
                                                         : fmt::format("mix out={}", p.output_len);
      groups[key].emplace_back(x, i);
    }
    if (std::none_of(groups.begin(), groups.end(), [](auto& g) { return g.second.size() >= 2; })) continue;
    svg::LineChart c;
    c.title = rates ? "Throughput vs offered request rate" : "Throughput vs concurrency";
    c.x = {rates ? "offered rate (requests/s)" : "concurrent requests", false, {}, {}, {}, {}};
    c.y = {"requests/s", false, {}, {}, {}, {}};
    svg::LineChart t = c;
    t.title = rates ? "Output tokens/s vs offered request rate" : "Output tokens/s vs concurrency";
    t.y.label = "output tokens/s";
    for (auto& [key, pts] : groups) {
      if (pts.size() < 2) continue;
      std::sort(pts.begin(), pts.end());
      std::vector<std::pair<double, double>> done, good, tok;
      for (auto [x, i] : pts) {
        const Figures& f = report.runs[i].all;
        done.emplace_back(x, f.request_throughput);
        if (!report.slos.empty()) good.emplace_back(x, f.goodput);
        tok.emplace_back(x, f.output_throughput);
      }
      c.series.push_back(MakeSeries("completed " + key, done));
      if (!good.empty()) {
        auto g = MakeSeries("goodput " + key, good);
        g.dashed = true;
        c.series.push_back(g);
      }
      t.series.push_back(MakeSeries(key, tok));
    }
    if (rates) {
      // The ideal: everything offered is served.
      double hi = 0;
      for (auto& s : c.series) {
        for (auto& [x, y] : s.points) hi = std::max(hi, x);
      }
      svg::Series ideal = MakeSeries("offered", {{0, 0}, {hi, hi}});
      ideal.color = "#999999";
      ideal.markers = false;
      ideal.dashed = true;
      c.series.push_back(ideal);
    }
    out.emplace_back(rates ? "throughput_vs_rate" : "throughput_vs_concurrency", svg::RenderLineChart(c));
    out.emplace_back(rates ? "tokens_vs_rate" : "tokens_vs_concurrency", svg::RenderLineChart(t));
  }

  // Server metrics over time: the runs back to back on one time axis.
  bool have_metrics = std::any_of(results.begin(), results.end(), [](const RunResult& r) { return !r.metrics.empty(); });
  if (have_metrics) {
    svg::LineChart kv;
    kv.title = "KV cache use over time";
    kv.x = {"seconds since the first run started", false, {}, {}, {}, {}};
    kv.y = {"KV cache in use", false, 0.0, 1.0, {0, 0.25, 0.5, 0.75, 0.9, 1.0},
            [](double v) { return fmt::format("{:.0f}%", v * 100); }};
    svg::LineChart q;
    q.title = "Queue and running requests over time";
    q.x = kv.x;
    q.y = {"requests", false, {}, {}, {}, {}};
    std::vector<std::pair<double, double>> kvp, queue, running;
    double offset = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      const RunResult& r = results[i];
      // Where each run starts: the charts show the runs back to back.
      kv.x_rules.push_back({offset, fmt::format("run {}", i + 1)});
      q.x_rules.push_back({offset, fmt::format("run {}", i + 1)});
      for (const MetricsPoint& m : r.metrics) {
        if (m.g.kv_usage) kvp.emplace_back(offset + m.t, *m.g.kv_usage);
        if (m.g.queue) queue.emplace_back(offset + m.t, *m.g.queue);
        if (m.g.running) running.emplace_back(offset + m.t, *m.g.running);
      }
      offset += std::max(r.duration, r.metrics.empty() ? 0.0 : r.metrics.back().t) + 0.5;
    }
    auto line = [](std::string name, std::vector<std::pair<double, double>> pts) {
      svg::Series s = MakeSeries(std::move(name), std::move(pts));
      s.markers = false;
      return s;
    };
    kv.series.push_back(line("KV use", kvp));
    double limit = 0.9;
    for (const Check& c : report.checks) {
      if (c.name == "kv_watermark" && c.threshold) limit = *c.threshold;
    }
    kv.y_rules.push_back({limit, "watermark limit"});
    q.series.push_back(line("waiting", queue));
    q.series.push_back(line("running", running));
    out.emplace_back("kv_over_time", svg::RenderLineChart(kv));
    out.emplace_back("queue_over_time", svg::RenderLineChart(q));
  }
  return out;
}

std::string BenchHtml(const BenchReport& report, const std::vector<RunResult>& results, const nlohmann::json& meta) {
  HtmlPage page("kvserve bench report");
  std::string m;
  auto field = [&](const char* key) -> std::string {
    if (!meta.contains(key)) return "";
    return meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump();
  };
  page.Raw(fmt::format("<p class=\"meta\">endpoint {} &middot; model {} &middot; started {} &middot; {}</p>\n",
                       HtmlEscape(field("url")), HtmlEscape(field("model")), HtmlEscape(field("started")),
                       HtmlEscape(field("command"))));
  page.H2(fmt::format("Checks: {}", report.passed() ? "all passed" : "FAILED"));
  std::vector<std::vector<std::string>> rows;
  for (const Check& c : report.checks) rows.push_back({c.name, CheckStatusName(c.status), c.detail});
  page.Table({"check", "result", "numbers"}, rows, 1);

  page.H2("Runs");
  rows.clear();
  for (size_t i = 0; i < results.size(); ++i) {
    const Figures& f = report.runs[i].all;
    const MetricsPeaks& p = report.runs[i].peaks;
    rows.push_back({results[i].plan.name, std::to_string(f.ok), std::to_string(f.failed),
                    fmt::format("{:.2f}", f.request_throughput), fmt::format("{:.1f}", f.output_throughput),
                    report.slos.empty() ? "-" : fmt::format("{:.2f}", f.goodput), SecOr(f.ttft, f.ttft.p50),
                    SecOr(f.ttft, f.ttft.p99), SecOr(f.tpot, f.tpot.p50), SecOr(f.itl, f.itl.p50),
                    SecOr(f.e2e, f.e2e.p50), SecOr(f.e2e, f.e2e.p99),
                    f.tokens_per_chunk ? fmt::format("{:.2f}", *f.tokens_per_chunk) : "-",
                    f.cached_share ? fmt::format("{:.0f}%", *f.cached_share * 100) : "-",
                    p.kv_peak ? fmt::format("{:.1f}%{}", *p.kv_peak * 100, p.kv_peak_exact ? "" : " (sampled)") : "-"});
  }
  page.Table({"run", "ok", "failed", "req/s", "out tok/s", "goodput", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p50",
              "E2E p50", "E2E p99", "tok/chunk", "cached", "peak KV"},
             rows);
  // The warnings the text report prints, here too.
  for (size_t i = 0; i < results.size(); ++i) {
    for (const std::string& n : RunNotes(report.runs[i].all)) page.P("Note: " + results[i].plan.name + ": " + n + ".");
  }
  if (!report.slos.empty()) {
    std::string s;
    for (const Slo& slo : report.slos) s += (s.empty() ? "" : ", ") + slo.ToString();
    page.P("Goodput: requests per second that succeeded and met every SLO: " + s + ".");
  }

  // Probes: answers checked under the same load.
  rows.clear();
  for (size_t i = 0; i < results.size(); ++i) {
    for (const ProbeTally& t : report.runs[i].probes) {
      std::string misses;
      for (auto& [k, n] : t.misses) misses += fmt::format("{}{} x{}", misses.empty() ? "" : ", ", k, n);
      std::string examples;
      for (const std::string& e : t.examples) examples += (examples.empty() ? "" : " | ") + e;
      rows.push_back({results[i].plan.name, ProbeKindName(t.kind), std::to_string(t.sent), std::to_string(t.ok),
                      fmt::format("{:.0f} %", t.Share() * 100),
                      fmt::format("{:.0f}-{:.0f} %", t.interval.lo * 100, t.interval.hi * 100),
                      misses.empty() ? "-" : misses, examples.empty() ? "-" : examples});
    }
  }
  if (!rows.empty()) {
    page.H2("Answers under load (probes)");
    page.Table({"run", "probe", "sent", "right", "share", "95 % interval", "misses", "examples"}, rows);
    page.P("Probe requests are scored, not timed: the latency figures above leave them out. arithmetic, json and "
           "recall must be answered right; over_length and malformed must be refused with a 4xx and a JSON error.");
  }

  page.H2("Charts");
  page.Raw("<div class=\"charts\">\n");
  for (auto& [name, svg] : BenchCharts(report, results)) page.Raw(svg);
  page.Raw("</div>\n");

  page.H2("By input length");
  for (size_t i = 0; i < results.size(); ++i) {
    const RunReport& rr = report.runs[i];
    rows.clear();
    for (const BucketFigures& b : rr.buckets) {
      rows.push_back({b.label, std::to_string(b.f.ok), std::to_string(b.f.failed), SecOr(b.f.ttft, b.f.ttft.p50),
                      SecOr(b.f.ttft, b.f.ttft.p90), SecOr(b.f.ttft, b.f.ttft.p99), SecOr(b.f.tpot, b.f.tpot.p50),
                      SecOr(b.f.itl, b.f.itl.p50), SecOr(b.f.e2e, b.f.e2e.p50), SecOr(b.f.e2e, b.f.e2e.max)});
    }
    page.Raw("<h3>" + HtmlEscape(results[i].plan.name) + "</h3>\n");
    page.Table({"input tokens", "ok", "failed", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "ITL p50", "E2E p50",
                "E2E max"},
               rows);
    if (!rr.all.errors.empty()) {
      std::string e;
      for (auto& [k, n] : rr.all.errors) e += fmt::format("{}{} x{}", e.empty() ? "" : ", ", k, n);
      page.P("Errors: " + e);
    }
  }
  page.H2("How it was measured");
  page.P(
      "Every request streams (server-sent events) with usage requested. TTFT: from sending the request to the first "
      "chunk carrying text. ITL: gaps between chunks carrying text. TPOT: (end-to-end - TTFT) / (output tokens - 1). "
      "Prompts are made of generated text with exact token counts (the endpoint's own /tokenize when it has one). "
      "Server figures come from its /metrics, sampled during each run. The JSON report has every request's timings.");
  return page.Finish();
}

}  // namespace kvs::bench
