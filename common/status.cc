#include "common/status.h"

#include <cerrno>
#include <cstring>

#include "common/coding.h"

namespace nova {

Status::Status(Code code, std::string_view msg) : code_(code), msg_(msg) {}

Status Status::FromErrno(std::string_view context, int err) {
  std::string m(context);
  m += ": ";
  m += std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return Status(Code::kResourceExhausted, m);
  return Status(Code::kIOError, m);
}

Status Status::Prepend(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += msg_;
  return Status(code_, m);
}

const char* Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kCorruption: return "Corruption";
    case Code::kNotSupported: return "NotSupported";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kIOError: return "IOError";
    case Code::kNetworkError: return "NetworkError";
    case Code::kTimedOut: return "TimedOut";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kUnavailable: return "Unavailable";
    case Code::kAborted: return "Aborted";
    case Code::kWrongRange: return "WrongRange";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kIllegalState: return "IllegalState";
    case Code::kOutOfRange: return "OutOfRange";
    case Code::kFenced: return "Fenced";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string r = CodeName(code_);
  r += ": ";
  r += msg_;
  return r;
}

void Status::EncodeTo(std::string* dst) const {
  dst->push_back(static_cast<char>(code_));
  // OK carries no message on the wire (DecodeFrom refuses one), even if built with one.
  PutLengthPrefixed(dst, ok() ? std::string_view() : std::string_view(msg_));
}

bool Status::DecodeFrom(std::string_view* input, Status* out) {
  std::string_view in = *input;
  if (in.empty()) return false;
  uint8_t code = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  if (code > kMaxCode) return false;
  std::string_view msg;
  if (!GetLengthPrefixed(&in, &msg)) return false;
  // EncodeTo never writes a message for OK; accepting one would yield an ok() Status that
  // compares unequal to Status::OK().
  if (code == 0 && !msg.empty()) return false;
  *out = Status(static_cast<Code>(code), msg);
  *input = in;
  return true;
}

}  // namespace nova
