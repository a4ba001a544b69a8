// Codecs of the client <-> LTC protocol: round trips, hostile input, limits.
#include "ltc/protocol/client_protocol.h"

#include <random>

#include <gtest/gtest.h>

#include "ltc/protocol/client_request.h"

namespace nova::ltc {
namespace {

TEST(ClientProtocolTest, DescribeRoundTrip) {
  DescribeResponse d;
  d.epoch = 7;
  d.ltc_id = 3;
  d.ranges = {{0, {"", "@"}},
              {1, {"@", std::string("\x80", 1)}},
              {2, {std::string("\x80", 1), std::nullopt}}};
  d.limits = {1, 2, 3, 4, 5};
  DescribeResponse out;
  ASSERT_TRUE(DecodeDescribeResponse(EncodeDescribeResponse(d), &out).ok());
  EXPECT_EQ(out.epoch, 7u);
  EXPECT_EQ(out.ltc_id, 3u);
  ASSERT_EQ(out.ranges.size(), 3u);
  EXPECT_EQ(out.ranges, d.ranges);
  EXPECT_EQ(out.ranges[1].keys.start, "@");
  EXPECT_TRUE(out.ranges[2].keys.unbounded());
  EXPECT_EQ(out.limits.max_request_bytes, 4u);
}

TEST(ClientProtocolTest, RequestsRoundTrip) {
  for (ClientMsg t :
       {ClientMsg::kGet, ClientMsg::kPut, ClientMsg::kDelete, ClientMsg::kGetSnapshot}) {
    KeyRequest k{9, std::string("k\0ey", 4), "value", 0};
    if (t != ClientMsg::kPut) k.value.clear();
    if (t == ClientMsg::kGet) k.snapshot = 12;
    ClientRequest r;
    ASSERT_TRUE(DecodeClientRequest(static_cast<uint16_t>(t), EncodeKeyRequest(t, k), &r).ok());
    EXPECT_EQ(r.key.key, k.key);
    EXPECT_EQ(r.key.value, k.value);
    EXPECT_EQ(r.key.snapshot, k.snapshot);
    EXPECT_EQ(r.epoch(), 9u);
  }
  WriteRequest w{5, {{BatchOp::kPut, "a", "1"}, {BatchOp::kDelete, "b", ""}}};
  ClientRequest r;
  ASSERT_TRUE(DecodeClientRequest(0x0305, EncodeWriteRequest(w), &r).ok());
  ASSERT_EQ(r.write.entries.size(), 2u);
  EXPECT_EQ(r.write.entries[1].op, BatchOp::kDelete);
  ScanRequest s{4, "x", 10, 3, true};
  ASSERT_TRUE(DecodeClientRequest(0x0306, EncodeScanRequest(s), &r).ok());
  EXPECT_TRUE(r.scan.keys_only);
  EXPECT_EQ(r.scan.count, 10u);
  ScanResponse sr{{{"a", "1"}, {"b", ""}}, "c", false};
  ScanResponse sr2;
  ASSERT_TRUE(DecodeScanResponse(EncodeScanResponse(sr), &sr2).ok());
  EXPECT_EQ(sr2.pairs, sr.pairs);
  EXPECT_EQ(sr2.next_start, "c");
}

// The reverse flag is a trailing byte: a forward request is byte for byte the encoding of
// before it existed (so old clients' requests decode, as forward), a reverse one is that
// plus one byte, and anything else there is refused.
TEST(ClientProtocolTest, ScanDirectionIsATrailingField) {
  wire::PayloadWriter w;  // the first version's layout, written field by field
  w.PutU64(4);
  w.PutBytes(std::string("s\0t", 3));
  w.PutU32(10);
  w.PutU64(3);
  w.PutU8(1);  // keys only
  const std::string legacy = w.Finish();
  ScanRequest forward{4, std::string("s\0t", 3), 10, 3, true};
  EXPECT_EQ(EncodeScanRequest(forward), legacy);
  ClientRequest r;
  r.scan.reverse = true;
  ASSERT_TRUE(DecodeClientRequest(0x0306, legacy, &r).ok());
  EXPECT_FALSE(r.scan.reverse);
  EXPECT_TRUE(r.scan.keys_only);
  EXPECT_EQ(r.scan.start, forward.start);

  ScanRequest reverse = forward;
  reverse.reverse = true;
  const std::string rev = EncodeScanRequest(reverse);
  ASSERT_EQ(rev, legacy + std::string(1, '\x01'));
  ASSERT_TRUE(DecodeClientRequest(0x0306, rev, &r).ok());
  EXPECT_TRUE(r.scan.reverse);
  EXPECT_TRUE(r.scan.keys_only);
  EXPECT_EQ(r.scan.count, 10u);
  EXPECT_EQ(r.scan.snapshot, 3u);
  // An unknown direction, or more bytes after it, is corrupt.
  EXPECT_TRUE(DecodeClientRequest(0x0306, legacy + std::string(1, '\0'), &r).IsCorruption());
  EXPECT_TRUE(DecodeClientRequest(0x0306, legacy + "\x02", &r).IsCorruption());
  EXPECT_TRUE(DecodeClientRequest(0x0306, rev + "\x01", &r).IsCorruption());
  // Truncations short of the legacy fields fail cleanly.
  for (size_t i = 0; i < legacy.size(); ++i) {
    EXPECT_FALSE(DecodeClientRequest(0x0306, rev.substr(0, i), &r).ok()) << i;
  }
}

TEST(ClientProtocolTest, HostileInputIsRefused) {
  ClientRequest r;
  EXPECT_EQ(DecodeClientRequest(0x0399, "", &r).code(), Status::Code::kNotSupported);
  EXPECT_TRUE(DecodeClientRequest(0x0301, "x", &r).IsCorruption());  // Describe has no payload
  // A batch claiming 2^32-1 entries with none present: refused without allocating them.
  std::string huge = EncodeU64(1);
  huge += std::string("\xff\xff\xff\xff\x0f", 5);
  EXPECT_TRUE(DecodeClientRequest(0x0305, huge, &r).IsCorruption());
  // Unknown batch op, unknown scan flag, trailing bytes.
  WriteRequest w{1, {{BatchOp::kPut, "a", "1"}}};
  std::string bad = EncodeWriteRequest(w);
  bad[9] = 7;
  EXPECT_TRUE(DecodeClientRequest(0x0305, bad, &r).IsCorruption());
  std::string scan = EncodeScanRequest(ScanRequest{1, "a", 1, 0, false});
  scan.back() = 0x40;
  EXPECT_TRUE(DecodeClientRequest(0x0306, scan, &r).IsCorruption());
  EXPECT_TRUE(
      DecodeClientRequest(0x0304, EncodeKeyRequest(ClientMsg::kDelete, {1, "k", "", 0}) + "z", &r)
          .IsCorruption());
  // Every truncation of a valid request fails cleanly; random bytes never crash.
  const std::string full = EncodeWriteRequest(WriteRequest{3, {{BatchOp::kPut, "key", "val"}}});
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_FALSE(DecodeClientRequest(0x0305, full.substr(0, i), &r).ok()) << i;
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    (void)DecodeClientRequest(static_cast<uint16_t>(0x0301 + rng() % 12), junk, &r);
  }
}

TEST(ClientProtocolTest, LimitsNameTheFlag) {
  ClientLimits l{4, 8, 2, 1 << 20, 10};
  ClientRequest r;
  r.type = ClientMsg::kPut;
  r.key = {1, "12345", "v", 0};
  Status s = CheckClientLimits(r, l);
  EXPECT_NE(s.message().find("--ltc_max_key_bytes"), std::string::npos) << s.ToString();
  r.key = {1, "k", std::string(9, 'v'), 0};
  EXPECT_NE(CheckClientLimits(r, l).message().find("--ltc_max_value_bytes"), std::string::npos);
  r.type = ClientMsg::kWrite;
  r.write.entries.assign(3, BatchEntry{BatchOp::kDelete, "k", ""});
  EXPECT_NE(CheckClientLimits(r, l).message().find("--ltc_max_batch_ops"), std::string::npos);
  r.type = ClientMsg::kScan;
  r.scan = {1, "", 11, 0, false};
  EXPECT_NE(CheckClientLimits(r, l).message().find("--ltc_max_scan_count"), std::string::npos);
}

TEST(ClientProtocolTest, AdminRequestsRoundTrip) {
  ClientRequest r;
  ApproximateSizesRequest a{6, {{"a", "m"}, {"m", std::nullopt}, {"", "\x01"}}};
  ASSERT_TRUE(DecodeClientRequest(0x030A, EncodeApproximateSizesRequest(a), &r).ok());
  EXPECT_EQ(r.sizes.spans, a.spans);
  EXPECT_TRUE(r.sizes.spans[1].unbounded());
  EXPECT_EQ(r.epoch(), 6u);
  std::vector<uint64_t> sizes;
  ASSERT_TRUE(DecodeU64List(EncodeU64List({1, 0, 1ull << 40}), &sizes).ok());
  EXPECT_EQ(sizes, (std::vector<uint64_t>{1, 0, 1ull << 40}));
  CompactRangeRequest c{8, {"k", std::nullopt}};
  ASSERT_TRUE(DecodeClientRequest(0x030B, EncodeCompactRangeRequest(c), &r).ok());
  EXPECT_EQ(r.compact.span, c.span);
  EXPECT_EQ(r.epoch(), 8u);
  ASSERT_TRUE(DecodeClientRequest(0x030C, EncodeRangeStatsRequest({true}), &r).ok());
  EXPECT_TRUE(r.stats.with_tables);
  EXPECT_TRUE(DecodeClientRequest(0x030C, std::string(1, '\x02'), &r).IsCorruption());
  EXPECT_TRUE(DecodeClientRequest(0x030C, "", &r).IsCorruption());

  RangeStatsResponse s;
  s.epoch = 3;
  s.ltc_id = 2;
  RangeFigures f;
  f.range = {5, {"a", std::nullopt}};
  f.open = true;
  f.memtable_bytes = 1000;
  f.memtables = 2;
  f.block_cache_bytes = 77;
  f.levels = {{1, 100, 5, 6, 7}, {0, 0, 0, 0, 0}, {3, 300, 50, 60, 70}};
  f.tables = {{0, 12, 100, "a\x01", "b\x02"}, {2, 9, 300, "c", "d"}};
  s.ranges = {f, RangeFigures{{6, {"", "a"}}, false, 0, 0, 0, {}, {}}};
  RangeStatsResponse out;
  ASSERT_TRUE(DecodeRangeStatsResponse(EncodeRangeStatsResponse(s), &out).ok());
  EXPECT_EQ(out.epoch, 3u);
  EXPECT_EQ(out.ltc_id, 2u);
  EXPECT_EQ(out.ranges, s.ranges);
  // Every truncation fails cleanly.
  const std::string full = EncodeRangeStatsResponse(s);
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_FALSE(DecodeRangeStatsResponse(full.substr(0, i), &out).ok()) << i;
  }
  const std::string req = EncodeApproximateSizesRequest(a);
  for (size_t i = 0; i < req.size(); ++i) {
    EXPECT_FALSE(DecodeClientRequest(0x030A, req.substr(0, i), &r).ok()) << i;
  }
}

TEST(ClientProtocolTest, AdminLimitsNameTheFlag) {
  ClientLimits l{4, 8, 2, 1 << 20, 10};
  ClientRequest r;
  r.type = ClientMsg::kApproximateSizes;
  r.sizes.spans = {{"a", "12345"}};
  EXPECT_NE(CheckClientLimits(r, l).message().find("--ltc_max_key_bytes"), std::string::npos);
  r.sizes.spans = {{"a", std::nullopt}};
  EXPECT_TRUE(CheckClientLimits(r, l).ok());
  r.type = ClientMsg::kCompactRange;
  r.compact.span = {"12345", std::nullopt};
  EXPECT_NE(CheckClientLimits(r, l).message().find("--ltc_max_key_bytes"), std::string::npos);
}

TEST(ClientProtocolTest, WrongRangeCarriesEpoch) {
  const Status s = FormatWrongRange(42, "not mine");
  EXPECT_TRUE(s.IsWrongRange());
  EXPECT_EQ(ParseWrongRangeEpoch(s), 42u);
  EXPECT_EQ(ParseWrongRangeEpoch(Status::WrongRange("garbage")), 0u);
}

}  // namespace
}  // namespace nova::ltc
