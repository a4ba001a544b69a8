// LogRegistry alone (no transport: the parts that make no request): the logs and ranges it
// keeps, recovered logs adopted in place of earlier ones, failed replicas dropped and
// counted, and replicas failed when their LogC went down or restarted.
#include "logc/client/log_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/fault_point.h"
#include "common/metrics.h"

namespace nova::logc {
namespace {

using internal::Log;
using internal::Replica;

class LogRegistryTest : public ::testing::Test {
 protected:
  LogRegistryTest()
      : logcs_(Links(), std::chrono::milliseconds(100)),
        registry_(&settings_, std::chrono::milliseconds(1000), /*endpoint=*/nullptr, &logcs_, &m_,
                  [this] { ++lost_; }) {
    m_.replica_failures = metrics_.GetCounter("failures", "");
    logcs_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}, {"c", "c:1"}});
  }

  static LogcReplicaSet::Links Links() {
    LogcReplicaSet::Links links;
    links.is_up = [](transport::PeerId) { return false; };
    links.connect = [](const std::string&) -> Result<transport::PeerId> {
      return Status::NetworkError("no transport in this test");
    };
    links.now = [] { return MonoNow(); };
    return links;
  }

  static std::shared_ptr<Replica> NewReplica(const std::string& id, transport::PeerId peer,
                                             uint64_t incarnation) {
    auto rep = std::make_shared<Replica>();
    rep->logc_id = id;
    rep->peer = peer;
    rep->incarnation = incarnation;
    return rep;
  }

  // A log as recovery hands it over: recovered, with replicas at `ids` (peers 1, 2, ...).
  static std::shared_ptr<Log> Recovered(uint32_t range, uint64_t memtable,
                                        const std::vector<std::string>& ids) {
    auto log = std::make_shared<Log>();
    log->range = range;
    log->memtable = memtable;
    MutexLock lock(&log->mu);
    log->recovered = true;
    log->capacity.push_back(4096);
    transport::PeerId peer = 1;
    for (const std::string& id : ids) log->replicas.push_back(NewReplica(id, peer++, 7));
    return log;
  }

  static int Live(Log* log) {
    MutexLock lock(&log->mu);
    return log->LiveLocked();
  }

  internal::LogSettings settings_;
  MetricsRegistry metrics_;
  internal::LogClientMetrics m_;
  int lost_ = 0;  // on_replica_lost calls
  LogcReplicaSet logcs_;
  LogRegistry registry_;
};

TEST_F(LogRegistryTest, KeepsLogsAndTheRangesTheyServe) {
  auto log = registry_.GetOrCreate(1, 10);
  EXPECT_EQ(registry_.GetOrCreate(1, 10), log);
  registry_.GetOrCreate(1, 11);
  registry_.GetOrCreate(2, 10);
  EXPECT_EQ(registry_.All().size(), 3u);
  EXPECT_EQ(registry_.LogsOf(1).size(), 2u);
  EXPECT_TRUE(registry_.Serves(1));
  EXPECT_TRUE(registry_.Serves(2));
  EXPECT_FALSE(registry_.Serves(3));
  EXPECT_TRUE(registry_.WrittenMemtables(1).empty());  // nothing acknowledged yet
  {
    MutexLock lock(&log->mu);
    log->durable_end = 5;
  }
  EXPECT_EQ(registry_.WrittenMemtables(1), std::set<uint64_t>{10});
  EXPECT_TRUE(registry_.WhileNoLogs([] { return Status::OK(); }).code() ==
              Status::Code::kIllegalState);
  auto removed = registry_.Remove(1, {10, 12});
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], log);
  EXPECT_EQ(registry_.LogsOf(1).size(), 1u);
  registry_.ForgetRange(2);
  EXPECT_FALSE(registry_.Serves(2));
}

TEST_F(LogRegistryTest, ARefusedRangeIsServedOnlyOnceUnblocked) {
  registry_.Block(4);
  EXPECT_EQ(registry_.BlockedCount(), 1u);
  EXPECT_FALSE(registry_.Serves(4));
  registry_.Unblock(4);
  EXPECT_EQ(registry_.BlockedCount(), 0u);
  EXPECT_TRUE(registry_.Serves(4));
  EXPECT_TRUE(registry_.WhileNoLogs([] { return Status::OK(); }).ok());
}

TEST_F(LogRegistryTest, AdoptReplacesARecoveredLogButNeverOneBeingWritten) {
  registry_.Adopt(Recovered(1, 10, {"a", "b"}));
  EXPECT_EQ(logcs_.open_logs("a"), 1);
  EXPECT_EQ(logcs_.open_logs("b"), 1);
  auto again = Recovered(1, 10, {"b", "c"});
  registry_.Adopt(again);  // a second recovery of the range: the new one counts
  EXPECT_EQ(registry_.LogsOf(1).at(0), again);
  EXPECT_EQ(logcs_.open_logs("a"), 0);
  EXPECT_EQ(logcs_.open_logs("b"), 1);
  EXPECT_EQ(logcs_.open_logs("c"), 1);

  auto written = registry_.GetOrCreate(2, 20);
  registry_.Adopt(Recovered(2, 20, {"a"}));
  EXPECT_EQ(registry_.LogsOf(2).at(0), written);  // an engine reopened in this process
  EXPECT_EQ(logcs_.open_logs("a"), 0);
}

TEST_F(LogRegistryTest, FailedReplicasAreReapedAndCounted) {
  auto log = Recovered(1, 10, {"a", "b"});
  registry_.Adopt(log);
  std::vector<std::shared_ptr<Replica>> reaped;
  {
    MutexLock lock(&log->mu);
    log->replicas[0]->failed = true;
    log->replicas[0]->why = Status::IOError("test");
    LogRegistry::ReapFailedLocked(log.get(), &reaped);
  }
  ASSERT_EQ(reaped.size(), 1u);
  EXPECT_EQ(reaped[0]->logc_id, "a");
  EXPECT_EQ(Live(log.get()), 1);
  registry_.Forget(reaped, /*failed=*/true);
  EXPECT_EQ(m_.replica_failures->value(), 1u);
  EXPECT_EQ(logcs_.open_logs("a"), 0);
  std::vector<std::string> exclude;
  auto chosen = logcs_.ReserveLogc(&exclude);  // a is suspect for the retry interval
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(*chosen, "c");
}

TEST_F(LogRegistryTest, ReplicasFailWhenTheirLogcGoesDownOrRestarts) {
  auto log = Recovered(1, 10, {"a", "b", "c"});  // peers 1, 2, 3; incarnation 7
  registry_.Adopt(log);
  registry_.FailReplicasAt(2, Status::NetworkError("gone"));
  EXPECT_EQ(Live(log.get()), 2);
  EXPECT_EQ(lost_, 0);  // the caller wakes the repairer after a peer down

  ASSERT_TRUE(logcs_.NoteIncarnation("a", 7));  // the incarnation the replicas were read in
  registry_.NoteIncarnation("a", 7);            // nothing new
  EXPECT_EQ(Live(log.get()), 2);
  EXPECT_EQ(lost_, 0);
  registry_.NoteIncarnation("a", 8);  // a restarted: its copy is lost
  EXPECT_EQ(Live(log.get()), 1);
  EXPECT_EQ(lost_, 1);
  MutexLock lock(&log->mu);
  EXPECT_FALSE(log->replicas[2]->failed);
  EXPECT_TRUE(log->replicas[0]->failed);
  EXPECT_NE(log->replicas[0]->why.ToString().find("restarted"), std::string::npos);
}

// A thread that finds a LogC's new incarnation already known (another thread noted it) must
// find the replicas the restart lost already failed: the repairer lists a LogC (noting its
// incarnation) and then judges whether the range is fully replicated before marking it in
// sync there. Between the two steps of the first thread's NoteIncarnation, a fault point
// holds that thread for seconds; the second call must wait for it.
TEST_F(LogRegistryTest, AnIncarnationNotedElsewhereIsKnownOnlyWithItsLostReplicasFailed) {
  constexpr char kPoint[] = "logc_client.between_incarnation_steps";
  auto log = Recovered(1, 10, {"a", "b", "c"});  // incarnation 7
  registry_.Adopt(log);
  ASSERT_TRUE(logcs_.NoteIncarnation("a", 7));
  ASSERT_TRUE(FaultPoints::Arm(std::string(kPoint) + "=delay:2s:once").ok());
  std::thread first([this] { registry_.NoteIncarnation("a", 8); });  // a restarted
  const MonoTime deadline = MonoNow() + std::chrono::seconds(10);
  while (FaultPoints::HitCount(kPoint) == 0 && MonoNow() < deadline) {
    std::this_thread::yield();
  }
  const bool in_window = FaultPoints::HitCount(kPoint) == 1;
  registry_.NoteIncarnation("a", 8);  // as ListAt does for the repairer
  bool failed;
  {
    MutexLock lock(&log->mu);
    failed = log->replicas[0]->failed;
  }
  first.join();
  FaultPoints::Disarm(kPoint);
  ASSERT_TRUE(in_window) << "the first NoteIncarnation never reached " << kPoint;
  EXPECT_TRUE(failed) << "the incarnation was known while a's lost copy still counted";
  EXPECT_EQ(Live(log.get()), 2);
  EXPECT_EQ(lost_, 1);  // once: by the thread that noted the incarnation
}

}  // namespace
}  // namespace nova::logc
