// ScopedRegistration: caller memory registered with a transport for the life of the object,
// so the StoC client can WRITE from it or READ into it without a copy.
//
// Thread safety: not thread-safe; one owner.
#pragma once

#include <glog/logging.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/transport/transport.h"

namespace nova::stoc {

// Registers caller memory with the transport for the life of this object, as the source
// of one-sided WRITEs (kLocalOnly: no peer can touch it, so registering const bytes is
// safe) or the destination of a read (kRemoteWrite).
class ScopedRegistration {
 public:
  ScopedRegistration(transport::Transport* transport, const char* data, uint64_t n, uint32_t access)
      : transport_(transport) {
    auto r = transport_->RegisterMemory(const_cast<char*>(data), n, access);
    if (r.ok()) {
      region_ = r.value();
      registered_ = true;
    } else {
      status_ = r.status().Prepend("registering " + std::to_string(n) + " bytes");
    }
  }
  ~ScopedRegistration() {
    if (!registered_) return;
    Status s = transport_->DeregisterMemory(region_);
    LOG_IF(WARNING, !s.ok()) << "deregistering a table store buffer: " << s.ToString();
  }
  ScopedRegistration(const ScopedRegistration&) = delete;
  ScopedRegistration& operator=(const ScopedRegistration&) = delete;

  const Status& status() const { return status_; }
  const transport::MemoryRegion& region() const { return region_; }

 private:
  transport::Transport* const transport_;  // must outlive this
  transport::MemoryRegion region_;
  bool registered_ = false;
  Status status_;
};

}  // namespace nova::stoc
