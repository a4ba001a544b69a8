// LogMode: what a Put's acknowledgment promises about its log record (DESIGN.md section 6,
// docs/logc.md "Modes"). One mode per cluster (--log_mode).
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"

namespace nova::logc {

enum class LogMode {
  kNone,        // no log: a memtable lost with its LTC is lost
  kMemory,      // R LogC memories hold the record (availability: survives an LTC failure)
  kDisk,        // R LogC disks hold it, fdatasync'd (durability: survives a cluster restart)
  kMemoryDisk,  // both: recovery reads memory, the disk survives LogC restarts
};

// "none", "memory", "disk" or "memory+disk".
const char* LogModeName(LogMode mode);
// Parses a LogModeName(). On anything else returns InvalidArgument naming the accepted
// values and leaves *out unchanged.
Status ParseLogMode(std::string_view name, LogMode* out);
// True if the mode makes records durable on LogC disks (disk, memory+disk).
bool Persists(LogMode mode);

}  // namespace nova::logc
