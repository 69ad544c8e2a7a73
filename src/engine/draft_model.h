// DraftModel: speculative decoding with a draft model, a smaller model of
// the same vocabulary whose greedy tokens are the drafts the main model
// verifies (speculative.h says how verification works; it is the same for
// both methods).
//
// Its KV lives in its own runner's storage under the SAME block ids as the
// main model's: the block manager's allocation, prefix cache, preemption and
// release serve both models at once (one owner, two stores per id). To keep
// that sound the draft MIRRORS the main model: every step it writes its KV
// at exactly the positions the main model writes (prefill chunks, decode
// tokens, and every token of a verification chunk), so
//   invariant: for every block id, the draft's slots hold KV of the same
//   tokens at the same positions as the main model's slots,
// and a prefix-cache hit or a recompute after preemption needs nothing of
// its own. Rejected drafts' KV lies beyond num_computed_tokens in both
// stores and is overwritten by the next step.
//
// Run(plan), after the scheduler sized each verification chunk (1 + k
// tokens, the drafts still placeholders) and allocated its blocks:
//   pass 1:    every entry's tokens as the main model will run them; for a
//              verification chunk only its first (the last sampled) token,
//              with logits -> draft 1 = argmax;
//   pass j>1:  each verification chunk with k >= j - 1 runs draft j - 1 at
//              its position, with logits while j <= k -> draft j.
// So k drafts cost k + 1 draft passes, the last one only writing KV.
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

  explicit DraftModel(std::unique_ptr<ModelRunner> runner);

  // Mirrors the plan's tokens into the draft's KV and fills every
  // verification chunk's drafts (seq->spec_tokens[1, 1 + num_draft_tokens)).
  Status Run(const SchedulerOutput& plan);

  ModelRunner& runner() { return *runner_; }
  double forward_seconds() const { return forward_seconds_; }
  int64_t num_tokens_computed() const { return num_tokens_computed_; }

 private:
  // One forward of batch_; the argmax of each logits row into argmax_.
  Status Pass();

  std::unique_ptr<ModelRunner> runner_;
  ForwardBatch batch_;
  std::vector<float> logits_;     // [rows, vocab_size]
  std::vector<int32_t> argmax_;   // [rows]
  double forward_seconds_ = 0;
  int64_t num_tokens_computed_ = 0;
};

}  // namespace kvs::engine
