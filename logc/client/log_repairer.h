// LogRepairer: failover and re-replication of a LogClient's logs (docs/logc.md "Client
// structure", docs/durability.md "Repair"):
//  - copies a log to other LogCs (its contents READ from a surviving replica and WRITTEN
//    there) until it has R live replicas: on the write path when fewer than
//    min_insync_replicas are live (EnsureInsync, within the log's group-commit turn), and
//    in a background pass every repair_interval, or at once after Wake(), for every log
//    with fewer than R (idle logs, logs of failed appends, recovered logs);
//  - marks ranges in sync at the LogCs (kMarkInSync) once every log of the range that
//    holds data has M live replicas, which lets a later recovery trust their listings.
// A copy is made only by the thread holding the log's turn (an appender, or the pass,
// which takes the turn between appends).
//
// Lifecycle: constructed, then Start() (runs the background pass), then Stop() (joins it)
// before the parts it uses go away.
// Thread safety: all methods are thread-safe. mu_ (the background thread's stop flag) is
// taken alone; the others are taken in LogRegistry's and LogcReplicaSet's orders, never
// while holding mu_.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "logc/client/log_client_internal.h"
#include "logc/client/log_registry.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

struct LogClientOptions;

class LogRepairer {
 public:
  using Log = internal::Log;

  // All pointers must outlive this.
  // parts.repairer is not used (it would be this).
  explicit LogRepairer(const internal::LogParts& parts);
  // REQUIRES: Stop() was called if Start() was.
  ~LogRepairer();
  LogRepairer(const LogRepairer&) = delete;
  LogRepairer& operator=(const LogRepairer&) = delete;

  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);
  // Runs a pass now (a LogC went down, a recovery read logs at fewer than R replicas).
  void Wake();

  // Copies the log to other LogCs until it has R live replicas, trying at most
  // `max_attempts` LogCs. REQUIRES: the caller holds the log's turn.
  void MaybeRereplicate(const std::shared_ptr<Log>& log, int max_attempts = 1 << 30);
  // Re-replicates until the log has min_insync_replicas live replicas, waiting for LogCs
  // to come back up to the timeout: OK, the log's dead status, or Unavailable.
  // REQUIRES: the caller holds the log's turn.
  Status EnsureInsync(const std::shared_ptr<Log>& log);
  // Marks `range` in sync at every configured LogC not yet marked (`only`, if not empty:
  // just these), when the range is fully replicated; not when the range is not served.
  void MarkRange(uint32_t range, const std::vector<std::string>& only = {});
  // True when every one of `logcs` is known to hold `range`'s in-sync mark.
  bool RangeMarkedAt(uint32_t range, const std::vector<std::string>& logcs) const;

 private:
  // True when every log of `range` holding data has M live replicas.
  bool RangeFullyReplicated(uint32_t range);
  Status CopyTo(const std::shared_ptr<Log>& log, const std::string& logc_id);
  void RepairLoop() EXCLUDES(mu_);
  // One pass: re-replicates under-replicated logs (those whose turn is free), marks ranges.
  void RepairPass();

  // Constant after construction; all must outlive this.
  const internal::LogParts parts_;

  Mutex mu_;
  CondVar cv_;  // Wake() and Stop()
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // RepairLoop; started by Start()
};

}  // namespace nova::logc
