// LogRecoveryReader: reads a range's logs back for recovery (docs/logc.md "Client
// structure", docs/durability.md "Recovery"):
//  - lists the range's files at every configured LogC, and refuses (Unavailable) while
//    min_insync_replicas or more of them cannot vouch for their listing (unreachable, or
//    not marked in sync for the range): a log with acknowledged writes may be on those only;
//  - reads each segment from the copy holding the most of it (in memory mode every copy,
//    the one reaching furthest wins), never from a copy shorter than one it could not read;
//  - hands the logs it read to LogRegistry, so LogRepairer re-replicates them until they
//    are deleted.
//
// Thread safety: all methods are thread-safe; ReadAll calls for one range must not overlap
// (the engine recovers a range once at a time). No state of its own: the range's refusal
// is kept by LogRegistry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "logc/client/log_client.h"
#include "logc/client/log_client_internal.h"
#include "logc/client/log_registry.h"
#include "logc/client/log_repairer.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

class LogRecoveryReader {
 public:
  // All pointers must outlive this.
  explicit LogRecoveryReader(const internal::LogParts& parts);
  LogRecoveryReader(const LogRecoveryReader&) = delete;
  LogRecoveryReader& operator=(const LogRecoveryReader&) = delete;

  // LogClient::ReadAll (log_client.h has the contract).
  Status ReadAll(uint32_t range, int threads, bool new_range, const LogClient::ReadFilter& read,
                 std::vector<LogClient::RecoveredLog>* logs, std::vector<uint64_t>* missing);

 private:
  using SegmentToRead = internal::SegmentToRead;

  // Reads one segment into *out from the source holding the most of it (every source in
  // memory mode); *holders gets the indexes (in seg.sources) of the sources holding all of
  // what was read, *length how much of *out is log bytes (memory files: up to the last
  // non-zero byte).
  Status ReadSegment(const SegmentToRead& seg, std::string* out, std::vector<size_t>* holders,
                     uint64_t* length);
  // Keeps a log read by ReadAll (held by `holders`), for re-replication.
  void AdoptRecovered(const SegmentToRead* const* segments, size_t n,
                      const std::vector<std::string>& holders,
                      const std::vector<uint64_t>& lengths);

  // Constant after construction; all must outlive this.
  const internal::LogParts parts_;
};

}  // namespace nova::logc
