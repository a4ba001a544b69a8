// LtcServer in process (--engine=leveldb backends): a new assignment opens added ranges,
// closes removed ones, and makes requests with the old epoch WrongRange.
#include "ltc/ltc_server.h"

#include <gtest/gtest.h>

#include <atomic>

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
  LtcServer server(LtcServerOptions(), &source,
                   LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20}), &metrics);
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
  // Applied by the server's applier thread.
  ASSERT_TRUE(test::WaitFor([&] { return server.epoch() == 2u; }, 10s));
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

// A range that fails to open (its StoCs unreachable, say) does not lose the assignment:
// the server retries it with backoff until it applies.
TEST(LtcServerTest, FailedAssignmentIsRetried) {
  const std::string dir = test::TestTempDir("ltc_server_test_retry");
  auto all = EqualRanges(2);
  ASSERT_TRUE(all.ok());
  RangeAssignment a;
  a.epoch = 1;
  a.ranges = {all.value()[0]};
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  BackendFactory leveldb = LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20});
  std::atomic<int> failures_left{3};
  BackendFactory flaky = [&](const RangeInfo& r, const RangeAssignment& as)
      -> Result<std::unique_ptr<RangeBackend>> {
    if (r.id == 1 && failures_left.fetch_sub(1) > 0) return Status::IOError("injected");
    return leveldb(r, as);
  };
  LtcServer server(LtcServerOptions(), &source, flaky, &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  RangeAssignment b = a;
  b.epoch = 2;
  b.ranges = {all.value()[0], all.value()[1]};
  ASSERT_TRUE(source.Update(b).ok());
  ASSERT_TRUE(test::WaitFor([&] { return server.epoch() == 2u; }, 20s));
  EXPECT_LE(failures_left.load(), 0);
  server.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
