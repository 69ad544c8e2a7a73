// CPU feature detection, done once at start-up; kernels pick their variant
// from it. KVSERVE_ISA=scalar|avx2|avx512|avx512bf16 in the environment caps
// the paths used (e.g. avx2 runs the AVX2 kernels on an AVX-512 machine, as
// on CPUs without AVX-512; avx512 leaves out AVX512_BF16);
// KVSERVE_FORCE_SCALAR=1 is the same as KVSERVE_ISA=scalar.
#pragma once

#include <string>

namespace kvs {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;  // vdpbf16ps (BF16 weights' dot products)
  bool avxvnni = false;
  std::string Describe() const;
};

// Detected once; honours KVSERVE_ISA and KVSERVE_FORCE_SCALAR.
const CpuFeatures& GetCpuFeatures();

}  // namespace kvs
