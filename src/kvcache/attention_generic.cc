// Portable instantiation of the tiled attention kernel over
// kernels::GenericLanes (8 plain floats; the compiler vectorises what the
// baseline ISA allows). The fallback for CPUs without AVX2, and the same
// tiling logic the SIMD variants run, testable on any machine.
#include "kernels/lanes.h"
#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {

KernelInfo KernelGeneric() { return MakeKernel<kernels::GenericLanes>("generic"); }

}  // namespace kvs::kvcache::internal
