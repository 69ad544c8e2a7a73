#include "bench/load_runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bench/html.h"
#include "http/sse_parser.h"

namespace kvs::bench {

using Clock = std::chrono::steady_clock;

// --- RequestRecord ---------------------------------------------------------------

std::optional<double> RequestRecord::Ttft() const {
  if (!ok() || sent < 0 || first_token < 0) return std::nullopt;
  return first_token - sent;
}

std::optional<double> RequestRecord::E2e() const {
  if (!ok() || sent < 0 || end < 0) return std::nullopt;
  return end - sent;
}

int64_t RequestRecord::OutputTokens() const {
  return completion_tokens >= 0 ? completion_tokens : static_cast<int64_t>(chunk_times.size());
}

std::optional<double> RequestRecord::Tpot() const {
  auto ttft = Ttft();
  auto e2e = E2e();
  const int64_t n = OutputTokens();
  if (!ttft || !e2e || n < 2) return std::nullopt;
  return (*e2e - *ttft) / static_cast<double>(n - 1);
}

std::vector<double> RequestRecord::Itls() const {
  std::vector<double> out;
  if (!ok()) return out;
  for (size_t i = 1; i < chunk_times.size(); ++i) out.push_back(chunk_times[i] - chunk_times[i - 1]);
  return out;
}

nlohmann::json RequestRecord::ToJson() const {
  auto opt = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  auto t = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"index", index},
                      {"input_tokens", input_tokens},
                      {"max_tokens", output_tokens},
                      {"prompt_tokens", prompt_tokens >= 0 ? nlohmann::json(prompt_tokens) : nlohmann::json(nullptr)},
                      {"completion_tokens", OutputTokens()},
                      {"cached_tokens", cached_tokens >= 0 ? nlohmann::json(cached_tokens) : nlohmann::json(nullptr)},
                      {"scheduled", scheduled},
                      {"sent", t(sent)},
                      {"first_token", t(first_token)},
                      {"end", t(end)},
                      {"ttft", opt(Ttft())},
                      {"tpot", opt(Tpot())},
                      {"e2e", opt(E2e())},
                      {"chunk_times", chunk_times},
                      {"status", status},
                      {"ok", ok()},
                      {"error", error.empty() ? nlohmann::json(nullptr) : nlohmann::json(error)},
                      {"error_kind", error_kind.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_kind)}};
  if (conversation >= 0) {
    j["conversation"] = conversation;
    j["turn"] = turn;
  }
  if (!finish_reason.empty()) j["finish_reason"] = finish_reason;
  if (probe.kind != ProbeKind::kNone) {
    j["probe"] = probe.ToJson();
    j["probe"]["verdict"] = verdict.ToJson();
  }
  return j;
}

// --- Prompts -----------------------------------------------------------------------

namespace {

// A prompt of the run's text longer than the context: words are added until
// the count passes it by a margin.
StatusOr<PreparedPrompt> OverLengthPrompt(const TextSource& source, Rng& rng, const RunPlan& plan,
                                          TokenCounter& counter, std::optional<int64_t> context) {
  if (!context) {
    return FailedPrecondition(
        "over-length probes need the model's context length, and the endpoint did not give it in /v1/models "
        "(max_model_len)");
  }
  const int64_t target = *context + 64;
  size_t words = static_cast<size_t>(target);
  for (int tries = 0; tries < 6; ++tries) {
    WordStream w = MakeWords(source, rng, words);
    PreparedPrompt p;
    p.text = w.Join(w.words.size());
    if (plan.api == ApiKind::kChat) {
      KVS_ASSIGN_OR_RETURN(p.tokens, counter.CountChat({{"user", p.text}}));
    } else {
      KVS_ASSIGN_OR_RETURN(p.tokens, counter.CountPrompt(p.text));
    }
    if (p.tokens > *context) {
      p.probe = MakeOverLengthProbe();
      return p;
    }
    words = words * 2;
  }
  return Internal("could not build a prompt longer than the context of {} tokens", *context);
}

// A dataset entry's prompt: its own text (counted), or text of the run's
// source fitted to a trace's input length; max_tokens from the trace, the
// recorded reply's token count, or the plan.
// empty_tokens: the count of an empty prompt (its BOS), asked for once per
// run and kept here.
StatusOr<PreparedPrompt> DatasetPrompt(const Dataset& d, const PlannedRequest& q, const RunPlan& plan,
                                       const TextSource& source, Rng& rng, TokenCounter& counter,
                                       std::optional<int64_t> context, std::optional<int64_t>* empty_tokens) {
  const DatasetEntry& e = d.entries[static_cast<size_t>(q.dataset_index)];
  const bool chat = plan.api == ApiKind::kChat;
  PreparedPrompt pp;
  if (!e.prompt.empty()) {
    pp.text = e.prompt;
    if (chat) {
      KVS_ASSIGN_OR_RETURN(pp.tokens, counter.CountChat({{"user", pp.text}}));
    } else {
      KVS_ASSIGN_OR_RETURN(pp.tokens, counter.CountPrompt(pp.text));
    }
    pp.exact = true;
  } else {
    WordStream w = MakeWords(source, rng, static_cast<size_t>(q.input_tokens) + 16);
    KVS_ASSIGN_OR_RETURN(FitResult f, chat ? FitChatMessage(w, q.input_tokens, counter)
                                           : FitPrompt(w, q.input_tokens, counter));
    pp.text = std::move(f.text);
    pp.tokens = f.tokens;
    pp.exact = f.exact;
  }
  pp.max_tokens = q.output_tokens;
  if (!e.output_length && !e.reply.empty()) {
    KVS_ASSIGN_OR_RETURN(const int64_t with, counter.CountPrompt(e.reply));
    if (!*empty_tokens) {
      KVS_ASSIGN_OR_RETURN(const int64_t n, counter.CountPrompt(""));
      *empty_tokens = n;
    }
    pp.max_tokens = std::max<int64_t>(with - **empty_tokens, 1);
  }
  if (context) {
    if (pp.tokens >= *context) {
      pp.skip = fmt::format("dataset entry {}: {} prompt tokens do not fit the context of {}", q.dataset_index,
                            pp.tokens, *context);
    } else {
      pp.max_tokens = std::min(pp.max_tokens, *context - pp.tokens);
    }
  }
  return pp;
}

}  // namespace

StatusOr<PreparedRun> PreparePrompts(const RunPlan& plan, TokenCounter& counter,
                                     const std::function<void(size_t, size_t)>& progress,
                                     std::optional<int64_t> context) {
  PreparedRun out;
  out.plan = plan;
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<TextSource> source, MakeTextSource(plan.text));
  const bool multi = plan.multi_turn.conversations > 0;
  // Multi-turn texts are message contents of an exact token count on their
  // own (the conversation's total grows with the history).
  int64_t base = 0;
  if (multi) {
    KVS_ASSIGN_OR_RETURN(base, counter.CountPrompt(""));
  }
  // Recall probes hide their fact in the classic haystack whatever the
  // run's text: the task small models are trained on.
  const std::unique_ptr<TextSource> haystack = MakeFillerSource();
  auto fit_text = [&](Rng& rng, int64_t tokens, const TextSource* from = nullptr) -> StatusOr<FitResult> {
    WordStream w = MakeWords(from ? *from : *source, rng, static_cast<size_t>(tokens) + 16);
    return FitWords(
        w.words.size(), tokens + base, [&](size_t n, const std::string& pad) { return w.Join(n) + pad; },
        [&](const std::string& text) { return counter.CountPrompt(text); });
  };
  if (multi && plan.multi_turn.system_tokens > 0) {
    Rng rng(plan.seed * 7919 + 1);
    KVS_ASSIGN_OR_RETURN(FitResult f, fit_text(rng, plan.multi_turn.system_tokens));
    out.system_prompt = f.text;
  }
  // Recall probes: the fact of each conversation whose last turn asks.
  std::map<int, RecallFact> facts;
  for (const PlannedRequest& q : plan.requests) {
    if (multi && q.probe == ProbeKind::kRecall) {
      Rng rng(plan.seed * 6364136223846793005ull + static_cast<uint64_t>(q.conversation) * 13 + 5);
      facts[q.conversation] = MakeRecallFact(rng);
    }
  }
  auto count = [&](const std::string& text, bool chat) -> StatusOr<int64_t> {
    if (!chat) return counter.CountPrompt(text);
    KVS_ASSIGN_OR_RETURN(int64_t n, counter.CountChat({{"user", text}}));
    return n - base;
  };
  out.prompts.resize(plan.requests.size());
  std::optional<int64_t> empty_tokens;  // dataset replies: the count of "" (BOS), once
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const PlannedRequest& q = plan.requests[i];
    Rng rng(plan.seed * 1000003 + static_cast<uint64_t>(i) * 7 + 11);
    // Probes with prompts of their own.
    if (q.probe != ProbeKind::kNone && q.probe != ProbeKind::kRecall && q.probe != ProbeKind::kCancel) {
      PreparedPrompt pp;
      if (q.probe == ProbeKind::kOverLength) {
        KVS_ASSIGN_OR_RETURN(pp, OverLengthPrompt(*source, rng, plan, counter, context));
      } else {
        ProbePrompt probe = q.probe == ProbeKind::kArithmetic ? MakeArithmeticProbe(rng, plan.api == ApiKind::kChat)
                            : q.probe == ProbeKind::kJson     ? MakeJsonProbe(rng)
                                                              : MakeMalformedProbe(rng);
        pp.text = std::move(probe.text);
        pp.probe = std::move(probe.probe);
        if (!pp.text.empty()) {
          KVS_ASSIGN_OR_RETURN(pp.tokens, count(pp.text, plan.api == ApiKind::kChat || q.probe == ProbeKind::kJson));
        }
      }
      out.prompts[i] = std::move(pp);
      continue;
    }
    if (q.dataset_index >= 0 && plan.dataset && q.probe == ProbeKind::kNone) {
      KVS_ASSIGN_OR_RETURN(out.prompts[i],
                           DatasetPrompt(*plan.dataset, q, plan, *source, rng, counter, context, &empty_tokens));
      continue;
    }
    if (q.probe == ProbeKind::kRecall && !multi) {
      // The fact, the run's text, the question: a prompt of about the
      // planned length.
      const bool chat = plan.api == ApiKind::kChat;
      RecallFact fact = MakeRecallFact(rng);
      WordStream w = MakeWords(*haystack, rng, static_cast<size_t>(q.input_tokens) + 16);
      const int64_t middle = std::max<int64_t>(q.input_tokens - 32, 1);
      KVS_ASSIGN_OR_RETURN(FitResult f, chat ? FitChatMessage(w, middle, counter) : FitPrompt(w, middle, counter));
      PreparedPrompt pp;
      pp.text = fact.fact + " " + f.text + " " + fact.question.text;
      if (!chat) pp.text += " " + fact.answer_prefix;
      KVS_ASSIGN_OR_RETURN(pp.tokens, count(pp.text, chat));
      pp.probe = fact.question.probe;
      out.prompts[i] = std::move(pp);
      continue;
    }
    if (q.probe == ProbeKind::kRecall) {
      const ProbePrompt& question = facts[q.conversation].question;
      KVS_ASSIGN_OR_RETURN(const int64_t n, count(question.text, true));
      PreparedPrompt pp;
      pp.text = question.text;
      pp.tokens = n;
      pp.probe = question.probe;
      out.prompts[i] = std::move(pp);
      continue;
    }
    FitResult f;
    if (multi) {
      const bool probed = facts.count(q.conversation) > 0;
      KVS_ASSIGN_OR_RETURN(f, fit_text(rng, q.input_tokens, probed ? haystack.get() : nullptr));
      f.tokens -= base;
      if (auto it = facts.find(q.conversation); it != facts.end() && q.turn == 0) {
        // The first turn states the fact its conversation's last turn asks for.
        f.text = it->second.fact + " " + f.text;
        KVS_ASSIGN_OR_RETURN(f.tokens, count(f.text, true));
        f.exact = false;
      }
    } else {
      WordStream w = MakeWords(*source, rng, static_cast<size_t>(q.input_tokens) + 16);
      if (plan.api == ApiKind::kChat) {
        KVS_ASSIGN_OR_RETURN(f, FitChatMessage(w, q.input_tokens, counter));
      } else {
        KVS_ASSIGN_OR_RETURN(f, FitPrompt(w, q.input_tokens, counter));
      }
    }
    PreparedPrompt& pp = out.prompts[i];
    pp.text = std::move(f.text);
    pp.tokens = f.tokens;
    pp.exact = f.exact;
    if (q.probe == ProbeKind::kCancel) pp.probe = MakeCancelProbe();
    if (progress && (i % 8 == 7 || i + 1 == plan.requests.size())) progress(i + 1, plan.requests.size());
  }
  return out;
}

nlohmann::json RequestBody(const RunPlan& plan, const std::string& model, const std::string& prompt,
                           const std::vector<ChatMessage>* history, const Probe* probe, int64_t max_tokens) {
  const bool answer_probe = probe && ChecksAnswer(probe->kind);
  const bool json_probe = probe && probe->kind == ProbeKind::kJson;
  nlohmann::json b;
  b["model"] = model;
  if (plan.api == ApiKind::kChat || json_probe) {
    nlohmann::json ms = nlohmann::json::array();
    if (history) {
      for (const ChatMessage& m : *history) ms.push_back({{"role", m.role}, {"content", m.content}});
    }
    ms.push_back({{"role", "user"}, {"content", prompt}});
    b["messages"] = ms;
  } else {
    b["prompt"] = prompt;
  }
  b["max_tokens"] = probe && probe->max_tokens > 0 ? probe->max_tokens : max_tokens > 0 ? max_tokens : plan.output_len;
  b["temperature"] = 0;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  // A probe's answer ends where the model ends it.
  if (plan.ignore_eos && !answer_probe) b["ignore_eos"] = true;
  if (json_probe) {
    b["response_format"] = {{"type", "json_schema"},
                            {"json_schema", {{"name", "probe"}, {"strict", true}, {"schema", probe->schema}}}};
  }
  return b;
}

std::pair<std::string, std::string> RequestBytes(const RunPlan& plan, const std::string& model,
                                                 const PreparedPrompt& prompt,
                                                 const std::vector<ChatMessage>* history) {
  const Probe& probe = prompt.probe;
  const bool chat = plan.api == ApiKind::kChat || probe.kind == ProbeKind::kJson;
  std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
  if (probe.kind == ProbeKind::kMalformed) return {path, MalformedBody(probe, model, chat)};
  return {path, RequestBody(plan, model, prompt.text, history, &probe, prompt.max_tokens).dump()};
}

// --- Running -------------------------------------------------------------------------

namespace {

// Per-call state, touched only by the call's callbacks (one at a time on
// its strand) until on_done hands the record back under the run's mutex.
struct CallState {
  RequestRecord* rec = nullptr;
  Clock::time_point t0;
  http::SseParser sse;
  std::string error_body;
  bool done_event = false;
  // Cancel probes: the client goes away after the first text chunk. The
  // handle is set after Start returns, which may be after that chunk.
  std::mutex call_mu;
  std::optional<http::ClientCall> call;
  bool want_cancel = false;
  void CancelNowOrOnStart() {
    std::lock_guard<std::mutex> lock(call_mu);
    want_cancel = true;
    if (call) call->Cancel();
  }
  double Now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

void OnEvent(CallState& cs, const http::SseMessage& m) {
  RequestRecord& r = *cs.rec;
  if (m.data == "[DONE]") {
    cs.done_event = true;
    return;
  }
  auto j = nlohmann::json::parse(m.data, nullptr, false);
  if (m.event == "error" || (j.is_object() && j.contains("error"))) {
    if (r.error.empty()) {
      r.error = "in-stream error: " + ErrorMessageFromBody(m.data);
      r.error_kind = "stream";
    }
    return;
  }
  if (!j.is_object()) return;
  std::string text;
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const auto& c = j["choices"][0];
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      r.finish_reason = c["finish_reason"].get<std::string>();
    }
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].is_object()) {
      const auto& d = c["delta"];
      if (d.contains("content") && d["content"].is_string()) text += d["content"].get<std::string>();
      if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) {
        text += d["reasoning_content"].get<std::string>();
      }
    }
  }
  if (!text.empty()) {
    const double t = cs.Now();
    if (r.first_token < 0) r.first_token = t;
    r.chunk_times.push_back(t);
    r.answer += text;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      r.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      r.completion_tokens = u["completion_tokens"].get<int64_t>();
    }
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
      const auto& d = u["prompt_tokens_details"];
      if (d.contains("cached_tokens") && d["cached_tokens"].is_number_integer()) {
        r.cached_tokens = d["cached_tokens"].get<int64_t>();
      }
    }
  }
}

void Finish(CallState& cs, const http::ClientResult& res) {
  RequestRecord& r = *cs.rec;
  r.end = cs.Now();
  if (!res.ok()) {
    if (r.error.empty()) {
      r.error = fmt::format("{}: {}", http::ClientErrorKindName(res.error), res.message);
      r.error_kind = http::ClientErrorKindName(res.error);
    }
    return;
  }
  if (r.status != 200) {
    r.error_body = cs.error_body;
    r.error = fmt::format("HTTP {}: {}", r.status, ErrorMessageFromBody(cs.error_body));
    r.error_kind = r.status >= 500 ? "http_5xx" : "http_4xx";
  }
}

class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label, size_t total)
      : enabled_(enabled), tty_(isatty(2) != 0), label_(std::move(label)), total_(total) {}
  void Update(size_t done, int inflight, int errors, double elapsed, bool final = false) {
    if (!enabled_) return;
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    if (tty_) {
      const int width = 28;
      const int fill = static_cast<int>(frac * width);
      std::string bar(static_cast<size_t>(fill), '#');
      bar.resize(width, '.');
      std::fprintf(stderr, "\r%s [%s] %zu/%zu done, %d in flight, %d errors, %.1f s   ", label_.c_str(), bar.c_str(),
                   done, total_, inflight, errors, elapsed);
      if (final) std::fprintf(stderr, "\n");
      std::fflush(stderr);
      return;
    }
    // Not a terminal (CI logs): a line per quarter and at the end.
    const int quarter = static_cast<int>(frac * 4);
    if (quarter > last_quarter_ || final) {
      last_quarter_ = quarter;
      std::fprintf(stderr, "%s: %zu/%zu done, %d in flight, %d errors, %.1f s\n", label_.c_str(), done, total_,
                   inflight, errors, elapsed);
    }
  }

 private:
  bool enabled_, tty_;
  std::string label_;
  size_t total_;
  int last_quarter_ = 0;
};

// A probe's verdict from its finished record.
void ScoreRecord(RequestRecord* r) {
  ProbeOutcome o;
  o.status = r->status;
  o.transport_error = !r->error.empty() && r->error_kind != "http_4xx" && r->error_kind != "http_5xx";
  o.cancelled = r->error_kind == http::ClientErrorKindName(http::ClientErrorKind::kCancelled);
  o.answer = r->answer;
  o.error_body = r->error_body;
  o.finish_reason = r->finish_reason;
  r->verdict = ScoreProbe(r->probe, o);
  if (o.transport_error && !r->verdict.ok) r->verdict.detail = r->error;
}

}  // namespace

StatusOr<MetricsPoint> ReadMetricsPoint(Endpoint& ep, double t) {
  KVS_ASSIGN_OR_RETURN(std::vector<std::string> pages, ep.MetricsPages());
  MetricsPoint p;
  p.t = t;
  for (const std::string& page : pages) p.sources.push_back(ExtractGauges(ParsePrometheusText(page)));
  p.g = Combine(p.sources);
  return p;
}

RunResult RunLoad(Endpoint& ep, const PreparedRun& run, const LoadOptions& o) {
  const RunPlan& plan = run.plan;
  RunResult res;
  res.plan = plan;
  res.started_utc = UtcNow();
  const size_t n = plan.requests.size();
  res.requests.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RequestRecord& r = res.requests[i];
    const PlannedRequest& q = plan.requests[i];
    r.index = q.index;
    r.conversation = q.conversation;
    r.turn = q.turn;
    r.input_tokens = q.input_tokens;
    r.output_tokens = q.output_tokens;
    r.scheduled = q.arrival;
    r.probe = run.prompts[i].probe;
    if (run.prompts[i].max_tokens > 0) r.output_tokens = run.prompts[i].max_tokens;
    if (q.dataset_index >= 0) r.input_tokens = run.prompts[i].tokens;
  }
  // Conversations: multi-turn ones from the plan, else one per request.
  struct Conv {
    std::vector<size_t> reqs;
    double arrival = 0;
    size_t next = 0;
    std::vector<ChatMessage> history;
  };
  std::vector<Conv> convs;
  std::vector<size_t> conv_of(n);
  const bool multi = plan.multi_turn.conversations > 0;
  for (size_t i = 0; i < n; ++i) {
    const PlannedRequest& q = plan.requests[i];
    if (multi && !convs.empty() && plan.requests[convs.back().reqs.front()].conversation == q.conversation) {
      convs.back().reqs.push_back(i);
    } else {
      Conv c;
      c.reqs.push_back(i);
      c.arrival = q.arrival;
      if (multi && !run.system_prompt.empty()) c.history.push_back({"system", run.system_prompt});
      convs.push_back(std::move(c));
    }
    conv_of[i] = convs.size() - 1;
  }

  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> finished;  // request indices whose call ended (guarded by mu)
  int inflight = 0, errors = 0, active = 0;
  size_t next_conv = 0, done = 0;
  bool stop_new = false;
  const Clock::time_point t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  // /metrics sampler: one reading before the first request (the peak
  // gauges' baseline), then every interval, and one after the last.
  std::atomic<bool> sampling{o.metrics_interval_seconds > 0 && ep.info().has_metrics};
  if (o.metrics_interval_seconds > 0 && !ep.info().has_metrics) res.metrics_note = "the endpoint has no /metrics";
  std::mutex metrics_mu;
  std::thread sampler;
  if (sampling) {
    if (auto p = ReadMetricsPoint(ep, 0); p.ok()) res.metrics.push_back(std::move(*p));
    sampler = std::thread([&] {
      int failures = 0;
      while (sampling.load()) {
        auto p = ReadMetricsPoint(ep, elapsed());
        if (p.ok()) {
          std::lock_guard<std::mutex> lock(metrics_mu);
          res.metrics.push_back(std::move(*p));
        } else if (++failures > 5 && res.metrics.empty()) {
          std::lock_guard<std::mutex> lock(metrics_mu);
          res.metrics_note = "reading /metrics failed: " + p.status().message();
          return;
        }
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::duration<double>(o.metrics_interval_seconds), [&] { return !sampling.load(); });
      }
    });
  }

  auto send = [&](size_t ri, const std::vector<ChatMessage>* history) {
    RequestRecord& rec = res.requests[ri];
    if (!run.prompts[ri].skip.empty()) {
      // Never sent: counted as planned, not sent, with the reason.
      rec.error = "skipped: " + run.prompts[ri].skip;
      rec.error_kind = "skipped";
      std::lock_guard<std::mutex> lock(mu);
      finished.push_back(ri);
      cv.notify_all();
      return;
    }
    auto [path, body] = RequestBytes(plan, ep.info().model, run.prompts[ri], history);
    auto cs = std::make_shared<CallState>();
    cs->rec = &rec;
    cs->t0 = t0;
    http::ClientCallbacks cb;
    cb.on_head = [cs](const http::ClientResponseHead& h) { cs->rec->status = h.status; };
    cb.on_data = [cs](std::string_view bytes) {
      if (cs->rec->status != 200) {
        if (cs->error_body.size() < 65536) cs->error_body.append(bytes.substr(0, 65536 - cs->error_body.size()));
        return;
      }
      for (const http::SseMessage& m : cs->sse.Feed(bytes)) OnEvent(*cs, m);
      if (cs->rec->probe.kind == ProbeKind::kCancel && cs->rec->first_token >= 0) cs->CancelNowOrOnStart();
    };
    cb.on_done = [cs, ri, &mu, &cv, &finished](const http::ClientResult& r) {
      Finish(*cs, r);
      std::lock_guard<std::mutex> lock(mu);
      finished.push_back(ri);
      cv.notify_all();
    };
    rec.sent = elapsed();
    http::ClientCall call = ep.client().Start(ep.url(), ep.MakePost(path, std::move(body)), std::move(cb));
    if (rec.probe.kind == ProbeKind::kCancel) {
      std::lock_guard<std::mutex> lock(cs->call_mu);
      cs->call = call;
      if (cs->want_cancel) call.Cancel();
    }
  };

  ProgressBar bar(o.progress, o.progress_label.empty() ? plan.name : o.progress_label + " " + plan.name, n);
  std::unique_lock<std::mutex> lock(mu);
  double last_progress = -1;
  for (;;) {
    // Calls that ended: record, and queue the conversation's next turn.
    std::vector<size_t> ready;
    while (!finished.empty()) {
      const size_t ri = finished.front();
      finished.pop_front();
      --inflight;
      ++done;
      RequestRecord& rec = res.requests[ri];
      if (rec.probe.kind != ProbeKind::kNone) {
        ScoreRecord(&rec);
      } else if (!rec.ok()) {
        ++errors;
      }
      Conv& c = convs[conv_of[ri]];
      if (multi) {
        c.history.push_back({"user", run.prompts[ri].text});
        c.history.push_back({"assistant", rec.answer});
      }
      // A conversation goes on only while its turns succeed.
      if (c.next < c.reqs.size() && rec.ok() && !stop_new) {
        ready.push_back(conv_of[ri]);
      } else {
        --active;
      }
    }
    const double now = elapsed();
    if (plan.duration_seconds > 0 && now >= plan.duration_seconds) stop_new = true;
    if (!stop_new) {
      if (plan.OpenLoop()) {
        while (next_conv < convs.size() && convs[next_conv].arrival <= now &&
               (plan.max_concurrency <= 0 || active < plan.max_concurrency)) {
          ++active;
          ready.push_back(next_conv++);
        }
      } else {
        while (next_conv < convs.size() && active < std::max(plan.concurrency, 1)) {
          ++active;
          ready.push_back(next_conv++);
        }
      }
    }
    // Send outside the lock (callbacks of fast calls take it).
    std::vector<std::pair<size_t, std::vector<ChatMessage>>> to_send;
    for (size_t ci : ready) {
      Conv& c = convs[ci];
      const size_t ri = c.reqs[c.next++];
      if (!plan.OpenLoop() || c.next > 1) res.requests[ri].scheduled = now;
      to_send.emplace_back(ri, multi ? c.history : std::vector<ChatMessage>{});
      ++inflight;
    }
    const bool all_started = next_conv >= convs.size() || stop_new;
    if (inflight == 0 && all_started && finished.empty()) break;
    lock.unlock();
    for (auto& [ri, history] : to_send) send(ri, multi ? &history : nullptr);
    if (now - last_progress >= 0.2) {
      bar.Update(done, inflight, errors, now);
      last_progress = now;
    }
    lock.lock();
    if (!finished.empty()) continue;
    // Wake for the next completion, the next Poisson arrival, the duration
    // limit or a progress refresh, whichever comes first.
    double wake = now + 0.2;
    if (plan.OpenLoop() && next_conv < convs.size() && !stop_new) wake = std::min(wake, convs[next_conv].arrival);
    if (plan.duration_seconds > 0 && !stop_new) wake = std::min(wake, plan.duration_seconds);
    cv.wait_until(lock, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wake)),
                  [&] { return !finished.empty(); });
  }
  lock.unlock();
  bar.Update(done, 0, errors, elapsed(), true);
  {
    std::lock_guard<std::mutex> guard(mu);
    sampling = false;
  }
  cv.notify_all();
  if (sampler.joinable()) {
    sampler.join();
    // A last sample after every request ended: counters are complete and
    // the run's span covers its whole duration.
    if (auto p = ReadMetricsPoint(ep, elapsed()); p.ok()) res.metrics.push_back(std::move(*p));
  }
  // Duration: first send to last end.
  double first = -1, last = 0;
  for (const RequestRecord& r : res.requests) {
    if (r.sent >= 0 && (first < 0 || r.sent < first)) first = r.sent;
    last = std::max(last, r.end);
  }
  res.duration = first >= 0 ? std::max(last - first, 1e-9) : 0;
  return res;
}

}  // namespace kvs::bench
