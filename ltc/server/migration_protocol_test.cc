#include "ltc/server/migration_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nova::ltc {
namespace {

TEST(MigrationProtocolTest, MessagesRoundTrip) {
  const MigrationKey k{7, 42};
  MigrationKey got;
  ASSERT_TRUE(DecodeBeginRequest(EncodeBeginRequest(k), &got).ok());
  EXPECT_EQ(got.range, 7u);
  EXPECT_EQ(got.owner_epoch, 42u);

  std::vector<uint64_t> ids = {3, 5, 1ull << 40};
  std::vector<uint64_t> ids_got;
  bool logged = false;
  ASSERT_TRUE(DecodeBeginResponse(EncodeBeginResponse(ids, true), &ids_got, &logged).ok());
  EXPECT_EQ(ids_got, ids);
  EXPECT_TRUE(logged);

  FetchRequest q{k, 9, std::string("key\0\x01", 5), 4096};
  FetchRequest q_got;
  ASSERT_TRUE(DecodeFetchRequest(EncodeFetchRequest(q), &q_got).ok());
  EXPECT_EQ(q_got.memtable, 9u);
  EXPECT_EQ(q_got.after, q.after);
  EXPECT_EQ(q_got.max_bytes, 4096u);

  FetchResponse p{true, "last", std::string(1000, 'x')};
  FetchResponse p_got;
  ASSERT_TRUE(DecodeFetchResponse(EncodeFetchResponse(p), &p_got).ok());
  EXPECT_TRUE(p_got.done);
  EXPECT_EQ(p_got.last_key, "last");
  EXPECT_EQ(p_got.chunk, p.chunk);

  std::string meta;
  ASSERT_TRUE(DecodeHandoffResponse(EncodeHandoffResponse("meta-bytes"), &meta).ok());
  EXPECT_EQ(meta, "meta-bytes");

  MigrationOutcome outcome;
  ASSERT_TRUE(DecodeEndRequest(EncodeEndRequest(k, MigrationOutcome::kAbandoned), &got, &outcome).ok());
  EXPECT_EQ(outcome, MigrationOutcome::kAbandoned);
}

TEST(MigrationProtocolTest, MalformedInputIsCorruption) {
  MigrationKey k;
  EXPECT_TRUE(DecodeBeginRequest("", &k).IsCorruption());
  EXPECT_TRUE(DecodeBeginRequest(EncodeBeginRequest({1, 2}) + "x", &k).IsCorruption());
  std::vector<uint64_t> ids;
  // A count far larger than the bytes that follow.
  bool logged;
  EXPECT_TRUE(DecodeBeginResponse(std::string("\xff\xff\xff\xff\x0f", 5), &ids, &logged).IsCorruption());
  FetchResponse p;
  const std::string good = EncodeFetchResponse({false, "k", "chunk"});
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeFetchResponse(good.substr(0, n), &p).ok()) << n;
  }
  MigrationOutcome outcome;
  std::string bad_outcome = EncodeBeginRequest({1, 2}) + std::string(1, '\x07');
  EXPECT_TRUE(DecodeEndRequest(bad_outcome, &k, &outcome).IsCorruption());
}

}  // namespace
}  // namespace nova::ltc
