#include "common/hex.h"

namespace nova {

namespace {

constexpr char kDigits[] = "0123456789abcdef";

// The value of hex digit c, or -1.
int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

Result<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return Status::InvalidArgument("hex string of odd length");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = DigitValue(hex[i]);
    const int lo = DigitValue(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument("not a hex digit in '" + std::string(hex) + "'");
    }
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

std::string EscapeBytes(std::string_view bytes, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= ' ' && c <= '~' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 0xf]);
    }
  }
  if (bytes.size() > max_bytes) out += "...";
  return out;
}

}  // namespace nova
