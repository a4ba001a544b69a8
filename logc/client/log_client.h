// LogClient: the LTC's side of the log (DESIGN.md section 6, docs/logc.md). Appends opaque
// bytes to one log per (range, memtable), replicated at `replicas` LogCs:
//  - each log is a sequence of segments (LogC files of a fixed capacity), filled completely
//    before the next one is opened, so a log's bytes are the concatenation of its segments;
//  - appends are one-sided WRITEs into the segment's region at every replica; in the
//    persisted modes they carry the segment's handle as immediate and complete when the
//    LogC reports them fdatasync'd (kLogPersisted);
//  - concurrent appends to one log are group-committed: while one WRITE per replica is in
//    flight new appends queue, and the next turn writes all of them at once;
//  - a replica that fails (error, timeout, peer down) is dropped from the log; the log is
//    re-replicated to another LogC (its contents READ from a survivor and WRITTEN there)
//    within the log's group-commit turn, and an append is acknowledged only once at least
//    min_insync_replicas replicas hold it (else it waits, then fails with Unavailable);
//  - a background repairer re-replicates every log with fewer than R replicas (idle logs,
//    logs of failed appends and logs read back by recovery included) as soon as a LogC is
//    reachable, and then marks the range in sync at the LogCs (kMarkInSync), which is what
//    lets a later recovery trust a LogC's listing (docs/durability.md "Recovery");
//  - a LogC that restarted is recognized by its incarnation: replicas it held in an
//    earlier incarnation are dropped, never written under stale offsets;
//  - owner fencing (docs/logc.md "Fencing"): a new owner of a range fences it at the LogCs
//    (FenceRange) before it reads the range's logs; from then on the older owner's appends
//    fail with Status::Fenced and it writes, copies and deletes nothing more of the range.
//
// Structure (docs/logc.md "Client structure"): LogClient is a facade over six parts, each
// with one job and its own header: LogcReplicaSet (which LogCs exist, their reachability,
// the choice of LogCs for new replicas), LogRegistry (the logs held, their replicas'
// bookkeeping and persist acknowledgments, ranges' owner epochs and fenced marks),
// LogWriter (appends with group commit), LogRepairer (failover, re-replication, in-sync
// marks, the background pass), LogFencer (fencing a range for its new owner) and
// LogRecoveryReader (recovery reads).
//
// Thread safety: all public methods are thread-safe. Lock order, across the parts:
// LogcReplicaSet::connect_mu_ alone (then its mu_); LogRegistry::mu_, then a log's mu, then
// LogRegistry::acks_mu_; LogcReplicaSet::mu_ is a leaf (may be taken under
// LogRegistry::mu_ and a log's mu); LogRepairer::mu_ alone. No lock is held across a
// request to a LogC or a wait for one, but connect_mu_ across a connect (a log's mu is
// released while a thread waits on its condition variable).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/thread_pool.h"
#include "common/transport/transport.h"
#include "logc/client/log_mode.h"
#include "logc/client/logc_protocol.h"

namespace nova::logc {

struct LogClientOptions {
  LogMode mode = LogMode::kMemory;
  int replicas = 2;                      // --log_replicas (R)
  // --log_min_insync_replicas: an append is acknowledged only once this many replicas hold
  // it (Kafka's min.insync.replicas); 0 means `replicas`. With fewer live replicas an
  // append waits for LogCs to come back (or re-replicates to a spare) for up to `timeout`
  // and then fails with Unavailable. Recovery trusts a listing only as far as this many
  // copies were promised (docs/durability.md).
  int min_insync_replicas = 0;
  uint64_t segment_bytes = 16ull << 20;  // capacity of a segment (~ memtable size + slack)
  // Per WRITE, persist acknowledgment, READ and control request: a replica that misses it
  // is failed. Also how long an append waits for enough replicas.
  std::chrono::milliseconds timeout{5000};
  // A LogC that failed is tried again (for new logs and re-replication) after this long,
  // so a LogC that comes back is used at once; while its connection is down it is chosen
  // only when no connected LogC is left.
  std::chrono::milliseconds retry_interval{100};
  // How often the background repairer re-replicates logs with fewer than R replicas (idle
  // and recovered logs included) and marks LogCs in sync.
  std::chrono::milliseconds repair_interval{100};
  // Ranges whose recovery goes on even when a log that may hold acknowledged writes cannot
  // be read (an operator's decision after every replica of a log was lost for good: what
  // may be lost is logged). --ltc_force_recovery_ranges.
  std::vector<uint32_t> force_recovery_ranges;
};

namespace internal {
struct LogSettings;
struct LogClientMetrics;
}  // namespace internal
class LogcReplicaSet;
class LogRegistry;
class LogRepairer;
class LogWriter;
class LogFencer;
class LogRecoveryReader;

class LogClient : public rpc::RpcService, public rpc::EndpointObserver {
 public:
  // `endpoint` is the process's RpcEndpoint (attached to its transport); the constructor
  // registers a service for kLogPersisted and an observer on it.
  // REQUIRES: constructed before the endpoint's transport starts. `endpoint` and `metrics`
  // (may be null) must outlive this.
  LogClient(LogClientOptions options, rpc::RpcEndpoint* endpoint, MetricsRegistry* metrics);
  // Waits for queued deletes. REQUIRES: no Append or ReadAll is running, and the endpoint's
  // transport is shut down (its events reach this object as an observer).
  ~LogClient() override;
  LogClient(const LogClient&) = delete;
  LogClient& operator=(const LogClient&) = delete;

  // Sets the mode and replica count after construction: an LTC learns the cluster's
  // log_mode and log_replicas settings from its first configuration, after its transport
  // started. IllegalState once any log was opened (logs keep the mode they started with).
  // REQUIRES: no Append or ReadAll runs concurrently.
  // `min_insync` 0 means `replicas`. InvalidArgument if min_insync > replicas.
  Status Configure(LogMode mode, int replicas, int min_insync = 0);
  LogMode mode() const;

  // The LogCs to choose replicas from: id -> exchange-transport address. Replaces the set
  // (logs keep replicas on LogCs that left it until those fail). Connects lazily.
  void SetLogcs(std::map<std::string, std::string> logcs);

  // Appends `bytes` to the log of (range, memtable), opening it (at `replicas` LogCs with the
  // fewest open logs of this client, ties by id, skipping failed ones) on first use. Blocks
  // until the mode's guarantee holds at every live replica, and at least
  // min_insync_replicas of them: memory = the WRITE completed there; disk, memory+disk =
  // the LogC reported the bytes fdatasync'd. Returns OK then; InvalidArgument in mode
  // none; Unavailable when fewer than min_insync_replicas replicas could be kept for
  // `timeout` (or none is left); Aborted if the log was deleted while the append waited;
  // Fenced once a LogC said a newer owner fenced the range (IsFenced(range) is then true,
  // and every later Append of the range fails Fenced at once: the bytes are not
  // acknowledged, and not retried on another LogC; the caller stops serving the range).
  // After a failure the log is dead for appends (every later Append fails at once) but is
  // still re-replicated in the background: it may hold acknowledged bytes.
  // *reached (if not null) is set false when the append failed and none of `bytes` was
  // sent to any replica: they are in no log.
  Status Append(uint32_t range, uint64_t memtable, std::string_view bytes,
                bool* reached = nullptr);
  // Nanoseconds the calling thread has spent in Append (of any LogClient) since it
  // started: a server attributes the log appends of the request a thread serves to it by
  // the difference around the request. Per thread, no synchronization. (The process-wide
  // figure is log_client_append_us_total.)
  static uint64_t ThreadAppendNanos();

  // Deletes the logs of these memtables at every LogC this client knows (their replicas
  // included), in the background: returns at once; failures are logged and counted.
  // Appends to them still waiting fail with Aborted. In a fenced range the logs are only
  // dropped here: nothing is deleted at the LogCs (the newer owner may need them).
  // REQUIRES: no later Append to these memtables (it would start a new log, which the
  // background delete may remove).
  void Delete(uint32_t range, std::vector<uint64_t> memtables);

  // A recovered log: its bytes (segments concatenated in order; memory logs are read whole,
  // so they may end in zero bytes) and the LogCs holding a replica of it.
  struct RecoveredLog {
    uint64_t memtable = 0;
    std::string bytes;
    std::vector<std::string> replicas;
    bool read = true;  // false: only listed (ReadAll's `read` said so); bytes and replicas empty
  };
  // Which logs ReadAll reads (null: all): a log whose memtable it returns false for is only
  // listed. Called on the calling thread.
  using ReadFilter = std::function<bool(uint64_t memtable)>;
  // Reads every log of `range` found at the LogCs of SetLogcs, each segment from the replica
  // holding the most of it (in memory mode every replica is read: a memory file does not
  // know its length). Up to `threads` segments are read in parallel. *logs gets the logs
  // read completely, by memtable id; *missing the memtables of which a segment could be
  // read from no replica (or that this client wrote but no reachable LogC lists). The logs
  // read are kept by this client (re-replicated in the background until deleted).
  // Returns OK; InvalidArgument in mode none; Unavailable (with why, also logged and
  // counted on /metrics) when min_insync_replicas or more LogCs are unreachable or not in
  // sync for the range, so a log with acknowledged writes may be on none of those listed.
  // `new_range`: the range has never been opened (its MANIFEST was just created), so there
  // is nothing to miss. Ranges in force_recovery_ranges are never refused; what they may
  // lose is logged. Fenced if the range is fenced here.
  // A new owner (owner epoch > 0) calls FenceRange first and reads only if it succeeded.
  // `read` (if not null): a log it returns false for is listed but none of its segments is
  // read, it is not kept by this client (nor re-replicated; Delete still deletes it at every
  // LogC), and it comes back in *logs with read false and no bytes; it is never missing.
  Status ReadAll(uint32_t range, int threads, bool new_range, const ReadFilter& read,
                 std::vector<RecoveredLog>* logs, std::vector<uint64_t>* missing);
  // True while logs of `range` that ReadAll listed without reading are not deleted yet (the
  // range then does not count as fully replicated: docs/durability.md).
  bool HasUnreadLogs(uint32_t range) const;
  Status ReadAll(uint32_t range, int threads, bool new_range, std::vector<RecoveredLog>* logs,
                 std::vector<uint64_t>* missing) {
    return ReadAll(range, threads, new_range, nullptr, logs, missing);
  }
  Status ReadAll(uint32_t range, int threads, std::vector<RecoveredLog>* logs,
                 std::vector<uint64_t>* missing) {
    return ReadAll(range, threads, /*new_range=*/false, nullptr, logs, missing);
  }

  // The range is closed here (it may open elsewhere): the repairer no longer marks it in
  // sync at LogCs. Its logs stay until deleted. A fenced range is abandoned: its logs are
  // dropped here (waiting appends fail Fenced), not deleted anywhere, never repaired.
  void ForgetRange(uint32_t range);

  // Fences `range` for its new owner, this client, of `owner_epoch` (> 0; 0 is legacy: OK,
  // nothing done). Call it before ReadAll of the range. Sends kFenceLogs to every
  // configured LogC (in parallel, each up to `timeout`); a LogC confirms once no owner of an
  // older epoch can write or persist anything more there (docs/logc.md "Fencing").
  // Returns OK when at least N - M + 1 of the N configured LogCs confirmed (M =
  // min_insync_replicas; log_fencer.h says why: the old owner is then left fewer than M
  // LogCs to acknowledge on, and every write it acknowledged is on a confirmed one);
  // Unavailable naming the LogCs that did not confirm otherwise (the caller retries, the
  // range waits); Fenced when a LogC holds a newer owner's fence for the range (this
  // client is stale: IsFenced(range) becomes true). OK in mode none. From the call on,
  // every open, delete and in-sync mark of the range by this client carries the epoch.
  // Logs of the range this client still holds from an older epoch (its own earlier
  // tenure) are let go (not deleted): ReadAll reads them back.
  // REQUIRES: the range is not open here (no Append or ReadAll of it runs); every owner
  // with an epoch > 0 calls it when it opens the range, a new one included.
  Status FenceRange(uint32_t range, uint64_t owner_epoch);
  // True once a LogC answered Fenced for `range` (an Append, open, copy, in-sync mark,
  // delete or FenceRange): a newer owner has it. Cleared only by FenceRange with a newer
  // epoch (the range came back to this client).
  bool IsFenced(uint32_t range) const;

  struct Stats {
    uint64_t appends = 0;           // Append calls that wrote bytes
    uint64_t writes = 0;            // group-commit rounds (one WRITE per live replica each)
    uint64_t bytes = 0;             // bytes appended
    uint64_t replica_failures = 0;  // replicas dropped from logs
    uint64_t rereplications = 0;    // replicas added to logs by copying
    uint64_t underreplicated = 0;   // logs holding data with fewer than R live replicas
    uint64_t unsynced_logcs = 0;    // LogCs not yet marked in sync for every range known
    uint64_t recovery_refusals = 0; // ReadAll calls refused (a log might be missed)
    // Repair passes completed: `underreplicated` and `unsynced_logcs` are as of the last
    // one, so a caller that wants them to reflect an event waits for a pass after it.
    uint64_t repair_passes = 0;
  };
  Stats GetStats() const;

  // rpc::RpcService: kLogPersisted notifications.
  void HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) override;
  // rpc::EndpointObserver: fails the replicas on a LogC that went down.
  void OnPeerDown(transport::PeerId peer, const Status& why) override;

 private:
  // Drops the range's logs from this client without deleting them at the LogCs (waiting
  // appends fail with `why`) and stops serving the range.
  void AbandonLogs(uint32_t range, const Status& why);

  // Constant after construction.
  const LogClientOptions options_;
  rpc::RpcEndpoint* const endpoint_;  // must outlive this
  std::unique_ptr<MetricsRegistry> own_metrics_;  // when none was given
  MetricsRegistry* metrics_ = nullptr;            // given or own_metrics_; outlives this
  Counter* append_us_ = nullptr;  // log_client_append_us_total, in metrics_

  // Shared with the parts (log_client_internal.h): atomics and counters.
  std::unique_ptr<internal::LogSettings> settings_;
  std::unique_ptr<internal::LogClientMetrics> m_;

  // The parts, each below the next (a part uses only those declared before it; they are
  // destroyed in reverse order, after the repairer was stopped and the deletes drained).
  std::unique_ptr<LogcReplicaSet> logcs_;
  std::unique_ptr<LogRegistry> registry_;
  std::unique_ptr<LogRepairer> repairer_;
  std::unique_ptr<LogWriter> writer_;
  std::unique_ptr<LogFencer> fencer_;
  std::unique_ptr<LogRecoveryReader> reader_;

  ThreadPool delete_pool_;  // background deletes; last member: drained first
};

}  // namespace nova::logc
