// StackSet and Pda: running an Automaton as a pushdown automaton over bytes.
//
// A parse position is a set of stacks of automaton states. In each stack the
// top is the current state; the frames below are the states to return to
// when the rule above finishes; the bottom frame is a sentinel: kRootFrame
// (the whole grammar) or kContextFrame (an unknown caller: used when token
// masks are precomputed per state, see token_cache.h).
//
// Stacks in a set are "closed": every top has byte edges (rule calls were
// expanded and finished rules popped). can_end says a parse may stop here.
// When a stack pops its kContextFrame, the closure continues with the
// finished rule's follow states ([kFollowFrame, f] stacks), so the token
// cache can reject tokens no caller could accept.
//
// Thread-safety: StackSet is a value type; a Pda keeps scratch buffers, so
// use one per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/automaton.h"

namespace kvs::grammar {

inline constexpr int32_t kRootFrame = -1;
inline constexpr int32_t kContextFrame = -2;
// Below a follow state (Automaton::follow) entered after a kContextFrame
// pop: text a caller might accept next.
inline constexpr int32_t kFollowFrame = -3;

class StackSet {
 public:
  // Stacks stored back to back as [length, bottom, ..., top].
  int32_t num_stacks() const { return num_stacks_; }
  bool empty() const { return num_stacks_ == 0; }
  void Clear();
  void Append(std::span<const int32_t> frames);
  // Calls f(std::span<const int32_t> frames) for each stack.
  template <typename F>
  void ForEach(F&& f) const {
    size_t pos = 0;
    for (int32_t i = 0; i < num_stacks_; ++i) {
      const auto len = static_cast<size_t>(data_[pos]);
      f(std::span<const int32_t>(data_.data() + pos + 1, len));
      pos += len + 1;
    }
  }
  // Sorts the stacks and drops duplicates (a canonical form).
  void Canonicalize();
  int32_t max_depth() const;
  bool operator==(const StackSet& o) const {
    return num_stacks_ == o.num_stacks_ && can_end == o.can_end && data_ == o.data_;
  }
  uint64_t Hash() const;

  bool can_end = false;          // a stack popped the root frame: the text may end here
  bool popped_context = false;   // a stack popped a kContextFrame
  bool popped_follow = false;    // a stack popped a kFollowFrame, or a kContextFrame whose follow is unknown
  bool depth_exceeded = false;   // a push was refused at the depth limit
  bool overflow = false;         // more stacks than the limit
  int32_t stepped = 0;           // stacks that consumed the byte (before closure)
  int32_t stepped_follow = 0;    // of which stacks with a kFollowFrame bottom
  // Stacks whose bottom is not kFollowFrame.
  int32_t NumInside() const;
  int32_t max_len = 0;           // longest stack created while building this set

 private:
  std::vector<int32_t> data_;
  int32_t num_stacks_ = 0;
};

struct PdaLimits {
  int32_t max_depth = 1000;      // stack frames
  int32_t max_stacks = 256;      // stacks in one set (ambiguity)
  // Stack operations one mask computation may spend (a token-cache entry,
  // or the run-time checks of one FillNextTokenMask): bounds the time a
  // hostile, highly ambiguous grammar can take. About 1-2 s of CPU.
  int64_t max_work = 100'000'000;
};

class Pda {
 public:
  Pda(const Automaton& a, PdaLimits limits) : a_(a), limits_(limits) {}

  // The closed set for the start of the grammar.
  void Start(StackSet* out);
  // out = closed stacks after consuming byte b from `in` (out != &in).
  void Advance(const StackSet& in, uint8_t b, StackSet* out);
  // Appends the closure of one stack (its top need not have byte edges).
  void AddClosed(std::span<const int32_t> frames, StackSet* out);
  // out = closure of one stack whose top just consumed a byte (the result
  // Advance gives for a single-stack set whose step led to frames.back()).
  void AdvanceOne(std::span<const int32_t> frames, StackSet* out);
  void AddWork(int64_t n) { work_done_ += n; }

  const Automaton& automaton() const { return a_; }
  const PdaLimits& limits() const { return limits_; }
  // Work accounting (see PdaLimits::max_work): past the budget every set
  // built is marked overflow.
  void ResetWork() { work_done_ = 0; }
  bool over_budget() const { return work_done_ > limits_.max_work; }

 private:
  const Automaton& a_;
  PdaLimits limits_;
  std::vector<int32_t> work_;      // flat stacks waiting for closure: [len, frames..., len]
  std::vector<int32_t> seen_;      // flat stacks already closed in this call
  std::vector<uint64_t> seen_hash_;  // [stacks in seen_] their hashes
  int64_t work_done_ = 0;
  std::vector<int32_t> scratch_;
  std::vector<int32_t> cur_;
};

}  // namespace kvs::grammar
