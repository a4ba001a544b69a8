// ManifestPointer: the LTC's own durable record of which MANIFEST of a range is current
// (docs/durability.md "The MANIFEST").
//
// A range's MANIFEST lives only on StoCs, and a new one (a roll-over, or a repair after a
// failed append) takes the next number on other StoCs. A StoC that was down while that
// happened still holds the older MANIFEST; if the StoCs holding the new one then lose their
// disks (or are unreachable), the older one looks current, and opening the range from it
// would silently drop every edit since (tables, the log floor: acknowledged writes). So the
// LTC records, in a small file of its own, two numbers per range:
//   allocated: the highest MANIFEST number it may have created files for: the next one
//              must be above it (a file left behind by a failed attempt is never reused);
//   committed: the highest MANIFEST it completed on every replica: opening from an older
//              one is refused.
// Numbers only grow.
//
// File: one line "nova-manifest-pointer 1 <allocated> <committed> <crc32c>\n", replaced
// atomically (temp file, fsync, rename, fsync of the directory). DO NOT CHANGE: persisted.
//
// Thread safety: not thread-safe (the table store calls it under its MANIFEST lock).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace nova::stoc {

class ManifestPointer {
 public:
  struct Numbers {
    uint64_t allocated = 0;
    uint64_t committed = 0;
    bool operator==(const Numbers&) const = default;
  };

  // `path`: the file; its directory is created when first stored.
  explicit ManifestPointer(std::string path) : path_(std::move(path)) {}

  // The recorded numbers: zeros when the file does not exist (a range this LTC never
  // wrote); Corruption if it is damaged; IOError if it cannot be read.
  Result<Numbers> Load() const;
  // Durably replaces the recorded numbers. Returns OK once they are on disk, else IOError.
  Status Store(const Numbers& numbers);

  const std::string& path() const { return path_; }

 private:
  const std::string path_;
};

}  // namespace nova::stoc
