#include "engine/disk_tier.h"

#include <chrono>
#include <vector>

namespace kvs::engine {

bool DiskTier::Restore(const kvcache::DiskBlockMeta& meta, int32_t block_id) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t expected = runner_->block_bytes();
  auto bytes = store_->Get(meta, expected);
  const bool ok = bytes.ok() && runner_->LoadBlock(block_id, *bytes);
  restore_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  restored_blocks_ += ok ? 1 : 0;
  return ok;
}

void DiskTier::Prefetch(std::vector<kvcache::DiskBlockMeta> metas) {
  if (metas.empty()) return;
  store_->Prefetch(std::move(metas), runner_->block_bytes());
}

void DiskTier::Published(const kvcache::DiskBlockMeta& meta, int32_t block_id) {
  const std::span<const uint8_t> bytes = runner_->BlockBytes(block_id);
  if (bytes.empty()) return;
  store_->Put(meta, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

}  // namespace kvs::engine
