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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/nova_client.h"
#include "common/clock.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

namespace nova {
namespace {

using namespace std::chrono_literals;

int KillsFromEnv() {
  const char* v = std::getenv("NOVA_CRASH_KILLS");
  const int n = v != nullptr ? std::atoi(v) : 20;
  return n > 0 ? n : 20;
}

// What one key went through: every version attempted (its expected value, or nullopt for a
// deletion), and the newest acknowledged (or observed after a crash) version.
struct KeyHistory {
  std::map<uint64_t, std::optional<std::string>> versions;
  int64_t floor = -1;  // the state may not be older than this version; -1: none yet
};

std::string ValueFor(const std::string& key, uint64_t version) {
  // Values of 100 to 1,100 bytes, recognizable: "<version>|<key>|" then filler.
  std::string v = std::to_string(version) + "|" + key + "|";
  v.append(100 + (version * 7919 + key.size() * 31) % 1000, static_cast<char>('a' + version % 26));
  return v;
}

// Writer threads, each with its own keys (half in each range: the LTC has two).
class Workload {
 public:
  Workload(uint64_t seed, int threads, int keys_per_thread)
      : seed_(seed), threads_(threads), keys_(keys_per_thread), history_(threads) {}

  static std::string Key(int thread, int i) {
    // A first byte below 0x80 goes to range 0, from 0x80 to range 1.
    return std::string(1, i % 2 == 0 ? 'k' : static_cast<char>(0xe0)) + "t" + std::to_string(thread) +
           "-" + std::to_string(i);
  }

  // Runs the writers until Stop(); `round` varies the random sequence.
  void Start(client::NovaClient* client, int round) {
    stop_ = false;
    for (int t = 0; t < threads_; ++t) {
      workers_.emplace_back([this, client, t, round] { Run(client, t, round); });
    }
  }
  void Stop() {
    stop_ = true;
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  // Reads every key and checks it against its history. Returns the number of keys read.
  int Verify(client::NovaClient* client, const std::string& when) {
    int checked = 0;
    for (int t = 0; t < threads_; ++t) {
      for (auto& [key, h] : history_[t]) {
        auto got = client->Get(key);
        if (!got.ok() && !got.status().IsNotFound()) {
          ADD_FAILURE() << when << ": reading " << key << ": " << got.status().ToString();
          return checked;
        }
        ++checked;
        // Which versions could the state be? One at or after the floor.
        bool matched = false;
        int64_t version = -1;
        if (got.ok()) {
          version = std::atoll(got.value().substr(0, got.value().find('|')).c_str());
          auto it = h.versions.find(static_cast<uint64_t>(version));
          matched = it != h.versions.end() && it->second == got.value() && version >= h.floor;
        } else {
          if (h.floor < 0) matched = true;  // nothing acknowledged: absent is fine
          for (auto it = h.versions.lower_bound(static_cast<uint64_t>(std::max<int64_t>(h.floor, 0)));
               it != h.versions.end() && !matched; ++it) {
            if (!it->second.has_value()) {
              matched = true;
              version = static_cast<int64_t>(it->first);
            }
          }
        }
        if (!matched) {
          ADD_FAILURE() << when << ": key " << key << " reads "
                        << (got.ok() ? "version " + std::to_string(version) : std::string("NotFound"))
                        << " but the last acknowledged version is " << h.floor << " (latest attempted "
                        << (h.versions.empty() ? 0 : h.versions.rbegin()->first) << ")";
          if (++failures_ > 10) return checked;
          continue;
        }
        // What was seen after a crash must survive the next ones.
        h.floor = std::max(h.floor, version);
      }
    }
    return checked;
  }

  uint64_t acknowledged() const { return acked_.load(); }
  uint64_t failed() const { return failed_.load(); }
  // Longest time one write took (retries included), in ms.
  int64_t max_latency_ms() const { return max_latency_ms_.load(); }
  void ResetLatency() { max_latency_ms_ = 0; }

 private:
  void Run(client::NovaClient* client, int t, int round) {
    std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(round) * 131 + static_cast<uint64_t>(t));
    auto& keys = history_[t];
    while (!stop_) {
      const int op = static_cast<int>(rng() % 10);
      std::vector<ltc::BatchEntry> batch;
      std::vector<std::pair<std::string, uint64_t>> touched;
      const int n = op == 9 ? 2 + static_cast<int>(rng() % 3) : 1;
      // A batch stays in one range: keys of the same parity.
      const int parity = static_cast<int>(rng() % 2);
      for (int j = 0; j < n; ++j) {
        const int i = static_cast<int>(rng() % static_cast<uint64_t>(keys_ / 2)) * 2 + parity;
        const std::string key = Key(t, i);
        if (std::any_of(touched.begin(), touched.end(), [&](const auto& p) { return p.first == key; })) {
          continue;
        }
        KeyHistory& h = keys[key];
        const uint64_t version = (h.versions.empty() ? 0 : h.versions.rbegin()->first) + 1;
        ltc::BatchEntry e;
        e.key = key;
        if (op == 8) {
          e.op = ltc::BatchOp::kDelete;
          h.versions[version] = std::nullopt;
        } else {
          e.op = ltc::BatchOp::kPut;
          e.value = ValueFor(key, version);
          h.versions[version] = e.value;
        }
        touched.emplace_back(key, version);
        batch.push_back(std::move(e));
      }
      const MonoTime start = MonoNow();
      Status s;
      if (batch.size() > 1) {
        s = client->Write(batch);
      } else if (batch[0].op == ltc::BatchOp::kDelete) {
        s = client->Delete(batch[0].key);
      } else {
        s = client->Put(batch[0].key, batch[0].value);
      }
      const int64_t ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count();
      int64_t prev = max_latency_ms_.load();
      while (ms > prev && !max_latency_ms_.compare_exchange_weak(prev, ms)) {
      }
      if (s.ok()) {
        for (const auto& [key, version] : touched) {
          keys[key].floor = std::max<int64_t>(keys[key].floor, static_cast<int64_t>(version));
        }
        acked_.fetch_add(1);
      } else {
        failed_.fetch_add(1);
      }
    }
  }

  const uint64_t seed_;
  const int threads_;
  const int keys_;
  std::vector<std::map<std::string, KeyHistory>> history_;  // per thread
  std::vector<std::thread> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_{0}, failed_{0};
  std::atomic<int64_t> max_latency_ms_{0};
  int failures_ = 0;
};

class CrashTest : public ::testing::Test {
 protected:
  // Starts 2 StoCs, `logcs` LogCs (persisting when `persist`) and the LTC.
  void StartCluster(const std::string& name, const std::string& log_mode, int logcs, bool persist,
                    const std::vector<std::string>& ltc_flags = {}) {
    dir_ = test::TestTempDir(name);
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    std::string stoc_list, logc_list;
    for (uint32_t id = 0; id < 2; ++id) {
      stocs_.push_back(std::make_unique<test::ExternalDaemon>(test::StocDaemonOptions(
          dir_, secret.value(), id, {"--stoc_memory_limit_mb=256", "--stoc_file_buffer_mb=32"})));
      Status s = stocs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stoc_list += (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" + stocs_.back()->address();
    }
    for (int id = 0; id < logcs; ++id) {
      test::ExternalDaemonOptions o;
      o.binary = "nova_logc";
      o.id = "logc-" + std::to_string(id);
      o.data_dir = dir_ + "/" + o.id;
      o.data_dir_flag = "logc_dir";
      o.cluster_secret_file = secret.value();
      o.extra_flags = {"--logc_id=" + std::to_string(id), "--logc_memory_limit_mb=512"};
      if (persist) o.extra_flags.push_back("--logc_persist");
      logcs_.push_back(std::make_unique<test::ExternalDaemon>(o));
      Status s = logcs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      logc_list += (logc_list.empty() ? "" : ",") + std::to_string(id) + "@" + logcs_.back()->address();
    }
    std::vector<std::string> flags = {
        "--engine=nova", "--ltc_id=1", "--ranges=2", "--stoc=" + stoc_list,
        "--logc=" + logc_list, "--log_mode=" + log_mode, "--log_replicas=2",
        "--log_timeout_ms=2000", "--ltc_memtable_size_mb=1", "--ltc_sstable_size_mb=1",
        "--ltc_dranges_per_range=4", "--ltc_memtables_per_range=12", "--ltc_recovery_threads=2",
        "--ltc_recovery_wait_ms=200"};
    flags.insert(flags.end(), ltc_flags.begin(), ltc_flags.end());
    ltc_ = std::make_unique<test::ExternalDaemon>(
        test::LtcDaemonOptions(dir_, secret.value(), "ltc-1", flags));
    Status s = ltc_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    client::ClientOptions co;
    co.ltcs = {ltc_->address()};
    co.timeout = 20s;
    client_ = std::make_unique<client::NovaClient>(co);
    s = client_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    client_.reset();
    if (ltc_) ltc_->Shutdown().IgnoreError();
    logcs_.clear();
    stocs_.clear();
  }

  // Kills the LTC `kills` times under load and checks after each restart.
  void RunKills(const char* name, int kills) {
    const uint64_t seed = test::TestSeed(name);
    std::mt19937_64 timing(std::random_device{}());
    Workload w(seed, /*threads=*/4, /*keys_per_thread=*/400);
    uint64_t flushes = 0, compactions = 0;
    for (int k = 0; k < kills; ++k) {
      w.Start(client_.get(), k);
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
      const int checked = w.Verify(client_.get(), "after kill " + std::to_string(k + 1));
      if (HasFailure()) return;
      std::printf("%s: kill %d after %lld ms of load: %d keys verified (%llu writes acknowledged, %llu failed)\n",
                  name, k + 1, static_cast<long long>(load.count()), checked,
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

  std::string dir_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> stocs_, logcs_;
  std::unique_ptr<test::ExternalDaemon> ltc_;
  std::unique_ptr<client::NovaClient> client_;
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
  Workload w(seed, 4, 400);
  for (int round = 0; round < 3; ++round) {
    w.Start(client_.get(), round);
    const MonoTime until = MonoNow() + 700ms;
    while (MonoNow() < until) std::this_thread::sleep_for(20ms);
    ltc_->Kill();
    for (auto& l : logcs_) l->Kill();
    for (auto& st : stocs_) st->Kill();
    for (auto& st : stocs_) {
      Status s = st->Restart();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (auto& l : logcs_) {
      Status s = l->Restart();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    Status s = ltc_->Restart();
    ASSERT_TRUE(s.ok()) << s.ToString();
    w.Stop();
    const int checked = w.Verify(client_.get(), "after killing the cluster, round " + std::to_string(round + 1));
    if (HasFailure()) return;
    std::printf("whole cluster killed (round %d): %d keys verified, %llu writes acknowledged\n",
                round + 1, checked, static_cast<unsigned long long>(w.acknowledged()));
  }
}

// One of two replicas dies under load: writes go on (none fails, none waits much longer
// than the failover timeout), the spare LogC takes the replica's place, and a later LTC
// crash still loses nothing.
TEST_F(CrashTest, LogcKilledUnderLoadLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("crash_logc", "memory", 3, /*persist=*/false));
  const uint64_t seed = test::TestSeed("CrashTest.LogcKilled");
  Workload w(seed, 4, 400);
  w.Start(client_.get(), 0);
  const MonoTime warm = MonoNow() + 700ms;
  while (MonoNow() < warm) std::this_thread::sleep_for(20ms);
  w.ResetLatency();
  const uint64_t failed_before = w.failed();
  logcs_[0]->Kill();
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
  w.Verify(client_.get(), "after the LogC and then the LTC died");
}

}  // namespace
}  // namespace nova
