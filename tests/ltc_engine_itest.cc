// The range engine's randomized model test (ltc/engine/engine_model_test_util.h) against real
// nova_stoc daemons: a RangeEngine over a stoc::StocTableStore on three StoCs, with tiny
// memtables so flushes, compactions and Drange reorganizations run all the time. Every
// read is checked against a std::map. A few times per run the range is reopened cleanly:
// the engine and the store are destroyed and new ones find the MANIFEST again by listing
// the StoCs. In one option set every fragment has two replicas and a StoC is killed -9 in
// the middle of the run: reads (also at older snapshots) must keep working from the other
// replicas; then the StoC is restarted and the workload goes on.
//
// Bounded: kOps operations per option set, and the operations stop early (with a note)
// once kOpsBudget has passed. Replay a run with NOVA_TEST_SEED=<the printed seed>.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/transport/transport.h"
#include "ltc/engine/manifest.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/engine/engine_model_test_util.h"
#include "ltc/engine/range_engine.h"
#include "stoc/client/file_names.h"
#include "stoc/client/stoc_client.h"
#include "stoc/client/stoc_table_store.h"
#include "tests/util/external_daemon.h"
#include "tests/util/stoc_connection.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;
using engine_model_test::Case;
using engine_model_test::ModelDriver;

constexpr uint32_t kNumStocs = 3;
constexpr uint32_t kRange = 7;
// Operations per option set: hundreds of flushes and compactions, several reorganizations
// (about 10 s on loopback).
constexpr int kOps = 30000;
// Wall-clock bound on the operations of one option set (a slow machine stops early). With
// about ten option sets it keeps the binary within its ctest TIMEOUT (900 s).
constexpr auto kOpsBudget = 60s;
// Clean reopens forced at evenly spaced operations (the workload adds random ones).
constexpr int kForcedReopens = 3;
// Reads done while a StoC is dead.
constexpr int kReadsWhileDown = 1500;
// A small block cache, so that most reads go to the StoCs rather than to the cache.
constexpr uint64_t kBlockCacheBytes = 64 << 10;
// How long the client waits for one StoC operation.
constexpr auto kStocTimeout = 10s;

struct ClusterCase {
  Case c;
  int fragment_replicas;  // R
  int manifest_replicas;
  bool kill_a_stoc;  // kill -9 one StoC in the middle of the run
  // Where compactions run: at the LTC, or offloaded to the StoCs' compaction services.
  OffloadPolicy offload = OffloadPolicy::kNone;
  // How the LTC (and, for offloaded jobs, the StoC) places fragments (--ltc_placement).
  lsm::PlacementPolicy placement = lsm::PlacementPolicy::kPowerOfD;
};

// Names the case in gtest's messages.
void PrintTo(const ClusterCase& c, std::ostream* os) { *os << c.c.name; }

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class LtcEngineClusterTest : public ::testing::TestWithParam<ClusterCase> {
 protected:
  void SetUp() override {
    const ClusterCase& cc = GetParam();
    seed_ = test::TestSeed(cc.c.name);
    dir_ = test::TestTempDir(std::string("ltc_engine_itest-") + cc.c.name);
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    for (uint32_t id = 1; id <= kNumStocs; ++id) {
      auto d = std::make_unique<test::ExternalDaemon>(test::StocDaemonOptions(
          dir_, secret.value(), id, {"--stoc_memory_limit_mb=256", "--stoc_file_buffer_mb=64"}));
      Status s = d->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stocs_[id] = std::move(d);
    }
    test::StocConnectionOptions co;
    co.node_name = "ltc-itest";
    co.cluster_secret = ReadWholeFile(secret.value());
    co.stoc_timeout = kStocTimeout;
    co.reconnect_initial_backoff_ms = 20;
    co.reconnect_max_backoff_ms = 200;
    std::map<uint32_t, std::string> addresses;
    for (auto& [id, d] : stocs_) addresses[id] = d->address();
    Status cs = conn_.Init(co, addresses);
    ASSERT_TRUE(cs.ok()) << cs.ToString();
  }

  void TearDown() override {
    if (engine_ && driver_) driver_->ReleaseSnapshots();
    engine_.reset();
    store_.reset();
    conn_.Shutdown();
    stocs_.clear();  // kills the daemons
  }

  EngineOptions Options() const {
    EngineOptions o = engine_model_test::TinyOptions(GetParam().c);
    o.range_id = kRange;
    o.block_cache_bytes = kBlockCacheBytes;
    o.compaction_offloader = offloader_.get();
    return o;
  }

  // A new store and engine over what the StoCs hold; the driver goes on with the engine.
  void OpenRange() {
    stoc::StocTableStoreOptions so;
    so.range_id = kRange;
    for (const auto& [id, d] : stocs_) so.stocs.push_back(id);
    so.fragment_replicas = GetParam().fragment_replicas;
    so.manifest_replicas = GetParam().manifest_replicas;
    so.seed = seed_ + ++opens_;  // placement replays with the seed too
    so.placement = GetParam().placement;
    so.validate_manifest = ValidateManifest;
    store_ = std::make_unique<stoc::StocTableStore>(conn_.client(), so);
    Status s = store_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (GetParam().offload != OffloadPolicy::kNone && offloader_ == nullptr) {
      StocCompactionOffloaderOptions oo;
      oo.policy = GetParam().offload;
      for (const auto& [id, d] : stocs_) oo.stocs[id] = d->address();
      oo.fragment_replicas = static_cast<uint32_t>(GetParam().fragment_replicas);
      oo.placement = GetParam().placement;
      oo.timeout = 30s;
      offloader_ = std::make_unique<StocCompactionOffloader>(conn_.client(), oo);
      s = offloader_->Init();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    engine_ = std::make_unique<RangeEngine>(Options(), store_.get());
    s = engine_->Open();
    ASSERT_TRUE(s.ok()) << s.ToString();
    driver_->Attach(engine_.get());
    stoc_failed_since_open_ = false;
  }

  // Flushes everything and destroys the engine and the store (a clean shutdown).
  void CloseRange() {
    driver_->ReleaseSnapshots();
    Status s = engine_->FlushAll();
    ASSERT_TRUE(s.ok()) << s.ToString();
    engine_model_test::Accumulate(engine_->GetStats(), &total_);
    AccumulateStore();
    engine_.reset();
    store_.reset();
  }

  // A clean restart: the new store must find the MANIFEST again by listing the StoCs (the
  // same one, unless a StoC failed since the last open: then its replicas may differ and
  // the store rewrites it), and the new engine must hold exactly the model.
  void Reopen(const std::string& when) {
    const uint64_t manifest = store_->manifest_number();
    const bool faults = stoc_failed_since_open_;
    ASSERT_NO_FATAL_FAILURE(CloseRange());
    ASSERT_NO_FATAL_FAILURE(OpenRange());
    if (!faults) {
      EXPECT_EQ(store_->manifest_number(), manifest) << when << ": another MANIFEST was found";
    }
    ++reopens_;
    driver_->CheckLatest(when);
  }

  void AccumulateStore() {
    const stoc::StocTableStoreStats s = store_->GetStats();
    store_total_.tables_written += s.tables_written;
    store_total_.tables_deleted += s.tables_deleted;
    store_total_.read_failovers += s.read_failovers;
    store_total_.manifest_appends += s.manifest_appends;
    store_total_.manifest_rolls += s.manifest_rolls;
    store_total_.manifest_repairs += s.manifest_repairs;
  }

  // Table numbers of the range that have at least one fragment file on a StoC.
  std::set<uint64_t> TablesOnStocs() {
    std::set<uint64_t> tables;
    for (const auto& [id, d] : stocs_) {
      auto list = conn_.client()->List(id);
      EXPECT_TRUE(list.ok()) << list.status().ToString();
      if (!list.ok()) continue;
      for (const stoc::FileState& f : list.value()) {
        const stoc::ParsedFileName p = stoc::ParseStocFileName(f.name);
        if (p.type == stoc::StocFileType::kTableFragment && p.range_id == kRange) {
          tables.insert(p.number);
        }
      }
    }
    return tables;
  }

  // Runs operations [*i, end) while time is left; returns false once the budget is spent.
  bool RunOps(int* i, int end, MonoTime deadline) {
    for (; *i < end; ++*i) {
      if (MonoNow() > deadline) return false;
      ModelDriver::Action action;
      driver_->RandomOp(*i, &action);
      if (::testing::Test::HasFatalFailure()) return false;
      if (action == ModelDriver::Action::kReopen) {
        Reopen("after the workload's reopen at op " + std::to_string(*i));
        if (::testing::Test::HasFatalFailure()) return false;
      }
    }
    return true;
  }

  uint64_t seed_ = 0;
  std::string dir_;
  std::map<uint32_t, std::unique_ptr<test::ExternalDaemon>> stocs_;
  test::StocConnection conn_;
  // Declared after the client they use: destroyed first.
  std::unique_ptr<stoc::StocTableStore> store_;
  std::unique_ptr<StocCompactionOffloader> offloader_;  // outlives the engine
  std::unique_ptr<RangeEngine> engine_;
  std::unique_ptr<ModelDriver> driver_;
  int opens_ = 0, reopens_ = 0;
  bool stoc_failed_since_open_ = false;
  EngineStats total_;
  stoc::StocTableStoreStats store_total_;
};

// The same cluster, for tests of one StoC's restart.
class LtcEngineStocRestartTest : public LtcEngineClusterTest {};

TEST_P(LtcEngineClusterTest, RandomOperationsMatchTheModel) {
  const ClusterCase& cc = GetParam();
  driver_ = std::make_unique<ModelDriver>(seed_, cc.c.zipfian);
  ASSERT_NO_FATAL_FAILURE(OpenRange());
  const MonoTime start = MonoNow();
  const MonoTime deadline = start + kOpsBudget;
  std::mt19937_64 rng(seed_);
  bool in_time = true;
  int i = 0;
  constexpr int kLeg = kOps / (kForcedReopens + 1);
  for (int leg = 0; leg <= kForcedReopens && in_time; ++leg) {
    const int end = leg == kForcedReopens ? kOps : (leg + 1) * kLeg;
    if (cc.kill_a_stoc && leg == kForcedReopens / 2) {
      // Kill -9 a StoC in the middle of this leg. Memtables are flushed first: a flush that
      // fails stops the engine's writes for good, and without logs its writes would be lost
      // (DESIGN.md section 5). Compactions keep running into the kill.
      in_time = RunOps(&i, i + kLeg / 2, deadline);
      if (HasFatalFailure() || !in_time) break;
      ASSERT_TRUE(engine_->FlushAll().ok());
      const uint32_t victim = 1 + static_cast<uint32_t>(rng() % kNumStocs);
      const uint64_t failovers_before = store_->GetStats().read_failovers;
      std::fprintf(stderr, "%s: killing stoc-%u at op %d\n", cc.c.name, victim, i);
      stocs_[victim]->Kill();
      stoc_failed_since_open_ = true;
      for (int r = 0; r < kReadsWhileDown; ++r) {
        driver_->RandomRead(r);
        if (HasFatalFailure()) return;
      }
      driver_->CheckLatest("with stoc-" + std::to_string(victim) + " dead");
      if (HasFatalFailure()) return;
      // The reads really went to the StoCs and moved over to the live replicas.
      EXPECT_GT(store_->GetStats().read_failovers, failovers_before);
      Status s = stocs_[victim]->Restart();
      ASSERT_TRUE(s.ok()) << s.ToString();
      // The client's transport reconnects to the same address by itself.
      ASSERT_TRUE(test::WaitFor([&] { return conn_.client()->Stats(victim).ok(); }, 30s))
          << "stoc-" << victim << " did not come back";
      driver_->CheckLatest("after restarting stoc-" + std::to_string(victim));
      if (HasFatalFailure()) return;
      // Writes go on at once, though the store's MANIFEST append handles at the restarted StoC
      // are stale (see WritesGoOnAfterAStocRestart).
    }
    in_time = RunOps(&i, end, deadline);
    if (HasFatalFailure()) return;
    if (leg < kForcedReopens && in_time) {
      Reopen("after the forced reopen at op " + std::to_string(i));
      if (HasFatalFailure()) return;
    }
  }
  const double seconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count() / 1e3;
  if (!in_time) {
    std::fprintf(stderr, "%s: stopped after %d of %d operations (%.0f s budget spent)\n", cc.c.name,
                 i, kOps, seconds);
  }
  driver_->CheckAndReleaseSnapshots("final snapshot");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(engine_->WaitForCompactions().ok());
  driver_->CheckLatest("after compactions");
  if (HasFatalFailure()) return;
  Reopen("after the final reopen");
  if (HasFatalFailure()) return;

  // Every table of the range on the StoCs is one the engine uses: none leaked. (With a
  // StoC killed, deletions it missed are left behind: DeleteTable is best effort.)
  ASSERT_TRUE(engine_->WaitForCompactions().ok());
  const EngineStats now = engine_->GetStats();
  uint64_t live = 0;
  for (int l = 0; l < lsm::kNumLevels; ++l) live += now.level_tables[l];
  const std::set<uint64_t> on_stocs = TablesOnStocs();
  if (!cc.kill_a_stoc) {
    EXPECT_EQ(on_stocs.size(), live) << "tables on the StoCs that the engine does not use";
  }
  engine_model_test::Accumulate(now, &total_);
  AccumulateStore();
  engine_model_test::PrintStats(cc.c.name, total_);
  std::fprintf(stderr,
               "%s: %d ops in %.1f s, %d reopens; store: %llu tables written, %llu deleted, "
               "%llu read failovers, %llu MANIFEST appends, %llu rolls, %llu repairs; "
               "%zu tables on StoCs, %llu live\n",
               cc.c.name, i, seconds, reopens_, (unsigned long long)store_total_.tables_written,
               (unsigned long long)store_total_.tables_deleted,
               (unsigned long long)store_total_.read_failovers,
               (unsigned long long)store_total_.manifest_appends,
               (unsigned long long)store_total_.manifest_rolls,
               (unsigned long long)store_total_.manifest_repairs, on_stocs.size(),
               (unsigned long long)live);
  if (cc.offload != OffloadPolicy::kNone) {
    std::fprintf(stderr, "%s: %llu compactions offloaded (%s), %llu fell back to the LTC\n",
                 cc.c.name, (unsigned long long)total_.compactions_offloaded,
                 OffloadPolicyName(cc.offload),
                 (unsigned long long)total_.compaction_offload_fallbacks);
    EXPECT_GT(total_.compactions_offloaded, 0u);
    // Without a StoC failure no job has a reason to fail at a StoC.
    if (!cc.kill_a_stoc) {
      EXPECT_EQ(total_.compaction_offload_fallbacks, 0u);
    }
  } else {
    EXPECT_EQ(total_.compactions_offloaded, 0u);
  }
  EXPECT_GE(reopens_, 2);
  EXPECT_GT(total_.flushes, 10u);
  EXPECT_GT(total_.compactions, 0u);
  if (cc.c.dranges > 1) {
    EXPECT_EQ(total_.dranges, cc.c.dranges);
    EXPECT_GT(total_.major_reorganizations + total_.minor_reorganizations, 0u);
  }
}

// The range keeps taking writes after a StoC holding a MANIFEST replica is killed -9 and
// restarted: the MANIFEST files the store opened for appending there lost their append
// slots with the process, so the first append after the restart fails; the range must
// not stop (the store repairs into a new MANIFEST on the next attempt).
TEST_P(LtcEngineStocRestartTest, WritesGoOnAfterAStocRestart) {
  driver_ = std::make_unique<ModelDriver>(seed_, GetParam().c.zipfian);
  ASSERT_NO_FATAL_FAILURE(OpenRange());
  constexpr int kOpsBefore = 2000;
  int i = 0;
  ASSERT_TRUE(RunOps(&i, kOpsBefore, MonoNow() + kOpsBudget));
  // Quiet: nothing to flush or compact, so the next MANIFEST append comes from a flush.
  ASSERT_TRUE(engine_->FlushAll().ok());
  ASSERT_TRUE(engine_->WaitForCompactions().ok());
  uint32_t victim = 0;
  for (const auto& [id, d] : stocs_) {
    auto list = conn_.client()->List(id);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    for (const stoc::FileState& f : list.value()) {
      const stoc::ParsedFileName p = stoc::ParseStocFileName(f.name);
      if (p.type == stoc::StocFileType::kManifest && p.range_id == kRange) victim = id;
    }
  }
  ASSERT_NE(victim, 0u) << "no StoC holds the MANIFEST";
  stocs_[victim]->Kill();
  stoc_failed_since_open_ = true;
  Status s = stocs_[victim]->Restart();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(test::WaitFor([&] { return conn_.client()->Stats(victim).ok(); }, 30s));
  // Enough writes for several flushes; each must succeed.
  // (RunOps may reopen the range, so compare outcomes, not per-instance counters.)
  ASSERT_TRUE(RunOps(&i, kOpsBefore + kOps / 10, MonoNow() + kOpsBudget));
  ASSERT_TRUE(engine_->FlushAll().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen("after the writes"));
}

INSTANTIATE_TEST_SUITE_P(
    OptionSets, LtcEngineClusterTest,
    ::testing::Values(
        ClusterCase{{"theta8_rho3_zipfian", 8, 3, true}, 1, 1, false},
        ClusterCase{{"theta1_rho1_uniform", 1, 1, false}, 1, 1, false},
        ClusterCase{{"theta64_rho3_zipfian", 64, 3, true}, 1, 1, false},
        ClusterCase{{"theta8_rho3_uniform_no_range_index", 8, 3, false, false}, 1, 1, false},
        // Every Get searches its partition's memtables and Level-0 tables.
        ClusterCase{{"theta8_rho1_zipfian_no_lookup_index", 8, 1, true, true, false}, 1, 1, false},
        ClusterCase{{"theta8_rho3_zipfian_R2_kill", 8, 3, true}, 2, 2, true},
        // Compactions offloaded to the StoCs (docs/ltc.md "Compaction offload").
        ClusterCase{{"theta8_rho3_zipfian_offload_rr_random", 8, 3, true},
                    1,
                    1,
                    false,
                    OffloadPolicy::kRoundRobin,
                    lsm::PlacementPolicy::kRandom},
        ClusterCase{{"theta1_rho1_uniform_offload_ll", 1, 1, false},
                    1,
                    1,
                    false,
                    OffloadPolicy::kLeastLoaded},
        // A StoC dies while jobs run there: they fall back to the LTC.
        ClusterCase{{"theta8_rho3_zipfian_R2_kill_offload_ll", 8, 3, true},
                    2,
                    2,
                    true,
                    OffloadPolicy::kLeastLoaded}),
    [](const auto& info) { return std::string(info.param.c.name); });

INSTANTIATE_TEST_SUITE_P(Replicated, LtcEngineStocRestartTest,
                         ::testing::Values(ClusterCase{
                             {"theta8_rho3_zipfian_R2_restart", 8, 3, true}, 2, 2, true}),
                         [](const auto& info) { return std::string(info.param.c.name); });

}  // namespace
}  // namespace nova::ltc
