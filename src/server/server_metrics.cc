#include "server/server_metrics.h"

namespace kvs::server {

namespace {

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                             1.0,   2.5,   5.0,  7.5,  10,   20,   40,   80,  160, 640};
const std::vector<double> kTokenBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                           0.2,   0.3,    0.4,   0.5,  0.75,  1.0,  2.5,   5.0, 10};
const std::vector<double> kRequestBuckets = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10,
                                             15,   20,   30,  40,  50,  60,  120, 240, 480, 960, 1920};

}  // namespace

ServerMetrics::ServerMetrics()
    : requests_running(registry.Gauge0("kvserve:num_requests_running",
                                       "Sequences the engine is computing (in its running batch).")),
      requests_waiting(registry.Gauge0("kvserve:num_requests_waiting",
                                       "Sequences admitted but waiting for the engine (queue or preempted).")),
      kv_blocks_total(registry.Gauge0("kvserve:kv_cache_blocks_total", "KV cache blocks in the pool.")),
      kv_blocks_used(registry.Gauge0("kvserve:kv_cache_blocks_used", "KV cache blocks held by sequences.")),
      kv_blocks_cached(registry.Gauge0("kvserve:kv_cache_blocks_cached",
                                       "Free KV blocks that still hold reusable prefix-cache KV (evictable).")),
      kv_blocks_free(registry.Gauge0("kvserve:kv_cache_blocks_free", "Free, empty KV cache blocks.")),
      kv_usage_ratio(registry.Gauge0("kvserve:kv_cache_usage_ratio",
                                     "Used KV blocks / total KV blocks (cached-evictable blocks count as free).")),
      kv_block_size(registry.Gauge0("kvserve:kv_cache_block_size_tokens", "Tokens per KV block.")),
      memory_bytes(registry.AddGauge("kvserve:memory_bytes",
                                     "Memory accounts of the start-up plan in bytes: weights, kv_pool, activations, overhead.", {"account"})),
      max_admissible_context(registry.Gauge0(
          "kvserve:max_admissible_context_tokens",
          "Longest request (prompt + output tokens) the engine could admit right now.")),
      prefix_queried_tokens(registry.Counter0("kvserve:prefix_cache_queried_tokens_total",
                                              "Prompt tokens looked up in the prefix cache.")),
      prefix_hit_tokens(registry.Counter0("kvserve:prefix_cache_hit_tokens_total",
                                          "Prompt tokens found in the prefix cache (not recomputed).")),
      preemptions(registry.Counter0("kvserve:num_preemptions_total",
                                    "Sequences preempted (KV freed, recomputed later) to make room.")),
      ttft(registry.Histogram0("kvserve:time_to_first_token_seconds",
                               "From the request fully received to its first generated token.", kLatencyBuckets)),
      inter_token_latency(registry.Histogram0("kvserve:inter_token_latency_seconds",
                                              "Between consecutive generated tokens of one sequence.", kTokenBuckets)),
      e2e_latency(registry.Histogram0("kvserve:e2e_request_latency_seconds",
                                      "From the request fully received to its response finished (generation requests).",
                                      kRequestBuckets)),
      queue_time(registry.Histogram0("kvserve:request_queue_time_seconds",
                                     "From submission to the engine until first scheduled.", kRequestBuckets)),
      prompt_tokens(registry.Counter0("kvserve:prompt_tokens_total", "Prompt tokens of admitted requests.")),
      generation_tokens(registry.Counter0("kvserve:generation_tokens_total", "Generated tokens.")),
      finished(registry.AddCounter("kvserve:request_finished_total",
                                   "Finished sequences (one per choice) by finish reason: stop, length, cancelled "
                                   "(client gone), timeout, error, shutdown.",
                                   {"finish_reason"})),
      http_requests(registry.AddCounter("kvserve:http_requests_total", "HTTP responses by route and status code.",
                                        {"path", "status"})),
      http_in_flight(registry.Gauge0("kvserve:http_requests_in_flight", "HTTP requests being handled.")),
      sequences_in_flight(registry.Gauge0(
          "kvserve:sequences_in_flight",
          "Sequences admitted by the server and not finished (bounded by runtime.max_concurrent_requests).")),
      resident_memory(registry.Gauge0("kvserve:process_resident_memory_bytes", "Resident memory of the process.")),
      ready(registry.Gauge0("kvserve:ready", "1 when the model is loaded and the server accepts requests.")) {
  for (const char* account : {"weights", "kv_pool", "activations", "overhead"}) memory_bytes.With({account});
  for (const char* r : {"stop", "length", "cancelled", "timeout", "error", "shutdown"}) finished.With({r});
}

void ServerMetrics::Refresh(const BackendStats* stats) {
  resident_memory.Set(static_cast<double>(metrics::ProcessResidentBytes()));
  if (!stats) return;
  const engine::EngineStats& s = stats->engine;
  requests_running.Set(static_cast<double>(s.num_running));
  requests_waiting.Set(static_cast<double>(s.num_waiting));
  kv_blocks_total.Set(static_cast<double>(s.num_blocks_total));
  kv_blocks_used.Set(static_cast<double>(s.num_blocks_used));
  kv_blocks_cached.Set(static_cast<double>(s.num_blocks_cached));
  kv_blocks_free.Set(static_cast<double>(s.num_blocks_free));
  kv_usage_ratio.Set(s.num_blocks_total > 0 ? static_cast<double>(s.num_blocks_used) / s.num_blocks_total : 0.0);
  kv_block_size.Set(static_cast<double>(s.block_size));
  memory_bytes.With({"weights"}).Set(static_cast<double>(stats->memory.weights_bytes));
  memory_bytes.With({"kv_pool"}).Set(static_cast<double>(stats->memory.kv_pool_bytes));
  memory_bytes.With({"activations"}).Set(static_cast<double>(stats->memory.activation_bytes));
  memory_bytes.With({"overhead"}).Set(static_cast<double>(stats->memory.overhead_bytes));
  max_admissible_context.Set(static_cast<double>(stats->max_admissible_context));
  prefix_queried_tokens.SetMax(static_cast<double>(s.prefix_query_tokens));
  prefix_hit_tokens.SetMax(static_cast<double>(s.prefix_hit_tokens));
  preemptions.SetMax(static_cast<double>(s.num_preemptions));
}

}  // namespace kvs::server
