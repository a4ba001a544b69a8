// fake_daemon: a stand-in for a Nova daemon that follows the daemon protocol of
// tests/util/external_daemon.h, for testing the harness itself.
//
//   fake_daemon --listen_port=<port> --cluster_secret_file=<path> --data_dir=<dir>
//               [--write_bytes=<n>]
//
// It listens on 127.0.0.1:<port> (0 = any free port, SO_REUSEADDR so a restart rebinds
// at once), prints "LISTEN 127.0.0.1:<port>" on stdout, then, given --write_bytes, writes
// n bytes to <dir>/fill, and serves until SIGTERM or SIGINT (exit 0): on every connection
// it answers each line "PING" with "PONG". It logs to stderr.
//
// Exit status: 0 after SIGTERM/SIGINT; 1 on an I/O error; 2 (kExitBadFlags, as
// nova::kBadFlagsExitCode) on an unusable command line; 3 (kExitFileTooLarge) when a write
// fails with EFBIG (RLIMIT_FSIZE).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Exit statuses; DO NOT CHANGE: external_daemon_test matches on them.
constexpr int kExitIoError = 1;
constexpr int kExitBadFlags = 2;
constexpr int kExitFileTooLarge = 3;

constexpr int kListenBacklog = 16;
// Size of each write() of --write_bytes: several, so the limit is hit mid-file.
constexpr size_t kWriteChunk = 16 << 10;

struct Flags {
  int listen_port = -1;
  std::string cluster_secret_file;
  std::string data_dir;
  uint64_t write_bytes = 0;
};

[[noreturn]] void Die(int code, const std::string& msg) {
  std::fprintf(stderr, "fake_daemon: %s\n", msg.c_str());
  std::exit(code);
}

[[noreturn]] void DieErrno(int code, const std::string& what) {
  const int err = errno;
  Die(code, what + ": " + std::strerror(err) + (err == EFBIG ? " (EFBIG)" : ""));
}

bool ParseUint(std::string_view s, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : arg.substr(eq + 1);
    uint64_t n = 0;
    if (name == "--listen_port") {
      if (!ParseUint(value, &n) || n > UINT16_MAX) Die(kExitBadFlags, "bad --listen_port");
      f.listen_port = static_cast<int>(n);
    } else if (name == "--cluster_secret_file") {
      f.cluster_secret_file = value;
    } else if (name == "--data_dir") {
      f.data_dir = value;
    } else if (name == "--write_bytes") {
      if (!ParseUint(value, &f.write_bytes)) Die(kExitBadFlags, "bad --write_bytes");
    } else {
      Die(kExitBadFlags, "unknown flag: " + std::string(arg));
    }
  }
  if (f.listen_port < 0) Die(kExitBadFlags, "--listen_port is required");
  if (f.data_dir.empty()) Die(kExitBadFlags, "--data_dir is required");
  std::ifstream secret(f.cluster_secret_file);
  std::string line;
  if (!secret || !std::getline(secret, line) || line.empty()) {
    Die(kExitBadFlags, "unreadable or empty --cluster_secret_file=" + f.cluster_secret_file);
  }
  return f;
}

// Binds and listens on 127.0.0.1:port. Returns the listening socket and sets *bound.
int Listen(int port, int* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) DieErrno(kExitIoError, "socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    DieErrno(kExitIoError, "bind 127.0.0.1:" + std::to_string(port));
  }
  if (::listen(fd, kListenBacklog) != 0) DieErrno(kExitIoError, "listen");
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    DieErrno(kExitIoError, "getsockname");
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

void WriteFill(const std::string& dir, uint64_t bytes) {
  const std::string path = dir + "/fill";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) DieErrno(kExitIoError, "open " + path);
  const std::string chunk(kWriteChunk, 'x');
  uint64_t done = 0;
  while (done < bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - done));
    const ssize_t n = ::write(fd, chunk.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) DieErrno(errno == EFBIG ? kExitFileTooLarge : kExitIoError, "write " + path);
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  std::fprintf(stderr, "fake_daemon: wrote %llu bytes to %s\n",
               static_cast<unsigned long long>(bytes), path.c_str());
}

struct Client {
  int fd;
  std::string buffered;
};

// Reads what `c` sent and answers its complete lines. Returns false when it is done.
bool Serve(Client* c) {
  char buf[512];
  const ssize_t n = ::read(c->fd, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  c->buffered.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = c->buffered.find('\n')) != std::string::npos) {
    const std::string line = c->buffered.substr(0, nl);
    c->buffered.erase(0, nl + 1);
    const std::string reply = line == "PING" ? "PONG\n" : "ERROR unknown request\n";
    if (::send(c->fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(reply.size())) {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::fprintf(stderr, "fake_daemon: pid %d starting\n", static_cast<int>(::getpid()));
  const Flags flags = ParseFlags(argc, argv);

  // SIGTERM and SIGINT arrive through a signalfd, so the poll loop sees them without races.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) DieErrno(kExitIoError, "sigprocmask");
  const int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (sig_fd < 0) DieErrno(kExitIoError, "signalfd");

  int port = 0;
  const int listen_fd = Listen(flags.listen_port, &port);
  std::printf("LISTEN 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  std::fprintf(stderr, "fake_daemon: listening on 127.0.0.1:%d\n", port);
  if (flags.write_bytes > 0) WriteFill(flags.data_dir, flags.write_bytes);

  std::vector<Client> clients;
  while (true) {
    std::vector<pollfd> fds = {{sig_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    for (const Client& c : clients) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      DieErrno(kExitIoError, "poll");
    }
    if (fds[0].revents != 0) {
      signalfd_siginfo info;
      if (::read(sig_fd, &info, sizeof(info)) == sizeof(info)) {
        std::fprintf(stderr, "fake_daemon: signal %u, exiting\n", info.ssi_signo);
        return 0;
      }
    }
    if (fds[1].revents != 0) {
      const int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) clients.push_back({c, ""});
    }
    // fds[2 + i] is clients[i] of this round; clients accepted above are polled next round.
    std::vector<Client> alive;
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      Client& c = clients[i];
      if (fds[i + 2].revents == 0 || Serve(&c)) {
        alive.push_back(std::move(c));
      } else {
        ::close(c.fd);
      }
    }
    for (size_t i = fds.size() - 2; i < clients.size(); ++i) alive.push_back(std::move(clients[i]));
    clients = std::move(alive);
  }
}
