// LogFencer: fences a range at the LogCs for its new owner (docs/logc.md "Fencing"), before
// the owner reads the range's logs (LogRecoveryReader). Each LogC that confirms a kFenceLogs
// has made every file of the range opened by an older owner read-only (under a fresh rkey)
// and drained its persisting, so nothing of it can be acknowledged any more that a read of
// the listing would not see.
//
// How many must confirm: a write is acknowledged once M (min_insync_replicas) replicas
// hold it, and its writer needs M LogCs that take its WRITEs (and, after a failure, its
// opens and copies) to acknowledge anything. With N configured LogCs, N - M + 1
// confirmations leave at most M - 1 unfenced: the old owner can complete no acknowledgment
// after the fence, and every write it had acknowledged is on at least one confirmed LogC
// (M + N - M + 1 > N), where the read after the fence sees it. It is also the number of
// LogCs LogRecoveryReader needs to vouch for their listings.
//
// Thread safety: all methods are thread-safe; no state of its own (the range's epoch and
// fenced mark are kept by LogRegistry).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "logc/client/log_client_internal.h"

namespace nova::logc {

class LogFencer {
 public:
  // All pointers must outlive this. parts.repairer is not used.
  explicit LogFencer(const internal::LogParts& parts);
  LogFencer(const LogFencer&) = delete;
  LogFencer& operator=(const LogFencer&) = delete;

  // LogClient::FenceRange (log_client.h has the contract).
  Status FenceRange(uint32_t range, uint64_t owner_epoch);

 private:
  // Constant after construction; all must outlive this.
  const internal::LogParts parts_;
};

}  // namespace nova::logc
