// FileKind: the two kinds of StoC file (docs/stoc.md), named in the StoC protocol and
// recorded in the StoC's file catalog.
#pragma once

#include <cstdint>

namespace nova::stoc {

// DO NOT CHANGE the numeric values: they are persisted (in the
// StoC's file catalog) and on the wire.
enum class FileKind : uint8_t {
  kMemory = 1,  // a registered memory region; contents do not survive a restart
  kDisk = 2,    // a file in the StoC's data directory
};

// "memory", "disk", or "unknown".
const char* FileKindName(FileKind kind);

}  // namespace nova::stoc
