#include "engine/draft_model.h"

#include <algorithm>
#include <chrono>
#include <utility>

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
    return InvalidArgument(
        "the draft model's KV pool has {} blocks, fewer than the model's {} (its KV uses the same block ids)",
        draft.num_blocks(), target.num_blocks());
  }
  if (draft.window() > 0 || target.window() > 0) {
    return InvalidArgument("speculative decoding is not available for models with sliding-window layers yet");
  }
  return Status::Ok();
}

DraftModel::DraftModel(std::unique_ptr<ModelRunner> runner, int32_t max_step_tokens)
    : runner_(std::move(runner)), max_step_tokens_(max_step_tokens) {
  KVS_CHECK(runner_ != nullptr && max_step_tokens_ >= 1);
}

void DraftModel::BeginStep() { budget_left_ = max_step_tokens_; }

int32_t DraftModel::Plan(Sequence& seq, int32_t k) {
  KVS_CHECK(k >= 1 && seq.num_uncomputed_tokens() == 1);
  seq.draft_catch_up = 0;
  if (seq.draft_admission != seq.num_admissions) {
    // Admitted again (or first seen): nothing of the draft's store is this
    // admission's own writing.
    seq.draft_admission = seq.num_admissions;
    seq.draft_num_computed = 0;
  }
  const int32_t behind = seq.num_tokens() - 1 - seq.draft_num_computed;  // final tokens the draft lacks
  KVS_CHECK(behind >= 0);
  if (behind + 1 <= budget_left_) {
    budget_left_ -= behind + 1;
    seq.spec_tokens.assign(static_cast<size_t>(k) + 1, seq.token_ids.back());  // placeholders after the last token
    return k;
  }
  seq.draft_catch_up = std::min(behind, budget_left_);
  budget_left_ -= seq.draft_catch_up;
  return 0;
}

void DraftModel::Verified(Sequence& seq, int32_t drafted, int32_t accepted) {
  // Run wrote drafts 1..drafted-1 after the last token; those accepted hold.
  seq.draft_num_computed += std::min(accepted, drafted - 1);
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
  // Pass 1: catch-ups, each drafting sequence's with its last token.
  batch_.seqs.clear();
  int32_t most_drafts = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    Sequence& seq = *s.seq;
    const int32_t catch_up = std::exchange(seq.draft_catch_up, 0);
    // Planned this step for this admission, as a decode (a sequence
    // admitted since its plan has nothing of its own in the draft's store).
    const bool planned = seq.draft_admission == seq.num_admissions && seq.num_uncomputed_tokens() == 1;
    ForwardSeq f;
    f.seq_id = seq.seq_id;
    f.start_pos = seq.draft_num_computed;
    f.block_table = seq.block_table;
    const auto tokens = std::span<const int32_t>(seq.token_ids);
    if (s.num_draft_tokens > 0) {
      KVS_CHECK(planned && seq.spec_tokens.size() == static_cast<size_t>(s.num_new_tokens));
      f.tokens = tokens.subspan(static_cast<size_t>(seq.draft_num_computed));  // through the last token
      f.want_logits = true;
      most_drafts = std::max(most_drafts, s.num_draft_tokens);
    } else if (catch_up > 0 && planned) {
      // Final tokens only: the last one is this step's decode.
      f.tokens = tokens.subspan(static_cast<size_t>(seq.draft_num_computed),
                                static_cast<size_t>(std::min(catch_up, seq.num_computed_tokens - seq.draft_num_computed)));
      seq.draft_num_computed += static_cast<int32_t>(f.tokens.size());
    } else {
      continue;
    }
    if (!f.tokens.empty()) batch_.seqs.push_back(f);
  }
  if (batch_.seqs.empty()) return Status::Ok();
  KVS_RETURN_IF_ERROR(Pass());
  {
    size_t row = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.num_draft_tokens == 0) continue;
      s.seq->spec_tokens[1] = argmax_[row++];
      s.seq->draft_num_computed = s.seq->num_tokens();  // through the last token
    }
  }
  // Pass j: draft j - 1 in at its position, draft j out.
  for (int32_t j = 2; j <= most_drafts; ++j) {
    batch_.seqs.clear();
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.num_draft_tokens < j) continue;
      const Sequence& seq = *s.seq;
      ForwardSeq f;
      f.seq_id = seq.seq_id;
      f.start_pos = seq.num_computed_tokens + j - 1;
      f.block_table = seq.block_table;
      f.tokens = std::span<const int32_t>(seq.spec_tokens).subspan(static_cast<size_t>(j - 1), 1);
      f.want_logits = true;
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
