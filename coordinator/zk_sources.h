// ZooKeeper-backed sources of what the LTC server and the client library need from the
// cluster configuration (coordinator/config_store.h):
//
//  - ZkAssignmentSource (ltc::AssignmentSource): this LTC's ranges and the cluster's StoCs
//    at every epoch, for nova_ltc --zk.
//  - ZkRoutingSource (client::RoutingSource): the routing table (range -> LTC client
//    address), for nova_cli, nova_ycsb -db nova and nova://zk URIs.
//  - ToAssignment / ToRoutingTable: the conversions, usable on their own (tests).
//
// Both keep working from the last configuration while ZooKeeper is unreachable (the store
// keeps it); they never block longer than the wait given for the first configuration.
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
#include <mutex>
#include <string>

#include "client/nova_client.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "ltc/range_assignment.h"

namespace nova::coordinator {

// This LTC's part of `config`: its ranges (owner == ltc_id), the StoCs, the epoch.
ltc::RangeAssignment ToAssignment(const ClusterConfig& config, uint32_t ltc_id);
// Every assigned range with its owner's client address (ranges without an owner, or whose
// owner has no address, are left out: requests for them fail until the coordinator
// assigns them).
client::RoutingTable ToRoutingTable(const ClusterConfig& config);

class ZkAssignmentSource final : public ltc::AssignmentSource {
 public:
  // `store` must be Init()ed and outlive this. Current() waits up to `first_config_wait` for
  // a first configuration; without one it returns an empty assignment (epoch 0) and the
  // configuration reaches the listener once ZooKeeper has it.
  ZkAssignmentSource(ConfigStore* store, uint32_t ltc_id,
                     std::chrono::milliseconds first_config_wait);
  ~ZkAssignmentSource() override;

  Result<ltc::RangeAssignment> Current() override;
  void Watch(ltc::AssignmentListener listener) override;
  void Unwatch() override;

 private:
  // Shared with the store's config callback, which the store keeps until its Shutdown()
  // (it cannot be removed): it must stay valid even after this source is gone.
  struct State {
    uint32_t ltc_id = 0;
    std::mutex mu;  // held while the listener runs, so Unwatch waits for it
    ltc::AssignmentListener listener;
    uint64_t delivered_epoch = 0;  // newest epoch Current() returned or the listener got
  };
  static void OnConfig(State* state, const ClusterConfig& config);

  ConfigStore* const store_;
  const std::chrono::milliseconds first_config_wait_;
  const std::shared_ptr<State> state_;
};

class ZkRoutingSource final : public client::RoutingSource {
 public:
  // `store` must be Init()ed and outlive this.
  ZkRoutingSource(ConfigStore* store, std::chrono::milliseconds first_config_wait)
      : store_(store), first_config_wait_(first_config_wait) {}

  // Unavailable if there is no configuration yet.
  Result<client::RoutingTable> Fetch() override;

 private:
  ConfigStore* const store_;
  const std::chrono::milliseconds first_config_wait_;
};

}  // namespace nova::coordinator
