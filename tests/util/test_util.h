// Helpers shared by tests: polling with deadlines (never fixed sleeps), seeds for
// randomized tests, locating sibling binaries, child processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
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

// A child process started with fork+exec. stdout is captured through a pipe.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // kills (SIGKILL) and reaps if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (a path) with the arguments. Returns false on failure.
  bool Start(const std::vector<std::string>& argv);
  // Reads one line of the child's stdout (without '\n') before the timeout.
  bool ReadLine(std::string* line, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // kill -9 and reap.
  void Kill();
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

}  // namespace nova::test
