// SequenceWatermark: hands out a range's sequence numbers and tracks the visible one, the
// largest v such that every write with a sequence <= v is complete (in its memtable). A
// reader at v sees a batch whole or not at all, and never a write with a later sequence
// missing an earlier one.
//
// Writers take consecutive numbers with Assign(count) and report them with Finish(first,
// count); the visible sequence moves forward over finished writes in order. Both are
// lock-free: a ring of kSlots slots, indexed by a write's first sequence, holds finished
// writes not yet passed by the watermark; whoever finishes advances it as far as it can.
// A write whose slot would still be in use (kSlots sequences ahead of the watermark)
// waits in Assign until the slot is free; with writes that finish in microseconds that
// means a writer stuck for a very long time.
//
// Why not a mutex and a set of in-flight writes: that is two global critical sections (and
// an allocation) per write; on the put path they cost more than the memtable insert.
//
// Thread safety: thread-safe. Reset() only before concurrent use.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "common/clock.h"
#include "common/lsm/internal_key.h"

namespace nova::ltc {

class SequenceWatermark {
 public:
  // Every sequence <= last is taken and visible.
  void Reset(lsm::SequenceNumber last);

  // Takes `count` (>= 1) consecutive sequence numbers; returns the first.
  lsm::SequenceNumber Assign(uint64_t count);
  // The write [first, first + count) is complete.
  void Finish(lsm::SequenceNumber first, uint64_t count);

  lsm::SequenceNumber visible() const { return visible_.load(std::memory_order_acquire); }
  lsm::SequenceNumber last_assigned() const {
    return next_.load(std::memory_order_acquire) - 1;
  }
  // Waits until visible() >= seq or the deadline passes; returns whether it got there.
  bool WaitVisible(lsm::SequenceNumber seq, Deadline deadline) const;

 private:
  static constexpr uint64_t kSlots = 1 << 12;  // 64 KiB per range
  struct Slot {
    std::atomic<uint64_t> first{0};  // the write's first sequence, stored last (release)
    std::atomic<uint64_t> last{0};   // its last sequence
  };
  void Advance();

  std::atomic<lsm::SequenceNumber> next_{1};
  std::atomic<lsm::SequenceNumber> visible_{0};
  std::array<Slot, kSlots> slots_;
};

}  // namespace nova::ltc
