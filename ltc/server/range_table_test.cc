// RangeTable over fake backends: Init publishes at once and opens in the background
// (retried until it opens); Apply opens added ranges before publishing, keeps the backend of
// a kept range, closes removed ranges once no one holds them, refuses stale or invalid
// assignments, and leaves the old table in force when an open fails; a range closed while
// it is still opening is never served. Owner fencing: a fenced range refuses requests, is
// dropped by Fence and not reopened until a newer owner epoch; a kept range whose owner
// epoch changed is closed (before) and reopened; an open refused as Fenced is skipped.
#include "ltc/server/range_table.h"

#include <gtest/gtest.h>

#include <leveldb/iterator.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "common/mutex.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

// Counts opens and closes per range id; opens of a range may be made to fail, or to block
// until released.
class FakeBackends {
 public:
  class Backend final : public RangeBackend {
   public:
    Backend(FakeBackends* owner, uint32_t id) : owner_(owner), id_(id) {}
    ~Backend() override { owner_->Closed(id_); }
    Status Put(const leveldb::Slice&, const leveldb::Slice&) override { return Status::OK(); }
    Status Delete(const leveldb::Slice&) override { return Status::OK(); }
    Status Write(const std::vector<BatchEntry>&) override { return Status::OK(); }
    Status Get(const leveldb::Slice&, std::string*, Snapshot) override {
      return Status::NotFound("fake");
    }
    leveldb::Iterator* NewIterator(Snapshot) override { return leveldb::NewEmptyIterator(); }
    Snapshot GetSnapshot() override { return this; }
    void ReleaseSnapshot(Snapshot) override {}
    std::string StatsText() override { return "fake range " + std::to_string(id_) + "\n"; }
    void SetFenceListener(std::function<void()> listener) override {
      MutexLock l(&owner_->mu_);
      owner_->listeners_[id_] = std::move(listener);
    }
    uint32_t id() const { return id_; }

   private:
    FakeBackends* const owner_;
    const uint32_t id_;
  };

  BackendFactory factory() {
    return [this](const RangeInfo& r,
                  const LtcAssignment& a) -> Result<std::unique_ptr<RangeBackend>> {
      MutexLock l(&mu_);
      ++attempts_[r.id];
      gate_cv_.Wait(&l, [&]() REQUIRES(mu_) { return gated_.count(r.id) == 0; });
      if (failures_left_[r.id] > 0) {
        --failures_left_[r.id];
        return Status::IOError("injected open failure of range " + std::to_string(r.id));
      }
      if (fenced_at_.count(r.id) > 0 && a.OwnerEpochOf(r.id) <= fenced_at_[r.id]) {
        return Status::Fenced("range " + std::to_string(r.id) + " is fenced at a newer epoch");
      }
      // Opening at a newer owner epoch fences every older backend of the range (as a
      // StoC would): the test fires their listeners with FireFence.
      ++opened_[r.id];
      closed_at_open_[r.id].push_back(closed_[r.id]);
      return std::unique_ptr<RangeBackend>(new Backend(this, r.id));
    };
  }

  // Opens of `id` at owner epochs up to `epoch` are refused as Fenced.
  void FenceOpensUpTo(uint32_t id, uint64_t epoch) {
    MutexLock l(&mu_);
    fenced_at_[id] = epoch;
  }
  // Tells the newest backend of `id` that it was fenced (as its engine would).
  void FireFence(uint32_t id) {
    std::function<void()> listener;
    {
      MutexLock l(&mu_);
      listener = listeners_[id];
    }
    ASSERT_TRUE(listener) << "range " << id << " has no fence listener";
    listener();
  }
  void FailOpens(uint32_t id, int times) {
    MutexLock l(&mu_);
    failures_left_[id] = times;
  }
  // Opens of `id` block until Release(id).
  void Gate(uint32_t id) {
    MutexLock l(&mu_);
    gated_.insert(id);
  }
  void Release(uint32_t id) {
    MutexLock l(&mu_);
    gated_.erase(id);
    gate_cv_.NotifyAll();
  }
  int attempts(uint32_t id) {
    MutexLock l(&mu_);
    return attempts_[id];
  }
  int opened(uint32_t id) {
    MutexLock l(&mu_);
    return opened_[id];
  }
  int closed(uint32_t id) {
    MutexLock l(&mu_);
    return closed_[id];
  }
  // For each successful open of `id`, how many of its backends had closed by then.
  std::vector<int> closed_at_open(uint32_t id) {
    MutexLock l(&mu_);
    return closed_at_open_[id];
  }

 private:
  void Closed(uint32_t id) {
    MutexLock l(&mu_);
    ++closed_[id];
  }

  Mutex mu_;
  CondVar gate_cv_;
  std::set<uint32_t> gated_ GUARDED_BY(mu_);
  std::map<uint32_t, int> failures_left_ GUARDED_BY(mu_);
  std::map<uint32_t, int> attempts_ GUARDED_BY(mu_);
  std::map<uint32_t, int> opened_ GUARDED_BY(mu_);
  std::map<uint32_t, int> closed_ GUARDED_BY(mu_);
  std::map<uint32_t, uint64_t> fenced_at_ GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<int>> closed_at_open_ GUARDED_BY(mu_);
  std::map<uint32_t, std::function<void()>> listeners_ GUARDED_BY(mu_);
};

LtcAssignment Assignment(uint64_t epoch, const std::vector<uint32_t>& ids,
                         uint64_t owner_epoch = 0) {
  auto all = EqualRanges(4);
  EXPECT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = epoch;
  a.ltc_id = 7;
  for (uint32_t id : ids) {
    a.ranges.push_back(all.value()[id]);
    if (owner_epoch != 0) a.owner_epochs[id] = owner_epoch;
  }
  return a;
}

// The on_fenced calls a table made.
struct FenceCalls {
  Mutex mu;
  std::vector<std::pair<uint32_t, uint64_t>> calls GUARDED_BY(mu);
  size_t size() {
    MutexLock l(&mu);
    return calls.size();
  }
  std::pair<uint32_t, uint64_t> at(size_t i) {
    MutexLock l(&mu);
    return calls.at(i);
  }
  RangeTableOptions Options() {
    RangeTableOptions o;
    o.on_fenced = [this](uint32_t range, uint64_t owner_epoch) {
      MutexLock l(&mu);
      calls.emplace_back(range, owner_epoch);
    };
    return o;
  }
};

std::shared_ptr<RangeSlot> SlotOf(const RangeTable& t, uint32_t id) {
  for (const HostedRange& h : t.Current()->ranges) {
    if (h.info.id == id) return h.slot;
  }
  return nullptr;
}

bool AllOpen(const RangeTable& t) {
  for (const HostedRange& h : t.Current()->ranges) {
    if (h.slot->TryGet() == nullptr) return false;
  }
  return true;
}

TEST(RangeTableTest, FindsTheRangeHoldingAKey) {
  FakeBackends fakes;
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(1, {0, 2})).ok());
  auto t = table.Current();
  ASSERT_NE(t->Find(""), nullptr);
  EXPECT_EQ(t->Find("")->info.id, 0u);
  EXPECT_EQ(t->Find("\x3f")->info.id, 0u);
  EXPECT_EQ(t->Find("\x40"), nullptr);  // range 1 is not hosted
  EXPECT_EQ(t->Find("\x80")->info.id, 2u);
  EXPECT_EQ(t->Find("\xbf\xff")->info.id, 2u);
  EXPECT_EQ(t->Find("\xc0"), nullptr);
}

TEST(RangeTableTest, InitPublishesAtOnceAndOpensInTheBackground) {
  FakeBackends fakes;
  fakes.Gate(1);
  RangeTableOptions o;
  o.recovery_wait = 20ms;
  RangeTable table(fakes.factory(), o);
  ASSERT_TRUE(table.Init(Assignment(3, {0, 1})).ok());
  EXPECT_EQ(table.epoch(), 3u);
  EXPECT_EQ(table.Current()->ltc_id, 7u);
  ASSERT_EQ(table.Current()->ranges.size(), 2u);
  // Range 0 opens by itself; range 1 is still opening: its requests get Unavailable.
  ASSERT_TRUE(test::WaitFor([&] { return SlotOf(table, 0)->TryGet() != nullptr; }));
  auto b = table.BackendOf(table.Current()->ranges[1]);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().IsUnavailable()) << b.status().ToString();
  EXPECT_NE(b.status().message().find("range 1 is being recovered"), std::string::npos)
      << b.status().ToString();
  fakes.Release(1);
  ASSERT_TRUE(test::WaitFor([&] { return AllOpen(table); }));
  EXPECT_TRUE(table.BackendOf(table.Current()->ranges[1]).ok());
}

TEST(RangeTableTest, FailedBackgroundOpenIsRetriedAndReported) {
  FakeBackends fakes;
  fakes.FailOpens(0, 2);
  RangeTableOptions o;
  o.recovery_wait = 0ms;
  RangeTable table(fakes.factory(), o);
  ASSERT_TRUE(table.Init(Assignment(1, {0})).ok());
  const HostedRange h = table.Current()->ranges[0];
  // After the first failure the error names it; the third attempt opens it.
  ASSERT_TRUE(test::WaitFor([&] { return fakes.attempts(0) >= 1; }));
  ASSERT_TRUE(test::WaitFor([&] {
    auto b = table.BackendOf(h);
    return b.ok() || b.status().message().find("injected open failure") != std::string::npos;
  }));
  ASSERT_TRUE(test::WaitFor([&] { return table.BackendOf(h).ok(); }));
  EXPECT_EQ(fakes.attempts(0), 3);
  EXPECT_EQ(fakes.opened(0), 1);
}

TEST(RangeTableTest, ApplyOpensAddedKeepsKeptAndClosesRemovedRanges) {
  FakeBackends fakes;
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(1, {0, 1})).ok());
  ASSERT_TRUE(test::WaitFor([&] { return AllOpen(table); }));
  std::shared_ptr<RangeBackend> kept = SlotOf(table, 1)->TryGet();
  // A request still using range 0 (it holds its backend, and the table it routed on).
  std::shared_ptr<const HostedRanges> old_table = table.Current();
  std::shared_ptr<RangeBackend> in_use = SlotOf(table, 0)->TryGet();

  // Epoch 2: range 0 leaves, range 2 arrives, range 1 stays with wider bounds.
  LtcAssignment b = Assignment(2, {1, 2});
  b.ranges[0].keys.start = "\x30";
  ASSERT_TRUE(table.Apply(b).ok());
  auto t = table.Current();
  EXPECT_EQ(t->epoch, 2u);
  ASSERT_EQ(t->ranges.size(), 2u);
  // The added range was open before the table was published: no request ever waits.
  EXPECT_NE(SlotOf(table, 2)->TryGet(), nullptr);
  EXPECT_EQ(SlotOf(table, 1)->TryGet(), kept);
  EXPECT_EQ(t->ranges[0].info.keys.start, "\x30");
  EXPECT_EQ(fakes.opened(1), 1);
  EXPECT_EQ(SlotOf(table, 0), nullptr);
  // The removed range closes only once the last holder lets go.
  EXPECT_EQ(fakes.closed(0), 0);
  in_use.reset();
  EXPECT_EQ(fakes.closed(0), 0);
  old_table.reset();
  // (The background opener that opened it may hold its slot until its thread has exited.)
  ASSERT_TRUE(test::WaitFor([&] { return fakes.closed(0) == 1; }));
  EXPECT_EQ(fakes.closed(1), 0);

  t.reset();
  kept.reset();
  table.Clear();
  EXPECT_EQ(table.epoch(), 0u);
  ASSERT_TRUE(test::WaitFor([&] { return fakes.closed(1) == 1; }));
  EXPECT_EQ(fakes.closed(2), 1);
}

TEST(RangeTableTest, StaleOrInvalidAssignmentIsRefused) {
  FakeBackends fakes;
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(5, {0})).ok());
  Status s = table.Apply(Assignment(5, {0, 1}));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = table.Apply(Assignment(4, {1}));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  LtcAssignment overlapping = Assignment(6, {0, 1});
  overlapping.ranges[1].keys.start = "\x20";
  s = table.Apply(overlapping);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(table.epoch(), 5u);
  EXPECT_EQ(fakes.attempts(1), 0);
}

TEST(RangeTableTest, FailedOpenLeavesTheOldTableInForce) {
  FakeBackends fakes;
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(1, {0})).ok());
  ASSERT_TRUE(test::WaitFor([&] { return AllOpen(table); }));
  fakes.FailOpens(3, 1);
  Status s = table.Apply(Assignment(2, {2, 3}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("opening range 3"), std::string::npos) << s.ToString();
  EXPECT_EQ(table.epoch(), 1u);
  EXPECT_NE(SlotOf(table, 0), nullptr);
  EXPECT_EQ(fakes.closed(0), 0);
  // Range 2, opened by the failed call, was closed again.
  EXPECT_EQ(fakes.opened(2), 1);
  EXPECT_EQ(fakes.closed(2), 1);
  // The same assignment applies once the range opens.
  ASSERT_TRUE(table.Apply(Assignment(2, {2, 3})).ok());
  EXPECT_EQ(table.epoch(), 2u);
  ASSERT_TRUE(test::WaitFor([&] { return fakes.closed(0) == 1; }));  // its opener may still hold it
}

TEST(RangeTableTest, RangeClosedWhileOpeningIsNeverServed) {
  FakeBackends fakes;
  fakes.Gate(0);
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(1, {0})).ok());
  const std::shared_ptr<RangeSlot> slot = SlotOf(table, 0);
  ASSERT_TRUE(test::WaitFor([&] { return fakes.attempts(0) == 1; }));
  ASSERT_TRUE(table.Apply(Assignment(2, {1})).ok());
  EXPECT_TRUE(slot->abandoned());
  // The open in progress completes, finds the range gone, and closes the backend again.
  fakes.Release(0);
  ASSERT_TRUE(test::WaitFor([&] { return fakes.closed(0) == 1; }));
  EXPECT_EQ(slot->TryGet(), nullptr);
  EXPECT_EQ(fakes.attempts(0), 1);
}

TEST(RangeTableTest, WaitsForARecoveringRangeAreBounded) {
  FakeBackends fakes;
  fakes.Gate(0);
  RangeTableOptions o;
  o.recovery_wait = 60s;  // would fail the test's deadline if it were waited
  o.max_waiting_for_recovery = 0;
  RangeTable table(fakes.factory(), o);
  ASSERT_TRUE(table.Init(Assignment(1, {0})).ok());
  const MonoTime start = MonoNow();
  auto b = table.BackendOf(table.Current()->ranges[0]);
  EXPECT_TRUE(b.status().IsUnavailable()) << b.status().ToString();
  EXPECT_LT(MonoNow() - start, 30s);
  fakes.Release(0);
  table.StopOpening();  // joins the opener
}

TEST(RangeTableTest, FencedRangeIsRefusedDroppedAndReopenedOnlyAtANewerOwnerEpoch) {
  FakeBackends fakes;
  FenceCalls fences;
  RangeTable table(fakes.factory(), fences.Options());
  ASSERT_TRUE(table.Init(Assignment(1, {0, 1}, /*owner_epoch=*/4)).ok());
  ASSERT_TRUE(test::WaitFor([&] { return AllOpen(table); }));
  EXPECT_EQ(table.Current()->ranges[0].owner_epoch, 4u);
  {
    const HostedRange h = table.Current()->ranges[0];
    // The engine learns a newer owner has range 0: its requests are refused at once, and
    // the table's owner is told which range at which owner epoch.
    fakes.FireFence(0);
    auto b = table.BackendOf(h);
    ASSERT_FALSE(b.ok());
    EXPECT_TRUE(b.status().IsFenced()) << b.status().ToString();
  }
  ASSERT_EQ(fences.size(), 1u);
  EXPECT_EQ(fences.at(0), std::make_pair(0u, uint64_t{4}));
  EXPECT_TRUE(table.BackendOf(table.Current()->ranges[1]).ok());

  // Fence drops it (the configuration may still say this LTC owns it) and it closes.
  table.Fence(0, 4);
  EXPECT_EQ(SlotOf(table, 0), nullptr);
  EXPECT_NE(SlotOf(table, 1), nullptr);
  EXPECT_EQ(table.FencedAt(0), std::optional<uint64_t>(4));
  ASSERT_TRUE(test::WaitFor([&] { return fakes.closed(0) == 1; }));

  // An assignment still giving it at owner epoch 4 does not reopen it ...
  ASSERT_TRUE(table.Apply(Assignment(2, {0, 1}, 4)).ok());
  EXPECT_EQ(SlotOf(table, 0), nullptr);
  EXPECT_EQ(fakes.attempts(0), 1);
  // ... one giving it back at a newer owner epoch does.
  ASSERT_TRUE(table.Apply(Assignment(3, {0, 1}, 6)).ok());
  ASSERT_NE(SlotOf(table, 0), nullptr);
  EXPECT_NE(SlotOf(table, 0)->TryGet(), nullptr);
  EXPECT_EQ(fakes.opened(0), 2);
  // Range 1's owner epoch changed too (4 -> 6): it was closed and reopened.
  EXPECT_EQ(fakes.opened(1), 2);
  EXPECT_EQ(fakes.closed(1), 1);
}

TEST(RangeTableTest, KeptRangeWhoseOwnerEpochChangedIsClosedBeforeItReopens) {
  FakeBackends fakes;
  RangeTable table(fakes.factory(), RangeTableOptions());
  ASSERT_TRUE(table.Init(Assignment(1, {0}, 1)).ok());
  ASSERT_TRUE(test::WaitFor([&] { return AllOpen(table); }));
  ASSERT_TRUE(test::WaitFor([&] { return fakes.opened(0) == 1; }));
  // A request still holds the old backend when the range comes back at another owner epoch
  // (it was elsewhere meanwhile): the reopen must wait until that backend has closed
  // (flushed), or its flush would race the new open.
  std::shared_ptr<RangeBackend> held = SlotOf(table, 0)->TryGet();
  ASSERT_NE(held, nullptr);
  Status applied;
  std::thread apply([&] { applied = table.Apply(Assignment(2, {0}, 3)); });
  // The request ends; only then may the second open run.
  ASSERT_TRUE(test::WaitFor([&] { return SlotOf(table, 0)->TryGet() == nullptr; }));
  held.reset();
  apply.join();
  ASSERT_TRUE(applied.ok()) << applied.ToString();
  EXPECT_EQ(fakes.opened(0), 2);
  EXPECT_EQ(fakes.closed_at_open(0), (std::vector<int>{0, 1}))
      << "the second open ran before the first backend closed";
  EXPECT_EQ(table.Current()->ranges.at(0).owner_epoch, 3u);
}

TEST(RangeTableTest, OpenRefusedAsFencedIsSkippedNotRetried) {
  FakeBackends fakes;
  FenceCalls fences;
  fakes.FenceOpensUpTo(1, 5);
  fakes.FenceOpensUpTo(2, 5);
  RangeTable table(fakes.factory(), fences.Options());
  // In the background (Init): the open stops, the slot refuses requests, the owner is told.
  ASSERT_TRUE(table.Init(Assignment(1, {0, 1}, 5)).ok());
  ASSERT_TRUE(test::WaitFor([&] { return fences.size() == 1; }));
  EXPECT_EQ(fences.at(0), std::make_pair(1u, uint64_t{5}));
  auto b = table.BackendOf(table.Current()->ranges[1]);
  EXPECT_TRUE(b.status().IsFenced()) << b.status().ToString();
  EXPECT_EQ(fakes.attempts(1), 1);
  table.Fence(1, 5);
  EXPECT_EQ(SlotOf(table, 1), nullptr);
  // Now (Apply): the other ranges are installed, the fenced one is left out.
  ASSERT_TRUE(table.Apply(Assignment(2, {0, 2}, 5)).ok());
  EXPECT_NE(SlotOf(table, 0), nullptr);
  EXPECT_EQ(SlotOf(table, 2), nullptr);
  EXPECT_EQ(table.FencedAt(2), std::optional<uint64_t>(5));
  EXPECT_EQ(table.epoch(), 2u);
}

}  // namespace
}  // namespace nova::ltc
