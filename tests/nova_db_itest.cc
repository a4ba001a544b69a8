// The leveldb::DB adapter over a real cluster (client/nova_db.h): LevelDB's db_test
// behaviours (put/get/delete, overwrite, empty and binary keys and values, batches,
// iterators in both directions, snapshots, properties, approximate sizes, CompactRange)
// against 3 nova_stoc and 2 nova_ltc processes serving 4 ranges (split at 0x40, 0x80, 0xc0;
// ranges 0-1 on one LTC, 2-3 on the other), so that every multi-key behaviour crosses
// ranges and LTCs.
//
// Every test runs in two modes (the test name's suffix):
//   Static     the LTCs own their ranges by static flags (--ranges, --ltc_ranges); the DB
//              is opened with "nova://ltc=host:port,host:port".
//   ZooKeeper  a real ZooKeeper server (tests/util/zk_server.h, one per suite, a cluster
//              per test), nova_admin create-cluster, nova_coordinator, and StoCs and LTCs
//              started with --zk/--cluster; the coordinator assigns the ranges and the DB
//              is opened with "nova://127.0.0.1:PORT/cluster". Skipped when ZooKeeper is
//              not installed.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/cluster_uri.h"
#include "client/nova_db.h"
#include "common/clock.h"
#include "common/wire/message.h"
#include "coordinator/config_store.h"
#include "leveldb/comparator.h"
#include "leveldb/write_batch.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"
#include "tests/util/zk_server.h"

namespace nova {
namespace {

using namespace std::chrono_literals;

constexpr int kStocs = 3;
// Small iterator pages, so that iterators page within ranges as well as across them.
constexpr size_t kIteratorPage = 7;
// Bounds every wait of the ZooKeeper mode's set-up (a JVM and five daemons on a loaded
// machine).
constexpr auto kZkWait = 60s;

// A key in range `range` (0..3): its first byte is inside the range.
std::string KeyIn(int range, const std::string& suffix) {
  static const char kFirst[] = {'\x10', '\x50', '\x90', '\xd0'};
  return std::string(1, kFirst[range]) + suffix;
}

// The split points of the 4 ranges, as nova_admin create-cluster --split-points reads them
// (hex, one per line): the same ranges as the static mode's --ranges=4, so KeyIn(r, ...)
// lands in range r and the tests' other keys ("", 0x00.., 0xff.., random bytes) spread over
// all four.
constexpr char kSplitPoints[] = "40\n80\nc0\n";

enum class Mode { kStatic, kZooKeeper };

std::string ModeName(const ::testing::TestParamInfo<Mode>& info) {
  return info.param == Mode::kStatic ? "Static" : "ZooKeeper";
}

std::string FileTail(const std::string& path, size_t bytes = 2000) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string s = all.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

class NovaDbITest : public ::testing::TestWithParam<Mode> {
 protected:
  static void TearDownTestSuite() {
    delete zk_;
    zk_ = nullptr;
  }

  bool zookeeper() const { return GetParam() == Mode::kZooKeeper; }

  // A fresh cluster per test (it starts in a fraction of a second, a few seconds with
  // ZooKeeper): iterators see the whole key space, so tests must not share one.
  void SetUp() override {
    if (zookeeper()) {
      std::string why;
      if (!test::ZkServer::Available(&why)) {
        GTEST_SKIP() << "ZooKeeper mode skipped: no ZooKeeper server on this machine (" << why
                     << "); deploy/install_deps.sh installs Debian's zookeeper package";
      }
      ASSERT_NO_FATAL_FAILURE(StartZooKeeperOnce());
    }
    dir_ = test::TestTempDir("nova_db_itest");
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    if (zookeeper()) {
      ASSERT_NO_FATAL_FAILURE(CreateCluster());
    }
    std::string stoc_list;
    for (int id = 1; id <= kStocs; ++id) {
      test::ExternalDaemonOptions o = test::StocDaemonOptions(
          dir_, secret.value(), id, {"--stoc_memory_limit_mb=128", "--stoc_file_buffer_mb=32"});
      AddZkFlags(&o.extra_flags);
      stocs_.push_back(std::make_unique<test::ExternalDaemon>(o));
      Status s = stocs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stoc_list +=
          (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" + stocs_.back()->address();
    }
    if (zookeeper()) {
      ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    }
    for (int i = 0; i < 2; ++i) {
      test::ExternalDaemonOptions o = test::LtcDaemonOptions(
          dir_, secret.value(), "ltc-" + std::to_string(i + 1),
          {"--engine=nova", "--ltc_id=" + std::to_string(i + 1), "--ltc_memtable_size_mb=1",
           "--ltc_sstable_size_mb=1"});
      if (zookeeper()) {
        AddZkFlags(&o.extra_flags);  // ranges and StoCs come from the configuration
      } else {
        o.extra_flags.insert(o.extra_flags.end(),
                             {"--ranges=4", i == 0 ? "--ltc_ranges=0,1" : "--ltc_ranges=2,3",
                              "--stoc=" + stoc_list});
      }
      ltcs_[i] = std::make_unique<test::ExternalDaemon>(o);
      Status s = ltcs_[i]->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    if (zookeeper()) {
      ASSERT_NO_FATAL_FAILURE(WaitForAssignment());
      uri_ = "nova://" + zk_->address() + "/" + cluster_;
    } else {
      uri_ = "nova://ltc=" + ltcs_[0]->address() + "," + ltcs_[1]->address();
    }
    db_ = Open();
    ASSERT_NE(db_, nullptr);
    // Every range answers (an LTC opens its ranges when it sees the configuration).
    ASSERT_TRUE(test::WaitFor(
        [&] {
          for (int r = 0; r < 4; ++r) {
            if (Get(KeyIn(r, "")) != "NOT_FOUND") return false;
          }
          return true;
        },
        kZkWait))
        << "not every range answers: " << Get(KeyIn(3, ""));
  }

  void TearDown() override {
    db_.reset();
    for (auto& l : ltcs_) l.reset();
    if (coordinator_ != nullptr) {
      coordinator_->Signal(SIGTERM);
      EXPECT_EQ(coordinator_->Wait(30s), 0) << FileTail(dir_ + "/coordinator.log");
      coordinator_.reset();
    }
    stocs_.clear();
  }

  // ---- ZooKeeper mode -----------------------------------------------------------------

  // One ZooKeeper server for the whole suite; each test creates its own cluster in it.
  static void StartZooKeeperOnce() {
    if (zk_ != nullptr) {
      ASSERT_TRUE(zk_->IsRunning()) << "ZooKeeper died; its log: " << zk_->log_path();
      return;
    }
    test::ZkServerOptions o;
    o.data_dir = test::TestTempDir("nova_db_itest_zk");
    zk_ = new test::ZkServer(o);
    Status s = zk_->Start();
    if (!s.ok()) {
      delete zk_;
      zk_ = nullptr;
      FAIL() << s.ToString();
    }
  }

  void AddZkFlags(std::vector<std::string>* flags) const {
    if (!zookeeper()) return;
    flags->push_back("--zk=" + zk_->address());
    flags->push_back("--cluster=" + cluster_);
  }

  // nova_admin create-cluster with kSplitPoints, under a cluster name new in this process.
  void CreateCluster() {
    cluster_ = "db-" + std::to_string(++clusters_created_);
    const std::string split_points = dir_ + "/split_points";
    std::ofstream(split_points) << kSplitPoints;
    const std::string err_path = dir_ + "/admin.err";
    test::ChildProcessOptions o;
    o.stderr_path = err_path;
    test::ChildProcess admin;
    ASSERT_TRUE(
        admin.Start({test::BinDir() + "/nova_admin", "create-cluster", "--zk=" + zk_->address(),
                     "--cluster=" + cluster_, "--split-points", split_points},
                    o))
        << "cannot start nova_admin";
    std::string line;
    while (admin.ReadLine(&line, 30s)) {
    }
    ASSERT_EQ(admin.Wait(30s), 0) << FileTail(err_path);
  }

  // nova_coordinator, which assigns the ranges once both LTCs have registered.
  void StartCoordinator() {
    test::ChildProcessOptions o;
    o.stderr_path = dir_ + "/coordinator.log";
    coordinator_ = std::make_unique<test::ChildProcess>();
    ASSERT_TRUE(
        coordinator_->Start({test::BinDir() + "/nova_coordinator", "--zk=" + zk_->address(),
                             "--cluster=" + cluster_, "--coordinator_id=coord",
                             "--coordinator_min_ltcs=2", "--coordinator_recheck_interval_ms=500"},
                            o))
        << "cannot start nova_coordinator";
  }

  // Waits until the configuration assigns every range, and checks the assignment is the
  // static mode's: contiguous blocks in LTC id order, ranges 0-1 on LTC 1, 2-3 on LTC 2
  // (docs/coordinator.md), so that tests may kill "the LTC of ranges 2 and 3".
  void WaitForAssignment() {
    coordinator::ConfigStoreOptions o;
    o.zk_servers = zk_->address();
    o.cluster = cluster_;
    coordinator::ConfigStore store(o);
    ASSERT_TRUE(store.Init().ok());
    ASSERT_TRUE(store.WaitConnected(kZkWait));
    std::optional<coordinator::ClusterConfig> config;
    ASSERT_TRUE(test::WaitFor(
        [&] {
          auto c = store.ReadConfig();
          if (!c.ok() || c->ranges.size() != 4 || !c->RangesOf("").empty()) return false;
          config = c.value();
          return true;
        },
        kZkWait))
        << "the coordinator did not assign every range; its log:\n"
        << FileTail(dir_ + "/coordinator.log");
    EXPECT_EQ(config->RangesOf("1"), (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(config->RangesOf("2"), (std::vector<uint32_t>{2, 3}));
    EXPECT_EQ(config->ltcs.at("1"), ltcs_[0]->address());
    EXPECT_EQ(config->ltcs.at("2"), ltcs_[1]->address());
    EXPECT_EQ(config->stocs.size(), static_cast<size_t>(kStocs));
    store.Shutdown();
  }

  // ---- helpers ------------------------------------------------------------------------

  std::unique_ptr<leveldb::DB> Open(std::chrono::milliseconds timeout = 10s) {
    client::NovaDBOptions o;
    o.client.timeout = timeout;
    o.iterator_page_pairs = kIteratorPage;
    leveldb::DB* db = nullptr;
    leveldb::Status s = client::OpenDB(leveldb::Options(), uri_, o, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::unique_ptr<leveldb::DB>(db);
  }

  leveldb::Status Put(const std::string& k, const std::string& v) {
    return db_->Put(leveldb::WriteOptions(), k, v);
  }
  // The value, "NOT_FOUND", or the error text (LevelDB db_test's Get).
  std::string Get(const std::string& k, const leveldb::Snapshot* snap = nullptr) {
    leveldb::ReadOptions r;
    r.snapshot = snap;
    std::string v;
    leveldb::Status s = db_->Get(r, k, &v);
    if (s.IsNotFound()) return "NOT_FOUND";
    if (!s.ok()) return s.ToString();
    return v;
  }
  // Every pair through a forward walk, "k->v" joined by ", " (db_test's Contents).
  std::string Contents(const leveldb::Snapshot* snap = nullptr) {
    leveldb::ReadOptions r;
    r.snapshot = snap;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(r));
    std::string out;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      out += (out.empty() ? "" : ", ") + it->key().ToString() + "->" + it->value().ToString();
    }
    if (!it->status().ok()) out += " ERROR " + it->status().ToString();
    return out;
  }

  static test::ZkServer* zk_;    // ZooKeeper mode: shared by the suite's tests
  static int clusters_created_;  // names each test's cluster
  std::string dir_;
  std::string cluster_;  // ZooKeeper mode
  std::vector<std::unique_ptr<test::ExternalDaemon>> stocs_;
  std::unique_ptr<test::ChildProcess> coordinator_;  // ZooKeeper mode
  std::unique_ptr<test::ExternalDaemon> ltcs_[2];
  std::string uri_;
  std::unique_ptr<leveldb::DB> db_;
};

test::ZkServer* NovaDbITest::zk_ = nullptr;
int NovaDbITest::clusters_created_ = 0;

TEST_P(NovaDbITest, PutGetDeleteOverwrite) {
  for (int r = 0; r < 4; ++r) {
    const std::string k = KeyIn(r, "foo");
    ASSERT_EQ(Get(k), "NOT_FOUND");
    ASSERT_TRUE(Put(k, "v1").ok());
    ASSERT_EQ(Get(k), "v1");
    ASSERT_TRUE(Put(k, "v2").ok());  // overwrite
    ASSERT_EQ(Get(k), "v2");
    ASSERT_TRUE(db_->Delete(leveldb::WriteOptions(), k).ok());
    ASSERT_EQ(Get(k), "NOT_FOUND");
    ASSERT_TRUE(db_->Delete(leveldb::WriteOptions(), k).ok());  // deleting a missing key is OK
  }
}

TEST_P(NovaDbITest, EmptyAndBinaryKeysAndValues) {
  ASSERT_TRUE(Put("", "empty key").ok());  // the smallest key, in range 0
  ASSERT_TRUE(Put(KeyIn(1, "e"), "").ok());
  const std::string binary_key("\x00\xff\x00", 3);
  const std::string high_key("\xff\xff\xff", 3);  // range 3, no upper bound
  std::string binary_value;
  for (int i = 0; i < 256; ++i) binary_value += static_cast<char>(i);
  ASSERT_TRUE(Put(binary_key, binary_value).ok());
  ASSERT_TRUE(Put(high_key, binary_value).ok());
  EXPECT_EQ(Get(""), "empty key");
  EXPECT_EQ(Get(KeyIn(1, "e")), "");
  EXPECT_EQ(Get(binary_key), binary_value);
  EXPECT_EQ(Get(high_key), binary_value);
  EXPECT_EQ(Get(std::string("\x00\xff", 2)), "NOT_FOUND");  // a prefix is another key
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "");
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), high_key);
}

TEST_P(NovaDbITest, WriteBatchAcrossRanges) {
  ASSERT_TRUE(Put(KeyIn(2, "gone"), "x").ok());
  leveldb::WriteBatch b;
  for (int r = 0; r < 4; ++r) b.Put(KeyIn(r, "a"), "batch" + std::to_string(r));
  b.Delete(KeyIn(2, "gone"));
  b.Put(KeyIn(3, "z"), "first");
  b.Delete(KeyIn(3, "z"));  // order within a range is kept: the delete wins
  b.Put(KeyIn(1, "y"), "old");
  b.Put(KeyIn(1, "y"), "new");
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &b).ok());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(Get(KeyIn(r, "a")), "batch" + std::to_string(r));
  EXPECT_EQ(Get(KeyIn(2, "gone")), "NOT_FOUND");
  EXPECT_EQ(Get(KeyIn(3, "z")), "NOT_FOUND");
  EXPECT_EQ(Get(KeyIn(1, "y")), "new");
  leveldb::WriteBatch empty;
  EXPECT_TRUE(db_->Write(leveldb::WriteOptions(), &empty).ok());
}

TEST_P(NovaDbITest, IteratorEdgesAndEmptyRanges) {
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid());
    it->SeekToLast();
    EXPECT_FALSE(it->Valid());
    it->Seek("a");
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  }
  // Keys only in ranges 0 and 3: walks must cross the empty ranges 1 and 2.
  ASSERT_TRUE(Put(KeyIn(0, "a"), "0a").ok());
  ASSERT_TRUE(Put(KeyIn(3, "b"), "3b").ok());
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->Seek(KeyIn(1, ""));  // lands in range 3
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), KeyIn(3, "b"));
  it->Prev();  // back across ranges 2 and 1
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), KeyIn(0, "a"));
  it->Prev();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value().ToString(), "3b");
  it->Next();
  EXPECT_FALSE(it->Valid());
  it->Seek(KeyIn(3, "c"));  // past the last key
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

// Random keys over all ranges, walked in random directions with small pages, compared with
// a std::map (LevelDB db_test's ModelDB idea).
TEST_P(NovaDbITest, IteratorMatchesModelAcrossRanges) {
  const uint64_t seed = test::TestSeed("IteratorMatchesModelAcrossRanges");
  std::mt19937_64 rnd(seed);
  std::map<std::string, std::string> model;
  leveldb::WriteBatch batch;
  for (int i = 0; i < 300; ++i) {
    std::string k(1 + rnd() % 3, '\0');
    for (char& c : k) c = static_cast<char>(rnd() % 256);
    const std::string v = "v" + std::to_string(i);
    model[k] = v;
    batch.Put(k, v);
  }
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());

  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  // Full walks both ways.
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end());
    ASSERT_EQ(it->key().ToString(), m->first);
    ASSERT_EQ(it->value().ToString(), m->second);
  }
  EXPECT_EQ(m, model.end());
  auto rm = model.rbegin();
  for (it->SeekToLast(); it->Valid(); it->Prev(), ++rm) {
    ASSERT_NE(rm, model.rend());
    ASSERT_EQ(it->key().ToString(), rm->first);
  }
  EXPECT_EQ(rm, model.rend());
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();

  // Random seeks followed by random steps, changing direction.
  for (int round = 0; round < 40; ++round) {
    std::string target(1 + rnd() % 2, '\0');
    for (char& c : target) c = static_cast<char>(rnd() % 256);
    it->Seek(target);
    auto pos = model.lower_bound(target);
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round));
    for (int step = 0; step < 20; ++step) {
      ASSERT_EQ(it->Valid(), pos != model.end());
      if (!it->Valid()) break;
      ASSERT_EQ(it->key().ToString(), pos->first);
      if (rnd() % 2 == 0) {
        it->Next();
        ++pos;
      } else {
        it->Prev();
        if (pos == model.begin()) {
          ASSERT_FALSE(it->Valid());
          break;
        }
        --pos;
      }
    }
  }
}

// The full contents through a forward walk and through a backward walk of `it`, each
// checked against `model`.
void ExpectWalksMatch(leveldb::Iterator* it, const std::map<std::string, std::string>& model) {
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end()) << "extra key " << it->key().ToString();
    ASSERT_EQ(it->key().ToString(), m->first);
    ASSERT_EQ(it->value().ToString(), m->second) << m->first;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(m, model.end());
  auto rm = model.rbegin();
  for (it->SeekToLast(); it->Valid(); it->Prev(), ++rm) {
    ASSERT_NE(rm, model.rend()) << "extra key " << it->key().ToString();
    ASSERT_EQ(it->key().ToString(), rm->first);
    ASSERT_EQ(it->value().ToString(), rm->second) << rm->first;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(rm, model.rend());
}

// LevelDB's iterator is an implicit snapshot: writes made after NewIterator() (new keys,
// overwrites, deletes, in every range) are never seen, on any page, in either direction,
// before or after the first Seek.
TEST_P(NovaDbITest, IteratorIsASnapshot) {
  std::map<std::string, std::string> model;
  leveldb::WriteBatch batch;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 5 * static_cast<int>(kIteratorPage); i += 2) {
      const std::string k = KeyIn(r, "k" + std::to_string(100 + i));
      model[k] = "old" + std::to_string(i);
      batch.Put(k, model[k]);
    }
  }
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  std::unique_ptr<leveldb::Iterator> started(db_->NewIterator(leveldb::ReadOptions()));
  started->Seek(KeyIn(1, ""));  // one page loaded before the writes
  ASSERT_TRUE(started->Valid());

  // After NewIterator: a new key between every two old ones, every old key overwritten or
  // deleted.
  leveldb::WriteBatch later;
  for (int r = 0; r < 4; ++r) {
    for (int i = 1; i < 5 * static_cast<int>(kIteratorPage); i += 2) {
      later.Put(KeyIn(r, "k" + std::to_string(100 + i)), "new");
    }
  }
  int n = 0;
  for (const auto& [k, v] : model) {
    if (n++ % 3 == 0) {
      later.Delete(k);
    } else {
      later.Put(k, "overwritten");
    }
  }
  later.Put("", "new empty key");
  later.Put("\xff\xff", "new last key");
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &later).ok());

  ExpectWalksMatch(it.get(), model);
  ExpectWalksMatch(started.get(), model);
  // Seeks into each range, then steps both ways across pages and ranges.
  for (int r = 0; r < 4; ++r) {
    it->Seek(KeyIn(r, "k1"));
    auto m = model.lower_bound(KeyIn(r, "k1"));
    for (int step = 0; step < 3 * static_cast<int>(kIteratorPage) && m != model.end(); ++step, ++m) {
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key().ToString(), m->first);
      ASSERT_EQ(it->value().ToString(), m->second);
      it->Next();
    }
    it->Seek(KeyIn(r, "k1"));
    m = model.lower_bound(KeyIn(r, "k1"));
    for (int step = 0; step < 3 * static_cast<int>(kIteratorPage); ++step) {
      it->Prev();
      if (m == model.begin()) {
        ASSERT_FALSE(it->Valid());
        break;
      }
      --m;
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key().ToString(), m->first);
      ASSERT_EQ(it->value().ToString(), m->second);
    }
  }
  // A new iterator sees the writes.
  std::unique_ptr<leveldb::Iterator> fresh(db_->NewIterator(leveldb::ReadOptions()));
  fresh->SeekToLast();
  ASSERT_TRUE(fresh->Valid());
  EXPECT_EQ(fresh->value().ToString(), "new last key");
  fresh->SeekToFirst();
  ASSERT_TRUE(fresh->Valid());
  EXPECT_EQ(fresh->value().ToString(), "new empty key");
}

// Reverse walks over many keys and pages compared with a std::map: SeekToLast + Prev to the
// front, and Seek + Prev from random places (backward pages, not forward rescans).
TEST_P(NovaDbITest, ReverseWalksMatchModel) {
  const uint64_t seed = test::TestSeed("ReverseWalksMatchModel");
  std::mt19937_64 rnd(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::map<std::string, std::string> model;
  leveldb::WriteBatch batch;
  for (int i = 0; i < 1000; ++i) {
    std::string k(1 + rnd() % 4, '\0');
    for (char& c : k) c = static_cast<char>(rnd() % 256);
    model[k] = "v" + std::to_string(i);
    batch.Put(k, model[k]);
  }
  // Keys on the range boundaries and the empty key.
  for (const std::string& k : {std::string(), std::string("\x40"), std::string("\x80"),
                               std::string("\xc0")}) {
    model[k] = "edge";
    batch.Put(k, "edge");
  }
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  ExpectWalksMatch(it.get(), model);
  for (int round = 0; round < 30; ++round) {
    std::string target(rnd() % 3, '\0');
    for (char& c : target) c = static_cast<char>(rnd() % 256);
    it->Seek(target);
    auto pos = model.lower_bound(target);
    ASSERT_EQ(it->Valid(), pos != model.end());
    if (!it->Valid()) continue;
    for (int step = 0; step < 50; ++step) {
      it->Prev();
      if (pos == model.begin()) {
        ASSERT_FALSE(it->Valid());
        break;
      }
      --pos;
      ASSERT_TRUE(it->Valid()) << "round " << round << " step " << step;
      ASSERT_EQ(it->key().ToString(), pos->first);
    }
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
}

// An iterator whose ranges' snapshots cannot be taken says so in status(); one whose
// snapshot's LTC dies fails there; neither ever shows the latest data instead.
TEST_P(NovaDbITest, IteratorFailsWithoutItsSnapshots) {
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(Put(KeyIn(r, "k"), "v1").ok());
  // A whole page in range 0, so that the first page needs no other range.
  for (size_t i = 0; i < kIteratorPage; ++i) {
    ASSERT_TRUE(Put(KeyIn(0, "p" + std::to_string(i)), "v1").ok());
  }
  auto db = Open(2s);  // short deadlines: the dead LTC is not coming back
  std::unique_ptr<leveldb::Iterator> before(db->NewIterator(leveldb::ReadOptions()));
  ltcs_[1]->Kill();  // ranges 2 and 3
  before->Seek(KeyIn(0, ""));
  ASSERT_TRUE(before->Valid()) << before->status().ToString();
  EXPECT_EQ(before->key().ToString(), KeyIn(0, "k"));
  before->SeekToLast();  // range 3
  EXPECT_FALSE(before->Valid());
  EXPECT_TRUE(before->status().IsIOError()) << before->status().ToString();

  std::unique_ptr<leveldb::Iterator> after(db->NewIterator(leveldb::ReadOptions()));
  EXPECT_FALSE(after->Valid());
  EXPECT_TRUE(after->status().IsIOError()) << after->status().ToString();
  EXPECT_NE(after->status().ToString().find("snapshot"), std::string::npos)
      << after->status().ToString();
  after->SeekToFirst();  // range 0 is alive, but the iterator is no snapshot: no data
  EXPECT_FALSE(after->Valid());
  EXPECT_FALSE(after->status().ok());
}

// Snapshot ids restart with their LTC: a snapshot taken before an LTC restarted must fail,
// never read at a snapshot a later call took under the same id on a new connection.
TEST_P(NovaDbITest, SnapshotFromBeforeAnLtcRestartFails) {
  if (zookeeper()) GTEST_SKIP() << "static ranges only: a restart there needs no reassignment";
  ASSERT_TRUE(Put(KeyIn(3, "k"), "old").ok());
  const leveldb::Snapshot* before = db_->GetSnapshot();
  ASSERT_EQ(Get(KeyIn(3, "k"), before), "old");
  ASSERT_TRUE(ltcs_[1]->Restart().ok());  // ranges 2 and 3; its snapshot ids start again
  ASSERT_TRUE(test::WaitFor([&] { return Put(KeyIn(3, "k"), "new").ok(); }, 30s));
  // New snapshots on new connections to the restarted LTC reuse the old ids.
  std::vector<const leveldb::Snapshot*> later;
  for (int i = 0; i < 8; ++i) {
    const leveldb::Snapshot* s = nullptr;
    ASSERT_TRUE(test::WaitFor([&] { return client::TakeSnapshot(db_.get(), &s).ok(); }, 30s));
    later.push_back(s);
  }
  for (const leveldb::Snapshot* s : later) EXPECT_EQ(Get(KeyIn(3, "k"), s), "new");
  const std::string seen = Get(KeyIn(3, "k"), before);
  EXPECT_NE(seen, "new") << "a read at the old snapshot used a later one";
  EXPECT_EQ(seen.rfind("IO error", 0), 0u) << seen;
  for (const leveldb::Snapshot* s : later) db_->ReleaseSnapshot(s);
  db_->ReleaseSnapshot(before);
}

TEST_P(NovaDbITest, SnapshotsAcrossRanges) {
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(Put(KeyIn(r, "k"), "v1").ok());
  const leveldb::Snapshot* snap = db_->GetSnapshot();
  ASSERT_NE(snap, nullptr);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(Put(KeyIn(r, "k"), "v2").ok());
  ASSERT_TRUE(db_->Delete(leveldb::WriteOptions(), KeyIn(0, "k")).ok());
  ASSERT_TRUE(Put(KeyIn(2, "new"), "v2").ok());

  for (int r = 0; r < 4; ++r) EXPECT_EQ(Get(KeyIn(r, "k"), snap), "v1") << r;
  EXPECT_EQ(Get(KeyIn(2, "new"), snap), "NOT_FOUND");
  EXPECT_EQ(Get(KeyIn(0, "k")), "NOT_FOUND");
  EXPECT_EQ(Get(KeyIn(1, "k")), "v2");
  // An iterator at the snapshot sees the old state in every range, both ways.
  const std::string old = KeyIn(0, "k") + "->v1, " + KeyIn(1, "k") + "->v1, " + KeyIn(2, "k") +
                          "->v1, " + KeyIn(3, "k") + "->v1";
  EXPECT_EQ(Contents(snap), old);
  EXPECT_EQ(Contents(), KeyIn(1, "k") + "->v2, " + KeyIn(2, "k") + "->v2, " + KeyIn(2, "new") +
                            "->v2, " + KeyIn(3, "k") + "->v2");
  leveldb::ReadOptions at;
  at.snapshot = snap;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(at));
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), KeyIn(3, "k"));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), KeyIn(2, "k"));  // not KeyIn(2, "new")

  // After the release, the iterator fails rather than reading the latest data.
  db_->ReleaseSnapshot(snap);
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_FALSE(it->status().ok());
  EXPECT_NE(it->status().ToString().find("snapshot"), std::string::npos) << it->status().ToString();
}

TEST_P(NovaDbITest, SnapshotReadsFailWhenTheirLtcDies) {
  ASSERT_TRUE(Put(KeyIn(0, "k"), "v1").ok());
  ASSERT_TRUE(Put(KeyIn(3, "k"), "v1").ok());
  auto db = Open(2s);  // short deadlines: the dead LTC is not coming back
  const leveldb::Snapshot* snap = db->GetSnapshot();
  ltcs_[1]->Kill();  // ranges 2 and 3
  leveldb::ReadOptions at;
  at.snapshot = snap;
  std::string v;
  ASSERT_TRUE(db->Get(at, KeyIn(0, "k"), &v).ok());
  EXPECT_EQ(v, "v1");
  leveldb::Status s = db->Get(at, KeyIn(3, "k"), &v);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();  // never NotFound, never the latest value
  db->ReleaseSnapshot(snap);
  // A snapshot that cannot be taken in every range is unusable as a whole.
  snap = db->GetSnapshot();
  s = db->Get(at = leveldb::ReadOptions(), KeyIn(0, "k"), &v);
  ASSERT_TRUE(s.ok()) << s.ToString();  // latest reads of live ranges still work
  at.snapshot = snap;
  s = db->Get(at, KeyIn(0, "k"), &v);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsNotFound()) << s.ToString();
  db->ReleaseSnapshot(snap);
}

// Counts the tables "leveldb.sstables" lists under "--- level <level> ---".
int SstablesAtLevel(const std::string& sstables, int level) {
  std::istringstream in(sstables);
  std::string line;
  int current = -1, n = 0;
  while (std::getline(in, line)) {
    if (line.rfind("--- level ", 0) == 0) {
      current = std::stoi(line.substr(10));
    } else if (current == level && line.find(" range ") != std::string::npos) {
      ++n;
    }
  }
  return n;
}

TEST_P(NovaDbITest, PropertiesSizesAndCompactRange) {
  std::string v;
  ASSERT_TRUE(db_->GetProperty("nova.num-ranges", &v));
  EXPECT_EQ(v, "4");
  ASSERT_TRUE(db_->GetProperty("nova.routing", &v));
  EXPECT_NE(v.find(ltcs_[0]->address()), std::string::npos) << v;
  EXPECT_NE(v.find(ltcs_[1]->address()), std::string::npos) << v;
  ASSERT_TRUE(db_->GetProperty("nova.stats", &v));
  EXPECT_NE(v.find("== " + ltcs_[0]->address() + " =="), std::string::npos) << v;
  EXPECT_NE(v.find("== " + ltcs_[1]->address() + " =="), std::string::npos) << v;
  EXPECT_FALSE(db_->GetProperty("nova.nosuch", &v));
  EXPECT_FALSE(db_->GetProperty("leveldb.nosuch", &v));

  // 4 ranges x 3000 keys x 1000 bytes: a few 1 MiB memtables flushed per range, in
  // batches of 250 (each within one range).
  constexpr int kPerRange = 3000;
  constexpr int kBatch = 250;
  std::map<std::string, std::string> model;
  char suffix[16];
  for (int r = 0; r < 4; ++r) {
    leveldb::WriteBatch batch;
    for (int i = 0; i < kPerRange; ++i) {
      std::snprintf(suffix, sizeof(suffix), "k%05d", i);
      const std::string key = KeyIn(r, suffix);
      const std::string value = key + std::string(1000 - key.size(), static_cast<char>('a' + r));
      batch.Put(key, value);
      model[key] = value;
      if ((i + 1) % kBatch == 0) {
        ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
        batch.Clear();
      }
    }
  }
  const uint64_t data = 4ull * kPerRange * 1000;

  // Sizes: the whole key space, two ranges, half a range, nothing (limit before start).
  const std::string r0 = KeyIn(0, ""), r2 = KeyIn(2, "");
  const std::string half_lo = KeyIn(1, "k00000"), half_hi = KeyIn(1, "k01500");
  leveldb::Range ranges[] = {leveldb::Range("", "\xff\xff"), leveldb::Range(r0, r2),
                             leveldb::Range(half_lo, half_hi), leveldb::Range("b", "a")};
  uint64_t sizes[4] = {9, 9, 9, 9};
  db_->GetApproximateSizes(ranges, 4, sizes);
  EXPECT_GT(sizes[0], data * 8 / 10);
  EXPECT_LT(sizes[0], data * 2);
  EXPECT_NEAR(static_cast<double>(sizes[1]) / sizes[0], 0.5, 0.15);
  EXPECT_NEAR(static_cast<double>(sizes[2]) / sizes[0], 0.125, 0.07);
  EXPECT_EQ(sizes[3], 0u);

  // Properties parse.
  uint64_t files = 0;
  for (int level = 0; level < 7; ++level) {
    ASSERT_TRUE(db_->GetProperty("leveldb.num-files-at-level" + std::to_string(level), &v));
    files += std::stoull(v);
  }
  EXPECT_GT(files, 0u);
  EXPECT_FALSE(db_->GetProperty("leveldb.num-files-at-level7", &v));
  EXPECT_FALSE(db_->GetProperty("leveldb.num-files-at-levelx", &v));
  ASSERT_TRUE(db_->GetProperty("leveldb.approximate-memory-usage", &v));
  EXPECT_GT(std::stoull(v), 0u);
  ASSERT_TRUE(db_->GetProperty("leveldb.stats", &v));
  EXPECT_NE(v.find("Level  Files Size(MB) Time(sec) Read(MB) Write(MB)"), std::string::npos) << v;
  EXPECT_NE(v.find("Nova-LSM: 4 ranges"), std::string::npos) << v;
  EXPECT_NE(v.find("== " + ltcs_[0]->address() + " =="), std::string::npos) << v;
  ASSERT_TRUE(db_->GetProperty("leveldb.sstables", &v));
  EXPECT_NE(v.find("--- level 0 ---"), std::string::npos) << v;
  // The table list agrees with the counts, read at one moment: background flushes and
  // compactions may change the files between two calls, so both are read again until a
  // pair agrees.
  uint64_t listed = 0;
  const bool agree = test::WaitFor([&] {
    files = 0;
    for (int level = 0; level < 7; ++level) {
      if (!db_->GetProperty("leveldb.num-files-at-level" + std::to_string(level), &v)) {
        return false;
      }
      files += std::stoull(v);
    }
    if (!db_->GetProperty("leveldb.sstables", &v)) return false;
    listed = 0;
    for (int level = 0; level < 7; ++level) listed += SstablesAtLevel(v, level);
    return listed == files;
  });
  EXPECT_TRUE(agree) << listed << " tables listed, " << files << " counted:\n" << v;

  // Part of one range, then everything: afterwards no table is left in Level 0 and every
  // key reads back.
  const leveldb::Slice lo(half_lo), hi(half_hi);
  db_->CompactRange(&lo, &hi);
  db_->CompactRange(nullptr, nullptr);
  ASSERT_TRUE(db_->GetProperty("leveldb.num-files-at-level0", &v));
  EXPECT_EQ(v, "0");
  ASSERT_TRUE(db_->GetProperty("leveldb.sstables", &v));
  EXPECT_EQ(SstablesAtLevel(v, 0), 0) << v;
  EXPECT_GT(SstablesAtLevel(v, 1), 0) << v;
  for (const auto& [key, value] : model) {
    std::string got;
    ASSERT_TRUE(db_->Get(leveldb::ReadOptions(), key, &got).ok()) << key;
    ASSERT_EQ(got, value);
  }
  uint64_t after = 0;
  db_->GetApproximateSizes(ranges, 1, &after);
  EXPECT_NEAR(static_cast<double>(after) / sizes[0], 1.0, 0.35);
}

TEST_P(NovaDbITest, OpenErrors) {
  leveldb::DB* db = nullptr;
  leveldb::Status s = client::OpenDB(leveldb::Options(), "ltc=" + ltcs_[0]->address(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(db, nullptr);
  client::NovaDBOptions quick;
  quick.client.timeout = std::chrono::milliseconds(1500);
  s = client::OpenDB(leveldb::Options(), "nova://127.0.0.1:1/mycluster", quick, &db);
  EXPECT_FALSE(s.ok());  // no ZooKeeper there
  EXPECT_NE(s.ToString().find("ZooKeeper"), std::string::npos) << s.ToString();
  EXPECT_EQ(db, nullptr);
  leveldb::Options exists;
  exists.error_if_exists = true;
  s = client::OpenDB(exists, uri_, &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  struct Reverse : leveldb::Comparator {
    int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
      return b.compare(a);
    }
    const char* Name() const override { return "reverse"; }
    void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
    void FindShortSuccessor(std::string*) const override {}
  } reverse;
  leveldb::Options other;
  other.comparator = &reverse;
  s = client::OpenDB(other, uri_, &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  client::NovaDBOptions o;
  o.client.connect_timeout = 500ms;
  s = client::OpenDB(leveldb::Options(), "nova://ltc=127.0.0.1:1", o, &db);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(db, nullptr);
  if (zookeeper()) {
    // A live ZooKeeper, but no such cluster in it: a clear error at the deadline.
    s = client::OpenDB(leveldb::Options(), "nova://" + zk_->address() + "/no-such-cluster", quick,
                       &db);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find("create-cluster"), std::string::npos) << s.ToString();
    EXPECT_EQ(db, nullptr);
  }
}

TEST_P(NovaDbITest, OpenWithARoutingSource) {
  // How a configuration watcher plugs in: a RoutingSource instead of a URI. Static mode:
  // the LTCs describe their ranges; ZooKeeper mode: the cluster's configuration.
  std::unique_ptr<client::RoutingSource> source;
  if (zookeeper()) {
    auto zk_source = client::NewZooKeeperRoutingSource(zk_->address(), cluster_, 10s);
    ASSERT_TRUE(zk_source.ok()) << zk_source.status().ToString();
    source = std::move(zk_source.value());
  } else {
    source = std::make_unique<client::StaticRoutingSource>(
        std::vector<std::string>{ltcs_[1]->address(), ltcs_[0]->address()}, 2s);
  }
  client::NovaDBOptions o;
  o.client.routing_source = source.get();
  leveldb::DB* raw = nullptr;
  leveldb::Status s = client::OpenDB(leveldb::Options(), "", o, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<leveldb::DB> db(raw);
  ASSERT_TRUE(db->Put(leveldb::WriteOptions(), KeyIn(2, "x"), "y").ok());
  EXPECT_EQ(Get(KeyIn(2, "x")), "y");  // seen through the other DB handle
}

// ---- Limits and refused batches (all checked by the client before anything is sent) ----

// How soon a refused call must fail: no retry, far below the 10 s timeout. (That nothing
// was sent, the refusals' wording shows: the client's "would refuse it". 5 s, not 1: on a
// slow VM, first touching a 64 MiB value's pages took 1.2-1.5 s.)
constexpr auto kAtOnce = 5s;

// What the LTC serving `key` reports of its limits (the tests never assume numbers: the
// LTCs' defaults may change).
ltc::ClientLimits LimitsAt(const std::string& uri, const std::string& key) {
  auto where = client::ParseClusterUri(uri);
  EXPECT_TRUE(where.ok()) << where.status().ToString();
  if (!where.ok()) return {};
  auto conn = client::ConnectToCluster(where.value(), client::ClientOptions());
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return {};
  auto limits = conn.value()->client->LimitsFor(key);
  EXPECT_TRUE(limits.ok()) << limits.status().ToString();
  return limits.ok() ? limits.value() : ltc::ClientLimits();
}

// Writes `batch` and expects it refused at once with InvalidArgument naming `flag`, and
// none of `other_parts_keys` (keys of its parts within the limits) written.
void ExpectRefusedAtOnce(leveldb::DB* db, leveldb::WriteBatch* batch, const std::string& flag,
                         const std::vector<std::string>& other_parts_keys) {
  const MonoTime start = MonoNow();
  leveldb::Status s = db->Write(leveldb::WriteOptions(), batch);
  const auto took = MonoNow() - start;
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find(flag), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("nothing was applied"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("would refuse it"), std::string::npos) << s.ToString();
  EXPECT_LT(took, kAtOnce) << s.ToString();
  for (const std::string& k : other_parts_keys) {
    std::string v;
    leveldb::Status g = db->Get(leveldb::ReadOptions(), k, &v);
    EXPECT_TRUE(g.IsNotFound()) << "a refused batch applied its part with key '" << k
                                << "': " << g.ToString();
  }
}

TEST_P(NovaDbITest, BatchWithAnOverLimitPartAppliesNothing) {
  const ltc::ClientLimits l = LimitsAt(uri_, KeyIn(3, ""));
  ASSERT_GT(l.max_key_bytes, 0u);
  // Good parts in ranges 0, 1 and 2 (both LTCs); range 3's part breaks one limit.
  std::vector<std::string> good_keys;
  for (int r = 0; r < 3; ++r) good_keys.push_back(KeyIn(r, "good"));
  const auto batch_with = [&](const std::function<void(leveldb::WriteBatch*)>& bad_part) {
    leveldb::WriteBatch b;
    for (const std::string& k : good_keys) b.Put(k, "v");
    bad_part(&b);
    for (const std::string& k : good_keys) b.Put(k + "2", "v");  // after the bad part too
    return b;
  };
  std::vector<std::string> all_good = good_keys;
  for (const std::string& k : good_keys) all_good.push_back(k + "2");
  {
    SCOPED_TRACE("a key over --ltc_max_key_bytes");
    leveldb::WriteBatch b = batch_with([&](leveldb::WriteBatch* w) {
      w->Put(KeyIn(3, std::string(l.max_key_bytes, 'k')), "v");
    });
    ExpectRefusedAtOnce(db_.get(), &b, "--ltc_max_key_bytes", all_good);
  }
  constexpr uint32_t kLargestValueTried = 256u << 20;  // a bound on what this test allocates
  if (l.max_value_bytes < kLargestValueTried) {
    SCOPED_TRACE("a value over --ltc_max_value_bytes");
    leveldb::WriteBatch b = batch_with([&](leveldb::WriteBatch* w) {
      w->Put(KeyIn(3, "fat"), std::string(l.max_value_bytes + 1, 'v'));
    });
    ExpectRefusedAtOnce(db_.get(), &b, "--ltc_max_value_bytes", all_good);
  }
  constexpr uint32_t kMostOpsTried = 1u << 20;  // a bound on the batch this test builds
  if (l.max_batch_ops < kMostOpsTried) {
    SCOPED_TRACE("more operations than --ltc_max_batch_ops in one range");
    leveldb::WriteBatch b = batch_with([&](leveldb::WriteBatch* w) {
      for (uint32_t i = 0; i <= l.max_batch_ops; ++i) w->Delete(KeyIn(3, std::to_string(i)));
    });
    ExpectRefusedAtOnce(db_.get(), &b, "--ltc_max_batch_ops", all_good);
  }
  // The same batch without its bad part is applied whole.
  leveldb::WriteBatch ok = batch_with([](leveldb::WriteBatch*) {});
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &ok).ok());
  for (const std::string& k : all_good) EXPECT_EQ(Get(k), "v") << k;
}

// 32 MiB for one range, as in the issue: refused at once when that is over the LTC's
// --ltc_max_request_mb (it used to fail after 0.2 to 10 s, sometimes as a timeout), and
// applied whole when the LTC takes it.
TEST_P(NovaDbITest, ThirtyTwoMiBBatchRefusedAtOnceWhenOverTheRequestLimit) {
  constexpr uint64_t kBatchBytes = 32ull << 20;
  const ltc::ClientLimits l = LimitsAt(uri_, KeyIn(0, ""));
  ASSERT_GT(l.max_value_bytes, 0u);
  const size_t value_bytes = std::min<size_t>(l.max_value_bytes, 1u << 20);
  leveldb::WriteBatch b;
  b.Put(KeyIn(2, "small"), "v");  // another range's part, on the other LTC
  const std::string value(value_bytes, 'x');
  ltc::WriteRequest range0;  // range 0's part, to size its request as the wire does
  uint64_t bytes = 0;
  for (int i = 0; bytes < kBatchBytes; ++i) {
    range0.entries.push_back({ltc::BatchOp::kPut, KeyIn(0, "big" + std::to_string(i)), value});
    b.Put(range0.entries.back().key, value);
    bytes += value.size();
  }
  const uint64_t request_bytes = wire::kHeaderBytes + ltc::EncodeWriteRequest(range0).size();
  if (request_bytes > l.max_request_bytes) {
    ExpectRefusedAtOnce(db_.get(), &b, "--ltc_max_request_mb", {KeyIn(2, "small")});
    EXPECT_EQ(Get(KeyIn(0, "big0")), "NOT_FOUND");
  } else {
    leveldb::Status s = db_->Write(leveldb::WriteOptions(), &b);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Get(KeyIn(2, "small")), "v");
    EXPECT_EQ(Get(KeyIn(0, "big0")), value);
  }
}

TEST_P(NovaDbITest, OverLimitKeysAndValuesFailAtOnce) {
  const ltc::ClientLimits l = LimitsAt(uri_, KeyIn(1, ""));
  ASSERT_GT(l.max_key_bytes, 0u);
  ASSERT_LT(l.max_value_bytes, 256u << 20) << "a bound on what this test allocates";
  const std::string long_key = KeyIn(1, std::string(l.max_key_bytes, 'k'));
  const std::string fat_value(l.max_value_bytes + 1, 'v');
  const leveldb::Snapshot* snap = db_->GetSnapshot();
  leveldb::ReadOptions at;
  at.snapshot = snap;
  struct Case {
    const char* what;
    std::function<leveldb::Status()> call;
    const char* flag;
  };
  std::string v;
  const Case cases[] = {
      {"Put, long key", [&] { return Put(long_key, "v"); }, "--ltc_max_key_bytes"},
      {"Put, fat value", [&] { return Put(KeyIn(1, "k"), fat_value); }, "--ltc_max_value_bytes"},
      {"Get", [&] { return db_->Get(leveldb::ReadOptions(), long_key, &v); },
       "--ltc_max_key_bytes"},
      {"Get at a snapshot", [&] { return db_->Get(at, long_key, &v); }, "--ltc_max_key_bytes"},
      {"Delete", [&] { return db_->Delete(leveldb::WriteOptions(), long_key); },
       "--ltc_max_key_bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const MonoTime start = MonoNow();
    leveldb::Status s = c.call();
    EXPECT_LT(MonoNow() - start, kAtOnce) << s.ToString();
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.ToString().find(c.flag), std::string::npos) << s.ToString();
    EXPECT_NE(s.ToString().find("would refuse it"), std::string::npos) << s.ToString();
  }
  db_->ReleaseSnapshot(snap);
  EXPECT_EQ(Get(KeyIn(1, "k")), "NOT_FOUND");
}

// With every LTC gone, GetSnapshot cannot be taken: LevelDB's GetSnapshot still returns a
// snapshot (never null), but every read at it fails at once with the reason, and
// TakeSnapshot returns the reason itself.
TEST_P(NovaDbITest, GetSnapshotFailsWhenTheLtcsAreUnreachable) {
  ASSERT_TRUE(Put(KeyIn(0, "k"), "v").ok());
  for (auto& l : ltcs_) l->Kill();
  const leveldb::Snapshot* snap = db_->GetSnapshot();
  ASSERT_NE(snap, nullptr);
  leveldb::ReadOptions at;
  at.snapshot = snap;
  std::string v;
  for (int r = 0; r < 4; ++r) {
    const MonoTime start = MonoNow();
    leveldb::Status s = db_->Get(at, KeyIn(r, "k"), &v);
    EXPECT_LT(MonoNow() - start, kAtOnce) << s.ToString();
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.ToString().find("snapshot that could not be taken"), std::string::npos)
        << s.ToString();
  }
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(at));
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().IsIOError()) << it->status().ToString();
  }
  db_->ReleaseSnapshot(snap);
  const leveldb::Snapshot* taken = snap;
  leveldb::Status s = client::TakeSnapshot(db_.get(), &taken);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.ToString().find("GetSnapshot"), std::string::npos) << s.ToString();
  EXPECT_EQ(taken, nullptr);
}

TEST_P(NovaDbITest, ConcurrentThreadsShareOneDb) {
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeysPerThread; ++i) {
        const std::string k = KeyIn(i % 4, "t" + std::to_string(t) + "-" + std::to_string(i));
        if (!Put(k, k).ok() || Get(k) != k) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  int n = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  EXPECT_EQ(n, kThreads * kKeysPerThread);
}

INSTANTIATE_TEST_SUITE_P(Modes, NovaDbITest, ::testing::Values(Mode::kStatic, Mode::kZooKeeper),
                         ModeName);

}  // namespace
}  // namespace nova
