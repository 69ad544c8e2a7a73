// ServerMetrics: the "kvserve:" metric set of the HTTP service (names, help
// and buckets in one place; docs/metrics.md describes each). Request-level
// metrics are updated by the service as requests progress; engine-level
// gauges and totals (KV blocks, memory accounts, prefix cache, preemptions)
// are copied from InferenceBackend::Stats() at each scrape (Refresh).
// Thread-safety: thread-safe (see metrics.h).
#pragma once

#include <string>

#include "metrics/metrics.h"
#include "metrics/process_metrics.h"
#include "server/backend.h"

namespace kvs::server {

using metrics::Counter;
using metrics::Family;
using metrics::Gauge;
using metrics::Histogram;

struct ServerMetrics {
  ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Copies engine statistics (nullptr while loading) and process figures.
  void Refresh(const BackendStats* stats);

  // Per request, as it progresses (GenerationJob).
  void ObservePrompt(int64_t prompt_tokens);
  void ObserveFirstToken(int64_t prompt_tokens, double ttft_seconds);
  // A choice that ended after `tokens` timed tokens, the first at
  // `first_to_last_seconds` before the last (no sample below 2 tokens).
  void ObserveDecode(int64_t tokens, double first_to_last_seconds);
  // Counts a finished HTTP exchange in request_errors_total when it failed:
  // by status, or (a stream that had already answered 200) by the finish
  // reason of its generation.
  void CountError(int status, const std::string& finish_reason);
  // The error class of a response ("" when it is not an error).
  static std::string ErrorClass(int status, const std::string& finish_reason);
  // The prompt_tokens_le label of a prompt length ("256" ... "+Inf").
  static std::string PromptLengthBucket(int64_t prompt_tokens);
  std::string Render() const { return registry.Render(); }

  metrics::Registry registry;
  // Engine state (from Stats()).
  Gauge& requests_running;
  Gauge& requests_waiting;
  Gauge& kv_blocks_total;
  Gauge& kv_blocks_used;
  Gauge& kv_blocks_cached;
  Gauge& kv_blocks_free;
  Gauge& kv_usage_ratio;
  Gauge& kv_window_blocks_total;   // the sliding-window layers' group (engine/block_manager.h)
  Gauge& kv_window_blocks_used;
  Gauge& kv_window_blocks_cached;
  Gauge& kv_block_size;
  Family<Gauge>& memory_bytes;  // {account="weights"|"kv_pool"|"activations"}
  Gauge& max_admissible_context;
  Counter& prefix_queried_tokens;
  Counter& prefix_hit_tokens;
  Counter& preemptions;
  Counter& spec_draft_tokens;     // speculative decoding: drafts verified
  Counter& spec_accepted_tokens;  // drafts accepted
  Counter& spec_verifications;    // verification passes of a sequence
  Counter& spec_draft_model_seconds;  // the draft model's forward passes (method draft)
  Counter& forward_seconds;        // engine busy time; its rate is the compute utilisation
  Counter& engine_steps;
  Gauge& kv_blocks_used_peak;
  Gauge& kv_usage_peak_ratio;      // the KV watermark's peak since start
  Gauge& prefix_hit_ratio;         // hits / queried since start
  // The prefix cache's tiers: hits by tier, and the disk tier's store.
  Family<Counter>& prefix_hit_tokens_by_tier;  // {tier="ram"|"disk"}
  Gauge& kv_disk_blocks;
  Gauge& kv_disk_bytes;
  Counter& kv_disk_written_bytes;
  Counter& kv_disk_read_bytes;
  Counter& kv_disk_restored_blocks;
  Counter& kv_disk_restore_seconds;
  Counter& kv_disk_evicted_blocks;
  Family<Counter>& kv_disk_dropped_blocks;     // {reason="corrupt"|"foreign"}
  Counter& kv_disk_write_errors;
  Counter& kv_disk_writes_dropped;
  Family<Counter>& kv_disk_prefetched_blocks;  // {outcome="used"|"unused"}
  // Requests (updated by the service).
  Histogram& ttft;
  Histogram& inter_token_latency;
  Histogram& e2e_latency;
  Histogram& queue_time;
  Histogram& time_per_output_token;
  Histogram& prompt_length;             // tokens per prompt
  Histogram& generation_length;         // tokens per finished choice
  Histogram& iteration_tokens;          // tokens per engine step (the engine's counts, mirrored)
  Family<Histogram>& ttft_by_length;    // {prompt_tokens_le}
  Family<Counter>& errors;              // {class}
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Family<Counter>& finished;       // {finish_reason}, one per choice
  Family<Counter>& api_key_reloads;  // {outcome: ok, failed}
  Family<Counter>& http_requests;  // {path, status}
  Gauge& http_in_flight;
  Gauge& sequences_in_flight;      // admitted by the service, counted against max_concurrent_requests
  Gauge& prep_running;             // requests being prepared (parse, template, tokenize)
  Gauge& prep_waiting;             // requests waiting for a prep thread
  // Process.
  Gauge& resident_memory;
  Gauge& ready;                    // 1 when serving, 0 while loading or draining
  Family<Gauge>& model_info;       // {model, sha256}: 1 for the model being served
  // Tensor parallel (runtime.tensor_parallel > 1), per rank {rank}: what
  // rank 0 last heard (backend::ParallelStatsBoard, every 16 steps).
  Family<Counter>& tp_forward_seconds;
  Family<Counter>& tp_allreduce_seconds;
  Family<Counter>& tp_allreduce_bytes;
  Family<Counter>& tp_steps;
  Counter& pp_micro_batches;
  Family<Counter>& pp_wait_seconds;
  metrics::ProcessMetrics process; // process_* (standard names) and kvserve:build_info
};

}  // namespace kvs::server
