#include "common/transport/region_table.h"

#include "common/transport/handshake.h"

namespace nova::transport {

void RegionPin::Reset() {
  if (entry_ == nullptr) return;
  if (entry_->pins.fetch_sub(1, std::memory_order_acq_rel) == 1) entry_->pins.notify_all();
  entry_.reset();
}

Result<MemoryRegion> RegionTable::Register(void* base, uint64_t length, uint32_t access) {
  if (base == nullptr || length == 0) {
    return Status::InvalidArgument("cannot register an empty memory range");
  }
  if ((access & ~(kRemoteRead | kRemoteWrite)) != 0) {
    return Status::InvalidArgument("unknown access flags " + std::to_string(access));
  }
  auto entry = std::make_shared<RegionPin::Entry>();
  MemoryRegion& r = entry->region;
  r.base = static_cast<char*>(base);
  r.length = length;
  r.access = access;
  WriterMutexLock lock(&mu_);
  r.id = next_id_++;
  if (access != kLocalOnly) {
    // Unpredictable keys: a peer cannot guess another region's key from its own.
    do {
      r.rkey = static_cast<uint32_t>(RandomU64());
    } while (r.rkey == 0 || by_rkey_.count(r.rkey) != 0);
    by_rkey_[r.rkey] = entry;
  }
  by_id_[r.id] = entry;
  return r;
}

Status RegionTable::Deregister(const MemoryRegion& region) {
  std::shared_ptr<RegionPin::Entry> entry;
  {
    WriterMutexLock lock(&mu_);
    auto it = by_id_.find(region.id);
    if (it == by_id_.end()) {
      return Status::NotFound("memory region " + std::to_string(region.id) + " not registered");
    }
    entry = it->second;
    by_id_.erase(it);
    if (entry->region.rkey != 0) by_rkey_.erase(entry->region.rkey);
  }
  // No new pins can be taken now; wait for the in-flight ones.
  int64_t pins = entry->pins.load(std::memory_order_acquire);
  while (pins != 0) {
    entry->pins.wait(pins, std::memory_order_acquire);
    pins = entry->pins.load(std::memory_order_acquire);
  }
  return Status::OK();
}

RegionPin RegionTable::Pin(uint32_t rkey) const {
  if (rkey == 0) return RegionPin();
  ReaderMutexLock lock(&mu_);
  auto it = by_rkey_.find(rkey);
  if (it == by_rkey_.end()) return RegionPin();
  it->second->pins.fetch_add(1, std::memory_order_acq_rel);
  return RegionPin(it->second);
}

size_t RegionTable::size() const {
  ReaderMutexLock lock(&mu_);
  return by_id_.size();
}

}  // namespace nova::transport
