// LtcServer in process (--engine=leveldb backends): a new assignment opens added ranges,
// closes removed ones, and makes requests with the old epoch WrongRange; a range that is
// still opening blocks only its own requests.
#include "ltc/server/ltc_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "client/nova_client.h"
#include "common/mutex.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

TEST(LtcServerTest, NewAssignmentAddsAndRemovesRanges) {
  const std::string dir = test::TestTempDir("ltc_server_test");
  auto all = EqualRanges(4);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
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
  LtcAssignment b = a;
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
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = {all.value()[0]};
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  BackendFactory leveldb = LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20});
  std::atomic<int> failures_left{3};
  BackendFactory flaky = [&](const RangeInfo& r, const LtcAssignment& as)
      -> Result<std::unique_ptr<RangeBackend>> {
    if (r.id == 1 && failures_left.fetch_sub(1) > 0) return Status::IOError("injected");
    return leveldb(r, as);
  };
  LtcServer server(LtcServerOptions(), &source, flaky, &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  LtcAssignment b = a;
  b.epoch = 2;
  b.ranges = {all.value()[0], all.value()[1]};
  ASSERT_TRUE(source.Update(b).ok());
  ASSERT_TRUE(test::WaitFor([&] { return server.epoch() == 2u; }, 20s));
  EXPECT_LE(failures_left.load(), 0);
  server.Shutdown();
}

// A range still being opened (recovering its memtables) makes its requests wait, then
// answers Unavailable, while the other ranges are served; once open, it serves. The client
// library retries Unavailable until its deadline, so its calls block until the range is back.
TEST(LtcServerTest, RecoveringRangeBlocksItsRequestsOnly) {
  const std::string dir = test::TestTempDir("ltc_server_test_recovering");
  auto all = EqualRanges(2);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = all.value();
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  BackendFactory leveldb = LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20});
  Mutex gate_mu;
  CondVar gate_cv;
  bool open_range_1 = false;  // under gate_mu (a local: the analysis cannot guard it)
  BackendFactory gated = [&](const RangeInfo& r, const LtcAssignment& as)
      -> Result<std::unique_ptr<RangeBackend>> {
    if (r.id == 1) {  // range 1 "recovers" until the test lets it go
      MutexLock l(&gate_mu);
      gate_cv.Wait(&l, [&] { return open_range_1; });
    }
    return leveldb(r, as);
  };
  LtcServerOptions so;
  so.recovery_wait = 50ms;
  LtcServer server(so, &source, gated, &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());

  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 400ms;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  // Range 0 serves at once.
  ASSERT_TRUE(c.Put("\x10k", "r0").ok());
  // Range 1 does not: the call keeps being retried until its deadline.
  const MonoTime start = MonoNow();
  Status s = c.Put("\x90k", "r1");
  EXPECT_FALSE(s.ok());
  EXPECT_GE(MonoNow() - start, 300ms) << "the call returned before its deadline: " << s.ToString();
  // Meanwhile range 0 keeps serving.
  ASSERT_TRUE(c.Get("\x10k").ok());
  auto stats = c.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_NE(stats.value().find("being recovered"), std::string::npos) << stats.value();
  // A call in flight when the range opens completes.
  client::ClientOptions patient = co;
  patient.timeout = 10s;
  client::NovaClient c2(patient);
  ASSERT_TRUE(c2.Init().ok());
  auto put = std::async(std::launch::async, [&] { return c2.Put("\x90k", "r1"); });
  EXPECT_EQ(put.wait_for(200ms), std::future_status::timeout) << "served before the range opened";
  {
    MutexLock l(&gate_mu);
    open_range_1 = true;
  }
  gate_cv.NotifyAll();
  s = put.get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.Get("\x90k").value(), "r1");
  server.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
