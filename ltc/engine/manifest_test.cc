#include "ltc/engine/manifest.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

#include "common/coding.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

lsm::TableMeta RandomTable(std::mt19937_64* rng, uint64_t number) {
  lsm::TableMeta t;
  t.number = number;
  t.smallest = "k" + std::to_string((*rng)() % 1000) + std::string(8, '\x01');
  t.largest = "z" + std::to_string((*rng)() % 1000) + std::string(8, '\x01');
  t.num_entries = (*rng)() % 100000;
  t.drange = static_cast<uint32_t>((*rng)() % 64);
  const uint32_t rho = 1 + (*rng)() % 4;
  t.layout.data_end = 1000 * rho;
  t.layout.file_size = t.layout.data_end + 300;
  for (uint32_t i = 0; i < rho; ++i) t.layout.fragment_starts.push_back(1000 * i);
  for (uint32_t i = 0; i <= rho; ++i) {
    std::vector<lsm::FragmentLocation> replicas;
    for (uint32_t r = 0; r < 1 + (*rng)() % 3; ++r) {
      lsm::FragmentLocation l{static_cast<uint32_t>((*rng)() % 10), (*rng)() % 1000,
                         (*rng)() % 100000, (*rng)() % 100000};
      if ((*rng)() % 3 == 0) {  // stored in several StoC blocks
        l.chunk_bytes = 1 + (*rng)() % 5000;
        l.chunk_stride = l.chunk_bytes + (*rng)() % 16;
      }
      replicas.push_back(l);
    }
    t.fragments.push_back(replicas);
  }
  t.filter.push_back({1, 2, 3, 4});
  return t;
}

PersistedDrangeLayout SomeDranges() {
  PersistedDrangeLayout l;
  l.generation = 9;
  PersistedDrange a;
  a.tranges = {{"", false, true}, {"m", false, false}};
  PersistedDrange p;
  p.point = true;
  p.tranges = {{"hot", false, false}};
  PersistedDrange b;
  b.tranges = {{"hot", true, false}};
  l.dranges = {a, p, p, b};
  return l;
}

// Builds a MANIFEST of random edits and the state it should give.
std::pair<std::string, ManifestState> RandomManifest(uint64_t seed, int edits) {
  std::mt19937_64 rng(seed);
  ManifestState state;
  std::string log;
  VersionEdit first;
  first.snapshot = true;
  first.next_file_number = 1;
  first.last_sequence = 0;
  first.dranges = SomeDranges();
  EXPECT_TRUE(state.Apply(first).ok());
  log += EncodeManifestRecord(first);
  uint64_t next = 1;
  for (int i = 0; i < edits; ++i) {
    VersionEdit e;
    for (int n = 0; n < 1 + static_cast<int>(rng() % 3); ++n) {
      e.new_tables.emplace_back(static_cast<int>(rng() % lsm::kNumLevels),
                                RandomTable(&rng, next++));
    }
    // Delete a random existing table.
    for (int l = 0; l < lsm::kNumLevels; ++l) {
      if (!state.level(l).empty() && rng() % 3 == 0) {
        e.deleted_tables.emplace_back(l, state.level(l).begin()->first);
        break;
      }
    }
    e.last_sequence = 100 * (i + 1);
    if (rng() % 5 == 0) e.dranges = SomeDranges();
    if (rng() % 2 == 0) {  // log bookkeeping (docs/durability.md)
      e.next_memtable_id = 10 * (i + 1);
      e.log_floor = 10 * i - rng() % 10;
      for (int n = 0; n < static_cast<int>(rng() % 3); ++n)
        e.obsolete_logs.push_back(10 * i + rng() % 10);
      if (rng() % 3 == 0) e.obsolete_log_ranges.emplace_back(10 * i + 1, 10 * i + 5 + rng() % 100);
    }
    EXPECT_TRUE(state.Apply(e).ok());
    log += EncodeManifestRecord(e);
  }
  return {log, state};
}

ManifestState Replay(const ParsedManifest& p) {
  ManifestState s;
  for (const auto& e : p.edits) EXPECT_TRUE(s.Apply(e).ok());
  return s;
}

TEST(ManifestTest, EditsRoundTripAndReplayToTheSameState) {
  auto [log, state] = RandomManifest(test::TestSeed("ManifestRoundTrip"), 200);
  ParsedManifest p;
  ASSERT_TRUE(ParseManifest(log, &p).ok());
  EXPECT_EQ(p.valid_bytes, log.size());
  EXPECT_EQ(p.edits.size(), 201u);
  EXPECT_TRUE(Replay(p) == state);
  // A snapshot starts an equivalent MANIFEST.
  ManifestState again;
  ASSERT_TRUE(again.Apply(state.Snapshot()).ok());
  EXPECT_TRUE(again == state);
  ASSERT_TRUE(state.dranges().has_value());
  EXPECT_EQ(*state.dranges(), SomeDranges());
}

// A table whose fragments are single blocks encodes exactly as before chunked locations
// existed, so MANIFESTs written then still read; one with a chunked fragment flags its
// replica count, which a reader that predates the flag rejects rather than misreads.
TEST(ManifestTest, TableMetaEncodingOfChunkedLocations) {
  lsm::TableMeta t;
  t.number = 7;
  t.smallest = "a";
  t.largest = "b";
  t.num_entries = 3;
  t.smallest_sequence = 4;
  t.largest_sequence = 5;
  t.drange = 2;
  t.layout.data_end = 100;
  t.layout.file_size = 150;
  t.layout.fragment_starts = {0};
  t.fragments = {{{1, 10, 20, 100}}, {{2, 11, 0, 50}}};
  t.filter = {{2, 11, 50, 9}};
  std::string expected;
  PutVarint64(&expected, 7);
  PutLengthPrefixed(&expected, "a");
  PutLengthPrefixed(&expected, "b");
  PutVarint64(&expected, 3);
  PutVarint64(&expected, 4);
  PutVarint64(&expected, 5);
  PutVarint32(&expected, 2);
  t.layout.EncodeTo(&expected);
  for (auto [stoc, file, offset, size] : {std::array<uint64_t, 4>{1, 10, 20, 100},
                                         {2, 11, 0, 50}, {2, 11, 50, 9}}) {
    PutVarint32(&expected, 1);  // replicas
    PutVarint32(&expected, static_cast<uint32_t>(stoc));
    PutVarint64(&expected, file);
    PutVarint64(&expected, offset);
    PutVarint64(&expected, size);
  }
  std::string plain;
  lsm::EncodeTableMeta(&plain, t);
  EXPECT_EQ(plain, expected);

  t.fragments[0].push_back({3, 12, 8, 100, 40, 48});
  std::string chunked;
  lsm::EncodeTableMeta(&chunked, t);
  EXPECT_GT(chunked.size(), plain.size() + 4);
  std::string_view in = chunked;
  lsm::TableMeta back;
  ASSERT_TRUE(lsm::DecodeTableMeta(&in, &back));
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(back.fragments, t.fragments);
  EXPECT_EQ(back.filter, t.filter);
  // Chunks closer together than they are long are damage.
  t.fragments[0][1].chunk_stride = 39;
  std::string bad;
  lsm::EncodeTableMeta(&bad, t);
  in = bad;
  EXPECT_FALSE(lsm::DecodeTableMeta(&in, &back));
}

TEST(ManifestTest, ObsoleteLogsOnlyGrow) {
  ManifestState s;
  VersionEdit e;
  e.log_floor = 10;
  e.obsolete_logs = {12, 15};
  e.next_memtable_id = 20;
  ASSERT_TRUE(s.Apply(e).ok());
  EXPECT_TRUE(s.LogIsObsolete(9));
  EXPECT_FALSE(s.LogIsObsolete(10));
  EXPECT_TRUE(s.LogIsObsolete(12));
  EXPECT_FALSE(s.LogIsObsolete(13));
  VersionEdit older;  // a lower floor or next id never takes anything back
  older.log_floor = 5;
  older.next_memtable_id = 3;
  older.obsolete_logs = {17};
  ASSERT_TRUE(s.Apply(older).ok());
  EXPECT_TRUE(s.LogIsObsolete(9));
  EXPECT_TRUE(s.LogIsObsolete(15));
  EXPECT_TRUE(s.LogIsObsolete(17));
  EXPECT_EQ(s.next_memtable_id(), 20u);
  VersionEdit up;
  up.log_floor = 16;
  ASSERT_TRUE(s.Apply(up).ok());
  EXPECT_TRUE(s.LogIsObsolete(12));
  EXPECT_TRUE(s.LogIsObsolete(17));
  ManifestState again;  // the snapshot carries it all
  ASSERT_TRUE(again.Apply(s.Snapshot()).ok());
  EXPECT_TRUE(again == s);
}

// Ranges of ids a recovery did not replay (range_engine.cc Open): obsolete inside, not at
// their end; carried by snapshots; dropped once the floor passes them; an empty or
// reversed range on disk is Corruption.
TEST(ManifestTest, ObsoleteLogRanges) {
  ManifestState s;
  VersionEdit e;
  e.log_floor = 10;
  e.obsolete_log_ranges = {{10, 14}, {15, 1ull << 40}};
  ASSERT_TRUE(s.Apply(e).ok());
  for (uint64_t id : {10ull, 13ull, 15ull, 1000ull, (1ull << 40) - 1}) {
    EXPECT_TRUE(s.LogIsObsolete(id)) << id;
  }
  for (uint64_t id : {14ull, 1ull << 40, (1ull << 40) + 5}) EXPECT_FALSE(s.LogIsObsolete(id)) << id;
  VersionEdit decoded;
  std::string enc;
  e.EncodeTo(&enc);
  ASSERT_TRUE(decoded.DecodeFrom(enc).ok());
  EXPECT_EQ(decoded, e);
  ManifestState again;
  ASSERT_TRUE(again.Apply(s.Snapshot()).ok());
  EXPECT_TRUE(again == s);
  VersionEdit up;
  up.log_floor = 14;  // past the first range
  ASSERT_TRUE(s.Apply(up).ok());
  EXPECT_EQ(s.Snapshot().obsolete_log_ranges.size(), 1u);
  EXPECT_FALSE(s.LogIsObsolete(14));
  EXPECT_TRUE(s.LogIsObsolete(16));
  // Overlapping and nested ranges from several recoveries stay obsolete as a whole.
  ManifestState nested;
  VersionEdit r1;
  r1.log_floor = 12;
  r1.obsolete_log_ranges = {{13, 15}, {16, 100}};
  ASSERT_TRUE(nested.Apply(r1).ok());
  VersionEdit r2;
  r2.obsolete_log_ranges = {{13, 105}, {200, 300}, {300, 310}};
  ASSERT_TRUE(nested.Apply(r2).ok());
  for (uint64_t id : {13ull, 15ull, 99ull, 100ull, 103ull, 200ull, 305ull}) {
    EXPECT_TRUE(nested.LogIsObsolete(id)) << id;
  }
  for (uint64_t id : {12ull, 105ull, 199ull, 310ull}) EXPECT_FALSE(nested.LogIsObsolete(id)) << id;
  EXPECT_EQ(nested.Snapshot().obsolete_log_ranges,
            (std::vector<std::pair<uint64_t, uint64_t>>{{13, 105}, {200, 310}}));
  // Tag 10 with end <= begin.
  std::string bad = "\x0a\x05\x05";
  EXPECT_TRUE(decoded.DecodeFrom(bad).IsCorruption());
}

TEST(ManifestTest, TornTailIsIgnoredAtEveryCut) {
  auto [log, state] = RandomManifest(7, 5);
  ParsedManifest full;
  ASSERT_TRUE(ParseManifest(log, &full).ok());
  const std::string last = EncodeManifestRecord(full.edits.back());
  const size_t last_start = log.size() - last.size();
  for (size_t cut = last_start; cut < log.size(); ++cut) {
    ParsedManifest p;
    ASSERT_TRUE(ParseManifest(std::string_view(log).substr(0, cut), &p).ok()) << cut;
    EXPECT_EQ(p.edits.size(), full.edits.size() - 1);
    EXPECT_EQ(p.valid_bytes, last_start);
    EXPECT_EQ(p.torn_bytes, cut - last_start);
  }
  // A bad checksum on the last record is a torn append too.
  std::string bad_last = log;
  bad_last[bad_last.size() - 1] ^= 0x55;
  ParsedManifest p;
  ASSERT_TRUE(ParseManifest(bad_last, &p).ok());
  EXPECT_EQ(p.edits.size(), full.edits.size() - 1);
}

TEST(ManifestTest, CorruptionBeforeTheEndIsReported) {
  auto [log, state] = RandomManifest(11, 20);
  std::mt19937_64 rng(test::TestSeed("ManifestCorruption"));
  ParsedManifest full;
  ASSERT_TRUE(ParseManifest(log, &full).ok());
  const size_t last_start = log.size() - EncodeManifestRecord(full.edits.back()).size();
  for (int i = 0; i < 200; ++i) {
    std::string bad = log;
    const size_t at = rng() % last_start;  // inside some record that is not the last
    bad[at] ^= static_cast<char>(1 + rng() % 255);
    ParsedManifest p;
    Status s = ParseManifest(bad, &p);
    ASSERT_TRUE(s.IsCorruption()) << "damage at byte " << at << " went unnoticed: " << s.ToString();
    EXPECT_NE(s.message().find("MANIFEST"), std::string::npos) << s.ToString();
  }
}

TEST(ManifestTest, ContradictionsAndMissingSnapshotAreCorruption) {
  VersionEdit not_snapshot;
  not_snapshot.last_sequence = 5;
  ParsedManifest p;
  EXPECT_TRUE(ParseManifest(EncodeManifestRecord(not_snapshot), &p).IsCorruption());

  ManifestState s;
  VersionEdit del;
  del.deleted_tables.emplace_back(1, 42);
  EXPECT_TRUE(s.Apply(del).IsCorruption());
  std::mt19937_64 rng(1);
  VersionEdit add;
  add.new_tables.emplace_back(0, RandomTable(&rng, 5));
  ASSERT_TRUE(s.Apply(add).ok());
  EXPECT_TRUE(s.Apply(add).IsCorruption());
  EXPECT_EQ(s.next_file_number(), 6u);

  VersionEdit e;
  std::string junk = "\x63";  // unknown tag 99
  EXPECT_TRUE(e.DecodeFrom(junk).IsCorruption());
}

}  // namespace
}  // namespace nova::ltc
