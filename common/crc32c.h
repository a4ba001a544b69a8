// CRC32C (Castagnoli), hardware-accelerated through ISA-L's crc32_iscsi.
//
// Value() matches the standard CRC-32C check value (crc32c("123456789") == 0xE3069283).
// Mask()/Unmask() guard CRCs stored next to the data they cover (LevelDB does the same:
// a CRC of a string containing embedded CRCs is otherwise weak).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nova::crc32c {

// Returns the crc32c of concat(A, data[0,n)) where init_crc is the crc32c of A.
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Value(s.data(), s.size()); }

constexpr uint32_t kMaskDelta = 0xa282ead8ul;  // DO NOT CHANGE: persisted
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return ((rot >> 17) | (rot << 15));
}

}  // namespace nova::crc32c
