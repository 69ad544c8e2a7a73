// AVX-512 instantiation of the tiled attention kernel over the kernels' lane
// traits (kernels/lanes_avx512.h: 16 lanes, 32 registers). Compiled with
// -mavx512f -mavx512bw -mavx512vl -mfma -mf16c; only called when the CPU has
// them.
#include "kernels/lanes_avx512.h"
#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {

KernelInfo KernelAvx512() { return MakeKernel<kernels::Avx512Lanes>("avx512"); }

}  // namespace kvs::kvcache::internal
