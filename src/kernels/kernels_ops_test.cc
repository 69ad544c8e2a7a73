// Elementwise ops and storage conversion: every variant against a double
// precision reference. Bounds: a float sum of n terms of one sign, split
// over at most 32 partial sums, is within (n/8 + c) * u of the exact value
// relative to the sum of |terms| (u = 2^-24); exp is accurate to a few u.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kernels_test_util.h"

namespace kvs::kernels {
namespace {

using testing::AvailableVariants;
using testing::kU;

std::vector<int64_t> Sizes() {
  std::vector<int64_t> n;
  for (int64_t i = 1; i <= 40; ++i) n.push_back(i);
  for (int64_t i : {63, 64, 65, 255, 256, 768, 1000, 4099}) n.push_back(i);
  return n;
}

// n floats starting at a misaligned address inside a buffer the caller owns.
struct Buf {
  explicit Buf(int64_t n, int off = 1) : data(static_cast<size_t>(n + 16)), p(data.data() + off) {}
  std::vector<float> data;
  float* p;
};

void Fill(float* p, int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.f, scale);
  for (int64_t i = 0; i < n; ++i) p[i] = normal(rng);
}

TEST(OpsTest, RmsNorm) {
  std::mt19937 rng(1);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf x(n, 1), w(n, 3), out(n, 2);
      Fill(x.p, n, rng, 2.f);
      Fill(w.p, n, rng, 1.f);
      k->rms_norm(x.p, w.p, out.p, n, 1e-5f);
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x.p[i]) * x.p[i];
      const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
      const double tol = (static_cast<double>(n) / 8 + 16) * kU;
      for (int64_t i = 0; i < n; ++i) {
        const double ref = x.p[i] * scale * w.p[i];
        ASSERT_NEAR(out.p[i], ref, tol * std::fabs(ref) + 1e-30) << IsaName(k->isa) << " n=" << n << " i=" << i;
      }
      // In place.
      std::vector<float> copy(x.p, x.p + n);
      k->rms_norm(x.p, w.p, x.p, n, 1e-5f);
      EXPECT_EQ(std::memcmp(x.p, out.p, static_cast<size_t>(n) * 4), 0);
    }
  }
}

TEST(OpsTest, SiluMul) {
  std::mt19937 rng(2);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf g(n, 2), u(n, 1), out(n, 3);
      Fill(g.p, n, rng, 6.f);
      Fill(u.p, n, rng, 1.f);
      if (n > 4) {
        g.p[0] = -100.f;
        g.p[1] = 95.f;
        g.p[2] = 0.f;
        g.p[3] = -20.f;
      }
      k->silu_mul(g.p, u.p, out.p, n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = g.p[i] / (1.0 + std::exp(-double(g.p[i]))) * u.p[i];
        ASSERT_NEAR(out.p[i], ref, 8 * kU * std::fabs(ref) + 1e-35) << IsaName(k->isa) << " g=" << g.p[i];
      }
    }
  }
}

TEST(OpsTest, AddAndAxpy) {
  std::mt19937 rng(3);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf a(n, 1), b(n, 2), out(n, 3), y(n, 1);
      Fill(a.p, n, rng, 1.f);
      Fill(b.p, n, rng, 1.f);
      k->add(a.p, b.p, out.p, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.p[i], a.p[i] + b.p[i]);
      std::memcpy(y.p, b.p, static_cast<size_t>(n) * 4);
      k->axpy(0.37f, a.p, y.p, n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = 0.37 * a.p[i] + b.p[i];
        // One or two roundings (fused or not).
        ASSERT_NEAR(y.p[i], ref, 2 * kU * (std::fabs(0.37 * a.p[i]) + std::fabs(b.p[i])) + 1e-30);
      }
    }
  }
}

TEST(OpsTest, Dot) {
  std::mt19937 rng(4);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf a(n, 3), b(n, 1);
      Fill(a.p, n, rng, 1.f);
      Fill(b.p, n, rng, 1.f);
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += double(a.p[i]) * b.p[i];
        mag += std::fabs(double(a.p[i]) * b.p[i]);
      }
      ASSERT_NEAR(k->dot(a.p, b.p, n), ref, (static_cast<double>(n) / 8 + 16) * kU * mag)
          << IsaName(k->isa) << " n=" << n;
    }
  }
}

// The reference: a plain scan that keeps the first maximum.
int64_t ScanArgMax(const float* x, int64_t n) {
  int64_t arg = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[arg]) arg = i;
  }
  return arg;
}

TEST(OpsTest, ArgMaxIsTheFirstMaximum) {
  std::mt19937 rng(11);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf x(n, 1);
      Fill(x.p, n, rng, 5.f);
      ASSERT_EQ(k->argmax(x.p, n), ScanArgMax(x.p, n)) << IsaName(k->isa) << " n=" << n;
      // The maximum at every position (beyond 256 elements: the first and
      // last 64 and every 61st between, which cross every lane and block
      // boundary without an O(n^2) run), tied with a later copy, and NaNs
      // around it (never chosen unless first).
      for (int64_t at = 0; at < n; ++at) {
        if (n > 256 && at >= 64 && at < n - 64 && at % 61 != 0) continue;
        Fill(x.p, n, rng, 5.f);
        x.p[at] = 100.f;
        if (at + 1 < n) x.p[n - 1] = 100.f;
        if (at >= 2) x.p[at - 1] = std::nanf("");  // x[0] stays a number
        ASSERT_EQ(k->argmax(x.p, n), ScanArgMax(x.p, n)) << IsaName(k->isa) << " n=" << n << " at=" << at;
        ASSERT_EQ(k->argmax(x.p, n), at) << IsaName(k->isa) << " n=" << n;
      }
      x.p[0] = std::nanf("");
      ASSERT_EQ(k->argmax(x.p, n), 0) << IsaName(k->isa) << " n=" << n;
    }
  }
}

TEST(OpsTest, Softmax) {
  std::mt19937 rng(5);
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : Sizes()) {
      Buf x(n, 1);
      Fill(x.p, n, rng, 5.f);
      if (n > 3) x.p[2] = -200.f;  // underflows to ~0
      std::vector<double> ref(static_cast<size_t>(n));
      double max = x.p[0], sum = 0;
      for (int64_t i = 0; i < n; ++i) max = std::max<double>(max, x.p[i]);
      for (int64_t i = 0; i < n; ++i) sum += ref[static_cast<size_t>(i)] = std::exp(x.p[i] - max);
      k->softmax(x.p, n);
      const double tol = (static_cast<double>(n) / 8 + 24) * kU;
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double r = ref[static_cast<size_t>(i)] / sum;
        ASSERT_NEAR(x.p[i], r, tol * r + 1e-37) << IsaName(k->isa) << " n=" << n << " i=" << i;
        total += x.p[i];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST(OpsTest, ConvertFromF32MatchesQuantizeRow) {
  std::mt19937 rng(6);
  const float specials[] = {0.f, -0.f, 1e-40f, -1e-45f, 65504.f, 65519.99f, 65520.f, -70000.f, 3e38f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 5.96e-8f, 2.98e-8f, 1.5f};
  for (const KernelTable* k : AvailableVariants()) {
    for (int64_t n : {32, 33, 47, 64, 96, 256, 800, 801, 4096}) {  // odd n: the f16/bf16 tails
      std::vector<float> x(static_cast<size_t>(n));
      Fill(x.data(), n, rng, 3.f);
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
        if (n % Traits(t).block_size != 0) continue;
        std::vector<float> xs = x;
        if (t != DType::kQ8_0) {  // the Q8_0 reference is only defined for finite input
          for (size_t i = 0; i < std::size(specials) && i < xs.size(); ++i) xs[i * 2] = specials[i];
        }
        std::vector<uint8_t> a(static_cast<size_t>(RowBytes(t, n))), b(a.size());
        QuantizeRow(t, xs.data(), a.data(), n);
        k->convert_from_f32(t, xs.data(), b.data(), n);
        EXPECT_EQ(a, b) << IsaName(k->isa) << " " << DTypeName(t) << " n=" << n;
      }
    }
  }
}

// The vectorised dequantizers return exactly the reference floats.
TEST(OpsTest, DequantizeRowMatchesReference) {
  std::mt19937 rng(8);
  for (const KernelTable* k : AvailableVariants()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                    DType::kQ5_K, DType::kQ6_K}) {
      for (int64_t n : {256, 512, 4096}) {
        for (int64_t extra : {0, 1, 7, 33}) {
          if (Traits(t).block_size > 1 && extra != 0) continue;
          const int64_t len = n + extra;
          std::vector<uint8_t> q(static_cast<size_t>(RowBytes(t, len)));
          for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
          if (t == DType::kF16 || t == DType::kBF16) {  // no NaN encodings
            auto* h = reinterpret_cast<uint16_t*>(q.data());
            for (int64_t i = 0; i < len; ++i) h[i] &= t == DType::kF16 ? 0xBBFF : 0xBF7F;
          } else if (t == DType::kF32) {
            auto* f = reinterpret_cast<uint32_t*>(q.data());
            for (int64_t i = 0; i < len; ++i) f[i] &= 0xBF7FFFFF;
          } else {  // finite f16 scales
            const int64_t bs = Traits(t).type_size;
            for (int64_t b = 0; b < len / Traits(t).block_size; ++b) {
              uint8_t* blk = q.data() + b * bs;
              const int64_t d_off = t == DType::kQ6_K ? 208 : 0;
              blk[d_off + 1] &= 0x3B;
              if (t == DType::kQ4_K || t == DType::kQ5_K) blk[3] &= 0x3B;
            }
          }
          std::vector<float> ref(static_cast<size_t>(len)), got(ref.size(), -1.f);
          GetKernelTable(Isa::kScalar)->dequantize_row(t, q.data(), ref.data(), len);
          k->dequantize_row(t, q.data(), got.data(), len);
          ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * 4), 0) << IsaName(k->isa) << " " << DTypeName(t)
                                                                            << " n=" << len;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs::kernels
