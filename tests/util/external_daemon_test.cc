// Tests of the multi-process harness (ChildProcess, ExternalDaemon) against fake_daemon,
// a stand-in that follows the daemon protocol (tests/util/fake_daemon.cc).
#include "tests/util/external_daemon.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/util/test_util.h"

namespace nova::test {
namespace {

// fake_daemon's exit statuses (see its header comment).
constexpr int kFakeBadFlagsExit = 2;
constexpr int kFakeFileTooLargeExit = 3;
// Exit status of a process killed by signal N, as ChildProcess reports it.
constexpr int kSignalExitBase = 128;

constexpr auto kReplyTimeout = std::chrono::seconds(10);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A TCP connection to a "127.0.0.1:<port>" address; closed on destruction.
class Connection {
 public:
  explicit Connection(const std::string& address) {
    const uint16_t port =
        static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool SendPing() {
    return fd_ >= 0 && ::send(fd_, "PING\n", 5, MSG_NOSIGNAL) == 5;
  }
  // Waits up to `timeout` for "PONG\n"; a zero timeout only looks at what has arrived.
  bool ReadPong(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (fd_ >= 0 && received_.find("PONG\n") == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) return false;
      char buf[64];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) return false;
      received_.append(buf, static_cast<size_t>(n));
    }
    if (fd_ < 0) return false;
    received_.erase(0, received_.find("PONG\n") + 5);
    return true;
  }
  bool Ping() { return SendPing() && ReadPong(kReplyTimeout); }
  // True once the peer has closed the connection (end of file or reset).
  bool PeerClosed() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char buf[64];
    return ::read(fd_, buf, sizeof(buf)) <= 0;
  }

 private:
  int fd_ = -1;
  std::string received_;
};

class ExternalDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = TestTempDir(std::string(info->test_suite_name()) + "." + info->name());
    auto secret = WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = secret.value();
  }

  ExternalDaemonOptions Options(const std::string& id) const {
    ExternalDaemonOptions o;
    o.binary = "fake_daemon";
    o.id = id;
    o.data_dir = dir_ + "/" + id;
    o.cluster_secret_file = secret_;
    return o;
  }

  std::string dir_;
  std::string secret_;
};

TEST_F(ExternalDaemonTest, WriteClusterSecretIsPrivateAndRandom) {
  struct stat st;
  ASSERT_EQ(::stat(secret_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string first = ReadFile(secret_);
  EXPECT_EQ(first.size(), 65u) << first;  // 64 hex digits and '\n'
  auto again = WriteClusterSecret(dir_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again.value(), secret_);
  EXPECT_NE(ReadFile(secret_), first);
}

TEST_F(ExternalDaemonTest, StartReportsAddressAndServes) {
  ExternalDaemon d(Options("fake-1"));
  EXPECT_EQ(d.port(), 0);
  Status s = d.Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(d.IsRunning());
  EXPECT_GT(d.pid(), 0);
  EXPECT_NE(d.port(), 0);
  EXPECT_EQ(d.address(), "127.0.0.1:" + std::to_string(d.port()));
  EXPECT_EQ(d.log_path(), dir_ + "/fake-1/fake-1.log");
  Connection c(d.address());
  ASSERT_TRUE(c.connected());
  EXPECT_TRUE(c.Ping());

  s = d.Shutdown();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(d.IsRunning());
  auto code = d.WaitForExit(std::chrono::milliseconds(0));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(code.value(), 0);  // fake_daemon exits 0 on SIGTERM
  const std::string log = ReadFile(d.log_path());
  EXPECT_NE(log.find("==== harness: starting"), std::string::npos) << log;
  EXPECT_NE(log.find("listening on " + d.address()), std::string::npos) << log;
  EXPECT_NE(log.find("signal 15, exiting"), std::string::npos) << log;
}

TEST_F(ExternalDaemonTest, RestartReusesPortAndDataDir) {
  ExternalDaemon d(Options("fake-1"));
  EXPECT_EQ(d.Restart().code(), Status::Code::kIllegalState);  // never served
  ASSERT_TRUE(d.Start().ok());
  const std::string address = d.address();
  const int first_pid = d.pid();
  {
    Connection c(address);  // leaves a connection behind, as a peer transport would
    ASSERT_TRUE(c.Ping());
  }

  Status s = d.Restart();  // of a running daemon: SIGTERM, then start
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.address(), address);
  EXPECT_NE(d.pid(), first_pid);
  Connection c(address);
  EXPECT_TRUE(c.Ping());

  ASSERT_TRUE(d.Shutdown().ok());
  s = d.Restart();  // of a stopped daemon
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.address(), address);
  EXPECT_TRUE(Connection(address).Ping());
  // One log across the three runs.
  const std::string log = ReadFile(d.log_path());
  size_t runs = 0;
  for (size_t at = 0; (at = log.find("==== harness: starting", at)) != std::string::npos; ++at) {
    ++runs;
  }
  EXPECT_EQ(runs, 3u) << log;
}

TEST_F(ExternalDaemonTest, KillThenRestart) {
  ExternalDaemon d(Options("fake-1"));
  ASSERT_TRUE(d.Start().ok());
  const std::string address = d.address();
  Connection c(address);
  ASSERT_TRUE(c.Ping());

  d.Kill();
  EXPECT_FALSE(d.IsRunning());
  EXPECT_EQ(d.pid(), -1);
  auto code = d.WaitForExit(std::chrono::milliseconds(0));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), kSignalExitBase + SIGKILL);
  // The kernel closed the dead daemon's sockets.
  EXPECT_TRUE(WaitFor([&] { return c.PeerClosed(); }));
  EXPECT_FALSE(Connection(address).connected());
  d.Kill();  // no-op

  Status s = d.Restart();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.address(), address);
  EXPECT_TRUE(Connection(address).Ping());
}

TEST_F(ExternalDaemonTest, PauseAndResume) {
  ExternalDaemon d(Options("fake-1"));
  ASSERT_TRUE(d.Start().ok());
  Connection before(d.address());
  ASSERT_TRUE(before.Ping());

  Status s = d.Pause();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(d.Pause().ok());  // already paused
  EXPECT_TRUE(d.IsRunning());
  // The kernel still accepts connections and data for a stopped process, but nothing
  // answers. Pause() returns only once the process has stopped, so no reply can be on
  // its way: a zero-timeout look is enough.
  ASSERT_TRUE(before.SendPing());
  Connection during(d.address());
  ASSERT_TRUE(during.connected());
  ASSERT_TRUE(during.SendPing());
  EXPECT_FALSE(before.ReadPong(std::chrono::milliseconds(0)));
  EXPECT_FALSE(during.ReadPong(std::chrono::milliseconds(0)));
  EXPECT_TRUE(d.IsRunning());

  s = d.Resume();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(before.ReadPong(kReplyTimeout));
  EXPECT_TRUE(during.ReadPong(kReplyTimeout));
  EXPECT_TRUE(before.Ping());
}

TEST_F(ExternalDaemonTest, ShutdownOfPausedDaemon) {
  ExternalDaemon d(Options("fake-1"));
  ASSERT_TRUE(d.Start().ok());
  ASSERT_TRUE(d.Pause().ok());
  Status s = d.Shutdown();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(d.IsRunning());
  EXPECT_EQ(d.WaitForExit(std::chrono::milliseconds(0)).value(), 0);
  EXPECT_EQ(d.Pause().code(), Status::Code::kIllegalState);
  EXPECT_EQ(d.Resume().code(), Status::Code::kIllegalState);
  EXPECT_TRUE(d.Shutdown().ok());  // not running: nothing to do
}

TEST_F(ExternalDaemonTest, StartFailureShowsLogTail) {
  ExternalDaemonOptions o = Options("fake-1");
  o.extra_flags = {"--bogus_flag=1"};
  ExternalDaemon d(o);
  Status s = d.Start();
  ASSERT_EQ(s.code(), Status::Code::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("exited with status " + std::to_string(kFakeBadFlagsExit)),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("unknown flag: --bogus_flag=1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(d.log_path()), std::string::npos) << s.ToString();
  EXPECT_FALSE(d.IsRunning());
  EXPECT_EQ(d.WaitForExit(std::chrono::milliseconds(0)).value(), kFakeBadFlagsExit);
  EXPECT_EQ(d.port(), 0);
  EXPECT_EQ(d.Restart().code(), Status::Code::kIllegalState);

  // A second failure quotes only its own run.
  s = d.Start();
  ASSERT_FALSE(s.ok());
  const std::string& m = s.message();
  EXPECT_EQ(m.find("unknown flag"), m.rfind("unknown flag")) << m;
}

TEST_F(ExternalDaemonTest, StartTimesOutWithoutListenLine) {
  // A "daemon" that logs, says something else on stdout and never serves.
  const std::string script = dir_ + "/mute_daemon.sh";
  std::ofstream(script) << "#!/bin/sh\necho 'mute: up' >&2\necho 'hello'\nexec sleep 1000\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  ExternalDaemonOptions o = Options("mute-1");
  o.binary = script;
  o.start_timeout = std::chrono::milliseconds(300);  // a deadline, not a wait: it fails
  ExternalDaemon d(o);
  Status s = d.Start();
  ASSERT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.message().find("its stdout said: hello"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("mute: up"), std::string::npos) << s.ToString();
  EXPECT_FALSE(d.IsRunning());  // killed
}

TEST_F(ExternalDaemonTest, MissingBinaryFailsToStart) {
  ExternalDaemonOptions o = Options("ghost-1");
  o.binary = "no_such_daemon";
  ExternalDaemon d(o);
  Status s = d.Start();
  ASSERT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.ToString();
  EXPECT_FALSE(d.IsRunning());

  EXPECT_EQ(ExternalDaemon(ExternalDaemonOptions()).Start().code(),
            Status::Code::kInvalidArgument);
}

TEST_F(ExternalDaemonTest, FileSizeLimitYieldsEfbig) {
  constexpr uint64_t kLimit = 64 << 10;
  ExternalDaemonOptions o = Options("fake-1");
  o.file_size_limit_bytes = kLimit;
  o.extra_flags = {"--write_bytes=" + std::to_string(1 << 20)};
  ExternalDaemon d(o);
  Status s = d.Start();  // LISTEN comes before the write
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto code = d.WaitForExit(kReplyTimeout);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(code.value(), kFakeFileTooLargeExit) << ReadFile(d.log_path());
  EXPECT_NE(ReadFile(d.log_path()).find("(EFBIG)"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(d.data_dir() + "/fill"), kLimit);
}

TEST_F(ExternalDaemonTest, WriteWithinFileSizeLimit) {
  constexpr uint64_t kBytes = 256 << 10;
  ExternalDaemonOptions o = Options("fake-1");
  o.file_size_limit_bytes = 1 << 20;
  o.extra_flags = {"--write_bytes=" + std::to_string(kBytes)};
  ExternalDaemon d(o);
  ASSERT_TRUE(d.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return ReadFile(d.log_path()).find("wrote") != std::string::npos; }))
      << ReadFile(d.log_path());
  EXPECT_EQ(std::filesystem::file_size(d.data_dir() + "/fill"), kBytes);
  EXPECT_TRUE(d.IsRunning());
  EXPECT_TRUE(Connection(d.address()).Ping());
}

// ---- ChildProcess on its own ----------------------------------------------------------

TEST(ChildProcessTest, EnvironmentStderrAndExitCode) {
  const std::string dir = TestTempDir("ChildProcessTest.EnvironmentStderrAndExitCode");
  ChildProcessOptions o;
  o.stderr_path = dir + "/err.log";
  o.env = {{"NOVA_CHILD_VAR", "hello"}, {"HOME", "/nonexistent-home"}};
  for (int run = 0; run < 2; ++run) {
    ChildProcess p;
    ASSERT_TRUE(p.Start({"/bin/sh", "-c", "echo \"$NOVA_CHILD_VAR $HOME\"; echo oops >&2; exit 7"},
                        o));
    std::string line;
    ASSERT_TRUE(p.ReadLine(&line));
    EXPECT_EQ(line, "hello /nonexistent-home");
    EXPECT_EQ(p.Wait(kReplyTimeout), 7);
    EXPECT_FALSE(p.Running());
    EXPECT_EQ(p.pid(), -1);
  }
  EXPECT_EQ(ReadFile(o.stderr_path), "oops\noops\n");  // appended
}

TEST(ChildProcessTest, SignalWaitAndRestart) {
  ChildProcess p;
  EXPECT_EQ(p.Wait(std::chrono::milliseconds(0)), -1);  // never started
  EXPECT_FALSE(p.Signal(SIGTERM));
  ASSERT_TRUE(p.Start({"/bin/sh", "-c", "exec sleep 1000"}));
  EXPECT_TRUE(p.Running());
  EXPECT_EQ(p.Wait(std::chrono::milliseconds(0)), -1);  // still running
  ASSERT_TRUE(p.Pause());
  EXPECT_TRUE(p.Running());
  ASSERT_TRUE(p.Resume());
  ASSERT_TRUE(p.Signal(SIGTERM));
  EXPECT_EQ(p.Wait(kReplyTimeout), kSignalExitBase + SIGTERM);

  ASSERT_TRUE(p.Start({"/bin/sh", "-c", "exit 0"}));  // the object is reusable
  EXPECT_EQ(p.Wait(kReplyTimeout), 0);
}

TEST(ChildProcessTest, ExecFailureIsReportedByStart) {
  ChildProcess p;
  errno = 0;
  EXPECT_FALSE(p.Start({"/nonexistent/binary"}));
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(p.pid(), -1);

  ChildProcessOptions o;
  o.stderr_path = "/nonexistent/dir/err.log";
  EXPECT_FALSE(p.Start({"/bin/sh", "-c", "exit 0"}, o));
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace nova::test
