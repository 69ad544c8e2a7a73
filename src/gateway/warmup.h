// Warm-up of a joining replica's prefix cache by the gateway.
//
// A replica that (re)joins a pool -- first seen ready, or re-admitted after an
// ejection -- has a cold prefix cache: the first requests sharing the
// tenants' system prompts pay their whole prefill. When its pool sets
// `warm_prompts_file`, the gateway holds the new replica out of routing
// (Replica::warming) and replays each listed prompt to it with max_tokens 1
// (the cheapest request that leaves the prompt's full KV blocks in the
// replica's prefix cache), `warm_concurrency` at a time. The replica takes
// traffic when every prompt has answered or `warm_timeout_seconds` has
// passed, whichever is first; a failed or timed-out warm-up is logged and
// counted and releases the replica all the same (a cold replica beats a
// missing one). Slow start (`slow_start_seconds`) ramps from the end of the
// warm-up.
//
// The prompts and their file: warm_prompts.h.
//
// Thread-safety: Warmer::Begin may be called from any thread; the replays run on the HTTP
// client's threads and only do I/O and counting there (request bodies are
// serialized when the file is loaded).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gateway/gateway_metrics.h"
#include "gateway/router.h"
#include "gateway/warm_prompts.h"
#include "http/http_client.h"

namespace kvs::gateway {

class Warmer {
 public:
  // prompts: pool name -> its list (pools without one are absent).
  Warmer(Router* router, http::HttpClient* client, GatewayMetrics* metrics,
         std::map<std::string, std::vector<WarmPrompt>> prompts);

  // Whether replicas of this pool are warmed when they join.
  bool enabled(const std::string& pool) const { return prompts_.count(pool) > 0; }
  // Starts r's warm-up when r is warming and none runs for it yet;
  // non-blocking. Ends with Replica::EndWarmup.
  void Begin(Replica* r);

 private:
  struct Run;
  void Pump(const std::shared_ptr<Run>& run);
  void Send(const std::shared_ptr<Run>& run, size_t index);
  void Finish(const std::shared_ptr<Run>& run);

  Router* router_;
  http::HttpClient* client_;
  GatewayMetrics* metrics_;
  const std::map<std::string, std::vector<WarmPrompt>> prompts_;
  std::mutex mu_;
  std::set<const Replica*> running_;  // guarded by mu_: replicas with a warm-up in progress
};

}  // namespace kvs::gateway
