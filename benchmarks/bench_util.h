// bench_util: what the benchmarks in benchmarks/ share (library nova_bench_util).
//
//  - Timing: deadlines and elapsed seconds for measuring loops (DeadlineAfter,
//    SecondsSince), percentiles of latency samples, block-size names ("64KiB").
//  - Where StoC data goes: appends are durable (fdatasync), so a benchmark's StoC data
//    directories belong on a real disk, not a tmpfs; BenchStocCluster::Start() applies the
//    --stoc_dir_base rule (its help text is kStocDirBaseHelp) and DescribeFilesystem()
//    names the filesystem for the report.
//  - BenchStocCluster: nova_stoc processes started from the build's bin directory, each
//    with its own data directory under one scratch directory, stopped and removed at the
//    end; and BenchStocConnection, a client process's transport, RPC endpoint and
//    StocClient connected to every StoC of such a cluster.
//  - Report: the figures (a JSON object whose names carry units) and notes of one run,
//    with the "-"-for-missing cells the tables print; CaseFailures, the "report the
//    failure, stop unless --keep_going" rule of the case drivers.
//
// Benchmarks are programs: they read their own flags and pass the values in; nothing
// here reads a flag.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_client.h"
#include "tests/util/external_daemon.h"
#include "tests/util/stoc_connection.h"

namespace nova::bench {

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kMiB = 1ull << 20;

// ---- Timing and formatting -------------------------------------------------------------

// The time `seconds` from now.
MonoTime DeadlineAfter(double seconds);
// Seconds from `start` to now.
double SecondsSince(MonoTime start);
// The p-th percentile (0 <= p <= 100, nearest rank below) of `samples`; 0 if empty.
double Percentile(std::vector<double> samples, double p);
// "4KiB", "16MiB": whole MiB from 1 MiB on, else whole KiB.
std::string SizeName(uint64_t bytes);

// ---- Where the StoC data directories go -------------------------------------------------

// Help text of the benchmarks' --stoc_dir_base flag, whose default is kDefaultStocDirBase.
extern const char kStocDirBaseHelp[];
constexpr char kDefaultStocDirBase[] = "/tmp";

// "<fstype> (<device> mounted on <mount point>)" for the mount holding `path`, from
// /proc/self/mounts; "unknown filesystem" if none matches.
std::string DescribeFilesystem(const std::string& path);

// ---- The StoC processes and a client of them --------------------------------------------

struct BenchStocClusterOptions {
  // Prefixes messages on stderr ("stoc_bench") and names the scratch directory
  // <base>/nova-<program>-XXXXXX ('_' become '-').
  std::string program;
  // The figures a tmpfs data directory would flatter, for the warning ("append figures").
  std::string flattered_figures;
  // StoCs started, ids 1..stocs.
  uint32_t stocs = 3;
  // Each StoC's --stoc_max_block_mb, bytes (a whole number of MiB).
  uint64_t max_block_bytes = 16 * kMiB;
  // Lanes per peer: each StoC's --xchg_threads, and BenchStocConnection's (they must agree).
  int xchg_threads = 2;
  // Each StoC's --stoc_file_buffer_mb; unset: the daemon's default.
  std::optional<uint64_t> file_buffer_mb;
  // --stoc_dir_base's value, and whether it was left at its default (see Start()).
  std::string dir_base_flag = kDefaultStocDirBase;
  bool dir_base_is_default = true;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(20);
  // How long Stop() waits after SIGTERM before SIGKILL, per StoC.
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(10);
};

// options.stocs nova_stoc processes (over loopback, logging warnings and errors to
// <data_dir>/<id>.log) under one scratch directory. The destructor stops them and removes
// the directory (Stop()), on every path out of a benchmark; a benchmark that must end
// without unwinding calls Stop() itself.
// Not thread-safe.
class BenchStocCluster {
 public:
  explicit BenchStocCluster(BenchStocClusterOptions options);
  ~BenchStocCluster();  // Stop()
  BenchStocCluster(const BenchStocCluster&) = delete;
  BenchStocCluster& operator=(const BenchStocCluster&) = delete;

  // Makes the scratch directory, writes the cluster secret (mode 0600) and starts StoCs
  // 1..options.stocs, waiting for each to listen. The scratch directory goes under
  // --stoc_dir_base (options.dir_base_flag): a value given explicitly is used as is (with a
  // warning on stderr if it is a tmpfs); the default /tmp is used unless it is a tmpfs,
  // then /var/tmp unless that is one too, then the build's bin directory. Returns OK once
  // all StoCs serve; otherwise the IOError of the directory or secret, or the failing
  // StoC's Start() status (what already runs is stopped by Stop()). REQUIRES: called once.
  Status Start();

  // Stops the StoCs (SIGTERM, then SIGKILL after options.shutdown_timeout), reporting a
  // forced kill on stderr, and removes the scratch directory. Idempotent.
  void Stop();

  const BenchStocClusterOptions& options() const { return options_; }
  // The scratch directory; empty before Start() and after Stop().
  const std::string& root() const { return root_; }
  const std::string& secret() const { return secret_; }
  // StoC `id` (1-based). REQUIRES: Start() succeeded, 1 <= id <= options().stocs.
  const std::string& address(uint32_t id) const { return daemons_[id - 1]->address(); }

 private:
  const BenchStocClusterOptions options_;
  std::string root_;
  std::string secret_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> daemons_;
};

// A client process's side of a BenchStocCluster: transport (tcp), RPC endpoint and a
// StocClient that knows every StoC. The destructor shuts the transport down: no
// completion runs after it, so memory registered with transport() must outlive this.
// Thread-safe after Init() (the StocClient is).
class BenchStocConnection {
 public:
  BenchStocConnection() = default;
  ~BenchStocConnection();
  BenchStocConnection(const BenchStocConnection&) = delete;
  BenchStocConnection& operator=(const BenchStocConnection&) = delete;

  // Starts the transport as node <program> ('_' become '-', e.g. "stoc-bench") with the
  // cluster's secret and xchg threads and adds StoCs 1..cluster.options().stocs. Returns
  // OK, or the first failure. REQUIRES: `cluster` has started; called once.
  Status Init(const BenchStocCluster& cluster);

  // REQUIRES: Init() succeeded (for all three).
  stoc::StocClient* client() { return conn_.client(); }
  transport::Transport* transport() { return conn_.transport(); }
  // The StoC ids, 1..stocs.
  const std::vector<uint32_t>& stocs() const { return stocs_; }

 private:
  test::StocConnection conn_;
  std::vector<uint32_t> stocs_;
};

// The opening of a StoC benchmark: cluster->Start(), then conn->Init(*cluster). Returns
// true if both succeeded; otherwise prints "<program>: starting the StoCs: <status>" or
// "<program>: client: <status>" on stderr and returns false (the caller exits with 1).
bool StartAndConnect(BenchStocCluster* cluster, BenchStocConnection* conn);

// ---- The report --------------------------------------------------------------------------

// The figures measured so far (out(): names carry units) and notes for the reader.
// Not thread-safe: the main thread fills and prints it.
class Report {
 public:
  nlohmann::ordered_json& out() { return out_; }
  const nlohmann::ordered_json& out() const { return out_; }
  void AddNote(std::string note) { notes_.push_back(std::move(note)); }
  const std::vector<std::string>& notes() const { return notes_; }

  // Adds the figures that say where the StoC data went: data_dir (the cluster's scratch
  // directory) and data_dir_fs (DescribeFilesystem() of it).
  void AddDataDir(const std::string& dir);
  // Prints "data dirs under <dir>: <filesystem>". REQUIRES: AddDataDir() was called.
  void PrintDataDirLine() const;

  // The number out()[key] printed with the printf format `fmt` (one double), or "-" when
  // the figure is missing (its case failed or did not run).
  std::string Cell(const std::string& key, const char* fmt) const;

  // Prints out() as one JSON line, with the notes under "notes" if `with_notes`.
  void PrintJson(bool with_notes) const;
  // Prints each note as an indented "  (<note>)" line.
  void PrintNotes() const;

 private:
  nlohmann::ordered_json out_;
  std::vector<std::string> notes_;
};

// Counts failed cases for a case driver, which checks each case's status with Ok() and
// asks stop() before starting the next:
//
//   for (...) {
//     if (failures.stop()) break;
//     auto r = MeasureSomething();
//     if (failures.Ok("something", r.status())) report.out()["something_ops"] = r.value();
//   }
//
// Not thread-safe.
class CaseFailures {
 public:
  // `program` prefixes the messages; `keep_going` is --keep_going; a non-null `notes` also
  // gets each failure as a note (it must outlive this).
  CaseFailures(std::string program, bool keep_going, Report* notes)
      : program_(std::move(program)), keep_going_(keep_going), notes_(notes) {}

  // Returns true if `s` is OK. Otherwise reports that `what` failed with `s` on stderr (and
  // as a note), counts it and returns false.
  bool Ok(const std::string& what, const Status& s);
  // True once a case failed, unless keep_going: the driver starts no further case.
  bool stop() const { return count_ > 0 && !keep_going_; }
  int count() const { return count_; }

 private:
  const std::string program_;
  const bool keep_going_;
  Report* const notes_;  // may be null
  int count_ = 0;
};

}  // namespace nova::bench
