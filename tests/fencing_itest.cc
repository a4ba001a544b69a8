// Owner fencing with real processes (issue 15; docs/coordinator.md, "Owner fencing"): two
// LTCs both believe they own range 0. 2 StoCs and 2 LogCs; LTC A opens the range at owner
// epoch 1 (--ltc_owner_epoch, static mode) and takes writes; A is paused with SIGSTOP (a
// stall, or a partition: its configuration is stale); LTC B opens the same range at owner
// epoch 2 over the same StoCs and LogCs, recovers A's acknowledged writes, and takes writes
// of its own; A is resumed and keeps being sent writes.
//
// Checked: every write A makes after it resumes fails (A answers WrongRange once a StoC or
// LogC refused it), none of them is ever visible (through B, and after B is killed with
// SIGKILL and restarted, i.e. through the MANIFEST and the logs); every write acknowledged
// by A before the pause and by B is there at its latest value.
//
// Runs in log modes memory (LogC regions written one-sided) and disk (LogCs persist).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/nova_client.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

namespace nova {
namespace {

using namespace std::chrono_literals;

struct Mode {
  const char* name;
  const char* log_mode;
  bool persist;
};

std::string ModeName(const ::testing::TestParamInfo<Mode>& info) { return info.param.name; }

class FencingITest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    dir_ = test::TestTempDir(std::string("fencing_itest_") + GetParam().name);
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = secret.value();
    for (uint32_t id = 1; id <= 2; ++id) {
      stocs_.push_back(std::make_unique<test::ExternalDaemon>(test::StocDaemonOptions(
          dir_, secret_, id, {"--stoc_memory_limit_mb=128", "--stoc_file_buffer_mb=16"})));
      Status s = stocs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stoc_list_ += (stoc_list_.empty() ? "" : ",") + std::to_string(id) + "@" +
                    stocs_.back()->address();
    }
    for (int id = 1; id <= 2; ++id) {
      test::ExternalDaemonOptions o =
          test::LogcDaemonOptions(dir_, secret_, id, {"--logc_memory_limit_mb=128"});
      if (GetParam().persist) o.extra_flags.push_back("--logc_persist");
      logcs_.push_back(std::make_unique<test::ExternalDaemon>(o));
      Status s = logcs_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      logc_list_ += (logc_list_.empty() ? "" : ",") + std::to_string(id) + "@" +
                    logcs_.back()->address();
    }
  }

  void TearDown() override {
    clients_.clear();
    for (auto& l : ltcs_) {
      if (l != nullptr && l->IsRunning()) {
        (void)l->Resume();
        l->Kill();
      }
    }
    ltcs_.clear();
    logcs_.clear();
    stocs_.clear();
  }

  // LTC `name` with id `id` serving range 0 (the whole key space) at `owner_epoch`.
  test::ExternalDaemon* StartLtc(const std::string& name, int id, uint64_t owner_epoch) {
    auto o = test::LtcDaemonOptions(
        dir_, secret_, name,
        {"--engine=nova", "--ltc_id=" + std::to_string(id), "--ranges=1", "--stoc=" + stoc_list_,
         "--logc=" + logc_list_, std::string("--log_mode=") + GetParam().log_mode,
         "--log_replicas=2", "--log_timeout_ms=2000", "--ltc_memtable_size_mb=1",
         "--ltc_sstable_size_mb=1", "--ltc_owner_epoch=" + std::to_string(owner_epoch)});
    ltcs_.push_back(std::make_unique<test::ExternalDaemon>(o));
    Status s = ltcs_.back()->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? ltcs_.back().get() : nullptr;
  }

  client::NovaClient* ClientOf(test::ExternalDaemon* ltc, std::chrono::milliseconds timeout) {
    client::ClientOptions o;
    o.ltcs = {ltc->address()};
    o.timeout = timeout;
    clients_.push_back(std::make_unique<client::NovaClient>(o));
    Status s = clients_.back()->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return clients_.back().get();
  }

  // Every key of `want` reads its value through `c` ("" = must be NotFound).
  void ExpectContents(client::NovaClient* c, const std::map<std::string, std::string>& want,
                      const std::string& when) {
    int wrong = 0;
    for (const auto& [k, v] : want) {
      Result<std::string> got = c->Get(k);
      const std::string seen = got.ok()                      ? got.value()
                               : got.status().IsNotFound() ? ""
                                                           : "<" + got.status().ToString() + ">";
      if (seen != v && ++wrong <= 5) {
        ADD_FAILURE() << when << ": key " << k << " holds '" << seen << "', want '" << v << "'";
      }
    }
    EXPECT_EQ(wrong, 0) << when << ": " << wrong << " keys differ";
  }

  std::string dir_;
  std::string secret_;
  std::string stoc_list_;
  std::string logc_list_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> stocs_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> logcs_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> ltcs_;
  std::vector<std::unique_ptr<client::NovaClient>> clients_;
};

TEST_P(FencingITest, OnlyTheNewerOwnersWritesSurviveAndTheStaleOnesAreRefused) {
  test::ExternalDaemon* a = StartLtc("ltc-a", 1, /*owner_epoch=*/1);
  ASSERT_NE(a, nullptr);
  client::NovaClient* ca = ClientOf(a, 5s);
  // For the writes after A resumes: each refused one is retried (WrongRange) until this
  // deadline, so keep it short.
  client::NovaClient* ca_short = ClientOf(a, 500ms);
  std::map<std::string, std::string> want;  // key -> latest acknowledged value ("" deleted)
  // Enough to fill and flush a few 1 MiB memtables: A has tables and logs.
  const std::string filler(2000, 'f');
  for (int i = 0; i < 1500; ++i) {
    const std::string k = "k" + std::to_string(i);
    const std::string v = "a1-" + std::to_string(i) + filler;
    ASSERT_TRUE(ca->Put(k, v).ok()) << k;
    want[k] = v;
  }

  ASSERT_TRUE(a->Pause().ok());
  test::ExternalDaemon* b = StartLtc("ltc-b", 2, /*owner_epoch=*/2);
  ASSERT_NE(b, nullptr);
  client::NovaClient* cb = ClientOf(b, 20s);
  ExpectContents(cb, want, "B after it took the range over");
  for (int i = 0; i < 1500; i += 3) {
    const std::string k = "k" + std::to_string(i);
    const std::string v = "b2-" + std::to_string(i);
    ASSERT_TRUE(cb->Put(k, v).ok()) << k;
    want[k] = v;
  }
  for (int i = 0; i < 200; ++i) {
    const std::string k = "n" + std::to_string(i);
    ASSERT_TRUE(cb->Put(k, "b2").ok()) << k;
    want[k] = "b2";
  }

  // A wakes up believing it still owns the range, and is sent writes of every kind.
  ASSERT_TRUE(a->Resume().ok());
  constexpr int kStale = 40;
  int refused = 0;
  for (int i = 0; i < kStale; ++i) {
    const std::string k = (i % 2 == 0 ? "k" : "s") + std::to_string(i);
    Status s = i % 5 == 4 ? ca_short->Delete(k) : ca_short->Put(k, "stale-" + std::to_string(i));
    if (s.ok()) {
      ADD_FAILURE() << "the stale owner acknowledged a write to " << k;
      continue;
    }
    // Refused because the range moved (WrongRange, after which the static client knows no
    // LTC for it), not because A hung.
    const bool moved = s.ToString().find("WrongRange") != std::string::npos ||
                       s.ToString().find("no LTC is known to serve") != std::string::npos;
    EXPECT_TRUE(moved) << k << ": " << s.ToString();
    if (refused++ == 0) std::printf("the stale owner's first refusal: %s\n", s.ToString().c_str());
  }
  EXPECT_EQ(refused, kStale);
  // And it no longer answers reads for the range.
  Result<std::string> read = ca_short->Get("k1");
  EXPECT_FALSE(read.ok()) << "the fenced LTC still serves reads";
  std::printf("stale owner: %d writes refused; its read: %s\n", refused,
              read.status().ToString().c_str());

  ExpectContents(cb, want, "B after A's stale writes");
  for (int i = 0; i < kStale; i += 2) {
    // (The "s" keys were only ever written by the stale owner.)
    EXPECT_TRUE(cb->Get("s" + std::to_string(i + 1)).status().IsNotFound());
  }

  // Through the MANIFEST and the logs: B killed and restarted at the same owner epoch.
  b->Kill();
  ASSERT_TRUE(b->Start().ok());
  ExpectContents(cb, want, "B after a kill -9 and restart");
  for (int i = 1; i < kStale; i += 2) {
    EXPECT_TRUE(cb->Get("s" + std::to_string(i)).status().IsNotFound()) << "s" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(LogModes, FencingITest,
                         ::testing::Values(Mode{"Memory", "memory", false},
                                           Mode{"Disk", "disk", true}),
                         ModeName);

}  // namespace
}  // namespace nova
