#include "model/config.h"

#include <fmt/format.h>

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
  if (!(rms_eps > 0.0f) || !(rope_base > 0.0f) || !(rope_scale > 0.0f)) {
    return InvalidArgument("rms epsilon, rope.freq_base and rope scale must be positive");
  }
  return Status::Ok();
}

std::string ModelConfig::Describe() const {
  return fmt::format("{} '{}': {} layers, hidden {}, ffn {}, heads {}/{} (kv), head_dim {}, vocab {}, ctx {}, "
                     "rope {} base {} dim {}{}{}{}",
                     arch, name, n_layers, hidden, ffn, n_heads, n_kv_heads, head_dim, vocab, context_length,
                     rope_type == RopeType::kNeox ? "neox" : "normal", rope_base, rope_dim,
                     qkv_bias ? ", qkv bias" : "", qk_norm ? ", qk norm" : "", tied_embeddings ? ", tied" : "");
}

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
  KVS_ASSIGN_OR_RETURN(c.rope_scaling, f.GetStringOr(a + "rope.scaling.type", "none"));
  if (c.rope_scaling == "linear") {
    KVS_ASSIGN_OR_RETURN(double factor, f.GetFloatOr(a + "rope.scaling.factor", 1.0));
    c.rope_scale = static_cast<float>(factor);
  }
  c.rope_type = c.arch == "llama" ? RopeType::kNormal : RopeType::kNeox;
  c.qkv_bias = c.arch == "qwen2";
  c.qk_norm = c.arch == "qwen3";
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
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
    return Unimplemented("model architecture '{}' is not supported (supported: llama, qwen2, qwen3)", arch);
  }
  KVS_ASSIGN_OR_RETURN(ModelConfig c, ReadGguf(f));
  if (c.value_head_dim != c.head_dim) {
    return Unimplemented("attention.value_length {} != key_length {}", c.value_head_dim, c.head_dim);
  }
  if (c.rope_scaling != "none" && c.rope_scaling != "" && c.rope_scaling != "linear" && c.rope_scaling != "llama3") {
    // llama3 scaling arrives as the rope_freqs.weight tensor (per-dim factors).
    return Unimplemented("rope.scaling.type '{}' is not supported (none, linear, llama3)", c.rope_scaling);
  }
  return c;
}

}  // namespace kvs::model
