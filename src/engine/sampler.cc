#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvs::engine {

double UniformDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

namespace {

// The first maximum: ties go to the lowest id.
int32_t ArgMax(std::span<const float> v) {
  float best = v[0];
  size_t arg = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > best) {
      best = v[i];
      arg = i;
    }
  }
  return static_cast<int32_t>(arg);
}

}  // namespace

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size),
      work_(static_cast<size_t>(vocab_size)),
      ids_(static_cast<size_t>(vocab_size)),
      stamp_(static_cast<size_t>(vocab_size), 0),
      count_(static_cast<size_t>(vocab_size), 0) {
  KVS_CHECK(vocab_size > 0);
}

SampleResult Sampler::Sample(std::span<const float> logits, Sequence& seq) {
  KVS_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  const SamplingParams& p = seq.params;
  SampleResult r;
  std::span<const float> processed = logits;
  if (p.has_penalties() || !p.logit_bias.empty() || seq.matcher) {
    std::copy(logits.begin(), logits.end(), work_.begin());
    processed = work_;
  }
  if (p.has_penalties()) ApplyPenalties(seq);
  for (const auto& [id, bias] : p.logit_bias) work_[static_cast<size_t>(id)] += bias;
  if (seq.matcher) {
    mask_.assign(static_cast<size_t>((vocab_size_ + 31) / 32), 0u);
    r.error = seq.matcher->FillNextTokenMask(mask_);
    if (!r.error.ok()) {
      r.error = r.error.WithContext("constrained decoding cannot continue");
      r.token_id = 0;
      return r;
    }
    grammar::ApplyTokenMask(mask_, work_);
  }
  if (p.greedy()) {
    r.token_id = ArgMax(processed);
  } else {
    r.token_id = Draw(processed, p, seq.rng);
  }
  if (seq.matcher) {
    // A draw never lands on a -inf (zero weight) token unless nothing was
    // allowed; AcceptToken then fails and the sequence ends with the error.
    r.error = seq.matcher->AcceptToken(r.token_id);
    if (!r.error.ok()) {
      r.error = r.error.WithContext("constrained decoding: no allowed token");
    } else {
      r.grammar_done = seq.matcher->IsTerminated();
    }
  }
  if (p.logprobs) FillLogprobs(logits, *p.logprobs, r);
  return r;
}

void Sampler::ApplyPenalties(const Sequence& seq) {
  const SamplingParams& p = seq.params;
  if (++generation_ == 0) {  // wrapped: forget every old stamp
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  touched_.clear();
  const auto touch = [this](int32_t t) {
    const auto i = static_cast<size_t>(t);
    if (stamp_[i] != generation_) {
      stamp_[i] = generation_;
      count_[i] = 0;
      touched_.push_back(t);
    }
  };
  for (int32_t t : seq.output()) {
    touch(t);
    ++count_[static_cast<size_t>(t)];
  }
  if (p.repetition_penalty != 1.0f) {
    for (int32_t t : seq.prompt()) touch(t);
  }
  for (int32_t t : touched_) {
    float& l = work_[static_cast<size_t>(t)];
    if (p.repetition_penalty != 1.0f) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    const int32_t c = count_[static_cast<size_t>(t)];
    if (c > 0) l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c);
  }
}

int32_t Sampler::Draw(std::span<const float> logits, const SamplingParams& p, std::mt19937_64& rng) {
  // Candidates are ids_[0, n). work_[id] becomes the unnormalised probability
  // exp((logit - max) / T) of each candidate: the most likely weighs exactly 1.
  // (logits may alias work_: each entry is read before it is overwritten.)
  auto n = static_cast<size_t>(vocab_size_);
  if (p.top_k > 0 && p.top_k < vocab_size_) {
    n = static_cast<size_t>(p.top_k);
    SelectTopK(logits, n);
  } else {
    std::iota(ids_.begin(), ids_.end(), 0);
  }
  const float inv_t = 1.0f / p.temperature;
  double total = 0.0;
  if (n == static_cast<size_t>(vocab_size_)) {
    // All candidates: plain loops the compiler can keep in registers.
    const float max_logit = logits[static_cast<size_t>(ArgMax(logits))];
    for (size_t id = 0; id < n; ++id) {
      const float w = std::exp((logits[id] - max_logit) * inv_t);
      work_[id] = w;
      total += w;
    }
  } else {
    float max_logit = -INFINITY;
    for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, logits[static_cast<size_t>(ids_[i])]);
    for (size_t i = 0; i < n; ++i) {
      const auto id = static_cast<size_t>(ids_[i]);
      const float w = std::exp((logits[id] - max_logit) * inv_t);
      work_[id] = w;
      total += w;
    }
  }

  if (p.top_p < 1.0f) n = SelectNucleus(n, static_cast<double>(p.top_p) * total);
  if (p.min_p > 0.0f) {
    // Relative to the most likely token, whose weight is 1.
    n = static_cast<size_t>(std::partition(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(n),
                                           [&](int32_t id) { return work_[static_cast<size_t>(id)] >= p.min_p; }) -
                            ids_.begin());
  }

  total = 0.0;
  for (size_t i = 0; i < n; ++i) total += work_[static_cast<size_t>(ids_[i])];
  const double u = UniformDouble(rng) * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += work_[static_cast<size_t>(ids_[i])];
    if (u < cum) return ids_[i];
  }
  return ids_[n - 1];  // rounding left u at the very top
}

void Sampler::SelectTopK(std::span<const float> logits, size_t k) {
  // ids_[0, k) is a heap whose top is the worst token kept (by logit desc,
  // id asc). One pass over the vocabulary; a token that does not beat the
  // top costs one comparison, and after the first few thousand almost none does.
  const auto rank_before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const auto first = ids_.begin(), last = ids_.begin() + static_cast<ptrdiff_t>(k);
  std::iota(first, last, 0);
  std::make_heap(first, last, rank_before);
  float worst = logits[static_cast<size_t>(ids_[0])];
  for (auto id = static_cast<int32_t>(k); id < vocab_size_; ++id) {
    // Equal logits never replace: the kept token has the lower id.
    if (!(logits[static_cast<size_t>(id)] > worst)) continue;
    std::pop_heap(first, last, rank_before);
    *(last - 1) = id;
    std::push_heap(first, last, rank_before);
    worst = logits[static_cast<size_t>(ids_[0])];
  }
}

size_t Sampler::SelectNucleus(size_t n, double target) {
  // Quickselect on the (weight desc, id asc) order, which is total, so the
  // set found is exactly the smallest most-likely prefix reaching `target`.
  // Invariant: ids_[0, lo) rank before ids_[lo, hi), and their mass `above`
  // is < target; the nucleus ends inside [lo, hi].
  const auto rank_before = [this](int32_t a, int32_t b) {
    const float wa = work_[static_cast<size_t>(a)], wb = work_[static_cast<size_t>(b)];
    return wa > wb || (wa == wb && a < b);
  };
  const auto at = [this](size_t i) { return ids_.begin() + static_cast<ptrdiff_t>(i); };
  size_t lo = 0, hi = n;
  double above = 0.0;
  while (lo < hi) {
    // Median of three as the pivot.
    int32_t x = ids_[lo], y = ids_[lo + (hi - lo) / 2], z = ids_[hi - 1];
    if (rank_before(y, x)) std::swap(x, y);
    if (rank_before(z, y)) std::swap(y, z);
    if (rank_before(y, x)) std::swap(x, y);
    const int32_t pivot = y;
    const auto mid = std::partition(at(lo), at(hi), [&](int32_t id) { return rank_before(id, pivot); });
    std::iter_swap(mid, std::find(mid, at(hi), pivot));
    const auto a = static_cast<size_t>(mid - ids_.begin());  // the pivot's index
    double left = 0.0;
    for (size_t i = lo; i < a; ++i) left += work_[static_cast<size_t>(ids_[i])];
    if (above + left >= target) {
      hi = a;
    } else if (above + left + work_[static_cast<size_t>(pivot)] >= target) {
      return a + 1;
    } else {
      above += left + work_[static_cast<size_t>(pivot)];
      lo = a + 1;
    }
  }
  return std::max<size_t>(lo, 1);  // rounding: everything, and never nothing
}

void Sampler::FillLogprobs(std::span<const float> logits, int32_t n, SampleResult& r) {
  const float max_logit = logits[static_cast<size_t>(ArgMax(logits))];
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max_logit);
  const double log_z = max_logit + std::log(sum);
  r.logprob = static_cast<float>(logits[static_cast<size_t>(r.token_id)] - log_z);
  if (n == 0) return;
  const auto k = static_cast<ptrdiff_t>(std::min(n, vocab_size_));
  SelectTopK(logits, static_cast<size_t>(k));
  std::sort(ids_.begin(), ids_.begin() + k, [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  r.top.resize(static_cast<size_t>(k));
  for (ptrdiff_t i = 0; i < k; ++i) {
    const int32_t id = ids_[static_cast<size_t>(i)];
    r.top[static_cast<size_t>(i)] = {id, static_cast<float>(logits[static_cast<size_t>(id)] - log_z)};
  }
}

}  // namespace kvs::engine
