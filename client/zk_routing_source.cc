#include "client/zk_routing_source.h"

namespace nova::client {

RoutingTable ToRoutingTable(const coordinator::ClusterConfig& config) {
  RoutingTable t;
  t.epoch = config.epoch;
  for (const coordinator::RangeAssignment& r : config.ranges) {
    auto it = config.ltcs.find(r.ltc);
    if (r.ltc.empty() || it == config.ltcs.end() || it->second.empty()) continue;
    t.routes.push_back(RoutingTable::Route{ltc::RangeInfo{r.id, r.keys}, it->second});
  }
  return t;
}

Result<RoutingTable> ZkRoutingSource::Fetch() {
  store_->WaitForEpoch(1, first_config_wait_);
  std::optional<coordinator::ClusterConfig> config = store_->GetLastConfig();
  if (!config) {
    if (!store_->connected()) {
      return Status::Unavailable(
          "ZooKeeper is unreachable and no cluster configuration is "
          "known yet");
    }
    return Status::Unavailable(
        "no cluster configuration in ZooKeeper yet (was the cluster "
        "created with nova_admin create-cluster?)");
  }
  return ToRoutingTable(*config);
}

}  // namespace nova::client
