#include "bench/online_bench.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "bench/endpoint.h"
#include "bench/html.h"
#include "bench/load_html.h"
#include "bench/load_runner.h"

namespace kvs::bench {

namespace {

int Fail(const Status& s, int code = 2) {
  std::fprintf(stderr, "kvserve bench: %s\n", s.message().c_str());
  return code;
}

}  // namespace

int RunOnlineBench(const OnlineBenchOptions& options) {
  OnlineBenchOptions o = options;
  // A fresh seed per invocation unless one is given: the same prompts again
  // would be served from the prefix cache of the previous run.
  if (o.spec.seed == 0) o.spec.seed = std::random_device{}() | 1u;
  std::vector<Slo> slos;
  std::vector<std::string> slo_texts = o.slos;
  EndpointOptions eo;
  eo.url = o.url;
  eo.api_key = o.api_key;
  eo.model = o.model;
  eo.request_timeout_seconds = o.request_timeout;
  eo.io_threads = 1;
  eo.metrics_urls = o.replica_metrics;
  if (!o.svg_dir.empty()) {
    // Before any run: a folder that cannot be made fails now, not after a
    // report that printed PASS.
    std::error_code ec;
    std::filesystem::create_directories(o.svg_dir, ec);
    if (ec) return Fail(InvalidArgument("--svg-dir {}: {}", o.svg_dir, ec.message()));
  }
  auto ep_or = Endpoint::Create(eo);
  if (!ep_or.ok()) return Fail(ep_or.status());
  Endpoint& ep = **ep_or;
  auto info = ep.Discover();
  if (!info.ok()) return Fail(info.status());
  const std::string metrics_text =
      !o.replica_metrics.empty() ? fmt::format("{} replicas' /metrics", info->metrics_sources)
      : info->has_metrics        ? std::string("yes")
      : info->server == "kvserve gateway"
          ? std::string("none on the gateway's public port (--replica-metrics http://REPLICA:PORT reads the replicas)")
          : std::string("no");
  std::fprintf(stderr, "endpoint %s (%s): model %s, context %s, token counting: %s, metrics: %s (seed %llu)\n",
               ep.url().ToString().c_str(), info->server.empty() ? "?" : info->server.c_str(), info->model.c_str(),
               info->context ? std::to_string(*info->context).c_str() : "unknown",
               o.tokenizer.empty() ? TokenizeFlavorName(info->tokenize) : "local GGUF (--tokenizer)",
               metrics_text.c_str(), static_cast<unsigned long long>(o.spec.seed));
  o.checks.behind_gateway = info->server == "kvserve gateway" && o.replica_metrics.empty();

  // Token counter: the endpoint's, else the local model file's.
  auto counter_or = ep.CounterOrLocal(o.tokenizer);
  if (!counter_or.ok()) return Fail(counter_or.status());
  std::unique_ptr<TokenCounter> counter = std::move(*counter_or);

  // Workloads.
  std::vector<WorkloadSpec> specs;
  if (!o.workload_file.empty()) {
    auto f = LoadWorkloadFile(o.workload_file, o.spec);
    if (!f.ok()) return Fail(f.status());
    specs = f->specs;
    slo_texts.insert(slo_texts.end(), f->slos.begin(), f->slos.end());
  } else {
    specs.push_back(o.spec);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (Status st = ResolveLengths(&specs[i], info->context); !st.ok()) return Fail(st);
    // Every workload of a file gets its own prompts: the same text twice
    // would be served from the prefix cache and flatter the second run.
    specs[i].seed += static_cast<uint64_t>(i) * 1000003u;
  }
  for (const std::string& t : slo_texts) {
    auto s = ParseSlo(t);
    if (!s.ok()) return Fail(s.status());
    slos.push_back(*s);
  }
  std::vector<RunPlan> plans;
  for (const WorkloadSpec& s : specs) {
    auto runs = ExpandRuns(s);
    if (!runs.ok()) return Fail(runs.status());
    for (RunPlan& p : *runs) plans.push_back(std::move(p));
  }
  if (info->context) {
    for (const RunPlan& p : plans) {
      for (const PlannedRequest& q : p.requests) {
        if (p.multi_turn.conversations == 0 && q.input_tokens + q.output_tokens > *info->context) {
          return Fail(InvalidArgument("run '{}': {} input + {} output tokens do not fit the model's context of {}",
                                      p.name, q.input_tokens, q.output_tokens, *info->context));
        }
      }
    }
  }

  // Prompts, before any clock starts.
  std::vector<PreparedRun> prepared;
  const bool tty = isatty(2) != 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    auto progress = [&](size_t done, size_t total) {
      if (!o.progress || !tty) return;
      std::fprintf(stderr, "\rpreparing prompts for run %zu/%zu: %zu/%zu   ", i + 1, plans.size(), done, total);
      std::fflush(stderr);
    };
    auto p = PreparePrompts(plans[i], *counter, progress, info->context);
    if (!p.ok()) return Fail(p.status().WithContext("preparing prompts (" + counter->Describe() + ")"));
    prepared.push_back(std::move(*p));
  }
  if (o.progress && tty) std::fprintf(stderr, "\n");
  int64_t inexact = 0;
  for (const PreparedRun& r : prepared) {
    for (const PreparedPrompt& p : r.prompts) inexact += !p.exact;
  }
  if (inexact > 0) {
    std::fprintf(stderr, "note: %lld prompts are a few tokens short of their target (the tokenizer merged across "
                 "words); the JSON has each one's server-reported count\n", static_cast<long long>(inexact));
  }

  // Warm-up: a few small requests, not recorded.
  if (o.warmup > 0) {
    RunPlan w = plans.front();
    w.name = "warm-up";
    w.seed ^= 0x5bd1e995u;  // its own text: not a cached prefix of the first run's prompts
    w.concurrency = 1;
    w.rate = 0;
    w.duration_seconds = 0;
    w.multi_turn = {};
    w.requests.clear();
    w.output_len = std::min<int64_t>(w.output_len, 8);
    for (int i = 0; i < o.warmup; ++i) {
      PlannedRequest q;
      q.index = i;
      q.input_tokens = 32;
      q.output_tokens = w.output_len;
      w.requests.push_back(q);
    }
    auto p = PreparePrompts(w, *counter);
    if (!p.ok()) return Fail(p.status().WithContext("warm-up"));
    LoadOptions lo;
    lo.progress = false;
    lo.metrics_interval_seconds = 0;
    RunResult r = RunLoad(ep, *p, lo);
    for (const RequestRecord& q : r.requests) {
      if (!q.ok()) {
        return Fail(Status(StatusCode::kUnavailable, "warm-up request failed: " + q.error), 2);
      }
    }
  }

  const std::string started = UtcNow();
  std::vector<RunResult> results;
  for (size_t i = 0; i < prepared.size(); ++i) {
    LoadOptions lo;
    lo.metrics_interval_seconds = o.metrics_interval;
    lo.progress = o.progress;
    lo.progress_label = fmt::format("run {}/{}", i + 1, prepared.size());
    results.push_back(RunLoad(ep, prepared[i], lo));
  }

  BenchReport report = AnalyzeRuns(results, slos, o.checks);
  std::fputs(FormatBenchTable(report, results).c_str(), stdout);
  std::fflush(stdout);

  nlohmann::json meta;
  meta["tool"] = "kvserve bench";
  meta["url"] = ep.url().ToString();
  meta["model"] = info->model;
  meta["endpoint"] = info->ToJson();
  meta["token_counter"] = counter->Describe();
  meta["started"] = started;
  nlohmann::json ws = nlohmann::json::array();
  for (const WorkloadSpec& s : specs) ws.push_back(s.ToJson());
  meta["workloads"] = ws;
  meta["check_options"] = {{"kv_watermark_max", o.checks.kv_watermark_max},
                           {"memory_ratio_max", o.checks.memory_ratio_max},
                           {"preemptions_per_minute_max", o.checks.preemptions_per_minute_max},
                           {"ttft_jump_max", o.checks.ttft_jump_max}};
  {
    // The options that decide what ran (not the key).
    std::string cmd = "kvserve bench --url " + o.url;
    if (!o.workload_file.empty()) cmd += " --workload " + o.workload_file;
    for (const std::string& u : o.replica_metrics) cmd += " --replica-metrics " + u;
    if (!o.tokenizer.empty()) cmd += " --tokenizer " + o.tokenizer;
    for (const std::string& s : o.slos) cmd += " --slo " + s;
    meta["command"] = cmd;
  }
  meta["seed"] = o.spec.seed;
  if (!o.json_path.empty()) {
    const std::string json = BenchReportJson(report, results, meta).dump(1);
    if (Status s = WriteTextFile(o.json_path, json); !s.ok()) return Fail(s);
    std::fprintf(stderr, "wrote %s\n", o.json_path.c_str());
  }
  if (!o.html_path.empty()) {
    if (Status s = WriteTextFile(o.html_path, BenchHtml(report, results, meta)); !s.ok()) return Fail(s);
    std::fprintf(stderr, "wrote %s\n", o.html_path.c_str());
  }
  if (!o.svg_dir.empty()) {
    for (auto& [name, svg] : BenchCharts(report, results)) {
      const std::string path = o.svg_dir + "/" + name + ".svg";
      if (Status s = WriteTextFile(path, svg); !s.ok()) return Fail(s);
    }
    std::fprintf(stderr, "wrote the charts to %s/\n", o.svg_dir.c_str());
  }
  return report.passed() ? 0 : 1;
}

}  // namespace kvs::bench
