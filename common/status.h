// Status: the result of an operation that can fail.
//
// A Status is either OK or carries a Code and a message. It is [[nodiscard]]: every
// returned Status must be looked at (or explicitly dropped with IgnoreError()).
// Codes are persisted on the wire (Encode/Decode) so a Status crosses process
// boundaries intact.
//
// Thread safety: a Status is a value; distinct objects may be used concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace nova {

class [[nodiscard]] Status {
 public:
  // DO NOT CHANGE the numeric values: they are persisted on the wire.
  enum class Code : uint8_t {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,
    kNotSupported = 3,
    kInvalidArgument = 4,
    kIOError = 5,
    kNetworkError = 6,       // a peer or connection failed
    kTimedOut = 7,
    kResourceExhausted = 8,  // a bounded pool, queue or disk is full
    kPermissionDenied = 9,   // authentication or access-flag failure
    kUnavailable = 10,       // not now: peer down, shutting down, not ready
    kAborted = 11,           // cancelled by shutdown or a failed dependency
    kWrongRange = 12,        // routed to a component that does not own the key range
    kAlreadyExists = 13,
    kIllegalState = 14,
    kOutOfRange = 15,        // bounds check failed (offsets, lengths)
    kFenced = 16,            // a newer owner of the range fenced this writer off (never to clients)
  };
  static constexpr uint8_t kMaxCode = 16;

  Status() = default;
  Status(Code code, std::string_view msg);

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m) { return Status(Code::kNotFound, m); }
  static Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
  static Status NotSupported(std::string_view m) { return Status(Code::kNotSupported, m); }
  static Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
  static Status IOError(std::string_view m) { return Status(Code::kIOError, m); }
  static Status NetworkError(std::string_view m) { return Status(Code::kNetworkError, m); }
  static Status TimedOut(std::string_view m) { return Status(Code::kTimedOut, m); }
  static Status ResourceExhausted(std::string_view m) {
    return Status(Code::kResourceExhausted, m);
  }
  static Status PermissionDenied(std::string_view m) { return Status(Code::kPermissionDenied, m); }
  static Status Unavailable(std::string_view m) { return Status(Code::kUnavailable, m); }
  static Status Aborted(std::string_view m) { return Status(Code::kAborted, m); }
  static Status WrongRange(std::string_view m) { return Status(Code::kWrongRange, m); }
  static Status AlreadyExists(std::string_view m) { return Status(Code::kAlreadyExists, m); }
  static Status IllegalState(std::string_view m) { return Status(Code::kIllegalState, m); }
  static Status OutOfRange(std::string_view m) { return Status(Code::kOutOfRange, m); }
  static Status Fenced(std::string_view m) { return Status(Code::kFenced, m); }
  // An IOError built from errno: "<context>: <strerror(err)>".
  static Status FromErrno(std::string_view context, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsNetworkError() const { return code_ == Code::kNetworkError; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }
  bool IsResourceExhausted() const { return code_ == Code::kResourceExhausted; }
  bool IsPermissionDenied() const { return code_ == Code::kPermissionDenied; }
  bool IsOutOfRange() const { return code_ == Code::kOutOfRange; }
  bool IsFenced() const { return code_ == Code::kFenced; }
  bool IsWrongRange() const { return code_ == Code::kWrongRange; }
  bool IsTimedOut() const { return code_ == Code::kTimedOut; }

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status Prepend(std::string_view context) const;
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  static const char* CodeName(Code code);

  // Explicitly discards the status (for best-effort calls such as cleanup).
  void IgnoreError() const {}

  // Wire form: 1 byte code, varint32 message length, message bytes.
  void EncodeTo(std::string* dst) const;
  // Parses a Status from *input and advances it. On malformed input returns false
  // and leaves *out unchanged.
  static bool DecodeFrom(std::string_view* input, Status* out);

  bool operator==(const Status& o) const { return code_ == o.code_ && msg_ == o.msg_; }

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

// Returns from the enclosing function if `expr` yields a non-OK Status.
#define NOVA_RETURN_NOT_OK(expr)              \
  do {                                        \
    ::nova::Status _nova_s = (expr);          \
    if (!_nova_s.ok()) return _nova_s;        \
  } while (0)

// Same, prefixing the message with `context`.
#define NOVA_RETURN_NOT_OK_PREPEND(expr, context)               \
  do {                                                          \
    ::nova::Status _nova_s = (expr);                            \
    if (!_nova_s.ok()) return _nova_s.Prepend(context);         \
  } while (0)

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : status_(), value_(std::move(value)), has_value_(true) {}  // NOLINT
  Result(Status s) : status_(std::move(s)) {                                  // NOLINT
    if (status_.ok()) status_ = Status::IllegalState("Result built from OK status without value");
  }
  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  // REQUIRES: ok()
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_{};
  bool has_value_ = false;
};

}  // namespace nova
