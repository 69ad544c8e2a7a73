// Reference quantizers and dequantizers of the less common GGUF weight types
// (Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q3_K, Q2_K), split from quant_ref.cc to keep
// files small. Same rules as there: every float operation is written in the
// order and precision of llama.cpp's reference so that the stored bytes
// match (compiled with -ffp-contract=off; a*b*c is (a*b)*c, sums are
// sequential). Do not "simplify" the expressions.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "base/fp16.h"
#include "kernels/quant_ref.h"

namespace kvs::kernels {
namespace {

// Index of the grid value nearest to v (the lower one on a tie), by bisection
// of the sorted 16-entry IQ4_NL grid.
int NearestIQ4Index(float v) {
  const int8_t* g = kIQ4NLValues;
  if (v <= static_cast<float>(g[0])) return 0;
  if (v >= static_cast<float>(g[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < static_cast<float>(g[mid])) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(g[hi - 1]) < static_cast<float>(g[hi]) - v ? hi - 1 : hi;
}

// Least-squares scale of one 32-element IQ4 group (weights x^2): starts from
// the scale that maps the extreme element to the grid's -127 end, then tries
// 15 inverse scales around it and keeps the best. 0 for an all-(near-)zero
// group.
float FitIQ4Group(const float* x) {
  float amax = 0;
  const float max = SignedAbsMax(x, 32, &amax);
  if (amax < kGroupMaxEps) return 0;
  const float v0 = static_cast<float>(kIQ4NLValues[0]);
  float d = -max / v0;
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = static_cast<float>(kIQ4NLValues[NearestIQ4Index(id * x[j])]);
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -7; itry <= 7; ++itry) {
    id = static_cast<float>(itry + kIQ4NLValues[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = static_cast<float>(kIQ4NLValues[NearestIQ4Index(id * x[j])]);
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Nibble-packs 32 indices: element j low nibble of qs[j], j + 16 high.
void PackNibbles32(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

// Symmetric 3-bit fit of a 16-element group (ggml's make_q3_quants with
// nmax 4 and the RMSE refinement): codes L in [0, 8) standing for L - 4,
// weighted by x^2; up to 5 passes move single codes while that improves
// (sum w x l)^2 / sum w l^2. Returns the scale.
float MakeQ3Quants(const float* x, int8_t* L) {
  constexpr int kNmax = 4;
  float amax = 0;
  const float max = SignedAbsMax(x, 16, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < 16; ++i) L[i] = 0;
    return 0.f;
  }
  auto clamp = [](int l) { return l < -kNmax ? -kNmax : (l > kNmax - 1 ? kNmax - 1 : l); };
  const float iscale = static_cast<float>(-kNmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < 16; ++i) {
    const int l = clamp(NearestInt(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < 16; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int nl = clamp(NearestInt(x[i] * sl2 / slx));
        if (nl != L[i]) {
          const float fl = static_cast<float>(nl);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < 16; ++i) L[i] = static_cast<int8_t>(L[i] + kNmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 256 2-bit codes (the low 2 bits of L) as Q2_K/Q3_K store them:
// element 128h + 32k + l in bits 2k of qs[32h + l].
template <typename T>
void Pack2Bit(const T* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const T* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] = static_cast<uint8_t>((Lh[l] & 3) | ((Lh[l + 32] & 3) << 2) | ((Lh[l + 64] & 3) << 4) |
                                            ((Lh[l + 96] & 3) << 6));
    }
  }
}

}  // namespace

void QuantizeRowQ5_0Ref(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, x += kQK0) {
    float amax = 0;
    const float max = SignedAbsMax(x, kQK0, &amax);
    const float d = max / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK0 / 2; ++j) {
      // Truncation of v + 16.5 rounds v to nearest, halves up.
      const int q0 = std::min<int>(31, static_cast<int8_t>(x[j] * id + 16.5f));
      const int q1 = std::min<int>(31, static_cast<int8_t>(x[j + 16] * id + 16.5f));
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void QuantizeRowQ4_1Ref(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, x += kQK0) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK0; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    y[b].m = F32ToF16(min);
    for (int j = 0; j < kQK0 / 2; ++j) {
      const int q0 = std::min<int>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f));
      const int q1 = std::min<int>(15, static_cast<int8_t>((x[j + 16] - min) * id + 0.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowIQ4_NLRef(const float* x, BlockIQ4_NL* y, int64_t n) {
  uint8_t L[32];
  for (int64_t b = 0; b < n / kQK0; ++b, x += kQK0) {
    const float d = FitIQ4Group(x);
    y[b].d = F32ToF16(d);
    const float id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(NearestIQ4Index(id * x[j]));
    PackNibbles32(L, y[b].qs);
  }
}

void QuantizeRowIQ4_XSRef(const float* x, BlockIQ4_XS* y, int64_t n) {
  float scales[8];
  uint8_t L[32];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockIQ4_XS& blk = y[b];
    float max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 8; ++s) {
      scales[s] = FitIQ4Group(x + 32 * s);
      const float a = std::fabs(scales[s]);
      if (a > amax_scale) {
        amax_scale = a;
        max_scale = scales[s];
      }
    }
    const float d = -max_scale / 32;
    blk.d = F32ToF16(d);
    const float id = d != 0 ? 1 / d : 0.f;
    blk.scales_h = 0;
    for (int s = 0; s < 8; ++s) {
      int l = NearestInt(id * scales[s]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(NearestIQ4Index(idl * x[32 * s + j]));
      PackNibbles32(L, blk.qs + 16 * s);
      l += 32;
      if (s % 2 == 0) {
        blk.scales_l[s / 2] = static_cast<uint8_t>(l & 0xF);
      } else {
        blk.scales_l[s / 2] = static_cast<uint8_t>(blk.scales_l[s / 2] | ((l & 0xF) << 4));
      }
      blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((l >> 4) << (2 * s)));
    }
  }
}

void QuantizeRowQ3_KRef(const float* x, BlockQ3_K* y, int64_t n) {
  int8_t L[kQKK];
  float scales[16];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ3_K& blk = y[b];
    float max_scale = 0;
    float amax = 0;
    for (int s = 0; s < 16; ++s) {
      scales[s] = MakeQ3Quants(x + 16 * s, L + 16 * s);
      const float a = std::fabs(scales[s]);
      if (a > amax) {
        amax = a;
        max_scale = scales[s];
      }
    }
    std::memset(blk.scales, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int s = 0; s < 16; ++s) {
        // The int -> int8 wrap before the clamp is the reference's.
        int l = static_cast<int8_t>(NearestInt(iscale * scales[s]));
        l = (l < -32 ? -32 : (l > 31 ? 31 : l)) + 32;
        if (s < 8) {
          blk.scales[s] = static_cast<uint8_t>(l & 0xF);
        } else {
          blk.scales[s - 8] = static_cast<uint8_t>(blk.scales[s - 8] | ((l & 0xF) << 4));
        }
        blk.scales[8 + s % 4] = static_cast<uint8_t>(blk.scales[8 + s % 4] | ((l >> 4) << (2 * (s / 4))));
      }
      blk.d = F32ToF16(1 / iscale);
    } else {
      blk.d = F32ToF16(0.f);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = F16ToF32(blk.d) * static_cast<float>(GetScaleQ3K(s, blk.scales) - 32);
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) {
        int l = NearestInt(x[16 * s + i] / d);
        l = l < -4 ? -4 : (l > 3 ? 3 : l);
        L[16 * s + i] = static_cast<int8_t>(l + 4);
      }
    }
    // The 3rd bit of element j goes to bit j / 32 of hmask[j % 32].
    std::memset(blk.hmask, 0, sizeof(blk.hmask));
    for (int j = 0; j < kQKK; ++j) {
      if (L[j] > 3) {
        blk.hmask[j % 32] = static_cast<uint8_t>(blk.hmask[j % 32] | (1 << (j / 32)));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    }
    Pack2Bit(L, blk.qs);
  }
}

void QuantizeRowQ2_KRef(const float* x, BlockQ2_K* y, int64_t n) {
  uint8_t L[kQKK];
  uint8_t Laux[16];
  float weights[16];
  float mins[16];
  float scales[16];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ2_K& blk = y[b];
    float max_scale = 0;
    float max_min = 0;
    for (int s = 0; s < 16; ++s) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * s + l]);
      scales[s] = MakeQkx2Quants(16, 3, x + 16 * s, weights, L + 16 * s, &mins[s], Laux, -0.5f, 0.1f, 15, true);
      if (scales[s] > max_scale) max_scale = scales[s];
      if (mins[s] > max_min) max_min = mins[s];
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int s = 0; s < 16; ++s) blk.scales[s] = static_cast<uint8_t>(NearestInt(iscale * scales[s]));
      blk.d = F32ToF16(max_scale / 15.f);
    } else {
      std::memset(blk.scales, 0, sizeof(blk.scales));
      blk.d = F32ToF16(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int s = 0; s < 16; ++s) {
        blk.scales[s] = static_cast<uint8_t>(blk.scales[s] | (NearestInt(iscale * mins[s]) << 4));
      }
      blk.dmin = F32ToF16(max_min / 15.f);
    } else {
      blk.dmin = F32ToF16(0.f);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = F16ToF32(blk.d) * static_cast<float>(blk.scales[s] & 0xF);
      if (d == 0) continue;
      const float dm = F16ToF32(blk.dmin) * static_cast<float>(blk.scales[s] >> 4);
      for (int i = 0; i < 16; ++i) {
        const int l = NearestInt((x[16 * s + i] + dm) / d);
        L[16 * s + i] = static_cast<uint8_t>(l < 0 ? 0 : (l > 3 ? 3 : l));
      }
    }
    Pack2Bit(L, blk.qs);
  }
}

void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, y += kQK0) {
    const float d = F16ToF32(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int q0 = ((x[b].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
      const int q1 = ((x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      y[j] = static_cast<float>(q0) * d;
      y[j + 16] = static_cast<float>(q1) * d;
    }
  }
}

void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, y += kQK0) {
    const float d = F16ToF32(x[b].d);
    const float m = F16ToF32(x[b].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
      y[j + 16] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, y += kQK0) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIQ4NLValues[x[b].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIQ4NLValues[x[b].qs[j] >> 4]);
    }
  }
}

void DequantizeRowIQ4_XS(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const int ls = ((x[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((x[b].scales_h >> (2 * s)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = x[b].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIQ4NLValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIQ4NLValues[qs[j] >> 4]);
      }
    }
  }
}

void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * h + k;
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(GetScaleQ3K(8 * h + 2 * k + half, x[b].scales) - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int code = ((q[l] >> (2 * k)) & 3) - ((x[b].hmask[l] >> bit) & 1 ? 0 : 4);
            *y++ = dl * static_cast<float>(code);
          }
        }
      }
    }
  }
}

void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    const float min = F16ToF32(x[b].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[b].scales[8 * h + 2 * k + half];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = min * static_cast<float>(sc >> 4);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            *y++ = dl * static_cast<float>((q[l] >> (2 * k)) & 3) - ml;
          }
        }
      }
    }
  }
}

}  // namespace kvs::kernels
