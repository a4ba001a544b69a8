#include "common/coding.h"

#include <algorithm>

namespace nova {

void PutFixed16(std::string* dst, uint16_t v) {
  char buf[2];
  EncodeFixed16(buf, v);
  dst->append(buf, sizeof(buf));
}

void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, sizeof(buf));
}

void PutFixed64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64(buf, v);
  dst->append(buf, sizeof(buf));
}

int EncodeVarint64(char* dst, uint64_t v) {
  constexpr uint64_t kMoreBit = 0x80;
  int n = 0;
  while (v >= kMoreBit) {
    dst[n++] = static_cast<char>(v | kMoreBit);
    v >>= 7;
  }
  dst[n++] = static_cast<char>(v);
  return n;
}

int VarintLength(uint64_t v) {
  int len = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++len;
  }
  return len;
}

void PutVarint32(std::string* dst, uint32_t v) { PutVarint64(dst, v); }

void PutVarint64(std::string* dst, uint64_t v) {
  char buf[kMaxVarint64Bytes];
  dst->append(buf, EncodeVarint64(buf, v));
}

void PutLengthPrefixed(std::string* dst, std::string_view value) {
  PutVarint32(dst, static_cast<uint32_t>(value.size()));
  dst->append(value.data(), value.size());
}

bool GetFixed16(std::string_view* in, uint16_t* v) {
  if (in->size() < 2) return false;
  *v = DecodeFixed16(in->data());
  in->remove_prefix(2);
  return true;
}

bool GetFixed32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = DecodeFixed32(in->data());
  in->remove_prefix(4);
  return true;
}

bool GetFixed64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  *v = DecodeFixed64(in->data());
  in->remove_prefix(8);
  return true;
}

namespace {
bool GetVarint(std::string_view* in, int max_bytes, uint64_t* v) {
  uint64_t result = 0;
  // Compare as size_t: narrowing in->size() to int misreads inputs of 2 GiB and more.
  const size_t limit = std::min(static_cast<size_t>(max_bytes), in->size());
  for (int i = 0; static_cast<size_t>(i) < limit; ++i) {
    uint64_t byte = static_cast<uint8_t>((*in)[i]);
    result |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      // The last byte of a maximal varint may only carry the bits that fit.
      if (i == max_bytes - 1 && max_bytes == kMaxVarint64Bytes && byte > 1) return false;
      *v = result;
      in->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}
}  // namespace

bool GetVarint32(std::string_view* in, uint32_t* v) {
  std::string_view copy = *in;
  uint64_t r;
  if (!GetVarint(&copy, kMaxVarint32Bytes, &r) || r > UINT32_MAX) return false;
  *v = static_cast<uint32_t>(r);
  *in = copy;
  return true;
}

bool GetVarint64(std::string_view* in, uint64_t* v) {
  return GetVarint(in, kMaxVarint64Bytes, v);
}

bool GetLengthPrefixed(std::string_view* in, std::string_view* value) {
  std::string_view copy = *in;
  uint32_t len;
  if (!GetVarint32(&copy, &len) || copy.size() < len) return false;
  *value = copy.substr(0, len);
  copy.remove_prefix(len);
  *in = copy;
  return true;
}

bool GetBytes(std::string_view* in, size_t n, std::string_view* value) {
  if (in->size() < n) return false;
  *value = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

}  // namespace nova
