// Round trips of every LogC message, and malformed inputs: truncated, trailing bytes,
// bad booleans, lying counts and random garbage all give Corruption, never a crash.
#include "logc/client/logc_protocol.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/util/test_util.h"

namespace nova::logc {
namespace {

// Every proper prefix of `encoded` and `encoded` plus a byte must fail with Corruption.
template <typename M>
void ExpectStrict(const std::string& encoded) {
  for (size_t n = 0; n < encoded.size(); ++n) {
    M m;
    Status s = Decode(std::string_view(encoded.data(), n), &m);
    EXPECT_TRUE(s.IsCorruption()) << "prefix " << n << ": " << s.ToString();
  }
  M m;
  EXPECT_TRUE(Decode(encoded + "x", &m).IsCorruption());
}

TEST(LogcProtocolTest, OpenRoundTrip) {
  OpenLogRequest req{7, 1ull << 40, 3, 16 << 20, true};
  OpenLogRequest req2;
  ASSERT_TRUE(Decode(Encode(req), &req2).ok());
  EXPECT_EQ(req2.range, 7u);
  EXPECT_EQ(req2.memtable, 1ull << 40);
  EXPECT_EQ(req2.segment, 3u);
  EXPECT_EQ(req2.capacity, 16u << 20);
  EXPECT_TRUE(req2.persist);
  ExpectStrict<OpenLogRequest>(Encode(req));

  OpenLogResponse resp;
  resp.handle = 42;
  resp.addr = transport::RemoteAddr{0xdeadbeef00ull, 0x1234};
  resp.capacity = 1 << 20;
  resp.persisted = true;
  resp.length = 900;
  resp.persisted_length = 800;
  resp.incarnation = 0xfeedface12345678ull;
  OpenLogResponse resp2;
  ASSERT_TRUE(Decode(Encode(resp), &resp2).ok());
  EXPECT_EQ(resp2.handle, 42u);
  EXPECT_EQ(resp2.addr.addr, 0xdeadbeef00ull);
  EXPECT_EQ(resp2.addr.rkey, 0x1234u);
  EXPECT_EQ(resp2.capacity, 1u << 20);
  EXPECT_TRUE(resp2.persisted);
  EXPECT_EQ(resp2.length, 900u);
  EXPECT_EQ(resp2.persisted_length, 800u);
  EXPECT_EQ(resp2.incarnation, 0xfeedface12345678ull);
  ExpectStrict<OpenLogResponse>(Encode(resp));
}

TEST(LogcProtocolTest, BooleansOtherThanZeroOrOneAreCorrupt) {
  std::string enc = Encode(OpenLogRequest{1, 2, 3, 4, false});
  enc.back() = 2;
  OpenLogRequest m;
  EXPECT_TRUE(Decode(enc, &m).IsCorruption());
}

TEST(LogcProtocolTest, ListRoundTripAndLyingCounts) {
  ListLogsRequest req{9}, req2;
  ASSERT_TRUE(Decode(Encode(req), &req2).ok());
  EXPECT_EQ(req2.range, 9u);
  ExpectStrict<ListLogsRequest>(Encode(req));

  ListLogsResponse resp;
  for (uint32_t i = 0; i < 3; ++i) {
    LogFileInfo f;
    f.memtable = 100 + i;
    f.segment = i;
    f.handle = 7 * i;
    f.capacity = 4096u << i;
    f.persisted = i % 2 == 1;
    f.length = 10 * i;
    f.persisted_length = 5 * i;
    f.addr = transport::RemoteAddr{1000ull * i, 3 + i};
    resp.files.push_back(f);
  }
  resp.incarnation = 77;
  resp.in_sync = true;
  ListLogsResponse resp2;
  ASSERT_TRUE(Decode(Encode(resp), &resp2).ok());
  EXPECT_EQ(resp2.incarnation, 77u);
  EXPECT_TRUE(resp2.in_sync);
  ASSERT_EQ(resp2.files.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    const LogFileInfo& f = resp2.files[i];
    EXPECT_EQ(f.memtable, 100u + i);
    EXPECT_EQ(f.segment, i);
    EXPECT_EQ(f.handle, 7 * i);
    EXPECT_EQ(f.capacity, 4096u << i);
    EXPECT_EQ(f.persisted, i % 2 == 1);
    EXPECT_EQ(f.length, 10u * i);
    EXPECT_EQ(f.persisted_length, 5u * i);
    EXPECT_EQ(f.addr.addr, 1000ull * i);
    EXPECT_EQ(f.addr.rkey, 3 + i);
  }
  ExpectStrict<ListLogsResponse>(Encode(resp));
  // A count of 2^28 entries with no bytes behind it is refused before allocating.
  std::string lying = "\x80\x80\x80\x80\x01";
  ListLogsResponse m;
  EXPECT_TRUE(Decode(lying, &m).IsCorruption());
}

TEST(LogcProtocolTest, MarkInSyncRoundTrip) {
  MarkInSyncRequest m{12, 0xabcdef0123ull, true}, m2;
  ASSERT_TRUE(Decode(Encode(m), &m2).ok());
  EXPECT_EQ(m2.range, 12u);
  EXPECT_EQ(m2.incarnation, 0xabcdef0123ull);
  EXPECT_TRUE(m2.persist);
  ExpectStrict<MarkInSyncRequest>(Encode(m));
}

TEST(LogcProtocolTest, ReadDeletePersistedStatsRoundTrip) {
  ReadLogRequest rr{1, 2, 3, 4, 5}, rr2;
  ASSERT_TRUE(Decode(Encode(rr), &rr2).ok());
  EXPECT_EQ(rr2.range, 1u);
  EXPECT_EQ(rr2.memtable, 2u);
  EXPECT_EQ(rr2.segment, 3u);
  EXPECT_EQ(rr2.offset, 4u);
  EXPECT_EQ(rr2.length, 5u);
  ExpectStrict<ReadLogRequest>(Encode(rr));

  ReadLogResponse rp{77, std::string("ab\0cd", 5)}, rp2;
  ASSERT_TRUE(Decode(Encode(rp), &rp2).ok());
  EXPECT_EQ(rp2.persisted_length, 77u);
  EXPECT_EQ(rp2.data, std::string("ab\0cd", 5));
  ExpectStrict<ReadLogResponse>(Encode(rp));

  DeleteLogsRequest d{4, {1, 2, 1ull << 63}}, d2;
  ASSERT_TRUE(Decode(Encode(d), &d2).ok());
  EXPECT_EQ(d2.range, 4u);
  EXPECT_EQ(d2.memtables, (std::vector<uint64_t>{1, 2, 1ull << 63}));
  ExpectStrict<DeleteLogsRequest>(Encode(d));
  DeleteLogsResponse dr{12}, dr2;
  ASSERT_TRUE(Decode(Encode(dr), &dr2).ok());
  EXPECT_EQ(dr2.files_deleted, 12u);

  LogPersisted p{5, 1234, Status::IOError("disk on fire")}, p2;
  ASSERT_TRUE(Decode(Encode(p), &p2).ok());
  EXPECT_EQ(p2.handle, 5u);
  EXPECT_EQ(p2.persisted_length, 1234u);
  EXPECT_EQ(p2.status, Status::IOError("disk on fire"));
  ExpectStrict<LogPersisted>(Encode(p));
  LogPersisted ok{6, 1, Status::OK()}, ok2;
  ASSERT_TRUE(Decode(Encode(ok), &ok2).ok());
  EXPECT_TRUE(ok2.status.ok());

  LogcStatsResponse st{1, 2, 3, 4, 5, 6, 7}, st2;
  ASSERT_TRUE(Decode(Encode(st), &st2).ok());
  EXPECT_EQ(st2.files, 1u);
  EXPECT_EQ(st2.memory_bytes, 2u);
  EXPECT_EQ(st2.memory_limit_bytes, 3u);
  EXPECT_EQ(st2.received_bytes, 4u);
  EXPECT_EQ(st2.persisted_bytes, 5u);
  EXPECT_EQ(st2.fsyncs, 6u);
  EXPECT_EQ(st2.errors, 7u);
  ExpectStrict<LogcStatsResponse>(Encode(st));
}

// The owner epoch is a trailing field: absent (an older sender, or epoch 0) it reads as 0
// and the bytes are the legacy ones; present it round-trips; cut short it is corrupt.
template <typename M>
void ExpectTrailingEpoch(M m) {
  m.owner_epoch = 0;
  const std::string legacy = Encode(m);
  M back;
  back.owner_epoch = 99;
  ASSERT_TRUE(Decode(legacy, &back).ok());
  EXPECT_EQ(back.owner_epoch, 0u);
  ExpectStrict<M>(legacy);
  m.owner_epoch = 0x0123456789abcdefull;
  const std::string fenced = Encode(m);
  ASSERT_EQ(fenced.size(), legacy.size() + 8);
  EXPECT_EQ(fenced.substr(0, legacy.size()), legacy);
  ASSERT_TRUE(Decode(fenced, &back).ok());
  EXPECT_EQ(back.owner_epoch, 0x0123456789abcdefull);
  for (size_t n = legacy.size() + 1; n < fenced.size(); ++n) {
    EXPECT_TRUE(Decode(std::string_view(fenced.data(), n), &back).IsCorruption()) << n;
  }
  EXPECT_TRUE(Decode(fenced + "x", &back).IsCorruption());
}

TEST(LogcProtocolTest, OwnerEpochIsATrailingField) {
  ExpectTrailingEpoch(OpenLogRequest{7, 8, 1, 4096, true});
  OpenLogRequest open;
  ASSERT_TRUE(Decode(Encode(OpenLogRequest{7, 8, 1, 4096, true, 3}), &open).ok());
  EXPECT_EQ(open.capacity, 4096u);
  EXPECT_TRUE(open.persist);
  ExpectTrailingEpoch(DeleteLogsRequest{2, {5, 6}});
  DeleteLogsRequest del;
  ASSERT_TRUE(Decode(Encode(DeleteLogsRequest{2, {5, 6}, 4}), &del).ok());
  EXPECT_EQ(del.memtables, (std::vector<uint64_t>{5, 6}));
  ExpectTrailingEpoch(MarkInSyncRequest{3, 77, true});
}

TEST(LogcProtocolTest, FenceRoundTrip) {
  FenceLogsRequest req{9, 1ull << 40};
  FenceLogsRequest req2;
  ASSERT_TRUE(Decode(Encode(req), &req2).ok());
  EXPECT_EQ(req2.range, 9u);
  EXPECT_EQ(req2.owner_epoch, 1ull << 40);
  ExpectStrict<FenceLogsRequest>(Encode(req));
  FenceLogsResponse resp{3, 0xabcdefull};
  FenceLogsResponse resp2;
  ASSERT_TRUE(Decode(Encode(resp), &resp2).ok());
  EXPECT_EQ(resp2.files_fenced, 3u);
  EXPECT_EQ(resp2.incarnation, 0xabcdefull);
  ExpectStrict<FenceLogsResponse>(Encode(resp));
}

TEST(LogcProtocolTest, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(test::TestSeed("RandomGarbageNeverCrashes"));
  for (int i = 0; i < 20000; ++i) {
    std::string in(rng() % 64, '\0');
    for (char& c : in) c = static_cast<char>(rng());
    OpenLogRequest a;
    OpenLogResponse b;
    ListLogsResponse c;
    ReadLogResponse d;
    DeleteLogsRequest e;
    LogPersisted f;
    LogcStatsResponse g;
    FenceLogsRequest h;
    MarkInSyncRequest k;
    // Only "no crash and no OK for junk that does not parse" can be asserted of garbage;
    // a status other than OK or Corruption would be a bug.
    for (Status s : {Decode(in, &a), Decode(in, &b), Decode(in, &c), Decode(in, &d), Decode(in, &e),
                     Decode(in, &f), Decode(in, &g), Decode(in, &h), Decode(in, &k)}) {
      EXPECT_TRUE(s.ok() || s.IsCorruption()) << s.ToString();
    }
  }
}

}  // namespace
}  // namespace nova::logc
