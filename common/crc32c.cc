#include "common/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace nova::crc32c {

uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  // ISA-L's crc32_iscsi neither pre- nor post-inverts; the standard CRC-32C does both.
  uint32_t crc = ~init_crc;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  while (n > 0) {
    // crc32_iscsi takes an int length.
    const size_t chunk = n > static_cast<size_t>(INT_MAX) ? static_cast<size_t>(INT_MAX) : n;
    crc = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(chunk), crc);
    p += chunk;
    n -= chunk;
  }
  return ~crc;
}

}  // namespace nova::crc32c
