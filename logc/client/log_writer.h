// LogWriter: appends to a LogClient's logs with group commit (docs/logc.md "Client
// structure"):
//  - each log is a sequence of segments (LogC files of a fixed capacity), filled completely
//    before the next one is opened, at LogCs LogcReplicaSet chooses;
//  - concurrent appends to one log are group-committed: while one thread holds the log's
//    turn and has one WRITE per replica in flight, new appends queue, and the next turn
//    writes all of them at once;
//  - a replica that fails (error, timeout, missing persist acknowledgment) is dropped, and
//    an append is acknowledged only once min_insync_replicas replicas hold it (the turn
//    re-replicates through LogRepairer::EnsureInsync, or waits, then fails).
// Order within a turn, for each piece of the batch (DO NOT CHANGE: what an acknowledgment
// promises rests on it):
//  1. enough replicas (EnsureInsync) before anything of the batch is written;
//  2. sent_end moves past the piece before its WRITEs are posted (`reached` reports it);
//  3. the piece is held by every replica that did not fail (WRITE done, and persisted in
//     the persisted modes), and by M of them (EnsureInsync) before the next piece;
//  4. durable_end moves (the appenders return OK) only after the whole batch did 1-3, and,
//     for a log's first batch, after its LogCs were marked in sync for the range.
//
// Thread safety: all methods are thread-safe. The writer has no state of its own; a log's
// state is guarded by its mu (held only between calls out: never across the transport).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "logc/client/log_client_internal.h"
#include "logc/client/log_registry.h"
#include "logc/client/log_repairer.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

struct LogClientOptions;

class LogWriter {
 public:
  using Log = internal::Log;

  // All pointers must outlive this.
  explicit LogWriter(const internal::LogParts& parts);
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // LogClient::Append (log_client.h has the contract).
  Status Append(uint32_t range, uint64_t memtable, std::string_view bytes, bool* reached);

 private:
  // Writes `batch` to the log (opening segments as needed). REQUIRES: the caller holds the
  // log's turn, not its mu.
  Status RunTurn(const std::shared_ptr<Log>& log, std::string_view batch, uint64_t batch_start);
  // Opens the log's next segment: at new replicas for a new log, else at its replicas.
  Status OpenSegment(const std::shared_ptr<Log>& log, uint64_t capacity);
  // WRITEs a piece of a segment to every live replica and waits until each holds it or
  // failed. Unavailable when none holds it.
  Status WritePiece(const std::shared_ptr<Log>& log, size_t segment, uint64_t offset,
                    const char* data, uint64_t n);

  // Constant after construction; all must outlive this.
  const internal::LogParts parts_;
};

}  // namespace nova::logc
