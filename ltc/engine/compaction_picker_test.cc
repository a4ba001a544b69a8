// CompactionPicker: Level-0 clusters at their trigger (each Drange's its own), tables held
// by running compactions, memtables holding older versions, Level 0 first once writes slow
// down, and round-robin above Level 0. Manual compaction steps (PickManual).
#include "ltc/engine/compaction_picker.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ltc/engine/version_test_util.h"

namespace nova::ltc {
namespace {

std::vector<uint64_t> Numbers(const std::vector<TableRef>& tables) {
  std::vector<uint64_t> n;
  for (const TableRef& t : tables) n.push_back(t->meta().number);
  return n;
}

class CompactionPickerTest : public ::testing::Test {
 protected:
  CompactionPickerTest() {
    options_.comparator = leveldb::BytewiseComparator();
    options_.l0_compaction_trigger = 3;
    // Large enough that only the rules a test sets up make a level due.
    options_.l0_slowdown_writes_bytes = 1ull << 30;
    options_.l0_stop_writes_bytes = 1ull << 30;
    options_.level1_bytes = 1ull << 30;
    options_.sstable_bytes = 1;
  }

  static bool NoneInMemory(const std::vector<TableRef>&, const std::string&, const std::string&) {
    return false;
  }

  CompactionPickerOptions options_;
  version_test::TestTables tables_;
};

TEST_F(CompactionPickerTest, Level0ClusterAtItsTriggerWithTheTablesBelow) {
  CompactionPicker picker(options_);
  Version v;
  // Cluster [a..f]: three overlapping tables; cluster [m..p] (another Drange): two.
  const TableRef t2 = tables_.Span(2, 'm', 'n'), t5 = tables_.Span(5, 'o', 'p');
  v.levels[0] = {tables_.Span(1, 'a', 'c'), t2, tables_.Span(3, 'b', 'e'),
                 tables_.Span(4, 'd', 'f'), t5};
  v.levels[1] = {tables_.Span(10, 'a', 'b'), tables_.Span(11, 'e', 'h'),
                 tables_.Span(12, 'm', 'z')};
  std::optional<CompactionPick> pick = picker.Pick(v, 2, NoneInMemory);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->level, 0);
  EXPECT_EQ(Numbers(pick->inputs), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(Numbers(pick->next), (std::vector<uint64_t>{10, 11}));

  // Below the trigger nothing is due.
  v.levels[0] = {t2, t5};
  EXPECT_FALSE(picker.Pick(v, 2, NoneInMemory).has_value());
}

TEST_F(CompactionPickerTest, BusyTablesAreNotPickedUntilFinished) {
  CompactionPicker picker(options_);
  Version v;
  v.levels[0] = {tables_.Span(1, 'a', 'c'), tables_.Span(2, 'b', 'd'), tables_.Span(3, 'c', 'e')};
  v.levels[1] = {tables_.Span(10, 'a', 'z')};
  std::optional<CompactionPick> pick = picker.Pick(v, 1, NoneInMemory);
  ASSERT_TRUE(pick.has_value());
  picker.Start(*pick);
  EXPECT_TRUE(picker.IsCompacting(1));
  EXPECT_TRUE(picker.IsCompacting(10));
  EXPECT_FALSE(picker.Pick(v, 1, NoneInMemory).has_value());
  picker.Finish(*pick);
  EXPECT_FALSE(picker.IsCompacting(10));
  EXPECT_TRUE(picker.Pick(v, 1, NoneInMemory).has_value());
}

TEST_F(CompactionPickerTest, OlderVersionsInMemoryHoldLevel0Back) {
  CompactionPicker picker(options_);
  Version v;
  v.levels[0] = {tables_.Span(1, 'a', 'c'), tables_.Span(2, 'b', 'd'), tables_.Span(3, 'c', 'e')};
  std::string asked_lo, asked_hi;
  auto older = [&](const std::vector<TableRef>& cluster, const std::string& lo,
                   const std::string& hi) {
    EXPECT_EQ(cluster.size(), 3u);
    asked_lo = lo;
    asked_hi = hi;
    return true;
  };
  EXPECT_FALSE(picker.Pick(v, 1, older).has_value());
  EXPECT_EQ(asked_lo, "a");
  EXPECT_EQ(asked_hi, "e");
}

TEST_F(CompactionPickerTest, Level0GoesFirstOnceWritesSlowDown) {
  options_.level1_bytes = 1;  // Level 1 is far over its target
  CompactionPicker picker(options_);
  Version v;
  v.levels[0] = {tables_.Span(1, 'a', 'b')};  // one table: below the trigger
  v.levels[1] = {tables_.Span(10, 'c', 'd')};
  std::optional<CompactionPick> pick = picker.Pick(v, 1, NoneInMemory);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->level, 1);
  // Level 0 at the slow-down mark goes before any other level, whatever its table count.
  options_.l0_slowdown_writes_bytes = 1;
  CompactionPicker slowed(options_);
  pick = slowed.Pick(v, 1, NoneInMemory);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->level, 0);
  EXPECT_EQ(Numbers(pick->inputs), (std::vector<uint64_t>{1}));
}

TEST_F(CompactionPickerTest, RoundRobinAboveLevel0) {
  options_.level1_bytes = 1;
  CompactionPicker picker(options_);
  Version v;
  v.levels[1] = {tables_.Span(10, 'a', 'b'), tables_.Span(11, 'c', 'd'),
                 tables_.Span(12, 'e', 'f')};
  v.levels[2] = {tables_.Span(20, 'c', 'c')};
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    std::optional<CompactionPick> pick = picker.Pick(v, 1, NoneInMemory);
    ASSERT_TRUE(pick.has_value());
    EXPECT_EQ(pick->level, 1);
    ASSERT_EQ(pick->inputs.size(), 1u);
    order.push_back(pick->inputs[0]->meta().number);
    if (pick->inputs[0]->meta().number == 11) {
      EXPECT_EQ(Numbers(pick->next), (std::vector<uint64_t>{20}));
    }
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{10, 11, 12, 10}));
}

TEST_F(CompactionPickerTest, ManualStepsMoveWholeClustersAndConsecutiveTables) {
  CompactionPicker picker(options_);
  Version v;
  // Level 0: clusters [a..e] (tables 1, 3) and [m..n] (table 2), below the trigger.
  v.levels[0] = {tables_.Span(1, 'a', 'c'), tables_.Span(2, 'm', 'n'), tables_.Span(3, 'c', 'e')};
  v.levels[1] = {tables_.Span(10, 'a', 'b'), tables_.Span(11, 'x', 'z')};
  // Asked for table 3 only: its whole cluster moves, with the Level-1 table below it.
  std::set<uint64_t> todo = {3, 99};  // 99 is not in the level: dropped
  bool wait = true;
  std::optional<CompactionPick> pick =
      picker.PickManual(v, 0, &todo, 1 << 20, NoneInMemory, &wait);
  ASSERT_TRUE(pick.has_value());
  EXPECT_FALSE(wait);
  EXPECT_EQ(Numbers(pick->inputs), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(Numbers(pick->next), (std::vector<uint64_t>{10}));
  EXPECT_TRUE(todo.empty());
  EXPECT_FALSE(picker.PickManual(v, 0, &todo, 1 << 20, NoneInMemory, &wait).has_value());
  EXPECT_FALSE(wait);  // done

  // Busy tables and memtables with older versions make the step wait.
  todo = {2};
  picker.Start(*pick);
  CompactionPick busy{0, {v.levels[0][1]}, {}};
  picker.Start(busy);
  EXPECT_FALSE(picker.PickManual(v, 0, &todo, 1 << 20, NoneInMemory, &wait).has_value());
  EXPECT_TRUE(wait);
  picker.Finish(busy);
  picker.Finish(*pick);
  auto older = [](const std::vector<TableRef>&, const std::string&, const std::string&) {
    return true;
  };
  EXPECT_FALSE(picker.PickManual(v, 0, &todo, 1 << 20, older, &wait).has_value());
  EXPECT_TRUE(wait);
  EXPECT_EQ(todo, (std::set<uint64_t>{2}));

  // Above Level 0: consecutive tables of *todo, up to the byte budget (one at least).
  v.levels[1] = {tables_.Span(20, 'a', 'b'), tables_.Span(21, 'c', 'd'),
                 tables_.Span(22, 'e', 'f'), tables_.Span(23, 'g', 'h')};
  v.levels[2] = {tables_.Span(30, 'b', 'c'), tables_.Span(31, 'h', 'i')};
  todo = {21, 22, 23};
  pick = picker.PickManual(v, 1, &todo, 1, NoneInMemory, &wait);  // budget: one table
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(Numbers(pick->inputs), (std::vector<uint64_t>{21}));
  EXPECT_EQ(Numbers(pick->next), (std::vector<uint64_t>{30}));
  pick = picker.PickManual(v, 1, &todo, 1 << 20, NoneInMemory, &wait);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(Numbers(pick->inputs), (std::vector<uint64_t>{22, 23}));
  EXPECT_EQ(Numbers(pick->next), (std::vector<uint64_t>{31}));
  EXPECT_TRUE(todo.empty());
}

}  // namespace
}  // namespace nova::ltc
