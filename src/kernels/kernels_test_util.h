// Test helpers for kernels_test: weight/activation generators and the
// double-precision MatMul reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"

namespace kvs::kernels::testing {

// The unit roundoff of float32: tolerances are multiples of it.
inline constexpr double kU = 1.0 / (1 << 24);

// Every variant this CPU can run (scalar first).
inline std::vector<const KernelTable*> AvailableVariants() {
  std::vector<const KernelTable*> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (const KernelTable* t = GetKernelTable(isa)) out.push_back(t);
  }
  return out;
}

// The activation format MatMul quantizes to for a weight type (F32 = none).
inline DType ActType(DType w) {
  switch (w) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL: return DType::kQ8_0;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
    case DType::kQ3_K:
    case DType::kQ2_K: return DType::kQ8_K;
    default: return DType::kF32;
  }
}

// Weight rows whose products with ExactActs are small dyadic numbers, so
// that every variant's float arithmetic is exact (as long as cols <= 1024
// for K-quants and <= 4096 otherwise): results must agree bit for bit.
inline std::vector<uint8_t> ExactWeights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> out(static_cast<size_t>(RowBytes(t, cols) * rows));
  auto uni = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1)); };
  const int64_t n = rows * cols;
  switch (t) {
    case DType::kF32: {
      auto* p = reinterpret_cast<float*>(out.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(uni(-8, 8));
      break;
    }
    case DType::kF16:
    case DType::kBF16: {
      auto* p = reinterpret_cast<uint16_t*>(out.data());
      for (int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(uni(-8, 8));
        p[i] = t == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
      }
      break;
    }
    case DType::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(out.data());
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = F32ToF16(uni(0, 1) ? 1.0f : 0.5f);
        for (int8_t& q : b[i].qs) q = static_cast<int8_t>(uni(-127, 127));
      }
      break;
    }
    case DType::kQ4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(out.data());
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = F32ToF16(uni(0, 1) ? 1.0f : -0.5f);
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        b[i].dmin = F32ToF16(1.0f / 128);
        for (uint8_t& s : b[i].scales) s = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ5_K: {
      auto* b = reinterpret_cast<BlockQ5_K*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        b[i].dmin = F32ToF16(1.0f / 128);
        for (uint8_t& s : b[i].scales) s = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qh) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        for (int8_t& s : b[i].scales) s = static_cast<int8_t>(uni(-32, 31));
        for (uint8_t& q : b[i].ql) q = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qh) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ5_0: {
      auto* b = reinterpret_cast<BlockQ5_0*>(out.data());
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = F32ToF16(uni(0, 1) ? 1.0f : -0.5f);
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qh) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ4_1: {
      auto* b = reinterpret_cast<BlockQ4_1*>(out.data());
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = F32ToF16(uni(0, 1) ? 1.0f : 0.5f);
        b[i].m = F32ToF16(static_cast<float>(uni(-8, 8)) * 0.25f);
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kIQ4_NL: {
      auto* b = reinterpret_cast<BlockIQ4_NL*>(out.data());
      for (int64_t i = 0; i < n / 32; ++i) {
        b[i].d = F32ToF16(uni(0, 1) ? 1.0f : -0.5f);
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kIQ4_XS: {
      auto* b = reinterpret_cast<BlockIQ4_XS*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        b[i].scales_h = static_cast<uint16_t>(rng());
        for (uint8_t& s : b[i].scales_l) s = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ3_K: {
      auto* b = reinterpret_cast<BlockQ3_K*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        for (uint8_t& s : b[i].scales) s = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].hmask) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    case DType::kQ2_K: {
      auto* b = reinterpret_cast<BlockQ2_K*>(out.data());
      for (int64_t i = 0; i < n / 256; ++i) {
        b[i].d = F32ToF16(1.0f / 64);
        b[i].dmin = F32ToF16(1.0f / 128);
        for (uint8_t& s : b[i].scales) s = static_cast<uint8_t>(rng());
        for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(rng());
      }
      break;
    }
    default: break;
  }
  return out;
}

// Activations in [-4, 4] with one +-127 per activation block: the Q8_0 / Q8_K
// scale is then exactly +-1 and the quantized values equal the inputs.
inline std::vector<float> ExactActs(DType w, int64_t m, int64_t cols, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
  const int64_t blk = ActType(w) == DType::kQ8_K ? 256 : (ActType(w) == DType::kQ8_0 ? 32 : 0);
  if (blk > 0) {
    for (int64_t i = 0; i < m * cols; i += blk) x[static_cast<size_t>(i + static_cast<int64_t>(rng() % blk))] = (rng() & 1) ? 127.f : -127.f;
  }
  return x;
}

// Realistic weights: quantized from scaled normals with a few outliers.
inline std::vector<uint8_t> RandomWeights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 0.05f);
  std::vector<float> f(static_cast<size_t>(cols));
  std::vector<uint8_t> out(static_cast<size_t>(RowBytes(t, cols) * rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) f[static_cast<size_t>(k)] = (k % 97 == 13) ? 8 * normal(rng) : normal(rng);
    QuantizeRow(t, f.data(), out.data() + r * RowBytes(t, cols), cols);
  }
  return out;
}

inline std::vector<float> RandomActs(int64_t m, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 61 == 7) ? 20 * normal(rng) : normal(rng);
  return x;
}

// Double-precision y = dequant(W) . dequant(quant(x)) and, per output, the
// magnitude M = sum_k |terms| the scalar kernel's float rounding is
// proportional to (for Q4_K the scale and min parts count separately).
struct Reference {
  std::vector<double> y;    // [m, rows]
  std::vector<double> mag;  // [m, rows]
};

inline Reference ComputeReference(DType t, const uint8_t* w, int64_t rows, int64_t cols, const float* x,
                                  int64_t m) {
  const int64_t rb = RowBytes(t, cols);
  std::vector<float> wd(static_cast<size_t>(rows * cols));
  std::vector<float> extra(static_cast<size_t>(rows * cols), 0.f);  // |dmin*m| per element for Q4_K
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(t, w + r * rb, wd.data() + r * cols, cols);
    if (t == DType::kQ4_K || t == DType::kQ5_K) {
      // Both blocks start with d, dmin and the 12 scale bytes.
      const int64_t bs = Traits(t).type_size;
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t* b = w + r * rb + k / 256 * bs;
        uint16_t dmin;
        std::memcpy(&dmin, b + 2, 2);
        uint8_t sc, mn;
        GetScaleMinK4(static_cast<int>(k % 256 / 32), b + 4, &sc, &mn);
        extra[static_cast<size_t>(r * cols + k)] = 2 * std::fabs(F16ToF32(dmin) * mn);
      }
    }
    if (t == DType::kQ4_1 || t == DType::kQ2_K) {  // the min terms, also summed apart
      for (int64_t k = 0; k < cols; ++k) {
        float mterm;
        if (t == DType::kQ4_1) {
          const auto* b = reinterpret_cast<const BlockQ4_1*>(w + r * rb) + k / 32;
          mterm = F16ToF32(b->m);
        } else {
          const auto* b = reinterpret_cast<const BlockQ2_K*>(w + r * rb) + k / 256;
          mterm = F16ToF32(b->dmin) * static_cast<float>(b->scales[k % 256 / 16] >> 4);
        }
        extra[static_cast<size_t>(r * cols + k)] = 2 * std::fabs(mterm);
      }
    }
  }
  std::vector<float> xd(static_cast<size_t>(m * cols));
  const DType at = ActType(t);
  if (at == DType::kF32) {
    std::memcpy(xd.data(), x, xd.size() * sizeof(float));
  } else {
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(at, cols)));
    for (int64_t i = 0; i < m; ++i) {
      QuantizeRow(at, x + i * cols, q.data(), cols);
      DequantizeRow(at, q.data(), xd.data() + i * cols, cols);
    }
  }
  Reference ref;
  ref.y.assign(static_cast<size_t>(m * rows), 0.0);
  ref.mag.assign(static_cast<size_t>(m * rows), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, a = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double wv = wd[static_cast<size_t>(r * cols + k)], xv = xd[static_cast<size_t>(i * cols + k)];
        s += wv * xv;
        a += (std::fabs(wv) + extra[static_cast<size_t>(r * cols + k)]) * std::fabs(xv);
      }
      ref.y[static_cast<size_t>(i * rows + r)] = s;
      ref.mag[static_cast<size_t>(i * rows + r)] = a;
    }
  }
  return ref;
}

// Upper bound on the float additions on any variant's longest path for one
// output: one per element for float weights; for quantized weights one per
// scale group (32 elements; 16 for Q6_K, whose sub-blocks have their own
// scales; Q4_K/Q5_K add their min term separately, so two per 32).
inline int64_t MaxFloatAdds(DType t, int64_t cols) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kIQ4_NL: return cols / 32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ4_1:  // scale and min terms
    case DType::kIQ4_XS:
    case DType::kQ3_K:
    case DType::kQ2_K: return cols / 16;
    default: return cols;
  }
}

}  // namespace kvs::kernels::testing
