// Engine: the serving loop. It owns the block manager, the scheduler, the
// sampler and the model runner, and runs them on ONE engine thread, so none
// of them has a lock. Exactly two kinds of thread-safe objects cross
// threads: the submit queue (RequestQueue: Submit, Cancel) and each
// request's output channel (RequestStream). GetStats reads a snapshot the
// engine thread publishes after every step.
//
// A step (Step) is: take new requests and cancels from the inbox; schedule
// (one batch of decodes plus prefill chunks); run the model; sample;
// postprocess (commit KV to the prefix cache, append tokens, apply stops);
// emit the new tokens to the streams. Between steps, KV blocks free for
// kv_release_idle_s give their memory back (the idle engine thread wakes for
// that, then sleeps until the next request).
//
// Use: Engine engine(config, std::move(runner)); engine.Start();
//   auto stream = engine.Submit(request);  // from any thread
//   while (auto chunk = (*stream)->Next(...); chunk.ok()) ...
//   engine.Stop();
// Or, single-threaded (tests, batch tools): never Start(), call Step() until
// it returns false.
//
// Guarantees: an impossible request is refused by Submit with a Status that
// names the numbers, never queued; every accepted request gets exactly one
// final chunk (stop, length, cancelled or error); Cancel frees the request's
// KV blocks at the start of the next step; a stream its consumer dropped
// without cancelling is cancelled (cancel_abandoned_requests).
// Thread-safety: Submit, Cancel, GetStats and config() are thread-safe.
// Start, Stop and Step belong to the owning thread; Step only without Start.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/block_manager.h"
#include "engine/disk_tier.h"
#include "engine/draft_model.h"
#include "kvcache/disk_store.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/request_queue.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace kvs::engine {

struct EngineConfig {
  int32_t max_num_batched_tokens = 2048;  // tokens per forward pass (prefill chunk + decodes)
  int32_t max_prefill_tokens_while_decoding = 0;  // SchedulerConfig's; 0: no cap
  int32_t max_batch_size = 32;            // sequences running at once; <= max_num_batched_tokens
  int32_t max_context_length = 8192;      // prompt + max_tokens must not exceed it
  int32_t max_queued_requests = 1024;     // submitted, not yet scheduled; Submit says ResourceExhausted beyond
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  std::vector<int32_t> eos_token_ids;     // stop tokens of the model (unless ignore_eos)
  // Fraction of the KV pool kept available when admitting a request while
  // others run, so running ones can grow before anyone is preempted.
  double admission_watermark = 0.01;
  // Share of a request's max_tokens whose KV must also be free to admit it
  // (SchedulerConfig::output_reservation), in [0, 1].
  double output_reservation = 0.0;
  // Seeds the RNG of requests without a seed; nullopt: random.
  std::optional<uint64_t> seed;
  bool cancel_abandoned_requests = true;
  // KV blocks free (not cached) for this long give their memory back to the
  // system (ModelRunner::ReleaseBlocks), so the pool's RSS follows use.
  // 0: as soon as they are free; negative: never.
  double kv_release_idle_s = 5.0;
  // The disk tier of the prefix cache (kvcache/disk_store.h); path "": none.
  // Its fingerprint names the model (the caller's part); Create adds the
  // block size and the runner's block bytes. Needs prefix caching and a
  // runner that exports blocks (no sliding-window group).
  kvcache::DiskStoreConfig kv_disk;
  // Speculative decoding (engine/speculative.h); needs a runner without a
  // sliding-window KV group. Method kDraft needs the draft model's runner
  // (Engine::Create).
  SpeculativeConfig speculative;

  // InvalidArgument naming the field, given the runner it will drive.
  Status Validate(const ModelRunner& runner) const;
};

// Bucket bounds (tokens) of EngineStats::step_tokens.
inline constexpr std::array<int32_t, 13> kStepTokenBounds = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

struct EngineStats {
  // Requests.
  int32_t num_running = 0;  // scheduled, holding KV
  int32_t num_waiting = 0;  // queued or preempted: in the inbox or waiting for KV
  int64_t num_finished_stop = 0;
  int64_t num_finished_length = 0;
  int64_t num_finished_cancelled = 0;
  int64_t num_finished_error = 0;
  // KV blocks: free + cached + used == total.
  int32_t block_size = 0;
  int32_t num_blocks_total = 0;
  int32_t num_blocks_used = 0;    // referenced by running sequences
  int32_t num_blocks_cached = 0;  // prefix cache, evictable
  int32_t num_blocks_free = 0;
  // Most blocks used at once since start, sampled right after each
  // schedule (allocation happens there), so no scrape can miss the peak.
  int32_t num_blocks_used_peak = 0;
  int64_t kv_slots_allocated = 0; // used blocks * block_size
  int64_t kv_slots_unwritten = 0; // allocated to running sequences but holding no KV
  int64_t kv_committed_bytes = 0; // memory the runner's KV storage holds (ModelRunner::kv_committed_bytes)
  int64_t num_blocks_released = 0;  // blocks whose memory went back to the system, cumulative
  // The sliding layers' KV group (block_manager.h), when the model has one
  // (window > 0); the block counts above are the global layers' group.
  int32_t window = 0;
  int32_t num_window_blocks_total = 0;
  int32_t num_window_blocks_used = 0;
  int32_t num_window_blocks_cached = 0;
  int32_t num_window_blocks_free = 0;
  int32_t num_window_blocks_used_peak = 0;
  int64_t num_window_blocks_released = 0;
  // The longest request (prompt + output) whose KV fits in the blocks of
  // every group available now (BlockManager::MaxAdmissibleTokens), before
  // any cap on the context length.
  int64_t max_admissible_tokens = 0;
  // Prefix cache.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;   // of the RAM pool and the disk tier
  // The disk tier (kv_disk_enabled): prompt tokens it restored (a part of
  // prefix_hit_tokens), the restores' time, and its store's counters.
  bool kv_disk_enabled = false;
  int64_t prefix_disk_hit_tokens = 0;
  int64_t kv_disk_restored_blocks = 0;
  double kv_disk_restore_seconds = 0;
  kvcache::DiskStoreStats kv_disk;
  // Work.
  int64_t num_steps = 0;             // forward passes
  // Steps by the tokens they computed: step_tokens[i] counts the steps of
  // (kStepTokenBounds[i-1], kStepTokenBounds[i]] tokens, the last one those
  // above the last bound.
  std::array<int64_t, kStepTokenBounds.size() + 1> step_tokens{};
  int64_t num_preemptions = 0;
  int64_t num_computed_tokens = 0;   // tokens run through the model (prefill + decode)
  int64_t num_generated_tokens = 0;  // tokens sampled
  // Wall time spent in the model runner's forward passes (the CPU stand-in
  // for accelerator busy time: its rate is the compute utilisation).
  double forward_seconds = 0;
  // Speculative decoding: draft tokens run through the model, those accepted
  // (each saves a forward pass of its sequence), and the verifications.
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_draft_tokens = 0;
  int64_t num_spec_verifications = 0;
  // The draft model (speculative.method draft): its forward passes' wall
  // time and the tokens it ran (catching up and drafting).
  double draft_forward_seconds = 0;
  int64_t num_draft_model_tokens = 0;
};

class Engine {
 public:
  // Validates the config against the runner (and the draft model's runner,
  // which speculative.method draft needs and every other method refuses).
  static StatusOr<std::unique_ptr<Engine>> Create(EngineConfig config, std::unique_ptr<ModelRunner> runner,
                                                  std::unique_ptr<ModelRunner> draft_runner = nullptr);
  // REQUIRES: what Create validates holds (CHECKed).
  Engine(EngineConfig config, std::unique_ptr<ModelRunner> runner, std::unique_ptr<ModelRunner> draft_runner = nullptr);
  ~Engine();  // Stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the engine thread. FailedPrecondition if started or stopped before.
  Status Start();
  // Stops the thread (if any); every request still live ends with kError
  // (Unavailable: "the engine stopped") and Submit refuses from now on.
  void Stop();

  // Queues a request validated for limits() (ValidatedRequest: not checked
  // again; one validated for other limits is validated anew); its output
  // arrives on the stream.
  // InvalidArgument: a duplicate live request id (or as ValidateRequest,
  //   for other limits).
  // ResourceExhausted: max_queued_requests are already queued.
  // Unavailable: the engine is stopped.
  StatusOr<std::shared_ptr<RequestStream>> Submit(ValidatedRequest request);
  // Validates (ValidatedRequest::Validate against limits()), then as above.
  // InvalidArgument, OutOfRange: as ValidateRequest.
  StatusOr<std::shared_ptr<RequestStream>> Submit(Request request);
  // Ends a live request with kCancelled at the next step and frees its KV.
  // NotFound if no live request has this id (e.g. it already finished).
  Status Cancel(const std::string& request_id);

  // One step, for engines that were not started. False when there was
  // nothing to compute (nothing live, or only cancels to apply).
  bool Step();

  EngineStats GetStats() const;
  // What the prefix cache publishes and evicts (thread-safe; empty when
  // prefix caching is off).
  const kvcache::PrefixCacheEvents& cache_events() const { return cache_events_; }

  const EngineConfig& config() const { return config_; }
  RequestLimits limits() const;
  int32_t vocab_size() const { return vocab_size_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }

  // Tests: checks block counts and that every block's ref count equals the
  // number of live block tables holding it; "" if all is well. Only while
  // the engine thread is not running.
  std::string TEST_CheckInvariants() const;

 private:
  struct Live {
    std::unique_ptr<Sequence> seq;
    std::shared_ptr<RequestStream> stream;
    bool queued = true;  // counted in the inbox's num_queued until first scheduled
  };

  bool StepOnce();
  void Loop();
  void ProcessInbox();
  void AddRequest(PendingRequest p);
  void CancelRequest(int64_t seq_id);
  // Fills spec_tokens of the running decode sequences with n-gram drafts
  // (a draft model: with placeholders for as many as it may propose).
  void ProposeDrafts();
  Status Forward(const SchedulerOutput& plan);
  // The tokens of each plan entry (emitted_): one sampled token, or with
  // drafts the accepted ones then the correction or bonus token.
  void SampleTokens(const SchedulerOutput& plan);
  void VerifyDrafts(const ScheduledSeq& s, size_t first_row, std::vector<int32_t>& out);
  // Ends constrained sequences whose grammar completed (kStop) or failed
  // (kError) at this step's token.
  void FinishConstrained(const SchedulerOutput& plan);
  void EmitOutputs(const SchedulerOutput& plan);
  void FailBatch(const SchedulerOutput& plan, const Status& status);
  void FinishAll(FinishReason reason, const Status& status);
  // Pushes the final chunk (`chunk` + finish fields) and forgets the request.
  void Retire(int64_t seq_id, StreamChunk chunk);
  void FillUsage(const Sequence& seq, StreamChunk& chunk) const;
  void PublishStats();
  // Returns the memory of blocks free for kv_release_idle_s to the system.
  void ReleaseIdleKv();
  // When ReleaseIdleKv next has something to do; nullopt: never (for now).
  std::optional<Clock::time_point> NextKvRelease() const;

  const EngineConfig config_;
  const std::unique_ptr<ModelRunner> runner_;
  const std::unique_ptr<DraftModel> draft_;  // speculative.method draft; nullptr otherwise
  const int32_t vocab_size_;
  const int32_t block_size_;
  const int32_t num_blocks_;

  kvcache::PrefixCacheEvents cache_events_;  // thread-safe; outlives block_manager_, which writes it
  // The disk tier (nullptr: none); outlives block_manager_, which calls it.
  std::unique_ptr<kvcache::DiskKvStore> disk_store_;
  std::unique_ptr<DiskTier> disk_tier_;

  // Engine thread only.
  BlockManager block_manager_;
  Scheduler scheduler_;
  Sampler sampler_;
  std::unordered_map<int64_t, Live> live_;            // by seq_id
  std::unordered_map<std::string, int64_t> by_id_;    // request_id -> seq_id
  int64_t next_seq_id_ = 0;
  std::mt19937_64 seed_rng_;
  ForwardBatch batch_;
  std::vector<float> logits_;                // [rows >= max_batch_size, vocab_size]; more rows with drafts
  std::vector<std::vector<int32_t>> emitted_;  // per plan entry: its new tokens (empty: none)
  std::vector<SampleResult> sample_results_; // per plan entry
  std::vector<PendingRequest> inbox_requests_;
  std::vector<std::string> inbox_cancels_;
  EngineStats counters_;                     // the cumulative fields

  // Cross-thread.
  RequestQueue inbox_;
  mutable std::mutex stats_mu_;
  EngineStats stats_;  // guarded by stats_mu_
  std::thread thread_;
  bool started_ = false;  // owning thread only
  bool stopped_ = false;  // owning thread only
};

}  // namespace kvs::engine
