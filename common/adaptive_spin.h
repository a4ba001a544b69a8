// AdaptiveSpin: whether a thread about to block for bytes on a socket (a reply, or a
// synchronous client's next request) should first poll it for a short window without
// sleeping. A thread that sleeps is woken by an interrupt to its CPU, which costs tens of
// microseconds where CPUs idle (virtual machines above all), often more than the wait
// itself; one that polls catches the bytes at once. Polling burns the CPU, so it is tried
// only while it pays: after a window that ended without bytes (the peer is slow, or the
// CPUs are busy and polling steals from the work it waits for) the next kSkipAfterMiss
// waits block at once; at most `max_spinners` threads sharing a `spinners` counter (e.g.
// one process's readers) poll at once; and a poller yields its CPU between polls
// (sched_yield), so it only takes time no runnable thread wants: it spins where a core is
// free, and under load the threads doing the work run first.
//
//   AdaptiveSpin spin(std::chrono::microseconds(50));
//   if (spin.ShouldSpin()) {
//     const MonoTime until = MonoNow() + spin.window();
//     bool got = false;
//     while (!(got = TryRead()) && MonoNow() < until) std::this_thread::yield();
//     spin.Spun(got);
//   }
//
// Thread safety: not thread-safe (one per reading thread, e.g. per connection).
#pragma once

#include <atomic>
#include <chrono>

namespace nova {

class AdaptiveSpin {
 public:
  static constexpr int kSkipAfterMiss = 16;

  // A zero window: never spin. `spinners` (may be null: no limit) must outlive this.
  explicit AdaptiveSpin(std::chrono::microseconds window,
                        std::atomic<int>* spinners = nullptr, int max_spinners = 1)
      : window_(window), spinners_(spinners), max_spinners_(max_spinners) {}

  // True: poll for window(), then call Spun. False: block now.
  bool ShouldSpin() {
    if (window_.count() <= 0) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    if (spinners_ != nullptr &&
        spinners_->fetch_add(1, std::memory_order_relaxed) >= max_spinners_) {
      spinners_->fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // After a window: `got` whether the bytes came within it.
  void Spun(bool got) {
    if (spinners_ != nullptr) spinners_->fetch_sub(1, std::memory_order_relaxed);
    if (!got) skip_ = kSkipAfterMiss;
  }
  std::chrono::microseconds window() const { return window_; }

 private:
  const std::chrono::microseconds window_;
  std::atomic<int>* const spinners_;
  const int max_spinners_;
  int skip_ = 0;
};

}  // namespace nova
