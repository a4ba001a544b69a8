// Placement: which StoCs receive a table's rho fragments (DESIGN.md section 5).
//
//   random      rho distinct StoCs, uniformly at random.
//   power-of-d  sample d distinct StoCs uniformly, keep the rho with the shortest disk
//               queues. d defaults to 2 * rho. Loads come from a LoadView fed by the
//               queue depth and pending bytes every StoC reply carries (section 7), so
//               placing a table costs no round trip.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/lsm/placement_policy.h"
#include "common/mutex.h"
#include "common/status.h"

namespace nova::stoc {

// A StoC's load as last reported.
struct StocLoad {
  uint32_t queue_depth = 0;    // storage requests queued or running at the StoC
  uint64_t pending_bytes = 0;  // bytes those requests still have to write or read
  MonoTime updated;            // when the report was received
};

// How long a reported load stays meaningful. Reports ride on replies, so a StoC nobody
// talked to for this long may have drained its queue long ago; treating it as idle sends
// it some work, and the replies refresh its load.
constexpr std::chrono::seconds kDefaultLoadStaleness{5};

// The latest load of each StoC. Thread-safe: all methods may be called concurrently.
class LoadView {
 public:
  explicit LoadView(std::chrono::nanoseconds staleness = kDefaultLoadStaleness)
      : staleness_(staleness) {}

  // Records `load` for the StoC, unless the one already held is newer (replies handled on
  // different threads may arrive out of order). The caller sets load.updated, normally
  // to MonoNow() when the reply arrived.
  void Update(uint32_t stoc_id, const StocLoad& load) EXCLUDES(mu_);

  // The StoC's latest load. A StoC never reported, or whose report is older than the
  // staleness bound, is unknown and returned as an idle StocLoad{} (queue 0, 0 bytes,
  // updated = MonoTime{}).
  StocLoad Get(uint32_t stoc_id) const EXCLUDES(mu_);

  // Forgets a StoC (e.g. it left the configuration).
  void Remove(uint32_t stoc_id) EXCLUDES(mu_);

 private:
  // Constant after construction.
  const std::chrono::nanoseconds staleness_;

  mutable Mutex mu_;
  std::unordered_map<uint32_t, StocLoad> loads_ GUARDED_BY(mu_);
};

// Chooses rho distinct StoCs from `candidates` (a repeated id counts once) into *out,
// replacing its contents. For kPowerOfD, samples min(d, n) distinct candidates uniformly
// (d == 0 means 2 * rho) and keeps the rho with the smallest queue_depth in `loads`, ties
// broken by smaller pending_bytes, then by sample order; *out is in that order (least
// loaded first). For kRandom, *out is the sample, in sample order; `loads` and d are not
// used.
// Returns InvalidArgument if rho < 1, fewer than rho distinct candidates, d < 0, d (when
// not 0) < rho, or rng/out is null.
// Thread safety: a pure function of its arguments and *rng (which it advances), so calls
// with different rngs may run concurrently.
Status ChooseStocs(lsm::PlacementPolicy policy, const std::vector<uint32_t>& candidates,
                   const LoadView& loads, int rho, int d, std::mt19937_64* rng,
                   std::vector<uint32_t>* out);

}  // namespace nova::stoc
