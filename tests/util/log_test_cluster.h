// LogTestCluster: the real processes of a logging test (docs/durability.md) on loopback: 2
// StoCs, N LogCs and one LTC with two ranges, plus a NovaClient to it. Tests kill -9 and
// restart single daemons through the ExternalDaemon accessors; every daemon keeps its
// port and data directory across restarts, so the client and the LTC's --logc list stay
// valid.
//
//   test::LogTestCluster cluster({.name = "crash_disk", .log_mode = "disk",
//                                 .logc_persist = true});
//   Status s = cluster.Start();
//   ASSERT_TRUE(s.ok()) << s.ToString();
//   cluster.ltc().Kill();
//   ASSERT_TRUE(cluster.ltc().Restart().ok());
//   auto got = cluster.client()->Get("k");
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/nova_client.h"
#include "common/status.h"
#include "tests/util/external_daemon.h"

namespace nova::test {

struct LogTestClusterOptions {
  // Names the scratch directory (test::TestTempDir(name)). Required.
  std::string name;
  // The LTC's --log_mode ("memory", "disk", ...).
  std::string log_mode = "memory";
  // LogCs started, logc-0 .. logc-<logcs - 1>, given to the LTC as --logc.
  int logcs = 2;
  // The LogCs get --logc_persist: their logs are files that survive a restart.
  bool logc_persist = false;
  // Serve the LTC's /metrics on a loopback port picked at Start() (ltc_metrics_port()).
  bool ltc_metrics = false;
  // Appended to the LTC's flags (a flag given twice takes the later value). The defaults:
  // engine nova, 2 ranges, --log_replicas=2, --log_timeout_ms=2000, 1 MiB memtables and
  // SSTables, 4 Dranges per range, 12 memtables per range, 2 recovery threads.
  std::vector<std::string> ltc_flags;
  // Deadline of each call of client(), retries included: long enough for a range to
  // recover after an LTC restart.
  std::chrono::milliseconds client_timeout{20000};
};

// Thread safety: not thread-safe; the test thread drives it (client() itself is
// thread-safe).
class LogTestCluster {
 public:
  explicit LogTestCluster(LogTestClusterOptions options);
  ~LogTestCluster();  // as Shutdown()
  LogTestCluster(const LogTestCluster&) = delete;
  LogTestCluster& operator=(const LogTestCluster&) = delete;

  // Starts the StoCs, then the LogCs, then the LTC, then connects client(). Returns OK
  // once all serve; otherwise the first failure (a daemon's carries its log's tail), and
  // what was started stays running until Shutdown(). REQUIRES: called once.
  Status Start();

  // Drops the clients, shuts the LTC down gracefully (SIGTERM) and kills the others; their
  // data directories and logs stay for post-mortems. Idempotent.
  void Shutdown();

  // A further client of the LTC with its own deadline per call (e.g. a short one for
  // writers, so stopping them does not wait out a long retry). Returns it connected, or
  // Init()'s error. REQUIRES: Start() succeeded.
  Result<std::unique_ptr<client::NovaClient>> NewClient(std::chrono::milliseconds timeout);

  // REQUIRES for the accessors: Start() was called (and i names a daemon started).
  ExternalDaemon& ltc() { return *ltc_; }
  ExternalDaemon& logc(int i) { return *logcs_.at(static_cast<size_t>(i)); }
  int num_logcs() const { return static_cast<int>(logcs_.size()); }
  ExternalDaemon& stoc(int i) { return *stocs_.at(static_cast<size_t>(i)); }
  int num_stocs() const { return static_cast<int>(stocs_.size()); }
  // The client of Start(), with options.client_timeout; owned by the cluster.
  client::NovaClient* client() { return client_.get(); }
  const std::string& dir() const { return dir_; }
  // The LTC's --metrics_port, or 0 without options.ltc_metrics.
  int ltc_metrics_port() const { return metrics_port_; }

  // GETs the LTC's /metrics (Prometheus text). Returns the body; Unavailable if the LTC
  // does not answer (down or starting) or answers other than 200; IllegalState without
  // options.ltc_metrics.
  Result<std::string> LtcMetrics();

 private:
  // Constant after construction.
  const LogTestClusterOptions options_;

  std::string dir_;
  int metrics_port_ = 0;
  std::vector<std::unique_ptr<ExternalDaemon>> stocs_;
  std::vector<std::unique_ptr<ExternalDaemon>> logcs_;
  std::unique_ptr<ExternalDaemon> ltc_;
  std::unique_ptr<client::NovaClient> client_;
};

// The value of the unlabelled series `name` (a counter or gauge) in Prometheus text
// `metrics`, or nullopt when it is absent or unparsable.
std::optional<double> MetricValue(const std::string& metrics, const std::string& name);

}  // namespace nova::test
