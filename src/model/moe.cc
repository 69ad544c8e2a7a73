#include "model/moe.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace kvs::model {

void MoeFfn::Reserve(const ModelConfig& c, int64_t T) {
  if (counts_.size() != static_cast<size_t>(c.n_experts)) counts_.assign(static_cast<size_t>(c.n_experts), 0);
  if (T <= max_tokens_) return;
  max_tokens_ = T;
  const auto n = [T](int64_t width) { return static_cast<size_t>(T * width); };
  const int64_t ffn = std::max(c.expert_ffn, c.shared_ffn);
  logits_.assign(n(c.n_experts), 0.0f);
  chosen_.assign(n(c.n_experts_used), 0);
  weights_.assign(n(c.n_experts_used), 0.0f);
  order_.assign(n(c.n_experts_used), 0);
  start_.assign(static_cast<size_t>(c.n_experts) + 1, 0);
  xg_.assign(n(c.hidden), 0.0f);
  // Decode keeps every chosen expert's gate and up at once: K rows.
  act_.assign(static_cast<size_t>(std::max<int64_t>(T, c.n_experts_used) * ffn), 0.0f);
  up_.assign(static_cast<size_t>(std::max<int64_t>(T, c.n_experts_used) * ffn), 0.0f);
  yg_.assign(n(c.hidden), 0.0f);
}

void MoeFfn::Forward(const ModelConfig& c, const MoeWeights& w, const float* xn, int64_t T, float* out,
                     ThreadPool& pool) {
  Reserve(c, T);
  const int64_t H = c.hidden, E = c.n_experts, K = c.n_experts_used;

  // Route: probabilities, the K largest (lower index first on ties), weights.
  kernels::MatMul(w.router, xn, T, logits_.data(), pool);
  std::fill(start_.begin(), start_.end(), 0);
  for (int64_t t = 0; t < T; ++t) {
    float* p = logits_.data() + t * E;
    kernels::Softmax(p, E);
    int32_t* ids = chosen_.data() + t * K;
    float* wt = weights_.data() + t * K;
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      int32_t best = -1;
      for (int32_t e = 0; e < E; ++e) {
        if (std::find(ids, ids + k, e) != ids + k) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      ids[k] = best;
      wt[k] = p[best];
      sum += p[best];
      ++start_[static_cast<size_t>(best) + 1];
    }
    if (c.norm_topk) {
      // As llama.cpp: the sum is clamped at f16's smallest normal.
      const float inv = 1.0f / std::max(sum, 6.103515625e-5f);
      for (int64_t k = 0; k < K; ++k) wt[k] *= inv;
    }
  }
  // Group the (token, slot) pairs by expert (counting sort, token order
  // kept within an expert).
  for (int64_t e = 0; e < E; ++e) {
    counts_[static_cast<size_t>(e)] += start_[static_cast<size_t>(e) + 1];
    start_[static_cast<size_t>(e) + 1] += start_[static_cast<size_t>(e)];
  }
  next_.assign(start_.begin(), start_.end() - 1);
  for (int64_t i = 0; i < T * K; ++i) {
    order_[static_cast<size_t>(next_[static_cast<size_t>(chosen_[static_cast<size_t>(i)])]++)] = static_cast<int32_t>(i);
  }

  std::fill(out, out + T * H, 0.0f);
  if (T == 1) {
    DecodeOne(c, w, xn, out, pool);
  } else {
    RunExperts(c, w, xn, out, pool);
  }

  if (w.shared_gate != nullptr) {
    // qwen2moe: + sigmoid(x · shared_gate) * down(silu(x · gate^T) * (x · up^T)).
    kernels::GatedMatMul(w.shared_gate_mat, w.shared_up, xn, T, act_.data(), up_.data(), pool);
    float* y = xg_.data();  // the gathered rows are free again
    kernels::MatMul(w.shared_down, act_.data(), T, y, pool);
    for (int64_t t = 0; t < T; ++t) {
      const float g = 1.0f / (1.0f + std::exp(-kernels::Dot(xn + t * H, w.shared_gate, H)));
      kernels::Axpy(g, y + t * H, out + t * H, H);
    }
  }
}

// Each chosen expert once, on the gathered rows of the tokens that chose it.
void MoeFfn::RunExperts(const ModelConfig& c, const MoeWeights& w, const float* xn, float* out, ThreadPool& pool) {
  const int64_t H = c.hidden, E = c.n_experts, K = c.n_experts_used;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = start_[static_cast<size_t>(e)], n = start_[static_cast<size_t>(e) + 1] - b;
    if (n == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = order_[static_cast<size_t>(b + i)] / K;
      std::copy(xn + t * H, xn + (t + 1) * H, xg_.data() + i * H);
    }
    kernels::GatedMatMul(w.gate[static_cast<size_t>(e)], w.up[static_cast<size_t>(e)], xg_.data(), n, act_.data(),
                         up_.data(), pool);
    kernels::MatMul(w.down[static_cast<size_t>(e)], act_.data(), n, yg_.data(), pool);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot = order_[static_cast<size_t>(b + i)];
      kernels::Axpy(weights_[static_cast<size_t>(slot)], yg_.data() + i * H, out + (slot / K) * H, H);
    }
  }

}

// One token: every chosen expert reads the same row, so their gate and up
// projections go through MatMulMany, up to 4 experts (8 matrices) a call,
// one fork-join instead of one per expert (the same values as GatedMatMul).
// Experts are taken in id order, as RunExperts adds them.
void MoeFfn::DecodeOne(const ModelConfig& c, const MoeWeights& w, const float* xn, float* out, ThreadPool& pool) {
  const int64_t H = c.hidden, K = c.n_experts_used, F = c.expert_ffn;
  for (int64_t k0 = 0; k0 < K; k0 += 4) {
    const int n = static_cast<int>(std::min<int64_t>(4, K - k0));
    kernels::MatView ws[8];
    float* ys[8];
    for (int j = 0; j < n; ++j) {
      const auto e = static_cast<size_t>(chosen_[static_cast<size_t>(order_[static_cast<size_t>(k0 + j)])]);
      ws[2 * j] = w.gate[e];
      ws[2 * j + 1] = w.up[e];
      ys[2 * j] = act_.data() + (k0 + j) * F;
      ys[2 * j + 1] = up_.data() + (k0 + j) * F;
    }
    kernels::MatMulMany(ws, ys, 2 * n, xn, 1, pool);
  }
  kernels::SiluMul(act_.data(), up_.data(), act_.data(), K * F);
  for (int64_t k = 0; k < K; ++k) {
    const auto slot = static_cast<size_t>(order_[static_cast<size_t>(k)]);
    kernels::MatMul(w.down[static_cast<size_t>(chosen_[slot])], act_.data() + k * F, 1, yg_.data(), pool);
    kernels::Axpy(weights_[slot], yg_.data(), out, H);
  }
}

}  // namespace kvs::model
