// Little-endian fixed-width and varint encodings, and length-prefixed strings.
//
// Encoders append to a std::string. Decoders take a std::string_view* cursor, never read
// past its end, advance it on success and return false (cursor unchanged) on truncated or
// malformed input: lengths read from the network or disk are never trusted.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace nova {

constexpr int kMaxVarint32Bytes = 5;
constexpr int kMaxVarint64Bytes = 10;

inline void EncodeFixed16(char* dst, uint16_t v) {
  dst[0] = static_cast<char>(v);
  dst[1] = static_cast<char>(v >> 8);
}
inline void EncodeFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline uint16_t DecodeFixed16(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}
inline uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}
inline uint64_t DecodeFixed64(const char* p) {
  return static_cast<uint64_t>(DecodeFixed32(p)) |
         (static_cast<uint64_t>(DecodeFixed32(p + 4)) << 32);
}

void PutFixed16(std::string* dst, uint16_t v);
void PutFixed32(std::string* dst, uint32_t v);
void PutFixed64(std::string* dst, uint64_t v);
void PutVarint32(std::string* dst, uint32_t v);
void PutVarint64(std::string* dst, uint64_t v);
// varint32 length followed by the bytes.
void PutLengthPrefixed(std::string* dst, std::string_view value);

// Writes a varint64 at dst (which must have kMaxVarint64Bytes room); returns bytes written.
int EncodeVarint64(char* dst, uint64_t v);
int VarintLength(uint64_t v);

bool GetFixed16(std::string_view* in, uint16_t* v);
bool GetFixed32(std::string_view* in, uint32_t* v);
bool GetFixed64(std::string_view* in, uint64_t* v);
bool GetVarint32(std::string_view* in, uint32_t* v);
bool GetVarint64(std::string_view* in, uint64_t* v);
// The returned view aliases *in's storage.
bool GetLengthPrefixed(std::string_view* in, std::string_view* value);
// Takes exactly n bytes.
bool GetBytes(std::string_view* in, size_t n, std::string_view* value);

}  // namespace nova
