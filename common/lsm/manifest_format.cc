#include "common/lsm/manifest_format.h"

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::lsm {

std::string FrameManifestRecord(std::string_view payload) {
  std::string r;
  PutFixed32(&r, crc32c::Mask(crc32c::Value(payload)));
  PutFixed32(&r, static_cast<uint32_t>(payload.size()));
  PutFixed32(&r, crc32c::Mask(crc32c::Value(r.data() + 4, 4)));
  r += payload;
  return r;
}

Status ParseManifestFrames(std::string_view contents, ManifestFrames* out) {
  ManifestFrames p;
  uint64_t offset = 0;
  while (offset < contents.size()) {
    std::string_view rest = contents.substr(offset);
    const std::string where = "MANIFEST record at byte " + std::to_string(offset);
    uint32_t masked, length, length_crc;
    std::string_view header = rest;
    if (!GetFixed32(&header, &masked) || !GetFixed32(&header, &length) ||
        !GetFixed32(&header, &length_crc)) {
      p.torn_bytes = rest.size();  // header cut short: a torn last append
      break;
    }
    if (crc32c::Unmask(length_crc) != crc32c::Value(rest.data() + 4, 4)) {
      return Status::Corruption(where + ": damaged length");
    }
    if (header.size() < length) {
      p.torn_bytes = rest.size();  // payload cut short: a torn last append
      break;
    }
    const std::string_view payload = header.substr(0, length);
    const bool last = header.size() == length;
    if (crc32c::Unmask(masked) != crc32c::Value(payload)) {
      if (last) {
        p.torn_bytes = rest.size();
        break;
      }
      return Status::Corruption(where + ": checksum mismatch");
    }
    p.payloads.push_back(payload);
    offset += kManifestRecordHeaderBytes + length;
    p.valid_bytes = offset;
  }
  *out = std::move(p);
  return Status::OK();
}

}  // namespace nova::lsm
