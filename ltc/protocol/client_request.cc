#include "ltc/protocol/client_request.h"

#include <string>

namespace nova::ltc {
namespace {

Status CheckKey(std::string_view key, const ClientLimits& limits) {
  if (key.size() > limits.max_key_bytes) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(limits.max_key_bytes) +
                                   " bytes (--ltc_max_key_bytes)");
  }
  return Status::OK();
}

Status CheckValue(std::string_view value, const ClientLimits& limits) {
  if (value.size() > limits.max_value_bytes) {
    return Status::InvalidArgument("value of " + std::to_string(value.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(limits.max_value_bytes) +
                                   " bytes (--ltc_max_value_bytes)");
  }
  return Status::OK();
}

}  // namespace

uint64_t ClientRequest::epoch() const {
  switch (type) {
    case ClientMsg::kWrite: return write.epoch;
    case ClientMsg::kScan: return scan.epoch;
    case ClientMsg::kGet:
    case ClientMsg::kPut:
    case ClientMsg::kDelete:
    case ClientMsg::kGetSnapshot: return key.epoch;
    case ClientMsg::kApproximateSizes: return sizes.epoch;
    case ClientMsg::kCompactRange: return compact.epoch;
    default: return 0;
  }
}

Status DecodeClientRequest(uint16_t type, std::string_view payload, ClientRequest* out) {
  if (!kClientTypes.Contains(type)) {
    return Status::NotSupported("not a client request type: " + std::to_string(type));
  }
  out->type = static_cast<ClientMsg>(type);
  switch (out->type) {
    case ClientMsg::kDescribe:
    case ClientMsg::kStats:
      if (!payload.empty()) {
        return Status::Corruption(std::string(ClientMsgName(type)) + " request has a payload");
      }
      return Status::OK();
    case ClientMsg::kGet:
    case ClientMsg::kPut:
    case ClientMsg::kDelete:
    case ClientMsg::kGetSnapshot:
      return DecodeKeyRequest(out->type, payload, &out->key);
    case ClientMsg::kWrite:
      return DecodeWriteRequest(payload, &out->write);
    case ClientMsg::kScan:
      return DecodeScanRequest(payload, &out->scan);
    case ClientMsg::kReleaseSnapshot:
      return DecodeU64(payload, &out->snapshot);
    case ClientMsg::kApproximateSizes:
      return DecodeApproximateSizesRequest(payload, &out->sizes);
    case ClientMsg::kCompactRange:
      return DecodeCompactRangeRequest(payload, &out->compact);
    case ClientMsg::kRangeStats:
      return DecodeRangeStatsRequest(payload, &out->stats);
    case ClientMsg::kDeclareSynchronous:
    case ClientMsg::kAuthChallenge:
    case ClientMsg::kAuthenticate:
      break;  // the handshake (client_auth.h): the connection listener's, not a request
  }
  return Status::NotSupported("not a client request type: " + std::to_string(type));
}

Status CheckClientLimits(const ClientRequest& r, const ClientLimits& limits) {
  switch (r.type) {
    case ClientMsg::kPut:
      NOVA_RETURN_NOT_OK(CheckValue(r.key.value, limits));
      [[fallthrough]];
    case ClientMsg::kGet:
    case ClientMsg::kDelete:
    case ClientMsg::kGetSnapshot:
      return CheckKey(r.key.key, limits);
    case ClientMsg::kWrite:
      if (r.write.entries.empty()) return Status::InvalidArgument("empty batch");
      if (r.write.entries.size() > limits.max_batch_ops) {
        return Status::InvalidArgument("batch of " + std::to_string(r.write.entries.size()) +
                                       " operations exceeds the limit of " +
                                       std::to_string(limits.max_batch_ops) +
                                       " (--ltc_max_batch_ops)");
      }
      for (const BatchEntry& e : r.write.entries) {
        NOVA_RETURN_NOT_OK(CheckKey(e.key, limits));
        NOVA_RETURN_NOT_OK(CheckValue(e.value, limits));
      }
      return Status::OK();
    case ClientMsg::kScan:
      if (r.scan.count == 0) return Status::InvalidArgument("scan count must be positive");
      if (r.scan.count > limits.max_scan_count) {
        return Status::InvalidArgument("scan count " + std::to_string(r.scan.count) +
                                       " exceeds the limit of " +
                                       std::to_string(limits.max_scan_count) +
                                       " (--ltc_max_scan_count)");
      }
      return CheckKey(r.scan.start, limits);
    case ClientMsg::kApproximateSizes:
      // Bounded by the request size only; each span costs a few table index lookups.
      for (const KeyRange& k : r.sizes.spans) {
        NOVA_RETURN_NOT_OK(CheckKey(k.start, limits));
        NOVA_RETURN_NOT_OK(CheckKey(k.end.value_or(""), limits));
      }
      return Status::OK();
    case ClientMsg::kCompactRange:
      NOVA_RETURN_NOT_OK(CheckKey(r.compact.span.start, limits));
      return CheckKey(r.compact.span.end.value_or(""), limits);
    default:
      return Status::OK();
  }
}

}  // namespace nova::ltc
