#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace kvs::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback)
    : grammar_(std::move(grammar)),
      pda_(std::make_unique<Pda>(grammar_->automaton(), grammar_->options().pda)),
      max_rollback_(max_rollback) {
  Reset();
}

GrammarMatcher GrammarMatcher::Clone() const {
  GrammarMatcher m(grammar_, max_rollback_);
  m.state_ = state_;
  m.terminated_ = terminated_;
  m.history_ = history_;
  return m;
}

void GrammarMatcher::Reset() {
  pda_->Start(&state_);
  terminated_ = false;
  history_.clear();
}

int32_t GrammarMatcher::MinCompletionBytes() const {
  if (terminated_ || state_.can_end) return 0;
  const Automaton& a = grammar_->automaton();
  int64_t best = std::numeric_limits<int32_t>::max();
  state_.ForEach([&](std::span<const int32_t> s) {
    int64_t cost = a.min_bytes[s.back()];
    for (size_t i = 1; i + 1 < s.size(); ++i) cost += a.min_bytes[s[i]];  // return states below the top
    best = std::min(best, cost);
  });
  return static_cast<int32_t>(best);
}

bool GrammarMatcher::Walk(const StackSet& from, std::string_view bytes, StackSet* to) {
  pda_->ResetWork();
  walk_overflow_ = false;
  if (bytes.empty()) return false;
  StackSet a = from, b;
  StackSet* cur = &a;
  StackSet* next = &b;
  for (char c : bytes) {
    if (cur->empty()) return false;
    pda_->Advance(*cur, static_cast<uint8_t>(c), next);
    if (next->overflow) {
      walk_overflow_ = true;
      return false;
    }
    if (next->stepped == 0) return false;
    std::swap(cur, next);
  }
  if (cur->empty() && !cur->can_end) return false;
  *to = std::move(*cur);
  return true;
}

void GrammarMatcher::PushHistory() {
  if (max_rollback_ <= 0) return;
  history_.emplace_back(state_, terminated_);
  if (static_cast<int32_t>(history_.size()) > max_rollback_) history_.pop_front();
}

bool GrammarMatcher::IsTokenAllowed(int32_t token) {
  const Vocabulary& v = grammar_->vocabulary();
  if (terminated_ || token < 0 || token >= v.num_tokens()) return false;
  switch (v.kind(token)) {
    case Vocabulary::Kind::kStop: return state_.can_end;
    case Vocabulary::Kind::kExcluded: return false;
    case Vocabulary::Kind::kText: break;
  }
  StackSet out;
  return Walk(state_, v.token_bytes(token), &out);
}

Status GrammarMatcher::AcceptToken(int32_t token) {
  const Vocabulary& v = grammar_->vocabulary();
  if (terminated_) return FailedPrecondition("the grammar already ended (a stop token was accepted)");
  if (token < 0 || token >= v.num_tokens()) return InvalidArgument("token {} is outside the vocabulary", token);
  if (v.kind(token) == Vocabulary::Kind::kStop) {
    if (!state_.can_end) return InvalidArgument("stop token {} before the grammar is complete", token);
    PushHistory();
    terminated_ = true;
    return Status::Ok();
  }
  if (v.kind(token) == Vocabulary::Kind::kExcluded) {
    return InvalidArgument("token {} is a special token the grammar cannot produce", token);
  }
  StackSet out;
  if (!Walk(state_, v.token_bytes(token), &out)) {
    if (walk_overflow_) {
      return ResourceExhausted("grammar too ambiguous at token {}: more than {} parses or over the work limit", token,
                               grammar_->options().pda.max_stacks);
    }
    return InvalidArgument("token {} is not allowed by the grammar", token);
  }
  PushHistory();
  state_ = std::move(out);
  return Status::Ok();
}

Status GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return FailedPrecondition("the grammar already ended");
  if (bytes.empty()) return Status::Ok();
  StackSet out;
  if (!Walk(state_, bytes, &out)) {
    if (walk_overflow_) return ResourceExhausted("grammar too ambiguous for this text");
    return InvalidArgument("text is not allowed by the grammar here");
  }
  state_ = std::move(out);
  return Status::Ok();
}

Status GrammarMatcher::Rollback(int32_t n) {
  if (n < 0 || n > num_rollback_tokens()) {
    return OutOfRange("cannot roll back {} tokens ({} kept)", n, num_rollback_tokens());
  }
  for (int32_t i = 0; i < n; ++i) {
    state_ = std::move(history_.back().first);
    terminated_ = history_.back().second;
    history_.pop_back();
  }
  return Status::Ok();
}

Status GrammarMatcher::FillNextTokenMask(std::span<uint32_t> mask) {
  const Vocabulary& v = grammar_->vocabulary();
  if (static_cast<int32_t>(mask.size()) < v.mask_words()) {
    return InvalidArgument("mask has {} words; the vocabulary needs {}", mask.size(), v.mask_words());
  }
  std::fill(mask.begin(), mask.end(), 0u);
  if (terminated_) return FailedPrecondition("the grammar already ended (a stop token was accepted)");
  pda_->ResetWork();
  applied_states_.clear();
  Status st;
  state_.ForEach([&](std::span<const int32_t> s) {
    if (st.ok()) st = FillFromStack(s, mask);
  });
  KVS_RETURN_IF_ERROR(st);
  if (state_.can_end) {
    for (int32_t id : v.stop_ids()) MaskSet(mask, id);
  }
  if (!state_.can_end && MaskCount(mask) == 0) {
    return ResourceExhausted("no token can continue the grammar (nesting deeper than {} levels?)",
                             grammar_->options().pda.max_depth);
  }
  return Status::Ok();
}

Status GrammarMatcher::FillFromStack(std::span<const int32_t> stack, std::span<uint32_t> mask) {
  const Vocabulary& v = grammar_->vocabulary();
  const int32_t q = stack.back();
  const TokenCacheEntry& e = grammar_->CacheFor(q);
  if (e.overflow) {
    return ResourceExhausted("grammar too ambiguous: more than {} parses at once", grammar_->options().pda.max_stacks);
  }
  StackSet start;
  start.Append(stack);
  if (static_cast<int32_t>(stack.size()) + e.growth > grammar_->options().pda.max_depth) {
    // Near the depth limit the cached verdicts may not hold: walk the trie
    // from the real stack.
    if (!WalkAllTokens(*pda_, v, start, scratch_, mask)) return ResourceExhausted("grammar too ambiguous");
    return Status::Ok();
  }
  // The context-independent part, once per distinct top state.
  if (std::find(applied_states_.begin(), applied_states_.end(), q) == applied_states_.end()) {
    applied_states_.push_back(q);
    if (e.rejected_form) {
      tmp_mask_.assign(v.text_mask().begin(), v.text_mask().end());
      for (int32_t id : e.ids) MaskClear(tmp_mask_, id);
      for (size_t w = 0; w < tmp_mask_.size(); ++w) mask[w] |= tmp_mask_[w];
    } else {
      for (int32_t id : e.ids) MaskSet(mask, id);
    }
  }
  if (!CheckUncertainTokens(*pda_, v, e, start, scratch_, mask)) return ResourceExhausted("grammar too ambiguous");
  return Status::Ok();
}

void ApplyTokenMask(std::span<const uint32_t> mask, std::span<float> logits) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!((mask[i >> 5] >> (i & 31)) & 1u)) logits[i] = neg_inf;
  }
}

}  // namespace kvs::grammar
