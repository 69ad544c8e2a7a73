// HugeBuffer: one anonymous, zero-filled memory region for large read-mostly
// data (the packed weight panels), 2 MiB aligned and advised for transparent
// huge pages (MADV_HUGEPAGE, which the default THP mode "madvise" needs).
// Why: decode streams every weight once per token; with 4 KiB pages a 1 GB
// model spans 262,144 pages, so the walk misses the TLB every 4 KiB and the
// load touches each page with a fault. With 2 MiB pages both drop ~500x.
// When the kernel has no THP the region is ordinary 4 KiB pages; nothing
// else changes. Move-only; owns the mapping. Thread-safety: none (immutable
// contents may be read from any thread).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // A region of at least `bytes` bytes; throws std::bad_alloc when the
  // mapping fails. bytes == 0 gives an empty buffer.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  static constexpr size_t kHugePage = size_t{2} << 20;

 private:
  void Reset();
  uint8_t* map_ = nullptr;   // what mmap returned (unaligned)
  size_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;  // 2 MiB aligned inside map_
  size_t size_ = 0;
};

}  // namespace kvs
