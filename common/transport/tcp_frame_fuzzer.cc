// Fuzzes the tcp backend's frame-header decoder and its one-sided access check: arbitrary
// bytes must decode to a valid header or an error, never crash; a decoded header must
// re-encode to the same bytes; an access the check accepts must lie inside the region.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/transport/tcp_frame.h"

using namespace nova::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static char region_mem[4096];
  const char* p = reinterpret_cast<const char*>(data);
  for (int phase = 0; phase < 2; ++phase) {
    FrameLimits limits;
    limits.max_message_bytes = 1 << 20;
    limits.max_transfer_bytes = 1 << 24;
    limits.handshake_phase = phase == 1;
    size_t off = 0;
    // A stream of headers, each followed by its (bounded) payload.
    while (size - off >= kFrameHeaderBytes) {
      FrameHeader h;
      if (!DecodeFrameHeader(p + off, limits, &h).ok()) break;
      char again[kFrameHeaderBytes];
      EncodeFrameHeader(h, again);
      if (std::memcmp(again, p + off, kFrameHeaderBytes) != 0) std::abort();
      off += kFrameHeaderBytes;
      if (h.payload_length > size - off) break;
      off += h.payload_length;
    }
  }
  if (size >= 20) {
    MemoryRegion r;
    r.base = region_mem;
    r.length = sizeof(region_mem);
    r.access = static_cast<uint32_t>(data[0] & 3);
    uint64_t addr, len;
    std::memcpy(&addr, data + 4, 8);
    std::memcpy(&len, data + 12, 8);
    // Bias half the inputs toward addresses near the region.
    if (data[1] & 1) addr = reinterpret_cast<uint64_t>(region_mem) + (addr % 8192) - 4096;
    if (data[1] & 2) len %= 8192;
    const uint32_t need = (data[2] & 1) ? kRemoteRead : kRemoteWrite;
    if (CheckRemoteAccess(r, addr, len, need).ok()) {
      const uint64_t base = reinterpret_cast<uint64_t>(region_mem);
      if (addr < base || addr + len > base + sizeof(region_mem) || addr + len < addr) std::abort();
      if ((r.access & need) == 0) std::abort();
    }
  }
  return 0;
}
