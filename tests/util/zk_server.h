// ZkServer: a real, standalone ZooKeeper server (Debian's `zookeeper` package) for tests,
// on 127.0.0.1 with its data under a test directory. Tests start, kill -9 and restart it
// (same port, same data: sessions and nodes survive as in production).
//
//   test::ZkServerOptions o;
//   o.data_dir = test::TestTempDir("my_test") + "/zk";
//   test::ZkServer zk(o);
//   Status s = zk.Start();               // waits until it answers "srvr"
//   ASSERT_TRUE(s.ok()) << s.ToString();  // the message ends with the server's log tail
//   ... connect to zk.address() ...
//   zk.Kill();                           // kill -9
//   ASSERT_TRUE(zk.Restart().ok());
//
// The server runs as `java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar
// org.apache.zookeeper.server.quorum.QuorumPeerMain <data_dir>/zoo.cfg`, which is what the
// package's zkServer.sh does, minus its pid-file and /var/log handling.
//
// Thread safety: not thread-safe; the test thread drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "tests/util/test_util.h"

namespace nova::test {

struct ZkServerOptions {
  // zoo.cfg, the snapshot/log directory and zookeeper.log go here; created if missing and
  // kept after the server is gone. Required.
  std::string data_dir;
  // Client port; 0 picks a free one at the first Start(), reused by Restart().
  uint16_t port = 0;
  // ZooKeeper's tick. Sessions may time out between 2 and 20 ticks; short ticks keep
  // expiry tests fast. maxSessionTimeout is raised to 60 s regardless.
  std::chrono::milliseconds tick{200};
  // How long Start() waits for the server to answer (a JVM start takes seconds on a
  // loaded machine).
  std::chrono::milliseconds start_timeout{60000};
};

class ZkServer {
 public:
  explicit ZkServer(ZkServerOptions options);
  ~ZkServer();  // kills the server if it runs
  ZkServer(const ZkServer&) = delete;
  ZkServer& operator=(const ZkServer&) = delete;

  // Whether this machine can run one (java and the jar are present); if not, *why says
  // what is missing. Tests skip rather than fail without it.
  static bool Available(std::string* why);

  // Writes zoo.cfg and starts the server; returns OK once it answers "srvr" with a mode.
  // Otherwise the server is not left running and the message ends with its log's tail:
  // IOError (cannot write the config / start java), Aborted (it exited), TimedOut.
  // REQUIRES: !IsRunning().
  Status Start();
  // kill -9 and reap. No-op when not running.
  void Kill();
  // Kill(), then Start() on the same port and data directory.
  Status Restart();
  // SIGSTOP / SIGCONT: a paused server keeps its socket but answers nothing.
  Status Pause();
  Status Resume();
  bool IsRunning();

  // "127.0.0.1:<port>"; valid after the first Start().
  std::string address() const;
  uint16_t port() const { return port_; }
  int pid() const { return process_ ? process_->pid() : -1; }
  std::string log_path() const { return options_.data_dir + "/zookeeper.log"; }

 private:
  Status StartOnce();
  Status WriteConfig() const;
  Status WithLogTail(const Status& s) const;

  const ZkServerOptions options_;
  uint16_t port_ = 0;
  bool started_once_ = false;  // Restart() keeps the port from then on
  std::unique_ptr<ChildProcess> process_;
};

// Sends a ZooKeeper four-letter word (e.g. "srvr") to 127.0.0.1:port and returns the
// answer, or an error if nothing answers within `timeout`.
Result<std::string> ZkFourLetterWord(uint16_t port, const std::string& word,
                                     std::chrono::milliseconds timeout);

}  // namespace nova::test
