// Portable kernel API. Every function has a scalar reference implementation
// and, where it matters, AVX2/FMA (and AVX-512) variants; the variant is
// chosen once at start-up from GetCpuFeatures() (KVSERVE_ISA=scalar|avx2|
// avx512 caps it). Callers never see which one runs.
// Thread-safety: all functions are reentrant; MatMul uses the given pool.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "base/thread_pool.h"

namespace kvs::kernels {

// ---- Quantization formats (bit-compatible with GGUF files written by
// llama.cpp's quantizer). n must be a multiple of the type's block size.
// QuantizeRow writes RowBytes(t, n) bytes: the same bytes as llama.cpp's
// reference (non-imatrix) quantizers. DequantizeRow returns the same floats
// as ggml's dequantizers. Both also accept Q8_K, the internal activation
// format of K-quant dot products (block layouts: kernels/quant_formats.h).
// Quantized types need finite input (the reference's float -> int
// conversions are undefined for NaN).
void QuantizeRow(DType t, const float* x, void* y, int64_t n);
void DequantizeRow(DType t, const void* x, float* y, int64_t n);
// F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K.
bool CanQuantize(DType t);

// A weight matrix W [rows, cols] stored row-major, each row in `type`
// (row_bytes = RowBytes(type, cols)). Data is not owned (usually the mmap).
// `packed`, when set, is the same matrix as PackWeights wrote it (also not
// owned); the vector kernels then read it instead of `data`, which must
// stay valid too (the scalar kernels and embedding lookups read rows).
struct MatView {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
  const void* packed = nullptr;
};

// Bytes of the packed (interleaved, kernels/packed.h) copy of a matrix of
// this type and shape, or 0 when the active kernels have no use for one
// (F32, F16, BF16; cols not whole blocks; the scalar variant). About the
// size of the original rows.
int64_t PackedBytes(DType t, int64_t rows, int64_t cols);
// Writes w's packed copy to out (PackedBytes bytes, 64-byte aligned), split
// over the pool. Decode reads weights at memory speed only when packed.
void PackWeights(const MatView& w, void* out, ThreadPool& pool);
// BF16 matrices have panels of their own (kernels/packed.h), read by the
// avx512bf16 variant only: bytes of a [rows, cols] matrix's panels, or 0
// when the active kernels read BF16 rows.
int64_t PackedBf16Bytes(int64_t rows, int64_t cols);
// Writes one such panel (Bf16PanelBytes(cols) bytes, 64-byte aligned): rows
// [16q, 16q + 16) of the matrix, given as `valid` (1..16) pointers to bf16
// rows of cols values; the panels of a matrix follow each other.
void PackBf16Panel(const uint16_t* const* rows, int valid, int64_t cols, void* panel);

// y[m, w.rows] = x[m, w.cols] · W^T. x and y are dense row-major f32 and
// must not overlap. Activations are converted internally to what the weight
// type's dot product needs (e.g. Q8_0/Q8_K blocks), as llama.cpp does.
// Weight types: all that CanQuantize accepts. Results are the
// same whatever the pool size; one call at a time per pool.
void MatMul(const MatView& w, const float* x, int64_t m, float* y, ThreadPool& pool);

// Several projections of the same activations in one call: for j < n,
// ys[j][m, ws[j].rows] = x[m, cols] · ws[j]^T, with every ws[j].cols equal
// (e.g. a layer's q/k/v, or gate/up). Same results as n MatMul calls, but one
// fork-join of the pool and one activation quantization per weight type,
// which matters for decode (small m). 1 <= n <= 8.
void MatMulMany(const MatView* ws, float* const* ys, int n, const float* x, int64_t m, ThreadPool& pool);

// A gated FFN's first half: y[m, F] = silu(x · gate^T) * (x · up^T), with
// gate and up [F, cols]. up_out [m, F] receives x · up^T (scratch). Each
// thread computes the same rows of gate and up and applies the SiLU product
// to them while they are in its cache (one fork-join, no extra pass).
// Same y as MatMulMany into (y, up_out) followed by SiluMul(y, up_out, y).
void GatedMatMul(const MatView& gate, const MatView& up, const float* x, int64_t m, float* y, float* up_out,
                 ThreadPool& pool);

// ---- Elementwise and row ops on f32 (x and out may alias unless noted).
// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]
void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps);
// out[i] = silu(gate[i]) * up[i]
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = a[i] + b[i]
void Add(const float* a, const float* b, float* out, int64_t n);
// y[i] += a * x[i]
void Axpy(float a, const float* x, float* y, int64_t n);
float Dot(const float* a, const float* b, int64_t n);
// In-place softmax over n values; returns nothing, numerically stable.
void Softmax(float* x, int64_t n);
// Index of the largest of x[0, n) (n >= 1), the first on ties: greedy
// decoding's choice. NaNs are never the answer unless x[0] is one, when 0 is
// returned (what a scalar `x[i] > best` scan from x[0] gives).
int64_t ArgMax(const float* x, int64_t n);

// Converts a row between f32 and a storage type (F32, F16, BF16, Q8_0, Q4_0, Q4_1)
// for the KV cache; n multiple of the block size. Same bytes as QuantizeRow.
void ConvertRowFromF32(DType t, const float* x, void* y, int64_t n);

// Name of the kernel variant in use ("avx512bf16", "avx512", "avx2" or "scalar"), for logs.
const char* KernelVariantName();

// Whether the kernel variant in use multiplies BF16 matrices with native
// bf16 dot products (AVX512_BF16), i.e. twice the f32 multiply-adds per
// instruction; elsewhere BF16 matrices are widened to f32 and gain nothing.
bool NativeBf16Dot();

}  // namespace kvs::kernels
