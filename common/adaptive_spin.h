// AdaptiveSpin: whether a thread about to block for bytes on a socket (a reply, or a
// synchronous client's next request) should first poll it for a short window without
// sleeping. A thread that sleeps is woken by an interrupt to its CPU, which costs tens of
// microseconds where CPUs idle (virtual machines above all), often more than the wait
// itself; one that polls catches the bytes at once. Polling burns the CPU, so it is tried
// only while it pays: after a window that ended without bytes (the peer is slow, or the
// CPUs are busy and polling steals from the work it waits for) the next kSkipAfterMiss
// waits block at once; at most `max_spinners` threads sharing a `spinners` counter (e.g.
// one process's readers) poll at once; and a poller yields its CPU between polls
// (sched_yield), so the threads doing the work run first. Polling pays only where a core
// is free: a yield that took longer than kBusyYield means another thread ran meanwhile
// (no core is free), so Yield() says stop, and the window ends with one more poll (without
// bytes, the next kSkipAfterBusyYield waits block at once): on a machine whose cores are
// all busy, each yield that hands the CPU over costs two context switches and each poll a
// system call. Nor does a window start while more threads are runnable on the machine
// than it has CPUs (NoThreadWaitsForACpu): a poller would hold a CPU a waiting thread could
// have, and, never idle, that CPU pulls no waiting thread over from another one
// (docs/benchmarks.md, "Spinning only where a core is free").
//
//   AdaptiveSpin spin(std::chrono::microseconds(50));
//   if (spin.ShouldSpin()) {
//     Status s = spin.PollWindow(MonoNow() + spin.window(), [&] { return TryRead(); });
//     if (!s.IsUnavailable()) ...;  // bytes (or an error) came within the window
//   }
//
// Thread safety: not thread-safe (one per reading thread, e.g. per connection), except
// the static NoThreadWaitsForACpu (thread-safe).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <thread>

#include "common/clock.h"

namespace nova {

class AdaptiveSpin {
 public:
  static constexpr int kSkipAfterMiss = 16;
  // Waits that block at once after a window that a busy yield cut short, without bytes:
  // fewer, since an uncontended yield too takes longer than kBusyYield now and then (an
  // interrupt, the hypervisor).
  static constexpr int kSkipAfterBusyYield = 4;
  // A yield to no other thread takes about a system call (1.2 us at p50 and 1.4 us at p99
  // on the project's VM, 46 us at p99.9); one that let another thread run takes that
  // thread's turn on the CPU.
  static constexpr std::chrono::microseconds kBusyYield{20};

  // Whether a window may start as far as the machine goes (NoThreadWaitsForACpu; tests
  // pass their own).
  using MachineCheck = bool (*)();

  // A zero window: never spin. `spinners` (may be null: no limit) must outlive this.
  explicit AdaptiveSpin(std::chrono::microseconds window,
                        std::atomic<int>* spinners = nullptr, int max_spinners = 1,
                        MachineCheck machine_allows = &NoThreadWaitsForACpu)
      : window_(window), spinners_(spinners), max_spinners_(max_spinners),
        machine_allows_(machine_allows) {}

  // True: poll for window(), then call Spun. False: block now.
  bool ShouldSpin() {
    if (window_.count() <= 0) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    if (!machine_allows_()) return false;
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
    if (!got) skip_ = cut_short_ ? kSkipAfterBusyYield : kSkipAfterMiss;
    cut_short_ = false;
  }
  std::chrono::microseconds window() const { return window_; }

  // One window, after ShouldSpin() said true: calls `poll` (returning a Status-like value,
  // Unavailable while no bytes are there) until it returns anything else or `until` has
  // passed, yielding between polls; a busy yield ends the window after one more poll. Then
  // Spun; returns the last poll's result.
  template <typename Poll>
  auto PollWindow(MonoTime until, Poll poll) -> decltype(poll()) {
    auto got = poll();
    bool more = true;
    while (got.IsUnavailable() && more && MonoNow() < until) {
      more = Yield();  // a thread with work to do runs first; if one did, stop
      got = poll();
    }
    Spun(!got.IsUnavailable());
    return got;
  }

  // Between two polls of a window: yields the CPU. False if another thread ran meanwhile
  // (the yield took longer than kBusyYield): poll once more, then end the window.
  bool Yield() {
    const MonoTime before = MonoNow();
    std::this_thread::yield();
    return YieldTook(MonoNow() - before);
  }
  // Yield's verdict on a yield that took `took`; counts busy yields.
  bool YieldTook(MonoClock::duration took) {
    if (took <= kBusyYield) return true;
    ++busy_yields_;
    cut_short_ = true;
    return false;
  }
  // Yields that found the CPU wanted by another thread, so far.
  uint64_t busy_yields() const { return busy_yields_; }

  // False while more threads are runnable on this machine than it has CPUs (some wait in
  // a run queue): a poller would keep one of them waiting, and it keeps its CPU from
  // looking idle, so the scheduler moves no waiting thread there. From /proc/loadavg's
  // count of runnable threads (the caller included) against the online CPUs, read at most
  // once per kRunnableCheck by any thread of the process; true where it cannot be read.
  // Both counts are the whole host's (also in a container, or under a CPU affinity mask).
  static bool NoThreadWaitsForACpu();
  static constexpr std::chrono::milliseconds kRunnableCheck{5};  // a read costs about 6 us
  // The verdict on /proc/loadavg's contents `loadavg` on a machine of `cpus` CPUs (exposed
  // for tests). True if the file cannot be parsed.
  static bool NoThreadWaitsForACpu(std::string_view loadavg, long cpus);

 private:
  const std::chrono::microseconds window_;
  std::atomic<int>* const spinners_;
  const int max_spinners_;
  const MachineCheck machine_allows_;
  int skip_ = 0;
  bool cut_short_ = false;  // a busy yield ended this window
  uint64_t busy_yields_ = 0;
};

}  // namespace nova
