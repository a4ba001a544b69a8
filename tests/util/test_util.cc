#include "tests/util/test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

extern char** environ;

namespace nova::test {

namespace {

// How long Pause() waits for the kernel to report the child stopped. A stop takes
// microseconds; this only bounds a child stuck in uninterruptible sleep (D state).
constexpr std::chrono::seconds kStopReportTimeout(10);
// A shell reports a child killed by signal N as exit status 128 + N; Wait() does the same.
constexpr int kSignalExitBase = 128;

// Exit code of a child whose set-up before exec failed (the errno goes through a pipe).
constexpr int kChildSetupFailedExitCode = 127;

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return kSignalExitBase + WTERMSIG(wait_status);
  return -1;
}

// The parent's environment with `extra` added; an extra variable replaces a parent's
// variable of the same name.
std::vector<std::string> BuildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [k, v] : extra) overridden = overridden || k == name;
    if (!overridden) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

// Writes errno to `fd` and exits: the child's report of a failed set-up step. Only
// async-signal-safe calls (the parent may have other threads).
[[noreturn]] void ChildFail(int fd) {
  const int err = errno;
  ssize_t n = ::write(fd, &err, sizeof(err));
  (void)n;
  ::_exit(kChildSetupFailedExitCode);
}

}  // namespace

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = std::chrono::microseconds(100);
  while (true) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(backoff);  // polling interval, not a fixed wait
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

uint64_t TestSeed(const char* test_name) {
  uint64_t seed;
  if (const char* env = std::getenv("NOVA_TEST_SEED")) {
    seed = std::strtoull(env, nullptr, 10);
  } else {
    seed = std::random_device{}();
  }
  std::fprintf(stderr, "%s: seed %llu (replay with NOVA_TEST_SEED=%llu)\n", test_name,
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

std::string BinDir() {
  if (const char* env = std::getenv("NOVA_BIN_DIR")) return env;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string TestTempDir(const std::string& name) {
  const char* env = std::getenv("TEST_TMPDIR");
  const std::string base = (env != nullptr && env[0] != '\0') ? env : "/tmp";
  std::string safe = name;
  for (char& c : safe) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  const std::string dir = base + "/nova-test-" + safe + "-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!ec) std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "TestTempDir: cannot make a fresh %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    std::abort();
  }
  return dir;
}

ChildProcess::~ChildProcess() {
  Kill();
  CloseStdout();
}

bool ChildProcess::Start(const std::vector<std::string>& argv, const ChildProcessOptions& options) {
  if (pid_ > 0) {
    errno = EBUSY;
    return false;
  }
  if (argv.empty()) {
    errno = EINVAL;
    return false;
  }
  CloseStdout();
  buffered_.clear();
  exit_code_ = -1;

  // Everything the child needs is built before fork(): between fork and exec, the child
  // of a multi-threaded parent may only make async-signal-safe calls (no malloc).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env_strings = BuildEnvironment(options.env);
  std::vector<char*> envp;
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* stderr_path = options.stderr_path.empty() ? nullptr : options.stderr_path.c_str();
  rlimit fsize{};
  if (options.file_size_limit_bytes) {
    fsize.rlim_cur = fsize.rlim_max = static_cast<rlim_t>(*options.file_size_limit_bytes);
  }

  // out: the child's stdout. report: the child writes errno here if a set-up step or exec
  // fails; exec closes it (O_CLOEXEC), so end of file means the exec succeeded.
  int out[2], report[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out[0]);
    ::close(out[1]);
    errno = err;
    return false;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {out[0], out[1], report[0], report[1]}) ::close(fd);
    errno = err;
    return false;
  }
  if (pid == 0) {
    if (::dup2(out[1], STDOUT_FILENO) < 0) ChildFail(report[1]);
    if (stderr_path != nullptr) {
      const int fd = ::open(stderr_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) ChildFail(report[1]);
    }
    if (options.file_size_limit_bytes) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      if (::sigaction(SIGXFSZ, &ignore, nullptr) != 0) ChildFail(report[1]);
      if (::setrlimit(RLIMIT_FSIZE, &fsize) != 0) ChildFail(report[1]);
    }
    // The test may block signals in its threads; the daemon must see SIGTERM.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Descriptors the test opened without O_CLOEXEC (listeners, files) must not leak into
    // a daemon that may outlive it. Best effort: needs Linux 5.11.
    ::close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(args[0], args.data(), envp.data());
    ChildFail(report[1]);
  }
  ::close(out[1]);
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  pid_ = pid;
  stdout_fd_ = out[0];
  if (n == 0) return true;  // exec'ed
  Kill();                   // reaps the child, which has exited or is about to
  errno = n == static_cast<ssize_t>(sizeof(child_errno)) ? child_errno : EIO;
  return false;
}

bool ChildProcess::ReadLine(std::string* line, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      *line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || stdout_fd_ < 0) return false;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::Kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);  // also ends a stopped child
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
      Reaped(status);
    } else {
      pid_ = -1;  // reaped elsewhere (SIGCHLD ignored): nothing left to kill
    }
  }
  CloseStdout();
}

bool ChildProcess::Signal(int signo) {
  if (pid_ <= 0) {
    errno = ESRCH;
    return false;
  }
  // Safe against pid reuse: an unreaped child stays a zombie holding its pid.
  return ::kill(pid_, signo) == 0;
}

bool ChildProcess::Pause() {
  if (paused_ && pid_ > 0) return true;  // a stopped child reports no second stop
  if (!Signal(SIGSTOP)) return false;
  // kill() returns before the child stops; WUNTRACED reports it once every thread has.
  WaitFor(
      [&] {
        if (pid_ <= 0) return true;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
        if (r == pid_ && WIFSTOPPED(status)) {
          paused_ = true;
        } else if (r == pid_) {
          Reaped(status);  // exited or killed instead of stopping
        } else if (r < 0 && errno != EINTR) {
          pid_ = -1;  // reaped elsewhere (SIGCHLD ignored)
        }
        return paused_ || pid_ <= 0;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kStopReportTimeout));
  return paused_;
}

bool ChildProcess::Resume() {
  if (!Signal(SIGCONT)) return false;
  paused_ = false;
  return true;
}

bool ChildProcess::Running() {
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return true;
    if (r == pid_) {
      Reaped(status);
    } else if (errno != EINTR) {
      pid_ = -1;  // reaped elsewhere (SIGCHLD ignored)
    }
  }
  return false;
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (!WaitFor([this] { return !Running(); }, timeout)) return -1;
  return exit_code_;
}

void ChildProcess::Reaped(int wait_status) {
  exit_code_ = ExitCodeOf(wait_status);
  pid_ = -1;
  paused_ = false;
}

void ChildProcess::CloseStdout() {
  if (stdout_fd_ >= 0) {
    ::close(stdout_fd_);
    stdout_fd_ = -1;
  }
}

}  // namespace nova::test
