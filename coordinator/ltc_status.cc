#include "coordinator/ltc_status.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

namespace nova::coordinator {

namespace {

using nlohmann::json;

// JSON field names. DO NOT CHANGE: read by nova_admin of other versions.
constexpr char kConfigEpochField[] = "config_epoch";
constexpr char kCopiesToMoveField[] = "copies_to_move";
constexpr char kCopiesAtRiskField[] = "copies_at_risk";
constexpr char kTablesRelocatedField[] = "tables_relocated";
constexpr char kBytesRelocatedField[] = "bytes_relocated";
constexpr char kRelocationFailuresField[] = "relocation_failures";

}  // namespace

uint64_t LtcStatus::CopiesToMove(const std::string& stoc) const {
  auto it = copies_to_move.find(StocNumberKey(stoc));
  return it == copies_to_move.end() ? 0 : it->second;
}

std::string LtcStatus::ToJson() const {
  json doc;
  doc[kConfigEpochField] = config_epoch;
  doc[kCopiesToMoveField] = json::object();
  for (const auto& [stoc, n] : copies_to_move) doc[kCopiesToMoveField][stoc] = n;
  doc[kCopiesAtRiskField] = copies_at_risk;
  doc[kTablesRelocatedField] = tables_relocated;
  doc[kBytesRelocatedField] = bytes_relocated;
  doc[kRelocationFailuresField] = relocation_failures;
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<LtcStatus> LtcStatus::FromJson(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Corruption("LTC status: not a JSON object");
  }
  LtcStatus status;
  for (auto [field, target] : {std::pair{kConfigEpochField, &status.config_epoch},
                               std::pair{kCopiesAtRiskField, &status.copies_at_risk},
                               std::pair{kTablesRelocatedField, &status.tables_relocated},
                               std::pair{kBytesRelocatedField, &status.bytes_relocated},
                               std::pair{kRelocationFailuresField, &status.relocation_failures}}) {
    auto it = doc.find(field);
    if (it == doc.end()) continue;
    if (!it->is_number_unsigned()) {
      return Status::Corruption(std::string("LTC status: ") + field + ": want an unsigned integer");
    }
    *target = it->get<uint64_t>();
  }
  if (auto it = doc.find(kCopiesToMoveField); it != doc.end()) {
    if (!it->is_object()) return Status::Corruption("LTC status: copies_to_move: want an object");
    for (const auto& [stoc, n] : it->items()) {
      if (!n.is_number_unsigned()) {
        return Status::Corruption("LTC status: copies_to_move." + stoc +
                                  ": want an unsigned integer");
      }
      status.copies_to_move[stoc] = n.get<uint64_t>();
    }
  }
  return status;
}

std::string StocNumberKey(const std::string& stoc) {
  uint32_t n = 0;
  const char* end = stoc.data() + stoc.size();
  auto [p, ec] = std::from_chars(stoc.data(), end, n);
  if (stoc.empty() || ec != std::errc() || p != end) return stoc;
  return std::to_string(n);
}

}  // namespace nova::coordinator
