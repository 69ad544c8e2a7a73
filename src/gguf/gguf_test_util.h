// Test helpers for the GGUF module: sample files built with GgufWriter, byte
// patching for malformed variants, and deep Value comparison. Test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace kvs::gguf::testing {

using Bytes = std::vector<uint8_t>;

// Offset of the first occurrence of `needle`; fails the test when absent.
inline size_t FindBytes(const Bytes& b, std::string_view needle) {
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << "needle not found: " << needle;
  return static_cast<size_t>(it - b.begin());
}

template <typename T>
void Patch(Bytes& b, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void PatchStr(Bytes& b, size_t at, std::string_view s) {
  ASSERT_LE(at + s.size(), b.size());
  std::memcpy(b.data() + at, s.data(), s.size());
}

// Pattern bytes so data round trips are meaningful.
inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// A small valid file: a few keys (one array) and two F32 tensors whose sizes
// are multiples of the alignment, so every strict prefix is invalid.
inline Bytes SmallFile() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.block_count", 2);
  w.AddFloat32("llama.rope.freq_base", 10000.0f);
  w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.Add("nested", Value::MakeArray(ValueType::kArray,
                                   {Value::MakeArray(ValueType::kInt8, {Value::Int(ValueType::kInt8, -1)})}));
  w.AddTensor("t0", DType::kF32, {8}, Pattern(32, 1));
  w.AddTensor("t1", DType::kF32, {8, 2}, Pattern(64, 2));
  return w.Serialize();
}

// Deep equality; NaNs equal each other (a float->double->float trip may
// quiet a signalling NaN, so bits are not compared for them).
inline bool SameValue(const Value& a, const Value& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const auto* x = std::get_if<double>(&a.v)) {
    const double y = std::get<double>(b.v);
    if (std::isnan(*x) || std::isnan(y)) return std::isnan(*x) && std::isnan(y);
    return std::memcmp(x, &y, sizeof(double)) == 0;  // tells 0.0 from -0.0
  }
  if (const auto* x = std::get_if<Array>(&a.v)) {
    const Array& y = std::get<Array>(b.v);
    if (x->elem_type != y.elem_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i) {
      if (!SameValue(x->items[i], y.items[i])) return false;
    }
    return true;
  }
  if (const auto* x = std::get_if<uint64_t>(&a.v)) return *x == std::get<uint64_t>(b.v);
  if (const auto* x = std::get_if<int64_t>(&a.v)) return *x == std::get<int64_t>(b.v);
  if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
  return std::get<std::string>(a.v) == std::get<std::string>(b.v);
}

// The GgufFile points into `b`, which must outlive it (hence no rvalues).
inline StatusOr<std::unique_ptr<GgufFile>> Parse(const Bytes& b) { return GgufFile::FromBuffer(b.data(), b.size()); }
StatusOr<std::unique_ptr<GgufFile>> Parse(Bytes&& b) = delete;

}  // namespace kvs::gguf::testing

// Asserts that parsing `bytes` fails with `code` and a message containing `substr`.
#define EXPECT_GGUF_ERROR(bytes_, code_, substr_)                                          \
  do {                                                                                      \
    auto _r = ::kvs::gguf::testing::Parse(bytes_);                                          \
    ASSERT_FALSE(_r.ok()) << "parsed a malformed file";                                     \
    EXPECT_EQ(_r.status().code(), (code_)) << _r.status().ToString();                       \
    EXPECT_NE(_r.status().message().find(substr_), std::string::npos) << _r.status().ToString(); \
  } while (0)
