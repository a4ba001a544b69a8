// Options of a StoC server. The daemon (stoc_main.cc) fills them from flags.
#pragma once

#include <cstdint>
#include <string>

#include "common/transport/transport.h"

namespace nova::stoc {

struct StocOptions {
  // This StoC's id in the cluster; its transport node name is "stoc-<id>".
  uint32_t stoc_id = 0;
  // Data directory: CATALOG and data/ live here.
  std::string dir;
  transport::TransportOptions transport;
  // In-memory files: size of each region (the paper sizes them like memtables) and the
  // total memory all regions may use.
  uint64_t memory_region_bytes = 64ull << 20;
  uint64_t memory_limit_bytes = 1ull << 30;
  // Persistent files: the registered file buffer that holds append slots and read staging.
  uint64_t file_buffer_bytes = 256ull << 20;
  // Largest block a client may append or read in one request.
  uint64_t max_block_bytes = 16ull << 20;
  // Threads: storage (appends, reads, fsyncs), compaction (offloaded compaction jobs, run
  // by a service the daemon registers: StocServer::RegisterCompactionService), control
  // (open, close, list...).
  int storage_threads = 2;
  int compaction_threads = 1;
  int control_threads = 1;
  // Answer kLocalFile: tell clients on this host where a disk file's data file is, so they
  // read it with pread (docs/stoc.md "Local reads"). False: every read is a request.
  bool local_reads = true;
  // Requests waiting per pool before new ones are refused with ResourceExhausted.
  size_t max_queued_requests = 4096;
};

}  // namespace nova::stoc
