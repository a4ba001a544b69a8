#include "logc/client/log_mode.h"

#include <string>

namespace nova::logc {

namespace {
constexpr LogMode kAllModes[] = {LogMode::kNone, LogMode::kMemory, LogMode::kDisk,
                                 LogMode::kMemoryDisk};
}  // namespace

const char* LogModeName(LogMode mode) {
  switch (mode) {
    case LogMode::kNone: return "none";
    case LogMode::kMemory: return "memory";
    case LogMode::kDisk: return "disk";
    case LogMode::kMemoryDisk: return "memory+disk";
  }
  return "unknown";
}

Status ParseLogMode(std::string_view name, LogMode* out) {
  for (LogMode m : kAllModes) {
    if (name == LogModeName(m)) {
      *out = m;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown log mode '" + std::string(name) +
                                 "': expected none, memory, disk or memory+disk");
}

bool Persists(LogMode mode) { return mode == LogMode::kDisk || mode == LogMode::kMemoryDisk; }

}  // namespace nova::logc
