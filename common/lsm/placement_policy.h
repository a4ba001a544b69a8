// PlacementPolicy: how a table store chooses the StoCs that receive a table's fragments
// (DESIGN.md section 5; the choosing itself is stoc/client/placement.h). Here because an
// offloaded compaction job (compaction_job.h) carries it to the StoC that runs the job.
//
//   random      rho distinct StoCs, uniformly at random.
//   power-of-d  sample d distinct StoCs uniformly, keep the rho with the shortest disk
//               queues.
#pragma once

#include <string_view>

#include "common/status.h"

namespace nova::lsm {

enum class PlacementPolicy {
  kRandom,
  kPowerOfD,
};

// Parses "random" or "power-of-d" into *policy. Returns InvalidArgument (listing the
// accepted names) for anything else, leaving *policy unchanged.
Status ParsePlacementPolicy(std::string_view name, PlacementPolicy* policy);
// "random" or "power-of-d": the name ParsePlacementPolicy accepts.
const char* PlacementPolicyName(PlacementPolicy policy);

}  // namespace nova::lsm
