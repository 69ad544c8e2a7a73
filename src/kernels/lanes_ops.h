// Vector math and storage-row conversions written once over lane traits
// (kernels/lanes.h), shared by the kernels' ops (ops_impl.h) and kvcache's
// attention kernel. Include after the traits header of the ISA the source is
// compiled for. Exp and Exp2 are always_inline; the row conversions are
// static (internal linkage), so the compiler's usual inlining choices hold in
// the callers (forcing them inline made GCC stop inlining attention's
// LoadRow) while still no out-of-line copy from one ISA's TU can stand in
// for another's (lanes.h).
#pragma once

#include <cstdint>

#include "kernels/lanes.h"

namespace kvs::kernels {

// e^x for x in float range; ~2 ulp. Inputs are clamped so 2^n stays finite
// and normal (results below ~1e-38 come out as ~1e-38, above 2e38 as 2e38).
template <class L>
KVS_LANE typename L::R Exp(typename L::R x) {
  x = L::Min(L::Max(x, L::Set1(-87.0f)), L::Set1(88.0f));
  const auto n = L::RoundNearest(L::Mul(x, L::Set1(1.44269504088896341f)));
  auto r = L::Fnma(n, L::Set1(0.693359375f), x);
  r = L::Fnma(n, L::Set1(-2.12194440e-4f), r);
  // Taylor series to r^7; |r| <= ln2/2 keeps the truncation below 1e-8.
  auto p = L::Set1(1.f / 5040);
  p = L::Fma(p, r, L::Set1(1.f / 720));
  p = L::Fma(p, r, L::Set1(1.f / 120));
  p = L::Fma(p, r, L::Set1(1.f / 24));
  p = L::Fma(p, r, L::Set1(1.f / 6));
  p = L::Fma(p, r, L::Set1(0.5f));
  p = L::Fma(p, r, L::Set1(1.f));
  p = L::Fma(p, r, L::Set1(1.f));
  return L::ScalePow2(p, n);
}

// 2^x for x <= 0 (and -inf), the attention kernel's softmax: a degree-6
// polynomial for 2^f, |f| <= 0.5 (relative error < 2e-7), scaled by
// 2^round(x). Inputs below -125 (masked scores, -inf) give ~2^-125:
// negligible, and still a normal float (no denormal slow paths in the
// products that follow).
template <class L>
KVS_LANE typename L::R Exp2(typename L::R x) {
  x = L::Max(x, L::Set1(-125.0f));
  const auto n = L::RoundNearest(x);
  const auto f = L::Sub(x, n);
  auto p = L::Set1(1.5403530393381609e-04f);
  p = L::Fma(p, f, L::Set1(1.3333558146428443e-03f));
  p = L::Fma(p, f, L::Set1(9.6181291076284772e-03f));
  p = L::Fma(p, f, L::Set1(5.5504108664821580e-02f));
  p = L::Fma(p, f, L::Set1(2.4022650695910071e-01f));
  p = L::Fma(p, f, L::Set1(6.9314718055994531e-01f));
  p = L::Fma(p, f, L::Set1(1.0f));
  return L::ScalePow2(p, n);
}

// n f16 / bf16 values -> floats (exact).
template <class L>
static inline void F16RowToF32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + L::kLanes <= n; i += L::kLanes) L::Store(y + i, L::LoadF16(x + i));
  if (i < n) L::StorePartial(y + i, L::LoadF16Partial(x + i, n - i), n - i);
}
template <class L>
static inline void BF16RowToF32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + L::kLanes <= n; i += L::kLanes) L::Store(y + i, L::LoadBF16(x + i));
  if (i < n) L::StorePartial(y + i, L::LoadBF16Partial(x + i, n - i), n - i);
}

// One Q8_0 block's 32 codes times its scale d.
template <class L>
static inline void I8BlockToF32(const int8_t* x, float d, float* y) {
  const auto vd = L::Set1(d);
  for (int i = 0; i < 32; i += L::kLanes) L::Store(y + i, L::Mul(L::LoadI8(x + i), vd));
}

}  // namespace kvs::kernels
