// AVX2 variant of the kernel table's element-wise, normalisation, storage-
// conversion and activation-quantization ops: ops_impl.h over Avx2Lanes.
// Everything AVX2-specific (no masks: vmaskmovps tails; 2^n through the
// exponent bits; the pack/permute int8 store) lives in lanes_avx2.h.
#include "kernels/isa_decls.h"
#include "kernels/lanes_avx2.h"
#include "kernels/ops_impl.h"

KVS_DEFINE_LANE_OPS(avx2, ::kvs::kernels::Avx2Lanes)
