// Scheduler: decides, every step, which tokens of which sequences the model
// computes. It holds the waiting and running queues and borrows the
// BlockManager (which it asks for memory, never manages itself); it never
// computes or samples.
//
// One step packs into ONE batch, within max_num_batched_tokens tokens and
// max_batch_size sequences:
//   1. the decode token of every running sequence (all of them, every step:
//      max_batch_size <= max_num_batched_tokens, so they always fit);
//   2. the next prefill chunk of running, partially prefilled sequences;
//   3. the first chunk of waiting sequences, admitted in policy order while
//      blocks (prefix hits counted) and the budget allow; a head that does
//      not fit blocks the queue (no overtaking).
// A long prompt is thus cut into chunks and never delays a decode by more
// than the one step that carries its chunk; while any sequence decodes, the
// prefill part of a step is capped at max_prefill_tokens_while_decoding
// (when set), which bounds that step's length. Speculative drafts (the
// sequence's spec_tokens) are added last, from the budget and free blocks
// left, so they never change what else a step computes.
//
// Policies order both queues: kFcfs by arrival (seq_id), kPriority by
// (priority, arrival), lower priority values first. Under kPriority a waiting
// sequence may also preempt running ones of lower precedence to get in.
// When blocks run out for a running sequence, the running sequence of lowest
// precedence (the newest under FCFS) is preempted by recompute: its blocks are
// freed (full ones stay in the prefix cache), num_computed_tokens drops to 0
// and it rejoins waiting in precedence order, i.e. at the FRONT under FCFS.
// When it resumes, prompt + output so far are prefilled again and its output
// continues as if nothing happened. Since the oldest running sequence can
// always preempt every other one and every admitted request fits the pool
// (Engine::Submit checks), the oldest request always makes progress.
// No waiting sequence is admitted in a step that preempted for lack of blocks.
//
// Invariants: a sequence is in at most one queue; running_ and waiting_ are
// sorted by precedence; running_.size() <= max_batch_size.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace kvs::engine {

enum class SchedulingPolicy { kFcfs, kPriority };

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // tokens per step
  // Prefill tokens (chunks and admissions) a step may carry while sequences
  // decode in it; 0: no cap beyond max_num_batched_tokens. A smaller cap
  // shortens the steps that carry a long prompt's chunk, and so the
  // decoding sequences' inter-token latency, at some cost to that prompt's
  // time to first token; a prompt alone still prefills at the full budget.
  int32_t max_prefill_tokens_while_decoding = 0;
  int32_t max_batch_size = 32;            // running sequences (and so sequences per step)
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Blocks kept available when admitting while others run, so that running
  // sequences can grow a while before anyone is preempted.
  int32_t watermark_blocks = 0;
  // Admission policy for output: a waiting sequence is admitted only when,
  // beyond its prompt, blocks for this fraction of its remaining max_tokens
  // are also free (0: prompt only, growth relies on preemption, as vLLM
  // does; 1: the whole predicted peak, so running sequences never preempt).
  double output_reservation = 0.0;
  std::vector<int32_t> eos_token_ids;
  int32_t max_context_length = 1 << 30;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // computed this step, from seq->num_computed_tokens (drafts included)
  // Speculative drafts in this chunk: the chunk is seq->spec_tokens[0,
  // num_new_tokens) (the last token, then the drafts), not token_ids.
  int32_t num_draft_tokens = 0;
  // Whether this chunk reaches the end of the sequence, so its last token's
  // logits are needed and a token is sampled.
  bool samples() const { return seq->num_computed_tokens + num_new_tokens - num_draft_tokens == seq->num_tokens(); }
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;   // the batch, decodes first
  std::vector<Sequence*> preempted; // this step's victims, now waiting
  int32_t num_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockManager* block_manager);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerConfig& config() const { return config_; }

  // Queues a new WAITING sequence (borrowed: it must outlive its stay here).
  void Add(Sequence* seq);

  // Plans one step: allocates the blocks it needs and preempts if it must.
  // The result stays valid until the next Schedule.
  const SchedulerOutput& Schedule();

  // After the forward pass of `out`: advances num_computed_tokens, offers
  // the newly written full blocks to the prefix cache, appends the sampled
  // tokens (tokens[i] for out.seqs[i]: empty where the chunk samples
  // nothing, one token, or with drafts the accepted drafts then one more)
  // and finishes the sequences that stop, freeing their blocks. Tokens after
  // a stop are dropped from tokens[i], which then holds what was appended.
  void Postprocess(const SchedulerOutput& out, std::span<std::vector<int32_t>> tokens);

  // Removes a waiting or running sequence, frees its blocks and marks it
  // FINISHED with `reason` (cancel, error). No-op if already finished.
  void Finish(Sequence* seq, FinishReason reason);

  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::vector<Sequence*>& waiting() const { return waiting_; }

 private:
  // True if a has precedence over b (is served first, preempted last).
  bool Precedes(const Sequence* a, const Sequence* b) const;
  void InsertSorted(std::vector<Sequence*>& queue, Sequence* seq);
  // Grows seq's blocks to cover `num_new` more tokens, preempting lower
  // precedence running sequences as needed. False if seq itself was preempted.
  bool EnsureBlocks(Sequence* seq, int32_t num_new);
  void Preempt(Sequence* victim);
  void AddToBatch(Sequence* seq, int32_t num_new);
  // Speculative decoding, after everything else is planned: grows each
  // planned decode whose sequence has spec_tokens by its drafts, within the
  // budget left and only where their blocks are free (no preemption).
  void AddDrafts();
  void ScheduleRunning(bool decodes);
  void AdmitWaiting();
  // Under kPriority: preempts the lowest running sequence if `seq` precedes it.
  // KV blocks of seq's predicted peak under output_reservation.
  int32_t PeakBlocks(const Sequence& seq) const;
  bool PreemptFor(const Sequence* seq);

  SchedulerConfig config_;
  BlockManager* bm_;
  std::vector<Sequence*> waiting_;  // sorted by precedence
  std::vector<Sequence*> running_;  // sorted by precedence
  SchedulerOutput out_;
  int32_t budget_ = 0;              // tokens left in the step being planned
  int64_t num_preemptions_ = 0;
};

}  // namespace kvs::engine
