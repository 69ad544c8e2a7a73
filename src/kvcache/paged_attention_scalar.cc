// Scalar variant of the attention inner loop (reference and fallback).
#include "base/fp16.h"
#include "kvcache/paged_attention_impl.h"

namespace kvs::kvcache::internal {
namespace {

struct ScalarOps {
  static float Dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void Axpy(float w, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
  }
  static void Scale(float* y, float c, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= c;
  }
  static void F16ToF32(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ::kvs::F16ToF32(x[i]);
  }
  static void BF16ToF32(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = ::kvs::BF16ToF32(x[i]);
  }
  static void I8ToF32(const int8_t* x, float d, float* y) {
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(x[i]);
  }
};

void AttendScalarImpl(const AttendArgs& a) { AttendImpl<ScalarOps>(a); }

}  // namespace

AttendFn AttendScalar() { return &AttendScalarImpl; }

}  // namespace kvs::kvcache::internal
