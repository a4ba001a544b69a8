#include "ltc/engine/sequence_watermark.h"

#include <thread>

namespace nova::ltc {

void SequenceWatermark::Reset(lsm::SequenceNumber last) {
  for (Slot& s : slots_) {
    s.first.store(0, std::memory_order_relaxed);
    s.last.store(0, std::memory_order_relaxed);
  }
  visible_.store(last, std::memory_order_release);
  next_.store(last + 1, std::memory_order_release);
}

lsm::SequenceNumber SequenceWatermark::Assign(uint64_t count) {
  const lsm::SequenceNumber first = next_.fetch_add(count, std::memory_order_acq_rel);
  // The slot of `first` is also the slot of first - kSlots: wait until the watermark has
  // passed that write.
  while (first > visible_.load(std::memory_order_acquire) + kSlots) std::this_thread::yield();
  return first;
}

void SequenceWatermark::Finish(lsm::SequenceNumber first, uint64_t count) {
  Slot& s = slots_[first % kSlots];
  s.last.store(first + count - 1, std::memory_order_relaxed);
  // seq_cst here and in Advance: a writer publishes its slot then reads the watermark,
  // another moves the watermark then reads that slot; at least one of them must see the
  // other's store, or the watermark would stop short of a finished write.
  s.first.store(first, std::memory_order_seq_cst);
  Advance();
}

void SequenceWatermark::Advance() {
  lsm::SequenceNumber v = visible_.load(std::memory_order_seq_cst);
  while (true) {
    const Slot& s = slots_[(v + 1) % kSlots];
    if (s.first.load(std::memory_order_seq_cst) != v + 1) return;  // not finished yet
    // The slot cannot be reused while v + 1 is not visible (see Assign), so if the exchange
    // succeeds `last` belongs to the write starting at v + 1. If it fails, another writer
    // moved the watermark and v is reloaded: continue from there.
    const lsm::SequenceNumber last = s.last.load(std::memory_order_relaxed);
    if (visible_.compare_exchange_strong(v, last, std::memory_order_seq_cst)) v = last;
  }
}

bool SequenceWatermark::WaitVisible(lsm::SequenceNumber seq, Deadline deadline) const {
  // Writers wait here for earlier writes that are usually microseconds from finishing:
  // yield a few times before sleeping.
  constexpr int kYields = 64;
  for (int i = 0; i < kYields && visible() < seq; ++i) std::this_thread::yield();
  constexpr auto kPollStep = std::chrono::microseconds(100);
  while (visible() < seq) {
    if (deadline.Expired()) return false;
    std::this_thread::sleep_for(kPollStep);
  }
  return true;
}

}  // namespace nova::ltc
