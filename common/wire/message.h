// The versioned message codec for component RPCs (LTC <-> StoC, LTC <-> LogC, ...).
//
// A message is what one Transport::Send carries: a fixed 24-byte header followed by the
// payload. All integers are little-endian. DO NOT CHANGE the layout: it is on the wire.
//
//   offset  size  field
//        0     2  magic           kMagic
//        2     1  version         kWireVersion; a receiver refuses versions it does not speak
//        3     1  flags           kFlag* bits; unknown bits are refused
//        4     2  type            what the payload is; see the ranges below
//        6     2  reserved        zero in version 1
//        8     8  request_id      chosen by the requester, echoed by the response
//       16     4  payload_length  bytes after the header
//       20     4  crc             crc32c::Mask(crc32c(header bytes [0, 20) + payload))
//
// Payloads are built with PayloadWriter and parsed with PayloadReader: a sequence of fields
// (fixed-width integers, varints, length-prefixed bytes, Status). Field order is the schema;
// each message type documents its fields where it is defined. To evolve a message, append
// fields (old readers ignore the tail only if the message type says so) or define a new type.
//
// A response echoes the request's type and request_id and sets kFlagResponse; a failed
// request is answered with kFlagResponse | kFlagError and a payload that is exactly one
// encoded Status (EncodeErrorResponse / DecodeErrorPayload).
//
// Nothing here trusts a length read from the input: malformed input yields a Corruption or
// NotSupported Status, never a crash or a read past the end.
//
// Thread safety: the free functions are pure; PayloadWriter and PayloadReader are values
// that are not safe for concurrent use of one object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::wire {

constexpr uint16_t kMagic = 0x4e56;      // "NV". DO NOT CHANGE: on the wire
constexpr uint8_t kWireVersion = 1;      // DO NOT CHANGE: on the wire (bump for a new layout)
constexpr size_t kHeaderBytes = 24;      // DO NOT CHANGE: on the wire
constexpr size_t kHeaderCrcOffset = 20;  // the crc covers the header bytes before it

// Header flag bits. DO NOT CHANGE: on the wire.
constexpr uint8_t kFlagResponse = 1;  // a reply to request_id
constexpr uint8_t kFlagError = 2;     // the payload is one encoded Status (with kFlagResponse)
constexpr uint8_t kKnownFlags = kFlagResponse | kFlagError;

// Message type ranges, one per service. Each service defines its messages inside its range
// (in its own header); a receiver answers a type it does not know with NotSupported.
// DO NOT CHANGE: on the wire.
struct TypeRange {
  uint16_t first;
  uint16_t last;
  constexpr bool Contains(uint16_t type) const { return type >= first && type <= last; }
};
constexpr uint16_t kInvalidType = 0;                    // never sent
constexpr TypeRange kCommonTypes{0x0001, 0x00ff};       // shared by every service (ping, ...)
constexpr TypeRange kStocTypes{0x0100, 0x01ff};         // LTC -> StoC: fragments, files, reads
constexpr TypeRange kLogcTypes{0x0200, 0x02ff};         // LTC -> LogC: log files, replication
constexpr TypeRange kLtcTypes{0x0300, 0x03ff};          // LTC <-> LTC: range migration
constexpr TypeRange kCoordinatorTypes{0x0400, 0x04ff};  // coordinator <-> components

// The largest payload the header can describe.
constexpr size_t kMaxEncodablePayload = UINT32_MAX;

struct MessageHeader {
  uint16_t magic = kMagic;
  uint8_t version = kWireVersion;
  uint8_t flags = 0;
  uint16_t type = kInvalidType;
  uint16_t reserved = 0;
  uint64_t request_id = 0;
  uint32_t payload_length = 0;
  uint32_t crc = 0;  // as stored: masked

  bool is_response() const { return (flags & kFlagResponse) != 0; }
  bool is_error() const { return (flags & kFlagError) != 0; }
};

// Returns header + payload, ready to Send.
// REQUIRES: payload.size() <= kMaxEncodablePayload; (flags & ~kKnownFlags) == 0.
std::string EncodeMessage(uint16_t type, uint64_t request_id, std::string_view payload,
                          uint8_t flags = 0);

// Parses exactly one message occupying all of `in`. On success fills *h and sets *payload
// to a view into `in` (valid as long as `in`'s storage). Returns Corruption for a truncated
// message, bad magic, non-zero reserved field, a payload longer than `max_payload`, a
// length that disagrees with in.size() (including trailing bytes) or a crc mismatch, and
// NotSupported for another wire version or unknown flags. On failure *h and *payload are
// unspecified.
Status DecodeMessage(std::string_view in, MessageHeader* h, std::string_view* payload,
                     size_t max_payload);

// Framing over a byte stream: given the bytes buffered so far (starting at a message
// boundary), sets *total_needed to the full length (header + payload) of the first message
// and returns OK; sets it to 0 and returns OK if fewer than kHeaderBytes are buffered.
// Returns the same errors as DecodeMessage for a header that cannot start a valid message
// (the crc is only checked by DecodeMessage, once the whole message is buffered).
Status PeekMessageLength(std::string_view buffered, size_t max_payload, size_t* total_needed);

// A response reporting that request (type, request_id) failed with `error`.
// REQUIRES: !error.ok()
std::string EncodeErrorResponse(uint16_t type, uint64_t request_id, const Status& error);
// Returns the error carried by a kFlagError payload, or Corruption if the payload is not
// exactly one encoded non-OK Status.
Status DecodeErrorPayload(std::string_view payload);

// Builds a payload field by field. Each Put appends; Finish() hands the bytes over.
class PayloadWriter {
 public:
  PayloadWriter() = default;

  void PutU8(uint8_t v);
  void PutU16(uint16_t v);  // fixed width, little-endian
  void PutU32(uint32_t v);
  void PutU64(uint64_t v);
  void PutVarint32(uint32_t v);
  void PutVarint64(uint64_t v);
  // varint32 length, then the bytes. REQUIRES: v.size() <= UINT32_MAX.
  void PutBytes(std::string_view v);
  // Status::EncodeTo: code byte, then the length-prefixed message.
  void PutStatus(const Status& s);

  size_t size() const { return buf_.size(); }
  // Returns the payload and leaves the writer empty, ready for reuse.
  std::string Finish();

 private:
  std::string buf_;
};

// Parses a payload field by field. Each Get takes the caller's field name (used only in
// error messages), returns true and advances on success, and returns false on malformed or
// truncated input without reading past the end. The first failure is sticky: later Gets
// return false and status() names the field that failed, e.g.
//   Corruption("malformed payload: field 'file_id' at byte 12: truncated u64 (3 bytes left)").
// Typical use:
//   PayloadReader r(payload);
//   uint64_t file_id; std::string_view data;
//   r.GetU64("file_id", &file_id); r.GetBytes("data", &data);
//   NOVA_RETURN_NOT_OK(r.Finish());
class PayloadReader {
 public:
  // `payload` must outlive the reader and every view GetBytes returns.
  explicit PayloadReader(std::string_view payload) : in_(payload), size_(payload.size()) {}

  bool GetU8(std::string_view field, uint8_t* v);
  bool GetU16(std::string_view field, uint16_t* v);
  bool GetU32(std::string_view field, uint32_t* v);
  bool GetU64(std::string_view field, uint64_t* v);
  bool GetVarint32(std::string_view field, uint32_t* v);
  bool GetVarint64(std::string_view field, uint64_t* v);
  // *v aliases the payload.
  bool GetBytes(std::string_view field, std::string_view* v);
  // Copying variant of GetBytes.
  bool GetString(std::string_view field, std::string* v);
  bool GetStatus(std::string_view field, Status* v);

  // True if no Get failed and every byte has been consumed.
  bool done() const { return error_.ok() && in_.empty(); }
  size_t remaining() const { return in_.size(); }
  // OK, or the Corruption describing the first failed Get.
  Status status() const { return error_; }
  // status(), or Corruption if bytes are left after the last field.
  Status Finish() const;

 private:
  // Records the first failure; returns false.
  bool Fail(std::string_view field, std::string_view what);

  std::string_view in_;  // what is left to read
  size_t size_;          // the whole payload's size, for offsets in error messages
  Status error_;
};

}  // namespace nova::wire
