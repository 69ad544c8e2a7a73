#include "base/cpu.h"

#include <cstdio>
#include <cstdlib>

namespace kvs {

std::string CpuFeatures::Describe() const {
  std::string s;
  auto add = [&](bool b, const char* n) { if (b) { if (!s.empty()) s += ' '; s += n; } };
  add(avx2, "avx2"); add(fma, "fma"); add(f16c, "f16c"); add(avx512f, "avx512f");
  add(avx512bw, "avx512bw"); add(avx512vl, "avx512vl"); add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  add(avxvnni, "avxvnni");
  return s.empty() ? "scalar" : s;
}

namespace {

// KVSERVE_ISA caps the features the vector paths may use: "scalar" (none),
// "avx2" (AVX2/FMA/F16C, no AVX-512), "avx512" (AVX-512 without BF16),
// "avx512bf16" (what the CPU has). Unknown values and paths the CPU lacks
// are reported once and ignored.
void ApplyIsaCap(CpuFeatures& f) {
  const char* isa = std::getenv("KVSERVE_ISA");
  if (isa == nullptr || isa[0] == '\0') return;
  const std::string v = isa;
  if (v == "scalar") {
    f = CpuFeatures{};
  } else if (v == "avx2") {
    if (!f.avx2) std::fprintf(stderr, "kvserve: KVSERVE_ISA=avx2 but this CPU has no AVX2; using scalar\n");
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
  } else if (v == "avx512") {
    if (!f.avx512f) std::fprintf(stderr, "kvserve: KVSERVE_ISA=avx512 but this CPU has no AVX-512; using %s\n",
                                 f.avx2 ? "avx2" : "scalar");
    f.avx512bf16 = false;
  } else if (v == "avx512bf16") {
    if (!f.avx512bf16) {
      std::fprintf(stderr, "kvserve: KVSERVE_ISA=avx512bf16 but this CPU has no AVX512_BF16; using %s\n",
                   f.avx512f ? "avx512" : (f.avx2 ? "avx2" : "scalar"));
    }
  } else {
    std::fprintf(stderr, "kvserve: ignoring KVSERVE_ISA=%s (expected scalar, avx2, avx512 or avx512bf16)\n", isa);
  }
}

}  // namespace

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
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#if defined(__clang__)
    f.avxvnni = false;  // clang 14 does not know this feature name; nothing needs it there.
#else
    f.avxvnni = __builtin_cpu_supports("avxvnni");
#endif
    if (!f.avx2) f.f16c = false;
    ApplyIsaCap(f);
    return f;
  }();
  return features;
}

}  // namespace kvs
