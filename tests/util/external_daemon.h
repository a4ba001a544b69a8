// ExternalDaemon: one real Nova daemon (nova_stoc, ...) run as a child process by a
// multi-process integration test, which can kill -9, pause, resume and restart it (in the
// spirit of Kudu's ExternalDaemon / ExternalMiniCluster).
//
// The daemon protocol the harness relies on:
//   1. The daemon accepts --listen_port=<port> (0 = any free port) and
//      --cluster_secret_file=<path>, and listens on loopback by default.
//   2. Once it serves, it prints exactly one line "LISTEN <host:port>" to stdout; stdout
//      carries nothing else (the harness stops reading it after that line).
//   3. It logs to stderr, which the harness appends to <data_dir>/<id>.log.
//   4. It exits on SIGTERM (gracefully, any exit status) and exits with status 2
//      (nova::kBadFlagsExitCode) on an unusable command line.
//
// Typical use:
//
//   const std::string dir = test::TestTempDir("stoc_restart");
//   auto secret = test::WriteClusterSecret(dir);
//   ASSERT_TRUE(secret.ok()) << secret.status().ToString();
//   test::ExternalDaemonOptions o;
//   o.binary = "nova_stoc";
//   o.id = "stoc-1";
//   o.data_dir = dir + "/stoc-1";
//   o.data_dir_flag = "stoc_dir";
//   o.cluster_secret_file = secret.value();
//   test::ExternalDaemon stoc(o);
//   Status s = stoc.Start();
//   ASSERT_TRUE(s.ok()) << s.ToString();     // the message ends with the log's tail
//   ... connect to stoc.address() ...
//   stoc.Kill();                             // kill -9
//   ASSERT_TRUE(stoc.Restart().ok());        // same port, same data dir
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tests/util/test_util.h"

namespace nova::test {

// Writes a fresh random cluster secret (64 hex digits and a newline) to
// <dir>/cluster_secret with mode 0600, replacing any earlier one. Returns the file's path,
// or the IOError of a failed write. REQUIRES: `dir` exists.
Result<std::string> WriteClusterSecret(const std::string& dir);

// How to run one daemon.
struct ExternalDaemonOptions {
  // Name of the binary in test::BinDir() (e.g. "nova_stoc"); a name containing '/' is
  // used as a path as is. Required.
  std::string binary;
  // Names the daemon in messages and its log file <data_dir>/<id>.log (e.g. "stoc-1").
  // Required.
  std::string id;
  // The daemon's data directory, created (with parents) by Start() if missing and kept
  // across restarts and after the daemon is gone; normally under test::TestTempDir().
  // Required.
  std::string data_dir;
  // The daemon flag that receives data_dir: "--<data_dir_flag>=<data_dir>" is passed when
  // non-empty (nova_stoc names it "stoc_dir").
  std::string data_dir_flag = "data_dir";
  // Path of the cluster secret file, passed as --cluster_secret_file (see
  // WriteClusterSecret()). Required.
  std::string cluster_secret_file;
  // Further flags, appended after the harness's own.
  std::vector<std::string> extra_flags;
  // When set, RLIMIT_FSIZE for the daemon: a write past it fails with EFBIG (SIGXFSZ is
  // ignored). It also bounds the log file, which grows across restarts.
  std::optional<uint64_t> file_size_limit_bytes;
  // Extra environment variables for the daemon.
  std::vector<std::pair<std::string, std::string>> env;
  // How long Start() waits for the LISTEN line.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(20);
  // How long Shutdown() waits after SIGTERM before it sends SIGKILL.
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(20);
};

// One daemon process, restartable on the same port and data directory. The destructor
// kills it (SIGKILL) if it still runs; the data directory and log stay behind.
//
// Thread safety: not thread-safe; the test thread drives it.
class ExternalDaemon {
 public:
  explicit ExternalDaemon(ExternalDaemonOptions options);
  ~ExternalDaemon();
  ExternalDaemon(const ExternalDaemon&) = delete;
  ExternalDaemon& operator=(const ExternalDaemon&) = delete;

  // Launches
  //   <binary> --listen_port=<port> --cluster_secret_file=<file>
  //            [--<data_dir_flag>=<data_dir>] <extra_flags...>
  // with stderr appended to log_path(), and waits up to options.start_timeout for its
  // LISTEN line. <port> is 0 until a start has succeeded, then the port the daemon first
  // reported, so a restarted daemon is found at the same address. Returns OK once the
  // daemon serves at address(). Otherwise the daemon is not left running and the message
  // says what happened and ends with the last lines this run wrote to the log:
  // InvalidArgument (options incomplete), IOError (cannot create the data dir or
  // fork/exec), Aborted (it exited first; the message has its exit status), TimedOut (no
  // LISTEN line in time; it was killed), IllegalState (it listened on another port than
  // the one asked for, or printed a malformed LISTEN line).
  // REQUIRES: !IsRunning().
  Status Start();

  // Shuts the daemon down if it runs (as Shutdown(), whose failure is ignored), then
  // starts it again on the same port with the same data dir and flags. Returns Start()'s
  // status, or IllegalState if no start has ever succeeded (no port to reuse).
  Status Restart();

  // kill -9 and reap; a paused daemon dies too. No-op when it is not running.
  void Kill();

  // SIGTERM, then wait up to options.shutdown_timeout for the exit (a paused daemon is
  // resumed so it can handle the signal). Returns OK if it exited in time or was not
  // running, TimedOut if it had to be killed with SIGKILL. Either way it is gone after.
  Status Shutdown();

  // SIGSTOP; returns once the daemon is stopped: its sockets stay open and the kernel
  // still accepts connections and buffers data for it, but it answers nothing.
  // Returns IllegalState if it is not running or did not stop (it exited).
  Status Pause();
  // SIGCONT after Pause(). Returns IllegalState if it is not running.
  Status Resume();

  // True while the process lives (paused included). Reaps a daemon that exited.
  bool IsRunning();

  // Waits up to `timeout` for the daemon to exit on its own. Returns its exit code (128 +
  // signal number if a signal ended it), or TimedOut if it still runs. If it had already
  // exited, returns that exit status at once; IllegalState if it was never started.
  Result<int> WaitForExit(std::chrono::milliseconds timeout);

  // "<host>:<port>" from the last LISTEN line; empty before the first successful Start().
  const std::string& address() const { return address_; }
  // The port address() names; 0 before the first successful Start().
  uint16_t port() const { return port_; }
  // <data_dir>/<id>.log: stderr of every run, each run after a "==== harness:" line.
  const std::string& log_path() const { return log_path_; }
  const std::string& data_dir() const { return options_.data_dir; }
  const std::string& id() const { return options_.id; }
  // Pid of the running process, or -1.
  int pid() const { return process_ ? process_->pid() : -1; }

 private:
  // The command line of the next run.
  std::vector<std::string> CommandLine() const;
  // Builds the failure status of the run that began at log offset log_start_: `status`'s
  // message, then the log's tail.
  Status WithLogTail(const Status& status) const;

  // Constant after construction.
  const ExternalDaemonOptions options_;
  const std::string log_path_;

  std::unique_ptr<ChildProcess> process_;  // null before the first Start()
  uint64_t log_start_ = 0;                 // size of the log when this run began
  uint16_t port_ = 0;
  std::string address_;
};

// The options of StoC `id` of a test cluster: nova_stoc named stoc-<id>, its data under
// <dir>/stoc-<id>, the cluster secret, --stoc_id, 4 MiB in-memory regions, then `flags`
// (e.g. the memory limits a test wants).
ExternalDaemonOptions StocDaemonOptions(const std::string& dir, const std::string& secret_file,
                                        uint32_t id, std::vector<std::string> flags = {});
// The options of LogC `id` of a test cluster: nova_logc named logc-<id>, its data under
// <dir>/logc-<id>, the cluster secret, --logc_id, then `flags` (memory limit, persist...).
ExternalDaemonOptions LogcDaemonOptions(const std::string& dir, const std::string& secret_file,
                                        int id, std::vector<std::string> flags = {});
// The options of LTC `id` (e.g. "ltc-1"): nova_ltc with --ltc_dir=<dir>/<id>, the cluster
// secret, then `flags` (its --ltc_id, ranges, StoCs...).
ExternalDaemonOptions LtcDaemonOptions(const std::string& dir, const std::string& secret_file,
                                       const std::string& id, std::vector<std::string> flags);

}  // namespace nova::test
