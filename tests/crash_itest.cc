// Crash tests with real processes (docs/durability.md): StoCs, LogCs and an LTC run as
// daemons; writer threads load the LTC and record every write they attempt and every one
// acknowledged; the LTC is killed with SIGKILL at random moments (flushes, compactions and
// Drange reorganizations happen all the time with 1 MiB memtables and 4 Dranges), restarted
// and checked: every acknowledged write is readable with its latest value, and what a key
// holds is never older than its last acknowledged write nor a value never written.
//
// With log mode disk the whole cluster is also killed at once and restarted.
// NOVA_CRASH_KILLS (default 20) sets the kills per log mode; the seed is printed
// (NOVA_TEST_SEED replays the workload, not the kill timing).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "client/nova_client.h"
#include "common/clock.h"
#include "tests/util/external_daemon.h"
#include "tests/util/log_test_cluster.h"
#include "tests/util/test_util.h"
#include "tests/util/write_checker.h"

namespace nova {
namespace {

using namespace std::chrono_literals;

int KillsFromEnv() {
  const char* v = std::getenv("NOVA_CRASH_KILLS");
  const int n = v != nullptr ? std::atoi(v) : 20;
  return n > 0 ? n : 20;
}

class CrashTest : public ::testing::Test {
 protected:
  // Starts 2 StoCs, `logcs` LogCs (persisting when `persist`) and the LTC.
  void StartCluster(const std::string& name, const std::string& log_mode, int logcs, bool persist) {
    test::LogTestClusterOptions o;
    o.name = name;
    o.log_mode = log_mode;
    o.logcs = logcs;
    o.logc_persist = persist;
    cluster_ = std::make_unique<test::LogTestCluster>(o);
    Status s = cluster_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    client_ = cluster_->client();
    ltc_ = &cluster_->ltc();
  }

  void TearDown() override {
    if (cluster_) cluster_->Shutdown();
  }

  // Kills the LTC `kills` times under load and checks after each restart.
  void RunKills(const char* name, int kills) {
    const uint64_t seed = test::TestSeed(name);
    std::mt19937_64 timing(std::random_device{}());
    test::Workload w(seed, /*threads=*/4, /*keys_per_thread=*/400);
    uint64_t flushes = 0, compactions = 0;
    for (int k = 0; k < kills; ++k) {
      w.Start(client_, k);
      // Load for a random while (the kill moment), up to 1.5 s.
      const auto load = std::chrono::milliseconds(100 + timing() % 1400);
      const MonoTime until = MonoNow() + load;
      while (MonoNow() < until && !HasFailure()) std::this_thread::sleep_for(20ms);
      auto stats = client_->Stats();
      if (stats.ok()) {
        flushes += CountOf(stats.value(), "flushes=");
        compactions += CountOf(stats.value(), "compactions=");
      }
      ltc_->Kill();
      Status s = ltc_->Restart();
      ASSERT_TRUE(s.ok()) << "restart " << k << ": " << s.ToString();
      w.Stop();  // writes in flight at the kill finish (or fail) against the new LTC
      auto checked = w.Verify(client_, "after kill " + std::to_string(k + 1));
      ASSERT_TRUE(checked.ok()) << checked.status().ToString();
      std::printf("%s: kill %d after %lld ms of load: %d keys verified (%llu writes acknowledged, %llu failed)\n",
                  name, k + 1, static_cast<long long>(load.count()), checked.value(),
                  static_cast<unsigned long long>(w.acknowledged()),
                  static_cast<unsigned long long>(w.failed()));
    }
    std::printf("%s: %d kills; before them the LTC had done %llu flushes and %llu compactions\n",
                name, kills, static_cast<unsigned long long>(flushes),
                static_cast<unsigned long long>(compactions));
    EXPECT_GT(w.acknowledged(), 1000u);
    EXPECT_GT(flushes, 0u) << "the kills never met a flushed range";
  }

  static uint64_t CountOf(const std::string& stats, const std::string& field) {
    uint64_t sum = 0;
    for (size_t pos = stats.find(field); pos != std::string::npos; pos = stats.find(field, pos + 1)) {
      sum += std::strtoull(stats.c_str() + pos + field.size(), nullptr, 10);
    }
    return sum;
  }

  std::unique_ptr<test::LogTestCluster> cluster_;
  client::NovaClient* client_ = nullptr;  // owned by cluster_
  test::ExternalDaemon* ltc_ = nullptr;   // owned by cluster_
};

TEST_F(CrashTest, MemoryLogWithTwoLogcsSurvivesKills) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("crash_memory", "memory", 2, /*persist=*/false));
  RunKills("CrashTest.Memory", KillsFromEnv());
}

TEST_F(CrashTest, DiskLogSurvivesKills) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("crash_disk", "disk", 2, /*persist=*/true));
  RunKills("CrashTest.Disk", KillsFromEnv());
}

// The disk mode's promise: every process of the cluster killed at once (a power loss),
// then restarted: the LogCs reload their fdatasync'd logs, the StoCs their files, and the
// LTC finds every acknowledged write.
TEST_F(CrashTest, DiskLogSurvivesKillingTheWholeCluster) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("crash_all", "disk", 2, /*persist=*/true));
  const uint64_t seed = test::TestSeed("CrashTest.WholeCluster");
  test::Workload w(seed, 4, 400);
  for (int round = 0; round < 3; ++round) {
    w.Start(client_, round);
    const MonoTime until = MonoNow() + 700ms;
    while (MonoNow() < until) std::this_thread::sleep_for(20ms);
    ltc_->Kill();
    for (int i = 0; i < cluster_->num_logcs(); ++i) cluster_->logc(i).Kill();
    for (int i = 0; i < cluster_->num_stocs(); ++i) cluster_->stoc(i).Kill();
    for (int i = 0; i < cluster_->num_stocs(); ++i) {
      Status s = cluster_->stoc(i).Restart();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (int i = 0; i < cluster_->num_logcs(); ++i) {
      Status s = cluster_->logc(i).Restart();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    Status s = ltc_->Restart();
    ASSERT_TRUE(s.ok()) << s.ToString();
    w.Stop();
    auto checked = w.Verify(client_, "after killing the cluster, round " + std::to_string(round + 1));
    ASSERT_TRUE(checked.ok()) << checked.status().ToString();
    std::printf("whole cluster killed (round %d): %d keys verified, %llu writes acknowledged\n",
                round + 1, checked.value(), static_cast<unsigned long long>(w.acknowledged()));
  }
}

// One of two replicas dies under load: writes go on (none fails, none waits much longer
// than the failover timeout), the spare LogC takes the replica's place, and a later LTC
// crash still loses nothing.
TEST_F(CrashTest, LogcKilledUnderLoadLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("crash_logc", "memory", 3, /*persist=*/false));
  const uint64_t seed = test::TestSeed("CrashTest.LogcKilled");
  test::Workload w(seed, 4, 400);
  w.Start(client_, 0);
  const MonoTime warm = MonoNow() + 700ms;
  while (MonoNow() < warm) std::this_thread::sleep_for(20ms);
  w.ResetLatency();
  const uint64_t failed_before = w.failed();
  cluster_->logc(0).Kill();
  const uint64_t acked_at_kill = w.acknowledged();
  const MonoTime after = MonoNow() + 1500ms;
  while (MonoNow() < after) std::this_thread::sleep_for(20ms);
  w.Stop();
  EXPECT_EQ(w.failed(), failed_before) << "writes failed after a LogC died";
  EXPECT_GT(w.acknowledged(), acked_at_kill + 100) << "writes did not go on";
  // The failover time is bounded by --log_timeout_ms (2 s); a dead peer is usually seen at
  // once (its connection resets).
  EXPECT_LE(w.max_latency_ms(), 3000) << "a write waited longer than the failover time";
  std::printf("LogC killed: longest write %lld ms; %llu writes acknowledged\n",
              static_cast<long long>(w.max_latency_ms()),
              static_cast<unsigned long long>(w.acknowledged()));
  ltc_->Kill();
  Status s = ltc_->Restart();
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto checked = w.Verify(client_, "after the LogC and then the LTC died");
  EXPECT_TRUE(checked.ok()) << checked.status().ToString();
}

}  // namespace
}  // namespace nova
