// Small conversions between LevelDB's public types and ours, shared by common/lsm and ltc.
#pragma once

#include <string>

#include <leveldb/slice.h>
#include <leveldb/status.h>

#include "common/status.h"

namespace nova::lsm {

// A leveldb::Status as ours: same code where we have one (IOError otherwise) and LevelDB's
// message without its "<code name>: " prefix (our Status::ToString adds its own).
Status FromLevelDbStatus(const leveldb::Status& s);

// Printable form of (the first 32 bytes of) a key, for error messages.
std::string EscapeKeyForMessage(const leveldb::Slice& k);

}  // namespace nova::lsm
