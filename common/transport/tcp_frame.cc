#include "common/transport/tcp_frame.h"

#include "common/coding.h"
#include "common/transport/handshake.h"

namespace nova::transport {

void EncodeFrameHeader(const FrameHeader& h, char* dst) {
  dst[0] = static_cast<char>(h.type);
  dst[1] = static_cast<char>(h.code);
  EncodeFixed16(dst + 2, h.flags);
  EncodeFixed32(dst + 4, h.payload_length);
  EncodeFixed64(dst + 8, h.op_id);
  EncodeFixed64(dst + 16, h.addr);
  EncodeFixed32(dst + 24, h.rkey);
  EncodeFixed32(dst + 28, h.aux);
}

namespace {
Status Bad(const std::string& what) { return Status::Corruption("bad frame header: " + what); }
}  // namespace

Status DecodeFrameHeader(const char* src, const FrameLimits& limits, FrameHeader* out) {
  FrameHeader h;
  const uint8_t type = static_cast<uint8_t>(src[0]);
  if (type < kMinFrameType || type > kMaxFrameType) return Bad("unknown type " + std::to_string(type));
  h.type = static_cast<FrameType>(type);
  h.code = static_cast<uint8_t>(src[1]);
  h.flags = DecodeFixed16(src + 2);
  h.payload_length = DecodeFixed32(src + 4);
  h.op_id = DecodeFixed64(src + 8);
  h.addr = DecodeFixed64(src + 16);
  h.rkey = DecodeFixed32(src + 24);
  h.aux = DecodeFixed32(src + 28);

  if (h.code > Status::kMaxCode) return Bad("unknown status code " + std::to_string(h.code));
  if ((h.flags & ~kKnownFlags) != 0) return Bad("unknown flags " + std::to_string(h.flags));
  const bool is_handshake = h.type == FrameType::kHandshake;
  if (is_handshake != limits.handshake_phase) {
    return Bad(is_handshake ? "handshake frame on an established lane"
                            : "data frame before the handshake completed");
  }
  const bool is_reply = h.type == FrameType::kAck || h.type == FrameType::kReadResp;
  if (!is_reply && h.code != 0) return Bad("status code on a request");
  if (h.type != FrameType::kWrite && h.flags != 0) return Bad("flags on a non-write frame");

  switch (h.type) {
    case FrameType::kHandshake:
      if (h.payload_length > kMaxHandshakeMessageBytes) return Bad("handshake message too large");
      break;
    case FrameType::kSend:
      if (h.payload_length > limits.max_message_bytes) {
        return Bad("message of " + std::to_string(h.payload_length) + " bytes exceeds limit " +
                   std::to_string(limits.max_message_bytes));
      }
      break;
    case FrameType::kWrite:
      if (h.payload_length > limits.max_transfer_bytes) return Bad("write exceeds transfer limit");
      break;
    case FrameType::kReadReq:
      if (h.payload_length != 0) return Bad("read request with payload");
      if (h.aux > limits.max_transfer_bytes) return Bad("read exceeds transfer limit");
      break;
    case FrameType::kAck:
      if (h.code == 0 && h.payload_length != 0) return Bad("successful ack with payload");
      if (h.payload_length > kMaxErrorMessageBytes) return Bad("error message too long");
      break;
    case FrameType::kReadResp:
      if (h.code != 0 && h.payload_length > kMaxErrorMessageBytes) {
        return Bad("error message too long");
      }
      if (h.payload_length > limits.max_transfer_bytes) return Bad("read response too large");
      break;
  }
  *out = h;
  return Status::OK();
}

Status CheckRemoteAccess(const MemoryRegion& region, uint64_t addr, uint64_t length,
                         uint32_t needed_access) {
  if ((region.access & needed_access) != needed_access) {
    return Status::PermissionDenied(
        std::string("region does not allow remote ") +
        ((needed_access & kRemoteWrite) ? "write" : "read"));
  }
  const uint64_t base = reinterpret_cast<uint64_t>(region.base);
  // Written to avoid overflow: addr >= base, length <= len, addr - base <= len - length.
  if (addr < base || length > region.length || addr - base > region.length - length) {
    return Status::OutOfRange("access [" + std::to_string(addr) + ", +" + std::to_string(length) +
                              ") outside region of " + std::to_string(region.length) + " bytes");
  }
  return Status::OK();
}

std::string EncodeFrame(const FrameHeader& h, std::string_view payload) {
  std::string s(kFrameHeaderBytes, '\0');
  EncodeFrameHeader(h, s.data());
  s.append(payload.data(), payload.size());
  return s;
}

}  // namespace nova::transport
