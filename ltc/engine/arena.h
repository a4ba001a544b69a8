// Arena: bump-pointer allocation for one memtable's entries and skip list nodes.
//
// Memory comes from ordinary blocks carved front to back. Their size grows with the arena:
// an eighth of what it holds, between kMinBlockBytes (4 KiB, so an almost empty memtable
// stays small) and kMaxBlockBytes (64 KiB, so a full one is a few hundred blocks, not one
// allocation per entry). An allocation that does not fit in the rest of the current block
// either starts a new ordinary block, abandoning that rest, or, if larger than a quarter of
// the next ordinary block, gets a block of its own sized exactly for it while the current
// block stays in use: so the bytes abandoned stay below a quarter of the ordinary blocks'
// bytes, and a 4 MiB value costs 4 MiB. Nothing is freed until the Arena is destroyed,
// which frees every block at once: a memtable is dropped as a whole after its flush.
//
//   Arena arena;
//   char* p = arena.Allocate(n);          // any alignment
//   char* q = arena.AllocateAligned(m);   // aligned to Arena::kAlignment
//
// Thread safety: Allocate/AllocateAligned need external synchronization (the memtable calls
// them under its write mutex); MemoryUsage() may be called from any thread at any time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace nova::ltc {

class Arena {
 public:
  // Bounds of an ordinary block's size (see the class comment).
  static constexpr size_t kMinBlockBytes = 4096;
  static constexpr size_t kMaxBlockBytes = 64 << 10;
  // Alignment of AllocateAligned: enough for pointers, 64-bit integers and their atomics.
  static constexpr size_t kAlignment = 8;

  Arena() = default;
  // Frees every block; pointers returned by this arena dangle afterwards.
  ~Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Returns `bytes` bytes of uninitialized memory, valid until the Arena is destroyed, with
  // no alignment guarantee. Never returns null (std::bad_alloc terminates the process, as
  // for any allocation in Nova).
  // REQUIRES: bytes > 0
  char* Allocate(size_t bytes);

  // As Allocate, but the result is aligned to kAlignment.
  // REQUIRES: bytes > 0
  char* AllocateAligned(size_t bytes);

  // Bytes of memory held by the arena (blocks plus their bookkeeping). Never decreases.
  size_t MemoryUsage() const { return memory_usage_.load(std::memory_order_relaxed); }

  // Size of the next ordinary block: MemoryUsage() / 8 within [kMinBlockBytes,
  // kMaxBlockBytes]. An allocation above a quarter of it that does not fit in the current
  // block gets a block of its own.
  size_t NextBlockBytes() const;

 private:
  // Serves an allocation the current block has no room for (alignment included).
  char* AllocateSlow(size_t bytes);
  // Allocates a block of `bytes` bytes, aligned for any fundamental type, and accounts for it.
  char* NewBlock(size_t bytes);

  // Protected by the caller's synchronization (see the class comment).
  char* next_ = nullptr;  // unused part of the current block
  size_t remaining_ = 0;  // bytes left after next_ in the current block
  std::vector<std::unique_ptr<char[]>> blocks_;

  // Written only by the allocating thread, read by any thread.
  std::atomic<size_t> memory_usage_{0};
};

inline char* Arena::Allocate(size_t bytes) {
  if (bytes <= remaining_ && bytes > 0) {
    char* result = next_;
    next_ += bytes;
    remaining_ -= bytes;
    return result;
  }
  return AllocateSlow(bytes);
}

inline char* Arena::AllocateAligned(size_t bytes) {
  const size_t misalignment = reinterpret_cast<uintptr_t>(next_) & (kAlignment - 1);
  const size_t padding = misalignment == 0 ? 0 : kAlignment - misalignment;
  if (bytes > 0 && bytes + padding <= remaining_) {
    char* result = next_ + padding;
    next_ += bytes + padding;
    remaining_ -= bytes + padding;
    return result;
  }
  // A fresh block starts aligned for any fundamental type.
  return AllocateSlow(bytes);
}

}  // namespace nova::ltc
