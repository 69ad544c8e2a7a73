#include "base/cpu.h"

#include <cstdlib>

namespace kvs {

std::string CpuFeatures::Describe() const {
  std::string s;
  auto add = [&](bool b, const char* n) { if (b) { if (!s.empty()) s += ' '; s += n; } };
  add(avx2, "avx2"); add(fma, "fma"); add(f16c, "f16c"); add(avx512f, "avx512f");
  add(avx512bw, "avx512bw"); add(avx512vl, "avx512vl"); add(avx512vnni, "avx512vnni");
  add(avxvnni, "avxvnni");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    const char* force = std::getenv("KVSERVE_FORCE_SCALAR");
    if (force != nullptr && force[0] == '1') return f;
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = true;  // every AVX2 CPU has F16C; checked together with avx2.
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__clang__)
    f.avxvnni = false;  // clang 14 does not know this feature name; nothing needs it there.
#else
    f.avxvnni = __builtin_cpu_supports("avxvnni");
#endif
    if (!f.avx2) f.f16c = false;
    return f;
  }();
  return features;
}

}  // namespace kvs
