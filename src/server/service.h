// Service: the HTTP handler of `kvserve serve`. Routes requests, checks API
// keys and readiness, parses and validates OpenAI requests, tokenizes and
// checks lengths, admits generations against runtime.max_concurrent_requests
// and runs them as GenerationJobs; serves /health, /ready, /metrics,
// /v1/models, /tokenize and /detokenize. Every response is counted in
// kvserve:http_requests_total and written to the access log.
//
// Order of checks for an API route: 404/405 (route), 401 (key), 503 (not
// ready / draining), 400 (body), 404 (model name), 400 (length), 429 (queue).
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
#include "http/http_server.h"
#include "server/access_log.h"
#include "server/backend.h"
#include "server/config.h"
#include "server/generation.h"
#include "server/server_metrics.h"

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
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  void Handle(std::shared_ptr<http::Exchange> ex);

  // The backend stays owned by the caller and must outlive every request.
  void SetReady(InferenceBackend* backend, ModelCard card);
  // A start-up gate (serve --needle-gate): while a reason is set, the API
  // serves requests but /ready answers 503 {"status": "not_ready",
  // "reason": ...} and kvserve:ready is 0. "" clears it.
  void SetNotReadyReason(std::string reason);
  void BeginDrain();
  // Ends every running generation with `error` (e.g. at the drain deadline).
  void AbortAll(const api::ApiError& error, const std::string& finish_reason);

  State state() const { return state_.load(); }
  int64_t sequences_in_flight() const { return sequences_in_flight_.load(); }
  int64_t running_jobs();

  // "k-" + the first 8 hex digits of SHA-256(key): identifies a key in logs
  // without revealing it.
  static std::string KeyId(std::string_view key);

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
  void HandleModels(Ctx& ctx, const std::string& model_id);
  void HandleGenerate(Ctx& ctx, api::Endpoint endpoint);
  void HandleTokenize(Ctx& ctx);
  void HandleDetokenize(Ctx& ctx);

  // Renders and tokenizes every prompt of a parsed request and checks it
  // against the model's limits (engine::ValidateRequest, the one check).
  std::optional<api::ApiError> Prepare(const api::ParsedRequest& req, std::vector<PreparedPrompt>* out);

  const ServeConfig config_;
  std::vector<std::string> key_digests_;  // SHA-256 of each accepted key
  ServerMetrics* metrics_;
  AccessLog* access_log_;

  std::atomic<State> state_{State::kLoading};
  std::atomic<InferenceBackend*> backend_{nullptr};
  ModelCard card_;  // written once before state_ becomes kReady
  std::atomic<int64_t> sequences_in_flight_{0};

  std::mutex not_ready_mu_;
  std::string not_ready_reason_;  // guarded by not_ready_mu_

  std::mutex jobs_mu_;
  std::unordered_map<std::string, std::weak_ptr<GenerationJob>> jobs_;    // guarded by jobs_mu_
  std::optional<std::pair<api::ApiError, std::string>> abort_;                // guarded by jobs_mu_; set by AbortAll
};

}  // namespace kvs::server
