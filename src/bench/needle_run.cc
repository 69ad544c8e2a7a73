#include "bench/needle_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "bench/html.h"
#include "bench/needle_report.h"
#include "bench/needle_tasks.h"
#include "bench/workload.h"

namespace kvs::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  int64_t length;
  double depth;
  int trial;
};

// One case through the API; fills the result's answer, tokens and error.
void Ask(Endpoint& ep, const NeedleSpec& spec, const NeedleCase& c, NeedleResult* r, double timeout) {
  nlohmann::json body;
  body["model"] = ep.info().model;
  body["max_tokens"] = c.max_tokens;
  body["temperature"] = 0;
  std::string path;
  if (spec.api == ApiKind::kChat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", c.user_message}}});
    path = "/v1/chat/completions";
  } else {
    body["prompt"] = c.prompt;
    path = "/v1/completions";
  }
  const auto t0 = Clock::now();
  auto resp = ep.PostJson(path, body, timeout);
  r->latency_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!resp.ok()) {
    r->error = resp.status().message();
    return;
  }
  if (resp->status != 200) {
    r->error = fmt::format("HTTP {}: {}", resp->status, ErrorMessageFromBody(resp->body));
    return;
  }
  auto j = nlohmann::json::parse(resp->body, nullptr, false);
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) {
    r->error = "the answer has no choices";
    return;
  }
  const auto& ch = j["choices"][0];
  if (ch.contains("text") && ch["text"].is_string()) r->answer = ch["text"].get<std::string>();
  if (ch.contains("message") && ch["message"].is_object() && ch["message"].contains("content") &&
      ch["message"]["content"].is_string()) {
    r->answer = ch["message"]["content"].get<std::string>();
  }
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("prompt_tokens") &&
      j["usage"]["prompt_tokens"].is_number_integer()) {
    r->prompt_tokens = j["usage"]["prompt_tokens"].get<int64_t>();
  }
}

}  // namespace

std::vector<int64_t> DefaultNeedleLengths(int64_t context, int64_t max_answer_tokens) {
  std::vector<int64_t> out;
  const int64_t top = std::max<int64_t>(context - max_answer_tokens, 16);
  for (int64_t l = 1024; l < top; l *= 2) out.push_back(l);
  out.push_back(top);
  return out;
}

std::vector<NeedleResult> RunNeedleGrid(Endpoint& ep, TokenCounter& counter, const NeedleSpec& spec,
                                        const TextSource& haystack, const NeedleRunOptions& o) {
  std::vector<Job> jobs;
  for (int64_t l : spec.lengths) {
    for (double d : spec.depths) {
      for (int t = 0; t < spec.trials; ++t) jobs.push_back({l, d, t});
    }
  }
  std::vector<NeedleResult> results(jobs.size());
  std::atomic<size_t> next{0}, done{0}, hits{0};
  std::mutex counter_mu;  // one tokenizer call at a time (a remote one is an HTTP round trip)
  const auto t0 = Clock::now();
  const bool tty = isatty(2) != 0;
  std::mutex progress_mu;
  int last_quarter = 0;
  auto progress = [&] {
    if (!o.progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    const size_t d = done.load(), h = hits.load();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (tty) {
      std::fprintf(stderr, "\rneedle: %zu/%zu cases, %zu recalled (%.0f %%), %.1f s   ", d, jobs.size(), h,
                   d ? 100.0 * static_cast<double>(h) / static_cast<double>(d) : 0.0, secs);
      if (d == jobs.size()) std::fprintf(stderr, "\n");
    } else {
      const int quarter = static_cast<int>(4 * d / std::max<size_t>(jobs.size(), 1));
      if (quarter > last_quarter || d == jobs.size()) {
        last_quarter = quarter;
        std::fprintf(stderr, "needle: %zu/%zu cases, %zu recalled, %.1f s\n", d, jobs.size(), h, secs);
      }
    }
    std::fflush(stderr);
  };
  auto worker = [&] {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= jobs.size()) return;
      const Job& job = jobs[i];
      NeedleResult& r = results[i];
      r.length = job.length;
      r.depth = job.depth;
      r.trial = job.trial;
      StatusOr<NeedleCase> c = [&] {
        std::lock_guard<std::mutex> lock(counter_mu);
        return BuildAnyCase(spec, job.length, job.depth, job.trial, haystack, counter);
      }();
      if (!c.ok()) {
        r.error = "building the prompt: " + c.status().message();
      } else {
        r.expected = c->expected;
        for (const Needle& n : c->needles) {
          if (!n.asked) r.others.push_back(n.value);
        }
        r.prompt_tokens = c->tokens;
        Ask(ep, spec, *c, &r, o.request_timeout_seconds);
        if (r.error.empty()) {
          r.score = ScoreAnswer(r.answer, r.expected);
          r.hit = r.score >= 1.0;
        }
      }
      hits += r.hit;
      ++done;
      progress();
    }
  };
  std::vector<std::thread> threads;
  const int n = std::clamp(o.parallel, 1, 64);
  for (int i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return results;
}

// --- the command ----------------------------------------------------------------

namespace {

// --tasks: each task's grid in turn, a line each, then the table of scores
// and the aggregate; the JSON has every task's summary and cases.
int RunNeedleSuite(const NeedleCommandOptions& o, Endpoint& ep, const EndpointInfo& info, TokenCounter& counter,
                   const std::vector<NeedleSpec>& suite, const TextSource& haystack) {
  const std::vector<int64_t>& lengths = suite.front().lengths;
  std::fprintf(stderr, "needle: %s (%s), %zu tasks x %zu lengths x %d trials, %s mode, seed %llu\n",
               ep.url().ToString().c_str(), info.model.c_str(), suite.size(), lengths.size(), suite.front().trials,
               ApiKindName(suite.front().api), static_cast<unsigned long long>(suite.front().seed));
  std::vector<TaskScore> scores;
  nlohmann::json tasks_json = nlohmann::json::array();
  for (const NeedleSpec& t : suite) {
    std::vector<NeedleResult> results = RunNeedleGrid(ep, counter, t, haystack, o.run);
    TaskScore ts;
    ts.task = t.variant;
    ts.summary = SummarizeNeedle(results, t.lengths, t.depths, t.threshold);
    ts.score_by_length.assign(lengths.size(), 0);
    std::vector<int64_t> n(lengths.size(), 0);
    double total = 0;
    for (const NeedleResult& r : results) {
      const size_t i = static_cast<size_t>(std::find(lengths.begin(), lengths.end(), r.length) - lengths.begin());
      if (i >= lengths.size()) continue;
      ts.score_by_length[i] += r.score;
      ++n[i];
      total += r.score;
    }
    for (size_t i = 0; i < lengths.size(); ++i) ts.score_by_length[i] /= static_cast<double>(std::max<int64_t>(n[i], 1));
    ts.score = results.empty() ? 0 : total / static_cast<double>(results.size());
    std::printf("task %-10s score %5.1f %%, recall %5.1f %% (%lld/%lld)\n", NeedleVariantName(t.variant),
                ts.score * 100, ts.summary.overall * 100, static_cast<long long>(ts.summary.hits),
                static_cast<long long>(ts.summary.requests));
    std::fflush(stdout);
    nlohmann::json j = NeedleJson(ts.summary, results, {{"spec", t.ToJson()}});
    j["task"] = NeedleVariantName(t.variant);
    j["score"] = ts.score;
    j["score_by_length"] = ts.score_by_length;
    tasks_json.push_back(std::move(j));
    scores.push_back(std::move(ts));
  }
  std::fputs(TaskTable(scores, lengths).c_str(), stdout);
  std::fflush(stdout);
  if (!o.html_path.empty()) {
    if (Status s = WriteTextFile(o.html_path, TaskSuiteHtml(scores, lengths, info.model, ep.url().ToString()));
        !s.ok()) {
      std::fprintf(stderr, "kvserve needle: %s\n", s.message().c_str());
      return 2;
    }
    std::fprintf(stderr, "wrote %s\n", o.html_path.c_str());
  }
  if (!o.json_path.empty()) {
    double total = 0;
    for (const TaskScore& t : scores) total += t.score;
    nlohmann::json j = {{"tool", "kvserve needle"},
                        {"url", ep.url().ToString()},
                        {"model", info.model},
                        {"endpoint", info.ToJson()},
                        {"token_counter", counter.Describe()},
                        {"lengths", lengths},
                        {"tasks", tasks_json},
                        {"aggregate_by_length", AggregateByLength(scores, lengths.size())},
                        {"aggregate", scores.empty() ? 0 : total / static_cast<double>(scores.size())}};
    if (Status s = WriteTextFile(o.json_path, j.dump(1)); !s.ok()) {
      std::fprintf(stderr, "kvserve needle: %s\n", s.message().c_str());
      return 2;
    }
    std::fprintf(stderr, "wrote %s\n", o.json_path.c_str());
  }
  return 0;
}

}  // namespace

int RunNeedleCommand(const NeedleCommandOptions& options) {
  NeedleCommandOptions o = options;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "kvserve needle: %s\n", s.message().c_str());
    return 2;
  };
  EndpointOptions eo;
  eo.url = o.url;
  eo.api_key = o.api_key;
  eo.model = o.model;
  eo.request_timeout_seconds = o.run.request_timeout_seconds;
  auto ep_or = Endpoint::Create(eo);
  if (!ep_or.ok()) return fail(ep_or.status());
  Endpoint& ep = **ep_or;
  auto info = ep.Discover();
  if (!info.ok()) return fail(info.status());
  auto counter_or = ep.CounterOrLocal(o.tokenizer);
  if (!counter_or.ok()) return fail(counter_or.status());
  std::unique_ptr<TokenCounter> counter = std::move(*counter_or);
  NeedleSpec& spec = o.spec;
  if (spec.seed == 0) spec.seed = std::random_device{}() | 1u;
  auto depths = ParseDepths(o.depths_text);
  if (!depths.ok()) return fail(depths.status());
  spec.depths = *depths;
  // A suite (--tasks): every task's spec, the answer budget the largest.
  std::vector<NeedleSpec> suite;
  if (!o.tasks.empty()) {
    auto tasks = ParseNeedleTasks(o.tasks);
    if (!tasks.ok()) return fail(tasks.status());
    for (NeedleVariant v : *tasks) {
      NeedleSpec t = spec;
      t.variant = v;
      if (v == NeedleVariant::kCommonWords || v == NeedleVariant::kFrequentWords) t.depths = {0};
      suite.push_back(t);
    }
  }
  int64_t answer_tokens = AnswerTokenBudget(spec);
  for (const NeedleSpec& t : suite) answer_tokens = std::max(answer_tokens, AnswerTokenBudget(t));
  if (o.lengths_text.empty()) {
    if (!info->context) return fail(InvalidArgument("the endpoint does not say its context length: give --lengths"));
    spec.lengths = DefaultNeedleLengths(*info->context, answer_tokens);
  } else {
    auto l = ParseLengths(o.lengths_text, info->context ? *info->context - answer_tokens : 0);
    if (!l.ok()) return fail(l.status());
    spec.lengths = *l;
  }
  if (info->context) {
    for (int64_t l : spec.lengths) {
      if (l + answer_tokens > *info->context) {
        return fail(InvalidArgument("a {}-token prompt plus {} answer tokens does not fit the context of {} tokens",
                                    l, answer_tokens, *info->context));
      }
    }
  }
  if (Status s = ValidateNeedleSpec(spec); !s.ok()) return fail(s);
  for (NeedleSpec& t : suite) {
    t.lengths = spec.lengths;
    if (Status s = ValidateNeedleSpec(t); !s.ok()) return fail(s.WithContext(NeedleVariantName(t.variant)));
  }
  // "needles": RULER's all-distractor haystack, of the needle's own form.
  auto haystack = spec.haystack == "needles" ? StatusOr<std::unique_ptr<TextSource>>(MakeNeedleFormSource(spec))
                                             : MakeTextSource(spec.haystack);
  if (!haystack.ok()) return fail(haystack.status());
  if (!suite.empty()) return RunNeedleSuite(o, ep, *info, *counter, suite, **haystack);
  std::fprintf(stderr, "needle: %s (%s), %zu lengths x %zu depths x %d trials, variant %s, %s mode, seed %llu\n",
               ep.url().ToString().c_str(), info->model.c_str(), spec.lengths.size(), spec.depths.size(), spec.trials,
               NeedleVariantName(spec.variant), ApiKindName(spec.api), static_cast<unsigned long long>(spec.seed));
  const auto t0 = Clock::now();
  std::vector<NeedleResult> results = RunNeedleGrid(ep, *counter, spec, **haystack, o.run);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  NeedleSummary summary = SummarizeNeedle(results, spec.lengths, spec.depths, spec.threshold);
  std::fputs(NeedleTable(summary).c_str(), stdout);
  int code = 0;
  if (o.expect_length) {
    const bool ok = summary.effective_length && *summary.effective_length >= *o.expect_length;
    std::printf("%s effective_length: %s %s %lld tokens\n", ok ? "PASS" : "FAIL",
                summary.effective_length ? std::to_string(*summary.effective_length).c_str() : "none",
                ok ? ">=" : "<", static_cast<long long>(*o.expect_length));
    if (!ok) code = 1;
  }
  std::fflush(stdout);
  nlohmann::json meta = {{"tool", "kvserve needle"},
                         {"url", ep.url().ToString()},
                         {"model", info->model},
                         {"endpoint", info->ToJson()},
                         {"token_counter", counter->Describe()},
                         {"seconds", secs},
                         {"spec", spec.ToJson()}};
  if (o.expect_length) meta["expect_length"] = *o.expect_length;
  auto write = [](const std::string& path, const std::string& text) -> Status {
    KVS_RETURN_IF_ERROR(WriteTextFile(path, text));
    std::fprintf(stderr, "wrote %s\n", path.c_str());
    return Status::Ok();
  };
  if (!o.json_path.empty()) {
    if (Status s = write(o.json_path, NeedleJson(summary, results, meta).dump(1)); !s.ok()) return fail(s);
  }
  if (!o.html_path.empty()) {
    if (Status s = write(o.html_path, NeedleHtml(summary, results, meta)); !s.ok()) return fail(s);
  }
  if (!o.svg_path.empty()) {
    if (Status s = write(o.svg_path, NeedleHeatmapSvg(summary, "Needle recall: " + info->model)); !s.ok()) {
      return fail(s);
    }
  }
  return code;
}

// --- the gate ---------------------------------------------------------------------

std::string NeedleGateSpec::ToString() const { return fmt::format("{}:{:g}%", length, threshold * 100); }

StatusOr<NeedleGateSpec> ParseNeedleGate(const std::string& s) {
  auto bad = [&] {
    return InvalidArgument("bad --needle-gate '{}': expected LENGTH:THRESHOLD[:TRIALS], e.g. 4096:0.9 or 4k:90%", s);
  };
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == ':') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  if (parts.size() < 2 || parts.size() > 3) return bad();
  auto len = ParseLengths(parts[0]);
  if (!len.ok() || len->size() != 1) return bad();
  NeedleGateSpec g;
  g.length = (*len)[0];
  std::string th = parts[1];
  const bool pct = !th.empty() && th.back() == '%';
  if (pct) th.pop_back();
  try {
    size_t used = 0;
    g.threshold = std::stod(th, &used);
    if (used != th.size()) return bad();
  } catch (...) {
    return bad();
  }
  if (pct || g.threshold > 1) g.threshold /= 100;
  if (!(g.threshold > 0 && g.threshold <= 1)) return bad();
  if (parts.size() == 3) {
    auto t = ParseLengths(parts[2]);
    if (!t.ok() || t->size() != 1 || (*t)[0] > 100) return bad();
    g.trials = static_cast<int>((*t)[0]);
  }
  if (g.length < 64) return InvalidArgument("--needle-gate: the length must be at least 64 tokens");
  return g;
}

StatusOr<NeedleGateResult> RunNeedleGate(const std::string& base_url, const std::string& api_key,
                                         const NeedleGateSpec& gate) {
  EndpointOptions eo;
  eo.url = base_url;
  eo.api_key = api_key;
  eo.request_timeout_seconds = 600;
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> ep, Endpoint::Create(eo));
  KVS_ASSIGN_OR_RETURN(EndpointInfo info, ep->Discover());
  std::unique_ptr<TokenCounter> counter = ep->Counter();
  if (!counter) return FailedPrecondition("the server has no /tokenize to build exact-length prompts");
  NeedleSpec spec;
  spec.depths = {0, 0.25, 0.5, 0.75, 1.0};
  spec.trials = gate.trials;
  spec.threshold = gate.threshold;
  spec.seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1u;
  const int64_t answer = AnswerTokenBudget(spec);
  NeedleGateResult r;
  r.length = gate.length;
  if (info.context && r.length + answer > *info.context) r.length = *info.context - answer;
  spec.lengths = {r.length};
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<TextSource> filler, MakeTextSource("filler"));
  NeedleRunOptions ro;
  ro.parallel = 2;
  ro.progress = false;
  std::vector<NeedleResult> results = RunNeedleGrid(*ep, *counter, spec, *filler, ro);
  int hits = 0, errors = 0;
  std::string first_error;
  for (const NeedleResult& x : results) {
    hits += x.hit;
    if (!x.error.empty()) {
      if (first_error.empty()) first_error = x.error;
      ++errors;
    }
  }
  r.recall = results.empty() ? 0 : static_cast<double>(hits) / static_cast<double>(results.size());
  r.passed = r.recall + 1e-12 >= gate.threshold;
  r.detail = fmt::format("needle recall {}/{} = {:.0f} % at {} tokens (depths 0-100 %), {} {:.0f} %", hits,
                         results.size(), r.recall * 100, r.length, r.passed ? ">=" : "<", gate.threshold * 100);
  if (errors > 0) r.detail += fmt::format("; {} requests failed (first: {})", errors, first_error);
  return r;
}

}  // namespace kvs::bench
