#include "ltc/engine/sequence_watermark.h"

#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

TEST(SequenceWatermarkTest, VisibleStopsAtTheFirstUnfinishedWrite) {
  SequenceWatermark w;
  w.Reset(10);
  EXPECT_EQ(w.visible(), 10u);
  EXPECT_EQ(w.last_assigned(), 10u);
  const auto a = w.Assign(1);  // 11
  const auto b = w.Assign(3);  // 12..14
  const auto c = w.Assign(1);  // 15
  EXPECT_EQ(a, 11u);
  EXPECT_EQ(b, 12u);
  EXPECT_EQ(c, 15u);
  EXPECT_EQ(w.last_assigned(), 15u);
  w.Finish(c, 1);
  EXPECT_EQ(w.visible(), 10u);
  w.Finish(b, 3);
  EXPECT_EQ(w.visible(), 10u);  // 11 is still in flight
  w.Finish(a, 1);
  EXPECT_EQ(w.visible(), 15u);
  EXPECT_TRUE(w.WaitVisible(15, Deadline::After(std::chrono::seconds(1))));
  EXPECT_FALSE(w.WaitVisible(16, Deadline::After(std::chrono::milliseconds(5))));
}

// Many writers with random batch sizes, finishing in random order (more in flight than the
// ring has slots, so Assign's wait is exercised): the watermark never passes an unfinished
// write and ends at the last sequence.
TEST(SequenceWatermarkTest, ConcurrentWritersNeverExposeAnUnfinishedWrite) {
  const uint64_t seed = test::TestSeed("SequenceWatermarkTest.Concurrent");
  constexpr int kThreads = 4;
  constexpr int kWritesPerThread = 20000;
  constexpr uint64_t kMaxBatch = 700;  // in-flight batches span more than the ring
  const uint64_t max_seq = kThreads * kWritesPerThread * kMaxBatch + 1;
  std::vector<std::atomic<bool>> done(max_seq + 1);
  SequenceWatermark w;
  w.Reset(0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> violations{0};
  std::thread checker([&] {
    uint64_t checked = 0;  // every sequence <= checked was seen done
    while (!stop.load()) {
      const uint64_t v = w.visible();
      for (; checked < v; ++checked) {
        if (!done[checked + 1].load(std::memory_order_acquire)) violations.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int i = 0; i < kWritesPerThread; ++i) {
        const uint64_t count = 1 + rng() % (rng() % 50 == 0 ? kMaxBatch : 4);
        const uint64_t first = w.Assign(count);
        for (uint64_t s = first; s < first + count; ++s) {
          done[s].store(true, std::memory_order_release);
        }
        if (rng() % 100 == 0) std::this_thread::yield();
        w.Finish(first, count);
      }
    });
  }
  for (auto& th : writers) th.join();
  stop = true;
  checker.join();
  EXPECT_EQ(violations.load(), 0u) << "seed " << seed;
  EXPECT_EQ(w.visible(), w.last_assigned()) << "seed " << seed;
}

}  // namespace
}  // namespace nova::ltc
