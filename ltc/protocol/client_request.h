// ClientRequest: one decoded client request as the LTC server sees it, and the limit checks
// it must pass before it reaches an engine. Split from the server so the decoder can be
// fuzzed (client_request_fuzzer.cc) without sockets or engines.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "ltc/protocol/client_protocol.h"

namespace nova::ltc {

struct ClientRequest {
  ClientMsg type = ClientMsg::kDescribe;
  KeyRequest key;      // kGet, kPut, kDelete, kGetSnapshot
  WriteRequest write;  // kWrite
  ScanRequest scan;    // kScan
  uint64_t snapshot = 0;  // kReleaseSnapshot
  ApproximateSizesRequest sizes;  // kApproximateSizes
  CompactRangeRequest compact;    // kCompactRange
  RangeStatsRequest stats;        // kRangeStats
  // The epoch the request was routed with (0: unchecked).
  uint64_t epoch() const;
};

// Decodes the payload of a request of wire type `type`. NotSupported for a type outside
// kClientTypes; Corruption for a malformed payload.
Status DecodeClientRequest(uint16_t type, std::string_view payload, ClientRequest* out);

// InvalidArgument naming the limit and its flag when a key, value, batch or scan count is
// over `limits` (an empty key is allowed: it is the smallest key).
Status CheckClientLimits(const ClientRequest& r, const ClientLimits& limits);

}  // namespace nova::ltc
