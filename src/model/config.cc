#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace kvs::model {

Status ModelConfig::Validate() const {
  auto positive = [](const char* what, int64_t v) -> Status {
    if (v <= 0) return InvalidArgument("model {} must be positive, got {}", what, v);
    return Status::Ok();
  };
  KVS_RETURN_IF_ERROR(positive("block_count", n_layers));
  KVS_RETURN_IF_ERROR(positive("embedding_length", hidden));
  KVS_RETURN_IF_ERROR(positive("feed_forward_length", ffn));
  KVS_RETURN_IF_ERROR(positive("attention.head_count", n_heads));
  KVS_RETURN_IF_ERROR(positive("attention.head_count_kv", n_kv_heads));
  KVS_RETURN_IF_ERROR(positive("head dimension", head_dim));
  KVS_RETURN_IF_ERROR(positive("vocabulary size", vocab));
  if (n_heads % n_kv_heads != 0) {
    return InvalidArgument("attention.head_count ({}) must be a multiple of attention.head_count_kv ({})",
                           n_heads, n_kv_heads);
  }
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    return InvalidArgument("rope.dimension_count {} must be even and in (0, head_dim = {}]", rope_dim, head_dim);
  }
  if (!(rms_eps > 0.0f) || !(rope_base > 0.0f) || !(rope_scale > 0.0f) || !(rope_attn_factor > 0.0f)) {
    return InvalidArgument("rms epsilon, rope.freq_base, rope scale and rope.scaling.attn_factor must be positive");
  }
  if (n_experts > 0) {
    if (n_experts_used <= 0 || n_experts_used > n_experts) {
      return InvalidArgument("expert_used_count {} must be in [1, expert_count = {}]", n_experts_used, n_experts);
    }
    KVS_RETURN_IF_ERROR(positive("expert_feed_forward_length", expert_ffn));
  }
  if (rope_orig_ctx <= 0) {
    return InvalidArgument("rope.scaling.original_context_length must be positive, got {}", rope_orig_ctx);
  }
  return Status::Ok();
}

LayerRange StageLayers(int32_t n_layers, int stages, int stage) {
  const int32_t base = n_layers / stages, extra = n_layers % stages;
  return {stage * base + std::min<int32_t>(stage, extra), base + (stage < extra ? 1 : 0)};
}

Status ModelConfig::CheckPipeline(int stages) const {
  if (stages < 1) return InvalidArgument("pipeline_parallel must be at least 1, got {}", stages);
  if (stages == 1) return Status::Ok();
  if (n_layers < stages) {
    return InvalidArgument("pipeline_parallel {}: the model has {} layers, fewer than the stages", stages, n_layers);
  }
  // Every stage keeps the engine's KV groups: the global layers' blocks and,
  // with sliding layers, the window's (their ids are rank 0's). A stage
  // therefore needs layers of each kind the whole model has.
  const int32_t sliding = NumSlidingLayers();
  if (sliding > 0 && sliding < n_layers) {
    for (int s = 0; s < stages; ++s) {
      const LayerRange r = StageLayers(n_layers, stages, s);
      int32_t n = 0;
      for (int32_t l = r.first; l < r.first + r.count; ++l) n += IsSliding(l) ? 1 : 0;  // the whole model's config: first_layer 0
      if (n == 0 || n == r.count) {
        return InvalidArgument(
            "pipeline_parallel {}: stage {} (layers {}-{}) would hold only {} layers, but every stage needs both "
            "kinds of the model's layers (sliding-window and global): use fewer stages",
            stages, s, r.first, r.first + r.count - 1, n == 0 ? "global" : "sliding-window");
      }
    }
  }
  return Status::Ok();
}

bool KvHeadsShareable(int64_t kv_heads, int64_t ranks) {
  return kv_heads >= ranks ? kv_heads % ranks == 0 : ranks % kv_heads == 0;
}

int64_t KvHeadsPerRank(int64_t kv_heads, int64_t ranks) { return kv_heads >= ranks ? kv_heads / ranks : 1; }

Status ModelConfig::CheckTensorParallel(int n) const {
  if (n < 1) return InvalidArgument("tensor_parallel must be at least 1, got {}", n);
  if (n == 1) return Status::Ok();
  if (is_moe()) return InvalidArgument("tensor_parallel {}: mixture-of-experts models are not sharded yet", n);
  if (!KvHeadsShareable(n_kv_heads, n)) {
    return InvalidArgument("tensor_parallel {}: the model has {} KV heads, which {} ranks cannot share evenly "
                           "(each rank holds whole KV heads: use a divisor of {}, or a multiple of it to "
                           "replicate each KV head)",
                           n, n_kv_heads, n, n_kv_heads);
  }
  if (n_heads % n != 0) {
    return InvalidArgument("tensor_parallel {}: the model has {} attention heads, which {} ranks cannot share evenly",
                           n, n_heads, n);
  }
  if (ffn % n != 0) {
    return InvalidArgument("tensor_parallel {}: the FFN width {} does not divide by {}", n, ffn, n);
  }
  if (vocab < n) return InvalidArgument("tensor_parallel {}: the vocabulary has only {} tokens", n, vocab);
  return Status::Ok();
}

int32_t ModelConfig::ShardKvHeads(int n) const { return static_cast<int32_t>(KvHeadsPerRank(n_kv_heads, n)); }

int32_t ModelConfig::ShardKvHead(int rank, int n) const {
  return n_kv_heads >= n ? rank * ShardKvHeads(n) : rank / (n / n_kv_heads);
}

ModelConfig::Rows ModelConfig::ShardVocab(int rank, int n) const {
  const int64_t per = (int64_t{vocab} + n - 1) / n;
  const int64_t first = std::min<int64_t>(vocab, per * rank);
  return {first, std::min<int64_t>(per, vocab - first)};
}

int32_t ModelConfig::NumSlidingLayers() const {
  int32_t n = 0;
  for (int32_t l = 0; l < n_layers; ++l) n += IsSliding(l);
  return n;
}

float ModelConfig::AttentionScale() const {
  return query_scale > 0.0f ? query_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::string ModelConfig::Describe() const {
  return fmt::format("{} '{}': {} layers, hidden {}, ffn {}, heads {}/{} (kv), head_dim {}, vocab {}, ctx {}, "
                     "rope {} base {} dim {} scaling {} x{}{}{}{}{}{}",
                     arch, name, n_layers, hidden, ffn, n_heads, n_kv_heads, head_dim, vocab, context_length,
                     rope_type == RopeType::kNeox ? "neox" : "normal", rope_base, rope_dim,
                     longrope ? "longrope" : rope_scaling.empty() ? "none" : rope_scaling, rope_scale,
                     qkv_bias ? ", qkv bias" : "", qk_norm ? ", qk norm" : "", tied_embeddings ? ", tied" : "",
                     sliding_window > 0 ? fmt::format(", window {} on {}/{} layers", sliding_window,
                                                      NumSlidingLayers(), n_layers)
                                        : "",
                     n_experts > 0 ? fmt::format(", {} of {} experts of ffn {}{}", n_experts_used, n_experts, expert_ffn,
                                                 shared_ffn > 0 ? fmt::format(" + shared {}", shared_ffn) : "")
                                   : "");
}

namespace {

// The keys and defaults that differ by architecture, as llama.cpp's
// per-architecture loaders read them.
Status ReadArchitectureKeys(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  auto get_float = [&](const std::string& key, float& out) -> Status {
    KVS_ASSIGN_OR_RETURN(double v, f.GetFloatOr(a + key, out));
    out = static_cast<float>(v);
    return Status::Ok();
  };
  auto get_int = [&](const std::string& key, int32_t& out) -> Status {
    KVS_ASSIGN_OR_RETURN(int64_t v, f.GetIntOr(a + key, out));
    if (v < 0 || v > (1 << 30)) return InvalidArgument("{}{} = {} is out of range", a, key, v);
    out = static_cast<int32_t>(v);
    return Status::Ok();
  };
  const float freq_scale = c.rope_scaling == "none" ? 1.0f : 1.0f / c.rope_scale;
  KVS_RETURN_IF_ERROR(get_int("expert_count", c.n_experts));
  if (c.n_experts > 0) {
    const bool qwen_moe = c.arch == "qwen3moe" || c.arch == "qwen2moe";
    KVS_RETURN_IF_ERROR(get_int("expert_used_count", c.n_experts_used));
    // llama.cpp: qwen*moe default to ffn / used, Mixtral's experts are ffn wide.
    c.expert_ffn = qwen_moe && c.n_experts_used > 0 ? c.ffn / c.n_experts_used : c.ffn;
    KVS_RETURN_IF_ERROR(get_int("expert_feed_forward_length", c.expert_ffn));
    if (c.arch == "qwen2moe") {
      c.shared_ffn = c.ffn;
      KVS_RETURN_IF_ERROR(get_int("expert_shared_feed_forward_length", c.shared_ffn));
    }
    c.norm_topk = c.arch != "qwen2moe";
  }
  if (c.arch == "llama") {
    // Mistral 7B v0.1 (4096). llama.cpp ignores this key for `llama` and
    // attends to everything: the two differ past the window.
    KVS_RETURN_IF_ERROR(get_int("attention.sliding_window", c.sliding_window));
    c.swa_pattern = 0;
    c.rope_base_swa = c.rope_base;
    c.rope_scale_swa = c.rope_scaling == "none" ? 1.0f : c.rope_scale;
  } else if (c.arch == "gemma2" || c.arch == "gemma3") {
    const bool g2 = c.arch == "gemma2";
    c.gelu_ffn = c.embed_scale = c.post_norms = true;
    if (g2) {
      c.sliding_window = 4096;
      c.swa_pattern = 2;
      c.attn_softcap = 50.0f;
      c.final_softcap = 30.0f;
      c.rope_base_swa = c.rope_base;
      c.rope_scale_swa = 1.0f / freq_scale;
      KVS_RETURN_IF_ERROR(get_float("attn_logit_softcapping", c.attn_softcap));
    } else {
      c.swa_pattern = 6;
      c.rope_base_swa = 10000.0f;
      c.rope_scale_swa = 1.0f;
    }
    KVS_RETURN_IF_ERROR(get_int("attention.sliding_window", c.sliding_window));
    // A period, or (as llama.cpp also reads it) one bool per layer.
    const gguf::Value* pattern = f.Find(a + "attention.sliding_window_pattern");
    if (const gguf::Array* arr = pattern != nullptr ? pattern->AsArray() : nullptr) {
      if (static_cast<int64_t>(arr->items.size()) != c.n_layers) {
        return InvalidArgument("{}attention.sliding_window_pattern has {} entries for {} layers", a, arr->items.size(),
                               c.n_layers);
      }
      for (const gguf::Value& v : arr->items) {
        const std::optional<bool> b = v.AsBool();
        if (!b) return InvalidArgument("{}attention.sliding_window_pattern must hold booleans", a);
        c.swa_layers.push_back(*b ? 1 : 0);
      }
    } else {
      KVS_RETURN_IF_ERROR(get_int("attention.sliding_window_pattern", c.swa_pattern));
    }
    KVS_RETURN_IF_ERROR(get_float("rope.freq_base_swa", c.rope_base_swa));
    KVS_RETURN_IF_ERROR(get_float("final_logit_softcapping", c.final_softcap));
    // The 27B models scale queries by 1/sqrt(hidden / heads), the others
    // by 1/sqrt(head_dim) (llama.cpp tells them by their layer count).
    const bool is_27b = c.n_layers == (g2 ? 46 : 62);
    c.query_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.hidden / c.n_heads : c.head_dim));
  }
  // Written so that NaN fails too (the attention kernels CHECK these).
  if (!(c.attn_softcap >= 0.0f) || !(c.final_softcap >= 0.0f) || !std::isfinite(c.attn_softcap) ||
      !std::isfinite(c.final_softcap) || !(c.rope_base_swa > 0.0f) || !(c.rope_scale_swa > 0.0f)) {
    return InvalidArgument("{}: soft-capping must be finite and not negative, rope.freq_base_swa positive", c.arch);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::ReadGguf(const gguf::GgufFile& f) {
  ModelConfig c;
  KVS_ASSIGN_OR_RETURN(c.arch, f.GetString("general.architecture"));
  KVS_ASSIGN_OR_RETURN(c.name, f.GetStringOr("general.name", ""));
  const std::string a = c.arch + ".";
  auto get_int = [&](const std::string& key, int32_t& out) -> Status {
    KVS_ASSIGN_OR_RETURN(int64_t v, f.GetInt(a + key));
    if (v <= 0 || v > (1 << 30)) return InvalidArgument("{}{} = {} is out of range", a, key, v);
    out = static_cast<int32_t>(v);
    return Status::Ok();
  };
  KVS_RETURN_IF_ERROR(get_int("block_count", c.n_layers));
  KVS_RETURN_IF_ERROR(get_int("embedding_length", c.hidden));
  KVS_RETURN_IF_ERROR(get_int("feed_forward_length", c.ffn));
  KVS_RETURN_IF_ERROR(get_int("attention.head_count", c.n_heads));
  KVS_ASSIGN_OR_RETURN(int64_t kvh, f.GetIntOr(a + "attention.head_count_kv", c.n_heads));
  c.n_kv_heads = static_cast<int32_t>(kvh);
  if (c.hidden % c.n_heads != 0 && f.Find(a + "attention.key_length") == nullptr) {
    return InvalidArgument("embedding_length {} is not a multiple of head_count {}", c.hidden, c.n_heads);
  }
  KVS_ASSIGN_OR_RETURN(int64_t hd, f.GetIntOr(a + "attention.key_length", c.hidden / c.n_heads));
  c.head_dim = static_cast<int32_t>(hd);
  KVS_ASSIGN_OR_RETURN(int64_t vhd, f.GetIntOr(a + "attention.value_length", hd));
  c.value_head_dim = static_cast<int32_t>(vhd);
  KVS_ASSIGN_OR_RETURN(int64_t ctx, f.GetIntOr(a + "context_length", 2048));
  c.context_length = static_cast<int32_t>(ctx);
  KVS_ASSIGN_OR_RETURN(double eps, f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rms_eps = static_cast<float>(eps);
  KVS_ASSIGN_OR_RETURN(double base, f.GetFloatOr(a + "rope.freq_base", 10000.0));
  c.rope_base = static_cast<float>(base);
  KVS_ASSIGN_OR_RETURN(int64_t rdim, f.GetIntOr(a + "rope.dimension_count", c.head_dim));
  c.rope_dim = static_cast<int32_t>(rdim);
  // No type reads as llama.cpp reads it: linear, by rope.scaling.factor
  // when present (kept as "" so that the file's word is shown).
  KVS_ASSIGN_OR_RETURN(c.rope_scaling, f.GetStringOr(a + "rope.scaling.type", ""));
  if (c.rope_scaling == "linear" || c.rope_scaling == "yarn" || c.rope_scaling.empty()) {
    // rope.scaling.factor, else the older rope.scale_linear; 0 means 1.
    KVS_ASSIGN_OR_RETURN(double old_factor, f.GetFloatOr(a + "rope.scale_linear", 0.0));
    KVS_ASSIGN_OR_RETURN(double factor, f.GetFloatOr(a + "rope.scaling.factor", old_factor));
    c.rope_scale = factor == 0.0 ? 1.0f : static_cast<float>(factor);
  }
  KVS_ASSIGN_OR_RETURN(int64_t orig, f.GetIntOr(a + "rope.scaling.original_context_length", c.context_length));
  c.rope_orig_ctx = static_cast<int32_t>(orig);
  KVS_ASSIGN_OR_RETURN(double attn_factor, f.GetFloatOr(a + "rope.scaling.attn_factor", 1.0));
  c.rope_attn_factor = static_cast<float>(attn_factor);
  KVS_ASSIGN_OR_RETURN(double log_mul, f.GetFloatOr(a + "rope.scaling.yarn_log_multiplier", 0.0));
  c.yarn_log_mul = static_cast<float>(log_mul);
  if (!std::isfinite(c.rope_scale) || !std::isfinite(c.rope_attn_factor) || !std::isfinite(c.yarn_log_mul)) {
    return InvalidArgument("{}rope.scaling factors must be finite", a);
  }
  c.longrope = f.FindTensor("rope_factors_long.weight") != nullptr || f.FindTensor("rope_factors_short.weight") != nullptr;
  c.rope_type = c.arch == "llama" ? RopeType::kNormal : RopeType::kNeox;
  c.qkv_bias = c.arch == "qwen2" || c.arch == "qwen2moe";
  c.qk_norm = c.arch == "qwen3" || c.arch == "qwen3moe" || c.arch == "gemma3";
  c.fused_qkv = f.FindTensor("blk.0.attn_qkv.weight") != nullptr;
  c.fused_gate_up = c.arch == "phi3";
  KVS_RETURN_IF_ERROR(ReadArchitectureKeys(f, c));
  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return InvalidArgument("tensor token_embd.weight is missing");
  if (emb->dims.size() != 2) return InvalidArgument("token_embd.weight must be 2-D");
  c.vocab = static_cast<int32_t>(emb->dims[1]);
  c.tied_embeddings = f.FindTensor("output.weight") == nullptr;
  KVS_RETURN_IF_ERROR(c.Validate());
  return c;
}

StatusOr<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& f) {
  KVS_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  static constexpr const char* kArchs[] = {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "qwen3moe",
                                           "qwen2moe"};
  if (std::find(std::begin(kArchs), std::end(kArchs), arch) == std::end(kArchs)) {
    return Unimplemented("model architecture '{}' is not supported (supported: llama, qwen2, qwen3, phi3, gemma2, "
                         "gemma3, qwen3moe, qwen2moe)", arch);
  }
  KVS_ASSIGN_OR_RETURN(int64_t experts, f.GetIntOr(arch + ".expert_count", 0));
  if (experts > 0 && arch != "llama" && arch != "qwen3moe" && arch != "qwen2moe") {
    return Unimplemented("mixture-of-experts {} models ({}.expert_count = {}) are not supported (llama, qwen3moe, "
                         "qwen2moe are)", arch, arch, experts);
  }
  if (experts > 0) {
    // These architectures route by softmax over all experts (llama.cpp
    // ignores the keys for them); a file asking for anything else is refused
    // rather than run with the wrong router.
    KVS_ASSIGN_OR_RETURN(int64_t gating, f.GetIntOr(arch + ".expert_gating_func", 1));
    if (gating != 1) {
      static constexpr const char* kGatingNames[] = {"none", "softmax", "sigmoid", "softmax_weight", "sqrt_softplus"};
      const char* name = gating >= 0 && gating < 5 ? kGatingNames[gating] : "unknown";
      return Unimplemented("{}.expert_gating_func = {} ({}) is not supported: only softmax (1) expert gating is",
                           arch, gating, name);
    }
    KVS_ASSIGN_OR_RETURN(int64_t groups, f.GetIntOr(arch + ".expert_group_count", 0));
    if (groups > 1) return Unimplemented("{}.expert_group_count = {}: grouped expert selection is not supported",
                                         arch, groups);
    if (f.FindTensor("blk.0.ffn_gate_up_exps.weight") != nullptr) {
      return Unimplemented("merged expert tensors (blk.N.ffn_gate_up_exps) are not supported");
    }
  } else if (arch == "qwen3moe" || arch == "qwen2moe") {
    return InvalidArgument("{} model without {}.expert_count", arch, arch);
  }
  KVS_ASSIGN_OR_RETURN(ModelConfig c, ReadGguf(f));
  if (c.value_head_dim != c.head_dim) {
    return Unimplemented("attention.value_length {} != key_length {}", c.value_head_dim, c.head_dim);
  }
  // llama3 scaling arrives as the rope_freqs.weight tensor (per-dim
  // divisors), LongRoPE as rope_factors_short/long.weight (llama.cpp writes
  // no type, or `longrope`; HF's older name is `su`).
  static constexpr const char* kScalings[] = {"none", "", "linear", "llama3", "yarn", "longrope", "su"};
  if (std::find(std::begin(kScalings), std::end(kScalings), c.rope_scaling) == std::end(kScalings)) {
    return Unimplemented("rope.scaling.type '{}' is not supported (none, linear, llama3, yarn, longrope)",
                         c.rope_scaling);
  }
  return c;
}

}  // namespace kvs::model
