// Public row quantization entry points (QuantizeRow, DequantizeRow,
// CanQuantize, ConvertRowFromF32). The quantizers are the scalar reference
// ones (they define the bytes); ConvertRowFromF32 and DequantizeRow, on the
// hot path of the KV cache and embedding lookups, go through the vectorised
// variant, which produces the same bytes / floats.
#include <cstring>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/quant_ref.h"

namespace kvs::kernels {
namespace {

void CheckMultiple(DType t, int64_t n) {
  KVS_CHECK_MSG(n >= 0 && n % Traits(t).block_size == 0, "{} row of {} elements is not whole blocks",
                DTypeName(t), n);
}

}  // namespace

bool CanQuantize(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kQ3_K:
    case DType::kQ2_K:
      return true;
    default:
      return false;
  }
}

void QuantizeRow(DType t, const float* x, void* y, int64_t n) {
  CheckMultiple(t, n);
  switch (t) {
    case DType::kF32: std::memcpy(y, x, static_cast<size_t>(n) * 4); return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToF16(x[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToBF16(x[i]);
      return;
    }
    case DType::kQ8_0: QuantizeRowQ8_0Ref(x, static_cast<BlockQ8_0*>(y), n); return;
    case DType::kQ4_0: QuantizeRowQ4_0Ref(x, static_cast<BlockQ4_0*>(y), n); return;
    case DType::kQ4_K: QuantizeRowQ4_KRef(x, static_cast<BlockQ4_K*>(y), n); return;
    case DType::kQ5_K: QuantizeRowQ5_KRef(x, static_cast<BlockQ5_K*>(y), n); return;
    case DType::kQ6_K: QuantizeRowQ6_KRef(x, static_cast<BlockQ6_K*>(y), n); return;
    case DType::kQ8_K: QuantizeRowQ8_KRef(x, static_cast<BlockQ8_K*>(y), n); return;
    case DType::kQ5_0: QuantizeRowQ5_0Ref(x, static_cast<BlockQ5_0*>(y), n); return;
    case DType::kQ4_1: QuantizeRowQ4_1Ref(x, static_cast<BlockQ4_1*>(y), n); return;
    case DType::kIQ4_NL: QuantizeRowIQ4_NLRef(x, static_cast<BlockIQ4_NL*>(y), n); return;
    case DType::kIQ4_XS: QuantizeRowIQ4_XSRef(x, static_cast<BlockIQ4_XS*>(y), n); return;
    case DType::kQ3_K: QuantizeRowQ3_KRef(x, static_cast<BlockQ3_K*>(y), n); return;
    case DType::kQ2_K: QuantizeRowQ2_KRef(x, static_cast<BlockQ2_K*>(y), n); return;
    default: KVS_CHECK_MSG(false, "QuantizeRow: unsupported type {}", DTypeName(t));
  }
}

void DequantizeRowRef(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(y, x, static_cast<size_t>(n) * 4); return;
    case DType::kF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = F16ToF32(in[i]);
      return;
    }
    case DType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = BF16ToF32(in[i]);
      return;
    }
    case DType::kQ8_0: DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(x), y, n); return;
    case DType::kQ4_0: DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(x), y, n); return;
    case DType::kQ4_K: DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(x), y, n); return;
    case DType::kQ5_K: DequantizeRowQ5_K(static_cast<const BlockQ5_K*>(x), y, n); return;
    case DType::kQ6_K: DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(x), y, n); return;
    case DType::kQ8_K: DequantizeRowQ8_K(static_cast<const BlockQ8_K*>(x), y, n); return;
    case DType::kQ5_0: DequantizeRowQ5_0(static_cast<const BlockQ5_0*>(x), y, n); return;
    case DType::kQ4_1: DequantizeRowQ4_1(static_cast<const BlockQ4_1*>(x), y, n); return;
    case DType::kIQ4_NL: DequantizeRowIQ4_NL(static_cast<const BlockIQ4_NL*>(x), y, n); return;
    case DType::kIQ4_XS: DequantizeRowIQ4_XS(static_cast<const BlockIQ4_XS*>(x), y, n); return;
    case DType::kQ3_K: DequantizeRowQ3_K(static_cast<const BlockQ3_K*>(x), y, n); return;
    case DType::kQ2_K: DequantizeRowQ2_K(static_cast<const BlockQ2_K*>(x), y, n); return;
    default: KVS_CHECK_MSG(false, "DequantizeRow: unsupported type {}", DTypeName(t));
  }
}

void DequantizeRow(DType t, const void* x, float* y, int64_t n) {
  CheckMultiple(t, n);
  ActiveKernels().dequantize_row(t, x, y, n);
}

void ConvertRowFromF32(DType t, const float* x, void* y, int64_t n) {
  KVS_CHECK_MSG(t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0 ||
                    t == DType::kQ4_1,
                "ConvertRowFromF32: unsupported type {}", DTypeName(t));
  CheckMultiple(t, n);
  // 4-bit KV through the reference quantizers: a KV write is a few rows per
  // token, nothing next to the forward pass that produced them.
  if (t == DType::kQ4_0 || t == DType::kQ4_1) return QuantizeRow(t, x, y, n);
  ActiveKernels().convert_from_f32(t, x, y, n);
}

}  // namespace kvs::kernels
