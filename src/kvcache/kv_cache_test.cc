#include <vector>

#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"

namespace kvs::kvcache {
namespace {

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
