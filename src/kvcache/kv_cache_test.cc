#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "kvcache/kv_cache.h"
#include "kvcache/paged_attention.h"

namespace kvs::kvcache {
namespace {

struct Case {
  DType dtype;
  int n_heads, n_kv, head_dim, block_size;
};

// Dense causal attention in double over the values the cache actually holds
// (dequantized), independent of the block-table code path.
std::vector<float> DenseAttention(const std::vector<std::vector<float>>& k,  // [pos][kv*hd]
                                  const std::vector<std::vector<float>>& v, const float* q, int n_tokens,
                                  int start_pos, int n_heads, int n_kv, int hd, float scale) {
  std::vector<float> out(static_cast<size_t>(n_tokens) * n_heads * hd);
  const int group = n_heads / n_kv;
  for (int t = 0; t < n_tokens; ++t) {
    const int n_pos = start_pos + t + 1;
    for (int h = 0; h < n_heads; ++h) {
      const int g = h / group;
      std::vector<double> s(n_pos);
      double mx = -1e300;
      for (int p = 0; p < n_pos; ++p) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[(t * n_heads + h) * hd + i]) * k[p][g * hd + i];
        s[p] = d * scale;
        mx = std::max(mx, s[p]);
      }
      double sum = 0;
      for (double& x : s) { x = std::exp(x - mx); sum += x; }
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int p = 0; p < n_pos; ++p) acc += s[p] * v[p][g * hd + i];
        out[(t * n_heads + h) * hd + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

class PagedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionTest, MatchesDenseAttentionThroughShuffledBlocks) {
  const Case c = GetParam();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int total_pos = 300;  // positions of one sequence
  const int num_blocks = (total_pos + c.block_size - 1) / c.block_size + 5;
  KvCacheConfig cfg{1, c.n_kv, c.head_dim, c.block_size, num_blocks, c.dtype};
  auto cache_or = KvCache::Create(cfg);
  ASSERT_TRUE(cache_or.ok()) << cache_or.status().ToString();
  KvCache& cache = **cache_or;

  // A shuffled block table: blocks are not contiguous or ordered.
  std::vector<int32_t> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int row = c.n_kv * c.head_dim;
  std::vector<std::vector<float>> kd(total_pos), vd(total_pos);  // dequantized stored values
  std::vector<float> kr(row), vr(row);
  for (int p = 0; p < total_pos; ++p) {
    for (int i = 0; i < row; ++i) { kr[i] = nd(rng); vr[i] = nd(rng); }
    const int64_t slot = int64_t(table[p / c.block_size]) * c.block_size + p % c.block_size;
    cache.Write(0, slot, kr.data(), vr.data());
    kd[p].resize(row);
    vd[p].resize(row);
    kernels::DequantizeRow(c.dtype, cache.KRow(0, slot), kd[p].data(), row);
    kernels::DequantizeRow(c.dtype, cache.VRow(0, slot), vd[p].data(), row);
  }
  // Two sequences sharing the cache: a prefill chunk and a decode token.
  const int chunk = 37, start = 250;
  std::vector<float> q1(static_cast<size_t>(chunk) * c.n_heads * c.head_dim), q2(c.n_heads * c.head_dim);
  for (float& x : q1) x = nd(rng);
  for (float& x : q2) x = nd(rng);
  std::vector<float> o1(q1.size()), o2(q2.size()), r1(q1.size()), r2(q2.size());
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  AttentionSeq seqs[2] = {{q1.data(), o1.data(), chunk, start, table}, {q2.data(), o2.data(), 1, total_pos - 1, table}};
  AttentionParams params{0, c.n_heads, scale};
  ThreadPool pool(2);
  PagedAttention(cache, params, seqs, pool);
  AttentionSeq ref_seqs[2] = {{q1.data(), r1.data(), chunk, start, table}, {q2.data(), r2.data(), 1, total_pos - 1, table}};
  PagedAttentionReference(cache, params, ref_seqs);

  auto e1 = DenseAttention(kd, vd, q1.data(), chunk, start, c.n_heads, c.n_kv, c.head_dim, scale);
  auto e2 = DenseAttention(kd, vd, q2.data(), 1, total_pos - 1, c.n_heads, c.n_kv, c.head_dim, scale);
  for (size_t i = 0; i < e1.size(); ++i) {
    ASSERT_NEAR(o1[i], e1[i], 2e-5 + 2e-5 * std::fabs(e1[i])) << i;
    ASSERT_NEAR(r1[i], e1[i], 2e-5 + 2e-5 * std::fabs(e1[i])) << i;
  }
  for (size_t i = 0; i < e2.size(); ++i) {
    ASSERT_NEAR(o2[i], e2[i], 2e-5 + 2e-5 * std::fabs(e2[i])) << i;
    ASSERT_NEAR(r2[i], e2[i], 2e-5 + 2e-5 * std::fabs(e2[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PagedAttentionTest,
                         ::testing::Values(Case{DType::kF32, 8, 4, 8, 16}, Case{DType::kF32, 12, 4, 64, 16},
                                           Case{DType::kF16, 12, 4, 64, 16}, Case{DType::kBF16, 8, 8, 32, 8},
                                           Case{DType::kQ8_0, 12, 4, 64, 16}, Case{DType::kQ8_0, 8, 4, 8, 32},
                                           Case{DType::kF16, 6, 1, 24, 5}));

TEST(KvCacheTest, RejectsBadConfigs) {
  EXPECT_FALSE(KvCache::Create({1, 4, 8, 0, 10, DType::kF16}).ok());
  EXPECT_FALSE(KvCache::Create({1, 4, 8, 16, 0, DType::kF16}).ok());
  auto s = KvCache::Create({1, 3, 6, 16, 10, DType::kQ8_0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("multiple of 32"), std::string::npos);
  EXPECT_FALSE(KvCache::Create({1, 4, 8, 16, 10, DType::kQ4_K}).ok());
  KvCacheConfig ok{2, 4, 64, 16, 10, DType::kF16};
  EXPECT_EQ(ok.BytesPerToken(), 2 * 2 * 4 * 64 * 2);
}

}  // namespace
}  // namespace kvs::kvcache
