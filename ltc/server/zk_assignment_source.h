// ZkAssignmentSource (ltc::AssignmentSource): this LTC's ranges and the cluster's StoCs and
// LogCs at every epoch, from the cluster configuration in ZooKeeper
// (coordinator/config_store.h), for nova_ltc --zk. ToAssignment: the conversion, usable on
// its own (tests).
//
// It keeps working from the last configuration while ZooKeeper is unreachable (the store
// keeps it); it never blocks longer than the wait given for the first configuration.
//
// Ids: the configuration names members by string ids; LTCs and StoCs must use decimal
// numbers (their daemons' --ltc_id / --stoc_id). A StoC with a non-numeric id is left out
// (logged).
//
// Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "common/mutex.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "ltc/server/ltc_assignment.h"

namespace nova::ltc {

// This LTC's part of `config`: its ranges (owner == ltc_id), the StoCs, the epoch. With an
// `incarnation` (this process's, as registered), no range until the configuration names
// it (ClusterConfig::ltc_incarnations): until then the owner epochs may still be those of
// a previous process with this id.
LtcAssignment ToAssignment(const coordinator::ClusterConfig& config, uint32_t ltc_id,
                           const std::string& incarnation = "");

class ZkAssignmentSource final : public AssignmentSource {
 public:
  // `store` must be Init()ed and outlive this. Current() waits up to `first_config_wait` for
  // a first configuration; without one it returns an empty assignment (epoch 0) and the
  // configuration reaches the listener once ZooKeeper has it.
  ZkAssignmentSource(coordinator::ConfigStore* store, uint32_t ltc_id,
                     std::chrono::milliseconds first_config_wait, std::string incarnation = "");
  ~ZkAssignmentSource() override;

  Result<LtcAssignment> Current() override EXCLUDES(state_->mu);
  void Watch(AssignmentListener listener) override EXCLUDES(state_->mu);
  void Unwatch() override EXCLUDES(state_->mu);

 private:
  // Shared with the store's config callback, which the store keeps until its Shutdown()
  // (it cannot be removed): it must stay valid even after this source is gone.
  struct State {
    uint32_t ltc_id = 0;      // constant after construction
    std::string incarnation;  // constant after construction
    Mutex mu;             // held while the listener runs, so Unwatch waits for it
    AssignmentListener listener GUARDED_BY(mu);
    // Newest epoch Current() returned or the listener got.
    uint64_t delivered_epoch GUARDED_BY(mu) = 0;
  };
  static void OnConfig(State* state, const coordinator::ClusterConfig& config)
      EXCLUDES(state->mu);

  coordinator::ConfigStore* const store_;
  const std::chrono::milliseconds first_config_wait_;
  const std::shared_ptr<State> state_;
};

}  // namespace nova::ltc
