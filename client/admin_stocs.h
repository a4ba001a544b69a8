// nova_admin's view of StoCs coming and going (docs/coordinator.md, "StoCs coming and
// going"): the LTCs' status documents (coordinator/ltc_status.h) read to tell when a StoC is
// drained, and printed by `nova_admin status`. The commands themselves are in admin_main.cc.
//
// Thread safety: stateless functions; each uses the store it is given (thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"

namespace nova::client {

// What the LTCs still have to do to drain a StoC.
struct StocDrainProgress {
  uint64_t copies_left = 0;  // summed over the LTCs that reported
  // LTCs owning ranges whose status is missing, unreadable or computed before the epoch
  // asked for: their copies are not counted yet.
  std::vector<std::string> behind;
  bool done() const { return copies_left == 0 && behind.empty(); }
};

// Reads the LTCs' status documents: the table copies left on StoC `stoc` (a configuration
// id) per every LTC owning a range of `config`, counting only statuses computed at `epoch`
// or later. Returns ConfigStore::ReadStatuses's errors.
Result<StocDrainProgress> ReadStocDrainProgress(coordinator::ConfigStore* store,
                                                const coordinator::ClusterConfig& config,
                                                const std::string& stoc, uint64_t epoch);

// Waits until every LTC that owns ranges has published a status computed at configuration
// epoch `epoch` or later with no table copy left on `stoc`, printing `what: StoC ID: N table
// copies left to move ...` on stdout every few seconds and a last line when done. Returns
// OK then; IllegalState if the StoC stops draining meanwhile (undrain-stoc); TimedOut after
// `timeout` (the drain goes on); ZooKeeper errors as ConfigStore.
Status WaitStocDrained(coordinator::ConfigStore* store, const std::string& what,
                       const std::string& stoc, uint64_t epoch, std::chrono::seconds timeout);

// Prints one line per LTC status document (nova_admin status): copies at risk, copies to
// move per StoC, relocation totals, "(behind)" when older than `config`. Returns
// ConfigStore::ReadStatuses's errors.
Status PrintLtcStatuses(coordinator::ConfigStore* store, const coordinator::ClusterConfig& config);

}  // namespace nova::client
