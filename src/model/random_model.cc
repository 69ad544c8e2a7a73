#include "model/random_model.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"

namespace kvs::model {

RandomModelSpec Test125MSpec() {
  RandomModelSpec s;
  s.hidden = 768;
  s.n_layers = 12;
  s.n_heads = 12;
  s.n_kv_heads = 4;
  s.ffn = 2048;
  s.vocab = 32000;
  return s;
}

RandomModelSpec SmallTestSpec(const std::string& arch) {
  RandomModelSpec s;
  s.arch = arch;
  s.hidden = 128;
  s.ffn = 128;
  s.vocab = 256;
  return s;
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

Status WriteRandomModel(const RandomModelSpec& s, const std::string& path, const std::string& twin_path) {
  gguf::GgufWriter w, twin;
  const int hd = s.head_dim > 0 ? s.head_dim : s.hidden / s.n_heads;
  const std::string a = s.arch + ".";
  for (gguf::GgufWriter* g : {&w, &twin}) {
    g->AddString("general.architecture", s.arch);
    g->AddString("general.name", "random-" + s.arch);
    g->AddUint32(a + "block_count", s.n_layers);
    g->AddUint32(a + "embedding_length", s.hidden);
    g->AddUint32(a + "feed_forward_length", s.ffn);
    g->AddUint32(a + "attention.head_count", s.n_heads);
    g->AddUint32(a + "attention.head_count_kv", s.n_kv_heads);
    g->AddUint32(a + "context_length", s.context_length);
    if (!s.rope_scaling.empty()) g->AddString(a + "rope.scaling.type", s.rope_scaling);
    if (s.rope_factor != 0.0f) g->AddFloat32(a + "rope.scaling.factor", s.rope_factor);
    if (s.rope_orig_ctx != 0) g->AddUint32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
    if (s.rope_attn_factor != 0.0f) g->AddFloat32(a + "rope.scaling.attn_factor", s.rope_attn_factor);
    if (s.sliding_window != 0) g->AddUint32(a + "attention.sliding_window", s.sliding_window);
    if (s.swa_pattern != 0) g->AddUint32(a + "attention.sliding_window_pattern", s.swa_pattern);
    if (!s.swa_layers.empty()) {
      std::vector<gguf::Value> flags;
      for (bool b : s.swa_layers) flags.push_back(gguf::Value::Bool(b));
      g->Add(a + "attention.sliding_window_pattern", gguf::Value::MakeArray(gguf::ValueType::kBool, std::move(flags)));
    }
    if (s.attn_softcap != 0.0f) g->AddFloat32(a + "attn_logit_softcapping", s.attn_softcap);
    if (s.final_softcap != 0.0f) g->AddFloat32(a + "final_logit_softcapping", s.final_softcap);
    if (s.rope_base_swa != 0.0f) g->AddFloat32(a + "rope.freq_base_swa", s.rope_base_swa);
    if (s.head_dim > 0) g->AddUint32(a + "attention.key_length", hd);
    g->AddFloat32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    g->AddFloat32(a + "rope.freq_base", s.rope_base);
    g->AddUint32(a + "rope.dimension_count", hd);
    if (s.n_experts > 0) {
      g->AddUint32(a + "expert_count", s.n_experts);
      g->AddUint32(a + "expert_used_count", s.n_experts_used);
      if (s.expert_ffn > 0) g->AddUint32(a + "expert_feed_forward_length", s.expert_ffn);
      if (s.shared_ffn > 0) g->AddUint32(a + "expert_shared_feed_forward_length", s.shared_ffn);
    }
  }
  const bool qwen_moe = s.arch == "qwen3moe" || s.arch == "qwen2moe";
  // The widths the reader will derive (config.cc) when the keys are absent.
  const int expert_ffn = s.expert_ffn > 0 ? s.expert_ffn : qwen_moe ? s.ffn / s.n_experts_used : s.ffn;
  const int shared_ffn = s.shared_ffn > 0 ? s.shared_ffn : s.ffn;
  std::mt19937 rng(s.seed);
  const bool q4km = s.mix == "Q4_K_M";
  // is_matrix: stored in the weight type (else F32, as norms and routers).
  auto add = [&](const std::string& name, std::vector<int64_t> dims, float stddev, float mean, bool is_matrix,
                 bool more_bits = false, const std::string& split_name = "") {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::normal_distribution<float> nd(mean, stddev);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    DType t = is_matrix ? s.weight_type : DType::kF32;
    if (is_matrix && q4km) t = more_bits ? DType::kQ6_K : DType::kQ4_K;
    const int64_t cols = dims[0], rows = n / cols;
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(t, cols) * rows));
    std::vector<float> deq(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* dst = q.data() + r * RowBytes(t, cols);
      kernels::QuantizeRow(t, x.data() + r * cols, dst, cols);
      kernels::DequantizeRow(t, dst, deq.data() + r * cols, cols);
    }
    if (!split_name.empty()) {
      // One [dims[0], dims[1]] tensor per expert, named split_name with E.
      const size_t bytes = static_cast<size_t>(RowBytes(t, cols) * dims[1]);
      for (int64_t e = 0; e < dims[2]; ++e) {
        std::vector<uint8_t> part(q.begin() + static_cast<std::ptrdiff_t>(e * bytes),
                                  q.begin() + static_cast<std::ptrdiff_t>((e + 1) * bytes));
        w.AddTensor(fmt::format(fmt::runtime(split_name), e), t, {dims[0], dims[1]}, std::move(part));
      }
    } else {
      w.AddTensor(name, t, dims, std::move(q));
    }
    std::vector<uint8_t> f(deq.size() * 4);
    std::memcpy(f.data(), deq.data(), f.size());
    twin.AddTensor(name, DType::kF32, dims, std::move(f));
  };
  const float ws = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  add("token_embd.weight", {s.hidden, s.vocab}, 1.0f, 0.0f, true);
  add("output_norm.weight", {s.hidden}, 0.1f, 1.0f, false);
  if (!s.tied) add("output.weight", {s.hidden, s.vocab}, ws, 0.0f, true, true);
  // Per-pair frequency divisors, written as F32 to both files.
  auto add_divisors = [&](const std::string& name, auto divisor) {
    std::vector<float> f(static_cast<size_t>(hd / 2));
    for (size_t i = 0; i < f.size(); ++i) f[i] = divisor(static_cast<int>(i), static_cast<int>(f.size()));
    for (gguf::GgufWriter* g : {&w, &twin}) {
      std::vector<uint8_t> b(f.size() * 4);
      std::memcpy(b.data(), f.data(), b.size());
      g->AddTensor(name, DType::kF32, {hd / 2}, std::move(b));
    }
  };
  if (s.rope_freqs) add_divisors("rope_freqs.weight", [](int i, int) { return 1.0f + static_cast<float>(i % 4); });
  if (s.longrope) {
    // Shaped like Phi-3's: ~1 for the fast pairs, growing toward the slow ones.
    add_divisors("rope_factors_short.weight", [](int i, int n) { return 1.0f + 0.5f * static_cast<float>(i) / n; });
    add_divisors("rope_factors_long.weight", [](int i, int n) { return 1.0f + 8.0f * static_cast<float>(i * i) / (n * n); });
  }
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    add(p + "attn_norm.weight", {s.hidden}, 0.1f, 1.0f, false);
    const bool phi3 = s.arch == "phi3", gemma = s.arch == "gemma2" || s.arch == "gemma3";
    if (phi3) {
      add(p + "attn_qkv.weight", {s.hidden, (s.n_heads + 2 * s.n_kv_heads) * hd}, ws, 0.0f, true);
    } else {
      add(p + "attn_q.weight", {s.hidden, s.n_heads * hd}, ws, 0.0f, true);
      add(p + "attn_k.weight", {s.hidden, s.n_kv_heads * hd}, ws, 0.0f, true);
      add(p + "attn_v.weight", {s.hidden, s.n_kv_heads * hd}, ws, 0.0f, true, UseMoreBits(l, s.n_layers));
    }
    add(p + "attn_output.weight", {s.n_heads * hd, s.hidden}, ws, 0.0f, true);
    if (s.arch == "qwen2" || s.arch == "qwen2moe") {
      add(p + "attn_q.bias", {s.n_heads * hd}, 0.1f, 0.0f, false);
      add(p + "attn_k.bias", {s.n_kv_heads * hd}, 0.1f, 0.0f, false);
      add(p + "attn_v.bias", {s.n_kv_heads * hd}, 0.1f, 0.0f, false);
    }
    if (s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "gemma3") {
      add(p + "attn_q_norm.weight", {hd}, 0.1f, 1.0f, false);
      add(p + "attn_k_norm.weight", {hd}, 0.1f, 1.0f, false);
    }
    if (gemma) add(p + "post_attention_norm.weight", {s.hidden}, 0.1f, 1.0f, false);
    add(p + "ffn_norm.weight", {s.hidden}, 0.1f, 1.0f, false);
    if (s.n_experts > 0) {
      // The router stays F32, as llama.cpp's quantizer leaves it.
      add(p + "ffn_gate_inp.weight", {s.hidden, s.n_experts}, s.router_scale * ws, 0.0f, false);
      auto split = [&](const char* kind) { return s.split_experts ? p + kind + ".{}.weight" : std::string(); };
      add(p + "ffn_gate_exps.weight", {s.hidden, expert_ffn, s.n_experts}, ws, 0.0f, true, false, split("ffn_gate"));
      add(p + "ffn_up_exps.weight", {s.hidden, expert_ffn, s.n_experts}, ws, 0.0f, true, false, split("ffn_up"));
      add(p + "ffn_down_exps.weight", {expert_ffn, s.hidden, s.n_experts},
          1.0f / std::sqrt(static_cast<float>(expert_ffn)), 0.0f, true, false, split("ffn_down"));
      if (s.arch == "qwen2moe") {
        add(p + "ffn_gate_inp_shexp.weight", {s.hidden}, ws, 0.0f, false);
        add(p + "ffn_gate_shexp.weight", {s.hidden, shared_ffn}, ws, 0.0f, true);
        add(p + "ffn_up_shexp.weight", {s.hidden, shared_ffn}, ws, 0.0f, true);
        add(p + "ffn_down_shexp.weight", {shared_ffn, s.hidden}, 1.0f / std::sqrt(static_cast<float>(shared_ffn)),
            0.0f, true);
      }
    } else if (phi3) {
      add(p + "ffn_up.weight", {s.hidden, 2 * s.ffn}, ws, 0.0f, true);  // gate rows, then up rows
    } else {
      add(p + "ffn_gate.weight", {s.hidden, s.ffn}, ws, 0.0f, true);
      add(p + "ffn_up.weight", {s.hidden, s.ffn}, ws, 0.0f, true);
    }
    if (gemma) add(p + "post_ffw_norm.weight", {s.hidden}, 0.1f, 1.0f, false);
    if (s.n_experts > 0) continue;
    add(p + "ffn_down.weight", {s.ffn, s.hidden}, 1.0f / std::sqrt(static_cast<float>(s.ffn)), 0.0f, true,
        UseMoreBits(l, s.n_layers));
  }
  KVS_RETURN_IF_ERROR(w.WriteFile(path));
  if (!twin_path.empty()) KVS_RETURN_IF_ERROR(twin.WriteFile(twin_path));
  return Status::Ok();
}

}  // namespace kvs::model
