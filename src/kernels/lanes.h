// Lane traits: the vocabulary the vectorised kernels are written in, so an
// algorithm is written once as a template over a traits type L and only the
// traits differ by instruction set. Users:
//   kernels/ops_impl.h       element-wise, normalisation, conversion and
//                            activation-quantization ops (instantiated in
//                            avx2_ops.cc and avx512_ops.cc)
//   kernels/lanes_ops.h      Exp, Exp2 and row conversions shared with
//                            kvcache's attention
//   kvcache/attention_*.h    the tiled attention kernel
//
// A traits type is a struct of static functions (no state):
//   R, kLanes, kRegisters    the float vector, its lane count and how many
//                            vector registers the ISA has (tiling uses it)
//   Zero Load Store Set1 Add Sub Mul Div Fma(a,b,c)=a*b+c Fnma(a,b,c)=c-a*b
//   Min Max Abs              Max(a, b)/Min(a, b) return b when either is NaN
//                            (x86 MAXPS/MINPS semantics; ArgMax relies on it)
//   RoundNearest RoundAway   to nearest-even / C roundf, as floats
//   ScalePow2(p, n)          p * 2^n for integral n in [-126, 127]
//   SelectGreater(a,b,x,y)   a > b ? x : y per lane
//   ReduceAdd ReduceMax Sum4 horizontal sums / maximum
//   EqBits(a, b)             bit i set when lane i of a == b
//   LoadPartial(p, n)        the first n lanes (0 < n < kLanes), the others
//   LoadPartialOr(p, n, f)   zero / taken from f; StorePartial(p, v, n)
//   AddPartial(a, b, n)      writes n lanes; AddPartial adds the first n lanes
//   LoadF16 LoadBF16 LoadI8  kLanes halves / bf16 / int8 widened to floats
//   StoreF16 StoreBF16       kLanes floats rounded as F32ToF16 / F32ToBF16
//   ...Partial(p, [v,] n)    the same for the first n lanes
//   HalfToFloat(h)           one f16 value
// and for activation quantization (ops_impl.h; not in GenericLanes):
//   I, Set1I32 AddI32 MinI32 CvttI32 ReduceAddI32
//   StoreI8x32(qs, q)        32 / kLanes vectors of int32 in [-128, 127]
//                            stored as 32 int8 in order
// Where an ISA has masks (AVX-512) the partial forms are masked loads and
// stores; otherwise they go through maskload or a small stack copy. Tails
// therefore run the same vector formula as full vectors, so an element's
// result does not depend on where a call's range ends (GatedMatMul relies on
// it for SiluMul).
//
// The ISA traits live in lanes_avx2.h / lanes_avx512.h, to be included only
// from sources compiled with those ISA flags; every member is always_inline,
// so no out-of-line copy compiled with one TU's flags can be linked into
// another's. GenericLanes below is portable (attention's fallback).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "base/fp16.h"

// Forces inlining, so the traits (compiled per ISA) never leave a weak
// out-of-line definition behind for the linker to pick from a TU built for
// another ISA.
#define KVS_LANE inline __attribute__((always_inline))

namespace kvs::kernels {

// Eight plain floats; the compiler vectorises what the baseline ISA allows.
// Float vocabulary only (no activation quantization). Not always_inline:
// it is compiled with the baseline flags wherever it is used, and forcing
// its Map loops inline changed GCC's inlining of the attention kernel.
struct GenericLanes {
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
  static void Store(float* p, R a) {
    for (int i = 0; i < 8; ++i) p[i] = a.v[i];
  }
  static R Set1(float x) { return Map([&](int) { return x; }); }
  static R Fma(R a, R b, R c) { return Map([&](int i) { return a.v[i] * b.v[i] + c.v[i]; }); }
  static R Fnma(R a, R b, R c) { return Map([&](int i) { return c.v[i] - a.v[i] * b.v[i]; }); }
  static R Mul(R a, R b) { return Map([&](int i) { return a.v[i] * b.v[i]; }); }
  static R Div(R a, R b) { return Map([&](int i) { return a.v[i] / b.v[i]; }); }
  static R Add(R a, R b) { return Map([&](int i) { return a.v[i] + b.v[i]; }); }
  static R Sub(R a, R b) { return Map([&](int i) { return a.v[i] - b.v[i]; }); }
  static R Max(R a, R b) { return Map([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; }); }
  static R Min(R a, R b) { return Map([&](int i) { return a.v[i] < b.v[i] ? a.v[i] : b.v[i]; }); }
  // For |x| < 2^22 (the callers' range: Exp/Exp2 clamp first); adding and
  // subtracting 1.5 * 2^23 rounds to nearest-even in plain SSE2, where
  // nearbyint would be a library call per lane.
  static R RoundNearest(R a) {
    return Map([&](int i) { return (a.v[i] + 12582912.0f) - 12582912.0f; });  // not folded without -ffast-math
  }
  static R ScalePow2(R p, R n) {  // via the exponent bits, as AVX2 (vectorisable)
    return Map([&](int i) { return p.v[i] * std::bit_cast<float>((static_cast<int32_t>(n.v[i]) + 127) << 23); });
  }
  static R SelectGreater(R a, R b, R x, R y) {
    return Map([&](int i) { return a.v[i] > b.v[i] ? x.v[i] : y.v[i]; });
  }
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
  static R LoadF16(const uint16_t* p) { return Map([&](int i) { return ::kvs::F16ToF32(p[i]); }); }
  static R LoadBF16(const uint16_t* p) { return Map([&](int i) { return ::kvs::BF16ToF32(p[i]); }); }
  static R LoadF16Partial(const uint16_t* p, int64_t n) {
    return Map([&](int i) { return i < n ? ::kvs::F16ToF32(p[i]) : 0.0f; });
  }
  static R LoadBF16Partial(const uint16_t* p, int64_t n) {
    return Map([&](int i) { return i < n ? ::kvs::BF16ToF32(p[i]) : 0.0f; });
  }
  static R LoadI8(const int8_t* p) { return Map([&](int i) { return static_cast<float>(p[i]); }); }
  static void StorePartial(float* p, R a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = a.v[i];
  }
  static float HalfToFloat(uint16_t h) { return ::kvs::F16ToF32(h); }
};

}  // namespace kvs::kernels
