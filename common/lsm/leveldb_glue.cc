#include "common/lsm/leveldb_glue.h"

#include "common/hex.h"

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
  return EscapeBytes(std::string_view(k.data(), k.size()), kMaxKeyBytesInMessage);
}

}  // namespace nova::lsm
