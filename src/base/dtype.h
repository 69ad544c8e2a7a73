// Tensor element types, numbered as GGUF/ggml numbers them (the ids are part
// of the file format). Quantized types store `block_size` elements in
// `type_size` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct DTypeTraits {
  const char* name;   // "F32", "Q4_K", ... as llama.cpp prints them
  int64_t block_size; // elements per block (1 for plain types)
  int64_t type_size;  // bytes per block
  bool supported;     // kvserve can compute with it
};

// Traits for a known id, nullopt for an id this build does not know.
std::optional<DTypeTraits> GetDTypeTraits(uint32_t id);
const DTypeTraits& Traits(DType t);  // t must be a known id
inline const char* DTypeName(DType t) { return Traits(t).name; }
std::optional<DType> DTypeFromName(std::string_view name);  // case-insensitive

// Bytes for a row of n elements; n must be a multiple of the block size.
inline int64_t RowBytes(DType t, int64_t n) {
  const DTypeTraits& tr = Traits(t);
  return n / tr.block_size * tr.type_size;
}

}  // namespace kvs
