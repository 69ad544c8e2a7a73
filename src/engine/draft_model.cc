#include "engine/draft_model.h"

#include <algorithm>
#include <chrono>

namespace kvs::engine {

Status DraftModel::Check(const ModelRunner& target, const ModelRunner& draft) {
  if (draft.vocab_size() != target.vocab_size()) {
    return InvalidArgument("the draft model's vocabulary has {} tokens, the model's {}; a draft model must share "
                           "the model's vocabulary",
                           draft.vocab_size(), target.vocab_size());
  }
  if (draft.block_size() != target.block_size()) {
    return InvalidArgument("the draft model's KV blocks hold {} tokens, the model's {}", draft.block_size(),
                           target.block_size());
  }
  if (draft.num_blocks() < target.num_blocks()) {
    return InvalidArgument("the draft model's KV pool has {} blocks, fewer than the model's {} (it mirrors them)",
                           draft.num_blocks(), target.num_blocks());
  }
  if (draft.window() > 0 || target.window() > 0) {
    return InvalidArgument("speculative decoding is not available for models with sliding-window layers yet");
  }
  return Status::Ok();
}

DraftModel::DraftModel(std::unique_ptr<ModelRunner> runner) : runner_(std::move(runner)) {
  KVS_CHECK(runner_ != nullptr);
}

Status DraftModel::Pass() {
  const auto vocab = static_cast<size_t>(runner_->vocab_size());
  const auto rows = static_cast<size_t>(batch_.NumLogits());
  if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = runner_->Forward(batch_, std::span<float>(logits_).first(rows * vocab));
  forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  num_tokens_computed_ += batch_.NumTokens();
  if (!st.ok()) return st.WithContext("draft model");
  argmax_.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = logits_.data() + r * vocab;
    argmax_[r] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);  // first of ties
  }
  return Status::Ok();
}

Status DraftModel::Run(const SchedulerOutput& plan) {
  // Pass 1: the step's tokens at the main model's positions.
  batch_.seqs.clear();
  int32_t most_drafts = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    const Sequence& seq = *s.seq;
    ForwardSeq f;
    f.seq_id = seq.seq_id;
    f.start_pos = seq.num_computed_tokens;
    f.block_table = seq.block_table;
    if (s.num_draft_tokens > 0) {
      KVS_CHECK(seq.spec_tokens.size() == static_cast<size_t>(s.num_new_tokens));
      f.tokens = std::span<const int32_t>(seq.spec_tokens).first(1);
      f.want_logits = true;
      most_drafts = std::max(most_drafts, s.num_draft_tokens);
    } else {
      f.tokens = std::span<const int32_t>(seq.token_ids)
                     .subspan(static_cast<size_t>(seq.num_computed_tokens), static_cast<size_t>(s.num_new_tokens));
    }
    batch_.seqs.push_back(f);
  }
  KVS_RETURN_IF_ERROR(Pass());
  {
    size_t row = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.num_draft_tokens > 0) s.seq->spec_tokens[1] = argmax_[row++];
    }
  }
  // Pass j: draft j - 1 in, draft j out (while j <= k); pass k + 1 only
  // writes draft k's KV, so the draft mirrors the whole verification chunk.
  for (int32_t j = 2; j <= most_drafts + 1; ++j) {
    batch_.seqs.clear();
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.num_draft_tokens < j - 1) continue;
      const Sequence& seq = *s.seq;
      ForwardSeq f;
      f.seq_id = seq.seq_id;
      f.start_pos = seq.num_computed_tokens + j - 1;
      f.block_table = seq.block_table;
      f.tokens = std::span<const int32_t>(seq.spec_tokens).subspan(static_cast<size_t>(j - 1), 1);
      f.want_logits = j <= s.num_draft_tokens;
      batch_.seqs.push_back(f);
    }
    KVS_RETURN_IF_ERROR(Pass());
    size_t row = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.num_draft_tokens >= j) s.seq->spec_tokens[static_cast<size_t>(j)] = argmax_[row++];
    }
  }
  return Status::Ok();
}

}  // namespace kvs::engine
