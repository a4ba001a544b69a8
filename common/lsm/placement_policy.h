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

// TableAvailability: how a table survives the loss of StoCs (docs/stoc.md, "Table
// availability"; paper section 4.4.4.1). Carried by offloaded compaction jobs too.
//   none      one copy of every fragment: a lost StoC loses the tables it held parts of
//   replicas  R copies of every fragment and filter (fragment_replicas)
//   parity    one copy of each data fragment, of the meta fragment and of the filter, plus m
//             Reed-Solomon parity fragments over all of them (parity_fragments)
//   hybrid    one copy of each data fragment plus m parity fragments over the data; the
//             meta fragment and filter (index blocks) replicated m + 1 times
enum class TableAvailability {
  kNone = 0,
  kReplicas = 1,
  kParity = 2,
  kHybrid = 3,
};

// Parses "none", "replicas", "parity" or "hybrid"; InvalidArgument (listing them) else,
// leaving *mode unchanged.
Status ParseTableAvailability(std::string_view name, TableAvailability* mode);
const char* TableAvailabilityName(TableAvailability mode);

}  // namespace nova::lsm
