// Per-thread scratch memory for kernels: grown on demand, never shrunk, so
// steady-state calls allocate nothing. Each slot is an independent buffer.
// Thread-safety: thread-local; a buffer is only touched by its own thread
// (pool workers are long-lived, so theirs survive between calls).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvs::kernels {

enum class ScratchSlot { kActivations = 0, kPanel = 1, kAux = 2, kCodes = 3, kBf16Acts = 4 };
inline constexpr int kNumScratchSlots = 5;

// A 64-byte aligned buffer of at least `bytes` bytes; contents are
// unspecified. Valid until the next call with the same slot on this thread.
uint8_t* ThreadScratch(ScratchSlot slot, size_t bytes);

}  // namespace kvs::kernels
