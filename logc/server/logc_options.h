// Options of a LogC server. The daemon (logc_main.cc) fills them from flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/transport/transport.h"

namespace nova::logc {

struct LogcOptions {
  // This LogC's id in the cluster; its transport node name is "logc-<id>".
  std::string logc_id = "0";
  transport::TransportOptions transport;
  // Data directory: persisted log files live in <dir>/logs. Required when persist is on.
  std::string dir;
  // Accept persisted log files (disk and memory+disk modes). Off: only memory logs.
  bool persist = false;
  // Capacity of all log regions together; an open beyond it fails ResourceExhausted.
  uint64_t memory_limit_bytes = 1ull << 30;
  // Largest capacity one log file segment may have.
  uint64_t max_segment_bytes = 1ull << 30;
  // Threads that write and fdatasync persisted logs and serve kReadLog.
  int storage_threads = 2;
  // Threads for open/list/delete/stats requests.
  int control_threads = 1;
  // Requests waiting per pool before new ones are refused with ResourceExhausted.
  size_t max_queued_requests = 4096;
};

}  // namespace nova::logc
