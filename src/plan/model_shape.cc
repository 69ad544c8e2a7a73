#include "plan/model_shape.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "base/strings.h"

namespace kvs::plan {
namespace {

struct FormatInfo {
  WeightFormat format;
  const char* name;
};
constexpr FormatInfo kFormats[] = {
    {WeightFormat::kF32, "f32"},   {WeightFormat::kF16, "f16"},   {WeightFormat::kBF16, "bf16"},
    {WeightFormat::kQ8_0, "q8_0"}, {WeightFormat::kQ6_K, "q6_k"}, {WeightFormat::kQ4_K_M, "q4_k_m"},
    {WeightFormat::kQ4_0, "q4_0"},
};

bool IsQuantized(WeightFormat f) {
  return f != WeightFormat::kF32 && f != WeightFormat::kF16 && f != WeightFormat::kBF16;
}

// Calls fn(rows, cols, is_matrix) for every weight tensor of the shape.
template <typename Fn>
void ForEachTensor(const ModelShape& s, Fn&& fn) {
  const int64_t q_dim = s.heads * s.head_dim;
  const int64_t kv_dim = s.kv_heads * s.head_dim;
  fn(s.vocab, s.hidden, true);                         // token_embd
  if (!s.tied_embeddings) fn(s.vocab, s.hidden, true);  // output
  fn(1, s.hidden, false);                              // output_norm
  for (int64_t l = 0; l < s.layers; ++l) {
    fn(1, s.hidden, false);           // attn_norm
    fn(1, s.hidden, false);           // ffn_norm
    fn(q_dim, s.hidden, true);        // q
    fn(kv_dim, s.hidden, true);       // k
    fn(kv_dim, s.hidden, true);       // v
    fn(s.hidden, q_dim, true);        // o
    if (s.experts > 0) {
      fn(s.experts, s.hidden, false);                  // router (f32 in quantized files)
      fn(s.experts * s.expert_ffn, s.hidden, true);    // gate_exps
      fn(s.experts * s.expert_ffn, s.hidden, true);    // up_exps
      fn(s.experts * s.hidden, s.expert_ffn, true);    // down_exps
      if (s.shared_expert_ffn > 0) {
        fn(1, s.hidden, false);                        // gate_inp_shexp
        fn(s.shared_expert_ffn, s.hidden, true);       // gate_shexp
        fn(s.shared_expert_ffn, s.hidden, true);       // up_shexp
        fn(s.hidden, s.shared_expert_ffn, true);       // down_shexp
      }
    } else {
      fn(s.ffn, s.hidden, true);        // gate
      fn(s.ffn, s.hidden, true);        // up
      fn(s.hidden, s.ffn, true);        // down
    }
    if (s.qkv_bias) {
      fn(1, q_dim, false);
      fn(1, kv_dim, false);
      fn(1, kv_dim, false);
    }
    if (s.qk_norm) {
      fn(1, s.head_dim, false);
      fn(1, s.head_dim, false);
    }
  }
}

// Published shapes (config.json of each model). Parameter counts are
// computed from them and match the published totals.
ModelShape Preset(std::string name, std::string arch, int64_t layers, int64_t hidden, int64_t heads,
                  int64_t kv_heads, int64_t head_dim, int64_t ffn, int64_t vocab, bool tied,
                  int64_t max_context) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = std::move(arch);
  s.source = "preset";
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn = ffn;
  s.vocab = vocab;
  s.tied_embeddings = tied;
  s.qkv_bias = s.arch == "qwen2";
  s.qk_norm = s.arch == "qwen3" || s.arch == "qwen3moe";
  s.max_context = max_context;
  s.default_format = WeightFormat::kBF16;
  s.params = ParamsFromShape(s);
  s.active_params = ActiveParamsFromShape(s);
  return s;
}

ModelShape WithExperts(ModelShape s, int64_t experts, int64_t used, int64_t expert_ffn) {
  s.experts = experts;
  s.experts_used = used;
  s.expert_ffn = expert_ffn;
  s.params = ParamsFromShape(s);
  s.active_params = ActiveParamsFromShape(s);
  return s;
}

const std::vector<ModelShape>& Presets() {
  static const std::vector<ModelShape> presets = {
      Preset("Llama-3.1-8B", "llama", 32, 4096, 32, 8, 128, 14336, 128256, false, 131072),
      Preset("Llama-3.1-70B", "llama", 80, 8192, 64, 8, 128, 28672, 128256, false, 131072),
      Preset("Llama-3.2-1B", "llama", 16, 2048, 32, 8, 64, 8192, 128256, true, 131072),
      Preset("Llama-3.2-3B", "llama", 28, 3072, 24, 8, 128, 8192, 128256, true, 131072),
      Preset("Qwen2.5-7B", "qwen2", 28, 3584, 28, 4, 128, 18944, 152064, false, 131072),
      Preset("Qwen2.5-72B", "qwen2", 80, 8192, 64, 8, 128, 29568, 152064, false, 131072),
      Preset("Qwen3-8B", "qwen3", 36, 4096, 32, 8, 128, 12288, 151936, false, 40960),
      Preset("Mistral-7B-v0.3", "llama", 32, 4096, 32, 8, 128, 14336, 32768, false, 32768),
      // Mixture of experts: 30.5B / 3.3B active, 46.7B / 12.9B active.
      WithExperts(Preset("Qwen3-30B-A3B", "qwen3moe", 48, 2048, 32, 4, 128, 6144, 151936, false, 40960), 128, 8,
                  768),
      WithExperts(Preset("Mixtral-8x7B", "llama", 32, 4096, 32, 8, 128, 14336, 32000, false, 32768), 8, 2, 14336),
      // The project's own test shape (about 125M parameters).
      Preset("test-125m", "llama", 12, 768, 12, 4, 64, 2048, 32000, false, 4096),
  };
  return presets;
}

StatusOr<WeightFormat> FormatFromTorchDtype(const std::string& d) {
  const std::string l = AsciiLower(d);
  if (l == "bfloat16" || l == "bf16") return WeightFormat::kBF16;
  if (l == "float16" || l == "f16" || l == "half") return WeightFormat::kF16;
  if (l == "float32" || l == "f32" || l == "float") return WeightFormat::kF32;
  return InvalidArgument("unsupported torch_dtype \"{}\" (bfloat16, float16 or float32)", d);
}

}  // namespace

StatusOr<WeightFormat> ParseWeightFormat(std::string_view name) {
  const std::string l = AsciiLower(name);
  for (const FormatInfo& f : kFormats) {
    if (l == f.name) return f.format;
  }
  return InvalidArgument("unknown weights dtype \"{}\" (f32, f16, bf16, q8_0, q6_k, q4_k_m, q4_0)", name);
}

const char* WeightFormatName(WeightFormat f) {
  for (const FormatInfo& i : kFormats) {
    if (i.format == f) return i.name;
  }
  return "?";
}

const std::vector<WeightFormat>& AllWeightFormats() {
  static const std::vector<WeightFormat> all = [] {
    std::vector<WeightFormat> v;
    for (const FormatInfo& f : kFormats) v.push_back(f.format);
    return v;
  }();
  return all;
}

uint64_t MatrixBytes(WeightFormat f, int64_t rows, int64_t cols) {
  const uint64_t r = static_cast<uint64_t>(rows);
  const uint64_t c = static_cast<uint64_t>(cols);
  switch (f) {
    case WeightFormat::kF32: return r * c * 4;
    case WeightFormat::kF16:
    case WeightFormat::kBF16: return r * c * 2;
    case WeightFormat::kQ8_0: return r * CeilDiv(c, 32) * 34;
    case WeightFormat::kQ4_0: return r * CeilDiv(c, 32) * 18;
    case WeightFormat::kQ6_K: return r * CeilDiv(c, 256) * 210;
    case WeightFormat::kQ4_K_M: return CeilDiv(r * c * 97, 160);  // 4.85 bits per weight
  }
  return 0;
}

uint64_t VectorBytes(WeightFormat f, int64_t n) {
  const uint64_t bytes_per = IsQuantized(f) || f == WeightFormat::kF32 ? 4 : 2;
  return static_cast<uint64_t>(n) * bytes_per;
}

Status ValidateShape(const ModelShape& s) {
  const std::pair<const char*, int64_t> dims[] = {
      {"layers", s.layers}, {"hidden", s.hidden},     {"heads", s.heads}, {"kv_heads", s.kv_heads},
      {"head_dim", s.head_dim}, {"ffn", s.ffn},       {"vocab", s.vocab}, {"max_context", s.max_context},
  };
  for (const auto& [name, v] : dims) {
    if (v <= 0) return InvalidArgument("model {}: {} must be positive, got {}", s.name, name, v);
    if (v > (int64_t{1} << 31)) return InvalidArgument("model {}: {} = {} is implausibly large", s.name, name, v);
  }
  if (s.heads % s.kv_heads != 0) {
    return InvalidArgument("model {}: {} heads are not a multiple of {} KV heads", s.name, s.heads, s.kv_heads);
  }
  if (s.experts < 0 || s.experts > 4096 || (s.experts > 0 && (s.experts_used <= 0 || s.experts_used > s.experts ||
                                                              s.expert_ffn <= 0 || s.expert_ffn > (int64_t{1} << 31)))) {
    return InvalidArgument("model {}: {} experts, {} used, expert FFN {} is not a valid mixture of experts", s.name,
                           s.experts, s.experts_used, s.expert_ffn);
  }
  return Status::Ok();
}

int64_t ParamsFromShape(const ModelShape& s) {
  int64_t n = 0;
  ForEachTensor(s, [&](int64_t rows, int64_t cols, bool) { n += rows * cols; });
  return n;
}

int64_t ActiveParamsFromShape(const ModelShape& s) {
  if (s.experts <= 0) return ParamsFromShape(s);
  return ParamsFromShape(s) - s.layers * (s.experts - s.experts_used) * 3 * s.hidden * s.expert_ffn;
}

uint64_t WeightBytesFromShape(const ModelShape& s, WeightFormat f) {
  uint64_t bytes = 0;
  ForEachTensor(s, [&](int64_t rows, int64_t cols, bool is_matrix) {
    bytes += is_matrix ? MatrixBytes(f, rows, cols) : VectorBytes(f, rows * cols);
  });
  return bytes;
}

StatusOr<ModelShape> FindPreset(std::string_view name) {
  const std::string l = AsciiLower(name);
  for (const ModelShape& s : Presets()) {
    if (AsciiLower(s.name) == l) return s;
  }
  std::string known;
  for (const std::string& n : PresetNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown preset \"{}\" (known: {})", name, known);
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ModelShape& s : Presets()) names.push_back(s.name);
  return names;
}

namespace {

// The sliding-window fields of a config.json (see model_shape.h).
Status SlidingWindowFromHf(const nlohmann::json& j, const std::string& source, ModelShape& s) {
  auto it = j.find("sliding_window");
  int64_t window = s.arch == "gemma2" ? 4096 : 0;
  if (it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return InvalidArgument("{}: \"sliding_window\" is not a non-negative integer", source);
    }
    window = it->get<int64_t>();
  }
  if (window == 0 || s.arch == "phi3" || s.arch == "qwen2" || s.arch == "qwen3" || s.arch == "qwen2_moe" ||
      s.arch == "qwen3_moe") {
    return Status::Ok();
  }
  int64_t sliding = 0;
  auto types = j.find("layer_types");
  if (types != j.end() && types->is_array()) {
    for (const auto& t : *types) sliding += t.is_string() && t.get<std::string>() == "sliding_attention";
  } else if (s.arch == "gemma2" || s.arch == "gemma3") {
    const int64_t pattern = s.arch == "gemma2" ? 2 : j.value("sliding_window_pattern", int64_t{6});
    for (int64_t l = 0; l < s.layers; ++l) sliding += pattern <= 0 || l % pattern < pattern - 1;
  } else if (s.arch == "mistral" || s.arch == "llama") {
    sliding = s.layers;
  }
  if (sliding > 0) {
    s.sliding_window = window;
    s.sliding_layers = std::min(sliding, s.layers);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelShape> ShapeFromHfConfigText(std::string_view json_text, std::string source) {
  nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgument("{}: not a JSON object", source);
  }
  const nlohmann::json& j =
      root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;

  auto get_int = [&](const char* key, std::optional<int64_t> def) -> StatusOr<int64_t> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (def) return *def;
      return InvalidArgument("{}: missing \"{}\"", source, key);
    }
    if (!it->is_number_integer()) return InvalidArgument("{}: \"{}\" is not an integer", source, key);
    return it->get<int64_t>();
  };
  auto get_bool = [&](const char* key, bool def) -> StatusOr<bool> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_boolean()) return InvalidArgument("{}: \"{}\" is not a boolean", source, key);
    return it->get<bool>();
  };

  ModelShape s;
  s.source = source;
  s.arch = j.value("model_type", std::string("llama"));
  if (s.arch == "gemma3_text") s.arch = "gemma3";  // Gemma 3's text_config
  s.name = s.arch;
  if (root.contains("_name_or_path") && root["_name_or_path"].is_string()) {
    s.name = root["_name_or_path"].get<std::string>();
  }
  KVS_ASSIGN_OR_RETURN(s.layers, get_int("num_hidden_layers", std::nullopt));
  KVS_ASSIGN_OR_RETURN(s.hidden, get_int("hidden_size", std::nullopt));
  KVS_ASSIGN_OR_RETURN(s.heads, get_int("num_attention_heads", std::nullopt));
  KVS_ASSIGN_OR_RETURN(s.kv_heads, get_int("num_key_value_heads", s.heads));
  if (s.heads <= 0) return InvalidArgument("{}: num_attention_heads must be positive", source);
  KVS_ASSIGN_OR_RETURN(s.head_dim, get_int("head_dim", s.hidden / s.heads));
  KVS_ASSIGN_OR_RETURN(s.ffn, get_int("intermediate_size", std::nullopt));
  KVS_ASSIGN_OR_RETURN(s.vocab, get_int("vocab_size", std::nullopt));
  KVS_ASSIGN_OR_RETURN(s.max_context, get_int("max_position_embeddings", std::nullopt));
  // Gemma's configs leave tie_word_embeddings at transformers' default, true.
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3";
  KVS_ASSIGN_OR_RETURN(s.tied_embeddings, get_bool("tie_word_embeddings", gemma));
  KVS_ASSIGN_OR_RETURN(bool attention_bias, get_bool("attention_bias", s.arch == "qwen2" || s.arch == "qwen2_moe"));
  s.qkv_bias = attention_bias;
  s.qk_norm = s.arch == "qwen3" || s.arch == "qwen3_moe" || s.arch == "gemma3";
  // Experts: Qwen's num_experts, Mixtral's num_local_experts.
  KVS_ASSIGN_OR_RETURN(int64_t experts, get_int("num_experts", int64_t{0}));
  KVS_ASSIGN_OR_RETURN(s.experts, get_int("num_local_experts", experts));
  if (s.experts > 0) {
    KVS_ASSIGN_OR_RETURN(s.experts_used, get_int("num_experts_per_tok", std::nullopt));
    KVS_ASSIGN_OR_RETURN(s.expert_ffn, get_int("moe_intermediate_size", s.ffn));
    KVS_ASSIGN_OR_RETURN(s.shared_expert_ffn, get_int("shared_expert_intermediate_size", int64_t{0}));
  }
  KVS_RETURN_IF_ERROR(SlidingWindowFromHf(j, source, s));

  // Newer transformers write "dtype", older "torch_dtype".
  const char* dtype_key = j.contains("dtype") ? "dtype" : "torch_dtype";
  if (j.contains(dtype_key) && j[dtype_key].is_string()) {
    KVS_ASSIGN_OR_RETURN(s.default_format, FormatFromTorchDtype(j[dtype_key].get<std::string>()));
  }
  KVS_RETURN_IF_ERROR(ValidateShape(s));
  s.params = ParamsFromShape(s);
  s.active_params = ActiveParamsFromShape(s);
  return s;
}

StatusOr<ModelShape> ShapeFromHfConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return ShapeFromHfConfigText(text.str(), "hf-config " + path);
}

namespace {
// An expert FFN tensor: blk.N.ffn_{gate,up,down}_exps.weight (3-D, all
// experts), or blk.N.ffn_{gate,up,down}.E.weight (the old Mixtral layout,
// one tensor per expert).
bool IsExpertTensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos) return true;
  const size_t ffn = name.find(".ffn_");
  if (ffn == std::string::npos || name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) return false;
  const size_t dot = name.find('.', ffn + 5);
  if (dot == std::string::npos || dot + 1 >= name.size() - 7) return false;
  for (size_t i = dot + 1; i < name.size() - 7; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

StatusOr<ModelShape> ShapeFromGgufImpl(const gguf::GgufFile& f, const std::string& path) {
  // The model's own reader of hyper-parameters; the tensor table adds what
  // only the file knows (weight bytes, parameters, biases, norms).
  KVS_ASSIGN_OR_RETURN(const model::ModelConfig c, model::ModelConfig::ReadGguf(f));
  ModelShape s;
  s.source = "gguf " + path;
  s.arch = c.arch;
  s.name = c.name.empty() ? std::filesystem::path(path).stem().string() : c.name;
  s.layers = c.n_layers;
  s.hidden = c.hidden;
  s.heads = c.n_heads;
  s.kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.ffn = c.ffn;
  s.vocab = c.vocab;
  s.max_context = c.context_length;
  s.tied_embeddings = c.tied_embeddings;
  s.qkv_bias = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  s.qk_norm = f.FindTensor("blk.0.attn_q_norm.weight") != nullptr;
  s.sliding_window = c.sliding_window;
  s.sliding_layers = c.NumSlidingLayers();
  s.experts = c.n_experts;
  s.experts_used = c.n_experts_used;
  s.expert_ffn = c.expert_ffn;
  s.shared_expert_ffn = c.shared_ffn;
  if (s.experts > 0 && f.FindTensor("blk.0.ffn_gate_inp_shexp.weight") == nullptr) s.shared_expert_ffn = 0;

  std::map<std::string, uint64_t> bytes_by_type;
  int64_t unselected = 0;  // elements of the experts a token does not run
  for (const gguf::TensorInfo& t : f.tensors()) {
    s.params += t.NumElements();
    if (s.experts > 0 && IsExpertTensor(t.name)) {
      unselected += t.NumElements() / s.experts * (s.experts - s.experts_used);
    }
    s.file_weights_bytes += t.nbytes;
    bytes_by_type[DTypeName(t.type)] += t.nbytes;
  }
  if (s.file_weights_bytes == 0) return InvalidArgument("the file has no tensor data");
  auto commonest = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                    [](const auto& x, const auto& y) { return x.second < y.second; });
  s.file_weights_type = commonest->first;
  s.active_params = s.params - unselected;
  KVS_RETURN_IF_ERROR(ValidateShape(s));
  return s;
}
}  // namespace

StatusOr<ModelShape> ShapeFromGgufFile(const gguf::GgufFile& f, const std::string& path) {
  StatusOr<ModelShape> s = ShapeFromGgufImpl(f, path);
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

StatusOr<ModelShape> ShapeFromGguf(const std::string& path) {
  StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(path);
  if (!file.ok()) return file.status();  // names the path already
  return ShapeFromGgufFile(**file, path);
}

}  // namespace kvs::plan
