#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvs::model {
namespace {

// gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form (what Gemma's
// gelu_pytorch_tanh and ggml_gelu compute).
void GeluTanhMul(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

}  // namespace

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path, const LoadOptions& options) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  auto m = FromFile(std::move(file), options);
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::FromFile(std::unique_ptr<gguf::GgufFile> file,
                                                           const LoadOptions& options) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::move(file);
  KVS_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->file_));
  KVS_ASSIGN_OR_RETURN(m->weights_, ModelWeights::Load(*m->file_, m->config_, options));
  if (options.first_layer > 0 || options.num_layers >= 0) {
    // A pipeline stage computes its own layers only (weights and KV cache);
    // which of them slide is counted from its first layer in the whole model.
    m->config_.n_layers = static_cast<int32_t>(m->weights_->layers.size());
    m->config_.first_layer = options.first_layer;
  }
  if (options.shard_count > 1) {
    // What this rank computes from here on (ModelWeights::Shard checked the division).
    m->shard_count_ = options.shard_count;
    m->config_.n_heads /= options.shard_count;
    m->config_.n_kv_heads = m->config_.ShardKvHeads(options.shard_count);
    m->config_.ffn /= options.shard_count;
  }
  m->SetContextLength(m->config_.context_length);
  return m;
}

void LlamaModel::SetContextLength(int64_t n_ctx) {
  const ModelConfig& c = config_;
  const ModelWeights& w = *weights_;
  const float* divisors = w.rope_freqs;
  if (c.longrope) divisors = n_ctx > c.rope_orig_ctx ? w.rope_long : w.rope_short;
  const bool yarn = c.rope_scaling == "yarn";
  // Positions are divided by the factor (llama.cpp's freq_scale = 1 / factor)
  // for linear and YaRN scaling; never for `none`.
  const double freq_scale = c.rope_scaling == "none" ? 1.0 : 1.0 / c.rope_scale;
  // Attention temperature: YaRN's sqrt(1/t) = 0.1 ln(factor) + 1 (divided by
  // the same for yarn_log_multiplier when set), times rope.scaling.attn_factor.
  // As in llama.cpp, a layer whose own scale differs (Gemma's sliding
  // layers) trades the global factor's 1 + 0.1 ln(factor) for its own.
  auto get_mscale = [](double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; };
  double attn_factor = c.rope_attn_factor;
  if (yarn) {
    const double factor = 1.0 / freq_scale;
    attn_factor *= (c.yarn_log_mul != 0.0f ? get_mscale(factor, 1.0) / get_mscale(factor, c.yarn_log_mul)
                                           : get_mscale(factor, 1.0)) /
                   (1.0 + 0.1 * std::log(factor));
  }
  for (int kind = 0; kind < 2; ++kind) {
    const double base = kind == 0 ? c.rope_base : c.rope_base_swa;
    const double scale = kind == 0 ? freq_scale : 1.0 / c.rope_scale_swa;
    // YaRN (llama.cpp's ggml_rope_yarn_corr_dims): dims below `lo` rotate
    // too fast to need interpolation (extrapolate), dims above `hi`
    // interpolate, a linear ramp between.
    double lo = 0, hi = 0;
    if (yarn) {
      auto corr_dim = [&](double n_rot) {
        return c.rope_dim * std::log(c.rope_orig_ctx / (n_rot * 2 * M_PI)) / (2 * std::log(base));
      };
      const double beta_fast = 32.0, beta_slow = 1.0;  // llama.cpp's defaults; it reads no key for these archs
      lo = std::max(0.0, std::floor(corr_dim(beta_fast)));
      hi = std::min(static_cast<double>(c.rope_dim - 1), std::ceil(corr_dim(beta_slow)));
    }
    RopeTable& r = rope_[kind];
    r.inv_freq.resize(static_cast<size_t>(c.rope_dim / 2));
    for (int32_t i = 0; i < c.rope_dim / 2; ++i) {
      double f = std::pow(base, -2.0 * i / c.rope_dim);
      if (divisors != nullptr) f /= divisors[i];
      double mix = 0.0;  // 1: extrapolate (unscaled), 0: interpolate (scaled)
      if (yarn) mix = 1.0 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
      r.inv_freq[static_cast<size_t>(i)] = f * (scale * (1.0 - mix) + mix);
    }
    r.mscale = attn_factor * (yarn ? 1.0 + 0.1 * std::log(1.0 / scale) : 1.0);
  }
}

void LlamaModel::ReserveTokens(int64_t t) {
  if (t <= max_tokens_) return;
  const ModelConfig& c = config_;
  max_tokens_ = t;
  auto size = [t](std::vector<float>& v, int64_t width) { v.assign(static_cast<size_t>(t * width), 0.0f); };
  size(x_, c.hidden);
  size(xn_, c.hidden);
  size(q_, c.q_dim());
  size(k_, c.kv_dim());
  size(v_, c.kv_dim());
  size(att_, c.q_dim());
  size(tmp_, c.hidden);
  size(gate_, c.is_moe() ? 0 : c.ffn);
  size(up_, c.is_moe() ? 0 : c.ffn);
  for (int kind = 0; kind < 2; ++kind) {
    size(cos_[kind], c.rope_dim / 2);
    size(sin_[kind], c.rope_dim / 2);
  }
}

// Rotates the first rope_dim dims of each head of x [n_heads, head_dim].
void LlamaModel::Rope(float* x, int32_t n_heads, const float* cos, const float* sin) const {
  const ModelConfig& c = config_;
  const int32_t half = c.rope_dim / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * c.head_dim;
    if (c.rope_type == RopeType::kNormal) {
      for (int32_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos[i] - x1 * sin[i];
        v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
      }
    } else {
      for (int32_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cos[i] - x1 * sin[i];
        v[i + half] = x0 * sin[i] + x1 * cos[i];
      }
    }
  }
}

Status LlamaModel::ValidateBatch(const kvcache::ForwardBatch& batch, const KvCaches& caches) const {
  const ModelConfig& c = config_;
  const int32_t sliding = caches.window != nullptr ? c.NumSlidingLayers() : 0;
  const int32_t global = c.n_layers - sliding;
  for (const kvcache::KvCache* cache : {caches.full, caches.window}) {
    if (cache == nullptr) continue;
    const kvcache::KvCacheConfig& kc = cache->config();
    const int32_t layers = cache == caches.window ? sliding : global;
    if (kc.num_layers != layers || kc.n_kv_heads != c.n_kv_heads || kc.head_dim != c.head_dim) {
      return InvalidArgument("KV cache shape does not match the model");
    }
  }
  if (caches.full == nullptr && (global > 0 || caches.window == nullptr)) {
    return InvalidArgument("no KV cache for the model's {} global layers", global);
  }
  if (caches.full != nullptr && caches.window != nullptr &&
      caches.full->config().block_size != caches.window->config().block_size) {
    return InvalidArgument("the two KV caches have different block sizes");
  }
  const int32_t bs = (caches.full != nullptr ? caches.full : caches.window)->config().block_size;
  for (const kvcache::ForwardSeq& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) return InvalidArgument("empty sequence in batch");
    if (s.start_pos < 0) return InvalidArgument("negative start position");
    const int64_t end = s.start_pos + n;
    if (static_cast<int64_t>(s.block_table.size()) * bs < end) {
      return InvalidArgument("block table covers {} positions, slice needs {}", s.block_table.size() * bs, end);
    }
    if (caches.full != nullptr) {
      for (int32_t b : s.block_table) {
        if (b < 0 || b >= caches.full->config().num_blocks) return InvalidArgument("block id {} out of range", b);
      }
    }
    if (caches.window != nullptr) {
      if (static_cast<int64_t>(s.window_block_table.size()) * bs < end) {
        return InvalidArgument("window block table covers {} positions, slice needs {}",
                               s.window_block_table.size() * bs, end);
      }
      // Blocks before the first query's window may be gone (-1); none that is read.
      const int64_t first = std::max<int64_t>(0, s.start_pos - c.sliding_window + 1) / bs;
      for (size_t i = 0; i < s.window_block_table.size(); ++i) {
        const int32_t b = s.window_block_table[i];
        if (b >= caches.window->config().num_blocks || (b < 0 && (b != -1 || static_cast<int64_t>(i) >= first))) {
          return InvalidArgument("window block id {} at entry {} out of range", b, i);
        }
      }
    }
    for (int32_t tok : s.tokens) {
      if (tok < 0 || tok >= c.vocab) return InvalidArgument("token id {} out of range [0, {})", tok, c.vocab);
    }
  }
  return Status::Ok();
}

Status LlamaModel::Forward(const kvcache::ForwardBatch& batch, KvCaches caches, std::span<float> logits,
                           ThreadPool& pool) {
  const ModelConfig& c = config_;
  // Validate the batch once, here at the boundary.
  KVS_RETURN_IF_ERROR(ValidateBatch(batch, caches));
  int64_t T = 0, rows = 0;
  for (const kvcache::ForwardSeq& s : batch.seqs) {
    T += static_cast<int64_t>(s.tokens.size());
    rows += s.NumLogits();
  }
  if (T == 0) return Status::Ok();
  if (shard_count_ > 1 && (collective_ == nullptr || collective_->size() != shard_count_)) {
    return FailedPrecondition("a shard of {} needs a collective of {} ranks", shard_count_, shard_count_);
  }
  // Every rank of the last stage computes its rows of the vocabulary; the
  // stage's rank 0 gathers them into `logits` [rows, vocab].
  const bool skip_logits = pipeline_.next >= 0;
  const bool gathers = shard_count_ == 1 || collective_->rank() == 0;
  if (!skip_logits && gathers && static_cast<int64_t>(logits.size()) != rows * c.vocab) {
    return InvalidArgument("logits buffer has {} floats, batch needs {}", logits.size(), rows * c.vocab);
  }
  ReserveTokens(T);

  const int64_t H = c.hidden, QD = c.q_dim(), KD = c.kv_dim(), half = c.rope_dim / 2;
  // Embeddings and RoPE tables, token by token.
  {
    int64_t t = 0;
    const int64_t emb_row = RowBytes(weights_->token_embd.type, H);
    for (const kvcache::ForwardSeq& s : batch.seqs) {
      for (size_t i = 0; i < s.tokens.size(); ++i, ++t) {
        if (pipeline_.prev < 0) {
          const uint8_t* row = static_cast<const uint8_t*>(weights_->token_embd.data) + s.tokens[i] * emb_row;
          kernels::DequantizeRow(weights_->token_embd.type, row, x_.data() + t * H, H);
        }
        if (c.embed_scale && pipeline_.prev < 0) {
          const float e = std::sqrt(static_cast<float>(H));
          for (int64_t j = 0; j < H; ++j) x_[t * H + j] *= e;
        }
        const double pos = static_cast<double>(s.start_pos) + static_cast<double>(i);
        for (int kind = 0; kind < (c.sliding_window > 0 ? 2 : 1); ++kind) {
          const RopeTable& r = rope_[kind];
          for (int64_t j = 0; j < half; ++j) {
            const double th = pos * r.inv_freq[static_cast<size_t>(j)];
            cos_[kind][t * half + j] = static_cast<float>(std::cos(th) * r.mscale);
            sin_[kind][t * half + j] = static_cast<float>(std::sin(th) * r.mscale);
          }
        }
      }
    }
  }
  // A later pipeline stage starts from the previous one's residual stream.
  if (pipeline_.prev >= 0) pipeline_.world->Recv({x_.data(), static_cast<size_t>(T * H)}, pipeline_.prev, kActivationTag);
  const float att_scale = c.AttentionScale();
  if (caches.window != nullptr) {
    window_batch_.seqs.assign(batch.seqs.begin(), batch.seqs.end());
    for (kvcache::ForwardSeq& s : window_batch_.seqs) s.block_table = s.window_block_table;
  }

  int32_t group_layer[2] = {0, 0};  // the next layer index within the full and window caches
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_->layers[static_cast<size_t>(l)];
    const bool sliding = c.IsSliding(l);
    const int group = sliding && caches.window != nullptr ? 1 : 0;
    kvcache::KvCache& cache = group == 1 ? *caches.window : *caches.full;
    const kvcache::ForwardBatch& kv_batch = group == 1 ? window_batch_ : batch;
    const int32_t cache_layer = group_layer[group]++;
    const int32_t bs = cache.config().block_size;
    const float* cos = cos_[sliding ? 1 : 0].data();
    const float* sin = sin_[sliding ? 1 : 0].data();
    for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(x_.data() + t * H, L.attn_norm, xn_.data() + t * H, H, c.rms_eps);
    {
      // One fork-join for q/k/v: decode issues tiny jobs, so joins dominate.
      const kernels::MatView ws[3] = {L.wq, L.wk, L.wv};
      float* const ys[3] = {q_.data(), k_.data(), v_.data()};
      kernels::MatMulMany(ws, ys, 3, xn_.data(), T, pool);
    }
    for (int64_t t = 0; t < T; ++t) {
      float* q = q_.data() + t * QD;
      float* k = k_.data() + t * KD;
      float* v = v_.data() + t * KD;
      if (L.bq != nullptr) {
        kernels::Add(q, L.bq, q, QD);
        kernels::Add(k, L.bk, k, KD);
        kernels::Add(v, L.bv, v, KD);
      }
      if (L.q_norm != nullptr) {
        for (int32_t h = 0; h < c.n_heads; ++h) kernels::RmsNorm(q + h * c.head_dim, L.q_norm, q + h * c.head_dim, c.head_dim, c.rms_eps);
        for (int32_t h = 0; h < c.n_kv_heads; ++h) kernels::RmsNorm(k + h * c.head_dim, L.k_norm, k + h * c.head_dim, c.head_dim, c.rms_eps);
      }
      Rope(q, c.n_heads, cos + t * half, sin + t * half);
      Rope(k, c.n_kv_heads, cos + t * half, sin + t * half);
    }
    // Store K/V at each token's slot before attention reads them back.
    {
      int64_t t = 0;
      for (const kvcache::ForwardSeq& s : kv_batch.seqs) {
        for (size_t i = 0; i < s.tokens.size(); ++i, ++t) {
          const int64_t pos = s.start_pos + static_cast<int64_t>(i);
          const int64_t slot = static_cast<int64_t>(s.block_table[static_cast<size_t>(pos / bs)]) * bs + pos % bs;
          cache.Write(cache_layer, slot, k_.data() + t * KD, v_.data() + t * KD);
        }
      }
    }
    attention_.Run(cache, {cache_layer, c.n_heads, att_scale, sliding ? c.sliding_window : 0, c.attn_softcap},
                   kv_batch, q_.data(), att_.data(), pool);
    kernels::MatMul(L.wo, att_.data(), T, tmp_.data(), pool);
    if (shard_count_ > 1) collective_->AllReduceSum({tmp_.data(), static_cast<size_t>(T * H)});
    if (L.attn_post_norm != nullptr) {
      for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(tmp_.data() + t * H, L.attn_post_norm, tmp_.data() + t * H, H, c.rms_eps);
    }
    kernels::Add(x_.data(), tmp_.data(), x_.data(), T * H);
    for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(x_.data() + t * H, L.ffn_norm, xn_.data() + t * H, H, c.rms_eps);
    if (c.is_moe()) {
      moe_.Forward(c, L.moe, xn_.data(), T, tmp_.data(), pool);
    } else if (c.gelu_ffn) {
      // gate_ = gelu_tanh(xn · gate^T) * (xn · up^T)
      const kernels::MatView ws[2] = {L.w_gate, L.w_up};
      float* const ys[2] = {gate_.data(), up_.data()};
      kernels::MatMulMany(ws, ys, 2, xn_.data(), T, pool);
      GeluTanhMul(gate_.data(), up_.data(), T * c.ffn);
    } else {
      // gate_ = silu(xn · gate^T) * (xn · up^T), fused per thread.
      kernels::GatedMatMul(L.w_gate, L.w_up, xn_.data(), T, gate_.data(), up_.data(), pool);
    }
    if (!c.is_moe()) kernels::MatMul(L.w_down, gate_.data(), T, tmp_.data(), pool);
    if (shard_count_ > 1) collective_->AllReduceSum({tmp_.data(), static_cast<size_t>(T * H)});
    if (L.ffn_post_norm != nullptr) {
      for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(tmp_.data() + t * H, L.ffn_post_norm, tmp_.data() + t * H, H, c.rms_eps);
    }
    kernels::Add(x_.data(), tmp_.data(), x_.data(), T * H);
  }

  if (pipeline_.next >= 0) {
    pipeline_.world->Send({x_.data(), static_cast<size_t>(T * H)}, pipeline_.next, kActivationTag);
    return Status::Ok();
  }
  if (skip_logits) return Status::Ok();
  // Final norm on the rows whose logits are wanted, gathered into xn_.
  int64_t r = 0;
  {
    int64_t t = 0;
    for (const kvcache::ForwardSeq& s : batch.seqs) {
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      if (s.all_logits) {
        for (int64_t i = 0; i < n; ++i, ++r) kernels::RmsNorm(x_.data() + (t + i) * H, weights_->output_norm, xn_.data() + r * H, H, c.rms_eps);
      } else if (s.want_logits) {
        kernels::RmsNorm(x_.data() + (t + n - 1) * H, weights_->output_norm, xn_.data() + r * H, H, c.rms_eps);
        ++r;
      }
      t += n;
    }
  }
  if (shard_count_ > 1) {
    if (r > 0) GatherVocabLogits(r, logits, pool);  // r is the same on every rank: no messages when 0
    if (!gathers) return Status::Ok();
  } else if (r > 0) {
    kernels::MatMul(weights_->output, xn_.data(), r, logits.data(), pool);
  }
  if (c.final_softcap > 0.0f) {
    const float cap = c.final_softcap;
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  if (pipeline_.logits_to >= 0 && !logits.empty()) pipeline_.world->Send(logits, pipeline_.logits_to, kLogitsTag);
  return Status::Ok();
}

void LlamaModel::GatherVocabLogits(int64_t rows, std::span<float> logits, ThreadPool& pool) {
  const int64_t V = config_.vocab;
  const ModelConfig::Rows mine = config_.ShardVocab(collective_->rank(), shard_count_);
  vocab_part_.resize(static_cast<size_t>(rows * mine.count));  // [rows, mine.count]
  kernels::MatMul(weights_->output, xn_.data(), rows, vocab_part_.data(), pool);
  if (collective_->rank() != 0) {
    collective_->Send(vocab_part_, 0, kVocabTag);
    return;
  }
  // Rank 0: its own columns, then each rank's in rank order (each peer's
  // sends arrive in order, so micro-batches never mix).
  auto place = [&](const float* part, ModelConfig::Rows cols) {
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(logits.data() + i * V + cols.first, part + i * cols.count, static_cast<size_t>(cols.count) * sizeof(float));
    }
  };
  place(vocab_part_.data(), mine);
  for (int k = 1; k < shard_count_; ++k) {
    const ModelConfig::Rows theirs = config_.ShardVocab(k, shard_count_);
    vocab_recv_.resize(static_cast<size_t>(rows * theirs.count));
    collective_->Recv(vocab_recv_, k, kVocabTag);
    place(vocab_recv_.data(), theirs);
  }
}

}  // namespace kvs::model
