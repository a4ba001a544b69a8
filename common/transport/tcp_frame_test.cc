#include "common/transport/tcp_frame.h"

#include <gtest/gtest.h>

#include <cstring>

namespace nova::transport {
namespace {

FrameLimits DataLimits() {
  FrameLimits l;
  l.max_message_bytes = 1 << 20;
  l.max_transfer_bytes = 64 << 20;
  return l;
}

TEST(TcpFrameTest, HeaderRoundTrip) {
  FrameHeader h;
  h.type = FrameType::kWrite;
  h.flags = kFlagHasImm;
  h.payload_length = 12345;
  h.op_id = 0x0102030405060708ull;
  h.addr = 0xfffffffffff00000ull;
  h.rkey = 0xabcdef01;
  h.aux = 77;
  char buf[kFrameHeaderBytes];
  EncodeFrameHeader(h, buf);
  FrameHeader d;
  ASSERT_TRUE(DecodeFrameHeader(buf, DataLimits(), &d).ok());
  EXPECT_EQ(d.type, h.type);
  EXPECT_EQ(d.flags, h.flags);
  EXPECT_EQ(d.payload_length, h.payload_length);
  EXPECT_EQ(d.op_id, h.op_id);
  EXPECT_EQ(d.addr, h.addr);
  EXPECT_EQ(d.rkey, h.rkey);
  EXPECT_EQ(d.aux, h.aux);
}

TEST(TcpFrameTest, LittleEndianLayoutIsFixed) {
  FrameHeader h;
  h.type = FrameType::kSend;
  h.payload_length = 0x01020304;
  h.op_id = 5;
  char buf[kFrameHeaderBytes];
  EncodeFrameHeader(h, buf);
  EXPECT_EQ(buf[0], 2);
  EXPECT_EQ(buf[4], 0x04);
  EXPECT_EQ(buf[7], 0x01);
  EXPECT_EQ(buf[8], 5);
}

Status DecodeWith(FrameHeader h, FrameLimits l = DataLimits()) {
  char buf[kFrameHeaderBytes];
  EncodeFrameHeader(h, buf);
  FrameHeader d;
  return DecodeFrameHeader(buf, l, &d);
}

TEST(TcpFrameTest, InvalidHeadersAreRejected) {
  char buf[kFrameHeaderBytes] = {};
  FrameHeader d;
  EXPECT_TRUE(DecodeFrameHeader(buf, DataLimits(), &d).IsCorruption());  // type 0
  buf[0] = 9;
  EXPECT_TRUE(DecodeFrameHeader(buf, DataLimits(), &d).IsCorruption());

  FrameHeader h;
  h.type = FrameType::kSend;
  h.payload_length = (1 << 20) + 1;
  EXPECT_TRUE(DecodeWith(h).IsCorruption());  // over max_message_bytes
  h.payload_length = 1 << 20;
  EXPECT_TRUE(DecodeWith(h).ok());
  h.code = 3;
  EXPECT_TRUE(DecodeWith(h).IsCorruption());  // status code on a request
  h.code = 0;
  h.flags = kFlagHasImm;
  EXPECT_TRUE(DecodeWith(h).IsCorruption());  // flags on a send

  FrameHeader w;
  w.type = FrameType::kWrite;
  w.flags = 0x8;
  EXPECT_TRUE(DecodeWith(w).IsCorruption());  // unknown flag
  w.flags = 0;
  w.payload_length = (64 << 20) + 1;
  EXPECT_TRUE(DecodeWith(w).IsCorruption());

  FrameHeader r;
  r.type = FrameType::kReadReq;
  r.payload_length = 1;
  EXPECT_TRUE(DecodeWith(r).IsCorruption());  // read request with payload

  FrameHeader a;
  a.type = FrameType::kAck;
  a.payload_length = 4;
  EXPECT_TRUE(DecodeWith(a).IsCorruption());  // OK ack with payload
  a.code = static_cast<uint8_t>(Status::Code::kOutOfRange);
  EXPECT_TRUE(DecodeWith(a).ok());
  a.payload_length = kMaxErrorMessageBytes + 1;
  EXPECT_TRUE(DecodeWith(a).IsCorruption());
  a.payload_length = 0;
  a.code = Status::kMaxCode + 1;
  EXPECT_TRUE(DecodeWith(a).IsCorruption());
}

TEST(TcpFrameTest, HandshakeFramesOnlyInHandshakePhase) {
  FrameHeader h;
  h.type = FrameType::kHandshake;
  h.payload_length = 10;
  EXPECT_TRUE(DecodeWith(h).IsCorruption());
  FrameLimits hs = DataLimits();
  hs.handshake_phase = true;
  EXPECT_TRUE(DecodeWith(h, hs).ok());
  FrameHeader s;
  s.type = FrameType::kSend;
  EXPECT_TRUE(DecodeWith(s, hs).IsCorruption());
}

TEST(TcpFrameTest, RemoteAccessChecks) {
  char mem[4096];
  MemoryRegion r;
  r.base = mem;
  r.length = sizeof(mem);
  r.access = kRemoteWrite;
  const uint64_t base = reinterpret_cast<uint64_t>(mem);
  EXPECT_TRUE(CheckRemoteAccess(r, base, 4096, kRemoteWrite).ok());
  EXPECT_TRUE(CheckRemoteAccess(r, base + 4096, 0, kRemoteWrite).ok());
  EXPECT_TRUE(CheckRemoteAccess(r, base + 4095, 1, kRemoteWrite).ok());
  EXPECT_TRUE(CheckRemoteAccess(r, base + 4095, 2, kRemoteWrite).IsOutOfRange());
  EXPECT_TRUE(CheckRemoteAccess(r, base - 1, 1, kRemoteWrite).IsOutOfRange());
  EXPECT_TRUE(CheckRemoteAccess(r, base, 4097, kRemoteWrite).IsOutOfRange());
  EXPECT_TRUE(CheckRemoteAccess(r, UINT64_MAX, 2, kRemoteWrite).IsOutOfRange());
  EXPECT_TRUE(CheckRemoteAccess(r, base + 1, UINT64_MAX, kRemoteWrite).IsOutOfRange());
  EXPECT_TRUE(CheckRemoteAccess(r, base, 1, kRemoteRead).IsPermissionDenied());
}

}  // namespace
}  // namespace nova::transport
