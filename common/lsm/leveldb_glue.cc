#include "common/lsm/leveldb_glue.h"

namespace nova::lsm {

namespace {
// Bytes of a key shown in an error message.
constexpr size_t kMaxKeyBytesInMessage = 32;
}  // namespace

Status FromLevelDbStatus(const leveldb::Status& s) {
  if (s.ok()) return Status::OK();
  // leveldb::Status has no accessor for its bare message; ToString() is "<code>: <message>".
  std::string msg = s.ToString();
  const size_t colon = msg.find(": ");
  if (colon != std::string::npos) msg.erase(0, colon + 2);
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsNotSupportedError()) return Status::NotSupported(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  return Status::IOError(msg);
}

std::string EscapeKeyForMessage(const leveldb::Slice& k) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < k.size() && i < kMaxKeyBytesInMessage; ++i) {
    const unsigned char c = static_cast<unsigned char>(k[i]);
    if (c >= ' ' && c <= '~' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  if (k.size() > kMaxKeyBytesInMessage) out += "...";
  return out;
}

}  // namespace nova::lsm
