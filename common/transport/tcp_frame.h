// Frame format of the tcp transport backend. See docs/transport.md.
//
// Every frame is a 32-byte header followed by `payload_length` bytes:
//
//   offset size field
//   0      1    type            FrameType
//   1      1    code            Status::Code of a reply (ACK, READ_RESP); 0 otherwise
//   2      2    flags           kFlagHasImm
//   4      4    payload_length  bytes following the header
//   8      8    op_id           initiator's operation id, echoed by the reply
//   16     8    addr            target virtual address (WRITE, READ_REQ)
//   24     4    rkey            target region key (WRITE, READ_REQ)
//   28     4    aux             immediate (WRITE with kFlagHasImm) or length (READ_REQ)
//
// All integers little-endian. DO NOT CHANGE: on the wire (bump kHandshakeVersion instead).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/transport/transport.h"

namespace nova::transport {

constexpr size_t kFrameHeaderBytes = 32;  // DO NOT CHANGE: on the wire

enum class FrameType : uint8_t {  // DO NOT CHANGE: on the wire
  kHandshake = 1,  // payload: a handshake message (handshake.h); only before the lane is up
  kSend = 2,       // payload: message; answered by kAck
  kWrite = 3,      // payload: bytes for [addr, addr+payload_length); answered by kAck
  kReadReq = 4,    // no payload; asks for aux bytes at addr; answered by kReadResp
  kAck = 5,        // reply to kSend/kWrite; payload: error message when code != 0
  kReadResp = 6,   // reply to kReadReq; payload: the bytes (code == 0) or an error message
};
constexpr uint8_t kMinFrameType = 1;
constexpr uint8_t kMaxFrameType = 6;

constexpr uint16_t kFlagHasImm = 1;  // DO NOT CHANGE: on the wire
constexpr uint16_t kKnownFlags = kFlagHasImm;

// Error messages in replies are bounded so a peer cannot make us buffer much for them.
constexpr uint32_t kMaxErrorMessageBytes = 4096;

struct FrameHeader {
  FrameType type = FrameType::kSend;
  uint8_t code = 0;
  uint16_t flags = 0;
  uint32_t payload_length = 0;
  uint64_t op_id = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t aux = 0;
};

// Limits a receiver enforces on headers before reading any payload.
struct FrameLimits {
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
  uint64_t max_transfer_bytes = 1ull << 30;
  bool handshake_phase = false;  // only kHandshake frames allowed, and only then
};

void EncodeFrameHeader(const FrameHeader& h, char* dst /* kFrameHeaderBytes */);
// Decodes and validates a header: known type and flags, a valid status code, payload length
// within `limits` for its type, zero fields where the type has none. Returns Corruption (with
// what was wrong) for anything else; the connection must then be dropped.
Status DecodeFrameHeader(const char* src /* kFrameHeaderBytes */, const FrameLimits& limits,
                         FrameHeader* h);

// Checks a peer's one-sided access of [addr, addr+length) against a registered region:
// access flag present, range inside the region, no overflow. Returns OK, PermissionDenied or
// OutOfRange with a message naming the problem. Used by the target's transport thread.
Status CheckRemoteAccess(const MemoryRegion& region, uint64_t addr, uint64_t length,
                         uint32_t needed_access);

// A whole frame as one string (header + payload), for small frames and tests.
std::string EncodeFrame(const FrameHeader& h, std::string_view payload);

}  // namespace nova::transport
