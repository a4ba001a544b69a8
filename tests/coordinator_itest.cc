// nova_coordinator and nova_admin as real processes against a real ZooKeeper server.
// Fake LTCs are ConfigStore instances in the test process that register like an LTC does.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "coordinator/config_store.h"
#include "coordinator/ltc_status.h"
#include "tests/util/test_util.h"
#include "tests/util/zk_server.h"

namespace nova {
namespace {

using coordinator::ClusterConfig;
using coordinator::ConfigStore;
using coordinator::ConfigStoreOptions;
using coordinator::MemberInfo;
using coordinator::MemberKind;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kWait = seconds(60);
// Short sessions so that a killed coordinator's election node goes quickly.
constexpr int kSessionTimeoutMs = 2000;

ClusterConfig MakeInitialConfigForTest(const std::string& cluster, int ranges) {
  auto config =
      coordinator::MakeInitialConfig(cluster, coordinator::EvenSplitPoints(ranges).value(), {});
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.value();
}

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class CoordinatorITest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    if (!test::ZkServer::Available(&why)) {
      skip_reason_ = new std::string(why);
      return;
    }
    dir_ = new std::string(test::TestTempDir("coordinator_itest"));
    test::ZkServerOptions o;
    o.data_dir = *dir_ + "/zk";
    server_ = new test::ZkServer(o);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    ASSERT_NE(server_, nullptr);
  }

  // Runs nova_admin with `args` to completion.
  RunResult Admin(const std::vector<std::string>& args) {
    const std::string err_path = *dir_ + "/admin-" + std::to_string(admin_runs_++) + ".err";
    std::vector<std::string> argv = {test::BinDir() + "/nova_admin"};
    argv.insert(argv.end(), args.begin(), args.end());
    test::ChildProcessOptions o;
    o.stderr_path = err_path;
    test::ChildProcess p;
    RunResult r;
    if (!p.Start(argv, o)) {
      ADD_FAILURE() << "cannot start nova_admin";
      return r;
    }
    std::string line;
    while (p.ReadLine(&line, seconds(30))) r.out += line + "\n";
    r.exit_code = p.Wait(seconds(30));
    std::ifstream in(err_path);
    std::stringstream all;
    all << in.rdbuf();
    r.err = all.str();
    return r;
  }
  RunResult Admin(const std::string& cluster, std::vector<std::string> args) {
    args.push_back("--zk=" + server_->address());
    args.push_back("--cluster=" + cluster);
    return Admin(args);
  }

  std::unique_ptr<test::ChildProcess> StartCoordinator(const std::string& cluster,
                                                       const std::string& id,
                                                       std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {test::BinDir() + "/nova_coordinator",
                                     "--zk=" + server_->address(),
                                     "--cluster=" + cluster,
                                     "--coordinator_id=" + id,
                                     "--zk_session_timeout_ms=" + std::to_string(kSessionTimeoutMs),
                                     "--coordinator_recheck_interval_ms=500"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::ChildProcessOptions o;
    std::string log_name = cluster + "-" + id + ".log";
    for (char& c : log_name) c = c == '/' ? '_' : c;  // ids under test may be invalid
    o.stderr_path = *dir_ + "/" + log_name;
    auto p = std::make_unique<test::ChildProcess>();
    EXPECT_TRUE(p->Start(argv, o)) << "cannot start nova_coordinator";
    return p;
  }

  std::unique_ptr<ConfigStore> Store(const std::string& cluster) {
    ConfigStoreOptions o;
    o.zk_servers = server_->address();
    o.cluster = cluster;
    o.session_timeout = milliseconds(kSessionTimeoutMs);
    o.op_timeout = milliseconds(3000);
    auto store = std::make_unique<ConfigStore>(o);
    EXPECT_TRUE(store->Init().ok());
    EXPECT_TRUE(store->WaitConnected(kWait));
    return store;
  }

  // A fake LTC: registers members/ltc/<id> like nova_ltc does and watches the config.
  std::unique_ptr<ConfigStore> FakeLtc(const std::string& cluster, const std::string& id,
                                       int port) {
    auto store = Store(cluster);
    MemberInfo info;
    info.addresses["client"] = "127.0.0.1:" + std::to_string(port);
    Status s = store->Register(MemberKind::kLtc, id, info);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }

  // Candidate id of the current leader, "" if none.
  static std::string Leader(ConfigStore* store) {
    std::vector<std::string> candidates;
    if (!store->zk()->GetChildren(store->ElectionPath(), &candidates).ok() || candidates.empty()) {
      return "";
    }
    std::string id;
    if (!store->zk()->Get(store->ElectionPath() + "/" + candidates.front(), &id, nullptr).ok()) {
      return "";
    }
    return id;
  }

  static bool Registered(ConfigStore* store, MemberKind kind, const std::string& id) {
    auto members = store->ListMembers(kind);
    return members.ok() && members->count(id) > 0;
  }

  static test::ZkServer* server_;
  static std::string* dir_;
  static std::string* skip_reason_;
  int admin_runs_ = 0;
};

test::ZkServer* CoordinatorITest::server_ = nullptr;
std::string* CoordinatorITest::dir_ = nullptr;
std::string* CoordinatorITest::skip_reason_ = nullptr;

TEST_F(CoordinatorITest, AssignsRangesEvenlyToRegisteredLtcs) {
  RunResult r = Admin("even", {"create-cluster", "--ranges", "8", "--setting", "log_mode=memory"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("created cluster even: 8 ranges"), std::string::npos) << r.out;

  auto coord = StartCoordinator("even", "coord-a", {"--coordinator_min_ltcs=2"});
  auto observer = Store("even");
  ASSERT_TRUE(test::WaitFor([&] { return Leader(observer.get()) == "coord-a"; }, kWait));

  // One LTC is not enough (min 2): it joins the member set, nothing is assigned.
  auto ltc1 = FakeLtc("even", "ltc-1", 7001);
  ASSERT_TRUE(test::WaitFor(
      [&] {
        auto c = observer->ReadConfig();
        return c.ok() && c->ltcs.count("ltc-1") > 0;
      },
      kWait));
  EXPECT_EQ(observer->ReadConfig()->RangesOf("").size(), 8u);

  auto ltc2 = FakeLtc("even", "ltc-2", 7002);
  ASSERT_TRUE(test::WaitFor(
      [&] {
        auto c = observer->ReadConfig();
        return c.ok() && c->RangesOf("").empty();
      },
      kWait));
  auto config = observer->ReadConfig();
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->RangesOf("ltc-1"), (std::vector<uint32_t>{0, 1, 2, 3}));  // omega = 4
  EXPECT_EQ(config->RangesOf("ltc-2"), (std::vector<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(config->ltcs.at("ltc-2"), "127.0.0.1:7002");
  EXPECT_EQ(config->settings.at("log_mode"), "memory");
  // The LTCs see it through their watch.
  EXPECT_TRUE(ltc1->WaitForEpoch(config->epoch, kWait));
  EXPECT_TRUE(ltc2->WaitForEpoch(config->epoch, kWait));

  r = Admin("even", {"show-config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto shown = ClusterConfig::FromJson(r.out);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString() << "\n" << r.out;
  EXPECT_EQ(shown.value(), config.value());

  r = Admin("even", {"status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ranges 8 (0 unassigned)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alive (leader)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:7001  alive"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0,1,2,3"), std::string::npos) << r.out;

  // An LTC that goes keeps its ranges (failover is a later issue) and shows as dead.
  ltc2->Shutdown();
  ASSERT_TRUE(test::WaitFor(
      [&] {
        RunResult s = Admin("even", {"status"});
        return s.exit_code == 0 && s.out.find("127.0.0.1:7002  dead") != std::string::npos;
      },
      kWait));
  EXPECT_EQ(observer->ReadConfig()->RangesOf("ltc-2").size(), 4u);

  ASSERT_TRUE(coord->Signal(SIGTERM));
  EXPECT_EQ(coord->Wait(seconds(30)), 0);
}

TEST_F(CoordinatorITest, LeaderFailsOverToTheOtherCoordinator) {
  ASSERT_EQ(Admin("failover", {"create-cluster", "--ranges=4"}).exit_code, 0);
  auto observer = Store("failover");
  auto a = StartCoordinator("failover", "coord-a");
  ASSERT_TRUE(test::WaitFor([&] { return Leader(observer.get()) == "coord-a"; }, kWait));
  auto b = StartCoordinator("failover", "coord-b", {"--metrics_port=0"});
  ASSERT_TRUE(test::WaitFor(
      [&] { return Registered(observer.get(), MemberKind::kCoordinator, "coord-b"); }, kWait));
  EXPECT_EQ(Leader(observer.get()), "coord-a");

  a->Kill();  // kill -9: its session (and election node) ends after the session timeout
  ASSERT_TRUE(test::WaitFor([&] { return Leader(observer.get()) == "coord-b"; }, kWait));
  // It says so on /metrics, whose address it published in its member node.
  auto coordinators = observer->ListMembers(MemberKind::kCoordinator);
  ASSERT_TRUE(coordinators.ok());
  const std::string metrics = coordinators->at("coord-b").addresses.at("metrics");
  const size_t colon = metrics.rfind(':');
  httplib::Client http(metrics.substr(0, colon), std::stoi(metrics.substr(colon + 1)));
  EXPECT_TRUE(test::WaitFor(
      [&] {
        auto res = http.Get("/metrics");
        return res && res->status == 200 &&
               res->body.find("nova_coordinator_is_leader 1") != std::string::npos;
      },
      kWait));

  // The new leader acts: it assigns the ranges to an LTC that registers now.
  auto ltc = FakeLtc("failover", "ltc-1", 7101);
  ASSERT_TRUE(test::WaitFor(
      [&] {
        auto c = observer->ReadConfig();
        return c.ok() && c->RangesOf("ltc-1").size() == 4;
      },
      kWait));
  RunResult r = Admin("failover", {"status"});
  EXPECT_NE(r.out.find("coord-b"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("coord-a"), std::string::npos) << r.out;  // gone from membership

  ASSERT_TRUE(b->Signal(SIGTERM));
  EXPECT_EQ(b->Wait(seconds(30)), 0);
}

// ZooKeeper unreachable when the coordinator starts: it keeps retrying, then does its job.
TEST_F(CoordinatorITest, CoordinatorStartsBeforeZooKeeper) {
  test::ZkServerOptions zo;
  zo.data_dir = *dir_ + "/late-zk";
  test::ZkServer late(zo);
  Status s = late.Start();  // fixes the port...
  ASSERT_TRUE(s.ok()) << s.ToString();
  late.Kill();  // ...and takes the server away

  std::vector<std::string> argv = {test::BinDir() + "/nova_coordinator",
                                   "--zk=" + late.address(),
                                   "--cluster=late",
                                   "--coordinator_id=coord-late",
                                   "--zk_op_timeout_ms=1000",
                                   "--coordinator_recheck_interval_ms=500"};
  test::ChildProcessOptions o;
  o.stderr_path = *dir_ + "/late-coord.log";
  test::ChildProcess coord;
  ASSERT_TRUE(coord.Start(argv, o));
  // It logs that ZooKeeper is unreachable and keeps running.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        std::ifstream in(o.stderr_path);
        std::stringstream log;
        log << in.rdbuf();
        return log.str().find("still unreachable") != std::string::npos;
      },
      kWait));
  ASSERT_TRUE(coord.Running());

  s = late.Restart();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ConfigStoreOptions so;
  so.zk_servers = late.address();
  so.cluster = "late";
  ConfigStore observer(so);
  ASSERT_TRUE(observer.Init().ok());
  ASSERT_TRUE(observer.WaitConnected(kWait));
  ASSERT_TRUE(test::WaitFor([&] { return Leader(&observer) == "coord-late"; }, kWait));
  auto config = MakeInitialConfigForTest("late", 2);
  ASSERT_TRUE(observer.CreateCluster(config).ok());
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7301";
  ASSERT_TRUE(observer.Register(MemberKind::kLtc, "ltc-1", info).ok());
  EXPECT_TRUE(test::WaitFor(
      [&] {
        auto c = observer.ReadConfig();
        return c.ok() && c->RangesOf("ltc-1").size() == 2;
      },
      kWait));
  ASSERT_TRUE(coord.Signal(SIGTERM));
  EXPECT_EQ(coord.Wait(seconds(30)), 0);
}

TEST_F(CoordinatorITest, CreateClusterWithSplitPointsFile) {
  const std::string file = *dir_ + "/split_points";
  std::ofstream(file) << "# three ranges\n40\n\n8000ff\n";
  RunResult r = Admin("split", {"create-cluster", "--split-points", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto observer = Store("split");
  auto config = observer->ReadConfig();
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->ranges.size(), 3u);
  EXPECT_EQ(config->ranges[1].keys.start, "\x40");
  EXPECT_EQ(config->ranges[2].keys.start, std::string("\x80\x00\xff", 3));
  EXPECT_EQ(config->epoch, 1u);
  // The same cluster cannot be created twice.
  r = Admin("split", {"create-cluster", "--ranges=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
}

TEST_F(CoordinatorITest, AdminRejectsBadInput) {
  const std::string bad_file = *dir_ + "/bad_split_points";
  std::ofstream(bad_file) << "40\nxyz\n";
  struct Case {
    std::vector<std::string> args;
    const char* message;  // expected in stderr
  };
  const std::vector<Case> usage_errors = {
      {{}, "no command"},
      {{"frobnicate"}, "unknown command"},
      {{"create-cluster"}, "--ranges"},
      {{"create-cluster", "--ranges=0"}, "--ranges"},
      {{"create-cluster", "--ranges=300"}, "1..256"},
      {{"create-cluster", "--split-points", bad_file}, "line 2"},
      {{"create-cluster", "--split-points", *dir_ + "/missing"}, "cannot read"},
      {{"create-cluster", "--ranges=2", "--setting", "novalue"}, "key=value"},
      {{"status", "--ranges=2"}, "only apply to create-cluster"},
  };
  for (const Case& c : usage_errors) {
    RunResult r = Admin("bad", c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  // Missing --zk / bad --cluster.
  RunResult r = Admin({"status", "--cluster=x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--zk"), std::string::npos) << r.err;
  r = Admin({"status", "--zk=" + server_->address(), "--cluster=a/b"});
  EXPECT_EQ(r.exit_code, 2);
  // Runtime failures: exit 1 with a clear message.
  r = Admin("never-created", {"status"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("create-cluster"), std::string::npos) << r.err;
  r = Admin({"show-config", "--zk=127.0.0.1:1", "--cluster=x", "--zk_op_timeout_ms=500"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach ZooKeeper"), std::string::npos) << r.err;
  // nova_coordinator: bad flags exit with 2 as every daemon.
  auto coord = StartCoordinator("bad", "no/slash");
  EXPECT_EQ(coord->Wait(seconds(30)), 2);
}

// StoCs coming and going (docs/coordinator.md, "StoCs coming and going"): fake StoCs and a
// fake LTC publishing its status document, real nova_coordinator and nova_admin.
TEST_F(CoordinatorITest, StocsDrainRemoveAndLeaveAfterTheirGrace) {
  const std::string cluster = "stocs";
  ASSERT_EQ(Admin(cluster, {"create-cluster", "--ranges=2"}).exit_code, 0);
  auto observer = Store(cluster);
  auto coord = StartCoordinator(cluster, "coord-1", {"--coordinator_stoc_grace_ms=500"});
  auto ltc = FakeLtc(cluster, "1", 7001);
  std::vector<std::unique_ptr<ConfigStore>> stocs;
  for (int i = 0; i < 3; i++) {
    stocs.push_back(Store(cluster));
    MemberInfo info;
    info.addresses["client"] = "127.0.0.1:" + std::to_string(8000 + i);
    ASSERT_TRUE(stocs.back()->Register(MemberKind::kStoc, std::to_string(i), info).ok());
  }
  ASSERT_TRUE(test::WaitFor(
      [&] {
        auto c = observer->ReadConfig();
        return c.ok() && c->stocs.size() == 3 && c->RangesOf("").empty();
      },
      kWait));
  auto publish = [&](uint64_t copies) {
    coordinator::LtcStatus st;
    st.config_epoch = observer->ReadConfig()->epoch + 1000;  // applied whatever is published
    st.copies_to_move["2"] = copies;
    Status s = ltc->PublishStatus(MemberKind::kLtc, "1", st.ToJson());
    ASSERT_TRUE(s.ok()) << s.ToString();
  };

  // No status from the LTC yet: drain-stoc marks the StoC draining and times out waiting.
  RunResult r = Admin(cluster, {"drain-stoc", "--stoc=2", "--timeout_s=1"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("LTCs not reporting"), std::string::npos) << r.err;
  EXPECT_EQ(observer->ReadConfig()->draining_stocs, (std::set<std::string>{"2"}));
  publish(3);
  r = Admin(cluster, {"drain-stoc", "--stoc=2", "--timeout_s=1"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("3 table copies left to move"), std::string::npos) << r.out;
  r = Admin(cluster, {"status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("127.0.0.1:8002  alive (draining)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to move: StoC 2: 3"), std::string::npos) << r.out;

  // Drained: remove-stoc drops it from `stocs`; it stays draining, and while its process
  // runs the leader lists it again (never usable).
  publish(0);
  r = Admin(cluster, {"remove-stoc", "--stoc=2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("out of the configuration"), std::string::npos) << r.out;
  EXPECT_EQ(observer->ReadConfig()->draining_stocs.count("2"), 1u);
  // Stopped: gone after the grace (2 of 3 live is a majority), and shown as removed.
  stocs[2]->Shutdown();
  ASSERT_TRUE(test::WaitFor(
      [&] {
        RunResult st = Admin(cluster, {"status"});
        return st.exit_code == 0 && st.out.find("removed (draining)") != std::string::npos &&
               observer->ReadConfig()->stocs.count("2") == 0;
      },
      kWait));
  r = Admin(cluster, {"remove-stoc", "--stoc=2"});  // safe to re-run
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("already out of the configuration"), std::string::npos) << r.out;

  // The last StoC that is not draining cannot drain; undrain lets one take copies again.
  ASSERT_EQ(Admin(cluster, {"drain-stoc", "--stoc=1", "--wait=false"}).exit_code, 0);
  r = Admin(cluster, {"drain-stoc", "--stoc=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("last StoC"), std::string::npos) << r.err;
  r = Admin(cluster, {"undrain-stoc", "--stoc=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(observer->ReadConfig()->draining_stocs, (std::set<std::string>{"2"}));
  r = Admin(cluster, {"drain-stoc", "--stoc=9"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not in the configuration"), std::string::npos) << r.err;
  EXPECT_EQ(Admin(cluster, {"drain-stoc"}).exit_code, 2);
  r = Admin(cluster, {"add-stoc"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("nova_stoc --zk="), std::string::npos) << r.out;

  // Both remaining StoCs gone: no majority is live, so neither leaves (a power cut).
  stocs[0]->Shutdown();
  stocs[1]->Shutdown();
  const std::string log = *dir_ + "/" + cluster + "-coord-1.log";
  ASSERT_TRUE(test::WaitFor(
      [&] {
        std::ifstream in(log);
        std::stringstream text;
        text << in.rdbuf();
        return text.str().find("not a majority") != std::string::npos;
      },
      kWait));
  EXPECT_EQ(observer->ReadConfig()->stocs.size(), 2u);

  ASSERT_TRUE(coord->Signal(SIGTERM));
  EXPECT_EQ(coord->Wait(seconds(30)), 0);
}

}  // namespace
}  // namespace nova
