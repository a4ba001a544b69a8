#include "coordinator/cluster_config.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "common/status.h"
#include "tests/util/test_util.h"

namespace nova::coordinator {
namespace {

ClusterConfig FourRanges() {
  auto points = EvenSplitPoints(4);
  EXPECT_TRUE(points.ok());
  auto config = MakeInitialConfig("demo", points.value(), {{"log_mode", "memory"}});
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  ClusterConfig c = config.value();
  c.ltcs = {{"ltc-1", "127.0.0.1:7001"}, {"ltc-2", "127.0.0.1:7002"}};
  c.stocs = {{"stoc-1", "127.0.0.1:8001"}};
  c.logcs = {{"logc-1", "127.0.0.1:9001"}};
  c.ranges[0].ltc = c.ranges[1].ltc = "ltc-1";
  c.ranges[2].ltc = c.ranges[3].ltc = "ltc-2";
  return c;
}

TEST(ClusterConfigTest, RoundTrip) {
  ClusterConfig c = FourRanges();
  c.epoch = 42;
  c.ranges[1].owner_epoch = 7;
  auto parsed = ClusterConfig::FromJson(c.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed.value(), c);
  EXPECT_EQ(parsed->settings.at("log_mode"), "memory");
  EXPECT_EQ(parsed->ranges[1].owner_epoch, 7u);
  // With migrations queued and running.
  c.migrations = {RangeMigration{1, "ltc-1", "ltc-2", 7, true, 1234567},
                  RangeMigration{2, "ltc-2", "ltc-1", 0, false, 0}};
  parsed = ClusterConfig::FromJson(c.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed.value(), c);
  ASSERT_NE(parsed->MigrationOf(1), nullptr);
  EXPECT_EQ(parsed->MigrationOf(1)->started_ms, 1234567u);
  EXPECT_EQ(parsed->MigrationOf(3), nullptr);
  // Inconsistent migrations are refused: an unknown range, two of one range, no move.
  for (const RangeMigration& bad : {RangeMigration{9, "ltc-1", "ltc-2", 0, false, 0},
                                    RangeMigration{1, "ltc-2", "ltc-1", 0, false, 0},
                                    RangeMigration{3, "ltc-2", "ltc-2", 0, false, 0}}) {
    ClusterConfig wrong = c;
    wrong.migrations.push_back(bad);
    EXPECT_TRUE(wrong.Validate().IsInvalidArgument()) << bad.range;
    EXPECT_FALSE(ClusterConfig::FromJson(wrong.ToJson()).ok());
  }
}

TEST(ClusterConfigTest, OwnerEpochIsZeroInOlderDocumentsAndBumpsWithEveryNewOwner) {
  ClusterConfig c = FourRanges();
  std::string doc = c.ToJson();
  // A document written before owner epochs: the field is absent.
  size_t at;
  while ((at = doc.find("\"owner_epoch\": 0,")) != std::string::npos) doc.erase(at, 17);
  ASSERT_EQ(doc.find("owner_epoch"), std::string::npos) << doc;
  auto parsed = ClusterConfig::FromJson(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const RangeAssignment& r : parsed->ranges) EXPECT_EQ(r.owner_epoch, 0u);
  // Not a number: refused, not read as 0.
  std::string bad = c.ToJson();
  at = bad.find("\"owner_epoch\": 0");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 16, "\"owner_epoch\": \"x\"");
  EXPECT_TRUE(ClusterConfig::FromJson(bad).status().IsCorruption()) << bad;

  RangeAssignment r;
  r.SetOwner("ltc-1");
  EXPECT_EQ(r.owner_epoch, 1u);
  r.SetOwner("ltc-1");  // no change, no bump
  EXPECT_EQ(r.owner_epoch, 1u);
  r.SetOwner("ltc-2");
  EXPECT_EQ(r.owner_epoch, 2u);
  r.SetOwner("");
  EXPECT_EQ(r.owner_epoch, 3u);
}

TEST(ClusterConfigTest, DrainingStocsRoundTripAndAreAbsentInOlderDocuments) {
  ClusterConfig c = FourRanges();
  // A draining StoC may be a member or not (remove-stoc keeps the id after removing it).
  c.draining_stocs = {"stoc-1", "7"};
  auto parsed = ClusterConfig::FromJson(c.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->draining_stocs, (std::set<std::string>{"7", "stoc-1"}));
  EXPECT_EQ(parsed.value(), c);

  // A document written before the field: absent, read as empty.
  c.draining_stocs.clear();
  std::string doc = c.ToJson();
  const std::string field = "\"draining_stocs\": [],";
  const size_t at = doc.find(field);
  ASSERT_NE(at, std::string::npos) << doc;
  doc.erase(at, field.size());
  ASSERT_EQ(doc.find("draining_stocs"), std::string::npos) << doc;
  parsed = ClusterConfig::FromJson(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->draining_stocs.empty());

  // Ids must be valid member ids (as in `draining`); wrong types are Corruption.
  ClusterConfig bad = FourRanges();
  bad.draining_stocs = {"../x"};
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
  EXPECT_FALSE(ClusterConfig::FromJson(bad.ToJson()).ok());
  bad = FourRanges();
  bad.draining = {"a b"};
  EXPECT_TRUE(bad.Validate().IsInvalidArgument());
  std::string typed = FourRanges().ToJson();
  typed.replace(typed.find("\"draining_stocs\": []"), 20, "\"draining_stocs\": [3]");
  EXPECT_EQ(ClusterConfig::FromJson(typed).status().code(), Status::Code::kCorruption);
}

TEST(ClusterConfigTest, ArbitraryBytesSurviveInBounds) {
  // Split points with NUL, 0xff and non-UTF-8 bytes.
  std::vector<std::string> points = {std::string("\x00\x01", 2), std::string("\x7f\xc3", 2),
                                     std::string("\xff\xff\x00", 3)};
  auto c = MakeInitialConfig("bytes", points, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto parsed = ClusterConfig::FromJson(c->ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed.value(), c.value());
  EXPECT_EQ(parsed->ranges[1].keys.start, points[0]);
  EXPECT_EQ(*parsed->ranges[3 - 1].keys.end, points[2]);
}

TEST(ClusterConfigTest, EvenSplitPointsSpreadTheFirstByte) {
  auto points = EvenSplitPoints(4);
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 3u);
  EXPECT_EQ((*points)[0], std::string(1, '\x40'));
  EXPECT_EQ((*points)[1], std::string(1, '\x80'));
  EXPECT_EQ((*points)[2], std::string(1, '\xc0'));
  EXPECT_TRUE(EvenSplitPoints(1).ok());
  EXPECT_EQ(EvenSplitPoints(1)->size(), 0u);
  EXPECT_EQ(EvenSplitPoints(256)->size(), 255u);
  EXPECT_FALSE(EvenSplitPoints(0).ok());
  EXPECT_FALSE(EvenSplitPoints(257).ok());
  EXPECT_FALSE(EvenSplitPoints(-3).ok());
}

TEST(ClusterConfigTest, RoutingFindsTheOwningRange) {
  ClusterConfig c = FourRanges();
  EXPECT_EQ(c.RangeForKey("")->id, 0u);
  EXPECT_EQ(c.RangeForKey(std::string(1, '\x3f'))->id, 0u);
  EXPECT_EQ(c.RangeForKey(std::string(1, '\x40'))->id, 1u);  // start is inclusive
  EXPECT_EQ(c.RangeForKey("\x7f\xff\xff")->id, 1u);          // end is exclusive
  EXPECT_EQ(c.RangeForKey(std::string(1, '\x80'))->id, 2u);
  EXPECT_EQ(c.RangeForKey("\xff\xff\xff\xff")->id, 3u);  // last range is unbounded
  EXPECT_EQ(c.RangeForKey("user123")->ltc, "ltc-1");     // 'u' = 0x75: range 1
  EXPECT_EQ(c.RangesOf("ltc-1"), (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(c.RangesOf("nobody").empty());
}

TEST(ClusterConfigTest, RoutingAgreesWithLinearScan) {
  const uint64_t seed = test::TestSeed("RoutingAgreesWithLinearScan");
  std::mt19937_64 rng(seed);
  std::vector<std::string> points;
  std::string p;
  for (int i = 0; i < 20; i++) {
    p += static_cast<char>(rng() % 256);
    points.push_back(p);  // each extends the previous, so they increase
  }
  auto c = MakeInitialConfig("r", points, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int i = 0; i < 2000; i++) {
    std::string key;
    const size_t len = rng() % 25;
    for (size_t j = 0; j < len; j++) key += static_cast<char>(rng() % 256);
    const RangeAssignment* found = c->RangeForKey(key);
    ASSERT_NE(found, nullptr);
    int matches = 0;
    for (const RangeAssignment& r : c->ranges) matches += r.Contains(key) ? 1 : 0;
    ASSERT_EQ(matches, 1);
    ASSERT_TRUE(found->Contains(key));
  }
}

TEST(ClusterConfigTest, ValidationRejectsGapsOverlapsAndBadOwners) {
  ClusterConfig good = FourRanges();
  ASSERT_TRUE(good.Validate().ok());

  ClusterConfig c = good;
  c.ranges[1].keys.start = "\x41";  // gap after range 0
  EXPECT_EQ(c.Validate().code(), Status::Code::kInvalidArgument);
  c = good;
  c.ranges[0].keys.start = "a";  // does not start at ""
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.ranges[3].keys.end = "\xff";  // last range bounded
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.ranges[1].keys.end.reset();  // unbounded in the middle
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.ranges[2].id = 0;  // duplicate id
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.ranges[2].ltc = "ltc-9";  // owner not a member
  EXPECT_NE(c.Validate().message().find("ltc-9"), std::string::npos);
  c = good;
  c.ranges.clear();
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.cluster.clear();
  EXPECT_FALSE(c.Validate().ok());
  c = good;
  c.ltcs["bad/id"] = "x:1";
  EXPECT_FALSE(c.Validate().ok());
  // Empty range (start == end).
  EXPECT_FALSE(MakeInitialConfig("x", {"a", "a"}, {}).ok());
  EXPECT_FALSE(MakeInitialConfig("x", {"b", "a"}, {}).ok());
  EXPECT_FALSE(MakeInitialConfig("", {}, {}).ok());
}

TEST(ClusterConfigTest, HostileJsonNeverCrashes) {
  const std::string valid = FourRanges().ToJson();
  const std::vector<std::string> bad = {
      "",
      "null",
      "[]",
      "{}",
      "{\"format_version\": 1}",
      "{\"format_version\": 2}",
      "{\"format_version\": -1}",
      "not json",
      std::string("\x00\xff", 2),
      std::string(100000, '['),  // deep nesting
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"zz","end":null}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"0","end":null}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":99999999999,"start":"","end":null}]})",
      R"({"format_version":1,"cluster":"c","epoch":-5,"ranges":[{"id":0,"start":"","end":null}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null,"ltc":7}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":""}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[1,2]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null}],"ltcs":[]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null}],"settings":{"a":1}})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null}],"migrations":{}})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null}],"migrations":[{"range":0,"from":"a"}]})",
      R"({"format_version":1,"cluster":"c","epoch":1,"ranges":[{"id":0,"start":"","end":null}],"migrations":[{"range":0,"from":"a","to":"b","running":1}]})",
  };
  for (const std::string& text : bad) {
    auto parsed = ClusterConfig::FromJson(text);
    EXPECT_FALSE(parsed.ok()) << text.substr(0, 80);
  }
  // Every truncation and single-byte corruption of a valid document: no crash, and either
  // a clean error or a document that validates.
  for (size_t i = 0; i < valid.size(); i++) {
    auto truncated = ClusterConfig::FromJson(valid.substr(0, i));
    if (truncated.ok()) {
      EXPECT_TRUE(truncated->Validate().ok());
    }
    std::string flipped = valid;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    auto parsed = ClusterConfig::FromJson(flipped);
    if (parsed.ok()) {
      EXPECT_TRUE(parsed->Validate().ok());
    }
  }
  // A minimal valid document (unknown fields are ignored, for later versions' additions).
  auto minimal = ClusterConfig::FromJson(
      R"({"format_version":1,"cluster":"c","epoch":3,"ranges":[{"id":0,"start":"","end":null}],"future":1})");
  ASSERT_TRUE(minimal.ok()) << minimal.status().ToString();
  EXPECT_EQ(minimal->epoch, 3u);
  EXPECT_TRUE(minimal->ranges[0].ltc.empty());
}

TEST(ClusterConfigTest, SplitPointsFile) {
  auto points = ParseSplitPoints("# comment\n\n  40 \n80\nC0ff\n");
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  EXPECT_EQ(*points, (std::vector<std::string>{"\x40", "\x80", "\xc0\xff"}));
  auto unsorted = ParseSplitPoints("80\n40\n");
  EXPECT_NE(unsorted.status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseSplitPoints("4\n").ok());       // odd length
  EXPECT_FALSE(ParseSplitPoints("zz\n").ok());      // not hex
  EXPECT_FALSE(ParseSplitPoints("40\n40\n").ok());  // duplicate
  EXPECT_TRUE(ParseSplitPoints("")->empty());
}

TEST(ClusterConfigTest, MemberIdsAndKinds) {
  EXPECT_TRUE(ValidateMemberId("ltc-1.a_B").ok());
  EXPECT_FALSE(ValidateMemberId("").ok());
  EXPECT_FALSE(ValidateMemberId("..").ok());
  EXPECT_FALSE(ValidateMemberId("a/b").ok());
  EXPECT_FALSE(ValidateMemberId(std::string(65, 'a')).ok());
  for (MemberKind k : kAllMemberKinds) {
    MemberKind parsed;
    ASSERT_TRUE(ParseMemberKind(MemberKindName(k), &parsed));
    EXPECT_EQ(parsed, k);
  }
  MemberKind parsed;
  EXPECT_FALSE(ParseMemberKind("ltcs", &parsed));
}

}  // namespace
}  // namespace nova::coordinator
