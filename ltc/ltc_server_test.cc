// LtcServer in process (--engine=leveldb backends): a new assignment opens added ranges,
// closes removed ones, and makes requests with the old epoch WrongRange.
#include "ltc/ltc_server.h"

#include <gtest/gtest.h>

#include "client/nova_client.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

TEST(LtcServerTest, NewAssignmentAddsAndRemovesRanges) {
  const std::string dir = test::TestTempDir("ltc_server_test");
  auto all = EqualRanges(4);
  ASSERT_TRUE(all.ok());
  RangeAssignment a;
  a.epoch = 1;
  a.ranges = {all.value()[0], all.value()[1]};
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  LtcServer server(LtcServerOptions(), &source, LevelDbBackendFactory(dir, 1 << 20), &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());

  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 300ms;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  ASSERT_TRUE(c.Put("\x10k", "r0").ok());
  ASSERT_TRUE(c.Put("\x50k", "r1").ok());
  Status s = c.Put("\x90k", "r2");  // range 2 is not ours yet
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();

  // Epoch 2: range 0 leaves, range 2 arrives.
  RangeAssignment b = a;
  b.epoch = 2;
  b.ranges = {all.value()[1], all.value()[2]};
  ASSERT_TRUE(source.Update(b).ok());
  EXPECT_EQ(server.epoch(), 2u);
  // The client still routes with epoch 1: it is told WrongRange, refreshes, and succeeds.
  ASSERT_TRUE(c.Put("\x90k", "r2").ok());
  EXPECT_EQ(c.routing().epoch, 2u);
  EXPECT_EQ(c.Get("\x50k").value(), "r1");  // kept range keeps its data
  s = c.Get("\x10k").status();                // removed range: no LTC serves it
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  // An older or equal epoch is refused.
  EXPECT_FALSE(server.ApplyAssignment(a).ok());
  server.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
