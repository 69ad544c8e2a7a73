// DraftModel: speculative decoding with a draft model, a smaller model of
// the same vocabulary whose greedy tokens are the drafts the main model
// verifies (speculative.h says how verification works; it is the same for
// both methods).
//
// Its KV lives in its own runner's storage under the SAME block ids as the
// main model's: the block manager's allocation, prefix cache, preemption and
// release serve both stores at once (one owner, two stores per id). The
// draft computes lazily: a sequence's draft KV is written only when it
// drafts, so a sequence that does not draft (speculation paused after
// misses, turned off for the request, or a prompt still in prefill) costs
// the draft nothing. Per sequence, Sequence::draft_num_computed says how far
// the draft's KV is written since the sequence's current admission; it
// restarts at 0 on every admission, so the draft never trusts KV it did not
// write itself for this sequence (prefix-cache hits, blocks restored from
// the disk tier, a recompute after preemption), and catching up rewrites
// those positions with the same tokens. Every position it writes is a
// position whose token is final or one of this step's drafts, in blocks the
// scheduler allocated; drafts past the accepted ones lie beyond
// draft_num_computed and are rewritten later.
//
// A step:
//   BeginStep, then Plan per running decode sequence that may draft k
//   tokens: with its catch-up (the tokens the draft lacks before the last
//   one) and the last token within the step's draft-token budget, k
//   placeholders follow the last token in spec_tokens; otherwise it catches
//   up as far as the budget allows this step and drafts nothing.
//   Run(plan), after the scheduler sized each verification chunk and
//   allocated its blocks:
//     pass 1:   catch-ups, and for each drafting sequence its catch-up plus
//               the last token, with logits -> draft 1 = argmax;
//     pass j>1: each drafting sequence with k >= j runs draft j - 1 at its
//               position, with logits -> draft j.
//   Verified: the accepted drafts' KV counts as written.
// So k drafts cost k draft passes (the first one also catching up).
// Greedy drafts are point masses, which keeps sampled output distributed
// exactly as without speculation (Sampler::AcceptDraft).
// Thread-safety: engine thread only, like the runner it owns.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"

namespace kvs::engine {

class DraftModel {
 public:
  // Whether `draft` can draft for `target`: the same vocabulary size and
  // block size, at least as many blocks, no sliding-window group.
  // InvalidArgument naming the mismatch.
  static Status Check(const ModelRunner& target, const ModelRunner& draft);

  // REQUIRES: max_step_tokens <= the tokens one forward of `runner` takes.
  DraftModel(std::unique_ptr<ModelRunner> runner, int32_t max_step_tokens);

  // Starts a step's planning: the first pass's token budget is full again.
  void BeginStep();
  // For a running sequence whose last token is its only uncomputed one and
  // that may draft up to `k` (>= 1) tokens: sets spec_tokens to the last
  // token and k placeholders and returns k, or plans a catch-up
  // (draft_catch_up) and returns 0 when the budget cannot take its catch-up.
  int32_t Plan(Sequence& seq, int32_t k);
  // Runs the step's catch-ups and fills every verification chunk's drafts
  // (seq->spec_tokens[1, 1 + num_draft_tokens)).
  Status Run(const SchedulerOutput& plan);
  // After verifying `drafted` drafts of seq of which `accepted` held.
  static void Verified(Sequence& seq, int32_t drafted, int32_t accepted);

  ModelRunner& runner() { return *runner_; }
  double forward_seconds() const { return forward_seconds_; }
  int64_t num_tokens_computed() const { return num_tokens_computed_; }

 private:
  // One forward of batch_; the argmax of each logits row into argmax_.
  Status Pass();

  std::unique_ptr<ModelRunner> runner_;
  const int32_t max_step_tokens_;  // first pass's tokens per step
  int32_t budget_left_ = 0;        // of this step's first pass
  ForwardBatch batch_;
  std::vector<float> logits_;     // [rows, vocab_size]
  std::vector<int32_t> argmax_;   // [rows]
  double forward_seconds_ = 0;
  int64_t num_tokens_computed_ = 0;
};

}  // namespace kvs::engine
