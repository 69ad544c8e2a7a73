// AVX-512 MatMul for float weights (F32, F16, BF16) with f32 activations.
//
// Small m: each weight row is converted on the fly and dotted with all
// activation rows at once (memory bound; the row is read once; masked loads
// handle any column count).
// Larger m: register-blocked GEMM. Panels of 32 weight rows x kKc columns
// are converted to f32 once and transposed to [k][32], kNb at a time; the
// 12x32 microkernel keeps 24 zmm accumulators, loading 2 weight vectors and
// broadcasting 12 activations per k (24 FMAs per 14 loads).
#include <algorithm>

#include "base/fp16.h"
#include "kernels/avx512_util.h"
#include "kernels/isa_decls.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx512 {
namespace {

enum class FKind { kF32, kF16, kBF16 };

constexpr int kR = 32;          // weight rows per panel (2 vectors)
constexpr int kA = 12;          // activation rows per microkernel call
constexpr int64_t kKc = 128;    // columns per panel (16 KiB of f32)
constexpr int kNb = 4;          // panels packed together (64 KiB, in L2)
constexpr int64_t kPanelMinM = 4;

// 16 weights from `row` starting at column k (lanes outside `m` read as 0).
template <FKind K>
inline __m512 Load16(const uint8_t* row, int64_t k, __mmask16 m = 0xFFFF) {
  if constexpr (K == FKind::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k);
    if constexpr (K == FKind::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

// out[i * ldo] = dot(row, x_i) for A activation rows; the row is loaded once.
template <FKind K, int A>
void DotRow(const uint8_t* row, const float* x, int64_t ldx, int64_t n, float* out, int64_t ldo) {
  constexpr int U = A == 1 ? 4 : (A == 2 ? 2 : 1);  // unroll to hide FMA latency
  __m512 acc[A][U];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) acc[i][u] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 * U <= n; k += 16 * U) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) {
      const __m512 w = Load16<K>(row, k + 16 * u);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) acc[i][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + i * ldx + k + 16 * u), acc[i][u]);
    }
  }
  for (; k < n; k += 16) {
    const __mmask16 m = TailMask(n - k);
    const __m512 w = Load16<K>(row, k, m);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + i * ldx + k), acc[i][0]);
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    __m512 s = acc[i][0];
    KVS_UNROLL
    for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[i][u]);
    out[i * ldo] = _mm512_reduce_add_ps(s);
  }
}

template <FKind K>
void DirectTile(const TileArgs& t) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const uint8_t* row = t.w + r * t.row_bytes;
    int64_t i = 0;
    for (; i + 3 <= t.m; i += 3) DotRow<K, 3>(row, t.x + i * t.ldx, t.ldx, t.cols, t.y + i * t.ldy + r, t.ldy);
    if (t.m - i == 2) DotRow<K, 2>(row, t.x + i * t.ldx, t.ldx, t.cols, t.y + i * t.ldy + r, t.ldy);
    if (t.m - i == 1) DotRow<K, 1>(row, t.x + i * t.ldx, t.ldx, t.cols, t.y + i * t.ldy + r, t.ldy);
  }
}

// panel[k][0..32) = W[rows[0..32)][k0 + k] as f32 for k in [0, kn); columns
// past kn (up to the next multiple of 16) are written as zeros.
template <FKind K>
void PackPanel(const uint8_t* const rows[kR], int64_t k0, int64_t kn, float* panel) {
  for (int64_t k = 0; k < kn; k += 16) {
    const __mmask16 m = TailMask(kn - k);
    for (int half = 0; half < 2; ++half) {
      __m512i v[16];
      KVS_UNROLL
      for (int r = 0; r < 16; ++r) v[r] = _mm512_castps_si512(Load16<K>(rows[16 * half + r], k0 + k, m));
      Transpose16x16(v);
      const int64_t cols = std::min<int64_t>(16, kn - k);
      for (int j = 0; j < cols; ++j) _mm512_store_si512(panel + (k + j) * kR + 16 * half, v[j]);
    }
  }
}

template <int A>
void MicroF(const float* panel, int64_t kn, const float* x, int64_t ldx, float* y, int64_t ldy, __mmask16 m0,
            __mmask16 m1, bool accumulate) {
  __m512 acc[A][2];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kn; ++k) {
    const __m512 w0 = _mm512_load_ps(panel + k * kR);
    const __m512 w1 = _mm512_load_ps(panel + k * kR + 16);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
      acc[i][0] = _mm512_fmadd_ps(w0, xb, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(w1, xb, acc[i][1]);
    }
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    float* yi = y + i * ldy;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, yi));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, yi + 16));
    }
    _mm512_mask_storeu_ps(yi, m0, acc[i][0]);
    _mm512_mask_storeu_ps(yi + 16, m1, acc[i][1]);
  }
}

// Loop order: kNb weight panels (kNb x 32 rows x kKc columns) are packed
// together, and each 12-row group of activations is run against all of
// them in turn, so its kKc columns (6 KiB) stay in L1 for kNb calls. With
// one panel at a time, every call read its activations afresh from L2/L3
// (the previous pass over all m rows had pushed them out) and the
// microkernel, at 91-95 % of the FMA peak on cache-resident data, ran the
// GEMM at 55-77 %. kernels_bench Model/M/avx512/F16/m:512, interleaved:
// one thread (rated by CPU time) 132-177 -> 175-182 GFLOP/s, two threads
// 260-325 -> 274-349.
template <FKind K>
void PanelTile(const TileArgs& t) {
  auto* panels = reinterpret_cast<float*>(ThreadScratch(ScratchSlot::kPanel, kNb * kKc * kR * sizeof(float)));
  for (int64_t r1 = 0; r1 < t.rows; r1 += kNb * kR) {
    const int nb = static_cast<int>(std::min<int64_t>(kNb, (t.rows - r1 + kR - 1) / kR));
    for (int64_t k0 = 0; k0 < t.cols; k0 += kKc) {
      const int64_t kn = std::min(kKc, t.cols - k0);
      const bool acc = k0 > 0;
      __mmask16 m0s[kNb], m1s[kNb];
      for (int j = 0; j < nb; ++j) {
        const int64_t r0 = r1 + j * kR;
        const int64_t valid = std::min<int64_t>(kR, t.rows - r0);
        m0s[j] = TailMask(valid);
        m1s[j] = TailMask(std::max<int64_t>(0, valid - 16));
        const uint8_t* rows[kR];
        for (int r = 0; r < kR; ++r) rows[r] = t.w + std::min<int64_t>(r0 + r, t.rows - 1) * t.row_bytes;
        PackPanel<K>(rows, k0, kn, panels + j * kKc * kR);
      }
      for (int64_t i0 = 0; i0 < t.m; i0 += kA) {
        const float* x = t.x + i0 * t.ldx + k0;
        for (int j = 0; j < nb; ++j) {
          const float* panel = panels + j * kKc * kR;
          float* y = t.y + i0 * t.ldy + r1 + j * kR;
          const __mmask16 m0 = m0s[j], m1 = m1s[j];
          switch (std::min<int64_t>(kA, t.m - i0)) {
            case 1: MicroF<1>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 2: MicroF<2>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 3: MicroF<3>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 4: MicroF<4>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 5: MicroF<5>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 6: MicroF<6>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 7: MicroF<7>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 8: MicroF<8>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 9: MicroF<9>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 10: MicroF<10>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            case 11: MicroF<11>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
            default: MicroF<12>(panel, kn, x, t.ldx, y, t.ldy, m0, m1, acc); break;
          }
        }
      }
    }
  }
}

template <FKind K>
void TileFloat(const TileArgs& t) {
  if (t.m < kPanelMinM) {
    DirectTile<K>(t);
  } else {
    PanelTile<K>(t);
  }
}

}  // namespace

void TileF32(const TileArgs& a) { TileFloat<FKind::kF32>(a); }
void TileF16(const TileArgs& a) { TileFloat<FKind::kF16>(a); }
void TileBF16(const TileArgs& a) { TileFloat<FKind::kBF16>(a); }

}  // namespace kvs::kernels::avx512
