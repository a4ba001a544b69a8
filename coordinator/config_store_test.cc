// ConfigStore against a real ZooKeeper server (tests/util/zk_server.h).
#include "coordinator/config_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "tests/util/test_util.h"
#include "tests/util/zk_server.h"

namespace nova::coordinator {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kWait = seconds(30);

class ConfigStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    if (!test::ZkServer::Available(&why)) {
      skip_reason_ = new std::string(why);
      return;
    }
    test::ZkServerOptions o;
    o.data_dir = test::TestTempDir("config_store_test") + "/zk";
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

  static ConfigStoreOptions Options(const std::string& cluster, const std::string& zk) {
    ConfigStoreOptions o;
    o.zk_servers = zk;
    o.cluster = cluster;
    o.session_timeout = milliseconds(4000);
    o.op_timeout = milliseconds(3000);
    o.retry_max = milliseconds(500);
    return o;
  }
  std::unique_ptr<ConfigStore> NewStore(const std::string& cluster) {
    return NewStoreAt(cluster, server_->address());
  }
  static std::unique_ptr<ConfigStore> NewStoreAt(const std::string& cluster,
                                                 const std::string& zk) {
    auto store = std::make_unique<ConfigStore>(Options(cluster, zk));
    Status s = store->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(store->WaitConnected(kWait));
    return store;
  }
  static ClusterConfig Initial(const std::string& cluster, int ranges) {
    auto config = MakeInitialConfig(cluster, EvenSplitPoints(ranges).value(), {});
    EXPECT_TRUE(config.ok());
    return config.value();
  }

  static test::ZkServer* server_;
  static std::string* skip_reason_;
};

test::ZkServer* ConfigStoreTest::server_ = nullptr;
std::string* ConfigStoreTest::skip_reason_ = nullptr;

bool HasMember(ConfigStore* store, MemberKind kind, const std::string& id) {
  auto members = store->ListMembers(kind);
  return members.ok() && members->count(id) > 0;
}

TEST_F(ConfigStoreTest, RegisteredNodeIsEphemeral) {
  auto ltc = NewStore("ephemeral");
  auto observer = NewStore("ephemeral");
  MemberInfo info;
  info.addresses = {{"client", "127.0.0.1:7001"}, {"metrics", "127.0.0.1:9101"}};
  Status s = ltc->Register(MemberKind::kLtc, "ltc-1", info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto members = observer->ListMembers(MemberKind::kLtc);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ(members->at("ltc-1"), info);
  EXPECT_EQ(members->at("ltc-1").MainAddress(), "127.0.0.1:7001");

  // Registering again replaces the info; a bad id is refused.
  info.addresses["client"] = "127.0.0.1:7002";
  ASSERT_TRUE(ltc->Register(MemberKind::kLtc, "ltc-1", info).ok());
  EXPECT_EQ(observer->ListMembers(MemberKind::kLtc)->at("ltc-1").MainAddress(), "127.0.0.1:7002");
  EXPECT_EQ(ltc->Register(MemberKind::kLtc, "../x", info).code(), Status::Code::kInvalidArgument);

  ltc->Shutdown();  // closes the session: the node goes at once
  EXPECT_TRUE(
      test::WaitFor([&] { return !HasMember(observer.get(), MemberKind::kLtc, "ltc-1"); }, kWait));
}

TEST_F(ConfigStoreTest, SecondHolderOfAnIdWaitsForTheFirst) {
  auto first = NewStore("twin");
  auto second = NewStore("twin");
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  ASSERT_TRUE(first->Register(MemberKind::kLtc, "ltc-1", info).ok());
  // Refused while the first lives (e.g. a restart before the old session expired)...
  Status s = second->Register(MemberKind::kLtc, "ltc-1", info);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("another ZooKeeper session"), std::string::npos) << s.ToString();
  // ...and registered by the background thread as soon as the first is gone.
  first->Shutdown();
  const std::string path = second->MemberPath(MemberKind::kLtc, "ltc-1");
  EXPECT_TRUE(test::WaitFor(
      [&] {
        ZkStat stat;
        return second->zk()->Exists(path, &stat).ok() &&
               stat.ephemeral_owner == second->zk()->session_id();
      },
      kWait));
}

TEST_F(ConfigStoreTest, ARestartedMemberMayTakeItsNodeOver) {
  auto old_process = NewStore("takeover");
  auto new_process = NewStore("takeover");
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  ASSERT_TRUE(old_process->Register(MemberKind::kLtc, "ltc-1", info, /*take_over=*/true).ok());
  const std::string path = new_process->MemberPath(MemberKind::kLtc, "ltc-1");
  // The restarted process does not wait for the old session to expire.
  info.addresses["client"] = "127.0.0.1:7002";
  ASSERT_TRUE(new_process->Register(MemberKind::kLtc, "ltc-1", info, /*take_over=*/true).ok());
  ZkStat stat;
  ASSERT_TRUE(new_process->zk()->Exists(path, &stat).ok());
  EXPECT_EQ(stat.ephemeral_owner, new_process->zk()->session_id());
  auto members = new_process->ListMembers(MemberKind::kLtc);
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(members->at("ltc-1").MainAddress(), "127.0.0.1:7002");
  // Without take_over a third process waits, as before.
  auto third = NewStore("takeover");
  EXPECT_TRUE(third->Register(MemberKind::kLtc, "ltc-1", info).IsUnavailable());
}

// A take-over replaces the node in one ZooKeeper transaction: an observer listing the
// members while restarted processes take the node over again and again never finds it
// missing. (A coordinator that did would fail a restarting LTC's ranges over to another.)
TEST_F(ConfigStoreTest, ATakeOverNeverLeavesTheNodeMissing) {
  constexpr int kTakeOvers = 20;
  auto observer = NewStore("takeover-atomic");
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  std::unique_ptr<ConfigStore> holder = NewStore("takeover-atomic");
  ASSERT_TRUE(holder->Register(MemberKind::kLtc, "ltc-1", info, /*take_over=*/true).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> looks{0}, missing{0}, errors{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto members = observer->ListMembers(MemberKind::kLtc);
      if (!members.ok()) {  // a slow answer is not a missing node
        errors++;
        continue;
      }
      if (members->count("ltc-1") == 0) missing++;
      looks++;
    }
  });
  ASSERT_TRUE(test::WaitFor([&] { return looks.load() > 0; }, kWait));
  for (int i = 0; i < kTakeOvers && missing.load() == 0; ++i) {
    std::unique_ptr<ConfigStore> next = NewStore("takeover-atomic");
    Status s = next->Register(MemberKind::kLtc, "ltc-1", info, /*take_over=*/true);
    EXPECT_TRUE(s.ok()) << "take-over " << i << ": " << s.ToString();
    // Nothing left to remove: the node is the new session's.
    holder->Shutdown();
    holder = std::move(next);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(missing.load(), 0) << "the node was missing in " << missing.load() << " of "
                               << looks.load() << " listings (" << errors.load()
                               << " listings failed)";
  EXPECT_GT(looks.load(), 1);
  ZkStat stat;
  ASSERT_TRUE(holder->zk()->Exists(holder->MemberPath(MemberKind::kLtc, "ltc-1"), &stat).ok());
  EXPECT_EQ(stat.ephemeral_owner, holder->zk()->session_id());
}

// ZkClient::Replace on its own: a node replaced (new data, new owner, version 0); nothing
// to replace is NotFound and a stale version Aborted, and neither changes anything.
TEST_F(ConfigStoreTest, ReplaceSwapsANodeOrChangesNothing) {
  auto first = NewStore("replace");
  auto second = NewStore("replace");
  ZkClient* zk = second->zk();
  const std::string path = "/nova/replace-test";
  ASSERT_TRUE(zk->EnsurePath("/nova").ok());
  Status s = zk->Replace(path, ZkClient::kAnyVersion, "b", ZkCreateMode::kEphemeral);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  ZkStat stat;
  EXPECT_TRUE(zk->Exists(path, &stat).IsNotFound());

  ASSERT_TRUE(first->zk()->Create(path, "a", ZkCreateMode::kEphemeral).ok());
  ASSERT_TRUE(first->zk()->Set(path, "a2", ZkClient::kAnyVersion).ok());  // version 1
  s = zk->Replace(path, /*expected_version=*/0, "b", ZkCreateMode::kEphemeral);
  EXPECT_EQ(s.code(), Status::Code::kAborted) << s.ToString();
  std::string data;
  ASSERT_TRUE(zk->Get(path, &data, &stat).ok());
  EXPECT_EQ(data, "a2");
  EXPECT_EQ(stat.ephemeral_owner, first->zk()->session_id());

  s = zk->Replace(path, /*expected_version=*/1, "b", ZkCreateMode::kEphemeral);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(zk->Get(path, &data, &stat).ok());
  EXPECT_EQ(data, "b");
  EXPECT_EQ(stat.version, 0);
  EXPECT_EQ(stat.ephemeral_owner, zk->session_id());
  first->Shutdown();  // its session's ephemeral nodes go; the replaced one is not its own
  ASSERT_TRUE(zk->Get(path, &data, &stat).ok());
  EXPECT_EQ(data, "b");
}

TEST_F(ConfigStoreTest, CreateClusterAndCompareAndSet) {
  auto store = NewStore("cas");
  EXPECT_TRUE(store->ReadConfig().status().IsNotFound());
  ClusterConfig initial = Initial("cas", 4);
  initial.settings["log_mode"] = "memory";
  ASSERT_TRUE(store->CreateCluster(initial).ok());
  EXPECT_EQ(store->CreateCluster(initial).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(store->CreateCluster(Initial("other", 2)).code(), Status::Code::kInvalidArgument);

  int32_t version = -1;
  auto read = store->ReadConfig(&version);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value(), initial);

  ClusterConfig next = read.value();
  next.epoch = 2;
  next.ltcs["ltc-1"] = "127.0.0.1:7001";
  next.ranges[0].ltc = "ltc-1";
  ASSERT_TRUE(store->UpdateConfig(next, version).ok());
  // A writer with the old version loses.
  ClusterConfig stale = read.value();
  stale.epoch = 2;
  EXPECT_EQ(store->UpdateConfig(stale, version).code(), Status::Code::kAborted);
  // Invalid documents never reach ZooKeeper.
  ClusterConfig invalid = next;
  invalid.ranges[1].keys.start = "zz";
  EXPECT_EQ(store->UpdateConfig(invalid, ZkClient::kAnyVersion).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(store->ReadConfig()->epoch, 2u);
}

TEST_F(ConfigStoreTest, WatchDeliversEveryNewEpoch) {
  auto admin = NewStore("watch");
  auto component = NewStore("watch");
  Mutex mu;
  std::vector<uint64_t> epochs;
  component->WatchConfig([&](const ClusterConfig& c) {
    MutexLock l(&mu);
    epochs.push_back(c.epoch);
  });
  EXPECT_FALSE(component->GetLastConfig().has_value());
  ASSERT_TRUE(admin->CreateCluster(Initial("watch", 2)).ok());
  ASSERT_TRUE(component->WaitForEpoch(1, kWait));
  for (uint64_t epoch = 2; epoch <= 4; epoch++) {
    int32_t version;
    auto c = admin->ReadConfig(&version);
    ASSERT_TRUE(c.ok());
    c->epoch = epoch;
    c->settings["n"] = std::to_string(epoch);
    ASSERT_TRUE(admin->UpdateConfig(c.value(), version).ok());
    ASSERT_TRUE(component->WaitForEpoch(epoch, kWait)) << "epoch " << epoch;
  }
  EXPECT_EQ(component->GetLastConfig()->settings.at("n"), "4");
  // WaitForEpoch() may return just before the callbacks run.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        MutexLock l(&mu);
        return !epochs.empty() && epochs.back() == 4;
      },
      kWait));
  {
    MutexLock l(&mu);
    // Strictly increasing; a fast sequence may coalesce but the last one always arrives.
    EXPECT_EQ(epochs.front(), 1u);
    for (size_t i = 1; i < epochs.size(); i++) EXPECT_LT(epochs[i - 1], epochs[i]);
  }

  // A late subscriber gets the current configuration at once.
  std::atomic<uint64_t> late{0};
  component->WatchConfig([&](const ClusterConfig& c) { late = c.epoch; });
  EXPECT_EQ(late.load(), 4u);
}

TEST_F(ConfigStoreTest, InvalidDocumentIsIgnored) {
  auto admin = NewStore("garbage");
  auto component = NewStore("garbage");
  ASSERT_TRUE(admin->CreateCluster(Initial("garbage", 2)).ok());
  ASSERT_TRUE(component->WaitForEpoch(1, kWait));
  ASSERT_TRUE(admin->zk()->Set(admin->ConfigPath(), "{not json", ZkClient::kAnyVersion).ok());
  ClusterConfig next = Initial("garbage", 2);
  next.epoch = 7;
  ASSERT_TRUE(admin->UpdateConfig(next, ZkClient::kAnyVersion).ok());
  ASSERT_TRUE(component->WaitForEpoch(7, kWait));
  EXPECT_TRUE(admin->ReadConfig().ok());
}

TEST_F(ConfigStoreTest, SessionExpiryReRegistersAndKeepsWatching) {
  auto component = NewStore("expiry");
  auto observer = NewStore("expiry");
  ASSERT_TRUE(observer->CreateCluster(Initial("expiry", 2)).ok());
  ASSERT_TRUE(component->WaitForEpoch(1, kWait));
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  ASSERT_TRUE(component->Register(MemberKind::kStoc, "stoc-1", info).ok());
  const int64_t first_session = component->zk()->session_id();

  Status s = component->zk()->ExpireSessionForTesting();
  ASSERT_TRUE(s.ok()) << s.ToString();
  // A new session, and the member node re-created in it.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const int64_t now = component->zk()->session_id();
        if (now == first_session || now == 0) return false;
        ZkStat stat;
        return observer->zk()
                   ->Exists(observer->MemberPath(MemberKind::kStoc, "stoc-1"), &stat)
                   .ok() &&
               stat.ephemeral_owner == now;
      },
      kWait));
  // The configuration watch works in the new session.
  ClusterConfig next = Initial("expiry", 2);
  next.epoch = 2;
  ASSERT_TRUE(observer->UpdateConfig(next, ZkClient::kAnyVersion).ok());
  EXPECT_TRUE(component->WaitForEpoch(2, kWait));
}

TEST_F(ConfigStoreTest, StatusDocumentsArePublishedReadAndKeptAcrossExpiry) {
  auto ltc = NewStore("status");
  auto observer = NewStore("status");
  // Nothing published yet: an empty map, not an error.
  auto none = observer->ReadStatuses(MemberKind::kLtc);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  ASSERT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "1", R"({"config_epoch": 3})").ok());
  // Published again: replaced (set, not a second node).
  Status s = ltc->PublishStatus(MemberKind::kLtc, "1", R"({"config_epoch": 4})");
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "2", "{}").ok());
  auto read = observer->ReadStatuses(MemberKind::kLtc);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value(), (std::map<std::string, std::string>{
                              {"1", R"({"config_epoch": 4})"}, {"2", "{}"}}));
  EXPECT_TRUE(observer->ReadStatuses(MemberKind::kStoc)->empty());
  // Bad input is refused before ZooKeeper.
  EXPECT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "../x", "{}").IsInvalidArgument());
  EXPECT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "1", "[1]").IsInvalidArgument());
  EXPECT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "1", "{not json").IsInvalidArgument());
  EXPECT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "1",
                                 "{\"x\": \"" + std::string(ConfigStore::kMaxStatusBytes, 'a') +
                                     "\"}")
                  .IsInvalidArgument());

  // The node is ephemeral and comes back, with the latest document, after a session expiry.
  const int64_t first_session = ltc->zk()->session_id();
  ASSERT_TRUE(ltc->zk()->ExpireSessionForTesting().ok());
  const std::string path = observer->StatusPath(MemberKind::kLtc, "1");
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const int64_t now = ltc->zk()->session_id();
        ZkStat stat;
        return now != first_session && now != 0 && observer->zk()->Exists(path, &stat).ok() &&
               stat.ephemeral_owner == now;
      },
      kWait));
  read = observer->ReadStatuses(MemberKind::kLtc);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->at("1"), R"({"config_epoch": 4})");
  // Updates go on in the new session.
  ASSERT_TRUE(ltc->PublishStatus(MemberKind::kLtc, "1", R"({"config_epoch": 5})").ok());
  EXPECT_EQ(observer->ReadStatuses(MemberKind::kLtc)->at("1"), R"({"config_epoch": 5})");

  // A restarted process takes the node of its previous one over at once (its status is
  // stale), without waiting for the old session to expire.
  auto restarted = NewStore("status");
  ASSERT_TRUE(restarted->PublishStatus(MemberKind::kLtc, "1", R"({"config_epoch": 6})").ok());
  EXPECT_EQ(observer->ReadStatuses(MemberKind::kLtc)->at("1"), R"({"config_epoch": 6})");

  // Gone with the session.
  restarted->Shutdown();
  ltc->Shutdown();
  EXPECT_TRUE(test::WaitFor(
      [&] {
        auto left = observer->ReadStatuses(MemberKind::kLtc);
        return left.ok() && left->empty();
      },
      kWait));
}

// Its own server: this test kills it.
TEST_F(ConfigStoreTest, ServesLastConfigWhileZooKeeperIsDownAndRecovers) {
  test::ZkServerOptions zo;
  zo.data_dir = test::TestTempDir("config_store_test_restart") + "/zk";
  test::ZkServer zk(zo);
  Status s = zk.Start();
  ASSERT_TRUE(s.ok()) << s.ToString();

  auto admin = NewStoreAt("restart", zk.address());
  auto component = NewStoreAt("restart", zk.address());
  ASSERT_TRUE(admin->CreateCluster(Initial("restart", 4)).ok());
  ASSERT_TRUE(component->WaitForEpoch(1, kWait));
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  ASSERT_TRUE(component->Register(MemberKind::kLtc, "ltc-1", info).ok());

  // A hung server (SIGSTOP): calls give up at their deadline instead of blocking.
  ASSERT_TRUE(zk.Pause().ok());
  auto paused_at = std::chrono::steady_clock::now();
  Status paused = component->ReadConfig().status();
  EXPECT_TRUE(paused.code() == Status::Code::kTimedOut ||
              paused.code() == Status::Code::kUnavailable)
      << paused.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - paused_at, seconds(10));
  EXPECT_EQ(component->GetLastConfig()->epoch, 1u);
  ASSERT_TRUE(zk.Resume().ok());

  zk.Kill();
  ASSERT_TRUE(test::WaitFor([&] { return !component->connected(); }, kWait));
  // Serving continues from the last configuration; direct reads fail cleanly in time.
  ASSERT_TRUE(component->GetLastConfig().has_value());
  EXPECT_EQ(component->GetLastConfig()->epoch, 1u);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(component->ReadConfig().status().code(), Status::Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
  EXPECT_EQ(component->Register(MemberKind::kLtc, "ltc-2", info).code(),
            Status::Code::kUnavailable);  // kept and retried in the background

  s = zk.Restart();  // same port, same data directory
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(component->WaitConnected(kWait));
  ASSERT_TRUE(admin->WaitConnected(kWait));
  // Both registrations exist again (same session, or re-created in a new one).
  EXPECT_TRUE(test::WaitFor(
      [&] {
        return HasMember(admin.get(), MemberKind::kLtc, "ltc-1") &&
               HasMember(admin.get(), MemberKind::kLtc, "ltc-2");
      },
      kWait));
  ClusterConfig next = Initial("restart", 4);
  next.epoch = 2;
  ASSERT_TRUE(admin->UpdateConfig(next, ZkClient::kAnyVersion).ok());
  EXPECT_TRUE(component->WaitForEpoch(2, kWait));
  component->Shutdown();
  admin->Shutdown();
}

TEST_F(ConfigStoreTest, UnreachableAtStart) {
  // Nothing listens on the port of a killed server.
  ConfigStoreOptions o = Options("nowhere", "127.0.0.1:1");
  o.op_timeout = milliseconds(500);
  ConfigStore store(o);
  ASSERT_TRUE(store.Init().ok());  // does not wait for ZooKeeper
  EXPECT_FALSE(store.WaitConnected(milliseconds(300)));
  EXPECT_EQ(store.ReadConfig().status().code(), Status::Code::kUnavailable);
  EXPECT_FALSE(store.GetLastConfig().has_value());
  store.Shutdown();
  ConfigStore bad(Options("bad/name", server_->address()));
  EXPECT_EQ(bad.Init().code(), Status::Code::kInvalidArgument);
}

// ZooKeeper digest ACLs (--zk_auth_file, docs/security.md): a node created by a session
// with a credential can be read by anyone, written only by a session with the same one;
// a shared parent also lets anyone create children.
std::unique_ptr<ZkClient> NewZk(const std::string& servers, const std::string& auth,
                                std::vector<std::string> shared_parents = {}) {
  ZkClientOptions o;
  o.servers = servers;
  o.op_timeout = milliseconds(3000);
  o.auth = auth;
  o.shared_parents = std::move(shared_parents);
  auto zk = std::make_unique<ZkClient>(o);
  Status s = zk->Start();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(zk->WaitConnected(kWait));
  return zk;
}

void ExpectRefused(const Status& s) {
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_NE(s.message().find("ZooKeeper refused"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("--zk_auth_file"), std::string::npos) << s.ToString();
}

TEST_F(ConfigStoreTest, DigestAclLetsEveryoneReadAndOnlyTheCredentialWrite) {
  auto owner = NewZk(server_->address(), "nova:right");
  ASSERT_TRUE(owner->EnsurePath("/acl/protected/node").ok());
  ASSERT_TRUE(owner->Set("/acl/protected/node", "v1", ZkClient::kAnyVersion).ok());

  auto anonymous = NewZk(server_->address(), "");
  auto wrong = NewZk(server_->address(), "nova:wrong");
  for (ZkClient* other : {anonymous.get(), wrong.get()}) {
    std::string data;
    ASSERT_TRUE(other->Get("/acl/protected/node", &data, nullptr).ok());  // reading: anyone
    EXPECT_EQ(data, "v1");
    std::vector<std::string> children;
    EXPECT_TRUE(other->GetChildren("/acl/protected", &children).ok());
    ExpectRefused(other->Set("/acl/protected/node", "evil", ZkClient::kAnyVersion));
    ExpectRefused(other->Create("/acl/protected/node/child", "", ZkCreateMode::kPersistent));
    ExpectRefused(other->Create("/acl/intruder", "", ZkCreateMode::kEphemeral));
    ExpectRefused(other->Delete("/acl/protected/node"));
  }

  // Another session with the same credential (another process of the cluster) may write.
  auto peer = NewZk(server_->address(), "nova:right");
  EXPECT_TRUE(peer->Set("/acl/protected/node", "v2", ZkClient::kAnyVersion).ok());
  EXPECT_TRUE(peer->Create("/acl/protected/node/child", "", ZkCreateMode::kEphemeral).ok());
  EXPECT_TRUE(peer->Delete("/acl/protected/node/child").ok());
  std::string data;
  ASSERT_TRUE(anonymous->Get("/acl/protected/node", &data, nullptr).ok());
  EXPECT_EQ(data, "v2");

  // A shared parent: anyone may add a child (another cluster, with its own credential),
  // nobody else may change the parent itself.
  auto with_shared = NewZk(server_->address(), "nova:right", {"/acl/shared"});
  ASSERT_TRUE(with_shared->EnsurePath("/acl/shared").ok());
  EXPECT_TRUE(wrong->Create("/acl/shared/other-cluster", "", ZkCreateMode::kPersistent).ok());
  ExpectRefused(wrong->Set("/acl/shared", "evil", ZkClient::kAnyVersion));
  // Without a credential nodes stay open to all, as before.
  ASSERT_TRUE(anonymous->Create("/acl-open", "", ZkCreateMode::kPersistent).ok());
  EXPECT_TRUE(wrong->Set("/acl-open", "x", ZkClient::kAnyVersion).ok());
}

TEST_F(ConfigStoreTest, AClusterCreatedWithACredentialIsReadOnlyWithoutIt) {
  ConfigStoreOptions with = Options("guarded", server_->address());
  with.zk_auth = "nova:right";
  ConfigStore admin(with);
  ASSERT_TRUE(admin.Init().ok());
  ASSERT_TRUE(admin.WaitConnected(kWait));
  ASSERT_TRUE(admin.CreateCluster(Initial("guarded", 2)).ok());
  MemberInfo info;
  info.addresses["client"] = "127.0.0.1:7001";
  ASSERT_TRUE(admin.Register(MemberKind::kLtc, "ltc-1", info).ok());

  // A client needs no credential to route: it reads the configuration and the members.
  auto reader = NewStore("guarded");
  int32_t version = 0;
  auto config = reader->ReadConfig(&version);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->epoch, 1u);
  EXPECT_TRUE(HasMember(reader.get(), MemberKind::kLtc, "ltc-1"));
  // But it cannot change the configuration nor register a member.
  ClusterConfig next = config.value();
  next.epoch = 2;
  ExpectRefused(reader->UpdateConfig(next, version));
  ExpectRefused(reader->Register(MemberKind::kLtc, "ltc-2", info));
  // The credential's holder can.
  EXPECT_TRUE(admin.UpdateConfig(next, version).ok());
  reader->Shutdown();
  admin.Shutdown();
}

TEST_F(ConfigStoreTest, AMalformedCredentialIsRefusedAtStart) {
  for (const char* bad : {"nopassword", ":password", "user:", "us er:pw"}) {
    ConfigStoreOptions o = Options("malformed", server_->address());
    o.zk_auth = bad;
    ConfigStore store(o);
    const Status s = store.Init();
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().find("pw"), std::string::npos) << "the password is never echoed";
    EXPECT_NE(s.message().find("--zk_auth_file"), std::string::npos) << s.ToString();
  }
  EXPECT_TRUE(ValidateZkDigestAuth("nova:a:b c").ok());  // the password may hold anything
}

}  // namespace
}  // namespace nova::coordinator
