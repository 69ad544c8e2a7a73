// AVX2 MatMul for float weights (F32, F16, BF16) with f32 activations.
//
// Small m: each weight row is converted on the fly and dotted with all
// activation rows at once (memory bound; the row is read once).
// Larger m: a register-blocked GEMM. Weight panels of 16 rows x kKc columns
// are converted to f32 once and transposed to [k][16], kNb at a time; the 6x16
// microkernel keeps 12 accumulators in registers, loading 2 weight vectors
// and broadcasting 6 activations per k.
#include <algorithm>

#include "base/fp16.h"
#include "kernels/avx2_util.h"
#include "kernels/isa_decls.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx2 {
namespace {

enum class FKind { kF32, kF16, kBF16 };

constexpr int kR = 16;          // weight rows per panel (2 vectors)
constexpr int kA = 6;           // activation rows per microkernel call
constexpr int64_t kKc = 256;    // columns per panel (16 KiB of f32)
constexpr int kNb = 4;          // panels packed together (64 KiB, in L2)
constexpr int64_t kPanelMinM = 4;

template <FKind K>
inline __m256 Load8(const uint8_t* row, int64_t k) {
  if constexpr (K == FKind::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k));
    if constexpr (K == FKind::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <FKind K>
inline float Load1(const uint8_t* row, int64_t k) {
  if constexpr (K == FKind::kF32) {
    return reinterpret_cast<const float*>(row)[k];
  } else if constexpr (K == FKind::kF16) {
    return F16ToF32(reinterpret_cast<const uint16_t*>(row)[k]);
  } else {
    return BF16ToF32(reinterpret_cast<const uint16_t*>(row)[k]);
  }
}

// out[i] = dot(row, x[i]) for A activation rows; the row is loaded once.
template <FKind K, int A>
void DotRow(const uint8_t* row, const float* x, int64_t ldx, int64_t n, float* out, int64_t ldo) {
  constexpr int U = A == 1 ? 4 : (A == 2 ? 2 : 1);  // unroll to hide FMA latency
  __m256 acc[A][U];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) acc[i][u] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 * U <= n; k += 8 * U) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) {
      const __m256 w = Load8<K>(row, k + 8 * u);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) acc[i][u] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i * ldx + k + 8 * u), acc[i][u]);
    }
  }
  for (; k + 8 <= n; k += 8) {
    const __m256 w = Load8<K>(row, k);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i][0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i * ldx + k), acc[i][0]);
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    __m256 s = acc[i][0];
    KVS_UNROLL
    for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[i][u]);
    float sum = HSum(s);
    for (int64_t j = k; j < n; ++j) sum += Load1<K>(row, j) * x[i * ldx + j];
    out[i * ldo] = sum;
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

// panel[k][0..16) = W[rows[0..16)][k0 + k] as f32, k in [0, kn).
template <FKind K>
void PackPanel(const uint8_t* const rows[kR], int64_t k0, int64_t kn, float* panel) {
  int64_t k = 0;
  for (; k + 8 <= kn; k += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256i v[8];
      KVS_UNROLL
      for (int r = 0; r < 8; ++r) v[r] = _mm256_castps_si256(Load8<K>(rows[8 * half + r], k0 + k));
      Transpose8x8(v);
      KVS_UNROLL
      for (int j = 0; j < 8; ++j) {
        _mm256_store_ps(panel + (k + j) * kR + 8 * half, _mm256_castsi256_ps(v[j]));
      }
    }
  }
  for (; k < kn; ++k) {
    for (int r = 0; r < kR; ++r) panel[k * kR + r] = Load1<K>(rows[r], k0 + k);
  }
}

template <int A>
void MicroF(const float* panel, int64_t kn, const float* x, int64_t ldx, float* y, int64_t ldy, int valid,
            bool accumulate) {
  __m256 acc[A][2];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kn; ++k) {
    const __m256 w0 = _mm256_load_ps(panel + k * kR);
    const __m256 w1 = _mm256_load_ps(panel + k * kR + 8);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * ldx + k);
      acc[i][0] = _mm256_fmadd_ps(w0, xb, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(w1, xb, acc[i][1]);
    }
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    float* yi = y + i * ldy;
    if (valid == kR) {
      if (accumulate) {
        acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(yi));
        acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(yi + 8));
      }
      _mm256_storeu_ps(yi, acc[i][0]);
      _mm256_storeu_ps(yi + 8, acc[i][1]);
    } else {
      alignas(32) float tmp[kR];
      _mm256_store_ps(tmp, acc[i][0]);
      _mm256_store_ps(tmp + 8, acc[i][1]);
      for (int r = 0; r < valid; ++r) yi[r] = accumulate ? yi[r] + tmp[r] : tmp[r];
    }
  }
}

// Loop order (as in the AVX-512 GEMM): kNb weight panels are packed
// together and each 6-row activation group runs against all of them in
// turn, so its kKc columns (6 KiB) stay in L1 for kNb microkernel calls
// instead of being read afresh from L2/L3 by every call. kernels_bench
// Model/M/avx2/F16/m:512, one thread rated by CPU time, 3 interleaved
// rounds: 98-100 -> 107 GFLOP/s (kKc 128 with 4 or 8 panels: the same;
// 2 panels: 102-103).
template <FKind K>
void PanelTile(const TileArgs& t) {
  auto* panels = reinterpret_cast<float*>(ThreadScratch(ScratchSlot::kPanel, kNb * kKc * kR * sizeof(float)));
  for (int64_t r1 = 0; r1 < t.rows; r1 += kNb * kR) {
    const int nb = static_cast<int>(std::min<int64_t>(kNb, (t.rows - r1 + kR - 1) / kR));
    int valid[kNb];
    for (int64_t k0 = 0; k0 < t.cols; k0 += kKc) {
      const int64_t kn = std::min(kKc, t.cols - k0);
      const bool acc = k0 > 0;
      for (int j = 0; j < nb; ++j) {
        const int64_t r0 = r1 + j * kR;
        valid[j] = static_cast<int>(std::min<int64_t>(kR, t.rows - r0));
        const uint8_t* rows[kR];
        for (int r = 0; r < kR; ++r) rows[r] = t.w + std::min<int64_t>(r0 + r, t.rows - 1) * t.row_bytes;
        PackPanel<K>(rows, k0, kn, panels + j * kKc * kR);
      }
      for (int64_t i0 = 0; i0 < t.m; i0 += kA) {
        const float* x = t.x + i0 * t.ldx + k0;
        for (int j = 0; j < nb; ++j) {
          const float* panel = panels + j * kKc * kR;
          float* y = t.y + i0 * t.ldy + r1 + j * kR;
          switch (std::min<int64_t>(kA, t.m - i0)) {
            case 1: MicroF<1>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
            case 2: MicroF<2>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
            case 3: MicroF<3>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
            case 4: MicroF<4>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
            case 5: MicroF<5>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
            default: MicroF<6>(panel, kn, x, t.ldx, y, t.ldy, valid[j], acc); break;
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

}  // namespace kvs::kernels::avx2
