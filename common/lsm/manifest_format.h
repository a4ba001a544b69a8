// The framing of a MANIFEST (DESIGN.md section 4): a log of self-checking records, so a
// MANIFEST can be read from any byte source and its replicas compared without knowing
// what the records hold (the LTC's VersionEdits, ltc/engine/manifest.h).
//
//   record := masked crc32c(payload) u32 | payload length u32 | masked crc32c(length) u32
//             | payload
//
// The length has its own checksum so a damaged length is reported, not mistaken for a
// torn last record (which would silently drop the records after it). A record cut short
// (header or payload incomplete), or whose payload checksum fails while it is the last
// record, is a torn append that was never acknowledged and is ignored; any other damage is
// Corruption (never silently used or skipped). DO NOT CHANGE: persisted.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nova::lsm {

constexpr size_t kManifestRecordHeaderBytes = 12;  // DO NOT CHANGE: persisted

// One record holding `payload`.
std::string FrameManifestRecord(std::string_view payload);

struct ManifestFrames {
  std::vector<std::string_view> payloads;  // into the parsed contents
  uint64_t valid_bytes = 0;                // bytes of complete, valid records
  uint64_t torn_bytes = 0;                 // ignored bytes of a torn last record
};

// Splits `contents` into its records. Corruption (naming the byte offset) on damage other
// than a torn last record. *out is unchanged on failure.
Status ParseManifestFrames(std::string_view contents, ManifestFrames* out);

}  // namespace nova::lsm
