// AVX2 instantiation of the tiled attention kernel over the kernels' lane
// traits (kernels/lanes_avx2.h: 8 lanes, 16 registers). Compiled with -mavx2
// -mfma -mf16c; only called when the CPU has them.
#include "kernels/lanes_avx2.h"
#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {

KernelInfo KernelAvx2() { return MakeKernel<kernels::Avx2Lanes>("avx2"); }

}  // namespace kvs::kvcache::internal
