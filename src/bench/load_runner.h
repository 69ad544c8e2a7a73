// Runs the online benchmark's RunPlans against an endpoint and records every
// request's timings, with the server's /metrics sampled alongside.
//
// Before a run's clock starts, every prompt is built with its exact token
// count (PreparePrompts). During the run a driver thread starts requests by
// the plan's arrival process (closed loop: `concurrency` in flight; Poisson:
// at the planned offsets, capped by max_concurrency); a multi-turn
// conversation sends its next turn, with the answers so far in its history,
// as soon as the previous turn ends. Every request streams (SSE) with usage
// requested, so the record has:
//   sent, first token (first chunk carrying text), each text chunk's arrival,
//   end; HTTP status and error; prompt / completion / cached prompt tokens
//   from the server's usage (else counted from chunks).
// Times are seconds since the run's start on the steady clock, taken on the
// client's I/O thread as bytes arrive.
// Thread-safety: RunLoad is called from one thread; it runs its own driver
// and sampler threads and joins them before returning.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/endpoint.h"
#include "bench/probes.h"
#include "bench/prom_text.h"
#include "bench/workload.h"

namespace kvs::bench {

struct RequestRecord {
  int64_t index = 0;
  int conversation = -1, turn = -1;
  int64_t input_tokens = 0;    // target (user turn for multi-turn)
  int64_t output_tokens = 0;   // requested max_tokens
  int64_t prompt_tokens = -1;  // server usage (-1: not reported)
  int64_t completion_tokens = -1;
  int64_t cached_tokens = -1;
  double scheduled = 0;        // planned send time (Poisson), else when it became sendable
  double sent = -1, first_token = -1, end = -1;
  std::vector<double> chunk_times;  // arrival of each chunk carrying text
  int status = 0;              // HTTP status; 0: no response (transport error)
  std::string error;           // "" when the request succeeded
  std::string error_kind;      // "http_4xx", "http_5xx", "stream", "connect", "timeout", ...
  std::string answer;          // generated text (kept for multi-turn history and probes; not in the JSON)
  std::string error_body;      // the body of a non-200 answer (first 64 KiB; not in the JSON)
  std::string finish_reason;   // of the first choice, when the server said
  Probe probe;                 // kind kNone: an ordinary request
  ProbeVerdict verdict;        // probes: scored when the call ended

  bool ok() const { return error.empty() && status == 200; }
  std::optional<double> Ttft() const;
  std::optional<double> E2e() const;
  // (e2e - ttft) / (output tokens - 1); nullopt for one-token answers.
  std::optional<double> Tpot() const;
  std::vector<double> Itls() const;
  int64_t OutputTokens() const;  // usage, else chunks
  nlohmann::json ToJson() const;
};

struct MetricsPoint {
  double t = 0;  // seconds since the run's start
  ServerGauges g;                    // Combine(sources)
  std::vector<ServerGauges> sources;  // one per metrics source (Endpoint::MetricsPages), in order
};

struct RunResult {
  RunPlan plan;                 // the settings (requests list kept)
  std::string started_utc;      // ISO 8601
  double duration = 0;          // first send to last end, seconds
  std::vector<RequestRecord> requests;
  std::vector<MetricsPoint> metrics;
  std::string metrics_note;     // why there are no samples, when there are none
};

// A request's prompt material, built before the run.
struct PreparedPrompt {
  std::string text;          // completions prompt or chat user message
  int64_t tokens = 0;        // counted
  bool exact = false;
  Probe probe;               // what a probe request expects (kind kNone otherwise)
  int64_t max_tokens = 0;    // > 0: this request's own (a dataset answer's length); else the plan's
  std::string skip;          // why it is not sent ("" = it is): a dataset prompt longer than the context
};

struct PreparedRun {
  RunPlan plan;
  std::vector<PreparedPrompt> prompts;  // [plan.requests.size()]
  std::string system_prompt;            // multi-turn: shared by every conversation
};

// Builds every prompt of a plan with exact token counts (prose/filler/file
// text from the plan's seed), and every probe's prompt and expectations.
// progress(done, total) is called now and then. `context`: the model's
// context length, which over-length probes must exceed (they fail to
// prepare without it).
StatusOr<PreparedRun> PreparePrompts(const RunPlan& plan, TokenCounter& counter,
                                     const std::function<void(size_t, size_t)>& progress = {},
                                     std::optional<int64_t> context = std::nullopt);

struct LoadOptions {
  double metrics_interval_seconds = 0.5;  // 0: no sampling
  bool progress = true;                   // a progress bar on stderr
  std::string progress_label;             // e.g. "run 2/5"
};

// One reading of every metrics source at `t` seconds into a run.
StatusOr<MetricsPoint> ReadMetricsPoint(Endpoint& endpoint, double t);

// Sends the run's requests and returns their records.
RunResult RunLoad(Endpoint& endpoint, const PreparedRun& run, const LoadOptions& options);

// The JSON body of a request (exposed for tests). A probe sets its own
// max_tokens, leaves ignore_eos off and adds its response format; a JSON
// probe is a chat request whatever the run's API. max_tokens > 0: the
// request's own (a dataset reply's length), else the plan's output length.
nlohmann::json RequestBody(const RunPlan& plan, const std::string& model, const std::string& prompt,
                           const std::vector<ChatMessage>* history, const Probe* probe = nullptr,
                           int64_t max_tokens = 0);
// The path and bytes a request sends (a malformed probe's bytes are not
// JSON).
std::pair<std::string, std::string> RequestBytes(const RunPlan& plan, const std::string& model,
                                                 const PreparedPrompt& prompt, const std::vector<ChatMessage>* history);

}  // namespace kvs::bench
