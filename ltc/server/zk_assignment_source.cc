#include "ltc/server/zk_assignment_source.h"

#include <glog/logging.h>

#include <charconv>

namespace nova::ltc {

namespace {

// A decimal member id, or nullopt.
std::optional<uint32_t> NumericId(const std::string& id) {
  uint32_t v = 0;
  const char* end = id.data() + id.size();
  auto [p, ec] = std::from_chars(id.data(), end, v);
  if (ec != std::errc() || p != end || id.empty()) return std::nullopt;
  return v;
}

}  // namespace

LtcAssignment ToAssignment(const coordinator::ClusterConfig& config, uint32_t ltc_id,
                           const std::string& incarnation) {
  LtcAssignment a;
  a.epoch = config.epoch;
  a.ltc_id = ltc_id;
  const std::string me = std::to_string(ltc_id);
  auto known = config.ltc_incarnations.find(me);
  const bool mine = incarnation.empty() ||
                    (known != config.ltc_incarnations.end() && known->second == incarnation);
  for (const coordinator::RangeAssignment& r : config.ranges) {
    if (!mine) break;
    if (r.ltc != me) continue;
    a.ranges.push_back(RangeInfo{r.id, r.keys});
    if (r.owner_epoch != 0) a.owner_epochs[r.id] = r.owner_epoch;
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
  for (const std::string& id : config.draining_stocs) {
    auto n = NumericId(id);
    if (n && a.stocs.count(*n) != 0) a.draining_stocs.insert(*n);
  }
  a.logcs = config.logcs;
  a.settings = config.settings;
  return a;
}

// ---- ZkAssignmentSource ----------------------------------------------------------------

ZkAssignmentSource::ZkAssignmentSource(coordinator::ConfigStore* store, uint32_t ltc_id,
                                       std::chrono::milliseconds first_config_wait,
                                       std::string incarnation)
    : store_(store), first_config_wait_(first_config_wait), state_(std::make_shared<State>()) {
  state_->ltc_id = ltc_id;
  state_->incarnation = std::move(incarnation);
  std::shared_ptr<State> state = state_;
  store_->WatchConfig([state](const coordinator::ClusterConfig& c) { OnConfig(state.get(), c); });
}

ZkAssignmentSource::~ZkAssignmentSource() { Unwatch(); }

Result<LtcAssignment> ZkAssignmentSource::Current() {
  store_->WaitForEpoch(1, first_config_wait_);
  std::optional<coordinator::ClusterConfig> config = store_->GetLastConfig();
  if (!config) {
    // Serve nothing for now rather than give up: the store keeps trying, and the first
    // configuration reaches the listener (Watch) whenever it comes.
    LOG(WARNING) << (store_->connected() ? "no cluster configuration in ZooKeeper yet (was the "
                                           "cluster created with nova_admin create-cluster?)"
                                         : "ZooKeeper is unreachable")
                 << "; starting with no ranges and waiting for the configuration";
    LtcAssignment empty;
    empty.ltc_id = state_->ltc_id;
    return empty;
  }
  MutexLock lock(&state_->mu);
  state_->delivered_epoch = std::max(state_->delivered_epoch, config->epoch);
  return ToAssignment(*config, state_->ltc_id, state_->incarnation);
}

void ZkAssignmentSource::Watch(AssignmentListener listener) {
  {
    MutexLock lock(&state_->mu);
    state_->listener = std::move(listener);
  }
  // A configuration that arrived between Current() and now.
  if (std::optional<coordinator::ClusterConfig> config = store_->GetLastConfig())
    OnConfig(state_.get(), *config);
}

void ZkAssignmentSource::Unwatch() {
  MutexLock lock(&state_->mu);
  state_->listener = nullptr;
}

void ZkAssignmentSource::OnConfig(State* state, const coordinator::ClusterConfig& config) {
  MutexLock lock(&state->mu);
  if (!state->listener || config.epoch <= state->delivered_epoch) return;
  state->delivered_epoch = config.epoch;
  state->listener(ToAssignment(config, state->ltc_id, state->incarnation));
}

}  // namespace nova::ltc
