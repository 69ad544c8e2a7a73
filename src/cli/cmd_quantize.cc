// `kvserve quantize IN.gguf OUT.gguf TYPE`: rewrites a model with its weight
// matrices in TYPE (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K or the Q4_K_M mix).
// Metadata is copied; vectors (norms, biases) and MoE routers stay as they
// are; expert tensors are converted row by row; tensors whose row length is
// not a multiple of the target block size are kept as they are.
#include <cstdio>
#include <cstring>

#include "cli/command.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/random_model.h"

namespace kvs::cli {
namespace {

// llama.cpp's general.file_type numbers.
int FileType(DType t, bool q4km) {
  if (q4km) return 15;
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;  // Q3_K_S
    case DType::kQ4_K: return 14;  // Q4_K_S
    case DType::kQ5_K: return 16;  // Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kIQ4_NL: return 25;
    case DType::kIQ4_XS: return 30;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

int LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

int Quantize(const std::string& in, const std::string& out, const std::string& type_name) {
  const bool q4km = type_name == "Q4_K_M" || type_name == "q4_k_m";
  auto target = q4km ? std::optional<DType>(DType::kQ4_K) : DTypeFromName(type_name);
  if (!target || !kernels::CanQuantize(*target)) {
    std::fprintf(stderr, "error: unsupported type '%s' (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, "
                 "Q4_K, Q5_K, Q6_K, Q4_K_M)\n",
                 type_name.c_str());
    return 2;
  }
  auto f = gguf::GgufFile::Open(in);
  if (!f.ok()) {
    std::fprintf(stderr, "error: %s\n", f.status().ToString().c_str());
    return 1;
  }
  gguf::GgufWriter w;
  w.SetAlignment((*f)->alignment());
  int64_t n_layers = 0;
  for (const auto& kv : (*f)->metadata()) {
    if (kv.key == "general.file_type") continue;
    if (kv.key.size() > 12 && kv.key.ends_with(".block_count")) n_layers = kv.value.AsInt().value_or(0);
    w.Add(kv.key, kv.value);
  }
  w.AddUint32("general.file_type", static_cast<uint32_t>(FileType(*target, q4km)));
  uint64_t in_bytes = 0, out_bytes = 0;
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    in_bytes += t.nbytes;
    DType to = t.type;
    // Matrices, and the 3-D expert tensors of MoE models row by row; the
    // expert router (ffn_gate_inp) stays as it is, as llama.cpp keeps it.
    const bool matrix = (t.dims.size() == 2 || t.dims.size() == 3) && t.name.ends_with(".weight") &&
                        t.name.find("ffn_gate_inp") == std::string::npos;
    if (matrix) {
      to = *target;
      if (q4km) {
        const int layer = LayerOf(t.name);
        const bool more = t.name == "output.weight" ||
                          ((t.name.find("attn_v") != std::string::npos || t.name.find("ffn_down") != std::string::npos) &&
                           layer >= 0 && model::UseMoreBits(layer, static_cast<int>(n_layers)));
        if (more) to = DType::kQ6_K;
      }
      if (t.dims[0] % Traits(to).block_size != 0) to = t.type;  // cannot be blocked: keep
    }
    if (!kernels::CanQuantize(t.type) && to != t.type) {
      std::fprintf(stderr, "error: tensor %s has type %s, which cannot be converted\n", t.name.c_str(), DTypeName(t.type));
      return 1;
    }
    std::vector<uint8_t> data;
    if (to == t.type) {
      data.assign(t.data, t.data + t.nbytes);
    } else {
      const int64_t cols = t.dims[0], rows = t.Rows();
      std::vector<float> row(static_cast<size_t>(cols));
      data.resize(static_cast<size_t>(RowBytes(to, cols) * rows));
      for (int64_t r = 0; r < rows; ++r) {
        kernels::DequantizeRow(t.type, t.data + r * RowBytes(t.type, cols), row.data(), cols);
        kernels::QuantizeRow(to, row.data(), data.data() + r * RowBytes(to, cols), cols);
      }
    }
    out_bytes += data.size();
    std::fprintf(stderr, "%-32s %-6s -> %-6s\n", t.name.c_str(), DTypeName(t.type), DTypeName(to));
    w.AddTensor(t.name, to, t.dims, std::move(data));
  }
  Status s = w.WriteFile(out);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: tensors %.2f MiB -> %.2f MiB\n", out.c_str(), in_bytes / 1048576.0,
               out_bytes / 1048576.0);
  return 0;
}

const Registrar kRegister_quantize({"quantize", "Convert a model's weight matrices to another type", [](CLI::App* app) {
                 struct Opts { std::string in, out, type; };
                 auto o = std::make_shared<Opts>();
                 app->add_option("input", o->in, "Input GGUF")->required();
                 app->add_option("output", o->out, "Output GGUF")->required();
                 app->add_option("type", o->type, "F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or Q4_K_M")->required();
                 return [o] { return Quantize(o->in, o->out, o->type); };
               }});

}  // namespace
}  // namespace kvs::cli
