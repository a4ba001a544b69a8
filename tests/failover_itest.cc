// Ranges moving between LTCs (issue 15), with real processes: a ZooKeeper server,
// nova_admin create-cluster (4 ranges split at 0x40, 0x80, 0xc0, log_mode=memory, 2 log
// replicas), nova_coordinator, 2 StoCs, 2 LogCs and 2 LTCs with a 2 s ZooKeeper session.
// Ranges 0-1 are on LTC 1, 2-3 on LTC 2. The write workload (tests/util/write_checker.h: 4
// writers, puts, deletes and batches) writes keys of ranges 1 and 3.
//
// Failover (paper 4.4.5): LTC 2 is killed with SIGKILL under the workload. Its ZooKeeper
// node goes after the session timeout; the coordinator gives ranges 2 and 3 to LTC 1 with
// bumped owner epochs; LTC 1 recovers them from the MANIFEST and the LogCs' logs. The test
// measures the time from the kill to the first write served in range 3 again, checks that
// every acknowledged write is there (0 verification errors), that the dead LTC leaves the
// configuration after the grace period, and that when it is started again it registers as
// a new member owning nothing.
//
// Moves (nova_admin): under the workload, ranges 1 and 3 migrate back and forth 20 times,
// LTC 1 is drained, a third LTC joins and `rebalance` spreads the ranges, LTC 1 is undrained
// and rebalanced again; every command exits 0 and every acknowledged write is there.
//
// Skipped when ZooKeeper is not installed (deploy/install_deps.sh installs it).
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "client/nova_client.h"
#include "client/zk_routing_source.h"
#include "common/clock.h"
#include "common/fault_point.h"
#include "coordinator/config_store.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"
#include "tests/util/write_checker.h"
#include "tests/util/zk_server.h"

namespace nova {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 60s;  // bounds every wait on daemons (a JVM and 7 daemons on 2 cores)

std::string FileTail(const std::string& path, size_t bytes = 3000) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string s = all.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

class FailoverITest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::ZkServer::Available(&why)) {
      GTEST_SKIP() << "no ZooKeeper server on this machine (" << why
                   << "); deploy/install_deps.sh installs Debian's zookeeper package";
    }
    dir_ = test::TestTempDir("failover_itest");
    test::ZkServerOptions zo;
    zo.data_dir = dir_ + "/zk";
    zk_ = std::make_unique<test::ZkServer>(zo);
    Status s = zk_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = secret.value();
    ASSERT_NO_FATAL_FAILURE(CreateCluster());

    for (uint32_t id = 1; id <= 2; ++id) {
      test::ExternalDaemonOptions o = test::StocDaemonOptions(
          dir_, secret_, id, {"--stoc_memory_limit_mb=256", "--stoc_file_buffer_mb=32"});
      AddZkFlags(&o.extra_flags);
      stocs_.push_back(std::make_unique<test::ExternalDaemon>(o));
      s = stocs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (int id = 1; id <= 2; ++id) {
      test::ExternalDaemonOptions o =
          test::LogcDaemonOptions(dir_, secret_, id, {"--logc_memory_limit_mb=256"});
      AddZkFlags(&o.extra_flags);
      logcs_.push_back(std::make_unique<test::ExternalDaemon>(o));
      s = logcs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    test::ChildProcessOptions co;
    co.stderr_path = dir_ + "/coordinator.log";
    coordinator_ = std::make_unique<test::ChildProcess>();
    ASSERT_TRUE(coordinator_->Start(
        {test::BinDir() + "/nova_coordinator", "--zk=" + zk_->address(), "--cluster=" + cluster_,
         "--coordinator_id=coord", "--coordinator_min_ltcs=2",
         "--coordinator_recheck_interval_ms=200", "--coordinator_ltc_grace_ms=4000",
         "--coordinator_leader_settle_ms=500"},
        co))
        << "cannot start nova_coordinator";
    for (int i = 0; i < 2; ++i) {
      ltcs_[i] = std::make_unique<test::ExternalDaemon>(LtcOptions(i + 1));
      s = ltcs_[i]->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }

    coordinator::ConfigStoreOptions so;
    so.zk_servers = zk_->address();
    so.cluster = cluster_;
    store_ = std::make_unique<coordinator::ConfigStore>(so);
    ASSERT_TRUE(store_->Init().ok());
    ASSERT_TRUE(store_->WaitConnected(kWait));
    ASSERT_TRUE(WaitForConfig(
        [](const coordinator::ClusterConfig& c) {
          return c.RangesOf("1") == std::vector<uint32_t>{0, 1} &&
                 c.RangesOf("2") == std::vector<uint32_t>{2, 3};
        },
        "ranges 0-1 on LTC 1 and 2-3 on LTC 2"));
    routing_ = std::make_unique<client::ZkRoutingSource>(store_.get(), kWait);
    client_ = NewClient(20s);
    ASSERT_NE(client_, nullptr);
  }

  void TearDown() override {
    client_.reset();
    routing_.reset();
    if (store_) store_->Shutdown();
    for (auto& l : ltcs_) l.reset();
    if (coordinator_ != nullptr) {
      coordinator_->Signal(SIGTERM);
      EXPECT_EQ(coordinator_->Wait(30s), 0) << FileTail(dir_ + "/coordinator.log");
    }
    logcs_.clear();
    stocs_.clear();
    zk_.reset();
  }

  void AddZkFlags(std::vector<std::string>* flags) const {
    flags->push_back("--zk=" + zk_->address());
    flags->push_back("--cluster=" + cluster_);
  }

  test::ExternalDaemonOptions LtcOptions(int id) const {
    test::ExternalDaemonOptions o = test::LtcDaemonOptions(
        dir_, secret_, "ltc-" + std::to_string(id),
        {"--engine=nova", "--ltc_id=" + std::to_string(id), "--ltc_memtable_size_mb=1",
         "--ltc_sstable_size_mb=1", "--ltc_memtables_per_range=12", "--log_timeout_ms=2000",
         "--zk_session_timeout_ms=2000"});
    AddZkFlags(&o.extra_flags);
    return o;
  }

  void CreateCluster() {
    cluster_ = "failover";
    const std::string split_points = dir_ + "/split_points";
    std::ofstream(split_points) << "40\n80\nc0\n";
    const std::string err_path = dir_ + "/admin.err";
    test::ChildProcessOptions o;
    o.stderr_path = err_path;
    test::ChildProcess admin;
    ASSERT_TRUE(admin.Start({test::BinDir() + "/nova_admin", "create-cluster",
                             "--zk=" + zk_->address(), "--cluster=" + cluster_, "--split-points",
                             split_points, "--setting", "log_mode=" + log_mode_, "--setting",
                             "log_replicas=2"},
                            o))
        << "cannot start nova_admin";
    std::string line;
    while (admin.ReadLine(&line, 30s)) {
    }
    ASSERT_EQ(admin.Wait(30s), 0) << FileTail(err_path);
  }

  // Waits until the configuration in ZooKeeper satisfies `pred`; false (with the
  // coordinator's log printed) after kWait.
  bool WaitForConfig(const std::function<bool(const coordinator::ClusterConfig&)>& pred,
                     const std::string& what) {
    const bool ok = test::WaitFor(
        [&] {
          auto c = store_->ReadConfig();
          return c.ok() && pred(c.value());
        },
        kWait);
    if (!ok) {
      auto c = store_->ReadConfig();
      ADD_FAILURE() << "the configuration never had " << what << "; it is\n"
                    << (c.ok() ? c->ToJson() : c.status().ToString())
                    << "\ncoordinator log:\n"
                    << FileTail(dir_ + "/coordinator.log");
    }
    return ok;
  }

  // Runs nova_admin `args...` on this cluster; returns its exit code (-1 if it could not run)
  // and appends its output to *out.
  int Admin(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {test::BinDir() + "/nova_admin"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--zk=" + zk_->address());
    argv.push_back("--cluster=" + cluster_);
    argv.push_back("--timeout_s=60");
    test::ChildProcessOptions o;
    o.stderr_path = dir_ + "/admin.err";
    test::ChildProcess admin;
    if (!admin.Start(argv, o)) return -1;
    std::string line;
    while (admin.ReadLine(&line, kWait)) *out += line + "\n";
    return admin.Wait(kWait);
  }

  // The checked write workload of these tests (4 writers, 200 keys each; its seed printed
  // under `name`) running through a client of its own whose calls give up after `timeout`.
  struct Writes {
    std::unique_ptr<client::NovaClient> client;
    std::unique_ptr<test::Workload> workload;  // declared last: stops before its client goes
  };
  // Null members on failure.
  Writes StartWorkload(const char* name, std::chrono::milliseconds timeout) {
    Writes out;
    out.client = NewClient(timeout);
    if (out.client == nullptr) return out;
    out.workload = std::make_unique<test::Workload>(test::TestSeed(name), /*threads=*/4,
                                                    /*keys_per_thread=*/200);
    out.workload->Start(out.client.get(), /*round=*/0);
    return out;
  }

  std::unique_ptr<client::NovaClient> NewClient(std::chrono::milliseconds timeout) {
    client::ClientOptions o;
    o.routing_source = routing_.get();
    o.timeout = timeout;
    auto c = std::make_unique<client::NovaClient>(o);
    Status s = c->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? std::move(c) : nullptr;
  }

  // LTC `id` started again with `extra` flags (e.g. --fault_points); the old process must
  // be gone.
  void StartLtc(int id, const std::vector<std::string>& extra = {}) {
    test::ExternalDaemonOptions o = LtcOptions(id);
    o.extra_flags.insert(o.extra_flags.end(), extra.begin(), extra.end());
    ltcs_[id - 1] = std::make_unique<test::ExternalDaemon>(o);
    Status s = ltcs_[id - 1]->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // Waits until no migration is left, `range` has a live owner, and a write to it (key
  // `key`) succeeds; returns the owner.
  std::string WaitSettled(uint32_t range, const std::string& key) {
    std::string owner;
    EXPECT_TRUE(WaitForConfig(
        [&](const coordinator::ClusterConfig& c) {
          owner = c.Range(range)->ltc;
          return c.migrations.empty() && !owner.empty();
        },
        "no migration left"));
    EXPECT_TRUE(test::WaitFor([&] { return client_->Put(key, "settled").ok(); }, kWait))
        << "range " << range << " is not served; LTC logs:\n"
        << FileTail(ltcs_[0]->log_path()) << "\n---\n" << FileTail(ltcs_[1]->log_path());
    return owner;
  }

  std::string log_mode_ = "memory";
  std::string dir_;
  std::string secret_;
  std::string cluster_;
  std::unique_ptr<test::ZkServer> zk_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> stocs_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> logcs_;
  std::unique_ptr<test::ChildProcess> coordinator_;
  std::unique_ptr<test::ExternalDaemon> ltcs_[3];
  std::unique_ptr<coordinator::ConfigStore> store_;
  std::unique_ptr<client::ZkRoutingSource> routing_;
  std::unique_ptr<client::NovaClient> client_;
};

TEST_F(FailoverITest, KilledLtcsRangeIsServedByTheOtherWithEveryAcknowledgedWrite) {
  // Short per-call deadlines for the writers, so a write stuck on the dead LTC fails (its
  // outcome unknown, which the checker allows) rather than holding the writer for long.
  Writes writes = StartWorkload("FailoverITest", 5s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 2000; }, kWait))
      << "the workload made no progress: " << w->acknowledged() << " acknowledged, "
      << w->failed() << " failed";

  const MonoTime killed = MonoNow();
  ltcs_[1]->Kill();
  ASSERT_TRUE(WaitForConfig(
      [](const coordinator::ClusterConfig& c) {
        return c.RangesOf("1") == std::vector<uint32_t>{0, 1, 2, 3} &&
               c.ranges[2].owner_epoch == 2 && c.ranges[3].owner_epoch == 2;
      },
      "ranges 2 and 3 failed over to LTC 1 at owner epoch 2"));
  const MonoTime reassigned = MonoNow();
  // Served again: a write to range 3 succeeds (the client follows the configuration).
  const std::string probe = std::string(1, static_cast<char>(0xe0)) + "failover-probe";
  ASSERT_TRUE(test::WaitFor([&] { return client_->Put(probe, "x").ok(); }, kWait))
      << "range 3 is not served after the failover; LTC 1's log:\n"
      << FileTail(ltcs_[0]->log_path());
  const MonoTime served = MonoNow();
  auto ms = [](MonoTime a, MonoTime b) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
  };
  std::printf("failover: kill -9 -> configuration %lld ms, -> range served %lld ms\n",
              static_cast<long long>(ms(killed, reassigned)),
              static_cast<long long>(ms(killed, served)));
  // The workload goes on for a while on the new owner.
  const uint64_t acked = w->acknowledged();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 1000; }, kWait))
      << "the workload made no progress after the failover";
  w->Stop();
  std::printf("workload: %llu acknowledged, %llu failed\n",
              static_cast<unsigned long long>(w->acknowledged()),
              static_cast<unsigned long long>(w->failed()));
  auto checked = w->Verify(client_.get(), "after the failover");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_GT(checked.value(), 0);

  // After the grace period the dead LTC leaves the configuration ...
  ASSERT_TRUE(WaitForConfig(
      [](const coordinator::ClusterConfig& c) { return c.ltcs.count("2") == 0; },
      "LTC 2 removed after its grace period"));
  // ... and started again, it is a new member owning nothing.
  ASSERT_TRUE(ltcs_[1]->Start().ok());
  ASSERT_TRUE(WaitForConfig(
      [](const coordinator::ClusterConfig& c) {
        return c.ltcs.count("2") == 1 && c.RangesOf("2").empty() &&
               c.RangesOf("1") == std::vector<uint32_t>{0, 1, 2, 3};
      },
      "LTC 2 back as an empty member"));
  checked = w->Verify(client_.get(), "after LTC 2 came back");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
}

TEST_F(FailoverITest, RangesMoveBackAndForthDrainAndRebalanceUnderLoad) {
  Writes writes = StartWorkload("FailoverITest.Moves", 10s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 500; }, kWait));

  // Ranges 1 and 3 (the workload's) change sides 20 times in all.
  std::string out;
  for (int i = 0; i < 20; ++i) {
    const uint32_t range = i % 2 == 0 ? 1 : 3;
    const int round = i / 2;  // 0: 1 -> 2, 3 -> 1; 1: back; ...
    const std::string to = (range == 1) == (round % 2 == 0) ? "2" : "1";
    const uint64_t acked = w->acknowledged();
    ASSERT_EQ(Admin({"migrate-range", "--range=" + std::to_string(range), "--to=" + to}, &out), 0)
        << out << FileTail(dir_ + "/admin.err");
    // The workload goes on between moves.
    ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 100; }, kWait))
        << "no progress after moving range " << range << " to LTC " << to;
  }
  std::printf("%s", out.c_str());
  // Re-running a finished move changes nothing.
  out.clear();
  ASSERT_EQ(Admin({"migrate-range", "--range=1", "--to=1"}, &out), 0) << out;
  EXPECT_NE(out.find("no range to move"), std::string::npos) << out;

  // Drain LTC 1: everything on LTC 2.
  out.clear();
  ASSERT_EQ(Admin({"drain-ltc", "--ltc=1"}, &out), 0) << out << FileTail(dir_ + "/admin.err");
  auto c = store_->ReadConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->RangesOf("1").empty()) << c->ToJson();
  EXPECT_EQ(c->draining.count("1"), 1u);

  // A third LTC joins; rebalance gives it half (LTC 1 is draining).
  ltcs_[2] = std::make_unique<test::ExternalDaemon>(LtcOptions(3));
  ASSERT_TRUE(ltcs_[2]->Start().ok());
  ASSERT_TRUE(WaitForConfig(
      [](const coordinator::ClusterConfig& cfg) { return cfg.ltcs.count("3") == 1; },
      "LTC 3 in the configuration"));
  out.clear();
  ASSERT_EQ(Admin({"rebalance", "--dry-run"}, &out), 0) << out;
  EXPECT_NE(out.find("dry run"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Admin({"rebalance"}, &out), 0) << out << FileTail(dir_ + "/admin.err");
  c = store_->ReadConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->RangesOf("2").size(), 2u) << c->ToJson();
  EXPECT_EQ(c->RangesOf("3").size(), 2u) << c->ToJson();

  // LTC 1 back in, rebalanced again: 2/1/1 in some order.
  out.clear();
  ASSERT_EQ(Admin({"undrain-ltc", "--ltc=1"}, &out), 0) << out;
  out.clear();
  ASSERT_EQ(Admin({"rebalance"}, &out), 0) << out << FileTail(dir_ + "/admin.err");
  c = store_->ReadConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->RangesOf("1").empty()) << c->ToJson();

  const uint64_t acked = w->acknowledged();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 200; }, kWait));
  w->Stop();
  std::printf("workload: %llu acknowledged, %llu failed\n",
              static_cast<unsigned long long>(w->acknowledged()),
              static_cast<unsigned long long>(w->failed()));
  auto checked = w->Verify(client_.get(), "after the moves");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_GT(checked.value(), 0);
}

// An LTC killed again while it recovers its ranges (the restarted process fenced them at a
// newer owner epoch and was reading their logs): the coordinator fails them over to the
// other LTC, which recovers them at a newer owner epoch still, with every acknowledged write.
TEST_F(FailoverITest, AnLtcKilledAgainWhileRecoveringLosesNothing) {
  Writes writes = StartWorkload("FailoverITest.KilledTwice", 30s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 2000; }, kWait));
  ltcs_[1]->Kill();
  // Restarted, it fences ranges 2 and 3 at owner epoch 2 and reads their logs; killed as
  // soon as it has fenced the StoCs (its log says so).
  ASSERT_NO_FATAL_FAILURE(StartLtc(2));
  ASSERT_TRUE(test::WaitFor(
      [&] {
        std::ifstream in(ltcs_[1]->log_path());
        std::stringstream all;
        all << in.rdbuf();
        return all.str().find("range 3: moving r3-manifest-4294967296") != std::string::npos;
      },
      kWait))
      << FileTail(ltcs_[1]->log_path());
  ltcs_[1]->Kill();
  ASSERT_TRUE(WaitForConfig(
      [](const coordinator::ClusterConfig& c) {
        return c.RangesOf("1") == std::vector<uint32_t>{0, 1, 2, 3};
      },
      "ranges 2 and 3 failed over to LTC 1"));
  const std::string probe = std::string(1, static_cast<char>(0xe0)) + "killed-twice-probe";
  ASSERT_TRUE(test::WaitFor([&] { return client_->Put(probe, "x").ok(); }, kWait))
      << FileTail(ltcs_[0]->log_path());
  w->Stop();
  auto checked = w->Verify(client_.get(), "after the failover");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  w->Start(writes.client.get(), /*round=*/1);
  for (int round = 2; round <= 4; ++round) {
    // Verify() reads the writers' history: only with the writers stopped.
    w->Stop();
    checked = w->Verify(client_.get(), "while LTC 1 serves");
    ASSERT_TRUE(checked.ok()) << "round " << round << ": " << checked.status().ToString();
    const uint64_t acked = w->acknowledged();
    w->Start(writes.client.get(), round);
    ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 3000; }, kWait));
  }
  w->Stop();
  checked = w->Verify(client_.get(), "at the end");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
}

// A snapshot taken before a live move: its reads fail cleanly once the range has moved
// (snapshots live on the old owner's connection, docs/client.md); they never return data
// of another instant, and the latest reads see every write.
TEST_F(FailoverITest, ReadsAtASnapshotTakenBeforeALiveMoveFailCleanly) {
  const std::string key = std::string(1, static_cast<char>(0x50)) + "snapshot-key";
  ASSERT_TRUE(client_->Put(key, "before").ok());
  auto snap = client_->GetSnapshot(key);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(client_->Put(key, "after").ok());
  auto at = client_->GetAt(snap.value(), key);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at.value(), "before");
  std::string out;
  ASSERT_EQ(Admin({"migrate-range", "--range=1", "--to=2"}, &out), 0) << out;
  at = client_->GetAt(snap.value(), key);
  EXPECT_FALSE(at.ok()) << "a read at a snapshot of the old owner answered after the move: "
                        << at.value();
  auto latest = client_->Get(key);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest.value(), "after");
  (void)client_->ReleaseSnapshot(snap.value());  // the old owner let the range go: either way
}

// A live migration interrupted at each of its steps: the destination killed (fault point
// `abort`) after the source listed its memtables, after the pre-copy, after the hand-off,
// before and after its commit, and the source killed when the hand-off reaches it. Each
// time the killed LTC is started again; the range ends up with one owner, served, and in the
// end every acknowledged write of the workload is there.
TEST_F(FailoverITest, AMigrationInterruptedAtEachStepLeavesOneOwnerAndLosesNothing) {
  Writes writes = StartWorkload("FailoverITest.Interrupted", 30s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  // Some time under load before the first kill: ranges without writes (0 and 2) are marked
  // in sync at the LogCs by the LTCs' repair pass (every 100 ms) after they open, and one
  // killed before that cannot be recovered until its LogCs vouch for their logs
  // (docs/durability.md), which holds up the whole assignment of the LTC that takes it.
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 2000; }, kWait));

  struct Step {
    const char* point;
    bool source;  // the fault point is armed at the source (else the destination)
  };
  const Step steps[] = {{"ltc.migrate.after_begin", false},  {"ltc.migrate.after_precopy", false},
                        {"ltc.migrate.after_handoff", false}, {"ltc.migrate.before_commit", false},
                        {"ltc.migrate.after_commit", false},  {"ltc.migrate.source_handoff", true}};
  const std::string probe = std::string(1, static_cast<char>(0x50)) + "interrupted-probe";
  int round = 0;
  for (const Step& step : steps) {
    auto c = store_->ReadConfig();
    ASSERT_TRUE(c.ok());
    const std::string from = c->Range(1)->ltc;
    const std::string to = from == "1" ? "2" : "1";
    const int victim = std::stoi(step.source ? from : to);
    ltcs_[victim - 1]->Kill();
    ASSERT_NO_FATAL_FAILURE(StartLtc(victim, {std::string("--fault_points=") + step.point + "=abort"}));
    if (const std::string settled = WaitSettled(1, probe); step.source && settled != from) {
      // The source stayed down past its ZooKeeper session (a slow restart): the coordinator
      // failed range 1 over to the other LTC. Move it back, so that the interrupted
      // migration starts at the source whose fault point is armed (it fires only there).
      std::string back;
      ASSERT_EQ(Admin({"migrate-range", "--range=1", "--to=" + from}, &back), 0) << back;
      ASSERT_EQ(WaitSettled(1, probe), from);
    }
    std::string out;
    const int rc = Admin({"migrate-range", "--range=1", "--to=" + to}, &out);
    auto exit = ltcs_[victim - 1]->WaitForExit(kWait);
    ASSERT_TRUE(exit.ok() && exit.value() == kFaultExitCode)
        << step.point << ": LTC " << victim << " did not die at the fault point; admin said:\n"
        << out << FileTail(ltcs_[victim - 1]->log_path());
    ASSERT_NO_FATAL_FAILURE(StartLtc(victim));
    const std::string owner = WaitSettled(1, probe);
    std::printf("%s: nova_admin exit %d, range 1 owned by LTC %s (was %s)\n", step.point, rc,
                owner.c_str(), from.c_str());
    const uint64_t acked = w->acknowledged();
    ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 100; }, kWait))
        << step.point << ": the workload made no progress";
    // Verify() reads the writers' history: only with the writers stopped.
    w->Stop();
    auto checked = w->Verify(client_.get(), step.point);
    ASSERT_TRUE(checked.ok()) << step.point << ": " << checked.status().ToString();
    w->Start(writes.client.get(), ++round);
  }
  w->Stop();
  auto checked = w->Verify(client_.get(), "after every interrupted migration");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_GT(checked.value(), 0);
}

// Without logs (log_mode=none) a move is possible only live: the source ships its memtables.
class LiveMigrationNoLogITest : public FailoverITest {
 protected:
  void SetUp() override {
    log_mode_ = "none";
    FailoverITest::SetUp();
  }
};

TEST_F(LiveMigrationNoLogITest, RangesMoveLiveWithEveryAcknowledgedWrite) {
  Writes writes = StartWorkload("LiveMigrationNoLogITest", 10s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 500; }, kWait));
  std::string out;
  // A reopening move would lose the memtables: refused.
  EXPECT_NE(Admin({"migrate-range", "--range=1", "--to=2", "--live=false"}, &out), 0) << out;
  for (int i = 0; i < 6; ++i) {
    const uint32_t range = i % 2 == 0 ? 1 : 3;
    const std::string to = (range == 1) == ((i / 2) % 2 == 0) ? "2" : "1";
    const uint64_t acked = w->acknowledged();
    out.clear();
    ASSERT_EQ(Admin({"migrate-range", "--range=" + std::to_string(range), "--to=" + to}, &out), 0)
        << out << FileTail(dir_ + "/admin.err");
    EXPECT_NE(out.find("took it over"), std::string::npos) << out;
    ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 100; }, kWait))
        << "no progress after moving range " << range << " to LTC " << to;
    std::printf("%s", out.c_str());
  }
  w->Stop();
  auto checked = w->Verify(client_.get(), "after the live moves without logs");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_GT(checked.value(), 0);
}

// The source dies once the destination has copied everything (its end reaches the source:
// fault point ltc.migrate.source_end). Without logs only the copies hold the range's
// memtables: the range is served from them (committed, or given to the destination by
// failover) with every acknowledged write. The source's other range (0) gets no writes (a
// crash loses the memtables of any other range it owns, there being no logs).
TEST_F(LiveMigrationNoLogITest, ASourceThatDiesAfterTheHandOffLosesNothing) {
  // LTC 1 (ranges 0 and 1; the workload writes ranges 1 and 3), stopped cleanly (it flushes
  // its memtables), comes back armed: with a new incarnation, it reopens its ranges.
  auto before = store_->ReadConfig();
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->RangesOf("1"), (std::vector<uint32_t>{0, 1}));
  const std::string old_incarnation = before->ltc_incarnations["1"];
  ASSERT_TRUE(ltcs_[0]->Shutdown().ok());
  ASSERT_NO_FATAL_FAILURE(StartLtc(1, {"--fault_points=ltc.migrate.source_end=abort"}));
  ASSERT_TRUE(WaitForConfig(
      [&](const coordinator::ClusterConfig& c) {
        auto i = c.ltc_incarnations.find("1");
        return i != c.ltc_incarnations.end() && i->second != old_incarnation &&
               !c.Range(1)->ltc.empty();
      },
      "LTC 1 back"));
  std::string out;
  if (store_->ReadConfig()->Range(1)->ltc != "1") {
    ASSERT_EQ(Admin({"migrate-range", "--range=1", "--to=1"}, &out), 0) << out;
  }
  const std::string probe = std::string(1, static_cast<char>(0x50)) + "source-dies-probe";
  ASSERT_TRUE(test::WaitFor([&] { return client_->Put(probe, "x").ok(); }, kWait));
  Writes writes = StartWorkload("LiveMigrationNoLogITest.SourceDies", 10s);
  ASSERT_NE(writes.workload, nullptr);
  test::Workload* const w = writes.workload.get();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= 2000; }, kWait));
  out.clear();
  (void)Admin({"migrate-range", "--range=1", "--to=2"}, &out);
  auto exit = ltcs_[0]->WaitForExit(kWait);
  ASSERT_TRUE(exit.ok() && exit.value() == kFaultExitCode)
      << "the source did not die after the hand-off:\n" << out;
  ASSERT_TRUE(WaitForConfig(
      [&](const coordinator::ClusterConfig& c) {
        return c.Range(1)->ltc == "2" && c.migrations.empty();
      },
      "range 1 on LTC 2"));
  const uint64_t acked = w->acknowledged();
  ASSERT_TRUE(test::WaitFor([&] { return w->acknowledged() >= acked + 500; }, kWait))
      << FileTail(ltcs_[1]->log_path());
  w->Stop();
  std::printf("%s", out.c_str());
  auto checked = w->Verify(client_.get(), "after the source died after the hand-off");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_GT(checked.value(), 0);
}

}  // namespace
}  // namespace nova
