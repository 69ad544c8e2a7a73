// Paged attention against a dense attention over the cache's stored values
// (double, plain arrays, no block tables) and against
// PagedAttentionReference, for every kernel variant this CPU runs, every KV
// dtype, GQA ratios from 1 to 40, odd head dims and block sizes, and batches
// that mix full prefill, chunked prefill, decode, shared prefix blocks and
// split key ranges (flash decoding).
#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"
#include "kvcache/paged_attention.h"

namespace kvs::kvcache {
namespace {

using Variant = PagedAttention::Variant;

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kGeneric: return "generic";
    case Variant::kAvx2: return "avx2";
    case Variant::kAvx512: return "avx512";
    case Variant::kAuto: return "auto";
  }
  return "?";
}

struct Shape {
  DType dtype;
  int n_heads, n_kv, head_dim, block_size;
};

struct Case {
  Variant variant;
  Shape shape;
};

// One sequence of the test batch: its block table and stored K/V.
struct TestSeq {
  std::vector<int32_t> table;
  int start = 0, n = 0;            // query tokens [start, start + n)
  std::vector<float> q;            // [n, n_heads * head_dim]
  std::vector<std::vector<float>> k, v;  // stored (dequantized) rows per position
};

// Dense causal attention in double over plain per-position rows; window > 0:
// a query at p sees only keys (p - window, p]; softcap > 0: scores s become
// softcap * tanh(s / softcap).
std::vector<float> Dense(const TestSeq& s, const Shape& c, float scale, int window = 0, float softcap = 0.0f) {
  const int hd = c.head_dim, group = c.n_heads / c.n_kv;
  std::vector<float> out(static_cast<size_t>(s.n) * c.n_heads * hd);
  for (int t = 0; t < s.n; ++t) {
    const int n_pos = s.start + t + 1;
    for (int h = 0; h < c.n_heads; ++h) {
      const int kvh = h / group;
      std::vector<double> w(n_pos);
      double mx = -1e300;
      const int first = window > 0 ? std::max(0, n_pos - window) : 0;
      for (int p = 0; p < n_pos; ++p) {
        if (p < first) {
          w[p] = -INFINITY;
          continue;
        }
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(s.q[(size_t(t) * c.n_heads + h) * hd + i]) * s.k[p][kvh * hd + i];
        w[p] = softcap > 0.0f ? softcap * std::tanh(d * scale / softcap) : d * scale;
        mx = std::max(mx, w[p]);
      }
      double sum = 0;
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int p = 0; p < n_pos; ++p) acc += w[p] * s.v[p][kvh * hd + i];
        out[(size_t(t) * c.n_heads + h) * hd + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

class Fixture {
 public:
  Fixture(const Shape& c, int num_blocks, uint32_t seed) : c_(c), rng_(seed) {
    auto cache = KvCache::Create({1, c.n_kv, c.head_dim, c.block_size, num_blocks, c.dtype});
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    cache_ = std::move(*cache);
    free_.resize(static_cast<size_t>(num_blocks));
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng_);  // block tables are neither contiguous nor ordered
  }

  // A sequence whose positions [0, start + n) are written; `prefix_of`
  // shares that sequence's first `shared_blocks` blocks (a prefix hit).
  TestSeq& Add(int start, int n, const TestSeq* prefix_of = nullptr, int shared_blocks = 0) {
    seqs_.emplace_back();
    TestSeq& s = seqs_.back();
    s.start = start;
    s.n = n;
    const int total = start + n, bs = c_.block_size, row = c_.n_kv * c_.head_dim;
    const int nblocks = (total + bs - 1) / bs;
    for (int b = 0; b < nblocks; ++b) {
      if (prefix_of != nullptr && b < shared_blocks) {
        s.table.push_back(prefix_of->table[static_cast<size_t>(b)]);
      } else {
        s.table.push_back(free_.back());
        free_.pop_back();
      }
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> kr(static_cast<size_t>(row)), vr(static_cast<size_t>(row));
    s.k.resize(static_cast<size_t>(total));
    s.v.resize(static_cast<size_t>(total));
    for (int p = 0; p < total; ++p) {
      const int64_t slot = int64_t(s.table[static_cast<size_t>(p / bs)]) * bs + p % bs;
      const bool shared = prefix_of != nullptr && p / bs < shared_blocks;
      if (!shared) {
        // Scores of a few units, as in trained models.
        for (int i = 0; i < row; ++i) { kr[i] = 2.0f * nd(rng_); vr[i] = nd(rng_); }
        cache_->Write(0, slot, kr.data(), vr.data());
      }
      s.k[p].resize(static_cast<size_t>(row));
      s.v[p].resize(static_cast<size_t>(row));
      cache_->ReadK(0, slot, s.k[p].data());
      cache_->ReadV(0, slot, s.v[p].data());
    }
    s.q.resize(static_cast<size_t>(n) * c_.n_heads * c_.head_dim);
    for (float& x : s.q) x = nd(rng_);
    return s;
  }

  // Runs the batch of every added sequence through `variant` with `threads`
  // and checks it against the dense result (and the reference, if asked).
  void Check(Variant variant, int threads, bool with_reference = false, int window = 0, float softcap = 0.0f) {
    const float scale = 1.0f / std::sqrt(float(c_.head_dim));
    ForwardBatch batch;
    std::vector<float> q;
    std::vector<int32_t> dummy_tokens(4096, 0);
    for (const TestSeq& s : seqs_) {
      batch.seqs.push_back({0, std::span<const int32_t>(dummy_tokens.data(), static_cast<size_t>(s.n)), s.start, s.table});
      q.insert(q.end(), s.q.begin(), s.q.end());
    }
    std::vector<float> out(q.size(), NAN), ref(q.size(), NAN);
    PagedAttention attention(variant);
    ThreadPool pool(threads);
    const AttentionParams params{0, c_.n_heads, scale, window, softcap};
    attention.Run(*cache_, params, batch, q.data(), out.data(), pool);
    if (with_reference) PagedAttentionReference(*cache_, params, batch, q.data(), ref.data());
    size_t off = 0;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const std::vector<float> dense = Dense(seqs_[i], c_, scale, window, softcap);
      for (size_t j = 0; j < dense.size(); ++j) {
        const double tol = 3e-5 + 3e-5 * std::fabs(dense[j]);
        if (with_reference) {
          ASSERT_NEAR(ref[off + j], dense[j], tol) << "reference, seq " << i << " element " << j;
        }
        ASSERT_NEAR(out[off + j], dense[j], tol) << attention.variant_name() << ", seq " << i << " (start "
                                                 << seqs_[i].start << ", n " << seqs_[i].n << ") element " << j;
      }
      off += dense.size();
    }
  }

 private:
  Shape c_;
  std::mt19937 rng_;
  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> free_;
  std::deque<TestSeq> seqs_;  // stable references
};

class PagedAttentionTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!PagedAttention::Available(GetParam().variant)) GTEST_SKIP() << "this CPU lacks the variant";
  }
};

// Full prefill, chunked prefill and decodes in one batch, one of them
// sharing another's prefix blocks.
TEST_P(PagedAttentionTest, MixedBatchMatchesDense) {
  const Case p = GetParam();
  Fixture f(p.shape, 700 / p.shape.block_size + 40, 1234);
  TestSeq& a = f.Add(0, 70);        // full prefill, odd length
  f.Add(250, 37);                   // chunked prefill: a chunk after cached positions
  f.Add(298, 1);                    // decode
  const int shared = 48 / p.shape.block_size;
  f.Add(std::max(shared * p.shape.block_size, 1), 5, &a, shared);  // prefix hit, then a short chunk
  f.Add(0, 1);                      // a first token alone
  f.Check(p.variant, 2, /*with_reference=*/p.variant == Variant::kGeneric);
  f.Check(p.variant, 1);
}

// One decode token (and one short chunk) at depth: too few items for the
// threads, so key ranges are split and the partial results combined.
TEST_P(PagedAttentionTest, SplitKeyRangesMatchDense) {
  const Case p = GetParam();
  Fixture f(p.shape, 2200 / p.shape.block_size + 20, 99);
  f.Add(1999, 1);
  f.Check(p.variant, 1);
  f.Check(p.variant, 2);
  Fixture g(p.shape, 2200 / p.shape.block_size + 20, 7);
  g.Add(1500, 3);
  g.Check(p.variant, 3);
}

// Sliding-window layers: a prefill several windows long (rows whose window
// starts past the item's first key tile), a chunk and a decode at depth, a
// window wider than the keys seen, and a wide window at depth whose key
// range is split.
class WindowTest : public PagedAttentionTest {};

TEST_P(WindowTest, SlidingWindowMatchesDense) {
  const Case p = GetParam();
  Fixture f(p.shape, 700 / p.shape.block_size + 40, 31);
  f.Add(0, 150);
  f.Add(250, 21);
  f.Add(298, 1);
  f.Add(0, 9);
  f.Check(p.variant, 2, /*with_reference=*/p.variant == Variant::kGeneric, /*window=*/37);
  f.Check(p.variant, 1, false, 37);
  Fixture g(p.shape, 2100 / p.shape.block_size + 20, 8);
  g.Add(1999, 1);
  g.Check(p.variant, 3, /*with_reference=*/p.variant == Variant::kGeneric, /*window=*/700);
}

// Gemma 2's soft-capped scores, with and without a window.
TEST_P(WindowTest, SoftCappedScoresMatchDense) {
  const Case p = GetParam();
  Fixture f(p.shape, 400 / p.shape.block_size + 20, 77);
  f.Add(0, 90);
  f.Add(120, 1);
  f.Check(p.variant, 2, /*with_reference=*/p.variant == Variant::kGeneric, /*window=*/0, /*softcap=*/1.5f);
  f.Check(p.variant, 2, false, /*window=*/20, /*softcap=*/1.5f);
}

class LongPrefillTest : public PagedAttentionTest {};

// A long prefill: many query blocks, causal skipping, dynamic balancing.
TEST_P(LongPrefillTest, MatchesDense) {
  const Case p = GetParam();
  Fixture f(p.shape, 400 / p.shape.block_size + 20, 5);
  f.Add(0, 333);
  f.Check(p.variant, 2);
}

std::vector<Case> AllCases() {
  const Shape shapes[] = {
      {DType::kF32, 8, 4, 8, 16},     // tiny head
      {DType::kF32, 12, 4, 64, 16},   // S model shape (GQA 3)
      {DType::kF16, 12, 4, 64, 16},
      {DType::kBF16, 8, 8, 32, 8},    // MHA
      {DType::kQ8_0, 12, 4, 64, 16},
      {DType::kQ8_0, 8, 4, 8, 32},    // q8_0 blocks span heads
      {DType::kQ8_0, 8, 4, 24, 5},    // heads not whole q8_0 blocks, odd block size
      {DType::kQ4_0, 12, 4, 64, 16},  // 4-bit KV
      {DType::kQ4_1, 8, 4, 24, 5},    // heads not whole q4_1 blocks
      {DType::kF16, 32, 4, 64, 16},   // M model shape (GQA 8)
      {DType::kF16, 6, 1, 24, 5},     // MQA, odd head dim and block size
      {DType::kF16, 40, 1, 20, 7},    // group wider than one item's rows
      {DType::kBF16, 16, 2, 128, 1},  // large head, one-token blocks
  };
  std::vector<Case> cases;
  for (Variant v : {Variant::kGeneric, Variant::kAvx2, Variant::kAvx512}) {
    for (const Shape& s : shapes) cases.push_back({v, s});
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(VariantName(c.variant)) + "_" + DTypeName(c.shape.dtype) + "_h" + std::to_string(c.shape.n_heads) +
         "kv" + std::to_string(c.shape.n_kv) + "d" + std::to_string(c.shape.head_dim) + "b" +
         std::to_string(c.shape.block_size);
}

INSTANTIATE_TEST_SUITE_P(VariantsAndShapes, PagedAttentionTest, ::testing::ValuesIn(AllCases()), CaseName);

// The long prefill on the model-like shapes only (it is the slow one).
std::vector<Case> LongCases() {
  std::vector<Case> cases;
  for (const Case& c : AllCases()) {
    // The 4-bit rows differ only in how a tile is loaded, which the other
    // tests cover on every variant.
    const bool model_like = c.shape.head_dim == 64 && c.shape.n_heads == 12 && c.shape.dtype != DType::kQ4_0;
    if (model_like || (c.shape.head_dim == 8 && c.variant == Variant::kGeneric)) cases.push_back(c);
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(VariantsAndShapes, LongPrefillTest, ::testing::ValuesIn(LongCases()), CaseName);

// Windows and soft-capping on a few shapes per variant (the masks are the
// same code for every dtype): tiny head, the S model shape, q8_0 with odd
// blocks, and a group wider than one item.
std::vector<Case> WindowCases() {
  std::vector<Case> cases;
  for (const Case& c : AllCases()) {
    const Shape& s = c.shape;
    if ((s.head_dim == 8 && s.dtype == DType::kF32) || (s.head_dim == 64 && s.n_heads == 12 && s.dtype == DType::kF16) ||
        (s.head_dim == 24 && s.dtype == DType::kQ8_0) || s.n_heads == 40) {
      cases.push_back(c);
    }
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(VariantsAndShapes, WindowTest, ::testing::ValuesIn(WindowCases()), CaseName);


// A decoded token's attention is bitwise the same alone, in a batch with a
// prefill and other decodes, with 1 or 3 threads, and as a row of a
// decode_rows chunk (speculative verification): decode rows get fixed
// items and fixed key splits, so greedy output does not depend on the batch.
TEST(DecodeRowsTest, OneTokensResultDoesNotDependOnTheBatch) {
  for (Variant variant : {Variant::kGeneric, Variant::kAvx2, Variant::kAvx512}) {
    if (!PagedAttention::Available(variant)) continue;
    SCOPED_TRACE(VariantName(variant));
    // The chunk straddles a fixed split boundary: its tokens see 1 or 2 key parts.
    const int n_heads = 8, n_kv = 2, hd = 64, bs = 16, depth = PagedAttention::kDecodeSplitKeys - 3, n = 5, other = 64;
    const int nblocks = (depth + n) / bs + 1 + other / bs + 1;
    auto cache = KvCache::Create({1, n_kv, hd, bs, nblocks, DType::kF16});
    ASSERT_TRUE(cache.ok());
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> kr(n_kv * hd), vr(n_kv * hd);
    std::vector<int32_t> table, table2;
    int32_t next = 0;
    for (int b = 0; b < (depth + n + bs - 1) / bs; ++b) table.push_back(next++);
    for (int b = 0; b < (other + bs - 1) / bs; ++b) table2.push_back(next++);
    for (int p = 0; p < (int)table.size() * bs; ++p) {
      for (int i = 0; i < n_kv * hd; ++i) { kr[i] = 2.0f * nd(rng); vr[i] = nd(rng); }
      (*cache)->Write(0, int64_t(table[p / bs]) * bs + p % bs, kr.data(), vr.data());
    }
    for (int p = 0; p < (int)table2.size() * bs; ++p) {
      for (int i = 0; i < n_kv * hd; ++i) { kr[i] = 2.0f * nd(rng); vr[i] = nd(rng); }
      (*cache)->Write(0, int64_t(table2[p / bs]) * bs + p % bs, kr.data(), vr.data());
    }
    const int64_t row = int64_t(n_heads) * hd;
    std::vector<float> q(size_t(n) * row), q2(size_t(other) * row);
    for (float& x : q) x = nd(rng);
    for (float& x : q2) x = nd(rng);
    std::vector<int32_t> tokens(4096, 0);
    const AttentionParams params{0, n_heads, 1.0f / 8.0f, 0, 0.0f};
    PagedAttention attention(variant);
    // The chunk: n tokens at depth..depth+n-1, verified together.
    ForwardBatch chunk;
    chunk.seqs.push_back({0, std::span<const int32_t>(tokens.data(), n), depth, table});
    chunk.seqs.back().decode_rows = true;
    std::vector<float> out(q.size());
    ThreadPool pool2(2);
    attention.Run(**cache, params, chunk, q.data(), out.data(), pool2);
    for (int t = 0; t < n; ++t) {
      for (int threads : {1, 3}) {
        // Token t decoded alone, then behind a 64-token prefill and beside another decode.
        ThreadPool pool(threads);
        for (bool crowded : {false, true}) {
          ForwardBatch b;
          std::vector<float> qb;
          if (crowded) {
            b.seqs.push_back({1, std::span<const int32_t>(tokens.data(), other), 0, table2});
            qb.insert(qb.end(), q2.begin(), q2.end());
            b.seqs.push_back({2, std::span<const int32_t>(tokens.data(), 1), 40, table2});
            qb.insert(qb.end(), q2.begin(), q2.begin() + row);
          }
          b.seqs.push_back({0, std::span<const int32_t>(tokens.data(), 1), depth + t, table});
          qb.insert(qb.end(), q.begin() + t * row, q.begin() + (t + 1) * row);
          std::vector<float> ob(qb.size());
          attention.Run(**cache, params, b, qb.data(), ob.data(), pool);
          const float* mine = ob.data() + ob.size() - row;
          for (int64_t i = 0; i < row; ++i) {
            ASSERT_EQ(mine[i], out[size_t(t) * row + i]) << "token " << t << " threads " << threads
                                                          << (crowded ? " crowded" : " alone") << " element " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs::kvcache
