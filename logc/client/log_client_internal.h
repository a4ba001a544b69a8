// What the parts of LogClient share (docs/logc.md "Client structure"): the settings and
// metrics the facade owns, a log and its replicas, staging buffers for one-sided ops, and
// small helpers. Not for use outside logc/client/.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/transport/transport.h"
#include "logc/client/log_mode.h"
#include "logc/client/logc_protocol.h"

namespace nova::rpc {
class RpcEndpoint;
}  // namespace nova::rpc

namespace nova::logc {
struct LogClientOptions;
class LogcReplicaSet;
class LogRegistry;
class LogRepairer;
}  // namespace nova::logc

namespace nova::logc::internal {

// Largest segment the client asks for (a LogC's default --logc max): bigger batches are
// split over several segments.
inline constexpr uint64_t kMaxSegmentBytes = 1ull << 30;
// Staging buffers at least this big are kept between turns; bigger ones are freed when a
// turn ends, so an idle log holds little memory.
inline constexpr uint64_t kKeptStagingBytes = 1ull << 20;
// Background deletes queued at most (beyond that Delete runs them inline).
inline constexpr size_t kMaxQueuedDeletes = 1024;

inline std::string LogName(uint32_t range, uint64_t memtable) {
  return "log r" + std::to_string(range) + " m" + std::to_string(memtable);
}

// How much of a log segment a copy holds, as listed: fdatasync'd bytes in mode disk (they
// are read from the disk), received bytes of a persisted file read one-sidedly in mode
// memory+disk; memory files do not know it (0).
inline uint64_t HeldBytes(LogMode mode, const LogFileInfo& f) {
  return f.persisted && mode != LogMode::kDisk ? f.length : f.persisted_length;
}

// The log mode and replica counts: LogClientOptions' until Configure changes them (before
// any log is opened). Read by every part without a lock.
struct LogSettings {
  std::atomic<LogMode> mode{LogMode::kMemory};
  std::atomic<int> replicas{2};
  std::atomic<int> min_insync{0};  // 0: replicas

  // M: how many replicas must hold a write before it is acknowledged.
  int InsyncTarget() const {
    const int r = replicas.load();
    const int m = min_insync.load();
    return m <= 0 ? r : std::min(m, r);
  }
};

// The client's metrics (in the facade's registry; GetStats reads them back) and what the
// last repair pass found. Counters and atomics: thread-safe.
struct LogClientMetrics {
  Counter* appends = nullptr;
  Counter* writes = nullptr;
  Counter* bytes = nullptr;
  Counter* replica_failures = nullptr;
  Counter* rereplications = nullptr;
  Counter* errors = nullptr;
  Counter* recovery_refusals = nullptr;
  Histogram* append_latency_us = nullptr;
  // Gauges of the last completed repair pass, and how many passes completed.
  std::atomic<uint64_t> underreplicated{0};
  std::atomic<uint64_t> unsynced_logcs{0};
  std::atomic<uint64_t> repair_passes{0};
};

// What the writer, the repairer and the recovery reader reach: the facade's options,
// settings, endpoint, metrics and the parts beneath them. Every pointer is owned by the
// LogClient and outlives the parts.
struct LogParts {
  const LogClientOptions* options = nullptr;
  const LogSettings* settings = nullptr;
  rpc::RpcEndpoint* endpoint = nullptr;
  LogcReplicaSet* logcs = nullptr;
  LogRegistry* registry = nullptr;
  LogRepairer* repairer = nullptr;  // null in the repairer's own
  LogClientMetrics* m = nullptr;
};

// A registered local buffer that the transport reads from (WRITE) or writes into (READ).
// Shared with the completions of the ops using it, so a late completion (after a timeout)
// never finds it freed. Thread safety: `inflight` is atomic; the rest is constant once
// made (the bytes belong to the thread that posts the ops).
struct Staging {
  transport::Transport* transport = nullptr;
  std::unique_ptr<char[]> mem;
  transport::MemoryRegion mr;
  uint64_t size = 0;
  std::atomic<int> inflight{0};  // ops posted whose completion has not run
  ~Staging() {
    if (transport != nullptr) transport->DeregisterMemory(mr).IgnoreError();
  }
};

// A staging buffer of `bytes` registered with `transport`; null with *error set when the
// registration fails.
std::shared_ptr<Staging> NewStaging(transport::Transport* transport, uint64_t bytes,
                                    Status* error);
// Posts a one-sided op on `staging` and waits up to `timeout` for its completion: the
// op's status, post's error, or TimedOut.
Status WaitOp(const std::shared_ptr<Staging>& staging,
              const std::function<Status(transport::Completion)>& post,
              std::chrono::milliseconds timeout);

// One LogC holding a copy of a log. Every field but the constant ones is read and written
// under the mutex of the log holding the replica (Log::mu): that lock lives in another
// object, which the analysis cannot name, so the fields carry no GUARDED_BY.
struct Replica {
  struct Segment {
    uint32_t handle = 0;
    transport::RemoteAddr addr;
    uint64_t persisted = 0;  // acknowledged by kLogPersisted
    Status ack_error;        // a kLogPersisted that reported a failure
  };
  std::string logc_id;                          // constant once the replica is in a log
  transport::PeerId peer = transport::kInvalidPeer;  // constant once in a log
  uint64_t incarnation = 0;       // of the LogC process holding it (0: not known yet)
  std::vector<Segment> segments;  // parallel to Log::capacity
  bool failed = false;
  Status why;  // when failed
  // The WRITE of the current piece.
  uint64_t op_seq = 0;
  bool op_done = true;
  Status op_status;
};

// One log: (range, memtable), its segments and replicas, and the group-commit state.
// Thread safety: fields are guarded by `mu`; `staging` belongs to the thread holding the
// turn (turn == true), which is also the only one that opens segments or adds replicas.
struct Log {
  // Constant after creation.
  uint32_t range = 0;
  uint64_t memtable = 0;

  Mutex mu;
  CondVar cv;  // turn ended, op completed, ack arrived, replica failed
  std::string pending GUARDED_BY(mu);      // appended, not yet taken by a turn
  uint64_t queued_end GUARDED_BY(mu) = 0;  // logical end of every byte appended
  uint64_t durable_end GUARDED_BY(mu) = 0;  // bytes [0, durable_end) hold the mode's guarantee
  uint64_t sent_end GUARDED_BY(mu) = 0;  // bytes [0, sent_end) may have reached a replica
  bool turn GUARDED_BY(mu) = false;      // a thread is writing a batch
  Status dead GUARDED_BY(mu);  // set once an append failed (no more appends), or deleted
  // Read back by ReadAll: kept and re-replicated, not appended to.
  bool recovered GUARDED_BY(mu) = false;
  bool deleted GUARDED_BY(mu) = false;  // Delete ran: no replica may be added any more
  std::vector<uint64_t> capacity GUARDED_BY(mu);  // per segment
  uint64_t written GUARDED_BY(mu) = 0;            // bytes in the last segment
  std::vector<std::shared_ptr<Replica>> replicas GUARDED_BY(mu);
  // Owned by the thread holding the turn.
  std::shared_ptr<Staging> staging;

  // Replicas not failed.
  int LiveLocked() const REQUIRES(mu) {
    int live = 0;
    for (const auto& r : replicas) live += r->failed ? 0 : 1;
    return live;
  }
};

// One segment of a recovered log and where it can be read.
struct SegmentToRead {
  struct Source {
    std::string logc_id;
    transport::PeerId peer;
    LogFileInfo info;
    uint64_t incarnation = 0;  // of the LogC, from its listing
  };
  uint32_t range = 0;
  uint64_t memtable = 0;
  uint32_t segment = 0;
  std::vector<Source> sources;  // best first
};

}  // namespace nova::logc::internal
