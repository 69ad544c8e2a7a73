// MatMul tests: every variant this CPU supports against the scalar
// reference and against a double-precision reference.
//
// Tolerances. With inputs from ExactWeights/ExactActs every product and
// every partial sum is a small dyadic rational, so all variants must agree
// exactly, whatever their summation order: that catches indexing, packing
// and tail-handling bugs bit for bit. With realistic random inputs the only
// differences are float rounding: a sum of n products accumulated in float
// in any order is within (n + c) * u * sum|terms| of the exact value
// (u = 2^-24; c covers the scale multiplications), where n counts the
// additions on the longest path (one per element for float weights, one per
// block for quantized weights, whose in-block sums are exact integers).
#include <gtest/gtest.h>

#include "base/fp16.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "base/test_util.h"
#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/kernels_test_util.h"
#include "kernels/packed.h"

// Counts operator new calls so a test can check MatMul's steady state
// allocates nothing.
namespace {
std::atomic<int64_t> g_news{0};
}  // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // malloc/free pairing is intended
#endif
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace kvs::kernels {
namespace {

using testing::AvailableVariants;
using testing::kU;
using testing::ComputeReference;


const DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,  DType::kQ8_0,   DType::kQ4_0,
                              DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,  DType::kQ5_0,   DType::kQ4_1,
                              DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ3_K, DType::kQ2_K};

std::vector<int64_t> ColsFor(DType t, bool exact) {
  switch (Traits(t).block_size) {
    case 1: return {1, 7, 33, 256, 1000, 4096};
    case 32: return {32, 96, 256, 1024, 4096};
    default: return exact ? std::vector<int64_t>{256, 512, 1024} : std::vector<int64_t>{256, 768, 4096};
  }
}

// The packed copy of w [rows, cols] (PackWeights; for BF16 the panels of
// PackBf16Panel), in 64-byte aligned storage.
struct Packed {
  std::vector<uint8_t> buf;
  const uint8_t* data = nullptr;
};
Packed Pack(DType t, const uint8_t* w, int64_t rows, int64_t cols, ThreadPool& pool) {
  Packed p;
  const int64_t n = t == DType::kBF16 ? NumPanels(rows) * Bf16PanelBytes(cols) : PackedLayoutBytes(t, rows, cols);
  if (n == 0) return p;
  p.buf.assign(static_cast<size_t>(n + 64), 0xEE);
  auto* aligned = p.buf.data() + (64 - reinterpret_cast<uintptr_t>(p.buf.data()) % 64) % 64;
  if (t == DType::kBF16) {
    const auto* bf16 = reinterpret_cast<const uint16_t*>(w);
    for (int64_t q = 0; q < NumPanels(rows); ++q) {
      const uint16_t* panel_rows[kPanelRows];
      const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, rows - q * kPanelRows));
      for (int r = 0; r < valid; ++r) panel_rows[r] = bf16 + (q * kPanelRows + r) * cols;
      PackBf16Panel(panel_rows, valid, cols, aligned + q * Bf16PanelBytes(cols));
    }
  } else {
    PackWeights(MatView{t, w, rows, cols}, aligned, pool);
  }
  p.data = aligned;
  return p;
}

// Runs MatMul through `k` with x and y deliberately misaligned by the given
// number of floats (and the weights packed first when `packed`, for types
// that have a packed layout); returns y [m, rows].
std::vector<float> RunMatMul(const KernelTable& k, DType t, const std::vector<uint8_t>& w, int64_t rows,
                             int64_t cols, const std::vector<float>& x, int64_t m, ThreadPool& pool,
                             int x_off, int y_off, bool packed = false) {
  std::vector<float> xbuf(x.size() + 8), ybuf(static_cast<size_t>(m * rows) + 8, -12345.f);
  std::memcpy(xbuf.data() + x_off, x.data(), x.size() * sizeof(float));
  const Packed p = packed ? Pack(t, w.data(), rows, cols, pool) : Packed{};
  MatMulWith(k, MatView{t, w.data(), rows, cols, p.data}, xbuf.data() + x_off, m, ybuf.data() + y_off, pool);
  // Nothing outside y may be written.
  for (int i = 0; i < y_off; ++i) EXPECT_EQ(ybuf[static_cast<size_t>(i)], -12345.f);
  for (size_t i = static_cast<size_t>(y_off + m * rows); i < ybuf.size(); ++i) EXPECT_EQ(ybuf[i], -12345.f);
  return std::vector<float>(ybuf.begin() + y_off, ybuf.begin() + y_off + m * rows);
}

class MatMulTypeTest : public ::testing::TestWithParam<DType> {};

// Exact inputs: every variant equals the double reference bit for bit, over
// the full grid of m, rows and cols, with misaligned x and y.
TEST_P(MatMulTypeTest, ExactInputsEveryVariantExact) {
  const DType t = GetParam();
  ThreadPool pool(2);
  std::mt19937 rng(42 + static_cast<unsigned>(t));
  int variant_runs = 0, off = 0;
  for (int64_t cols : ColsFor(t, /*exact=*/true)) {
    const int64_t max_rows = 257;
    const std::vector<uint8_t> w_all = testing::ExactWeights(t, max_rows, cols, rng);
    // Under the sanitizers (slow, and looking for memory errors rather than
    // arithmetic) one m and one row count per code path: decode with one and
    // with the most activation rows, the batch kernels, the dequantizing
    // GEMM; one row, a partial panel, several panels with a tail. m = 517
    // takes two passes of MatMul (kMaxPassRows).
    const std::vector<int64_t> ms = ::kvs::testing::Sanitized() ? std::vector<int64_t>{1, 4, 5, 33}
                                                                 : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 8, 16, 33, 517};
    const std::vector<int64_t> row_counts = ::kvs::testing::Sanitized() ? std::vector<int64_t>{1, 31, 257}
                                                                         : std::vector<int64_t>{1, 3, 16, 31, 64, 257};
    for (int64_t m : ms) {
      const std::vector<float> x = testing::ExactActs(t, m, cols, rng);
      const testing::Reference ref = ComputeReference(t, w_all.data(), max_rows, cols, x.data(), m);
      for (int64_t rows : row_counts) {
        for (const KernelTable* k : AvailableVariants()) {
          ++off;
          const int x_off = 1 + off % 7, y_off = off % 4;
          const std::vector<float> y = RunMatMul(*k, t, w_all, rows, cols, x, m, pool, x_off, y_off, off % 2 == 0);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_EQ(y[static_cast<size_t>(i * rows + r)], ref.y[static_cast<size_t>(i * max_rows + r)])
                  << IsaName(k->isa) << " " << DTypeName(t) << " m=" << m << " rows=" << rows
                  << " cols=" << cols << " at [" << i << "," << r << "]";
            }
          }
          ++variant_runs;
        }
      }
    }
  }
  EXPECT_GT(variant_runs, 0);
}

// Realistic inputs: every variant (scalar included) is within the float
// rounding bound of the double reference.
TEST_P(MatMulTypeTest, RandomInputsWithinRoundingBound) {
  const DType t = GetParam();
  ThreadPool pool(2);
  std::mt19937 rng(7 + static_cast<unsigned>(t));
  int off = 0;
  for (int64_t cols : ColsFor(t, /*exact=*/false)) {
    const int64_t max_rows = 257;
    const std::vector<uint8_t> w_all = testing::RandomWeights(t, max_rows, cols, rng);
    const double bound_factor = static_cast<double>(testing::MaxFloatAdds(t, cols) + 8) * kU;
    for (int64_t m : {1, 3, 8, 33}) {
      const std::vector<float> x = testing::RandomActs(m, cols, rng);
      const testing::Reference ref_f32 = ComputeReference(t, w_all.data(), max_rows, cols, x.data(), m);
      // The avx512bf16 variant rounds the activations of BF16 weights to
      // bf16 (as llama.cpp does); its products are then exact.
      std::vector<float> x_bf16(x.size());
      for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = BF16ToF32(F32ToBF16(x[i]));
      const testing::Reference ref_bf16 = ComputeReference(t, w_all.data(), max_rows, cols, x_bf16.data(), m);
      for (int64_t rows : {3, 64, 257}) {
        for (const KernelTable* k : AvailableVariants()) {
          ++off;
          const testing::Reference& ref = k->isa == Isa::kAvx512Bf16 && t == DType::kBF16 ? ref_bf16 : ref_f32;
          const double factor = bound_factor;
          const std::vector<float> y =
              RunMatMul(*k, t, w_all, rows, cols, x, m, pool, 1 + off % 7, off % 3, off % 2 == 0);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < rows; ++r) {
              const size_t ri = static_cast<size_t>(i * max_rows + r);
              const double err = std::fabs(y[static_cast<size_t>(i * rows + r)] - ref.y[ri]);
              ASSERT_LE(err, factor * ref.mag[ri] + 1e-30)
                  << IsaName(k->isa) << " " << DTypeName(t) << " m=" << m << " rows=" << rows
                  << " cols=" << cols << " at [" << i << "," << r << "] ref " << ref.y[ri];
            }
          }
        }
      }
    }
  }
}

// Splitting the rows differently across threads never changes a result.
TEST_P(MatMulTypeTest, ThreadCountDoesNotChangeResults) {
  const DType t = GetParam();
  std::mt19937 rng(99);
  const int64_t rows = 300, cols = Traits(t).block_size == 256 ? 512 : 320;
  const std::vector<uint8_t> w = testing::RandomWeights(t, rows, cols, rng);
  for (int64_t m : {1, 6, 40}) {
    const std::vector<float> x = testing::RandomActs(m, cols, rng);
    for (const KernelTable* k : AvailableVariants()) {
      std::vector<float> first;
      for (int threads : {1, 2, 3, 4}) {
        ThreadPool pool(threads);
        const std::vector<float> y = RunMatMul(*k, t, w, rows, cols, x, m, pool, 0, 0);
        if (first.empty()) {
          first = y;
        } else {
          ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
              << IsaName(k->isa) << " " << DTypeName(t) << " m=" << m << " threads=" << threads;
        }
      }
    }
  }
}

// Packing round-trips every byte, pads with zeros, and MatMul over packed
// weights gives the same bits as over the original rows, for every variant,
// m (decode and batch kernels), row count (partial panels) and thread count.
TEST_P(MatMulTypeTest, PackedWeightsMatchUnpacked) {
  const DType t = GetParam();
  std::mt19937 rng(11 + static_cast<unsigned>(t));
  if (!HasPackedLayout(t)) {
    EXPECT_EQ(PackedBytes(t, 100, 256), 0);  // float types are read as they are
    return;
  }
  // Under a sanitizer the widest rows are 4 blocks, not 2048 values (the
  // panel code is the same; the byte checks below are the slow part).
  const int64_t widest = ::kvs::testing::Sanitized() ? 4 * Traits(t).block_size : int64_t{2048};
  for (int64_t cols : {Traits(t).block_size, 3 * Traits(t).block_size, widest}) {
    const int64_t max_rows = 67;
    const std::vector<uint8_t> w = testing::RandomWeights(t, max_rows, cols, rng);
    const int64_t rb = RowBytes(t, cols);
    for (int64_t rows : {1, 16, 17, 67}) {
      ThreadPool pool(2);
      const Packed p = Pack(t, w.data(), rows, cols, pool);
      ASSERT_NE(p.data, nullptr);
      EXPECT_EQ(PackedLayoutBytes(t, rows, cols), NumPanels(rows) * PanelBytes(t, cols));
      EXPECT_EQ(PackedBytes(t, rows, cols), ActiveKernels().reads_packed ? PackedLayoutBytes(t, rows, cols) : 0);
      EXPECT_EQ(PanelBytes(t, cols) % 64, 0);
      // The original bytes (up to 64 bytes of padding); Q4_K/Q5_K add one
      // chunk per super-block (their scales as bytes), Q3_K one (its scales
      // and d), IQ4_XS half a chunk.
      const int64_t extra = t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ3_K ? 64 * (cols / 256)
                            : t == DType::kIQ4_XS                                     ? 32 * (cols / 256)
                                                                                      : 0;
      EXPECT_LE(PanelBytes(t, cols), 16 * rb + 63 + extra);
      std::vector<uint8_t> row(static_cast<size_t>(rb));
      for (int64_t r = 0; r < NumPanels(rows) * kPanelRows; ++r) {
        UnpackPanelRow(t, p.data + r / kPanelRows * PanelBytes(t, cols), static_cast<int>(r % kPanelRows), cols,
                       row.data());
        if (r < rows) {
          ASSERT_EQ(std::memcmp(row.data(), w.data() + r * rb, static_cast<size_t>(rb)), 0) << "row " << r;
        } else {
          // Padding rows decode to zero (Q8_0 codes are stored +128).
          for (int64_t b = 0; b < cols / Traits(t).block_size; ++b) {
            const uint8_t* blk = row.data() + b * Traits(t).type_size;
            for (int64_t i = 0; i < Traits(t).type_size; ++i) {
              const uint8_t want = t == DType::kQ8_0 && i >= 2 ? 0x80 : 0;
              ASSERT_EQ(blk[i], want) << "padding row " << r;
            }
          }
        }
      }
      for (int64_t m : {1, 2, 4, 5, 9, 20}) {
        const std::vector<float> x = testing::RandomActs(m, cols, rng);
        for (const KernelTable* k : AvailableVariants()) {
          for (int threads : {1, 2, 3}) {
            ThreadPool tp(threads);
            const std::vector<float> a = RunMatMul(*k, t, w, rows, cols, x, m, tp, 0, 0, false);
            const std::vector<float> b = RunMatMul(*k, t, w, rows, cols, x, m, tp, 0, 0, true);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
                << IsaName(k->isa) << " m=" << m << " rows=" << rows << " cols=" << cols << " threads=" << threads;
          }
        }
      }
    }
  }
}

// BF16 panels (packed.h): the layout holds every weight (zero past the
// rows and columns), and the avx512bf16 kernels read them with the same
// bits as the rows for batches (the same sums in the same order) and within
// float rounding of the rows for m < 4 (sums in another order); the other
// variants ignore them. Odd and partial column counts, lone last panels,
// one and two passes of MatMul, 1-3 threads.
TEST(Bf16PanelTest, PanelsHoldTheRowsAndMatchThem) {
  std::mt19937 rng(2024);
  for (int64_t cols : {1, 7, 32, 33, 300, 2048}) {
    if (cols == 2048 && ::kvs::testing::Sanitized()) continue;  // 300 has the tails; 2048 is the slow one
    const int64_t max_rows = 70;
    const std::vector<uint8_t> w = testing::RandomWeights(DType::kBF16, max_rows, cols, rng);
    const auto* bf16 = reinterpret_cast<const uint16_t*>(w.data());
    for (int64_t rows : {1, 15, 16, 17, 33, 70}) {
      ThreadPool pool(2);
      const Packed p = Pack(DType::kBF16, w.data(), rows, cols, pool);
      const auto* u32 = reinterpret_cast<const uint32_t*>(p.data);
      const int64_t cp = (cols + 31) / 32 * 32;
      ASSERT_EQ(Bf16PanelBytes(cols), cp * kPanelRows * 2);
      EXPECT_EQ(PackedBf16Bytes(rows, cols), ActiveKernels().reads_packed_bf16 ? NumPanels(rows) * Bf16PanelBytes(cols) : 0);
      for (int64_t q = 0; q < NumPanels(rows); ++q) {
        for (int64_t pr = 0; pr < cp / 2; ++pr) {
          for (int r = 0; r < kPanelRows; ++r) {
            const int64_t row = q * kPanelRows + r, c = 2 * pr;
            uint32_t want = 0;
            if (row < rows && c < cols) want = bf16[row * cols + c];
            if (row < rows && c + 1 < cols) want |= static_cast<uint32_t>(bf16[row * cols + c + 1]) << 16;
            ASSERT_EQ(u32[(q * cp / 2 + pr) * kPanelRows + r], want) << "panel " << q << " pair " << pr << " row " << r;
          }
        }
      }
      for (int64_t m : {1, 2, 3, 4, 5, 13, 40, 517}) {
        if (m == 517 && (cols > 300 || ::kvs::testing::Sanitized())) continue;  // two passes; the scalar variant is slow
        const std::vector<float> x = testing::RandomActs(m, cols, rng);
        for (const KernelTable* k : AvailableVariants()) {
          for (int threads : {1, 2, 3}) {
            ThreadPool tp(threads);
            const std::vector<float> a = RunMatMul(*k, DType::kBF16, w, rows, cols, x, m, tp, 0, 0, false);
            const std::vector<float> b = RunMatMul(*k, DType::kBF16, w, rows, cols, x, m, tp, 0, 0, true);
            if (m >= 4 || !k->reads_packed_bf16) {
              ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
                  << IsaName(k->isa) << " m=" << m << " rows=" << rows << " cols=" << cols << " threads=" << threads;
              continue;
            }
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t r = 0; r < rows; ++r) {
                // Both sum the same exact products (bf16 x bf16) in float.
                double mag = 0;
                for (int64_t c = 0; c < cols; ++c) {
                  mag += std::fabs(static_cast<double>(BF16ToF32(bf16[r * cols + c])) *
                                   BF16ToF32(F32ToBF16(x[static_cast<size_t>(i * cols + c)])));
                }
                const size_t at = static_cast<size_t>(i * rows + r);
                ASSERT_LE(std::fabs(a[at] - b[at]), 2.0 * static_cast<double>(cols + 8) * kU * mag + 1e-30)
                    << IsaName(k->isa) << " m=" << m << " rows=" << rows << " cols=" << cols << " at [" << i << ","
                    << r << "]";
              }
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTypeTest, ::testing::ValuesIn(kWeightTypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

// The activation quantizers of all variants write identical bytes.
TEST(ActQuantTest, VariantsMatchScalarBytes) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (WType wt : {WType::kQ8_0, WType::kQ4_0, WType::kQ4_K, WType::kQ5_K, WType::kQ6_K, WType::kQ5_0,
                   WType::kQ4_1, WType::kIQ4_NL, WType::kIQ4_XS, WType::kQ3_K, WType::kQ2_K}) {
    for (int64_t cols : {256, 512, 4096}) {
      const ActLayout l = MakeActLayout(wt, cols);
      const int64_t m = 5, ldx = cols + 3;
      std::vector<float> x(static_cast<size_t>(m * ldx + 1));
      for (size_t i = 0; i < x.size(); ++i) {
        // Mix normal values, exact halves (rounding ties), zero blocks and
        // blocks whose largest magnitudes appear with both signs.
        const int64_t blk = static_cast<int64_t>(i) / 32;
        x[i] = blk % 7 == 3 ? 0.f : (blk % 5 == 2 ? static_cast<float>(static_cast<int>(rng() % 21) - 10) * 0.5f : normal(rng));
        if (blk % 11 == 4 && i % 32 == 9) x[i] = 6.f;
        if (blk % 11 == 4 && i % 32 == 3) x[i] = -6.f;
      }
      const float* xp = x.data() + 1;  // misaligned rows
      std::vector<uint8_t> ref(static_cast<size_t>(m * l.row_stride), 0), got(ref.size(), 0);
      GetKernelTable(Isa::kScalar)->quantize_acts(l, xp, ldx, m, ref.data());
      for (const KernelTable* k : AvailableVariants()) {
        std::fill(got.begin(), got.end(), 0);
        k->quantize_acts(l, xp, ldx, m, got.data());
        for (int64_t i = 0; i < m; ++i) {
          const uint8_t* a = ref.data() + i * l.row_stride;
          const uint8_t* b = got.data() + i * l.row_stride;
          EXPECT_EQ(std::memcmp(a + l.qs_off, b + l.qs_off, static_cast<size_t>(cols)), 0) << IsaName(k->isa);
          EXPECT_EQ(std::memcmp(a + l.d_off, b + l.d_off, static_cast<size_t>(cols / l.act_block * 4)), 0)
              << IsaName(k->isa);
          EXPECT_EQ(std::memcmp(a + l.aux_off, b + l.aux_off, static_cast<size_t>(cols / l.aux_group * 4)), 0)
              << IsaName(k->isa);
        }
      }
    }
  }
}

TEST(DispatchTest, ActiveVariantIsTheBestAvailable) {
  const std::vector<const KernelTable*> all = AvailableVariants();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front()->isa, Isa::kScalar);
  EXPECT_EQ(&ActiveKernels(), all.back());
  std::printf("active kernels: %s\n", IsaName(ActiveKernels().isa));
}

// Output of this test binary run with `env` prepended (a child process:
// the choice of variant is made once per process).
std::string RunSelf(const std::string& env, const std::string& filter, int* status) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = env + " '" + self + "' --gtest_filter=" + filter + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  *status = ::pclose(p);
  return out;
}

// KVSERVE_FORCE_SCALAR=1 and KVSERVE_ISA select the variant (never one the
// CPU lacks); bad values are reported and ignored.
TEST(DispatchTest, IsaEnvironmentVariables) {
  if (std::getenv("KVSERVE_FORCE_SCALAR") != nullptr || std::getenv("KVSERVE_ISA") != nullptr) {
    GTEST_SKIP() << "already forced";
  }
  const std::string filter = "DispatchTest.ActiveVariantIsTheBestAvailable";
  const std::string best = IsaName(ActiveKernels().isa);
  struct Case {
    std::string env, want, message;
  };
  const bool avx2 = GetKernelTable(Isa::kAvx2) != nullptr, avx512 = GetKernelTable(Isa::kAvx512) != nullptr;
  const bool bf16 = GetKernelTable(Isa::kAvx512Bf16) != nullptr;
  const std::vector<Case> cases = {
      {"KVSERVE_FORCE_SCALAR=1", "scalar", ""},
      {"KVSERVE_ISA=scalar", "scalar", ""},
      {"KVSERVE_ISA=avx2", avx2 ? "avx2" : "scalar", avx2 ? "" : "has no AVX2"},
      {"KVSERVE_ISA=avx512", avx512 ? "avx512" : best, avx512 ? "" : "has no AVX-512"},
      {"KVSERVE_ISA=avx512bf16", best, bf16 ? "" : "has no AVX512_BF16"},
      {"KVSERVE_ISA=sse9", best, "ignoring KVSERVE_ISA=sse9"},
  };
  for (const Case& c : cases) {
    int status = -1;
    const std::string out = RunSelf(c.env, filter, &status);
    EXPECT_EQ(status, 0) << c.env << ": " << out;
    EXPECT_NE(out.find("active kernels: " + c.want + "\n"), std::string::npos) << c.env << ": " << out;
    if (!c.message.empty()) {
      EXPECT_NE(out.find(c.message), std::string::npos) << c.env << ": " << out;
    }
  }
}

// MatMulMany gives the same bits as separate MatMul calls, for mixed weight
// types (shared and distinct activation formats) and any thread count.
TEST(MatMulTest, ManyMatchesSeparateCalls) {
  std::mt19937 rng(21);
  const int64_t cols = 512;
  struct Mat { DType t; int64_t rows; };
  const std::vector<std::vector<Mat>> groups = {
      {{DType::kQ4_K, 100}, {DType::kQ4_K, 33}, {DType::kQ6_K, 33}, {DType::kQ5_K, 48}},
      {{DType::kQ8_0, 64}, {DType::kF16, 17}, {DType::kQ4_0, 1}, {DType::kBF16, 40}, {DType::kF32, 5}},
      {{DType::kQ6_K, 300}},
      {{DType::kQ5_0, 40}, {DType::kQ4_1, 33}, {DType::kIQ4_NL, 17}, {DType::kIQ4_XS, 64}, {DType::kQ3_K, 5},
       {DType::kQ2_K, 100}, {DType::kQ4_0, 20}}};
  for (const auto& g : groups) {
    std::vector<std::vector<uint8_t>> w;
    std::vector<MatView> views;
    for (const Mat& mt : g) {
      w.push_back(testing::RandomWeights(mt.t, mt.rows, cols, rng));
      views.push_back(MatView{mt.t, w.back().data(), mt.rows, cols});
    }
    for (int64_t m : {1, 5, 40}) {
      const std::vector<float> x = testing::RandomActs(m, cols, rng);
      for (const KernelTable* k : AvailableVariants()) {
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<std::vector<float>> sep, many;
          std::vector<float*> ys;
          for (const MatView& v : views) {
            sep.emplace_back(static_cast<size_t>(m * v.rows));
            many.emplace_back(static_cast<size_t>(m * v.rows), -1.f);
            MatMulWith(*k, v, x.data(), m, sep.back().data(), pool);
          }
          for (auto& yv : many) ys.push_back(yv.data());
          MatMulManyWith(*k, views.data(), ys.data(), static_cast<int>(views.size()), x.data(), m, pool);
          for (size_t j = 0; j < views.size(); ++j) {
            ASSERT_EQ(std::memcmp(sep[j].data(), many[j].data(), sep[j].size() * sizeof(float)), 0)
                << IsaName(k->isa) << " matrix " << j << " " << DTypeName(views[j].type) << " m=" << m
                << " threads=" << threads;
          }
        }
      }
    }
  }
}

// GatedMatMul gives the same bits as MatMulMany into (gate, up) followed by
// SiluMul, for every variant, weight type, m and thread count.
TEST(MatMulTest, GatedMatchesManyThenSiluMul) {
  std::mt19937 rng(23);
  const int64_t cols = 512;
  for (DType t : kWeightTypes) {
    for (int64_t rows : {16, 100, 300}) {
      const std::vector<uint8_t> wg = testing::RandomWeights(t, rows, cols, rng);
      const std::vector<uint8_t> wu = testing::RandomWeights(t, rows, cols, rng);
      // Packed once: the layout depends on neither the variant nor the
      // thread count (PackedWeightsMatchUnpacked checks every variant reads it).
      ThreadPool pack_pool(2);
      const Packed pg = Pack(t, wg.data(), rows, cols, pack_pool), pu = Pack(t, wu.data(), rows, cols, pack_pool);
      const MatView views[2] = {{t, wg.data(), rows, cols, pg.data}, {t, wu.data(), rows, cols, pu.data}};
      for (int64_t m : {1, 3, 20}) {
        const std::vector<float> x = testing::RandomActs(m, cols, rng);
        for (const KernelTable* k : AvailableVariants()) {
          for (int threads : {1, 3}) {  // 2 as well in ThreadCountDoesNotChangeResults
            ThreadPool pool(threads);
            std::vector<float> g(static_cast<size_t>(m * rows)), u(g.size()), y(g.size()), u2(g.size());
            float* ys[2] = {g.data(), u.data()};
            MatMulManyWith(*k, views, ys, 2, x.data(), m, pool);
            k->silu_mul(g.data(), u.data(), g.data(), m * rows);
            GatedMatMulWith(*k, views[0], views[1], x.data(), m, y.data(), u2.data(), pool);
            ASSERT_EQ(std::memcmp(g.data(), y.data(), g.size() * sizeof(float)), 0)
                << IsaName(k->isa) << " " << DTypeName(t) << " rows=" << rows << " m=" << m << " threads=" << threads;
            ASSERT_EQ(std::memcmp(u.data(), u2.data(), u.size() * sizeof(float)), 0);
          }
        }
      }
    }
  }
}

// After a warm-up call of the same shape, MatMul allocates nothing (scratch
// is thread-local and reused; the pool job fits std::function's buffer).
TEST(MatMulTest, NoAllocationAfterWarmup) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  for (DType t : kWeightTypes) {
    const int64_t rows = 256, cols = 512;
    const std::vector<uint8_t> w = testing::RandomWeights(t, rows, cols, rng);
    for (int64_t m : {1, 64}) {
      const std::vector<float> x = testing::RandomActs(m, cols, rng);
      std::vector<float> y(static_cast<size_t>(m * rows));
      for (const KernelTable* k : AvailableVariants()) {
        const MatView views[2] = {{t, w.data(), rows, cols}, {t, w.data(), rows / 2, cols}};
        std::vector<float> y2(static_cast<size_t>(m * rows / 2));
        float* ys[2] = {y.data(), y2.data()};
        MatMulWith(*k, views[0], x.data(), m, y.data(), pool);  // warm-up
        MatMulManyWith(*k, views, ys, 2, x.data(), m, pool);
        const int64_t before = g_news.load();
        MatMulWith(*k, views[0], x.data(), m, y.data(), pool);
        MatMulManyWith(*k, views, ys, 2, x.data(), m, pool);
        EXPECT_EQ(g_news.load() - before, 0) << IsaName(k->isa) << " " << DTypeName(t) << " m=" << m;
      }
    }
  }
}

TEST(MatMulTest, EmptyShapesAreNoOps) {
  ThreadPool pool(2);
  std::vector<uint8_t> w(static_cast<size_t>(RowBytes(DType::kQ8_0, 64) * 4), 0);
  float y = 7.f;
  MatMul(MatView{DType::kQ8_0, w.data(), 4, 64}, nullptr, 0, &y, pool);
  EXPECT_EQ(y, 7.f);
}

}  // namespace
}  // namespace kvs::kernels
