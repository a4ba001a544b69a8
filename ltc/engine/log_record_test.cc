#include "ltc/engine/log_record.h"

#include <random>

#include <gtest/gtest.h>

#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

std::string Record(uint64_t mem, uint64_t seq, std::string_view key, std::string_view value,
                   uint8_t type = 1) {
  std::string r;
  AppendLogRecord(&r, {LogEntry{mem, seq, type, key, value}});
  return r;
}

TEST(LogRecordTest, RoundTripsPutsDeletesAndBatches) {
  std::string log = Record(7, 1, "a", "one");
  log += Record(7, 2, "b", "", /*type=*/0);
  std::string binary_key("\0\xff", 2);
  AppendLogRecord(&log, {LogEntry{7, 3, 1, binary_key, std::string(70000, 'v')},
                         LogEntry{9, 4, 0, "z", ""}});
  std::vector<LogEntry> entries;
  LogParseResult r = ParseLogRecords(log, &entries);
  EXPECT_EQ(r.records, 3u);
  EXPECT_EQ(r.valid_bytes, log.size());
  EXPECT_EQ(r.ignored_bytes, 0u);
  EXPECT_EQ(r.stop_reason, "");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].key, "a");
  EXPECT_EQ(entries[0].value, "one");
  EXPECT_EQ(entries[1].type, 0);
  EXPECT_EQ(entries[2].key, binary_key);
  EXPECT_EQ(entries[2].value.size(), 70000u);
  EXPECT_EQ(entries[3].memtable, 9u);
  EXPECT_EQ(entries[3].sequence, 4u);
}

TEST(LogRecordTest, ZeroFilledTailIsACleanEnd) {
  std::string log = Record(1, 1, "k", "v") + std::string(4096, '\0');
  std::vector<LogEntry> entries;
  LogParseResult r = ParseLogRecords(log, &entries);
  EXPECT_EQ(entries.size(), 1u);
  EXPECT_EQ(r.ignored_bytes, 0u);
  EXPECT_EQ(r.stop_reason, "");
}

// Every prefix of a log (a WRITE torn anywhere) gives back exactly the complete records
// before the cut, and says the rest was ignored.
TEST(LogRecordTest, TornTailAtEveryOffsetKeepsCompleteRecords) {
  std::string log;
  std::vector<size_t> ends;
  for (int i = 0; i < 5; ++i) {
    // Values end in a non-zero byte: a record cut before its last byte must not be
    // completed by the zero padding.
    log += Record(3, 10 + i, "key" + std::to_string(i), std::string(i * 7 + 1, 'x'));
    ends.push_back(log.size());
  }
  for (size_t cut = 0; cut <= log.size(); ++cut) {
    std::string torn = log.substr(0, cut) + std::string(64, '\0');
    std::vector<LogEntry> entries;
    LogParseResult r = ParseLogRecords(torn, &entries);
    size_t complete = 0;
    while (complete < ends.size() && ends[complete] <= cut) ++complete;
    ASSERT_EQ(entries.size(), complete) << "cut at " << cut;
    ASSERT_EQ(r.valid_bytes, complete == 0 ? 0 : ends[complete - 1]) << "cut at " << cut;
    for (size_t i = 0; i < complete; ++i) EXPECT_EQ(entries[i].sequence, 10 + i);
  }
}

// A flipped bit anywhere stops the replay at the damaged record: the records before it are
// used, nothing from it on.
TEST(LogRecordTest, CorruptedRecordStopsReplayThere) {
  std::mt19937_64 rng(test::TestSeed("LogRecordTest.CorruptedRecordStopsReplayThere"));
  std::string log;
  std::vector<size_t> starts;
  for (int i = 0; i < 8; ++i) {
    starts.push_back(log.size());
    log += Record(5, 100 + i, "k" + std::to_string(i), std::string(rng() % 50, 'v'));
  }
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = log;
    const size_t pos = rng() % bad.size();
    bad[pos] = static_cast<char>(bad[pos] ^ (1 << (rng() % 8)));
    size_t damaged = 0;
    while (damaged + 1 < starts.size() && starts[damaged + 1] <= pos) ++damaged;
    std::vector<LogEntry> entries;
    LogParseResult r = ParseLogRecords(bad, &entries);
    ASSERT_EQ(entries.size(), damaged) << "flipped byte " << pos;
    EXPECT_EQ(r.valid_bytes, starts[damaged]);
    EXPECT_GT(r.ignored_bytes, 0u);
    EXPECT_FALSE(r.stop_reason.empty());
  }
}

TEST(LogRecordTest, GarbageNeverCrashes) {
  std::mt19937_64 rng(test::TestSeed("LogRecordTest.GarbageNeverCrashes"));
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 200, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    std::vector<LogEntry> entries;
    LogParseResult r = ParseLogRecords(junk, &entries);
    EXPECT_LE(r.valid_bytes + r.ignored_bytes, junk.size());
  }
}

}  // namespace
}  // namespace nova::ltc
