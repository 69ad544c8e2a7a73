// AVX-512 variant of the kernel table's element-wise, normalisation,
// storage-conversion and activation-quantization ops: ops_impl.h over
// Avx512Lanes. Everything AVX-512-specific (masked tails, vscalefps,
// saturating int8 stores) lives in lanes_avx512.h.
#include "kernels/isa_decls.h"
#include "kernels/lanes_avx512.h"
#include "kernels/ops_impl.h"

KVS_DEFINE_LANE_OPS(avx512, ::kvs::kernels::Avx512Lanes)
