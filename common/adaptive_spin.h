// AdaptiveSpin: whether a thread about to block for bytes on a socket (a reply, or a
// synchronous client's next request) should first poll it for a short window without
// sleeping. A thread that sleeps is woken by an interrupt to its CPU, which costs tens of
// microseconds where CPUs idle (virtual machines above all), often more than the wait
// itself; one that polls catches the bytes at once. Polling burns the CPU, so it is tried
// only while it pays: after a window that ended without bytes (the peer is slow, or the
// CPUs are busy and polling steals from the work it waits for) the next kSkipAfterMiss
// waits block at once.
//
//   AdaptiveSpin spin(std::chrono::microseconds(50));
//   if (spin.ShouldSpin()) {
//     const MonoTime until = MonoNow() + spin.window();
//     bool got = false;
//     while (!(got = TryRead()) && MonoNow() < until) {}
//     spin.Spun(got);
//   }
//
// Thread safety: not thread-safe (one per reading thread, e.g. per connection).
#pragma once

#include <chrono>

namespace nova {

class AdaptiveSpin {
 public:
  static constexpr int kSkipAfterMiss = 16;

  // A zero window: never spin.
  explicit AdaptiveSpin(std::chrono::microseconds window) : window_(window) {}

  bool ShouldSpin() {
    if (window_.count() <= 0) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    return true;
  }
  // After a window: `got` whether the bytes came within it.
  void Spun(bool got) {
    if (!got) skip_ = kSkipAfterMiss;
  }
  std::chrono::microseconds window() const { return window_; }

 private:
  const std::chrono::microseconds window_;
  int skip_ = 0;
};

}  // namespace nova
