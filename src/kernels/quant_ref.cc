// Reference quantizers. Every float operation below is written in the order
// and precision of the reference algorithm so that the stored bytes match
// llama.cpp's; this file is compiled with -ffp-contract=off for that reason.
// Do not "simplify" expressions (a*b*c is (a*b)*c, sums are sequential).
#include "kernels/quant_ref.h"

#include <cmath>

#include "base/fp16.h"

namespace kvs::kernels {
namespace {

// Symmetric fit x[i] ~ scale * (L[i] - nmax), L in [0, 2*nmax-1], weighted by
// x^2 (ggml's make_qx_quants with rmse_type 1 and no importance weights):
// tries 18 perturbed inverse scales around -nmax/max and keeps the best.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0;
  const float max = SignedAbsMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  auto clamp = [nmax](int l) { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(NearestInt(iscale * x[i]));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(NearestInt(iscale * x[i]));
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp(NearestInt(iscale * x[i])));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

// Fits x[i] ~ scale * L[i] - the_min with L in [0, nmax] (Q4_K, Q5_K, Q2_K): starts from
// the min/max fit, then tries nstep+1 candidate inverse scales and keeps the
// weighted least-squares fit with the smallest weighted squared error
// (weighted absolute error with use_mad).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = l < 0 ? 0 : (l > nmax ? nmax : l);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void QuantizeRowQ8_0Ref(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, x += kQK0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK0; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kQK0; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void QuantizeRowQ4_0Ref(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, x += kQK0) {
    float amax = 0.0f;
    const float max = SignedAbsMax(x, kQK0, &amax);
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      // Truncation toward zero of v + 8.5 rounds v to nearest, halves up.
      const int q0 = static_cast<int8_t>(x[j] * id + 8.5f);
      const int q1 = static_cast<int8_t>(x[j + kQK0 / 2] * id + 8.5f);
      y[b].qs[j] = static_cast<uint8_t>((q0 < 15 ? q0 : 15) | ((q1 < 15 ? q1 : 15) << 4));
    }
  }
}

namespace {

// The shared part of the Q4_K and Q5_K reference quantizers for one
// super-block: affine fits of the 8 sub-blocks with codes in [0, nmax]
// (search parameters rmin, rdelta 0.1, nstep as ggml passes them), 6-bit
// scales and mins packed into `scales`, the f16 super-block scales, and the
// codes L re-quantized against the scales as stored.
void QuantizeAffineSuperBlock(const float* x, int nmax, float rmin, int nstep, uint8_t scales_out[12],
                              uint16_t* d_out, uint16_t* dmin_out, uint8_t L[kQKK]) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQKK / 32];
  float scales[kQKK / 32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kQKK / 32; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = MakeQkx2Quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales_out, 0, 12);
  for (int j = 0; j < kQKK / 32; ++j) {
    // The int -> uint8 wrap is part of the reference behaviour.
    uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = F32ToF16(max_scale / 63.f);
  *dmin_out = F32ToF16(max_min / 63.f);
  // Re-quantize against the scales as stored.
  for (int j = 0; j < kQKK / 32; ++j) {
    uint8_t sc, m;
    GetScaleMinK4(j, scales_out, &sc, &m);
    const float d = F16ToF32(*d_out) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = F16ToF32(*dmin_out) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
    }
  }
}

}  // namespace

void QuantizeRowQ4_KRef(const float* x, BlockQ4_K* y, int64_t n) {
  uint8_t L[kQKK];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ4_K& blk = y[b];
    QuantizeAffineSuperBlock(x, 15, -1.f, 20, blk.scales, &blk.d, &blk.dmin, L);
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
      }
    }
  }
}

void QuantizeRowQ5_KRef(const float* x, BlockQ5_K* y, int64_t n) {
  uint8_t L[kQKK];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ5_K& blk = y[b];
    QuantizeAffineSuperBlock(x, 31, -0.5f, 15, blk.scales, &blk.d, &blk.dmin, L);
    // Element 64g + l: low nibble of qs[32g + l], high bit in bit 2g of
    // qh[l]; element 64g + 32 + l: high nibble, bit 2g + 1.
    std::memset(blk.qh, 0, sizeof(blk.qh));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[64 * g + l], l2 = L[64 * g + 32 + l];
        blk.qs[32 * g + l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
        blk.qh[l] = static_cast<uint8_t>(blk.qh[l] | ((l1 >> 4) << (2 * g)) | ((l2 >> 4) << (2 * g + 1)));
      }
    }
  }
}

void QuantizeRowQ6_KRef(const float* x, BlockQ6_K* y, int64_t n) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ6_K& blk = y[b];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int s = 0; s < kQKK / 16; ++s) {
      scales[s] = MakeQxQuants(16, 32, x + 16 * s, L + 16 * s);
      const float abs_scale = std::fabs(scales[s]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[s];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    const float iscale = -128.f / max_scale;
    blk.d = F32ToF16(1 / iscale);
    for (int s = 0; s < kQKK / 16; ++s) {
      const int v = NearestInt(iscale * scales[s]);
      blk.scales[s] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int s = 0; s < kQKK / 16; ++s) {
      const float d = F16ToF32(blk.d) * static_cast<float>(blk.scales[s]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = NearestInt(x[16 * s + ii] / d);
        l = l < -32 ? -32 : (l > 31 ? 31 : l);
        L[16 * s + ii] = static_cast<int8_t>(l + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void QuantizeRowQ8_KRef(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ8_K& blk = y[b];
    float amax = 0;
    const float max = SignedAbsMax(x, kQKK, &amax);
    if (amax == 0) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQKK; ++j) {
      const int v = NearestInt(iscale * x[j]);
      blk.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int s = 0; s < kQKK / 16; ++s) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * s + i];
      blk.bsums[s] = static_cast<int16_t>(sum);
    }
    blk.d = 1 / iscale;
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, y += kQK0) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQK0; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK0; ++b, y += kQK0) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
      y[j + kQK0 / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

namespace {

// The scales and mins of Q4_K / Q5_K sub-blocks 2g (low nibbles of qs group
// g) and 2g+1 (high nibbles): the 6-bit fields times the super-block's d and
// dmin.
void SubBlockScalesK4(const uint8_t* scales, int g, float d, float min, float* d1, float* m1, float* d2, float* m2) {
  uint8_t sc, m;
  GetScaleMinK4(2 * g, scales, &sc, &m);
  *d1 = d * static_cast<float>(sc);
  *m1 = min * static_cast<float>(m);
  GetScaleMinK4(2 * g + 1, scales, &sc, &m);
  *d2 = d * static_cast<float>(sc);
  *m2 = min * static_cast<float>(m);
}

}  // namespace

void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    const float min = F16ToF32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int g = 0; g < 4; ++g, q += 32) {
      float d1, m1, d2, m2;
      SubBlockScalesK4(x[b].scales, g, d, min, &d1, &m1, &d2, &m2);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    const float min = F16ToF32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    const uint8_t* qh = x[b].qh;
    for (int g = 0; g < 4; ++g, q += 32) {
      float d1, m1, d2, m2;
      SubBlockScalesK4(x[b].scales, g, d, min, &d1, &m1, &d2, &m2);
      const int u1 = 1 << (2 * g), u2 = 2 << (2 * g);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, y += kQKK) {
    for (int j = 0; j < kQKK; ++j) y[j] = x[b].d * static_cast<float>(x[b].qs[j]);
  }
}

}  // namespace kvs::kernels
