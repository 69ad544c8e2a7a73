// CPU feature detection, done once at start-up; kernels pick their variant
// from it. KVSERVE_FORCE_SCALAR=1 in the environment forces the scalar paths.
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
  bool avxvnni = false;
  std::string Describe() const;
};

// Detected once; honours KVSERVE_FORCE_SCALAR.
const CpuFeatures& GetCpuFeatures();

}  // namespace kvs
