// Monotonic time for deadlines, latencies and backoff. Never use wall-clock time for
// durations: it jumps.
#pragma once

#include <chrono>
#include <cstdint>

namespace nova {

using MonoClock = std::chrono::steady_clock;
using MonoTime = MonoClock::time_point;

inline MonoTime MonoNow() { return MonoClock::now(); }
inline uint64_t MonoNanos() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(MonoClock::now().time_since_epoch())
          .count());
}
inline uint64_t MonoMicros() { return MonoNanos() / 1000; }

// Wall-clock milliseconds since the Unix epoch: only for timestamps shared between
// processes (e.g. when a migration started, in the cluster configuration), never for
// durations measured inside one.
inline uint64_t WallMillis() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// A point in time after which an operation gives up.
class Deadline {
 public:
  static Deadline After(std::chrono::nanoseconds d) { return Deadline(MonoNow() + d); }
  static Deadline Never() { return Deadline(MonoTime::max()); }
  explicit Deadline(MonoTime when) : when_(when) {}
  bool Expired() const { return MonoNow() >= when_; }
  MonoTime when() const { return when_; }
  // Remaining time, zero if expired.
  std::chrono::nanoseconds Remaining() const {
    auto now = MonoNow();
    return now >= when_ ? std::chrono::nanoseconds(0) : when_ - now;
  }

 private:
  MonoTime when_;
};

}  // namespace nova
