#include "tests/util/zk_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace nova::test {

namespace {

constexpr char kZooKeeperJar[] = "/usr/share/java/zookeeper.jar";
constexpr char kZooKeeperConfDir[] = "/etc/zookeeper/conf";  // log4j.properties
constexpr char kServerMain[] = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
// A test server holds a few hundred nodes; keep the JVM small on a shared machine.
constexpr char kJvmHeap[] = "-Xmx256m";
// How much of the server's log a failure message carries.
constexpr size_t kLogTailBytes = 3000;
// Ports tried when the one picked turns out to be taken.
constexpr int kPortAttempts = 3;
// Server-side session timeout ceiling: high enough for any test's client setting.
constexpr int kMaxSessionTimeoutMs = 60000;

std::string JavaBinary() {
  if (const char* home = std::getenv("JAVA_HOME")) {
    const std::string java = std::string(home) + "/bin/java";
    if (::access(java.c_str(), X_OK) == 0) return java;
  }
  return "/usr/bin/java";
}

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
Result<uint16_t> PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("bind 127.0.0.1:0", err);
  }
  ::close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

}  // namespace

Result<std::string> ZkFourLetterWord(uint16_t port, const std::string& word,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  auto remaining_ms = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    return Status::FromErrno(what, err);
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return fail("connect", errno);
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return fail("connect", ETIMEDOUT);
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail("connect", err);
  }
  if (::send(fd, word.data(), word.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(word.size())) {
    return fail("send", errno);
  }
  std::string answer;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return fail("read " + word, ETIMEDOUT);
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return fail("read", errno);
    if (n == 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return answer;
}

ZkServer::ZkServer(ZkServerOptions options) : options_(std::move(options)), port_(options_.port) {}

ZkServer::~ZkServer() { Kill(); }

bool ZkServer::Available(std::string* why) {
  const std::string java = JavaBinary();
  if (::access(java.c_str(), X_OK) != 0) {
    *why = java + " not found (install default-jre-headless / zookeeper)";
    return false;
  }
  if (::access(kZooKeeperJar, R_OK) != 0) {
    *why = std::string(kZooKeeperJar) + " not found (install the zookeeper package)";
    return false;
  }
  return true;
}

std::string ZkServer::address() const { return "127.0.0.1:" + std::to_string(port_); }

Status ZkServer::WriteConfig() const {
  std::ofstream cfg(options_.data_dir + "/zoo.cfg", std::ios::trunc);
  cfg << "tickTime=" << options_.tick.count() << "\n"
      << "dataDir=" << options_.data_dir << "/data\n"
      << "clientPort=" << port_ << "\n"
      << "clientPortAddress=127.0.0.1\n"
      << "maxClientCnxns=0\n"
      << "minSessionTimeout=" << 2 * options_.tick.count() << "\n"
      << "maxSessionTimeout=" << kMaxSessionTimeoutMs << "\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=srvr,ruok,stat,cons\n";
  cfg.close();
  if (!cfg) return Status::IOError("cannot write " + options_.data_dir + "/zoo.cfg");
  return Status::OK();
}

Status ZkServer::WithLogTail(const Status& s) const {
  std::ifstream in(log_path());
  std::stringstream all;
  all << in.rdbuf();
  std::string log = all.str();
  if (log.size() > kLogTailBytes) log = "..." + log.substr(log.size() - kLogTailBytes);
  return Status(s.code(), s.message() + "\n---- " + log_path() + " ----\n" + log);
}

Status ZkServer::Start() {
  // A port we picked may be taken by someone else before the server binds it; then the
  // server exits at once and another port is tried.
  const bool may_repick = options_.port == 0 && !started_once_;
  Status s;
  for (int attempt = 0; attempt < kPortAttempts; attempt++) {
    s = StartOnce();
    if (s.ok()) {
      started_once_ = true;
      return s;
    }
    if (!may_repick || s.code() != Status::Code::kAborted) return s;
    port_ = 0;
  }
  return s;
}

Status ZkServer::StartOnce() {
  if (options_.data_dir.empty()) return Status::InvalidArgument("ZkServerOptions.data_dir");
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir + "/data", ec);
  if (ec) return Status::IOError("mkdir " + options_.data_dir + ": " + ec.message());
  if (port_ == 0) {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    port_ = port.value();
  }
  NOVA_RETURN_NOT_OK(WriteConfig());
  {
    std::ofstream log(log_path(), std::ios::app);
    log << "==== harness: starting ZooKeeper on " << address() << "\n";
  }
  // exec through sh only for the redirection: stdout would otherwise fill the harness's
  // pipe. The pid stays java's (exec), so Kill() hits the server itself.
  const std::string cmd = "exec '" + JavaBinary() + "' " + kJvmHeap +
                          " -XX:+UseSerialGC -XX:TieredStopAtLevel=1" + " -Dzookeeper.log.dir='" +
                          options_.data_dir + "'" + " -cp " + kZooKeeperConfDir + ":" +
                          kZooKeeperJar + " " + kServerMain + " '" + options_.data_dir +
                          "/zoo.cfg' >>'" + log_path() + "' 2>&1";
  process_ = std::make_unique<ChildProcess>();
  if (!process_->Start({"/bin/sh", "-c", cmd})) {
    return WithLogTail(Status::FromErrno("starting java", errno));
  }
  bool exited = false;
  const bool up = WaitFor(
      [&] {
        if (!process_->Running()) {
          exited = true;
          return true;
        }
        auto answer = ZkFourLetterWord(port_, "srvr", std::chrono::milliseconds(1000));
        return answer.ok() && answer->find("Mode:") != std::string::npos;
      },
      options_.start_timeout);
  if (exited) {
    const int code = process_->Wait(std::chrono::milliseconds(0));
    return WithLogTail(Status::Aborted("ZooKeeper exited with status " + std::to_string(code)));
  }
  if (!up) {
    process_->Kill();
    return WithLogTail(Status::TimedOut("ZooKeeper did not serve on " + address() + " within " +
                                        std::to_string(options_.start_timeout.count()) + " ms"));
  }
  return Status::OK();
}

void ZkServer::Kill() {
  if (process_) process_->Kill();
}

Status ZkServer::Restart() {
  Kill();
  return Start();
}

Status ZkServer::Pause() {
  if (!process_ || !process_->Pause()) return Status::IllegalState("ZooKeeper is not running");
  return Status::OK();
}

Status ZkServer::Resume() {
  if (!process_ || !process_->Resume()) return Status::IllegalState("ZooKeeper is not running");
  return Status::OK();
}

bool ZkServer::IsRunning() { return process_ && process_->Running(); }

}  // namespace nova::test
