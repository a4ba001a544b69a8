#include "common/adaptive_spin.h"

#include <fcntl.h>
#include <unistd.h>

namespace nova {

bool AdaptiveSpin::NoThreadWaitsForACpu(std::string_view loadavg, long cpus) {
  // "0.52 0.58 0.59 3/512 12345": the fourth field is runnable/total.
  size_t pos = 0;
  for (int field = 0; field < 3; ++field) {
    pos = loadavg.find(' ', pos);
    if (pos == std::string_view::npos) return true;
    ++pos;
  }
  const size_t slash = loadavg.find('/', pos);
  if (slash == std::string_view::npos || slash == pos || cpus <= 0) return true;
  long runnable = 0;
  for (size_t i = pos; i < slash; ++i) {
    const char c = loadavg[i];
    if (c < '0' || c > '9') return true;
    runnable = runnable * 10 + (c - '0');
    if (runnable > 1000000) break;
  }
  return runnable <= cpus;
}

bool AdaptiveSpin::NoThreadWaitsForACpu() {
  static const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  static std::atomic<uint64_t> next_check_ns{0};
  static std::atomic<bool> verdict{true};
  const uint64_t now = MonoNanos();
  uint64_t due = next_check_ns.load(std::memory_order_relaxed);
  if (now < due || !next_check_ns.compare_exchange_strong(
                       due, now + std::chrono::nanoseconds(kRunnableCheck).count(),
                       std::memory_order_relaxed)) {
    return verdict.load(std::memory_order_relaxed);  // fresh, or another thread reads it
  }
  char buf[128];
  ssize_t n = -1;
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = ::read(fd, buf, sizeof(buf));
    ::close(fd);
  }
  const bool v =
      n <= 0 || NoThreadWaitsForACpu(std::string_view(buf, static_cast<size_t>(n)), cpus);
  verdict.store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace nova
