// The registered memory regions of one transport, looked up by rkey when a peer's one-sided
// operation arrives. A RegionPin keeps a region registered while a transport thread reads
// from or writes into it, so DeregisterMemory can wait for in-flight operations to finish.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "common/mutex.h"
#include "common/status.h"
#include "common/transport/transport.h"

namespace nova::transport {

class RegionTable;

// Holds one region registered. Movable, not copyable. Empty when the lookup failed.
class RegionPin {
 public:
  struct Entry {
    MemoryRegion region;
    std::atomic<int64_t> pins{0};
  };

  RegionPin() = default;
  explicit RegionPin(std::shared_ptr<Entry> e) : entry_(std::move(e)) {}
  RegionPin(RegionPin&& o) noexcept : entry_(std::move(o.entry_)) {}
  RegionPin& operator=(RegionPin&& o) noexcept {
    if (this != &o) {
      Reset();
      entry_ = std::move(o.entry_);
    }
    return *this;
  }
  RegionPin(const RegionPin&) = delete;
  RegionPin& operator=(const RegionPin&) = delete;
  ~RegionPin() { Reset(); }

  explicit operator bool() const { return entry_ != nullptr; }
  // REQUIRES: *this is not empty.
  const MemoryRegion& region() const { return entry_->region; }
  void Reset();

 private:
  std::shared_ptr<Entry> entry_;
};

class RegionTable {
 public:
  RegionTable() = default;
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  // Registers [base, base+length). Gives the region a fresh id and, when remotely
  // accessible, an unpredictable non-zero rkey. InvalidArgument for a null/empty range or
  // unknown access bits.
  Result<MemoryRegion> Register(void* base, uint64_t length, uint32_t access);
  // Removes the region (later Pin() of its rkey fails), then waits until every pin on it
  // is released. NotFound if it is not registered.
  Status Deregister(const MemoryRegion& region);
  // Pins the region with this rkey, or returns an empty pin.
  RegionPin Pin(uint32_t rkey) const;
  size_t size() const;

 private:
  // Read-mostly: every peer's one-sided op pins (shared), only (de)registration writes.
  mutable SharedMutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<RegionPin::Entry>> by_id_ GUARDED_BY(mu_);
  std::unordered_map<uint32_t, std::shared_ptr<RegionPin::Entry>> by_rkey_ GUARDED_BY(mu_);
  uint32_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace nova::transport
