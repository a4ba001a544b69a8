// Helpers shared by tests: polling with deadlines (never fixed sleeps), seeds for
// randomized tests, locating sibling binaries, scratch directories, child processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nova::test {

// Polls `cond` until it is true or `timeout` passes. Returns its last value.
bool WaitFor(const std::function<bool()>& cond,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Seed for a randomized test: $NOVA_TEST_SEED if set, else random. Printed so a failure
// can be replayed with NOVA_TEST_SEED=<seed>.
uint64_t TestSeed(const char* test_name);

// Directory of build/bin: $NOVA_BIN_DIR, else the directory of the running test binary.
std::string BinDir();

// Returns the path of a fresh, empty directory for the test called `name`:
// <base>/nova-test-<name>-<pid>, where <base> is $TEST_TMPDIR or /tmp. Characters of
// `name` other than [A-Za-z0-9._-] become '_'. Whatever an earlier call with the same name
// in this process left there is removed; the directory itself is left behind after the
// test for post-mortems. Aborts with a message if the directory cannot be made (a test
// cannot run without its scratch space).
std::string TestTempDir(const std::string& name);

// How ChildProcess::Start sets up the child before exec.
struct ChildProcessOptions {
  // When non-empty, the child's stderr goes to this file (created 0644, appended to).
  // Empty: the child inherits the parent's stderr.
  std::string stderr_path;
  // When set, RLIMIT_FSIZE (soft and hard) in bytes for the child, and SIGXFSZ ignored in
  // it, so a write past the limit fails with EFBIG instead of killing the process. The
  // limit covers every regular file the child writes, including `stderr_path`.
  std::optional<uint64_t> file_size_limit_bytes;
  // Environment variables added to (or replacing those of) the parent's environment.
  std::vector<std::pair<std::string, std::string>> env;
};

// A child process started with fork+exec. Its stdout is captured through a pipe, which
// the caller reads with ReadLine(); a child that writes more than a pipe's capacity
// (64 KiB) to stdout without the caller reading blocks, so children should keep stdout
// for short protocol lines and log to stderr.
//
// Thread safety: not thread-safe; one thread drives a ChildProcess.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // kills (SIGKILL) and reaps if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (a path, not searched in $PATH) with the arguments. Returns true once
  // the child has exec'ed; false, with errno saying why, if the pipe or fork failed, or if
  // the child could not open `options.stderr_path`, set the limit or exec (it then exits
  // and is reaped here). The child's signal mask is cleared, and descriptors other than
  // stdin/stdout/stderr are closed at exec, so a daemon holds none of the test's sockets.
  // REQUIRES: no child started by this object is running (a finished one may be restarted).
  bool Start(const std::vector<std::string>& argv, const ChildProcessOptions& options);
  bool Start(const std::vector<std::string>& argv) { return Start(argv, ChildProcessOptions()); }

  // Reads one line of the child's stdout (without '\n') before the timeout. Returns false
  // on timeout, or at end of file (the child closed stdout or exited) with no full line left.
  bool ReadLine(std::string* line, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // kill -9 and reap. No-op when no child is running.
  void Kill();
  // Sends `signo` to the child. Returns false (errno set) if it failed or no child runs.
  bool Signal(int signo);
  // Stops the child with SIGSTOP and returns true once it has stopped (every thread), so
  // a paused child runs no further instruction; true at once if already paused. Returns
  // false if no child runs, if it exited instead (it is then reaped and Wait() reports its
  // status), or if it did not stop within 10 s (stuck in uninterruptible sleep).
  bool Pause();
  // Continues a paused child (SIGCONT). Returns false if no child runs.
  bool Resume();

  // True while the child has not exited; a paused child is running. Reaps a child that has
  // exited (its status is then available from Wait()).
  bool Running();
  // Waits up to `timeout` for the child to exit and reaps it. Returns its exit code, or
  // 128 + the signal number if a signal killed it (as a shell does), or -1 if it is still
  // running at the deadline or no child was ever started.
  int Wait(std::chrono::milliseconds timeout);

  // Pid of the running child, or -1 when none runs.
  int pid() const { return pid_; }

 private:
  // Records a waitpid() status of the child as exit_code_ and forgets the pid.
  void Reaped(int wait_status);
  void CloseStdout();

  int pid_ = -1;
  int stdout_fd_ = -1;
  int exit_code_ = -1;  // of the last child reaped; -1 while none was
  bool paused_ = false;  // Pause() saw the child stop and Resume() was not called since
  std::string buffered_;
};

}  // namespace nova::test
