// Service: the HTTP handler of `kvserve serve`. On the I/O threads it routes
// requests, checks API keys and readiness and serves /health, /ready,
// /metrics and /v1/models; everything CPU-heavy (parsing and validating
// OpenAI requests, chat templates, tokenizing, length checks, /tokenize and
// /detokenize) runs on the bounded prep pool (frontend::WorkQueue). Back on the
// connection's strand it admits generations against
// runtime.max_concurrent_requests and runs them as GenerationJobs. Every response is counted in
// kvserve:http_requests_total and written to the access log.
//
// Order of checks for an API route: 404/405 (route), 401 (key), 503 (not
// ready / draining), 503 (prep pool full), 400 (body), 404 (model name),
// 400 (length), 429 (queue).
//
// States: kLoading (until SetReady) -> kReady -> kDraining. /health answers
// 200 in every state; /ready only in kReady.
// Thread-safety: Handle runs on connection strands, concurrently; the other
// methods are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/error.h"
#include "api/openai_request.h"
#include "frontend/work_queue.h"
#include "http/http_server.h"
#include "server/access_log.h"
#include "server/backend.h"
#include "server/config.h"
#include "server/generation.h"
#include "server/server_metrics.h"
#include "server/status.h"

namespace kvs::server {

// What /v1/models says about the loaded model.
struct ModelCard {
  std::string id;
  std::string path;
  std::string sha256;
  int64_t created = 0;       // unix seconds when loading finished
  double load_seconds = 0;   // hashing + loading
  int64_t max_context_length = 0;
};

class Service {
 public:
  enum class State { kLoading, kReady, kDraining };

  Service(ServeConfig config, std::vector<std::string> api_keys, ServerMetrics* metrics, AccessLog* access_log);
  ~Service();  // stops the prep pool (tasks already queued run first)
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  void Handle(std::shared_ptr<http::Exchange> ex);

  // The backend stays owned by the caller and must outlive every request.
  // Replaces the accepted API keys (SIGHUP, or a change of
  // server.api_key_file): requests from now on are checked against these.
  // An empty list turns authentication off. Thread-safe.
  void SetApiKeys(const std::vector<std::string>& api_keys);
  // Limits a reload changes for requests admitted from now on (running ones
  // keep theirs). max_concurrent_requests may only go down from the value
  // the server started with: the KV plan and the engine queue are sized for
  // that (CHECKed). Thread-safe.
  void SetRequestLimits(int64_t max_concurrent_requests, double request_timeout_seconds);
  void SetReady(InferenceBackend* backend, ModelCard card);
  // A start-up gate (serve --needle-gate): while a reason is set, the API
  // serves requests but /ready answers 503 {"status": "not_ready",
  // "reason": ...} and kvserve:ready is 0. "" clears it.
  void SetNotReadyReason(std::string reason);
  void BeginDrain();
  // Finishes the prep tasks and stops the pool (before the backend goes).
  void StopPreparing() { prep_.Stop(); }
  // Ends every running generation with `error` (e.g. at the drain deadline).
  void AbortAll(const api::ApiError& error, const std::string& finish_reason);

  State state() const { return state_.load(); }
  int64_t sequences_in_flight() const { return sequences_in_flight_.load(); }
  int64_t running_jobs();

  // Refreshes the metrics from the backend and adds one sample to the
  // status page's history (RunServe's sampler thread, every 2 s).
  void SampleStatus();

  // "k-" + the first 8 hex digits of SHA-256(key): identifies a key in logs
  // without revealing it.
  static std::string KeyId(std::string_view key);
  // The prefix-cache salt a request runs with: "" when neither an API key
  // nor a cache_salt applies (one shared cache); else 128 bits of
  // SHA-256(key digest, cache_salt), so each API key is its own namespace
  // (tenants never share cached KV or learn from cached_tokens what another
  // sent) and cache_salt subdivides it. Computed once per request; the
  // engine keeps only these 32 hex digits with each cached first block.
  static std::string PrefixCacheNamespace(std::string_view key_digest, std::string_view cache_salt);

 private:
  struct Ctx;
  void Reply(Ctx& ctx, int status, const nlohmann::json& body, std::vector<std::pair<std::string, std::string>> headers = {});
  void ReplyError(Ctx& ctx, const api::ApiError& e);
  // Counts the response (unless already counted) and writes the access log.
  void Log(const Ctx& ctx, int status, const JobSummary* summary, bool count = true);
  bool Authorize(Ctx& ctx);
  bool CheckReady(Ctx& ctx);

  void HandleHealth(Ctx& ctx);
  void HandleReady(Ctx& ctx);
  void HandleMetrics(Ctx& ctx);
  void HandleStatusPage(Ctx& ctx);
  void HandleStatus(Ctx& ctx);
  void RefreshMetrics();
  void HandleModels(Ctx& ctx, const std::string& model_id);
  void HandleCacheBlocks(Ctx& ctx);  // GET /v1/cache/blocks?epoch=E&since=N&limit=M
  // Runs work(ctx) on the prep pool; 503 with Retry-After when it is full.
  void OnPrepPool(Ctx& ctx, std::function<void(Ctx&)> work);
  // On a prep thread: parse, render, tokenize, check; then StartGeneration
  // is posted to the exchange's strand.
  void HandleGenerate(Ctx& ctx, api::Endpoint endpoint, api::Dialect dialect = api::Dialect::kOpenAI);
  // On the strand: admission against max_concurrent_requests, then the job.
  void StartGeneration(Ctx& ctx, bool chat, api::ParsedRequest req, std::vector<PreparedPrompt> prompts);
  void HandleTokenize(Ctx& ctx);    // on a prep thread
  void HandleDetokenize(Ctx& ctx);  // on a prep thread

  // Renders and tokenizes every prompt of a parsed request and checks it
  // against the model's limits (engine::ValidateRequest, the one check).
  std::optional<api::ApiError> Prepare(const api::ParsedRequest& req, std::vector<PreparedPrompt>* out);
  // The request's constraint compiled for the model's vocabulary, shared by
  // requests with the same grammar (so its lazily filled mask cache stays
  // warm); 400 when the backend cannot constrain or the grammar is refused.
  // Where the reply starts in (or may open) a reasoning section, the
  // constraint applies after it (grammar::WithReasoningSection).
  std::optional<api::ApiError> CompileConstraint(const api::ParsedRequest& req, InferenceBackend* b,
                                                 grammar::ReasoningStart reasoning_start,
                                                 std::shared_ptr<const grammar::CompiledGrammar>* out);

  const ServeConfig config_;
  // runtime.max_concurrent_requests and request_timeout_seconds in force
  // (SetRequestLimits); config_ keeps the ones the server started with.
  std::atomic<int64_t> max_sequences_;
  std::atomic<double> request_timeout_seconds_;
  frontend::WorkQueue prep_;  // its tasks use the members below: ~Service stops it first
  // SHA-256 of each accepted key; replaced whole by SetApiKeys (a reload).
  std::shared_ptr<const std::vector<std::string>> key_digests_;
  ServerMetrics* metrics_;
  AccessLog* access_log_;
  StatusBoard status_board_;

  std::atomic<State> state_{State::kLoading};
  std::atomic<InferenceBackend*> backend_{nullptr};
  ModelCard card_;  // written once before state_ becomes kReady
  std::atomic<int64_t> sequences_in_flight_{0};

  std::mutex not_ready_mu_;
  std::string not_ready_reason_;  // guarded by not_ready_mu_

  // Compiled grammars by GBNF text, for one vocabulary; cleared when full.
  static constexpr size_t kMaxCachedGrammars = 64;
  std::mutex grammars_mu_;
  const grammar::Vocabulary* grammars_vocab_ = nullptr;  // guarded by grammars_mu_
  std::unordered_map<std::string, std::shared_ptr<const grammar::CompiledGrammar>> grammars_;  // guarded by grammars_mu_

  std::mutex jobs_mu_;
  std::unordered_map<std::string, std::weak_ptr<GenerationJob>> jobs_;    // guarded by jobs_mu_
  std::optional<std::pair<api::ApiError, std::string>> abort_;                // guarded by jobs_mu_; set by AbortAll
};

}  // namespace kvs::server
