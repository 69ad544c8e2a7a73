#include "server/server_metrics.h"

#include <algorithm>

namespace kvs::server {

namespace {

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                             1.0,   2.5,   5.0,  7.5,  10,   20,   40,   80,  160, 640};
const std::vector<double> kTokenBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                           0.2,   0.3,    0.4,   0.5,  0.75,  1.0,  2.5,   5.0, 10};
// Prompt-length classes of the TTFT-by-length histogram (upper bounds in
// tokens; the alerts' SLOs are per class, deploy/prometheus/alerts.yaml).
const int64_t kPromptClasses[] = {256, 1024, 4096, 16384, 65536};
const std::vector<double> kLengthBuckets = {16,   32,    64,    128,   256,    512,    1024,  2048,
                                            4096, 8192,  16384, 32768, 65536, 131072, 262144};
// The engine's step-size buckets (engine::kStepTokenBounds).
std::vector<double> StepTokenBuckets() {
  return std::vector<double>(engine::kStepTokenBounds.begin(), engine::kStepTokenBounds.end());
}
const std::vector<double> kRequestBuckets = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10,
                                             15,   20,   30,  40,  50,  60,  120, 240, 480, 960, 1920};

}  // namespace

ServerMetrics::ServerMetrics()
    : requests_running(registry.Gauge0("kvserve:num_requests_running",
                                       "Sequences the engine is computing (in its running batch).")),
      requests_waiting(registry.Gauge0("kvserve:num_requests_waiting",
                                       "Sequences admitted but waiting for the engine (queue or preempted).")),
      kv_blocks_total(registry.Gauge0("kvserve:kv_cache_blocks", "KV cache blocks in the pool.")),
      kv_blocks_used(registry.Gauge0("kvserve:kv_cache_blocks_used", "KV cache blocks held by sequences.")),
      kv_blocks_cached(registry.Gauge0("kvserve:kv_cache_blocks_cached",
                                       "Free KV blocks that still hold reusable prefix-cache KV (evictable).")),
      kv_blocks_free(registry.Gauge0("kvserve:kv_cache_blocks_free", "Free, empty KV cache blocks.")),
      kv_usage_ratio(registry.Gauge0("kvserve:kv_cache_usage_ratio",
                                     "Used KV blocks / total KV blocks (cached-evictable blocks count as free); "
                                     "with a sliding-window group, the fuller of the two groups.")),
      kv_window_blocks_total(registry.Gauge0("kvserve:kv_cache_window_blocks",
                                             "KV blocks of the sliding-window layers' group (0: none); the "
                                             "kv_cache_blocks_* gauges count the global layers' group.")),
      kv_window_blocks_used(registry.Gauge0("kvserve:kv_cache_window_blocks_used",
                                            "Sliding-window KV blocks held by sequences (freed as they leave the "
                                            "window).")),
      kv_window_blocks_cached(registry.Gauge0("kvserve:kv_cache_window_blocks_cached",
                                              "Free sliding-window KV blocks that still hold prefix-cache KV.")),
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
      spec_draft_tokens(registry.Counter0("kvserve:spec_decode_num_draft_tokens_total",
                                          "Speculative decoding: draft tokens run through the model to be verified.")),
      spec_accepted_tokens(registry.Counter0("kvserve:spec_decode_num_accepted_tokens_total",
                                             "Speculative decoding: draft tokens accepted (each one a forward pass "
                                             "of its sequence saved); / draft tokens = acceptance rate.")),
      spec_verifications(registry.Counter0("kvserve:spec_decode_num_drafts_total",
                                           "Speculative decoding: drafts verified (one per sequence and step that "
                                           "had draft tokens).")),
      spec_draft_model_seconds(registry.Counter0("kvserve:spec_decode_draft_model_seconds_total",
                                                 "Speculative decoding with a draft model: wall time of its forward "
                                                 "passes (part of each step, beside engine_forward_seconds).")),
      forward_seconds(registry.Counter0("kvserve:engine_forward_seconds_total",
                                        "Wall time the engine spent in forward passes; its rate is the compute "
                                        "utilisation (share of wall time busy).")),
      engine_steps(registry.Counter0("kvserve:engine_steps_total", "Forward passes (engine steps) run.")),
      kv_blocks_used_peak(registry.Gauge0("kvserve:kv_cache_blocks_used_peak",
                                          "Most KV blocks held by sequences at once since start.")),
      kv_usage_peak_ratio(registry.Gauge0("kvserve:kv_cache_usage_peak_ratio",
                                          "Peak of the KV watermark (used / total blocks) since start, sampled at "
                                          "every engine step.")),
      prefix_hit_ratio(registry.Gauge0("kvserve:prefix_cache_hit_ratio",
                                       "Prompt tokens found in the prefix cache / prompt tokens looked up, since "
                                       "start (0 before any lookup).")),
      prefix_hit_tokens_by_tier(registry.AddCounter("kvserve:prefix_cache_hit_tokens_by_tier_total",
                                                    "Prompt tokens found in the prefix cache, by the tier that held "
                                                    "them: ram (the KV pool) or disk (restored from kv_cache.disk).",
                                                    {"tier"})),
      kv_disk_blocks(registry.Gauge0("kvserve:kv_disk_blocks", "KV blocks held by the disk tier.")),
      kv_disk_bytes(registry.Gauge0("kvserve:kv_disk_bytes",
                                    "Bytes of the disk tier's block files (at most kv_cache.disk.max_bytes).")),
      kv_disk_written_bytes(registry.Counter0("kvserve:kv_disk_written_bytes_total",
                                              "Bytes of block files the disk tier wrote.")),
      kv_disk_read_bytes(registry.Counter0("kvserve:kv_disk_read_bytes_total",
                                           "Bytes of block files the disk tier read for restores.")),
      kv_disk_restored_blocks(registry.Counter0("kvserve:kv_disk_restored_blocks_total",
                                                "KV blocks restored from the disk tier instead of recomputed.")),
      kv_disk_restore_seconds(registry.Counter0("kvserve:kv_disk_restore_seconds_total",
                                                "Engine time spent restoring blocks from the disk tier (read, "
                                                "check, load); over restored_blocks: the latency of one block.")),
      kv_disk_evicted_blocks(registry.Counter0("kvserve:kv_disk_evicted_blocks_total",
                                               "Blocks the disk tier deleted to stay under kv_cache.disk.max_bytes.")),
      kv_disk_dropped_blocks(registry.AddCounter("kvserve:kv_disk_dropped_blocks_total",
                                                 "Block files dropped unserved: corrupt (checksum, truncation, "
                                                 "not the expected prefix) or foreign (another model or layout).",
                                                 {"reason"})),
      kv_disk_write_errors(registry.Counter0("kvserve:kv_disk_write_errors_total",
                                             "Block writes the file system refused (a full disk, a size limit).")),
      kv_disk_writes_dropped(registry.Counter0("kvserve:kv_disk_writes_dropped_total",
                                               "Blocks not written because the writer was behind (its queue full).")),
      kv_disk_prefetched_blocks(registry.AddCounter("kvserve:kv_disk_prefetched_blocks_total",
                                                    "Disk-tier blocks read ahead for queued requests (off the engine "
                                                    "thread): used by a restore, or unused (dropped unclaimed).",
                                                    {"outcome"})),
      ttft(registry.Histogram0("kvserve:time_to_first_token_seconds",
                               "From the request fully received to its first generated token.", kLatencyBuckets)),
      inter_token_latency(registry.Histogram0("kvserve:inter_token_latency_seconds",
                                              "Between consecutive generated tokens of one sequence.", kTokenBuckets)),
      e2e_latency(registry.Histogram0("kvserve:e2e_request_latency_seconds",
                                      "From the request fully received to its response finished (generation requests).",
                                      kRequestBuckets)),
      queue_time(registry.Histogram0("kvserve:request_queue_time_seconds",
                                     "From submission to the engine until first scheduled.", kRequestBuckets)),
      time_per_output_token(registry.Histogram0(
          "kvserve:time_per_output_token_seconds",
          "Per finished sequence: (last token - first token) / (tokens - 1), the mean decode time per token.",
          kTokenBuckets)),
      prompt_length(registry.Histogram0("kvserve:request_prompt_tokens", "Prompt length of admitted prompts in tokens.",
                                        kLengthBuckets)),
      generation_length(registry.Histogram0("kvserve:request_generation_tokens",
                                            "Tokens generated per finished sequence.", kLengthBuckets)),
      iteration_tokens(registry.Histogram0("kvserve:iteration_tokens",
                                           "Tokens computed per engine step (prefill chunks, decodes and drafts).",
                                           StepTokenBuckets())),
      ttft_by_length(registry.AddHistogram("kvserve:time_to_first_token_by_prompt_length_seconds",
                                           "Time to first token by prompt-length class (prompt_tokens_le: the "
                                           "class's upper bound in tokens).",
                                           kLatencyBuckets, {"prompt_tokens_le"})),
      errors(registry.AddCounter("kvserve:request_errors_total",
                                 "Failed requests by class: invalid_request, authentication, capacity, "
                                 "client_disconnected, server_error, unavailable, timeout, shutdown.",
                                 {"class"})),
      prompt_tokens(registry.Counter0("kvserve:prompt_tokens_total", "Prompt tokens of admitted requests.")),
      generation_tokens(registry.Counter0("kvserve:generation_tokens_total", "Generated tokens.")),
      finished(registry.AddCounter("kvserve:request_finished_total",
                                   "Finished sequences (one per choice) by finish reason: stop, length, cancelled "
                                   "(client gone), timeout, error, shutdown.",
                                   {"finish_reason"})),
      api_key_reloads(registry.AddCounter("kvserve:api_key_reloads_total",
                                          "Reloads of the API keys (SIGHUP, a change of server.api_key_file) by "
                                          "outcome: ok, or failed (the keys loaded before stay in force).",
                                          {"outcome"})),
      http_requests(registry.AddCounter("kvserve:http_requests_total", "HTTP responses by route and status code.",
                                        {"path", "status"})),
      http_in_flight(registry.Gauge0("kvserve:http_requests_in_flight", "HTTP requests being handled.")),
      sequences_in_flight(registry.Gauge0(
          "kvserve:sequences_in_flight",
          "Sequences admitted by the server and not finished (bounded by runtime.max_concurrent_requests).")),
      prep_running(registry.Gauge0("kvserve:prep_requests_running",
                                   "Requests being prepared (JSON parsed, chat template rendered, tokenized).")),
      prep_waiting(registry.Gauge0("kvserve:prep_requests_waiting",
                                   "Requests waiting for a prep thread (server.prep_queue bounds it).")),
      resident_memory(registry.Gauge0("kvserve:process_resident_memory_bytes", "Resident memory of the process.")),
      ready(registry.Gauge0("kvserve:ready", "1 when the model is loaded and the server accepts requests.")),
      model_info(registry.AddGauge("kvserve:model_info", "1 for the model being served (its id and SHA-256).",
                                   {"model", "sha256"})),
      tp_forward_seconds(registry.AddCounter("kvserve:tensor_parallel_forward_seconds_total",
                                             "Tensor parallel: seconds of forward passes per rank, its all-reduces "
                                             "included.",
                                             {"rank"})),
      tp_allreduce_seconds(registry.AddCounter("kvserve:tensor_parallel_allreduce_seconds_total",
                                               "Tensor parallel: seconds per rank in all-reduces (the transfer and "
                                               "the wait for the slowest rank).",
                                               {"rank"})),
      tp_allreduce_bytes(registry.AddCounter("kvserve:tensor_parallel_allreduce_bytes_total",
                                             "Tensor parallel: bytes each rank contributed to all-reduces.", {"rank"})),
      tp_steps(registry.AddCounter("kvserve:tensor_parallel_steps_total", "Tensor parallel: forward passes per rank.",
                                   {"rank"})),
      pp_micro_batches(registry.Counter0("kvserve:pipeline_micro_batches_total",
                                         "Pipeline parallel: micro-batches rank 0 split its steps into (a step "
                                         "of at least 64 tokens a stage over several sequences is split).")),
      pp_wait_seconds(registry.AddCounter("kvserve:pipeline_wait_seconds_total",
                                          "Pipeline parallel: seconds each rank waited for its stage's input "
                                          "(rank 0: for the last stage's logits), the pipeline's bubbles.",
                                          {"rank"})),
      process(registry, "kvserve:") {
  for (int64_t c : kPromptClasses) ttft_by_length.With({std::to_string(c)});
  ttft_by_length.With({"+Inf"});
  for (const char* c : {"invalid_request", "authentication", "capacity", "client_disconnected", "server_error",
                        "unavailable", "timeout", "shutdown"}) {
    errors.With({c});
  }
  for (const char* account : {"weights", "kv_pool", "activations", "overhead"}) memory_bytes.With({account});
  for (const char* r : {"stop", "length", "cancelled", "timeout", "error", "shutdown"}) finished.With({r});
}

void ServerMetrics::Refresh(const BackendStats* stats) {
  resident_memory.Set(static_cast<double>(metrics::ProcessResidentBytes()));
  process.Refresh();
  if (!stats) return;
  const engine::EngineStats& s = stats->engine;
  requests_running.Set(static_cast<double>(s.num_running));
  requests_waiting.Set(static_cast<double>(s.num_waiting));
  kv_blocks_total.Set(static_cast<double>(s.num_blocks_total));
  kv_blocks_used.Set(static_cast<double>(s.num_blocks_used));
  kv_blocks_cached.Set(static_cast<double>(s.num_blocks_cached));
  kv_blocks_free.Set(static_cast<double>(s.num_blocks_free));
  auto ratio = [](int32_t used, int32_t total) { return total > 0 ? static_cast<double>(used) / total : 0.0; };
  kv_usage_ratio.Set(std::max(ratio(s.num_blocks_used, s.num_blocks_total),
                              ratio(s.num_window_blocks_used, s.num_window_blocks_total)));
  kv_window_blocks_total.Set(static_cast<double>(s.num_window_blocks_total));
  kv_window_blocks_used.Set(static_cast<double>(s.num_window_blocks_used));
  kv_window_blocks_cached.Set(static_cast<double>(s.num_window_blocks_cached));
  kv_block_size.Set(static_cast<double>(s.block_size));
  memory_bytes.With({"weights"}).Set(static_cast<double>(stats->memory.weights_bytes));
  memory_bytes.With({"kv_pool"}).Set(static_cast<double>(stats->memory.kv_pool_bytes));
  memory_bytes.With({"activations"}).Set(static_cast<double>(stats->memory.activation_bytes));
  memory_bytes.With({"overhead"}).Set(static_cast<double>(stats->memory.overhead_bytes));
  max_admissible_context.Set(static_cast<double>(stats->max_admissible_context));
  for (size_t r = 0; r < stats->parallel_ranks.size(); ++r) {
    const backend::ParallelRankStats& p = stats->parallel_ranks[r];
    const std::string rank = std::to_string(r);
    tp_forward_seconds.With({rank}).SetMax(p.forward_seconds);
    tp_allreduce_seconds.With({rank}).SetMax(p.allreduce_seconds);
    tp_allreduce_bytes.With({rank}).SetMax(p.allreduce_bytes);
    tp_steps.With({rank}).SetMax(p.steps);
    if (r == 0) pp_micro_batches.SetMax(p.micro_batches);
    pp_wait_seconds.With({rank}).SetMax(p.pipeline_wait_seconds);
  }
  prefix_queried_tokens.SetMax(static_cast<double>(s.prefix_query_tokens));
  prefix_hit_tokens.SetMax(static_cast<double>(s.prefix_hit_tokens));
  prefix_hit_tokens_by_tier.With({"ram"}).SetMax(static_cast<double>(s.prefix_hit_tokens - s.prefix_disk_hit_tokens));
  if (s.kv_disk_enabled) {
    prefix_hit_tokens_by_tier.With({"disk"}).SetMax(static_cast<double>(s.prefix_disk_hit_tokens));
    kv_disk_blocks.Set(static_cast<double>(s.kv_disk.blocks));
    kv_disk_bytes.Set(static_cast<double>(s.kv_disk.bytes));
    kv_disk_written_bytes.SetMax(static_cast<double>(s.kv_disk.written_bytes));
    kv_disk_read_bytes.SetMax(static_cast<double>(s.kv_disk.read_bytes));
    kv_disk_restored_blocks.SetMax(static_cast<double>(s.kv_disk_restored_blocks));
    kv_disk_restore_seconds.SetMax(s.kv_disk_restore_seconds);
    kv_disk_evicted_blocks.SetMax(static_cast<double>(s.kv_disk.evicted_blocks));
    kv_disk_dropped_blocks.With({"corrupt"}).SetMax(static_cast<double>(s.kv_disk.dropped_corrupt));
    kv_disk_dropped_blocks.With({"foreign"}).SetMax(static_cast<double>(s.kv_disk.dropped_foreign));
    kv_disk_write_errors.SetMax(static_cast<double>(s.kv_disk.write_errors));
    kv_disk_writes_dropped.SetMax(static_cast<double>(s.kv_disk.queue_full));
    kv_disk_prefetched_blocks.With({"used"}).SetMax(static_cast<double>(s.kv_disk.prefetch_hits));
    kv_disk_prefetched_blocks.With({"unused"}).SetMax(static_cast<double>(s.kv_disk.prefetch_unused));
  }
  preemptions.SetMax(static_cast<double>(s.num_preemptions));
  spec_draft_tokens.SetMax(static_cast<double>(s.num_draft_tokens));
  spec_accepted_tokens.SetMax(static_cast<double>(s.num_accepted_draft_tokens));
  spec_verifications.SetMax(static_cast<double>(s.num_spec_verifications));
  spec_draft_model_seconds.SetMax(s.draft_forward_seconds);
  forward_seconds.SetMax(s.forward_seconds);
  engine_steps.SetMax(static_cast<double>(s.num_steps));
  iteration_tokens.RaiseTo(std::vector<uint64_t>(s.step_tokens.begin(), s.step_tokens.end()),
                           static_cast<double>(s.num_computed_tokens));
  // The peak only grows (a reloaded engine starts from 0, the gauge keeps
  // the process's peak).
  const int32_t peak = std::max(s.num_blocks_used_peak, s.num_blocks_used);
  kv_blocks_used_peak.SetMax(peak);
  if (s.num_blocks_total > 0) kv_usage_peak_ratio.SetMax(static_cast<double>(peak) / s.num_blocks_total);
  const int32_t window_peak = std::max(s.num_window_blocks_used_peak, s.num_window_blocks_used);
  if (s.num_window_blocks_total > 0) kv_usage_peak_ratio.SetMax(ratio(window_peak, s.num_window_blocks_total));
  prefix_hit_ratio.Set(s.prefix_query_tokens > 0
                           ? static_cast<double>(s.prefix_hit_tokens) / static_cast<double>(s.prefix_query_tokens)
                           : 0.0);
}

std::string ServerMetrics::PromptLengthBucket(int64_t prompt_tokens) {
  for (int64_t c : kPromptClasses) {
    if (prompt_tokens <= c) return std::to_string(c);
  }
  return "+Inf";
}

void ServerMetrics::ObservePrompt(int64_t prompt_tokens) { prompt_length.Observe(static_cast<double>(prompt_tokens)); }

void ServerMetrics::ObserveFirstToken(int64_t prompt_tokens, double ttft_seconds) {
  ttft.Observe(ttft_seconds);
  ttft_by_length.With({PromptLengthBucket(prompt_tokens)}).Observe(ttft_seconds);
}

void ServerMetrics::ObserveDecode(int64_t tokens, double first_to_last_seconds) {
  if (tokens > 0) generation_length.Observe(static_cast<double>(tokens));
  if (tokens >= 2) time_per_output_token.Observe(first_to_last_seconds / static_cast<double>(tokens - 1));
}

std::string ServerMetrics::ErrorClass(int status, const std::string& finish_reason) {
  if (status == 200) {
    // A stream answers 200 before it can fail; its end tells.
    if (finish_reason == "error") return "server_error";
    if (finish_reason == "timeout") return "timeout";
    if (finish_reason == "shutdown") return "shutdown";
    if (finish_reason == "cancelled") return "client_disconnected";
    return "";
  }
  if (status < 400) return "";
  if (finish_reason == "shutdown") return "shutdown";
  switch (status) {
    case 401: return "authentication";
    case 429: return "capacity";
    case 499: return "client_disconnected";
    case 503: return "unavailable";
    case 504: return "timeout";
    default: return status >= 500 ? "server_error" : "invalid_request";
  }
}

void ServerMetrics::CountError(int status, const std::string& finish_reason) {
  const std::string c = ErrorClass(status, finish_reason);
  if (!c.empty()) errors.With({c}).Inc();
}

}  // namespace kvs::server
