#include "grammar/stack_set.h"

#include <algorithm>

namespace kvs::grammar {

void StackSet::Clear() {
  data_.clear();
  num_stacks_ = 0;
  can_end = popped_context = popped_follow = depth_exceeded = overflow = false;
  stepped = stepped_follow = 0;
  max_len = 0;
}

void StackSet::Append(std::span<const int32_t> frames) {
  data_.push_back(static_cast<int32_t>(frames.size()));
  data_.insert(data_.end(), frames.begin(), frames.end());
  ++num_stacks_;
}

void StackSet::Canonicalize() {
  if (num_stacks_ <= 1) return;
  std::vector<std::span<const int32_t>> stacks;
  ForEach([&](std::span<const int32_t> s) { stacks.push_back(s); });
  auto less = [](std::span<const int32_t> x, std::span<const int32_t> y) {
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  };
  auto eq = [](std::span<const int32_t> x, std::span<const int32_t> y) { return std::ranges::equal(x, y); };
  std::sort(stacks.begin(), stacks.end(), less);
  stacks.erase(std::unique(stacks.begin(), stacks.end(), eq), stacks.end());
  std::vector<int32_t> data;
  data.reserve(data_.size());
  for (auto s : stacks) {
    data.push_back(static_cast<int32_t>(s.size()));
    data.insert(data.end(), s.begin(), s.end());
  }
  data_ = std::move(data);
  num_stacks_ = static_cast<int32_t>(stacks.size());
}

int32_t StackSet::NumInside() const {
  int32_t n = 0;
  ForEach([&](std::span<const int32_t> s) { n += s[0] != kFollowFrame; });
  return n;
}

int32_t StackSet::max_depth() const {
  int32_t d = 0;
  ForEach([&](std::span<const int32_t> s) { d = std::max(d, static_cast<int32_t>(s.size())); });
  return d;
}

uint64_t StackSet::Hash() const {
  uint64_t h = 1469598103934665603ull ^ (can_end ? 0x9E3779B97F4A7C15ull : 0);
  for (int32_t x : data_) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return h;
}

void Pda::Start(StackSet* out) {
  out->Clear();
  const int32_t frames[2] = {kRootFrame, a_.rule_start[a_.root_rule]};
  AddClosed(frames, out);
  out->Canonicalize();
}

void Pda::Advance(const StackSet& in, uint8_t b, StackSet* out) {
  out->Clear();
  work_done_ += in.num_stacks();
  if (work_done_ > limits_.max_work) {
    out->overflow = true;
    return;
  }
  in.ForEach([&](std::span<const int32_t> s) {
    const int32_t t = a_.Step(s.back(), b);
    if (t < 0) return;
    ++out->stepped;
    out->stepped_follow += s[0] == kFollowFrame;
    scratch_.assign(s.begin(), s.end());
    scratch_.back() = t;
    if (!a_.states[t].needs_closure()) {
      out->Append(scratch_);  // fast path: t has byte edges and nothing else
    } else {
      AddClosed(scratch_, out);
    }
  });
  out->max_len = std::max(out->max_len, in.max_len);
  if (out->num_stacks() > 1) {
    work_done_ += out->num_stacks();
    out->Canonicalize();
  }
  if (out->num_stacks() > limits_.max_stacks) out->overflow = true;
}

void Pda::AdvanceOne(std::span<const int32_t> frames, StackSet* out) {
  out->Clear();
  work_done_ += 1;
  if (work_done_ > limits_.max_work) {
    out->overflow = true;
    return;
  }
  out->stepped = 1;
  out->stepped_follow = frames[0] == kFollowFrame;
  out->max_len = static_cast<int32_t>(frames.size());
  AddClosed(frames, out);
  if (out->num_stacks() > 1) {
    work_done_ += out->num_stacks();
    out->Canonicalize();
  }
  if (out->num_stacks() > limits_.max_stacks) out->overflow = true;
}

namespace {

uint64_t HashStack(std::span<const int32_t> s) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : s) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return h;
}

// Whether `s` is among the stacks of `flat` ([len, frames...] each), whose
// hashes are `hashes`.
bool ContainsStack(const std::vector<int32_t>& flat, const std::vector<uint64_t>& hashes, std::span<const int32_t> s,
                   uint64_t h) {
  size_t pos = 0;
  for (uint64_t other : hashes) {
    const auto len = static_cast<size_t>(flat[pos]);
    if (other == h && len == s.size() &&
        std::equal(s.begin(), s.end(), flat.begin() + static_cast<std::ptrdiff_t>(pos) + 1)) {
      return true;
    }
    pos += len + 1;
  }
  return false;
}

}  // namespace

void Pda::AddClosed(std::span<const int32_t> frames, StackSet* out) {
  // Depth-first expansion with an explicit work list; `seen_` stops the
  // cycles that nullable rules create (a call that returns to the caller's
  // same state). Left recursion was rejected at build time, so pushes are
  // bounded without consuming input.
  work_.clear();
  seen_.clear();
  seen_hash_.clear();
  work_.push_back(static_cast<int32_t>(frames.size()));
  work_.insert(work_.end(), frames.begin(), frames.end());
  work_.push_back(static_cast<int32_t>(frames.size()));
  std::vector<int32_t>& cur = cur_;
  while (!work_.empty()) {
    // Pop the last stack ([len, frames..., len]: the trailing length
    // finds its start).
    const auto len = static_cast<size_t>(work_.back());
    cur.assign(work_.end() - 1 - static_cast<std::ptrdiff_t>(len), work_.end() - 1);
    work_.resize(work_.size() - len - 2);
    work_done_ += 1 + static_cast<int64_t>(seen_hash_.size()) / 8;
    if (work_done_ > limits_.max_work) {
      out->overflow = true;
      return;
    }
    const uint64_t h = HashStack(cur);
    if (ContainsStack(seen_, seen_hash_, cur, h)) continue;
    seen_hash_.push_back(h);
    seen_.push_back(static_cast<int32_t>(cur.size()));
    seen_.insert(seen_.end(), cur.begin(), cur.end());
    out->max_len = std::max(out->max_len, static_cast<int32_t>(cur.size()));

    const int32_t q = cur.back();
    const Automaton::State& st = a_.states[q];
    if (st.has_bytes()) {
      if (out->num_stacks() >= limits_.max_stacks) {
        out->overflow = true;
      } else {
        out->Append(cur);
      }
    }
    auto push_work = [&](const std::vector<int32_t>& s, size_t n) {
      work_.push_back(static_cast<int32_t>(n));
      work_.insert(work_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
      work_.push_back(static_cast<int32_t>(n));
    };
    if (st.final) {
      const int32_t below = cur[cur.size() - 2];
      if (below == kRootFrame) {
        out->can_end = true;
      } else if (below == kContextFrame) {
        out->popped_context = true;
        const int32_t rule = st.rule;
        if (!a_.follow_complete[rule]) {
          out->popped_follow = true;
        } else {
          for (int32_t f : a_.follow[rule]) {
            const int32_t follow_stack[2] = {kFollowFrame, f};
            work_.push_back(2);
            work_.insert(work_.end(), follow_stack, follow_stack + 2);
            work_.push_back(2);
          }
        }
      } else if (below == kFollowFrame) {
        out->popped_follow = true;
      } else {
        push_work(cur, cur.size() - 1);
      }
    }
    if (st.call_end > st.call_begin) {
      if (static_cast<int32_t>(cur.size()) + 1 > limits_.max_depth) {
        out->depth_exceeded = true;
      } else {
        const int32_t ret_slot = static_cast<int32_t>(cur.size()) - 1;
        cur.push_back(0);
        for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
          const Automaton::CallEdge& c = a_.call_edges[i];
          cur[ret_slot] = c.ret;
          cur.back() = a_.rule_start[c.rule];
          push_work(cur, cur.size());
        }
      }
    }
  }
}

}  // namespace kvs::grammar
