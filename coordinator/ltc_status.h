// LtcStatus: the status document each LTC publishes with ConfigStore::PublishStatus under
// status/ltc/<id> (docs/coordinator.md, "Status documents"), and nova_admin reads to tell
// when a StoC is drained (drain-stoc, remove-stoc) and to show repair progress (status).
//
// Thread safety: a value; distinct objects may be used concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::coordinator {

struct LtcStatus {
  // The configuration epoch the LTC had applied when it computed the figures below: they
  // say nothing about changes published after it.
  uint64_t config_epoch = 0;
  // Per StoC that is draining (ClusterConfig::draining_stocs) or was removed from `stocs`:
  // the table copies (fragments, replicas, parity blocks, metadata blocks) of this LTC's
  // ranges still stored there. Keyed by the StoC's number as the LTC knows it (the decimal
  // id of the configuration's `stocs`, ltc/server/zk_assignment_source.cc; see
  // StocNumberKey). A StoC absent here holds none.
  std::map<std::string, uint64_t> copies_to_move;
  // Table copies of this LTC's ranges whose StoC is dead or removed and that are not yet
  // rebuilt elsewhere (a second loss could cost a table).
  uint64_t copies_at_risk = 0;
  // Since the LTC started: tables whose copies were moved or rebuilt onto other StoCs, the
  // bytes written for that, and attempts that failed (retried).
  uint64_t tables_relocated = 0;
  uint64_t bytes_relocated = 0;
  uint64_t relocation_failures = 0;

  // Table copies still to move off StoC `stoc` (a configuration StoC id); 0 if none.
  uint64_t CopiesToMove(const std::string& stoc) const;

  // Compact JSON (one line).
  std::string ToJson() const;
  // Parses a document. Corruption for malformed JSON or wrong types; absent fields keep
  // their defaults and unknown fields are ignored (so later versions can add some). Never
  // throws.
  static Result<LtcStatus> FromJson(std::string_view json);

  bool operator==(const LtcStatus& o) const = default;
};

// The key of `copies_to_move` for the configuration StoC id `stoc`: its decimal number
// without leading zeros ("03" -> "3"), as the LTC numbers StoCs; `stoc` itself if it is
// not a number (the LTC leaves such StoCs out).
std::string StocNumberKey(const std::string& stoc);

}  // namespace nova::coordinator
