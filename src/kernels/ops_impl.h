// The element-wise, normalisation, storage-conversion and activation-
// quantization ops of the kernel table, written once over lane traits
// (kernels/lanes.h) and instantiated per ISA by KVS_DEFINE_LANE_OPS in
// avx2_ops.cc / avx512_ops.cc (each compiled with its ISA's flags). The
// quantizers reproduce the scalar reference bit for bit (same division, same
// rounding rule, exact integer sums); the float ops match it within rounding
// (vector summation order). Tails run the vector formula on partial
// vectors (lanes.h), so an element's result never depends on where a call's
// range ends.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/lanes_ops.h"
#include "kernels/quant_formats.h"
#include "kernels/quant_ref.h"

namespace kvs::kernels::lane_ops {

// acc[0] + ... + acc[k-1] pairwise ((a0 + a1) + (a2 + a3)), k a power of 2.
template <class L, int k>
KVS_LANE typename L::R SumPairwise(typename L::R (&acc)[k]) {
  for (int w = 1; w < k; w *= 2) {
    for (int j = 0; j < k; j += 2 * w) acc[j] = L::Add(acc[j], acc[j + w]);
  }
  return acc[0];
}

// One Q8_0 block as quantize_row_q8_0_ref: qs[32], returns the f32 scale
// (before f16 rounding) and the sum of qs in *sum.
template <class L>
inline float QuantizeBlockQ8_0(const float* x, int8_t* qs, int32_t* sum) {
  constexpr int kV = 32 / L::kLanes;
  typename L::R v[kV];
  auto amax = L::Zero();
  for (int j = 0; j < kV; ++j) {
    v[j] = L::Load(x + L::kLanes * j);
    amax = L::Max(amax, L::Abs(v[j]));
  }
  const float d = L::ReduceMax(amax) / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  const auto vid = L::Set1(id);
  typename L::I q[kV];
  auto s = L::Set1I32(0);
  for (int j = 0; j < kV; ++j) {
    q[j] = L::CvttI32(L::RoundAway(L::Mul(v[j], vid)));
    s = L::AddI32(s, q[j]);
  }
  *sum = L::ReduceAddI32(s);
  L::StoreI8x32(qs, q);
  return d;
}

// One Q8_K block as quantize_row_q8_K_ref; returns d, fills qs[256] and
// bsums[16].
template <class L>
inline float QuantizeBlockQ8_K(const float* x, int8_t* qs, int32_t* bsums) {
  constexpr int kV = 32 / L::kLanes;  // vectors per 32 values (two bsums)
  auto amax_v = L::Zero();
  for (int j = 0; j < 256 / L::kLanes; ++j) amax_v = L::Max(amax_v, L::Abs(L::Load(x + L::kLanes * j)));
  const float amax = L::ReduceMax(amax_v);
  if (amax == 0) {
    std::memset(qs, 0, 256);
    for (int g = 0; g < 16; ++g) bsums[g] = 0;
    return 0.f;
  }
  // The reference keeps the first element of largest magnitude (its sign
  // decides the sign of d).
  float max = 0;
  const auto target = L::Set1(amax);
  for (int j = 0; j < 256 / L::kLanes; ++j) {
    const unsigned hit = L::EqBits(L::Abs(L::Load(x + L::kLanes * j)), target);
    if (hit != 0) {
      max = x[L::kLanes * j + __builtin_ctz(hit)];
      break;
    }
  }
  const float iscale = -127.f / max;
  const auto vis = L::Set1(iscale);
  const auto top = L::Set1I32(127);
  for (int g = 0; g < 8; ++g) {
    typename L::I q[kV];
    for (int j = 0; j < kV; ++j) {
      const auto v = L::RoundNearest(L::Mul(L::Load(x + 32 * g + L::kLanes * j), vis));
      q[j] = L::MinI32(L::CvttI32(v), top);
    }
    auto lo = q[0], hi = q[kV / 2];
    for (int j = 1; j < kV / 2; ++j) {
      lo = L::AddI32(lo, q[j]);
      hi = L::AddI32(hi, q[kV / 2 + j]);
    }
    bsums[2 * g] = L::ReduceAddI32(lo);
    bsums[2 * g + 1] = L::ReduceAddI32(hi);
    L::StoreI8x32(qs + 32 * g, q);
  }
  return 1 / iscale;
}

template <class L>
inline void QuantizeActRow(const ActLayout& l, const float* x, uint8_t* row) {
  auto* qs = reinterpret_cast<int8_t*>(row + l.qs_off);
  auto* d = reinterpret_cast<float*>(row + l.d_off);
  if (l.act_block == 32) {
    for (int64_t b = 0; b < l.cols / 32; ++b) {
      int32_t sum;
      d[b] = F16ToF32(F32ToF16(QuantizeBlockQ8_0<L>(x + 32 * b, qs + 32 * b, &sum)));
      WriteActAux(l, b, d[b], &sum, row);
    }
    return;
  }
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    int32_t bsums[16];
    d[b] = QuantizeBlockQ8_K<L>(x + 256 * b, qs + 256 * b, bsums);
    WriteActAux(l, b, d[b], bsums, row);
  }
}

template <class L>
void QuantizeActs(const ActLayout& layout, const float* x, int64_t ldx, int64_t m, uint8_t* buf) {
  for (int64_t i = 0; i < m; ++i) QuantizeActRow<L>(layout, x + i * ldx, buf + i * layout.row_stride);
}

template <class L>
void ConvertFromF32(DType t, const float* x, void* y, int64_t n) {
  constexpr int kL = L::kLanes;
  switch (t) {
    case DType::kF32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(y);
      int64_t i = 0;
      for (; i + kL <= n; i += kL) L::StoreF16(out + i, L::Load(x + i));
      if (i < n) L::StoreF16Partial(out + i, L::LoadPartial(x + i, n - i), n - i);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(y);
      int64_t i = 0;
      for (; i + kL <= n; i += kL) L::StoreBF16(out + i, L::Load(x + i));
      if (i < n) L::StoreBF16Partial(out + i, L::LoadPartial(x + i, n - i), n - i);
      return;
    }
    case DType::kQ8_0: {
      auto* out = static_cast<BlockQ8_0*>(y);
      for (int64_t b = 0; b < n / 32; ++b) {
        int32_t sum;
        out[b].d = F32ToF16(QuantizeBlockQ8_0<L>(x + 32 * b, out[b].qs, &sum));
      }
      return;
    }
    default:
      QuantizeRow(t, x, y, n);
  }
}

template <class L>
void DequantizeRow(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::kF16:
      F16RowToF32<L>(static_cast<const uint16_t*>(x), y, n);
      return;
    case DType::kBF16:
      BF16RowToF32<L>(static_cast<const uint16_t*>(x), y, n);
      return;
    case DType::kQ8_0: {
      const auto* in = static_cast<const BlockQ8_0*>(x);
      for (int64_t b = 0; b < n / 32; ++b) I8BlockToF32<L>(in[b].qs, L::HalfToFloat(in[b].d), y + 32 * b);
      return;
    }
    default:
      DequantizeRowRef(t, x, y, n);
  }
}

// Sum of squares over 32 floats per step in 32 / kLanes accumulators (one
// chain per register keeps the FMA latency hidden).
template <class L>
void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  constexpr int kL = L::kLanes, kV = 32 / kL;
  typename L::R acc[kV];
  for (auto& a : acc) a = L::Zero();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < kV; ++j) {
      const auto v = L::Load(x + i + kL * j);
      acc[j] = L::Fma(v, v, acc[j]);
    }
  }
  for (; i + kL <= n; i += kL) {
    const auto v = L::Load(x + i);
    acc[0] = L::Fma(v, v, acc[0]);
  }
  if (i < n) {
    const auto v = L::LoadPartial(x + i, n - i);
    acc[0] = L::Fma(v, v, acc[0]);
  }
  const float ss = L::ReduceAdd(SumPairwise<L>(acc));
  const auto vs = L::Set1(1.0f / std::sqrt(ss / static_cast<float>(n) + eps));
  for (i = 0; i + kL <= n; i += kL) L::Store(out + i, L::Mul(L::Mul(L::Load(x + i), vs), L::Load(w + i)));
  if (i < n) {
    const auto v = L::Mul(L::Mul(L::LoadPartial(x + i, n - i), vs), L::LoadPartial(w + i, n - i));
    L::StorePartial(out + i, v, n - i);
  }
}

template <class L>
KVS_LANE typename L::R SiluMulLanes(typename L::R g, typename L::R u) {
  const auto e = Exp<L>(L::Sub(L::Zero(), g));
  return L::Mul(L::Div(g, L::Add(L::Set1(1.0f), e)), u);
}

template <class L>
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + L::kLanes <= n; i += L::kLanes) L::Store(out + i, SiluMulLanes<L>(L::Load(gate + i), L::Load(up + i)));
  if (i < n) {
    const auto r = SiluMulLanes<L>(L::LoadPartial(gate + i, n - i), L::LoadPartial(up + i, n - i));
    L::StorePartial(out + i, r, n - i);
  }
}

template <class L>
void Add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + L::kLanes <= n; i += L::kLanes) L::Store(out + i, L::Add(L::Load(a + i), L::Load(b + i)));
  if (i < n) L::StorePartial(out + i, L::Add(L::LoadPartial(a + i, n - i), L::LoadPartial(b + i, n - i)), n - i);
}

template <class L>
void Axpy(float a, const float* x, float* y, int64_t n) {
  const auto va = L::Set1(a);
  int64_t i = 0;
  for (; i + L::kLanes <= n; i += L::kLanes) L::Store(y + i, L::Fma(va, L::Load(x + i), L::Load(y + i)));
  if (i < n) L::StorePartial(y + i, L::Fma(va, L::LoadPartial(x + i, n - i), L::LoadPartial(y + i, n - i)), n - i);
}

template <class L>
float Dot(const float* a, const float* b, int64_t n) {
  constexpr int kL = L::kLanes, kV = 32 / kL;
  typename L::R acc[kV];
  for (auto& v : acc) v = L::Zero();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < kV; ++j) acc[j] = L::Fma(L::Load(a + i + kL * j), L::Load(b + i + kL * j), acc[j]);
  }
  for (; i + kL <= n; i += kL) acc[0] = L::Fma(L::Load(a + i), L::Load(b + i), acc[0]);
  if (i < n) acc[0] = L::Fma(L::LoadPartial(a + i, n - i), L::LoadPartial(b + i, n - i), acc[0]);
  return L::ReduceAdd(SumPairwise<L>(acc));
}

template <class L>
void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  constexpr int kL = L::kLanes;
  auto vmax = L::Set1(x[0]);
  int64_t i = 0;
  for (; i + kL <= n; i += kL) vmax = L::Max(vmax, L::Load(x + i));
  if (i < n) vmax = L::Max(vmax, L::LoadPartialOr(x + i, n - i, vmax));
  const auto vm = L::Set1(L::ReduceMax(vmax));
  auto vsum = L::Zero();
  for (i = 0; i + kL <= n; i += kL) {
    const auto e = Exp<L>(L::Sub(L::Load(x + i), vm));
    L::Store(x + i, e);
    vsum = L::Add(vsum, e);
  }
  if (i < n) {
    const auto e = Exp<L>(L::Sub(L::LoadPartial(x + i, n - i), vm));
    L::StorePartial(x + i, e, n - i);
    vsum = L::AddPartial(vsum, e, n - i);
  }
  const auto vi = L::Set1(1.0f / L::ReduceAdd(vsum));
  for (i = 0; i + kL <= n; i += kL) L::Store(x + i, L::Mul(L::Load(x + i), vi));
  if (i < n) L::StorePartial(x + i, L::Mul(L::LoadPartial(x + i, n - i), vi), n - i);
}

// Two passes: the maximum (Max keeps its second operand when the first is
// NaN, so NaNs in x are skipped), then the first lane equal to it.
template <class L>
int64_t ArgMax(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;
  constexpr int kL = L::kLanes;
  auto vmax = L::Set1(x[0]);
  int64_t i = 0;
  for (; i + kL <= n; i += kL) vmax = L::Max(L::Load(x + i), vmax);
  if (i < n) vmax = L::Max(L::LoadPartialOr(x + i, n - i, vmax), vmax);
  const auto vm = L::Set1(L::ReduceMax(vmax));
  for (i = 0; i + kL <= n; i += kL) {
    const unsigned eq = L::EqBits(L::Load(x + i), vm);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  if (i < n) {
    const unsigned eq = L::EqBits(L::LoadPartial(x + i, n - i), vm) & ((1u << (n - i)) - 1);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  return 0;  // unreachable: the maximum is one of the values
}

}  // namespace kvs::kernels::lane_ops

// Defines the kernel-table ops of namespace `ns` (isa_decls.h) as the
// templates above over traits L.
#define KVS_DEFINE_LANE_OPS(ns, L)                                                                        \
  namespace kvs::kernels::ns {                                                                            \
  void QuantizeActs(const ActLayout& layout, const float* x, int64_t ldx, int64_t m, uint8_t* buf) {      \
    lane_ops::QuantizeActs<L>(layout, x, ldx, m, buf);                                                    \
  }                                                                                                       \
  void ConvertFromF32(DType t, const float* x, void* y, int64_t n) { lane_ops::ConvertFromF32<L>(t, x, y, n); } \
  void DequantizeRow(DType t, const void* x, float* y, int64_t n) { lane_ops::DequantizeRow<L>(t, x, y, n); }  \
  void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {                        \
    lane_ops::RmsNorm<L>(x, w, out, n, eps);                                                              \
  }                                                                                                       \
  void SiluMul(const float* gate, const float* up, float* out, int64_t n) {                               \
    lane_ops::SiluMul<L>(gate, up, out, n);                                                               \
  }                                                                                                       \
  void Add(const float* a, const float* b, float* out, int64_t n) { lane_ops::Add<L>(a, b, out, n); }     \
  void Axpy(float a, const float* x, float* y, int64_t n) { lane_ops::Axpy<L>(a, x, y, n); }              \
  float Dot(const float* a, const float* b, int64_t n) { return lane_ops::Dot<L>(a, b, n); }              \
  void Softmax(float* x, int64_t n) { lane_ops::Softmax<L>(x, n); }                                       \
  int64_t ArgMax(const float* x, int64_t n) { return lane_ops::ArgMax<L>(x, n); }                         \
  }
