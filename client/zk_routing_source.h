// ZkRoutingSource (client::RoutingSource): the routing table (range -> LTC client address)
// from the cluster configuration in ZooKeeper (coordinator/config_store.h), for nova_cli,
// nova_ycsb -db nova and nova://zk URIs. ToRoutingTable: the conversion, usable on its own
// (tests).
//
// It keeps working from the last configuration while ZooKeeper is unreachable (the store
// keeps it); it never blocks longer than the wait given for the first configuration.
//
// Thread safety: thread-safe.
#pragma once

#include <chrono>

#include "client/nova_client.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"

namespace nova::client {

// Every assigned range with its owner's client address (ranges without an owner, or whose
// owner has no address, are left out: requests for them fail until the coordinator
// assigns them).
RoutingTable ToRoutingTable(const coordinator::ClusterConfig& config);

class ZkRoutingSource final : public RoutingSource {
 public:
  // `store` must be Init()ed and outlive this.
  ZkRoutingSource(coordinator::ConfigStore* store, std::chrono::milliseconds first_config_wait)
      : store_(store), first_config_wait_(first_config_wait) {}

  // Unavailable if there is no configuration yet.
  Result<RoutingTable> Fetch() override;

 private:
  coordinator::ConfigStore* const store_;
  const std::chrono::milliseconds first_config_wait_;
};

}  // namespace nova::client
