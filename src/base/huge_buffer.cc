#include "base/huge_buffer.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace kvs {

HugeBuffer::HugeBuffer(size_t bytes) {
  if (bytes == 0) return;
  size_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // One extra huge page of slack so an aligned start always fits.
  map_bytes_ = size_ + kHugePage;
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    map_bytes_ = size_ = 0;
    throw std::bad_alloc();
  }
  map_ = static_cast<uint8_t*>(p);
  const auto addr = reinterpret_cast<uintptr_t>(map_);
  data_ = reinterpret_cast<uint8_t*>((addr + kHugePage - 1) / kHugePage * kHugePage);
#ifdef MADV_HUGEPAGE
  // Advice only: without THP support the call fails and pages stay 4 KiB.
  (void)::madvise(data_, size_, MADV_HUGEPAGE);
#endif
}

HugeBuffer::~HugeBuffer() { Reset(); }

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void HugeBuffer::Reset() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = data_ = nullptr;
  map_bytes_ = size_ = 0;
}

}  // namespace kvs
