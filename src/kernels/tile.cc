#include "kernels/tile.h"

#include "base/status.h"

namespace kvs::kernels {

bool ToWType(DType t, WType* out) {
  switch (t) {
    case DType::kF32: *out = WType::kF32; return true;
    case DType::kF16: *out = WType::kF16; return true;
    case DType::kBF16: *out = WType::kBF16; return true;
    case DType::kQ8_0: *out = WType::kQ8_0; return true;
    case DType::kQ4_0: *out = WType::kQ4_0; return true;
    case DType::kQ4_K: *out = WType::kQ4_K; return true;
    case DType::kQ5_K: *out = WType::kQ5_K; return true;
    case DType::kQ6_K: *out = WType::kQ6_K; return true;
    case DType::kQ5_0: *out = WType::kQ5_0; return true;
    case DType::kQ4_1: *out = WType::kQ4_1; return true;
    case DType::kIQ4_NL: *out = WType::kIQ4_NL; return true;
    case DType::kIQ4_XS: *out = WType::kIQ4_XS; return true;
    case DType::kQ3_K: *out = WType::kQ3_K; return true;
    case DType::kQ2_K: *out = WType::kQ2_K; return true;
    default: return false;
  }
}

ActLayout MakeActLayout(WType w, int64_t cols) {
  ActLayout l;
  l.wtype = w;
  l.cols = cols;
  switch (w) {
    case WType::kQ8_0:
    case WType::kQ4_0:
    case WType::kQ5_0:
    case WType::kQ4_1:
    case WType::kIQ4_NL: l.act_block = 32; l.aux_group = 32; break;
    case WType::kQ4_K:
    case WType::kQ5_K:
    case WType::kIQ4_XS: l.act_block = 256; l.aux_group = 32; break;
    case WType::kQ6_K:
    case WType::kQ3_K:
    case WType::kQ2_K: l.act_block = 256; l.aux_group = 16; break;
    default: KVS_CHECK_MSG(false, "MakeActLayout: not a quantized weight type");
  }
  l.qs_off = 0;
  l.d_off = RoundUp64(cols);
  l.aux_off = l.d_off + RoundUp64(cols / l.act_block * 4);
  l.row_stride = l.aux_off + RoundUp64(cols / l.aux_group * 4);
  return l;
}

}  // namespace kvs::kernels
