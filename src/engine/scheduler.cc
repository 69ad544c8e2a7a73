#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

namespace kvs::engine {

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager* block_manager)
    : config_(config), bm_(block_manager) {
  KVS_CHECK(bm_ != nullptr);
  KVS_CHECK(config_.max_batch_size >= 1);
  KVS_CHECK(config_.max_num_batched_tokens >= config_.max_batch_size);  // all decodes fit every step
  KVS_CHECK(config_.watermark_blocks >= 0);
  waiting_.reserve(64);
  running_.reserve(static_cast<size_t>(config_.max_batch_size));
}

bool Scheduler::Precedes(const Sequence* a, const Sequence* b) const {
  if (config_.policy == SchedulingPolicy::kPriority && a->priority != b->priority) {
    return a->priority < b->priority;
  }
  return a->seq_id < b->seq_id;
}

void Scheduler::InsertSorted(std::vector<Sequence*>& queue, Sequence* seq) {
  const auto it = std::upper_bound(queue.begin(), queue.end(), seq,
                                   [this](const Sequence* a, const Sequence* b) { return Precedes(a, b); });
  queue.insert(it, seq);
}

void Scheduler::Add(Sequence* seq) {
  KVS_CHECK(seq->status == SequenceStatus::kWaiting && seq->block_table.empty() && seq->num_computed_tokens == 0);
  KVS_CHECK(seq->num_tokens() >= 1);
  InsertSorted(waiting_, seq);
}

const SchedulerOutput& Scheduler::Schedule() {
  out_.seqs.clear();
  out_.preempted.clear();
  out_.num_tokens = 0;
  budget_ = config_.max_num_batched_tokens;
  ScheduleRunning(/*decodes=*/true);
  // While sequences decode, prefill gets at most its cap of the budget; the
  // rest is held back (for drafts, which are decode tokens) until after it.
  int32_t held = 0;
  if (!out_.seqs.empty() && config_.max_prefill_tokens_while_decoding > 0) {
    held = std::max(0, budget_ - config_.max_prefill_tokens_while_decoding);
    budget_ -= held;
  }
  ScheduleRunning(/*decodes=*/false);
  if (out_.preempted.empty()) AdmitWaiting();
  budget_ += held;
  AddDrafts();
  return out_;
}

void Scheduler::ScheduleRunning(bool decodes) {
  // Preemption only ever removes running_.back(), so indices below i are stable.
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i];
    const int32_t remaining = seq->num_uncomputed_tokens();
    if ((remaining == 1) != decodes) continue;
    const int32_t n = std::min(remaining, budget_);
    if (n == 0) break;
    if (!EnsureBlocks(seq, n)) continue;  // seq was the last one; the loop ends
    AddToBatch(seq, n);
  }
}

void Scheduler::AddDrafts() {
  // Last, from what the step left: drafts never change another sequence's
  // chunk, admission or blocks, and never preempt.
  for (ScheduledSeq& s : out_.seqs) {
    Sequence* seq = s.seq;
    if (seq->spec_tokens.size() <= 1 || seq->num_uncomputed_tokens() != 1) {  // drafts extend decodes only
      seq->spec_tokens.clear();
      continue;
    }
    int32_t drafts = std::min(static_cast<int32_t>(seq->spec_tokens.size()) - 1, budget_);
    while (drafts > 0 && !bm_->CanAppend(*seq, seq->num_computed_tokens + 1 + drafts)) drafts /= 2;
    if (drafts <= 0) {
      seq->spec_tokens.clear();
      continue;
    }
    bm_->Append(*seq, seq->num_computed_tokens + 1 + drafts);
    seq->spec_tokens.resize(static_cast<size_t>(drafts) + 1);
    s.num_new_tokens += drafts;
    s.num_draft_tokens = drafts;
    budget_ -= drafts;
    out_.num_tokens += drafts;
  }
}

void Scheduler::AdmitWaiting() {
  const int32_t block_size = bm_->block_size();
  while (!waiting_.empty() && budget_ > 0) {
    Sequence* seq = waiting_.front();
    if (running_.size() >= static_cast<size_t>(config_.max_batch_size)) {
      if (PreemptFor(seq)) continue;
      break;
    }
    const PrefixMatch match = bm_->MatchPrefix(*seq);
    const int32_t cached = match.num_tokens_with_tier(block_size);
    const int32_t n = std::min(seq->num_tokens() - cached, budget_);
    // Alone, a sequence may use the whole pool: Submit checked that it fits.
    int32_t reserve = running_.empty() ? 0 : config_.watermark_blocks;
    // Its predicted peak (the prompt plus the policy's share of the output
    // to come) must fit beside the predicted peaks of those running: the
    // difference is checked as free, not allocated.
    if (config_.output_reservation > 0) {
      reserve += std::max(0, PeakBlocks(*seq) - NumBlocksFor(cached + n, block_size));
      for (const Sequence* r : running_) {
        reserve += std::max(0, PeakBlocks(*r) - static_cast<int32_t>(r->block_table.size()));
      }
    }
    if (!bm_->CanAllocate(match, cached + n, reserve)) {
      if (PreemptFor(seq)) continue;
      break;  // the head waits; nobody overtakes it
    }
    bm_->Allocate(*seq, match, cached + n);
    // A tier block that could not be restored is computed in this chunk
    // (its positions are allocated already), within the step's budget.
    const int32_t computed = seq->num_computed_tokens;
    waiting_.erase(waiting_.begin());
    seq->status = SequenceStatus::kRunning;
    if (seq->num_admissions++ == 0) {
      seq->first_scheduled_time = Clock::now();
      seq->num_cached_tokens = computed;
    }
    InsertSorted(running_, seq);
    AddToBatch(seq, std::min(cached + n - computed, budget_));
  }
}

int32_t Scheduler::PeakBlocks(const Sequence& seq) const {
  const int32_t outstanding = std::max(seq.params.max_tokens - seq.num_output_tokens(), 0);
  const int64_t peak = static_cast<int64_t>(seq.num_tokens()) +
                       static_cast<int64_t>(std::ceil(config_.output_reservation * outstanding));
  return NumBlocksFor(std::min<int64_t>(peak, config_.max_context_length), bm_->block_size());
}

bool Scheduler::PreemptFor(const Sequence* seq) {
  if (config_.policy != SchedulingPolicy::kPriority || running_.empty()) return false;
  Sequence* victim = running_.back();
  if (!Precedes(seq, victim)) return false;
  Preempt(victim);
  return true;
}

bool Scheduler::EnsureBlocks(Sequence* seq, int32_t num_new) {
  const int32_t target = seq->num_computed_tokens + num_new;
  while (!bm_->CanAppend(*seq, target)) {
    Sequence* victim = running_.back();  // lowest precedence
    Preempt(victim);
    if (victim == seq) return false;
  }
  bm_->Append(*seq, target);
  return true;
}

void Scheduler::Preempt(Sequence* victim) {
  // A victim already in this step's batch leaves it and returns its budget.
  const auto planned = std::find_if(out_.seqs.begin(), out_.seqs.end(),
                                    [victim](const ScheduledSeq& s) { return s.seq == victim; });
  if (planned != out_.seqs.end()) {
    budget_ += planned->num_new_tokens;
    out_.num_tokens -= planned->num_new_tokens;
    out_.seqs.erase(planned);
  }
  const auto it = std::find(running_.begin(), running_.end(), victim);
  KVS_CHECK(it != running_.end());
  running_.erase(it);
  bm_->Free(*victim);
  victim->spec_tokens.clear();
  victim->num_computed_tokens = 0;
  victim->status = SequenceStatus::kWaiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  InsertSorted(waiting_, victim);
  out_.preempted.push_back(victim);
}

void Scheduler::AddToBatch(Sequence* seq, int32_t num_new) {
  out_.seqs.push_back({seq, num_new, 0});
  budget_ -= num_new;
  out_.num_tokens += num_new;
}

void Scheduler::Postprocess(const SchedulerOutput& out, std::span<std::vector<int32_t>> tokens) {
  KVS_CHECK(tokens.size() == out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    Sequence* seq = s.seq;
    std::vector<int32_t>& emitted = tokens[i];
    KVS_CHECK(s.samples() == !emitted.empty());
    KVS_CHECK(emitted.size() <= static_cast<size_t>(s.num_draft_tokens) + 1);
    const int32_t before = seq->num_computed_tokens;
    // Drafts: the last token's KV now, each accepted draft's as it is appended below.
    seq->num_computed_tokens += s.num_new_tokens - s.num_draft_tokens;
    if (before < seq->num_prompt_tokens) {
      seq->num_computed_prompt_tokens += std::min(seq->num_computed_tokens, seq->num_prompt_tokens) - before;
    }
    seq->spec_tokens.clear();
    std::optional<FinishReason> stop;
    size_t appended = 0;
    while (appended < emitted.size() && !stop) {
      // Every emitted token but the last is an accepted draft, whose KV this
      // step wrote: it counts as computed once the next one is appended.
      if (appended > 0) ++seq->num_computed_tokens;
      stop = seq->AppendToken(emitted[appended++], config_.eos_token_ids, config_.max_context_length);
    }
    emitted.resize(appended);
    bm_->CommitComputed(*seq);
    if (stop) Finish(seq, *stop);
  }
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  if (seq->is_finished()) return;
  for (std::vector<Sequence*>* queue : {&running_, &waiting_}) {
    const auto it = std::find(queue->begin(), queue->end(), seq);
    if (it != queue->end()) queue->erase(it);
  }
  bm_->Free(*seq);
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
}

}  // namespace kvs::engine
