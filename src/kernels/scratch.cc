#include "kernels/scratch.h"

#include <cstdlib>
#include <memory>
#include <new>

namespace kvs::kernels {
namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct Buffer {
  std::unique_ptr<uint8_t, FreeDeleter> data;
  size_t capacity = 0;
};

thread_local Buffer tls_buffers[kNumScratchSlots];

}  // namespace

uint8_t* ThreadScratch(ScratchSlot slot, size_t bytes) {
  Buffer& b = tls_buffers[static_cast<int>(slot)];
  if (bytes > b.capacity || !b.data) {
    // Grow geometrically so a slowly growing batch does not reallocate often;
    // pad so vector loops may read one vector past the end.
    size_t cap = b.capacity * 2 > bytes ? b.capacity * 2 : bytes;
    cap = (cap + 64 + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, cap);
    if (p == nullptr) throw std::bad_alloc();
    b.data.reset(static_cast<uint8_t*>(p));
    b.capacity = cap - 64;
  }
  return b.data.get();
}

}  // namespace kvs::kernels
