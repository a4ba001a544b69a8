#include "coordinator/zk_sources.h"

#include <charconv>

#include <glog/logging.h>

namespace nova::coordinator {

namespace {

// A decimal member id, or nullopt.
std::optional<uint32_t> NumericId(const std::string& id) {
  uint32_t v = 0;
  const char* end = id.data() + id.size();
  auto [p, ec] = std::from_chars(id.data(), end, v);
  if (ec != std::errc() || p != end || id.empty()) return std::nullopt;
  return v;
}

ltc::RangeInfo ToRangeInfo(const RangeAssignment& r) {
  ltc::RangeInfo info;
  info.id = r.id;
  info.start = r.start;
  info.end = r.end.value_or("");  // "" = unbounded in the protocol
  return info;
}

}  // namespace

ltc::RangeAssignment ToAssignment(const ClusterConfig& config, uint32_t ltc_id) {
  ltc::RangeAssignment a;
  a.epoch = config.epoch;
  a.ltc_id = ltc_id;
  const std::string me = std::to_string(ltc_id);
  for (const RangeAssignment& r : config.ranges) {
    if (r.ltc == me) a.ranges.push_back(ToRangeInfo(r));
  }
  for (const auto& [id, address] : config.stocs) {
    auto n = NumericId(id);
    if (!n) {
      LOG(WARNING) << "configuration epoch " << config.epoch << ": StoC id '" << id
                   << "' is not a number; left out";
      continue;
    }
    a.stocs[*n] = address;
  }
  a.logcs = config.logcs;
  a.settings = config.settings;
  return a;
}

client::RoutingTable ToRoutingTable(const ClusterConfig& config) {
  client::RoutingTable t;
  t.epoch = config.epoch;
  for (const RangeAssignment& r : config.ranges) {
    auto it = config.ltcs.find(r.ltc);
    if (r.ltc.empty() || it == config.ltcs.end() || it->second.empty()) continue;
    t.routes.push_back(client::RoutingTable::Route{ToRangeInfo(r), it->second});
  }
  return t;
}

// ---- ZkAssignmentSource ----------------------------------------------------------------

ZkAssignmentSource::ZkAssignmentSource(ConfigStore* store, uint32_t ltc_id,
                                       std::chrono::milliseconds first_config_wait)
    : store_(store), first_config_wait_(first_config_wait), state_(std::make_shared<State>()) {
  state_->ltc_id = ltc_id;
  std::shared_ptr<State> state = state_;
  store_->WatchConfig([state](const ClusterConfig& c) { OnConfig(state.get(), c); });
}

ZkAssignmentSource::~ZkAssignmentSource() { Unwatch(); }

Result<ltc::RangeAssignment> ZkAssignmentSource::Current() {
  store_->WaitForEpoch(1, first_config_wait_);
  std::optional<ClusterConfig> config = store_->GetLastConfig();
  if (!config) {
    // Serve nothing for now rather than give up: the store keeps trying, and the first
    // configuration reaches the listener (Watch) whenever it comes.
    LOG(WARNING) << (store_->connected() ? "no cluster configuration in ZooKeeper yet (was the "
                                           "cluster created with nova_admin create-cluster?)"
                                         : "ZooKeeper is unreachable")
                 << "; starting with no ranges and waiting for the configuration";
    ltc::RangeAssignment empty;
    empty.ltc_id = state_->ltc_id;
    return empty;
  }
  std::lock_guard lock(state_->mu);
  state_->delivered_epoch = std::max(state_->delivered_epoch, config->epoch);
  return ToAssignment(*config, state_->ltc_id);
}

void ZkAssignmentSource::Watch(ltc::AssignmentListener listener) {
  {
    std::lock_guard lock(state_->mu);
    state_->listener = std::move(listener);
  }
  // A configuration that arrived between Current() and now.
  if (std::optional<ClusterConfig> config = store_->GetLastConfig()) OnConfig(state_.get(), *config);
}

void ZkAssignmentSource::Unwatch() {
  std::lock_guard lock(state_->mu);
  state_->listener = nullptr;
}

void ZkAssignmentSource::OnConfig(State* state, const ClusterConfig& config) {
  std::lock_guard lock(state->mu);
  if (!state->listener || config.epoch <= state->delivered_epoch) return;
  state->delivered_epoch = config.epoch;
  state->listener(ToAssignment(config, state->ltc_id));
}

// ---- ZkRoutingSource -------------------------------------------------------------------

Result<client::RoutingTable> ZkRoutingSource::Fetch() {
  store_->WaitForEpoch(1, first_config_wait_);
  std::optional<ClusterConfig> config = store_->GetLastConfig();
  if (!config) {
    if (!store_->connected()) {
      return Status::Unavailable("ZooKeeper is unreachable and no cluster configuration is "
                                 "known yet");
    }
    return Status::Unavailable("no cluster configuration in ZooKeeper yet (was the cluster "
                               "created with nova_admin create-cluster?)");
  }
  return ToRoutingTable(*config);
}

}  // namespace nova::coordinator
