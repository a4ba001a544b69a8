#include "common/lsm/placement_policy.h"

#include <string>

namespace nova::lsm {

namespace {

constexpr std::string_view kRandomName = "random";
constexpr std::string_view kPowerOfDName = "power-of-d";

}  // namespace

Status ParsePlacementPolicy(std::string_view name, PlacementPolicy* policy) {
  if (name == kRandomName) {
    *policy = PlacementPolicy::kRandom;
  } else if (name == kPowerOfDName) {
    *policy = PlacementPolicy::kPowerOfD;
  } else {
    return Status::InvalidArgument("unknown placement policy \"" + std::string(name) +
                                   "\" (expected \"random\" or \"power-of-d\")");
  }
  return Status::OK();
}

const char* PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kRandom:
      return kRandomName.data();
    case PlacementPolicy::kPowerOfD:
      return kPowerOfDName.data();
  }
  return "unknown";
}

Status ParseTableAvailability(std::string_view name, TableAvailability* mode) {
  for (TableAvailability m : {TableAvailability::kNone, TableAvailability::kReplicas,
                              TableAvailability::kParity, TableAvailability::kHybrid}) {
    if (name == TableAvailabilityName(m)) {
      *mode = m;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown table availability \"" + std::string(name) +
                                 "\" (expected none, replicas, parity or hybrid)");
}

const char* TableAvailabilityName(TableAvailability mode) {
  switch (mode) {
    case TableAvailability::kNone:
      return "none";
    case TableAvailability::kReplicas:
      return "replicas";
    case TableAvailability::kParity:
      return "parity";
    case TableAvailability::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

}  // namespace nova::lsm
