// Fuzz target for the LTC server's request decoder (client_request.h).
//
// The first two input bytes choose a message type near the client range (so unknown types
// are exercised too); the rest is the payload. Properties:
//  1. decoding never crashes or reads past the input, and fails only with Corruption or
//     NotSupported (the latter only for a type outside kClientTypes);
//  2. a request that decodes re-encodes to bytes that decode to the same request (the
//     codec is canonical up to what it reads);
//  3. the limit check never crashes on what the decoder accepts.
// Any violated property aborts, which is how the fuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ltc/protocol/client_request.h"

namespace nova::ltc {
namespace {

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// Re-encodes a decoded request with the client's encoders.
std::string Reencode(const ClientRequest& r) {
  switch (r.type) {
    case ClientMsg::kGet:
    case ClientMsg::kPut:
    case ClientMsg::kDelete:
    case ClientMsg::kGetSnapshot: return EncodeKeyRequest(r.type, r.key);
    case ClientMsg::kWrite: return EncodeWriteRequest(r.write);
    case ClientMsg::kScan: return EncodeScanRequest(r.scan);
    case ClientMsg::kReleaseSnapshot: return EncodeU64(r.snapshot);
    case ClientMsg::kApproximateSizes: return EncodeApproximateSizesRequest(r.sizes);
    case ClientMsg::kCompactRange: return EncodeCompactRangeRequest(r.compact);
    case ClientMsg::kRangeStats: return EncodeRangeStatsRequest(r.stats);
    default: return std::string();
  }
}

bool SameRequest(const ClientRequest& a, const ClientRequest& b) {
  if (a.type != b.type || a.snapshot != b.snapshot) return false;
  if (a.key.epoch != b.key.epoch || a.key.key != b.key.key || a.key.value != b.key.value ||
      a.key.snapshot != b.key.snapshot) {
    return false;
  }
  if (a.write.epoch != b.write.epoch || a.write.entries.size() != b.write.entries.size()) {
    return false;
  }
  for (size_t i = 0; i < a.write.entries.size(); ++i) {
    const BatchEntry& x = a.write.entries[i];
    const BatchEntry& y = b.write.entries[i];
    if (x.op != y.op || x.key != y.key || x.value != y.value) return false;
  }
  if (a.sizes.epoch != b.sizes.epoch || a.sizes.spans != b.sizes.spans ||
      a.compact.epoch != b.compact.epoch || !(a.compact.span == b.compact.span) ||
      a.stats.with_tables != b.stats.with_tables) {
    return false;
  }
  return a.scan.epoch == b.scan.epoch && a.scan.start == b.scan.start &&
         a.scan.count == b.scan.count && a.scan.snapshot == b.scan.snapshot &&
         a.scan.keys_only == b.scan.keys_only && a.scan.reverse == b.scan.reverse;
}

}  // namespace
}  // namespace nova::ltc

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nova::ltc;
  if (size < 1) return 0;
  // Types 0x02f8 .. 0x0317: the client range and some neighbours on both sides.
  const uint16_t type = static_cast<uint16_t>(0x02f8 + (data[0] & 0x1f));
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  ClientRequest r;
  const nova::Status s = DecodeClientRequest(type, payload, &r);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsCorruption() || s.code() == nova::Status::Code::kNotSupported);
    if (s.code() == nova::Status::Code::kNotSupported) FUZZ_CHECK(!kClientTypes.Contains(type));
    return 0;
  }
  FUZZ_CHECK(kClientTypes.Contains(type));
  ClientRequest again;
  FUZZ_CHECK(DecodeClientRequest(type, Reencode(r), &again).ok());
  FUZZ_CHECK(SameRequest(r, again));
  ClientLimits limits{64, 256, 8, 1 << 20, 100};
  (void)CheckClientLimits(r, limits);
  return 0;
}
