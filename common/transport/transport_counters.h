// The counters behind TransportStats, shared by the transport backends. Relaxed atomics:
// figures for monitoring, not for synchronization.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/transport/transport.h"

namespace nova::transport {

struct TransportCounters {
  std::atomic<uint64_t> sends{0}, writes{0}, reads{0};
  std::atomic<uint64_t> bytes_sent{0}, bytes_written{0}, bytes_read{0};
  std::atomic<uint64_t> failed_ops{0}, rejected_remote_ops{0}, auth_failures{0};

  // Everything but peers_up, which the backend counts from its peer table.
  TransportStats Snapshot() const {
    TransportStats s;
    s.sends = sends.load(std::memory_order_relaxed);
    s.writes = writes.load(std::memory_order_relaxed);
    s.reads = reads.load(std::memory_order_relaxed);
    s.bytes_sent = bytes_sent.load(std::memory_order_relaxed);
    s.bytes_written = bytes_written.load(std::memory_order_relaxed);
    s.bytes_read = bytes_read.load(std::memory_order_relaxed);
    s.failed_ops = failed_ops.load(std::memory_order_relaxed);
    s.rejected_remote_ops = rejected_remote_ops.load(std::memory_order_relaxed);
    s.auth_failures = auth_failures.load(std::memory_order_relaxed);
    return s;
  }
};

}  // namespace nova::transport
