// Scalar reference variant: plain loops, no ISA assumptions. It defines the
// activation bytes the vector variants must reproduce and the results they
// are tested against (up to float summation order).
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/isa_decls.h"
#include "kernels/quant_ref.h"
#include "kernels/scratch.h"

namespace kvs::kernels::scalar {
namespace {

// ---- activation quantization

void QuantizeActRow(const ActLayout& l, const float* x, uint8_t* row) {
  auto* qs = reinterpret_cast<int8_t*>(row + l.qs_off);
  auto* d = reinterpret_cast<float*>(row + l.d_off);
  if (l.act_block == 32) {
    for (int64_t b = 0; b < l.cols / 32; ++b) {
      BlockQ8_0 blk;
      QuantizeRowQ8_0Ref(x + 32 * b, &blk, 32);
      std::memcpy(qs + 32 * b, blk.qs, 32);
      d[b] = F16ToF32(blk.d);
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) sum += blk.qs[j];
      WriteActAux(l, b, d[b], &sum, row);
    }
    return;
  }
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    BlockQ8_K blk;
    QuantizeRowQ8_KRef(x + 256 * b, &blk, 256);
    std::memcpy(qs + 256 * b, blk.qs, 256);
    d[b] = blk.d;
    int32_t bsums[16];
    for (int g = 0; g < 16; ++g) bsums[g] = blk.bsums[g];
    WriteActAux(l, b, d[b], bsums, row);
  }
}

// ---- dot products of one weight row with one activation row

float DotF32(const float* w, const float* x, int64_t n) {
  float sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += w[k] * x[k];
  return sum;
}

const int8_t* ActQs(const ActLayout& l, const uint8_t* row) {
  return reinterpret_cast<const int8_t*>(row + l.qs_off);
}
const float* ActD(const ActLayout& l, const uint8_t* row) {
  return reinterpret_cast<const float*>(row + l.d_off);
}

float DotQ8_0(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ8_0*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 32; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * q[32 * b + j];
    sum += static_cast<float>(isum) * (F16ToF32(w[b].d) * d[b]);
  }
  return sum;
}

float DotQ4_0(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ4_0*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 32; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w[b].qs[j] & 0xF) - 8) * q[32 * b + j];
      isum += ((w[b].qs[j] >> 4) - 8) * q[32 * b + j + 16];
    }
    sum += static_cast<float>(isum) * (F16ToF32(w[b].d) * d[b]);
  }
  return sum;
}

// Q4_K and Q5_K (whose 5th bits come from qh): both blocks start with d,
// dmin and the 12 scale bytes.
template <typename Block, bool kHigh>
float DotAffineK(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const Block*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    const int8_t* qb = q + 256 * b;
    int32_t scaled = 0;  // sum over sub-blocks of sc * (w . x)
    int32_t mins = 0;    // sum over sub-blocks of m * sum(x)
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      GetScaleMinK4(s, w[b].scales, &sc, &m);
      const uint8_t* wq = w[b].qs + 32 * (s / 2);
      const int shift = (s % 2) * 4;
      int32_t dot = 0, xs = 0;
      for (int j = 0; j < 32; ++j) {
        int code = (wq[j] >> shift) & 0xF;
        if constexpr (kHigh) code |= ((w[b].qh[j] >> s) & 1) << 4;
        dot += code * qb[32 * s + j];
        xs += qb[32 * s + j];
      }
      scaled += sc * dot;
      mins += m * xs;
    }
    sum += d[b] * F16ToF32(w[b].d) * static_cast<float>(scaled) -
           d[b] * F16ToF32(w[b].dmin) * static_cast<float>(mins);
  }
  return sum;
}

float DotQ4_K(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  return DotAffineK<BlockQ4_K, false>(wrow, l, act);
}
float DotQ5_K(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  return DotAffineK<BlockQ5_K, true>(wrow, l, act);
}

float DotQ6_K(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ6_K*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    const int8_t* qb = q + 256 * b;
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      // Element 128h + 32k + l uses bits from ql/qh as the format describes.
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {  // the two 16-element sub-blocks
          int32_t dot = 0;
          for (int j = 16 * half; j < 16 * half + 16; ++j) {
            const int lo = ((k & 1 ? ql[j + 32] : ql[j]) >> (k & 2 ? 4 : 0)) & 0xF;
            const int hi = (qh[j] >> (2 * k)) & 3;
            dot += ((lo | (hi << 4)) - 32) * qb[128 * h + 32 * k + j];
          }
          isum += w[b].scales[8 * h + 2 * k + half] * dot;
        }
      }
    }
    sum += d[b] * F16ToF32(w[b].d) * static_cast<float>(isum);
  }
  return sum;
}

const int32_t* ActAuxI(const ActLayout& l, const uint8_t* row) {
  return reinterpret_cast<const int32_t*>(row + l.aux_off);
}

float DotQ5_0(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ5_0*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 32; ++b) {
    uint32_t qh;
    std::memcpy(&qh, w[b].qh, 4);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (((w[b].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16) * q[32 * b + j];
      isum += (((w[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * q[32 * b + j + 16];
    }
    sum += static_cast<float>(isum) * (F16ToF32(w[b].d) * d[b]);
  }
  return sum;
}

// Q4_1: d * (q . x) + m * sum(x), sum(x) = the aux (activation d * sum(qs)).
float DotQ4_1(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ4_1*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  const auto* xs = reinterpret_cast<const float*>(act + l.aux_off);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 32; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (w[b].qs[j] & 0xF) * q[32 * b + j];
      isum += (w[b].qs[j] >> 4) * q[32 * b + j + 16];
    }
    sum += static_cast<float>(isum) * (F16ToF32(w[b].d) * d[b]) + F16ToF32(w[b].m) * xs[b];
  }
  return sum;
}

float DotIQ4_NL(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockIQ4_NL*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 32; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += kIQ4NLValues[w[b].qs[j] & 0xF] * q[32 * b + j];
      isum += kIQ4NLValues[w[b].qs[j] >> 4] * q[32 * b + j + 16];
    }
    sum += static_cast<float>(isum) * (F16ToF32(w[b].d) * d[b]);
  }
  return sum;
}

float DotIQ4_XS(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockIQ4_XS*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    int32_t isum = 0;
    for (int s = 0; s < 8; ++s) {
      const int ls = ((w[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((w[b].scales_h >> (2 * s)) & 3) << 4);
      const uint8_t* qs = w[b].qs + 16 * s;
      const int8_t* x = q + 256 * b + 32 * s;
      int32_t dot = 0;
      for (int j = 0; j < 16; ++j) dot += kIQ4NLValues[qs[j] & 0xF] * x[j] + kIQ4NLValues[qs[j] >> 4] * x[j + 16];
      isum += (ls - 32) * dot;
    }
    sum += d[b] * F16ToF32(w[b].d) * static_cast<float>(isum);
  }
  return sum;
}

// Q3_K and Q2_K: element 128h + 32k + l has its 2 low bits at bits 2k of
// qs[32h + l] and belongs to sub-block 8h + 2k + l / 16.
float DotQ3_K(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ3_K*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  const int32_t* aux = ActAuxI(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * k + half;
          int32_t dot = aux[16 * b + g];  // -4 * sum(x): the codes below are q + 4
          for (int j = 16 * half; j < 16 * half + 16; ++j) {
            const int code = ((w[b].qs[32 * h + j] >> (2 * k)) & 3) | (((w[b].hmask[j] >> (4 * h + k)) & 1) << 2);
            dot += code * q[256 * b + 128 * h + 32 * k + j];
          }
          isum += (GetScaleQ3K(g, w[b].scales) - 32) * dot;
        }
      }
    }
    sum += d[b] * F16ToF32(w[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotQ2_K(const uint8_t* wrow, const ActLayout& l, const uint8_t* act) {
  const auto* w = reinterpret_cast<const BlockQ2_K*>(wrow);
  const int8_t* q = ActQs(l, act);
  const float* d = ActD(l, act);
  const int32_t* aux = ActAuxI(l, act);
  float sum = 0;
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    int32_t scaled = 0, mins = 0;
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * k + half;
          int32_t dot = 0;
          for (int j = 16 * half; j < 16 * half + 16; ++j) {
            dot += ((w[b].qs[32 * h + j] >> (2 * k)) & 3) * q[256 * b + 128 * h + 32 * k + j];
          }
          scaled += (w[b].scales[g] & 0xF) * dot;
          mins += (w[b].scales[g] >> 4) * aux[16 * b + g];
        }
      }
    }
    sum += d[b] * F16ToF32(w[b].d) * static_cast<float>(scaled) - d[b] * F16ToF32(w[b].dmin) * static_cast<float>(mins);
  }
  return sum;
}

template <typename RowToF32>
void FloatTile(const TileArgs& a, RowToF32 convert) {
  float* wf = reinterpret_cast<float*>(
      ThreadScratch(ScratchSlot::kPanel, static_cast<size_t>(a.cols) * sizeof(float)));
  for (int64_t r = 0; r < a.rows; ++r) {
    convert(a.w + r * a.row_bytes, wf, a.cols);
    for (int64_t i = 0; i < a.m; ++i) a.y[i * a.ldy + r] = DotF32(wf, a.x + i * a.ldx, a.cols);
  }
}

template <float (*kDot)(const uint8_t*, const ActLayout&, const uint8_t*)>
void QuantTile(const TileArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t i = 0; i < a.m; ++i) {
      a.y[i * a.ldy + r] = kDot(a.w + r * a.row_bytes, *a.layout, a.acts + i * a.layout->row_stride);
    }
  }
}

}  // namespace

void TileF32(const TileArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const auto* w = reinterpret_cast<const float*>(a.w + r * a.row_bytes);
    for (int64_t i = 0; i < a.m; ++i) a.y[i * a.ldy + r] = DotF32(w, a.x + i * a.ldx, a.cols);
  }
}

void TileF16(const TileArgs& a) {
  FloatTile(a, [](const uint8_t* src, float* dst, int64_t n) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t k = 0; k < n; ++k) dst[k] = F16ToF32(h[k]);
  });
}

void TileBF16(const TileArgs& a) {
  FloatTile(a, [](const uint8_t* src, float* dst, int64_t n) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t k = 0; k < n; ++k) dst[k] = BF16ToF32(h[k]);
  });
}

void TileQ8_0(const TileArgs& a) { QuantTile<DotQ8_0>(a); }
void TileQ4_0(const TileArgs& a) { QuantTile<DotQ4_0>(a); }
void TileQ4_K(const TileArgs& a) { QuantTile<DotQ4_K>(a); }
void TileQ5_K(const TileArgs& a) { QuantTile<DotQ5_K>(a); }
void TileQ6_K(const TileArgs& a) { QuantTile<DotQ6_K>(a); }
void TileQ5_0(const TileArgs& a) { QuantTile<DotQ5_0>(a); }
void TileQ4_1(const TileArgs& a) { QuantTile<DotQ4_1>(a); }
void TileIQ4_NL(const TileArgs& a) { QuantTile<DotIQ4_NL>(a); }
void TileIQ4_XS(const TileArgs& a) { QuantTile<DotIQ4_XS>(a); }
void TileQ3_K(const TileArgs& a) { QuantTile<DotQ3_K>(a); }
void TileQ2_K(const TileArgs& a) { QuantTile<DotQ2_K>(a); }

void QuantizeActs(const ActLayout& layout, const float* x, int64_t ldx, int64_t m, uint8_t* buf) {
  for (int64_t i = 0; i < m; ++i) QuantizeActRow(layout, x + i * ldx, buf + i * layout.row_stride);
}

// ---- elementwise; reductions accumulate in double so this variant can
// serve as the accuracy reference.

void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float Dot(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int64_t ArgMax(const float* x, int64_t n) {
  int64_t arg = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[arg]) arg = i;
  }
  return arg;
}

void ConvertFromF32(DType t, const float* x, void* y, int64_t n) { QuantizeRow(t, x, y, n); }

void DequantizeRow(DType t, const void* x, float* y, int64_t n) { DequantizeRowRef(t, x, y, n); }

}  // namespace kvs::kernels::scalar
