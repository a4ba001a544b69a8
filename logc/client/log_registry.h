// LogRegistry: the logs a LogClient holds and the bookkeeping of their replicas (docs/logc.md
// "Client structure"):
//  - the logs by (range, memtable), the ranges this client serves (logged or recovered),
//    and the ranges whose last recovery was refused;
//  - opening a segment of a log at a replica (kOpenLog) and routing the LogC's persist
//    acknowledgments (kLogPersisted) to that replica's segment;
//  - dropping failed replicas from a log, and failing the replicas a LogC lost: its
//    connection went down, or it restarted (a new incarnation);
//  - listing a range's files at a LogC (kListLogs), which tells its incarnation;
//  - each range's owner epoch (carried by every open) and whether a LogC answered Fenced
//    for it: a newer owner has the range, and this client writes and repairs nothing more
//    of it (docs/logc.md "Fencing").
// It decides nothing about placement (LogcReplicaSet does) nor when to copy (LogRepairer).
//
// Thread safety: all methods are thread-safe. Lock order: incarnation_mu_, then mu_, then a
// log's mu, then acks_mu_; epochs_mu_ is a leaf (any lock may be held when taking it);
// LogcReplicaSet's mu_ is a leaf (Adopt takes it under mu_ and a log's mu; it is
// never held while taking ours). No lock of this class is held while calling the transport or the
// `on_replica_lost` hook.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "logc/client/log_client_internal.h"
#include "logc/client/logc_protocol.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

class LogRegistry {
 public:
  using Log = internal::Log;
  using Replica = internal::Replica;

  // All pointers must outlive this. `on_replica_lost` runs (without locks) after replicas
  // were failed because their LogC went down or restarted: the facade wakes the repairer.
  LogRegistry(const internal::LogSettings* settings, std::chrono::milliseconds timeout,
              rpc::RpcEndpoint* endpoint, LogcReplicaSet* logcs, internal::LogClientMetrics* m,
              std::function<void()> on_replica_lost);
  LogRegistry(const LogRegistry&) = delete;
  LogRegistry& operator=(const LogRegistry&) = delete;

  // ---- The logs and ranges ----
  // The log of (range, memtable), created empty if there is none; the range is served.
  std::shared_ptr<Log> GetOrCreate(uint32_t range, uint64_t memtable) EXCLUDES(mu_);
  std::vector<std::shared_ptr<Log>> All() const EXCLUDES(mu_);
  std::vector<std::shared_ptr<Log>> LogsOf(uint32_t range) const EXCLUDES(mu_);
  // Removes these logs from the registry and returns them.
  std::vector<std::shared_ptr<Log>> Remove(uint32_t range, const std::vector<uint64_t>& memtables)
      EXCLUDES(mu_);
  // Memtables of `range` this client wrote to (acknowledged bytes, not recovered).
  std::set<uint64_t> WrittenMemtables(uint32_t range) const EXCLUDES(mu_);
  // Keeps a log read back by recovery, in place of an earlier recovered one (a log this
  // client writes stays as it is), and counts it at its replicas' LogCs.
  void Adopt(std::shared_ptr<Log> log) EXCLUDES(mu_);
  // Runs `change` while no log exists (under mu_, so none is created meanwhile);
  // IllegalState if a log exists.
  Status WhileNoLogs(const std::function<Status()>& change) EXCLUDES(mu_);

  std::set<uint32_t> Ranges() const EXCLUDES(mu_);
  bool Serves(uint32_t range) const EXCLUDES(mu_);
  void ForgetRange(uint32_t range) EXCLUDES(mu_);
  // Removes every log of `range` from the registry and returns them, and stops serving it.
  std::vector<std::shared_ptr<Log>> RemoveRange(uint32_t range) EXCLUDES(mu_);
  // Recovery of `range` was refused (Block) or goes on (Unblock: it is served from now).
  void Block(uint32_t range) EXCLUDES(mu_);
  void Unblock(uint32_t range) EXCLUDES(mu_);
  size_t BlockedCount() const EXCLUDES(mu_);
  // Logs a recovery listed but did not read (ReadAll's read filter: a live migration copied
  // their memtables). They are not in the registry, so nothing re-replicates them; until
  // they are deleted the range does not count as fully replicated, so no LogC is marked in
  // sync for it without holding them (a later recovery must not trust its listing).
  void NoteUnread(uint32_t range, const std::vector<uint64_t>& memtables) EXCLUDES(mu_);
  void ForgetUnread(uint32_t range, const std::vector<uint64_t>& memtables) EXCLUDES(mu_);
  bool HasUnread(uint32_t range) const EXCLUDES(mu_);

  // ---- Owner epochs and fences ----
  // The owner epoch this client holds `range` under from now on (0: legacy, unfenced). A
  // newer epoch than the range's earlier one clears its fenced mark (the range came back).
  void SetEpoch(uint32_t range, uint64_t epoch) EXCLUDES(epochs_mu_);
  uint64_t EpochOf(uint32_t range) const EXCLUDES(epochs_mu_);
  // A LogC answered Fenced (`why`) for `range`: sticky until a newer SetEpoch.
  void MarkFenced(uint32_t range, const Status& why) EXCLUDES(epochs_mu_);
  bool IsFenced(uint32_t range) const EXCLUDES(epochs_mu_);
  // What an operation on a fenced range returns: Status::Fenced naming the range, the
  // epoch and the LogC's answer. REQUIRES: IsFenced(range).
  Status FencedError(uint32_t range) const EXCLUDES(epochs_mu_);
  // Re-sends the idempotent open of `segment` of `log` to the replica's LogC with the
  // range's epoch after a WRITE there failed: Fenced (and the range marked fenced) when a
  // newer owner fenced the range there; OK or another error otherwise (the replica's
  // failure stands either way). REQUIRES: no lock of `log` held.
  Status Probe(const std::shared_ptr<Log>& log, const Replica& rep, uint32_t segment,
               uint64_t capacity) EXCLUDES(epochs_mu_);
  // The open of `segment` of `log` as OpenAt and Probe send it: the mode's persistence and
  // the range's owner epoch.
  OpenLogRequest OpenRequestFor(const Log& log, uint32_t segment, uint64_t capacity) const
      EXCLUDES(epochs_mu_);

  // ---- Replicas ----
  // Opens segment `segment` of `log` at the replica's LogC, under the range's owner epoch
  // (Fenced, and the range marked fenced, when a newer owner fenced it there); checks its
  // capacity and (when persisted) that it is not still persisting. On success appends the replica's
  // segment entry (and, persisted, its ack route). Aborted if the LogC restarted since the
  // replica's earlier segments were opened. REQUIRES: no lock of `log` held.
  Status OpenAt(const std::shared_ptr<Log>& log, const std::shared_ptr<Replica>& rep,
                uint32_t segment, uint64_t capacity) EXCLUDES(acks_mu_);
  // Moves the failed replicas of `log` to *reaped.
  static void ReapFailedLocked(Log* log, std::vector<std::shared_ptr<Replica>>* reaped)
      REQUIRES(log->mu);
  // Bookkeeping of replicas that left their log: open counts, ack routes, and (failed) the
  // LogC's retry interval and the failure count.
  void Forget(const std::vector<std::shared_ptr<Replica>>& reaped, bool failed)
      EXCLUDES(acks_mu_);
  void DropAckRoutes(const Replica& rep) EXCLUDES(acks_mu_);
  // A kLogPersisted from `peer`: updates the segment it routes to (one reporting Fenced
  // marks the log's range fenced).
  void HandlePersisted(transport::PeerId peer, const LogPersisted& m) EXCLUDES(acks_mu_);
  // The connection `peer` went down: the replicas there fail (the caller wakes the
  // repairer).
  void FailReplicasAt(transport::PeerId peer, const Status& why) EXCLUDES(mu_);
  // A LogC answered with `incarnation`: if it is new, the replicas this client has there in
  // an older incarnation fail (a restart lost them) and on_replica_lost runs. Returns only
  // once they have failed, also when another thread noted the incarnation first: a caller
  // that goes on to judge the range's replication (LogRepairer::MarkRange, after ListAt)
  // never counts a copy the restart lost.
  void NoteIncarnation(const std::string& logc_id, uint64_t incarnation)
      EXCLUDES(incarnation_mu_, mu_);
  // Lists `range`'s files at a LogC (connecting first: *peer) and notes its incarnation.
  Result<ListLogsResponse> ListAt(const std::string& logc_id, uint32_t range,
                                  transport::PeerId* peer) EXCLUDES(incarnation_mu_, mu_);

 private:
  // NoteIncarnation's second step. REQUIRES: incarnation_mu_ held.
  void FailReplicasOfOlderIncarnations(const std::string& logc_id, uint64_t incarnation)
      REQUIRES(incarnation_mu_) EXCLUDES(mu_);

  struct AckRoute {
    std::weak_ptr<Log> log;
    std::shared_ptr<Replica> replica;
    size_t segment = 0;
  };

  // Constant after construction.
  const internal::LogSettings* const settings_;  // must outlive this
  const std::chrono::milliseconds timeout_;
  rpc::RpcEndpoint* const endpoint_;          // must outlive this
  LogcReplicaSet* const logcs_;               // must outlive this
  internal::LogClientMetrics* const m_;       // must outlive this
  const std::function<void()> on_replica_lost_;

  // Held across both steps of NoteIncarnation (the replica set learns the incarnation, then
  // the replicas of older ones fail), so that no thread sees the new incarnation as known
  // while those replicas still count as live. Guards no member.
  Mutex incarnation_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  std::map<std::pair<uint32_t, uint64_t>, std::shared_ptr<Log>> logs_ GUARDED_BY(mu_);
  std::set<uint32_t> ranges_ GUARDED_BY(mu_);          // ranges logged or recovered here
  std::set<uint32_t> blocked_ranges_ GUARDED_BY(mu_);  // whose last ReadAll was refused
  std::map<uint32_t, std::set<uint64_t>> unread_ GUARDED_BY(mu_);  // NoteUnread

  struct RangeEpoch {
    uint64_t epoch = 0;
    bool fenced = false;
    Status why;  // the LogC's answer, when fenced
  };
  mutable Mutex epochs_mu_;
  std::map<uint32_t, RangeEpoch> epochs_ GUARDED_BY(epochs_mu_);

  Mutex acks_mu_;
  // Where kLogPersisted of (LogC peer, handle) goes.
  std::map<std::pair<transport::PeerId, uint32_t>, AckRoute> acks_ GUARDED_BY(acks_mu_);
};

}  // namespace nova::logc
