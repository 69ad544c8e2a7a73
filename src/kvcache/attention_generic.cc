// Portable instantiation of the tiled attention kernel: an 8-lane "vector"
// of plain floats (the compiler vectorises what the baseline ISA allows).
// The fallback for CPUs without AVX2, and the same tiling logic the SIMD
// variants run, testable on any machine.
#include <cmath>

#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {
namespace {

struct VGeneric {
  struct R {
    float v[8];
  };
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  template <typename F>
  static R Map(F f) {
    R r;
    for (int i = 0; i < 8; ++i) r.v[i] = f(i);
    return r;
  }
  static R Zero() { return Set1(0.0f); }
  static R Load(const float* p) { return Map([&](int i) { return p[i]; }); }
  static void Store(float* p, R a) { for (int i = 0; i < 8; ++i) p[i] = a.v[i]; }
  static R Set1(float x) { return Map([&](int) { return x; }); }
  static R Fma(R a, R b, R c) { return Map([&](int i) { return a.v[i] * b.v[i] + c.v[i]; }); }
  static R Mul(R a, R b) { return Map([&](int i) { return a.v[i] * b.v[i]; }); }
  static R Add(R a, R b) { return Map([&](int i) { return a.v[i] + b.v[i]; }); }
  static R Sub(R a, R b) { return Map([&](int i) { return a.v[i] - b.v[i]; }); }
  static R Max(R a, R b) { return Map([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; }); }
  static R SelectGreater(R a, R b, R x, R y) { return Map([&](int i) { return a.v[i] > b.v[i] ? x.v[i] : y.v[i]; }); }
  static float ReduceMax(R a) {
    float m = a.v[0];
    for (int i = 1; i < 8; ++i) m = a.v[i] > m ? a.v[i] : m;
    return m;
  }
  static float ReduceAdd(R a) {
    float s = 0.0f;
    for (float x : a.v) s += x;
    return s;
  }
  static void Sum4(R a, R b, R c, R d, float* out) {
    out[0] = ReduceAdd(a);
    out[1] = ReduceAdd(b);
    out[2] = ReduceAdd(c);
    out[3] = ReduceAdd(d);
  }
  static R Exp2(R x) { return Map([&](int i) { return std::exp2(x.v[i]); }); }
  static float HalfToFloat(uint16_t h) { return ::kvs::F16ToF32(h); }
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

}  // namespace

KernelInfo KernelGeneric() { return MakeKernel<VGeneric>("generic"); }

}  // namespace kvs::kvcache::internal
