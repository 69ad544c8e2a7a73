#include "model/llama.h"

#include <cmath>

namespace kvs::model {

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  auto m = FromFile(std::move(file));
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::FromFile(std::unique_ptr<gguf::GgufFile> file) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::move(file);
  KVS_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->file_));
  KVS_ASSIGN_OR_RETURN(m->weights_, ModelWeights::Load(*m->file_, m->config_));
  const ModelConfig& c = m->config_;
  m->inv_freq_.resize(static_cast<size_t>(c.rope_dim / 2));
  for (int32_t i = 0; i < c.rope_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(c.rope_base), -2.0 * i / c.rope_dim);
    if (m->weights_->rope_freqs != nullptr) f /= m->weights_->rope_freqs[i];
    m->inv_freq_[static_cast<size_t>(i)] = f / c.rope_scale;
  }
  return m;
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
  size(gate_, c.ffn);
  size(up_, c.ffn);
  size(cos_, c.rope_dim / 2);
  size(sin_, c.rope_dim / 2);
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

Status LlamaModel::Forward(const kvcache::ForwardBatch& batch, kvcache::KvCache& cache, std::span<float> logits,
                           ThreadPool& pool) {
  const ModelConfig& c = config_;
  const kvcache::KvCacheConfig& kc = cache.config();
  if (kc.num_layers != c.n_layers || kc.n_kv_heads != c.n_kv_heads || kc.head_dim != c.head_dim) {
    return InvalidArgument("KV cache shape does not match the model");
  }
  // Validate the batch once, here at the boundary.
  int64_t T = 0, rows = 0;
  for (const kvcache::ForwardSeq& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) return InvalidArgument("empty sequence in batch");
    if (s.start_pos < 0) return InvalidArgument("negative start position");
    const int64_t end = s.start_pos + n;
    if (static_cast<int64_t>(s.block_table.size()) * kc.block_size < end) {
      return InvalidArgument("block table covers {} positions, slice needs {}",
                             s.block_table.size() * kc.block_size, end);
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= kc.num_blocks) return InvalidArgument("block id {} out of range", b);
    }
    for (int32_t tok : s.tokens) {
      if (tok < 0 || tok >= c.vocab) return InvalidArgument("token id {} out of range [0, {})", tok, c.vocab);
    }
    T += n;
    rows += s.NumLogits();
  }
  if (T == 0) return Status::Ok();
  if (static_cast<int64_t>(logits.size()) != rows * c.vocab) {
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
        const uint8_t* row = static_cast<const uint8_t*>(weights_->token_embd.data) + s.tokens[i] * emb_row;
        kernels::DequantizeRow(weights_->token_embd.type, row, x_.data() + t * H, H);
        const double pos = static_cast<double>(s.start_pos) + static_cast<double>(i);
        for (int64_t j = 0; j < half; ++j) {
          const double th = pos * inv_freq_[static_cast<size_t>(j)];
          cos_[t * half + j] = static_cast<float>(std::cos(th));
          sin_[t * half + j] = static_cast<float>(std::sin(th));
        }
      }
    }
  }
  const float att_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_->layers[static_cast<size_t>(l)];
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
      Rope(q, c.n_heads, cos_.data() + t * half, sin_.data() + t * half);
      Rope(k, c.n_kv_heads, cos_.data() + t * half, sin_.data() + t * half);
    }
    // Store K/V at each token's slot before attention reads them back.
    {
      int64_t t = 0;
      for (const kvcache::ForwardSeq& s : batch.seqs) {
        for (size_t i = 0; i < s.tokens.size(); ++i, ++t) {
          const int64_t pos = s.start_pos + static_cast<int64_t>(i);
          const int64_t slot = static_cast<int64_t>(s.block_table[static_cast<size_t>(pos / kc.block_size)]) * kc.block_size +
                               pos % kc.block_size;
          cache.Write(l, slot, k_.data() + t * KD, v_.data() + t * KD);
        }
      }
    }
    attention_.Run(cache, {l, c.n_heads, att_scale}, batch, q_.data(), att_.data(), pool);
    kernels::MatMul(L.wo, att_.data(), T, tmp_.data(), pool);
    kernels::Add(x_.data(), tmp_.data(), x_.data(), T * H);
    for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(x_.data() + t * H, L.ffn_norm, xn_.data() + t * H, H, c.rms_eps);
    // gate_ = silu(xn · gate^T) * (xn · up^T), fused per thread.
    kernels::GatedMatMul(L.w_gate, L.w_up, xn_.data(), T, gate_.data(), up_.data(), pool);
    kernels::MatMul(L.w_down, gate_.data(), T, tmp_.data(), pool);
    kernels::Add(x_.data(), tmp_.data(), x_.data(), T * H);
  }

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
  if (r > 0) kernels::MatMul(weights_->output, xn_.data(), r, logits.data(), pool);
  return Status::Ok();
}

}  // namespace kvs::model
