#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/kernels.h"

namespace kvs::engine {

double UniformDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

namespace {

// The first maximum: ties go to the lowest id (SIMD: greedy decoding scans
// the whole vocabulary every token).
int32_t ArgMax(std::span<const float> v) {
  return static_cast<int32_t>(kernels::ArgMax(v.data(), static_cast<int64_t>(v.size())));
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
  // work_ = logits + penalties + logit_bias (a draw overwrites work_ with
  // weights; the rare fallback below prepares it again).
  const auto prepare = [&] { processed = Prepare(logits, seq); };
  const auto draw = [&] { return p.greedy() ? ArgMax(processed) : Draw(processed, p, seq.rng); };
  const int32_t tokens_left = p.max_tokens - seq.num_output_tokens();  // this one included
  // A free draw that leaves the grammar unable to end within max_tokens
  // (EndsInTime) is undone and drawn again among the tokens that keep the
  // end in reach (SteerToEnd).
  bool steer = false;
  prepare();
  if (seq.matcher && UnmaskedDrawIsExact(seq)) {
    // Draw first, mask only if the grammar refuses the token: most tokens
    // of a well-behaved model are allowed, and one token's walk costs far
    // less than a mask over the vocabulary. Exact: for greedy the argmax of
    // all tokens, when allowed, is the argmax of the allowed ones (ties:
    // lowest id either way); for plain temperature sampling P(t) = p(t) +
    // (1 - Z) p(t) / Z = p(t) / Z for an allowed t (Z: the allowed mass),
    // the masked distribution.
    r.token_id = draw();
    bool accepted = seq.matcher->AcceptToken(r.token_id).ok();
    if (!accepted && !p.greedy()) {
      // Refused: the draw left the weight exp((logit - max) / T) of every
      // token in work_; the allowed ones, renormalised, are the masked
      // distribution, so draw again from them without another exp pass.
      mask_.assign(static_cast<size_t>((vocab_size_ + 31) / 32), 0u);
      if (seq.matcher->FillNextTokenMask(mask_).ok()) {
        const int32_t t = DrawAllowed(seq.rng);
        accepted = t >= 0 && seq.matcher->AcceptToken(t).ok();
        if (accepted) r.token_id = t;
      }
      // Otherwise (a mask error, or every allowed weight underflowed to 0)
      // the masked path below decides, and reports errors.
      if (!accepted) prepare();
    }
    if (accepted && !EndsInTime(*seq.matcher, tokens_left)) {
      KVS_CHECK(seq.matcher->Rollback(1).ok());
      accepted = false;
      steer = true;
      prepare();
    }
    if (accepted) {
      r.grammar_done = seq.matcher->IsTerminated();
      if (p.logprobs) FillLogprobs(logits, *p.logprobs, r);
      return r;
    }
    // Greedy: work_ still holds the processed logits for the masked argmax.
  }
  for (;;) {
    bool steered = false;
    if (seq.matcher) {
      mask_.assign(static_cast<size_t>((vocab_size_ + 31) / 32), 0u);
      r.error = seq.matcher->FillNextTokenMask(mask_);
      if (!r.error.ok()) {
        r.error = r.error.WithContext("constrained decoding cannot continue");
        r.token_id = 0;
        return r;
      }
      grammar::ApplyTokenMask(mask_, work_);
      steered = SteerToEnd(seq, tokens_left, steer);
    }
    r.token_id = draw();
    if (!seq.matcher) break;
    // A draw never lands on a -inf (zero weight) token unless nothing was
    // allowed; AcceptToken then fails and the sequence ends with the error.
    r.error = seq.matcher->AcceptToken(r.token_id);
    if (!r.error.ok()) {
      r.error = r.error.WithContext("constrained decoding: no allowed token");
      break;
    }
    if (!steered && !EndsInTime(*seq.matcher, tokens_left)) {  // once: the steered draw fits or comes nearest
      KVS_CHECK(seq.matcher->Rollback(1).ok());
      steer = true;
      prepare();
      continue;
    }
    r.grammar_done = seq.matcher->IsTerminated();
    break;
  }
  if (p.logprobs) FillLogprobs(logits, *p.logprobs, r);
  return r;
}

std::span<const float> Sampler::Prepare(std::span<const float> logits, const Sequence& seq) {
  const SamplingParams& p = seq.params;
  if (!p.has_penalties() && p.logit_bias.empty() && !seq.matcher) return logits;
  std::copy(logits.begin(), logits.end(), work_.begin());
  if (p.has_penalties()) ApplyPenalties(seq);
  for (const auto& [id, bias] : p.logit_bias) work_[static_cast<size_t>(id)] += bias;
  return work_;
}

template <class Keep>
int32_t Sampler::DrawAmong(size_t n, Keep keep, std::mt19937_64& rng) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (keep(ids_[i])) total += work_[static_cast<size_t>(ids_[i])];
  }
  if (!(total > 0.0)) return -1;
  const double u = UniformDouble(rng) * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < n; ++i) {
    const float w = work_[static_cast<size_t>(ids_[i])];
    if (!keep(ids_[i]) || w <= 0.0f) continue;
    cum += w;
    last = ids_[i];
    if (u < cum) return last;
  }
  return last;  // rounding left u at the very top
}

int32_t Sampler::DrawAllowed(std::mt19937_64& rng) {
  // After an untruncated Draw ids_[0, vocab) is every id in order.
  return DrawAmong(static_cast<size_t>(vocab_size_),
                   [this](int32_t id) { return (mask_[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u; }, rng);
}

bool Sampler::UnmaskedDrawIsExact(const Sequence& seq) const {
  const SamplingParams& p = seq.params;
  // top-k, top-p and min-p cut the distribution before the draw: cut
  // unmasked, they keep other tokens than cut after the mask.
  const bool truncated = (p.top_k > 0 && p.top_k < vocab_size_) || p.top_p < 1.0f || p.min_p > 0.0f;
  if (!p.greedy() && truncated) return false;
  // Near max_tokens SteerToEnd narrows the mask further.
  const int32_t tokens_left = p.max_tokens - seq.num_output_tokens();
  return static_cast<int64_t>(seq.matcher->MinCompletionBytes()) + 1 + kSteerSlack < tokens_left;
}

bool Sampler::EndsInTime(const grammar::GrammarMatcher& m, int32_t tokens_left) {
  // After this token, tokens_left - 1 remain for the completion (one-byte
  // tokens at worst) and the stop token.
  return m.IsTerminated() || static_cast<int64_t>(m.MinCompletionBytes()) + 1 <= tokens_left - 1;
}

bool Sampler::SteerToEnd(Sequence& seq, int32_t tokens_left, bool force) {
  grammar::GrammarMatcher& m = *seq.matcher;
  const int32_t need = m.MinCompletionBytes();  // then one stop token
  if (!force && static_cast<int64_t>(need) + 1 + kSteerSlack < tokens_left) return false;  // room enough
  const grammar::Vocabulary& v = m.grammar().vocabulary();
  const auto allowed = [this](int32_t id) { return (mask_[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u; };
  const int32_t n = std::min<int32_t>(vocab_size_, v.size());
  // Candidates: the allowed stop and one-byte tokens, and the most likely allowed ones.
  std::vector<int32_t> cands;
  std::vector<int32_t> likely;
  for (int32_t id = 0; id < n; ++id) {
    if (!allowed(id)) continue;
    if (v.kind(id) == grammar::Vocabulary::Kind::kStop || v.token_bytes(id).size() == 1) {
      cands.push_back(id);
    } else {
      likely.push_back(id);
    }
  }
  if (likely.size() > kSteerTopK) {
    std::nth_element(likely.begin(), likely.begin() + kSteerTopK, likely.end(), [this](int32_t a, int32_t b) {
      return work_[static_cast<size_t>(a)] > work_[static_cast<size_t>(b)];
    });
    likely.resize(kSteerTopK);
  }
  cands.insert(cands.end(), likely.begin(), likely.end());
  // A token is kept when, after it, the completion and the stop token fit in
  // the tokens left. Probing accepts and rolls back (the matcher's state is
  // unchanged; its rollback history may lose its oldest entry).
  std::vector<int32_t> keep;
  int32_t nearest = -1;
  int64_t nearest_need = INT64_MAX;
  for (int32_t id : cands) {
    if (v.kind(id) == grammar::Vocabulary::Kind::kStop) {
      keep.push_back(id);
      continue;
    }
    if (!m.AcceptToken(id).ok()) continue;
    const int64_t after = m.MinCompletionBytes();
    const bool terminated = m.IsTerminated();
    KVS_CHECK(m.Rollback(1).ok());
    if (terminated) continue;
    if (after + 1 <= tokens_left - 1) keep.push_back(id);
    if (after < nearest_need || (after == nearest_need && work_[static_cast<size_t>(id)] > work_[static_cast<size_t>(nearest)])) {
      nearest_need = after;
      nearest = id;
    }
  }
  if (keep.empty() && nearest >= 0) keep.push_back(nearest);  // cannot end in time: come as near as possible
  if (keep.empty()) return true;                              // nothing probed: the mask stands
  const float kept_floor = -std::numeric_limits<float>::infinity();
  std::vector<float> saved(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) saved[i] = work_[static_cast<size_t>(keep[i])];
  std::fill(work_.begin(), work_.end(), kept_floor);
  for (size_t i = 0; i < keep.size(); ++i) work_[static_cast<size_t>(keep[i])] = saved[i];
  return true;
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
  const size_t n = Weigh(logits, p);
  const int32_t t = DrawAmong(n, [](int32_t) { return true; }, rng);
  return t >= 0 ? t : ids_[n - 1];
}

size_t Sampler::Weigh(std::span<const float> logits, const SamplingParams& p) {
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
    // All candidates: the exponentials go through the SIMD softmax kernel
    // (std::exp one at a time cost ~0.8 ms a token on a 152K vocabulary),
    // then are rescaled so the most likely weighs exactly 1 again. The
    // kernel clamps its input at -87, so weights under kMinWeight (relative
    // to the most likely, i.e. a scaled logit below about -86.8) are set to
    // 0 as std::exp would have made them (a banned token stays banned).
    constexpr float kMinWeight = 2e-38f;
    const auto best = static_cast<size_t>(ArgMax(logits));
    const float max_logit = logits[best];
    for (size_t id = 0; id < n; ++id) work_[id] = (logits[id] - max_logit) * inv_t;
    kernels::Softmax(work_.data(), static_cast<int64_t>(n));
    const float top = work_[best];
    const float inv_top = 1.0f / top;
    for (size_t id = 0; id < n; ++id) {
      const float w = work_[id] * inv_top;
      work_[id] = w < kMinWeight ? 0.0f : w;
    }
    work_[best] = 1.0f;
    total = 1.0 / static_cast<double>(top);  // the softmax summed to 1
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
  return n;
}

bool Sampler::CanVerifyDrafts(const Sequence& seq) {
  const SamplingParams& p = seq.params;
  return !seq.matcher && !p.has_penalties() && !p.logprobs;
}

SampleResult Sampler::AcceptDraft(std::span<const float> logits, Sequence& seq, int32_t draft, bool* accepted) {
  KVS_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  KVS_CHECK(CanVerifyDrafts(seq));
  const SamplingParams& p = seq.params;
  const std::span<const float> processed = Prepare(logits, seq);  // logit_bias only (CanVerifyDrafts)
  SampleResult r;
  if (p.greedy()) {
    r.token_id = ArgMax(processed);
    *accepted = r.token_id == draft;
    return r;
  }
  // The draft is a point mass q = [draft]: accept with probability
  // min(1, p(draft) / q(draft)) = p(draft); on rejection draw from
  // max(0, p - q) renormalised, i.e. p without the draft. Either way the
  // token is distributed exactly as p.
  const size_t n = Weigh(processed, p);
  double total = 0.0, p_draft = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double w = work_[static_cast<size_t>(ids_[i])];
    total += w;
    if (ids_[i] == draft) p_draft = w;
  }
  if (UniformDouble(seq.rng) * total < p_draft) {
    r.token_id = draft;
    *accepted = true;
    return r;
  }
  const int32_t t = DrawAmong(n, [draft](int32_t id) { return id != draft; }, seq.rng);
  // t < 0: the draft held all the mass yet lost the draw (u rounded to the
  // top); it is then the only token p allows.
  r.token_id = t >= 0 ? t : draft;
  *accepted = t < 0;
  return r;
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
  // log Z = max + log(sum of exp(l - max)); the SIMD softmax gives the most
  // likely token exp(0) / sum, so the sum comes back as its reciprocal
  // (std::exp one logit at a time cost ~0.8 ms a token on a 152K vocabulary).
  const auto best = static_cast<size_t>(ArgMax(logits));
  const float max_logit = logits[best];
  std::copy(logits.begin(), logits.end(), work_.begin());
  kernels::Softmax(work_.data(), static_cast<int64_t>(logits.size()));
  const double log_z = max_logit - std::log(static_cast<double>(work_[best]));
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
