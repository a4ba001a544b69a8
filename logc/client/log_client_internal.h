// The parts of LogClient's implementation that its source files share (log_client.cc:
// LogCs, configuration and deletes; log_writer.cc: appends with group commit and
// failing replicas; log_repair.cc: re-replication and in-sync marks; log_recovery.cc:
// recovery reads). Not for use outside logc/client/.
#pragma once

#include <cstdint>
#include <string>

#include "logc/client/log_client.h"

namespace nova::logc {

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

// A registered local buffer that the transport reads from (WRITE) or writes into (READ).
// Shared with the completions of the ops using it, so a late completion (after a timeout)
// never finds it freed.
struct LogClient::Staging {
  transport::Transport* transport = nullptr;
  std::unique_ptr<char[]> mem;
  transport::MemoryRegion mr;
  uint64_t size = 0;
  std::atomic<int> inflight{0};  // ops posted whose completion has not run
  ~Staging() {
    if (transport != nullptr) transport->DeregisterMemory(mr).IgnoreError();
  }
};

// One LogC holding a copy of a log. Fields are protected by the log's mu.
struct LogClient::Replica {
  struct Segment {
    uint32_t handle = 0;
    transport::RemoteAddr addr;
    uint64_t persisted = 0;  // acknowledged by kLogPersisted
    Status ack_error;        // a kLogPersisted that reported a failure
  };
  std::string logc_id;
  transport::PeerId peer = transport::kInvalidPeer;
  uint64_t incarnation = 0;       // of the LogC process holding it (0: not known yet)
  std::vector<Segment> segments;  // parallel to Log::capacity
  bool failed = false;
  Status why;  // when failed
  // The WRITE of the current piece.
  uint64_t op_seq = 0;
  bool op_done = true;
  Status op_status;
};

struct LogClient::Log {
  // Constant after creation.
  uint32_t range = 0;
  uint64_t memtable = 0;

  std::mutex mu;
  std::condition_variable cv;  // turn ended, op completed, ack arrived, replica failed
  // Protected by mu:
  std::string pending;             // appended, not yet taken by a turn
  uint64_t queued_end = 0;         // logical end of every byte appended
  uint64_t durable_end = 0;        // bytes [0, durable_end) hold the mode's guarantee
  uint64_t sent_end = 0;           // bytes [0, sent_end) may have reached a replica
  bool turn = false;               // a thread is writing a batch
  Status dead;                     // set once an append failed (no more appends), or deleted
  bool recovered = false;          // read back by ReadAll: kept and re-replicated, not appended
  bool deleted = false;            // Delete ran: no replica may be added any more
  std::vector<uint64_t> capacity;  // per segment
  uint64_t written = 0;            // bytes in the last segment
  std::vector<std::shared_ptr<Replica>> replicas;
  // Owned by the thread holding the turn.
  std::shared_ptr<Staging> staging;

  // Replicas not failed. REQUIRES: mu held.
  int LiveLocked() const {
    int live = 0;
    for (const auto& r : replicas) live += r->failed ? 0 : 1;
    return live;
  }
};

// One segment of a recovered log and where it can be read.
struct LogClient::SegmentToRead {
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

}  // namespace nova::logc
