#include "common/adaptive_spin.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/status.h"

namespace nova {
namespace {

using std::chrono::microseconds;

bool MachineIdle() { return true; }
bool MachineBusy() { return false; }

TEST(AdaptiveSpinTest, ZeroWindowNeverSpins) {
  AdaptiveSpin spin(microseconds(0), nullptr, 1, &MachineIdle);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(spin.ShouldSpin());
}

TEST(AdaptiveSpinTest, MissSkipsTheNextWaits) {
  AdaptiveSpin spin(microseconds(50), nullptr, 1, &MachineIdle);
  ASSERT_TRUE(spin.ShouldSpin());
  spin.Spun(true);  // a hit: spin again next time
  ASSERT_TRUE(spin.ShouldSpin());
  spin.Spun(false);  // a miss: block at once for the next kSkipAfterMiss waits
  for (int i = 0; i < AdaptiveSpin::kSkipAfterMiss; ++i) {
    EXPECT_FALSE(spin.ShouldSpin()) << "wait " << i;
  }
  EXPECT_TRUE(spin.ShouldSpin());
}

TEST(AdaptiveSpinTest, SpinnersAreCapped) {
  std::atomic<int> spinners{0};
  AdaptiveSpin a(microseconds(50), &spinners, 1, &MachineIdle);
  AdaptiveSpin b(microseconds(50), &spinners, 1, &MachineIdle);
  ASSERT_TRUE(a.ShouldSpin());
  EXPECT_FALSE(b.ShouldSpin());  // a polls
  a.Spun(true);
  EXPECT_TRUE(b.ShouldSpin());
  b.Spun(true);
  EXPECT_EQ(spinners.load(), 0);
}

TEST(AdaptiveSpinTest, LongYieldMeansAnotherThreadRan) {
  AdaptiveSpin spin(microseconds(50));
  EXPECT_TRUE(spin.YieldTook(microseconds(1)));
  EXPECT_TRUE(spin.YieldTook(AdaptiveSpin::kBusyYield));
  EXPECT_EQ(spin.busy_yields(), 0u);
  EXPECT_FALSE(spin.YieldTook(AdaptiveSpin::kBusyYield + microseconds(1)));
  EXPECT_FALSE(spin.YieldTook(std::chrono::milliseconds(4)));
  EXPECT_EQ(spin.busy_yields(), 2u);
}

TEST(AdaptiveSpinTest, RunnableThreadsAgainstCpus) {
  // The fourth field of /proc/loadavg: runnable threads (the reader included) / all.
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58 0.59 1/512 12345\n", 2));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58 0.59 2/512 12345\n", 2));
  EXPECT_FALSE(AdaptiveSpin::NoThreadWaitsForACpu("3.10 2.58 2.59 3/512 12345\n", 2));
  EXPECT_FALSE(AdaptiveSpin::NoThreadWaitsForACpu("9.00 9.00 9.00 17/900 1\n", 16));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("9.00 9.00 9.00 16/900 1\n", 16));
  // What cannot be parsed does not stop spinning.
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("", 2));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58", 2));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58 0.59 /512 1", 2));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58 0.59 x3/512 1", 2));
  EXPECT_TRUE(AdaptiveSpin::NoThreadWaitsForACpu("0.52 0.58 0.59 3/512 1", 0));
}

TEST(AdaptiveSpinTest, NoWindowWhileThreadsWaitForACpu) {
  std::atomic<int> spinners{0};
  AdaptiveSpin spin(microseconds(50), &spinners, 1, &MachineBusy);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(spin.ShouldSpin());
  EXPECT_EQ(spinners.load(), 0);  // a refusal takes no spinner's place
  // The live check runs (it reads /proc/loadavg, or allows spinning where it cannot); its
  // verdict depends on the machine, so only RunnableThreadsAgainstCpus checks verdicts.
  AdaptiveSpin::NoThreadWaitsForACpu();
}

TEST(AdaptiveSpinTest, BusyYieldSkipsFewerWaitsThanAMiss) {
  AdaptiveSpin spin(microseconds(50), nullptr, 1, &MachineIdle);
  ASSERT_TRUE(spin.ShouldSpin());
  EXPECT_FALSE(spin.YieldTook(std::chrono::milliseconds(1)));  // another thread ran
  spin.Spun(false);
  for (int i = 0; i < AdaptiveSpin::kSkipAfterBusyYield; ++i) {
    EXPECT_FALSE(spin.ShouldSpin()) << "wait " << i;
  }
  ASSERT_TRUE(spin.ShouldSpin());
  spin.Spun(false);  // a whole window without bytes: the full skip again
  for (int i = 0; i < AdaptiveSpin::kSkipAfterMiss; ++i) {
    EXPECT_FALSE(spin.ShouldSpin()) << "wait " << i;
  }
  EXPECT_TRUE(spin.ShouldSpin());
  EXPECT_TRUE(spin.YieldTook(microseconds(1)));
  spin.Spun(true);  // bytes came: no skip
  EXPECT_TRUE(spin.ShouldSpin());
}

TEST(AdaptiveSpinTest, PollWindowReturnsWhatCameAndSkipsAfterNothing) {
  AdaptiveSpin spin(microseconds(50), nullptr, 1, &MachineIdle);
  // Bytes on the second poll, well within the window: returned, and no skip follows. (A
  // second poll always comes: after a yield, busy or not. Whether a third would depends on
  // how long the yield took on this machine.)
  int polls = 0;
  ASSERT_TRUE(spin.ShouldSpin());
  Status got = spin.PollWindow(MonoNow() + std::chrono::seconds(10), [&] {
    return ++polls < 2 ? Status::Unavailable("nothing yet") : Status::OK();
  });
  EXPECT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(polls, 2);
  // An error ends the window at once and is returned as it is.
  ASSERT_TRUE(spin.ShouldSpin());
  polls = 0;
  got = spin.PollWindow(MonoNow() + std::chrono::seconds(10), [&] {
    ++polls;
    return Status::NetworkError("closed");
  });
  EXPECT_TRUE(got.IsNetworkError()) << got.ToString();
  EXPECT_EQ(polls, 1);
  // Nothing within a window that has already ended: one poll, Unavailable, and the next
  // kSkipAfterMiss waits block at once.
  ASSERT_TRUE(spin.ShouldSpin());
  polls = 0;
  got = spin.PollWindow(MonoNow(), [&] {
    ++polls;
    return Status::Unavailable("nothing");
  });
  EXPECT_TRUE(got.IsUnavailable()) << got.ToString();
  EXPECT_EQ(polls, 1);
  for (int i = 0; i < AdaptiveSpin::kSkipAfterMiss; ++i) {
    EXPECT_FALSE(spin.ShouldSpin()) << "wait " << i;
  }
  EXPECT_TRUE(spin.ShouldSpin());
}

// Two threads on one CPU, one of them never blocking: the other's yields hand the CPU over,
// and Yield() says stop.
class PinnedToOneCpu {
 public:
  PinnedToOneCpu() {
    const int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof(before_), &before_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedToOneCpu() {
    if (pinned_) {
      EXPECT_EQ(sched_setaffinity(0, sizeof(before_), &before_), 0);
    }
  }
  bool pinned() const { return pinned_; }

 private:
  cpu_set_t before_;
  bool pinned_ = false;
};

TEST(AdaptiveSpinTest, YieldOnABusyCpuSaysStop) {
  PinnedToOneCpu pin;
  if (!pin.pinned()) GTEST_SKIP() << "cannot pin this thread to one CPU";
  const MonoTime deadline = MonoNow() + std::chrono::seconds(10);
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // inherits the pinned affinity
    while (!stop.load(std::memory_order_relaxed) && MonoNow() < deadline) {
    }
  });
  AdaptiveSpin spin(microseconds(50));
  bool said_stop = false;
  int yields = 0;
  while (!said_stop && MonoNow() < deadline) {
    said_stop = !spin.Yield();
    ++yields;
  }
  stop = true;
  busy.join();
  EXPECT_TRUE(said_stop) << yields << " yields beside a busy thread on the same CPU all took"
                         << " at most " << AdaptiveSpin::kBusyYield.count() << " us";
  EXPECT_GE(spin.busy_yields(), 1u);
}

}  // namespace
}  // namespace nova
