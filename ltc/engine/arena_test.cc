#include "ltc/engine/arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

// The byte a test writes at offset `i` of allocation `n`: neighbours differ, so an overlap
// of two allocations shows up as a wrong byte.
char PatternByte(size_t n, size_t i) { return static_cast<char>((n * 31 + i * 7) & 0xff); }

TEST(ArenaTest, EmptyArenaHoldsNothing) {
  Arena arena;
  EXPECT_EQ(arena.MemoryUsage(), 0u);
}

TEST(ArenaTest, SmallAllocationsShareABlock) {
  Arena arena;
  char* a = arena.Allocate(10);
  char* b = arena.Allocate(20);
  EXPECT_EQ(b, a + 10);
  EXPECT_GE(arena.MemoryUsage(), Arena::kMinBlockBytes);
  EXPECT_LT(arena.MemoryUsage(), 2 * Arena::kMinBlockBytes);
}

TEST(ArenaTest, LargeAllocationGetsItsOwnBlock) {
  constexpr size_t kBookkeeping = sizeof(std::unique_ptr<char[]>);
  Arena arena;
  char* small = arena.Allocate(10);
  ASSERT_EQ(arena.NextBlockBytes(), Arena::kMinBlockBytes);  // the arena is still small
  const size_t threshold = Arena::kMinBlockBytes / 4;
  // Above the threshold but fitting in the current block: served from it.
  char* fits = arena.Allocate(threshold + 1);
  EXPECT_EQ(fits, small + 10);
  // Not fitting any more: a block of its own, and the current block keeps its tail.
  const size_t used = 10 + threshold + 1;
  arena.Allocate(Arena::kMinBlockBytes - used - 100);
  const size_t before_own = arena.MemoryUsage();
  arena.Allocate(threshold + 1);
  EXPECT_EQ(arena.MemoryUsage() - before_own, threshold + 1 + kBookkeeping);
  EXPECT_EQ(arena.Allocate(100), small + Arena::kMinBlockBytes - 100);
  // A small allocation that does not fit starts a new ordinary block.
  const size_t before_block = arena.MemoryUsage();
  ASSERT_EQ(arena.NextBlockBytes(), Arena::kMinBlockBytes);
  arena.Allocate(1);
  EXPECT_EQ(arena.MemoryUsage() - before_block, Arena::kMinBlockBytes + kBookkeeping);
  // A 4 MiB value costs 4 MiB.
  constexpr size_t kLarge = 4 << 20;
  const size_t before_large = arena.MemoryUsage();
  char* large = arena.Allocate(kLarge);
  std::memset(large, 'x', kLarge);
  EXPECT_EQ(arena.MemoryUsage() - before_large, kLarge + kBookkeeping);
}

TEST(ArenaTest, BlocksGrowSoEntriesOfAKibibyteShareThem) {
  // 1 KiB values make entries just above a quarter of a 4 KiB block: with fixed 4 KiB
  // blocks each would get a block (one malloc) of its own.
  constexpr size_t kEntry = 16 + 1024 + 24;
  Arena arena;
  EXPECT_EQ(arena.NextBlockBytes(), Arena::kMinBlockBytes);
  size_t adjacent = 0;
  char* prev = nullptr;
  constexpr int kEntries = 4000;  // about a 4 MiB memtable
  for (int i = 0; i < kEntries; ++i) {
    char* p = arena.Allocate(kEntry);
    std::memset(p, static_cast<char>(i), kEntry);
    if (prev != nullptr && p == prev + kEntry) ++adjacent;
    prev = p;
  }
  EXPECT_EQ(arena.NextBlockBytes(), Arena::kMaxBlockBytes);
  // Past the first ~32 KiB, entries follow each other in 64 KiB blocks (60 per block).
  EXPECT_GE(adjacent, static_cast<size_t>(kEntries * 9 / 10));
  const size_t bytes = static_cast<size_t>(kEntries) * kEntry;
  EXPECT_LE(arena.MemoryUsage(), bytes + bytes / 4 + Arena::kMaxBlockBytes);
}

TEST(ArenaTest, AlignedAllocationsAreAligned) {
  Arena arena;
  for (size_t i = 1; i < 3000; ++i) {
    arena.Allocate(i % 7 + 1);  // misalign the bump pointer
    char* p = arena.AllocateAligned(i % 200 + 1);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % Arena::kAlignment, 0u) << "allocation " << i;
  }
}

TEST(ArenaTest, RandomizedAllocationsKeepTheirContents) {
  const uint64_t seed = test::TestSeed("ArenaTest.RandomizedAllocationsKeepTheirContents");
  std::mt19937_64 rng(seed);
  Arena arena;
  std::vector<std::pair<char*, size_t>> allocations;
  size_t bytes_total = 0;
  size_t requested = 0;  // bytes_total plus the most alignment padding could add
  size_t last_usage = 0;
  for (size_t n = 0; n < 20000; ++n) {
    // Mostly entry-sized, some spanning blocks, a few large values.
    const uint64_t kind = rng() % 100;
    size_t bytes = 1 + rng() % 100;
    if (kind == 0) {
      bytes = 1 + rng() % (1 << 20);
    } else if (kind < 4) {
      bytes = 1 + rng() % (2 * Arena::kMaxBlockBytes);
    }
    const bool aligned = rng() % 2 == 0;
    char* p = aligned ? arena.AllocateAligned(bytes) : arena.Allocate(bytes);
    ASSERT_NE(p, nullptr);
    if (aligned) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % Arena::kAlignment, 0u);
    }
    for (size_t i = 0; i < bytes; ++i) p[i] = PatternByte(n, i);
    allocations.emplace_back(p, bytes);
    bytes_total += bytes;
    requested += bytes + (aligned ? Arena::kAlignment - 1 : 0);
    ASSERT_GE(arena.MemoryUsage(), last_usage) << "usage never decreases";
    last_usage = arena.MemoryUsage();
  }
  for (size_t n = 0; n < allocations.size(); ++n) {
    const auto [p, bytes] = allocations[n];
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(p[i], PatternByte(n, i)) << "allocation " << n << " byte " << i;
    }
  }
  // Less than a quarter of the ordinary blocks is abandoned, plus per-block bookkeeping.
  EXPECT_GE(arena.MemoryUsage(), bytes_total);
  EXPECT_LE(arena.MemoryUsage(), 2 * requested + Arena::kMaxBlockBytes);
}

TEST(ArenaTest, MemoryUsageIsReadableWhileAllocating) {
  Arena arena;
  std::atomic<bool> done{false};
  std::atomic<bool> monotonic{true};
  std::thread reader([&] {
    size_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      const size_t now = arena.MemoryUsage();
      if (now < last) monotonic.store(false);
      last = now;
    }
  });
  for (int i = 0; i < 20000; ++i) arena.Allocate(1 + i % 300);
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_TRUE(monotonic.load());
  EXPECT_GT(arena.MemoryUsage(), 0u);
}

}  // namespace
}  // namespace nova::ltc
