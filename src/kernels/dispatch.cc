// Builds the per-variant kernel tables. This file is compiled without ISA
// flags: it only takes the addresses of the variant functions, it never
// runs them.
#include "kernels/dispatch.h"

#include "base/cpu.h"
#include "base/status.h"
#include "kernels/isa_decls.h"

namespace kvs::kernels {
namespace {

#define KVS_FILL_TABLE(ns, t)                           \
  do {                                                  \
    (t).tile[static_cast<int>(WType::kF32)] = ns::TileF32;   \
    (t).tile[static_cast<int>(WType::kF16)] = ns::TileF16;   \
    (t).tile[static_cast<int>(WType::kBF16)] = ns::TileBF16; \
    (t).tile[static_cast<int>(WType::kQ8_0)] = ns::TileQ8_0; \
    (t).tile[static_cast<int>(WType::kQ4_0)] = ns::TileQ4_0; \
    (t).tile[static_cast<int>(WType::kQ4_K)] = ns::TileQ4_K; \
    (t).tile[static_cast<int>(WType::kQ5_K)] = ns::TileQ5_K; \
    (t).tile[static_cast<int>(WType::kQ6_K)] = ns::TileQ6_K; \
    (t).tile[static_cast<int>(WType::kQ5_0)] = ns::TileQ5_0; \
    (t).tile[static_cast<int>(WType::kQ4_1)] = ns::TileQ4_1; \
    (t).tile[static_cast<int>(WType::kIQ4_NL)] = ns::TileIQ4_NL; \
    (t).tile[static_cast<int>(WType::kIQ4_XS)] = ns::TileIQ4_XS; \
    (t).tile[static_cast<int>(WType::kQ3_K)] = ns::TileQ3_K; \
    (t).tile[static_cast<int>(WType::kQ2_K)] = ns::TileQ2_K; \
    (t).quantize_acts = ns::QuantizeActs;               \
    (t).rms_norm = ns::RmsNorm;                         \
    (t).silu_mul = ns::SiluMul;                         \
    (t).add = ns::Add;                                  \
    (t).axpy = ns::Axpy;                                \
    (t).dot = ns::Dot;                                  \
    (t).softmax = ns::Softmax;                          \
    (t).convert_from_f32 = ns::ConvertFromF32;          \
    (t).dequantize_row = ns::DequantizeRow;             \
    (t).argmax = ns::ArgMax;                            \
  } while (0)

KernelTable MakeScalarTable() {
  KernelTable t;
  t.isa = Isa::kScalar;
  t.row_granule = 1;
  KVS_FILL_TABLE(scalar, t);
  return t;
}

KernelTable MakeAvx2Table() {
  KernelTable t;
  t.isa = Isa::kAvx2;
  t.row_granule = 16;
  t.reads_packed = true;
  KVS_FILL_TABLE(avx2, t);
  return t;
}

KernelTable MakeAvx512Table() {
  KernelTable t;
  t.isa = Isa::kAvx512;
  t.row_granule = 32;
  t.reads_packed = true;
  KVS_FILL_TABLE(avx512, t);
  return t;
}

KernelTable MakeAvx512Bf16Table() {
  KernelTable t = MakeAvx512Table();
  t.isa = Isa::kAvx512Bf16;
  t.tile[static_cast<int>(WType::kBF16)] = avx512bf16::TileBF16;
  t.bf16_acts = avx512bf16::Bf16Acts;
  t.bf16_acts_rows = avx512bf16::kBf16ActsRows;
  t.reads_packed_bf16 = true;
  return t;
}

#undef KVS_FILL_TABLE

bool HasAvx2() {
  const CpuFeatures& f = GetCpuFeatures();
  return f.avx2 && f.fma && f.f16c;
}

bool HasAvx512() {
  const CpuFeatures& f = GetCpuFeatures();
  return HasAvx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
}

bool HasAvx512Bf16() { return HasAvx512() && GetCpuFeatures().avx512bf16; }

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

const KernelTable* GetKernelTable(Isa isa) {
  static const KernelTable scalar_table = MakeScalarTable();
  static const KernelTable avx2_table = MakeAvx2Table();
  static const KernelTable avx512_table = MakeAvx512Table();
  static const KernelTable avx512bf16_table = MakeAvx512Bf16Table();
  switch (isa) {
    case Isa::kScalar: return &scalar_table;
    case Isa::kAvx2: return HasAvx2() ? &avx2_table : nullptr;
    case Isa::kAvx512: return HasAvx512() ? &avx512_table : nullptr;
    case Isa::kAvx512Bf16: return HasAvx512Bf16() ? &avx512bf16_table : nullptr;
  }
  return nullptr;
}

const KernelTable& ActiveKernels() {
  static const KernelTable* active = [] {
    for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
      if (const KernelTable* t = GetKernelTable(isa)) return t;
    }
    return GetKernelTable(Isa::kScalar);
  }();
  return *active;
}

}  // namespace kvs::kernels
