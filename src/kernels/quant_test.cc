// Checks the quantization formats against the independent NumPy reference
// (tools/quant_ref.py): identical bytes from QuantizeRow and identical floats
// from DequantizeRow, over inputs chosen to hit the awkward paths (all-zero
// blocks, subnormal intermediates, f16 overflow, rounding ties, outliers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/fp16.h"
#include "base/test_util.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"

namespace kvs::kernels {
namespace {

constexpr int64_t kRowLen = 512;  // two K-quant super-blocks per row
constexpr int64_t kRows = 6;

struct Dist {
  std::string name;
  std::vector<float> values;  // kRows * kRowLen
};

std::vector<Dist> MakeDistributions() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  const int64_t n = kRows * kRowLen;
  auto make = [&](const std::string& name, auto gen) {
    Dist d{name, std::vector<float>(static_cast<size_t>(n))};
    for (int64_t i = 0; i < n; ++i) d.values[static_cast<size_t>(i)] = gen(i);
    return d;
  };
  std::vector<Dist> out;
  out.push_back(make("normal", [&](int64_t) { return normal(rng); }));
  out.push_back(make("uniform", [&](int64_t) { return uni(rng); }));
  out.push_back(make("weights", [&](int64_t) { return 0.02f * normal(rng); }));
  out.push_back(make("zeros", [&](int64_t) { return 0.f; }));
  out.push_back(make("tiny", [&](int64_t) { return 1e-30f * normal(rng); }));
  // x*x and the weighted sums underflow into subnormals.
  out.push_back(make("small", [&](int64_t) { return 1e-14f * normal(rng); }));
  out.push_back(make("huge", [&](int64_t) { return 1e6f * normal(rng); }));
  // f16 scales overflow to inf.
  out.push_back(make("enormous", [&](int64_t) { return 1e9f * normal(rng); }));
  out.push_back(make("outliers", [&](int64_t i) {
    const float v = normal(rng);
    return i % 37 == 5 ? v * 100.f : (i % 101 == 7 ? -250.f : v);
  }));
  out.push_back(make("positive", [&](int64_t) { return 1.25f + uni(rng); }));
  // Constant runs: max == min sub-blocks, equal magnitudes of both signs.
  out.push_back(make("constant", [&](int64_t i) {
    const int64_t blk = i / 32;
    return blk % 3 == 0 ? -3.f : (blk % 3 == 1 ? 0.75f : ((i & 1) ? 2.f : -2.f));
  }));
  out.push_back(make("sparse", [&](int64_t i) { return i % 29 == 3 ? normal(rng) : 0.f; }));
  // Half-integers with a block maximum of 127: Q8_0 scale 1, exact ties.
  out.push_back(make("ties", [&](int64_t i) {
    if (i % 32 == 0) return 127.f;
    return static_cast<float>(static_cast<int>(rng() % 255) - 127) + 0.5f;
  }));
  out.push_back(make("mixed_scale", [&](int64_t i) {
    const float scale = std::pow(10.f, static_cast<float>((i / 16) % 9) - 4.f);
    return scale * normal(rng);
  }));
  return out;
}

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,   DType::kQ4_0,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,   DType::kQ8_K,   DType::kQ5_0,
                        DType::kQ4_1, DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ3_K, DType::kQ2_K};

bool NumpyAvailable() {
  if (::access("/usr/bin/python3", X_OK) != 0) return false;
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

template <typename T>
void WriteFile(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  ASSERT_TRUE(f.good()) << path;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool SameFloat(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

TEST(QuantTest, MatchesNumpyReference) {
  if (!NumpyAvailable()) GTEST_SKIP() << "/usr/bin/python3 with numpy is not available; skipping";
  const auto dir = kvs::testing::TempDir("quant");
  const std::string script = kvs::testing::SourceDir() + "/tools/quant_ref.py";
  const std::vector<Dist> dists = MakeDistributions();

  std::string manifest;
  for (const Dist& d : dists) {
    const std::string in = (dir / (d.name + ".f32")).string();
    WriteFile(in, d.values);
    for (DType t : kTypes) {
      const std::string stem = (dir / (std::string(DTypeName(t)) + "_" + d.name)).string();
      manifest += std::string(DTypeName(t)) + " " + std::to_string(kRowLen) + " " + in + " " + stem +
                  ".q " + stem + ".deq\n";
    }
  }
  const std::string manifest_path = (dir / "manifest.txt").string();
  {
    std::ofstream f(manifest_path);
    f << manifest;
  }
  const std::string cmd = "/usr/bin/python3 " + script + " batch " + manifest_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  int compared = 0;
  for (const Dist& d : dists) {
    for (DType t : kTypes) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " on " + d.name);
      const std::string stem = (dir / (std::string(DTypeName(t)) + "_" + d.name)).string();
      const std::vector<uint8_t> ref_q = ReadFile(stem + ".q");
      const std::vector<uint8_t> ref_deq_bytes = ReadFile(stem + ".deq");
      const int64_t row_bytes = RowBytes(t, kRowLen);
      ASSERT_EQ(static_cast<int64_t>(ref_q.size()), row_bytes * kRows);
      ASSERT_EQ(ref_deq_bytes.size(), d.values.size() * sizeof(float));
      std::vector<uint8_t> q(static_cast<size_t>(row_bytes * kRows));
      std::vector<float> deq(d.values.size());
      for (int64_t r = 0; r < kRows; ++r) {
        QuantizeRow(t, d.values.data() + r * kRowLen, q.data() + r * row_bytes, kRowLen);
        DequantizeRow(t, q.data() + r * row_bytes, deq.data() + r * kRowLen, kRowLen);
      }
      const int64_t block_bytes = Traits(t).type_size;
      for (size_t i = 0; i < q.size(); ++i) {
        ASSERT_EQ(q[i], ref_q[i]) << "first differing byte " << i << " (block " << i / block_bytes
                                  << ", byte " << i % block_bytes << ")";
      }
      for (size_t i = 0; i < deq.size(); ++i) {
        float ref;
        std::memcpy(&ref, ref_deq_bytes.data() + 4 * i, 4);
        ASSERT_TRUE(SameFloat(deq[i], ref)) << "element " << i << ": " << deq[i] << " vs " << ref;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(dists.size() * std::size(kTypes)));
  std::filesystem::remove_all(dir);
}

TEST(QuantTest, BlockSizesMatchDTypeTable) {
  EXPECT_EQ(Traits(DType::kQ8_0).type_size, static_cast<int64_t>(sizeof(BlockQ8_0)));
  EXPECT_EQ(Traits(DType::kQ4_0).type_size, static_cast<int64_t>(sizeof(BlockQ4_0)));
  EXPECT_EQ(Traits(DType::kQ4_K).type_size, static_cast<int64_t>(sizeof(BlockQ4_K)));
  EXPECT_EQ(Traits(DType::kQ5_K).type_size, static_cast<int64_t>(sizeof(BlockQ5_K)));
  EXPECT_EQ(Traits(DType::kQ6_K).type_size, static_cast<int64_t>(sizeof(BlockQ6_K)));
  EXPECT_EQ(Traits(DType::kQ8_K).type_size, static_cast<int64_t>(sizeof(BlockQ8_K)));
  EXPECT_EQ(Traits(DType::kQ5_0).type_size, static_cast<int64_t>(sizeof(BlockQ5_0)));
  EXPECT_EQ(Traits(DType::kQ4_1).type_size, static_cast<int64_t>(sizeof(BlockQ4_1)));
  EXPECT_EQ(Traits(DType::kIQ4_NL).type_size, static_cast<int64_t>(sizeof(BlockIQ4_NL)));
  EXPECT_EQ(Traits(DType::kIQ4_XS).type_size, static_cast<int64_t>(sizeof(BlockIQ4_XS)));
  EXPECT_EQ(Traits(DType::kQ3_K).type_size, static_cast<int64_t>(sizeof(BlockQ3_K)));
  EXPECT_EQ(Traits(DType::kQ2_K).type_size, static_cast<int64_t>(sizeof(BlockQ2_K)));
  EXPECT_EQ(Traits(DType::kIQ4_NL).block_size, kQK0);
  EXPECT_EQ(Traits(DType::kIQ4_XS).block_size, kQKK);
  EXPECT_EQ(DTypeFromName("iq4_xs"), DType::kIQ4_XS);
  EXPECT_EQ(Traits(DType::kQ8_0).block_size, kQK0);
  EXPECT_EQ(Traits(DType::kQ4_K).block_size, kQKK);
  EXPECT_TRUE(CanQuantize(DType::kQ6_K));
  EXPECT_TRUE(CanQuantize(DType::kQ5_K));
  EXPECT_TRUE(CanQuantize(DType::kQ3_K));
  EXPECT_TRUE(CanQuantize(DType::kIQ4_NL));
  EXPECT_FALSE(CanQuantize(DType::kQ5_1));
  EXPECT_FALSE(CanQuantize(DType::kQ8_K));  // an activation format, not a weight type
}

// Hand-checked bytes, independent of both implementations.
TEST(QuantTest, KnownBlocks) {
  // All-zero Q4_0 block: the reference divides +0 by -8, storing d = -0.
  std::vector<float> zeros(32, 0.f);
  BlockQ4_0 q4;
  QuantizeRow(DType::kQ4_0, zeros.data(), &q4, 32);
  EXPECT_EQ(q4.d, 0x8000);
  for (uint8_t b : q4.qs) EXPECT_EQ(b, 0x88);

  // Q8_0 with max 127: d = 1 (f16 0x3c00), halves round away from zero.
  std::vector<float> x(32, 0.f);
  x[0] = 127.f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.49999997f;
  BlockQ8_0 q8;
  QuantizeRow(DType::kQ8_0, x.data(), &q8, 32);
  EXPECT_EQ(q8.d, 0x3c00);
  EXPECT_EQ(q8.qs[0], 127);
  EXPECT_EQ(q8.qs[1], 3);
  EXPECT_EQ(q8.qs[2], -3);
  EXPECT_EQ(q8.qs[3], 0);

  // Q4_0: the largest magnitude maps to q = 0 (d = max / -8).
  std::vector<float> y(32, 0.f);
  y[0] = -4.f;
  y[16] = 2.f;
  QuantizeRow(DType::kQ4_0, y.data(), &q4, 32);
  EXPECT_EQ(F16ToF32(q4.d), 0.5f);
  EXPECT_EQ(q4.qs[0] & 0xF, 0);   // -4 / 0.5 + 8 = 0
  EXPECT_EQ(q4.qs[0] >> 4, 12);   //  2 / 0.5 + 8 = 12
}

// Dequantized values stay within the format's resolution of the input.
TEST(QuantTest, RoundTripError) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t n = 4096;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = normal(rng);
  struct Case { DType t; double max_rel_rms; };
  for (const Case c : {Case{DType::kF16, 1e-3}, Case{DType::kBF16, 5e-3}, Case{DType::kQ8_0, 0.01},
                       Case{DType::kQ8_K, 0.01}, Case{DType::kQ6_K, 0.03}, Case{DType::kQ5_K, 0.06},
                       Case{DType::kQ4_K, 0.12}, Case{DType::kQ4_0, 0.15}, Case{DType::kQ5_0, 0.06},
                       Case{DType::kQ4_1, 0.1}, Case{DType::kIQ4_NL, 0.1}, Case{DType::kIQ4_XS, 0.1},
                       Case{DType::kQ3_K, 0.2}, Case{DType::kQ2_K, 0.35}}) {
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(c.t, n)));
    QuantizeRow(c.t, x.data(), q.data(), n);
    DequantizeRow(c.t, q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      ref += double(x[i]) * x[i];
    }
    EXPECT_LT(std::sqrt(err / ref), c.max_rel_rms) << DTypeName(c.t);
  }
}

TEST(QuantTest, ConvertRowFromF32MatchesQuantizeRow) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int64_t n : {32, 64, 96, 1024, 4128}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = normal(rng);
    x[0] = 1e-40f;  // subnormal input
    x[1] = 70000.f;  // f16 overflow
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
      std::vector<uint8_t> a(static_cast<size_t>(RowBytes(t, n))), b(a.size());
      QuantizeRow(t, x.data(), a.data(), n);
      ConvertRowFromF32(t, x.data(), b.data(), n);
      EXPECT_EQ(a, b) << DTypeName(t) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace kvs::kernels
