// VersionSet: a new range gets its first MANIFEST; edits survive a recovery; the MANIFEST
// rolls over to a snapshot; an edit whose append fails is given up (a new MANIFEST without
// it, its tables deleted) or, if no new MANIFEST can be written either, reported fatal;
// table numbers are never handed out twice; a table deleted at one level and added at the
// same one is replaced, at another one moved.
#include "ltc/engine/version_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/manifest.h"
#include "ltc/engine/version_test_util.h"

namespace nova::ltc {
namespace {

class VersionSetTest : public ::testing::Test {
 protected:
  std::unique_ptr<VersionSet> Recover(bool* new_range, uint64_t roll_bytes = 1ull << 20) {
    VersionSetOptions o;
    o.range_id = 1;
    o.manifest_roll_bytes = roll_bytes;
    auto v = std::make_unique<VersionSet>(o, tables_.ctx());
    const Status s = v->Recover(new_range);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return v;
  }

  // An edit adding table `number` (one key, "k<number>") at `level`.
  VersionEdit AddTable(uint64_t number, int level = 0) {
    VersionEdit e;
    const TableRef t =
        tables_.Table(number, {{"k" + std::to_string(number), "v", number, lsm::kTypeValue}});
    e.new_tables.emplace_back(level, t->meta());
    e.next_file_number = number + 1;
    e.last_sequence = number;
    return e;
  }

  static std::vector<uint64_t> Level(const VersionSet& v, int level) {
    std::vector<uint64_t> n;
    for (const TableRef& t : v.current()->levels[level]) n.push_back(t->meta().number);
    return n;
  }

  version_test::TestTables tables_;
  lsm::MemoryTableStore& store_ = tables_.store();
};

TEST_F(VersionSetTest, EditsSurviveRecovery) {
  bool new_range = false;
  auto v = Recover(&new_range);
  EXPECT_TRUE(new_range);
  EXPECT_EQ(store_.manifest_appends(), 1u) << "a new range gets its first MANIFEST";
  bool fatal = true;
  ASSERT_TRUE(v->LogAndApply(AddTable(5), &fatal).ok());
  EXPECT_FALSE(fatal);
  ASSERT_TRUE(v->LogAndApply(AddTable(6, 1), &fatal).ok());
  VersionEdit del;
  del.deleted_tables.emplace_back(0, 5);
  ASSERT_TRUE(v->LogAndApply(del, &fatal).ok());
  EXPECT_EQ(Level(*v, 0), std::vector<uint64_t>{});
  EXPECT_EQ(Level(*v, 1), std::vector<uint64_t>{6});

  auto again = Recover(&new_range);
  EXPECT_FALSE(new_range);
  EXPECT_EQ(Level(*again, 1), std::vector<uint64_t>{6});
  EXPECT_EQ(again->state().last_sequence(), 6u);
  EXPECT_EQ(again->NewFileNumber(), 7u);
  EXPECT_EQ(again->NewFileNumber(), 8u) << "a number is handed out once";
  again->SkipFileNumbersThrough(20);
  EXPECT_EQ(again->NewFileNumber(), 21u);
  again->SkipFileNumbersThrough(3);
  EXPECT_EQ(again->NewFileNumber(), 22u) << "skipping never goes back";
}

TEST_F(VersionSetTest, RollsOverToASnapshot) {
  bool new_range = false;
  auto v = Recover(&new_range, /*roll_bytes=*/256);
  bool fatal = false;
  for (uint64_t n = 1; n <= 40; ++n) ASSERT_TRUE(v->LogAndApply(AddTable(n), &fatal).ok());
  EXPECT_GT(store_.manifest_rolls(), 0u);
  auto contents = store_.ReadManifest();
  ASSERT_TRUE(contents.ok());
  ParsedManifest parsed;
  ASSERT_TRUE(ParseManifest(contents.value(), &parsed).ok());
  ASSERT_FALSE(parsed.edits.empty());
  EXPECT_TRUE(parsed.edits.front().snapshot);
  EXPECT_LT(parsed.edits.size(), 40u) << "the MANIFEST was not bounded";
  auto again = Recover(&new_range);
  EXPECT_EQ(Level(*again, 0).size(), 40u);
}

TEST_F(VersionSetTest, FailedAppendGivesTheEditUp) {
  bool new_range = false;
  auto v = Recover(&new_range);
  bool fatal = false;
  ASSERT_TRUE(v->LogAndApply(AddTable(1), &fatal).ok());
  // Every append attempt fails; the roll-over that settles the edit works.
  VersionSetOptions o;
  store_.FailNextManifestWrites(o.append_attempts);
  Status s = v->LogAndApply(AddTable(2), &fatal);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("MANIFEST append"), std::string::npos) << s.ToString();
  EXPECT_FALSE(fatal);
  EXPECT_EQ(v->manifest_failures(), 1u);
  EXPECT_EQ(Level(*v, 0), std::vector<uint64_t>{1}) << "the edit must not be installed";
  EXPECT_FALSE(store_.HasTable(2)) << "the given-up edit's table must be deleted";
  auto again = Recover(&new_range);
  EXPECT_EQ(Level(*again, 0), std::vector<uint64_t>{1}) << "a recovery must not see it";

  // The roll-over fails too: whether the edit is in the MANIFEST is unknown.
  store_.FailNextManifestWrites(o.append_attempts + 1);
  s = again->LogAndApply(AddTable(3), &fatal);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(fatal);
  EXPECT_EQ(Level(*again, 0), std::vector<uint64_t>{1});
  EXPECT_TRUE(store_.HasTable(3)) << "the MANIFEST may reference it: it must stay";
}

TEST_F(VersionSetTest, DeletingAndAddingATableAtOneLevelReplacesIt) {
  bool new_range = false;
  auto v = Recover(&new_range);
  bool fatal = false;
  ASSERT_TRUE(v->LogAndApply(AddTable(4, 1), &fatal).ok());
  const lsm::TableMeta old = v->current()->levels[1][0]->meta();
  lsm::TableMeta moved = old;
  moved.fragments[0][0].stoc_id = 77;  // as if relocated
  VersionEdit e;
  e.deleted_tables.emplace_back(1, 4);
  e.new_tables.emplace_back(1, moved);
  ASSERT_TRUE(v->LogAndApply(e, &fatal).ok());
  ASSERT_EQ(v->current()->levels[1].size(), 1u);
  EXPECT_EQ(v->current()->levels[1][0]->meta(), moved);
  // The old handle went without deleting the table (only copies the new one lacks).
  EXPECT_TRUE(store_.HasTable(4));
  EXPECT_EQ(store_.tables_deleted(), 0u);
  auto again = Recover(&new_range);
  EXPECT_EQ(again->current()->levels[1][0]->meta(), moved);

  // A replace whose append fails for good drops only the new copies: the table stays.
  lsm::TableMeta moved2 = moved;
  moved2.fragments[0][0].stoc_id = 78;
  VersionEdit e2;
  e2.deleted_tables.emplace_back(1, 4);
  e2.new_tables.emplace_back(1, moved2);
  store_.FailNextManifestWrites(3);  // every append attempt; the new MANIFEST is written
  EXPECT_FALSE(again->LogAndApply(e2, &fatal).ok());
  EXPECT_FALSE(fatal);
  EXPECT_EQ(again->current()->levels[1][0]->meta(), moved);
  EXPECT_TRUE(store_.HasTable(4));
}

// A compaction's table move: deleted at one level, added at the next. The new version holds
// the same handle there, and nothing is deleted, neither when the old version goes nor when
// the move's append fails for good.
TEST_F(VersionSetTest, DeletingATableAtOneLevelAndAddingItAtAnotherMovesIt) {
  bool new_range = false;
  auto v = Recover(&new_range);
  bool fatal = false;
  ASSERT_TRUE(v->LogAndApply(AddTable(4, 0), &fatal).ok());
  const TableRef handle = v->current()->levels[0][0];
  VersionEdit move;
  move.deleted_tables.emplace_back(0, 4);
  move.new_tables.emplace_back(1, handle->meta());
  ASSERT_TRUE(v->LogAndApply(move, &fatal).ok());
  EXPECT_TRUE(v->current()->levels[0].empty());
  ASSERT_EQ(v->current()->levels[1].size(), 1u);
  EXPECT_EQ(v->current()->levels[1][0], handle) << "the same handle (and open table)";
  EXPECT_TRUE(store_.HasTable(4));
  EXPECT_EQ(store_.tables_deleted(), 0u);
  auto again = Recover(&new_range);
  EXPECT_EQ(Level(*again, 0), std::vector<uint64_t>{});
  EXPECT_EQ(Level(*again, 1), std::vector<uint64_t>{4});

  // A move whose append fails for good leaves the table where it was, files and all.
  VersionEdit move2;
  move2.deleted_tables.emplace_back(1, 4);
  move2.new_tables.emplace_back(2, again->current()->levels[1][0]->meta());
  store_.FailNextManifestWrites(3);  // every append attempt; the new MANIFEST is written
  EXPECT_FALSE(again->LogAndApply(move2, &fatal).ok());
  EXPECT_FALSE(fatal);
  EXPECT_EQ(Level(*again, 1), std::vector<uint64_t>{4});
  EXPECT_TRUE(store_.HasTable(4));
  EXPECT_EQ(store_.tables_deleted(), 0u);
}

}  // namespace
}  // namespace nova::ltc
