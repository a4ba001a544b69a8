#include "common/wire/message.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::wire {

namespace {

// Header field offsets (see the table in message.h).
constexpr size_t kMagicOffset = 0;
constexpr size_t kVersionOffset = 2;
constexpr size_t kFlagsOffset = 3;
constexpr size_t kTypeOffset = 4;
constexpr size_t kReservedOffset = 6;
constexpr size_t kRequestIdOffset = 8;
constexpr size_t kPayloadLengthOffset = 16;
static_assert(kHeaderCrcOffset + 4 == kHeaderBytes, "the crc ends the header");

// Encoding is infallible for valid arguments; a violated REQUIRES is a programming error
// that would otherwise put a lying length on the wire.
[[noreturn]] void EncodeMisuse(const char* what) {
  std::fprintf(stderr, "nova::wire::EncodeMessage: %s\n", what);
  std::abort();
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

uint32_t MessageCrc(std::string_view header, std::string_view payload) {
  uint32_t crc = crc32c::Value(header.data(), kHeaderCrcOffset);
  return crc32c::Mask(crc32c::Extend(crc, payload.data(), payload.size()));
}

// Parses and validates everything in the header except the crc.
// REQUIRES: in.size() >= kHeaderBytes.
Status ParseHeader(std::string_view in, size_t max_payload, MessageHeader* h) {
  const char* p = in.data();
  h->magic = DecodeFixed16(p + kMagicOffset);
  h->version = static_cast<uint8_t>(p[kVersionOffset]);
  h->flags = static_cast<uint8_t>(p[kFlagsOffset]);
  h->type = DecodeFixed16(p + kTypeOffset);
  h->reserved = DecodeFixed16(p + kReservedOffset);
  h->request_id = DecodeFixed64(p + kRequestIdOffset);
  h->payload_length = DecodeFixed32(p + kPayloadLengthOffset);
  h->crc = DecodeFixed32(p + kHeaderCrcOffset);

  // Magic first: anything else about a non-message is noise. Version next: a newer layout
  // may give the remaining fields other meanings.
  if (h->magic != kMagic) {
    return Status::Corruption("bad message magic " + Hex(h->magic) + ", expected " + Hex(kMagic));
  }
  if (h->version != kWireVersion) {
    return Status::NotSupported("message wire version " + std::to_string(h->version) +
                                " not supported (this build speaks version " +
                                std::to_string(kWireVersion) + ")");
  }
  if ((h->flags & ~kKnownFlags) != 0) {
    return Status::NotSupported("unknown message flags " + Hex(h->flags));
  }
  if (h->reserved != 0) {
    return Status::Corruption("message reserved field is " + Hex(h->reserved) +
                              ", must be 0 in wire version 1");
  }
  if (h->payload_length > max_payload) {
    return Status::Corruption("message payload of " + std::to_string(h->payload_length) +
                              " bytes exceeds the limit of " + std::to_string(max_payload));
  }
  return Status::OK();
}

}  // namespace

std::string EncodeMessage(uint16_t type, uint64_t request_id, std::string_view payload,
                          uint8_t flags) {
  if (payload.size() > kMaxEncodablePayload) EncodeMisuse("payload longer than 4 GiB");
  if ((flags & ~kKnownFlags) != 0) EncodeMisuse("unknown flag bits");
  std::string out(kHeaderBytes, '\0');
  char* p = out.data();
  EncodeFixed16(p + kMagicOffset, kMagic);
  p[kVersionOffset] = static_cast<char>(kWireVersion);
  p[kFlagsOffset] = static_cast<char>(flags);
  EncodeFixed16(p + kTypeOffset, type);
  EncodeFixed16(p + kReservedOffset, 0);
  EncodeFixed64(p + kRequestIdOffset, request_id);
  EncodeFixed32(p + kPayloadLengthOffset, static_cast<uint32_t>(payload.size()));
  EncodeFixed32(p + kHeaderCrcOffset, MessageCrc(out, payload));
  out.append(payload.data(), payload.size());
  return out;
}

Status DecodeMessage(std::string_view in, MessageHeader* h, std::string_view* payload,
                     size_t max_payload) {
  if (in.size() < kHeaderBytes) {
    return Status::Corruption("truncated message: " + std::to_string(in.size()) +
                              " bytes, the header alone is " + std::to_string(kHeaderBytes));
  }
  NOVA_RETURN_NOT_OK(ParseHeader(in, max_payload, h));
  const size_t body = in.size() - kHeaderBytes;
  if (body != h->payload_length) {
    return Status::Corruption(std::string(body < h->payload_length ? "truncated" : "oversized") +
                              " message: header says " + std::to_string(h->payload_length) +
                              " payload bytes, " + std::to_string(body) + " present");
  }
  std::string_view p = in.substr(kHeaderBytes);
  const uint32_t actual = MessageCrc(in, p);
  if (actual != h->crc) {
    return Status::Corruption("message crc mismatch: stored " + Hex(h->crc) + ", computed " +
                              Hex(actual) + " (type " + Hex(h->type) + ", request " +
                              std::to_string(h->request_id) + ")");
  }
  *payload = p;
  return Status::OK();
}

Status PeekMessageLength(std::string_view buffered, size_t max_payload, size_t* total_needed) {
  *total_needed = 0;
  if (buffered.size() < kHeaderBytes) return Status::OK();
  MessageHeader h;
  NOVA_RETURN_NOT_OK(ParseHeader(buffered, max_payload, &h));
  *total_needed = kHeaderBytes + h.payload_length;
  return Status::OK();
}

std::string EncodeErrorResponse(uint16_t type, uint64_t request_id, const Status& error) {
  std::string payload;
  // An OK "error" would be indistinguishable from a lost error: say so rather than lie.
  const Status carried =
      error.ok() ? Status::IllegalState("error response built from an OK status") : error;
  carried.EncodeTo(&payload);
  return EncodeMessage(type, request_id, payload, kFlagResponse | kFlagError);
}

Status DecodeErrorPayload(std::string_view payload) {
  Status carried;
  std::string_view in = payload;
  if (!Status::DecodeFrom(&in, &carried)) {
    return Status::Corruption("malformed error response: not an encoded Status");
  }
  if (!in.empty()) {
    return Status::Corruption("malformed error response: " + std::to_string(in.size()) +
                              " bytes after the Status");
  }
  if (carried.ok()) return Status::Corruption("malformed error response: carries OK");
  return carried;
}

// ---- PayloadWriter ----

void PayloadWriter::PutU8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
void PayloadWriter::PutU16(uint16_t v) { PutFixed16(&buf_, v); }
void PayloadWriter::PutU32(uint32_t v) { PutFixed32(&buf_, v); }
void PayloadWriter::PutU64(uint64_t v) { PutFixed64(&buf_, v); }
void PayloadWriter::PutVarint32(uint32_t v) { nova::PutVarint32(&buf_, v); }
void PayloadWriter::PutVarint64(uint64_t v) { nova::PutVarint64(&buf_, v); }

void PayloadWriter::PutBytes(std::string_view v) {
  if (v.size() > UINT32_MAX) EncodeMisuse("PayloadWriter::PutBytes of more than 4 GiB");
  PutLengthPrefixed(&buf_, v);
}

void PayloadWriter::PutStatus(const Status& s) { s.EncodeTo(&buf_); }

std::string PayloadWriter::Finish() {
  std::string out = std::move(buf_);
  buf_.clear();  // a moved-from string is valid but unspecified
  return out;
}

// ---- PayloadReader ----

bool PayloadReader::Fail(std::string_view field, std::string_view what) {
  if (error_.ok()) {
    std::string m = "malformed payload: field '";
    m.append(field);
    m += "' at byte " + std::to_string(size_ - in_.size()) + ": ";
    m.append(what);
    m += " (" + std::to_string(in_.size()) + " bytes left)";
    error_ = Status::Corruption(m);
  }
  return false;
}

bool PayloadReader::GetU8(std::string_view field, uint8_t* v) {
  if (!error_.ok()) return false;
  if (in_.empty()) return Fail(field, "truncated u8");
  *v = static_cast<uint8_t>(in_[0]);
  in_.remove_prefix(1);
  return true;
}

bool PayloadReader::GetU16(std::string_view field, uint16_t* v) {
  if (!error_.ok()) return false;
  return GetFixed16(&in_, v) || Fail(field, "truncated u16");
}

bool PayloadReader::GetU32(std::string_view field, uint32_t* v) {
  if (!error_.ok()) return false;
  return GetFixed32(&in_, v) || Fail(field, "truncated u32");
}

bool PayloadReader::GetU64(std::string_view field, uint64_t* v) {
  if (!error_.ok()) return false;
  return GetFixed64(&in_, v) || Fail(field, "truncated u64");
}

bool PayloadReader::GetVarint32(std::string_view field, uint32_t* v) {
  if (!error_.ok()) return false;
  return nova::GetVarint32(&in_, v) || Fail(field, "truncated or overlong varint32");
}

bool PayloadReader::GetVarint64(std::string_view field, uint64_t* v) {
  if (!error_.ok()) return false;
  return nova::GetVarint64(&in_, v) || Fail(field, "truncated or overlong varint64");
}

bool PayloadReader::GetBytes(std::string_view field, std::string_view* v) {
  if (!error_.ok()) return false;
  return GetLengthPrefixed(&in_, v) || Fail(field, "bad or truncated length-prefixed bytes");
}

bool PayloadReader::GetString(std::string_view field, std::string* v) {
  std::string_view view;
  if (!GetBytes(field, &view)) return false;
  v->assign(view.data(), view.size());
  return true;
}

bool PayloadReader::GetStatus(std::string_view field, Status* v) {
  if (!error_.ok()) return false;
  return Status::DecodeFrom(&in_, v) || Fail(field, "malformed Status");
}

Status PayloadReader::Finish() const {
  if (!error_.ok()) return error_;
  if (!in_.empty()) {
    return Status::Corruption("malformed payload: " + std::to_string(in_.size()) +
                              " trailing bytes after the last field");
  }
  return Status::OK();
}

}  // namespace nova::wire
