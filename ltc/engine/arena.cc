#include "ltc/engine/arena.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>

namespace nova::ltc {

static_assert((Arena::kAlignment & (Arena::kAlignment - 1)) == 0, "alignment is a power of two");
static_assert(Arena::kAlignment >= alignof(void*) && Arena::kAlignment >= alignof(uint64_t) &&
                  Arena::kAlignment >= alignof(std::atomic<void*>),
              "skip list nodes hold pointers and atomics");
// operator new[] aligns every block for max_align_t, so a fresh block is kAlignment-aligned.
static_assert(Arena::kAlignment <= alignof(std::max_align_t));

size_t Arena::NextBlockBytes() const {
  return std::clamp(MemoryUsage() / 8, kMinBlockBytes, kMaxBlockBytes);
}

char* Arena::AllocateSlow(size_t bytes) {
  CHECK_GT(bytes, 0u) << "Arena: zero-byte allocation";
  const size_t block_bytes = NextBlockBytes();
  if (bytes > block_bytes / 4) {
    // The current block keeps its free tail for the small allocations that follow.
    return NewBlock(bytes);
  }
  // Abandon the tail of the current block: less than bytes, so under a quarter of the new
  // block.
  char* block = NewBlock(block_bytes);
  next_ = block + bytes;
  remaining_ = block_bytes - bytes;
  return block;
}

char* Arena::NewBlock(size_t bytes) {
  blocks_.push_back(std::make_unique_for_overwrite<char[]>(bytes));
  // Only this (allocating) thread writes memory_usage_, so load + store cannot lose an update.
  memory_usage_.store(MemoryUsage() + bytes + sizeof(blocks_[0]), std::memory_order_relaxed);
  return blocks_.back().get();
}

}  // namespace nova::ltc
