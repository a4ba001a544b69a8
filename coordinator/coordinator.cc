#include "coordinator/coordinator.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

namespace nova::coordinator {

namespace {

std::string JoinIds(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options) : options_(std::move(options)) {}

Coordinator::~Coordinator() { Shutdown(); }

Status Coordinator::Init() {
  NOVA_RETURN_NOT_OK_PREPEND(ValidateMemberId(options_.id), "coordinator id");
  if (options_.recheck_interval.count() <= 0 || options_.retry_min.count() <= 0 ||
      options_.retry_max < options_.retry_min) {
    return Status::InvalidArgument("coordinator intervals must be positive");
  }
  store_ = std::make_unique<ConfigStore>(options_.store);
  NOVA_RETURN_NOT_OK(store_->Init());
  election_ = std::make_unique<LeaderElection>(store_->zk(), store_->ElectionPath(), options_.id);
  election_watch_ = store_->zk()->AddWatch([this] { Wake(); });
  store_->WatchMembers([this] { Wake(); });
  store_->WatchConfig([this](const ClusterConfig&) { Wake(); });
  Status s = store_->Register(MemberKind::kCoordinator, options_.id, options_.info);
  if (!s.ok()) {
    LOG(WARNING) << "coordinator " << options_.id << " not registered yet: " << s.ToString()
                 << " (retrying in the background)";
  }
  return Status::OK();
}

Status Coordinator::Start() {
  MutexLock l(&mu_);
  if (!store_) return Status::IllegalState("Coordinator::Start() before a successful Init()");
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void Coordinator::Shutdown() {
  {
    MutexLock l(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (election_) {
    // Best effort: the session close below removes the node anyway; resigning first
    // only makes the handover explicit in the log.
    Status s = election_->Resign();
    if (!s.ok()) LOG(WARNING) << "resigning: " << s.ToString();
  }
  if (store_) store_->Shutdown();
  LOG(INFO) << "coordinator " << options_.id << " stopped";
}

bool Coordinator::is_leader() const {
  MutexLock l(&mu_);
  return is_leader_;
}

std::string Coordinator::leader_id() const {
  MutexLock l(&mu_);
  return leader_id_;
}

uint64_t Coordinator::published_epoch() const {
  MutexLock l(&mu_);
  return published_epoch_;
}

void Coordinator::Wake() {
  {
    MutexLock l(&mu_);
    wake_ = true;
  }
  cv_.NotifyAll();
}

void Coordinator::Run() {
  std::chrono::milliseconds backoff = options_.retry_min;
  MutexLock l(&mu_);
  while (!shutdown_) {
    wake_ = false;
    l.Unlock();
    Status s = Step();
    if (!s.ok() && s.ToString() != last_error_) {
      LOG(WARNING) << "coordinator " << options_.id << ": " << s.ToString() << "; retrying";
    }
    last_error_ = s.ok() ? "" : s.ToString();
    l.Lock();
    if (!s.ok()) is_leader_ = false;  // unsure: do not claim leadership
    const std::chrono::milliseconds wait = s.ok() ? options_.recheck_interval : backoff;
    backoff = s.ok() ? options_.retry_min : std::min(backoff * 2, options_.retry_max);
    cv_.WaitUntil(&l, std::chrono::steady_clock::now() + wait,
                  [this]() REQUIRES(mu_) { return shutdown_ || wake_; });
  }
}

Status Coordinator::Step() {
  std::string leader;
  Result<bool> leads = election_->Check(election_watch_, &leader);
  if (!leads.ok()) return leads.status().Prepend("leader election");
  bool was_leader;
  std::string previous_leader;
  {
    MutexLock l(&mu_);
    was_leader = is_leader_;
    previous_leader = leader_id_;
    is_leader_ = leads.value();
    leader_id_ = leader;
  }
  if (!leads.value()) {
    leading_ = false;
    if (was_leader || previous_leader != leader) {
      LOG(INFO) << "coordinator " << options_.id << " follows leader " << leader;
    }
    return Status::OK();
  }
  if (!was_leader) LOG(INFO) << "coordinator " << options_.id << " is the leader";
  if (!leading_) {
    // A real change of leader (not a failed step, which also clears is_leader_): the
    // failover clocks start over, after the settling time.
    leading_ = true;
    leading_since_ = MonoNow();
    ltc_missing_since_.clear();
    stoc_missing_since_.clear();
  }
  return Lead();
}

Status Coordinator::Lead() {
  int32_t version = 0;
  Result<ClusterConfig> config = store_->ReadConfig(&version);
  if (config.status().IsNotFound()) {
    if (!reported_no_config_) {
      LOG(INFO) << config.status().message() << "; waiting for it";
      reported_no_config_ = true;
    }
    return Status::OK();
  }
  if (!config.ok()) return config.status();
  reported_no_config_ = false;

  LiveMembers live;
  for (MemberKind kind : {MemberKind::kLtc, MemberKind::kLogc, MemberKind::kStoc}) {
    auto members = store_->ListMembers(kind);
    if (!members.ok()) return members.status();
    std::map<std::string, std::string>* out = kind == MemberKind::kLtc    ? &live.ltcs
                                              : kind == MemberKind::kLogc ? &live.logcs
                                                                          : &live.stocs;
    for (const auto& [id, info] : members.value()) {
      (*out)[id] = info.MainAddress();
      auto incarnation = info.addresses.find("incarnation");
      if (kind == MemberKind::kLtc && incarnation != info.addresses.end()) {
        live.ltc_incarnations[id] = incarnation->second;
      }
    }
  }
  AssignmentOptions ao;
  ao.min_ltcs = options_.min_ltcs;
  TrackLostLtcs(config.value(), live, &ao);
  TrackLostStocs(config.value(), live, &ao);
  ao.max_concurrent_migrations = options_.max_concurrent_migrations;
  ao.migration_timeout_ms = static_cast<uint64_t>(options_.migration_timeout.count());
  ao.now_ms = WallMillis();
  std::optional<ClusterConfig> next = PlanNextConfig(config.value(), live, ao);
  if (!next.has_value()) return Status::OK();
  next->epoch = config->epoch + 1;
  Status s = store_->UpdateConfig(*next, version);
  if (s.code() == Status::Code::kAborted) {
    // Someone else (nova_admin, a deposed leader) wrote first: re-plan from their version.
    LOG(INFO) << "configuration changed under us; re-planning";
    Wake();
    return Status::OK();
  }
  NOVA_RETURN_NOT_OK_PREPEND(s, "publishing epoch " + std::to_string(next->epoch));
  std::string summary;
  for (const auto& [id, address] : next->ltcs) {
    summary += " " + id + "=[" + JoinIds(next->RangesOf(id)) + "]";
  }
  LOG(INFO) << "published configuration epoch " << next->epoch << ": ranges by LTC" << summary
            << "; " << next->logcs.size() << " LogCs, " << next->stocs.size() << " StoCs";
  for (const std::string& ltc : ao.failed) {
    if (config->RangesOf(ltc).empty() || !next->RangesOf(ltc).empty()) continue;
    std::string moved;
    for (uint32_t id : config->RangesOf(ltc)) {
      const RangeAssignment* r = nullptr;
      for (const RangeAssignment& n : next->ranges) r = n.id == id ? &n : r;
      moved += " " + std::to_string(id) + "->" + r->ltc;
    }
    auto mode = next->settings.find("log_mode");
    const bool unlogged = mode == next->settings.end() || mode->second == "none";
    LOG(WARNING) << "failover of LTC " << ltc << ": ranges moved (range->LTC):" << moved
                 << (unlogged ? "; log_mode=none: the writes in its memtables are lost"
                              : "; the new owners recover them from the MANIFEST and logs");
  }
  for (const RangeMigration& m : config->migrations) {
    const RangeMigration* now = next->MigrationOf(m.range);
    if (now == nullptr) {
      // Gone without the move: dropped by rule 6 (it rolls back; the source serves on).
      const std::string why = MigrationDropReason(config.value(), live, ao, m);
      LOG(WARNING) << "migration of range " << m.range << " from LTC " << m.from << " to LTC "
                   << m.to << " dropped: " << (why.empty() ? "the range moved" : why);
    } else if (now->running && !m.running) {
      LOG(INFO) << "migration of range " << m.range << " from LTC " << m.from << " to LTC "
                << m.to << " started";
    }
  }
  for (const std::string& ltc : ao.removed) {
    if (config->ltcs.count(ltc) > 0 && next->ltcs.count(ltc) == 0) {
      LOG(WARNING) << "LTC " << ltc << " left the configuration (gone for longer than "
                   << options_.ltc_grace.count() << " ms)";
    }
  }
  for (const std::string& stoc : ao.removed_stocs) {
    if (config->stocs.count(stoc) > 0 && next->stocs.count(stoc) == 0) {
      LOG(WARNING) << "StoC " << stoc << " left the configuration: not registered for longer "
                   << "than " << options_.stoc_grace.count() << " ms while "
                   << live.stocs.size() << " of " << config->stocs.size()
                   << " StoCs are live; the LTCs repair the table copies it held"
                   << (next->draining_stocs.count(stoc) > 0
                           ? " (it was draining: if it comes back it stays draining)"
                           : " (if it comes back it joins as a new, empty member)");
    }
  }
  MutexLock l(&mu_);
  published_epoch_ = next->epoch;
  return Status::OK();
}

void Coordinator::TrackLostStocs(const ClusterConfig& config, const LiveMembers& live,
                                 AssignmentOptions* ao) {
  const MonoTime now = MonoNow();
  for (auto it = stoc_missing_since_.begin(); it != stoc_missing_since_.end();) {
    const bool back = live.stocs.count(it->first) > 0 || config.stocs.count(it->first) == 0;
    it = back ? stoc_missing_since_.erase(it) : std::next(it);
  }
  if (options_.stoc_grace.count() == 0) return;  // never removed
  // As for LTCs: after a leader change StoCs may still be re-registering.
  const auto settle = options_.leader_settle.count() > 0 ? options_.leader_settle
                                                         : options_.store.session_timeout;
  if (now - leading_since_ < settle) return;
  for (const auto& [id, address] : config.stocs) {
    if (live.stocs.count(id) > 0) continue;
    const MonoTime since = stoc_missing_since_.emplace(id, now).first->second;
    if (now - since >= options_.stoc_grace) ao->removed_stocs.insert(id);
  }
  std::string hold;
  if (!ao->removed_stocs.empty()) {
    hold = StocRemovalHoldReason(config, live);
    if (hold.empty() && config.stocs.size() <= 1) hold = "it is the last StoC";
  }
  if (!hold.empty() && hold != stoc_hold_reported_) {
    std::string ids;
    for (const std::string& id : ao->removed_stocs) ids += (ids.empty() ? "" : ",") + id;
    LOG(WARNING) << "StoCs [" << ids << "] are gone for longer than "
                 << options_.stoc_grace.count() << " ms but stay in the configuration: "
                 << hold;
  }
  stoc_hold_reported_ = hold;
}

void Coordinator::TrackLostLtcs(const ClusterConfig& config, const LiveMembers& live,
                                AssignmentOptions* ao) {
  const MonoTime now = MonoNow();
  for (auto it = ltc_missing_since_.begin(); it != ltc_missing_since_.end();) {
    const bool back = live.ltcs.count(it->first) > 0 || config.ltcs.count(it->first) == 0;
    it = back ? ltc_missing_since_.erase(it) : std::next(it);
  }
  const auto settle = options_.leader_settle.count() > 0 ? options_.leader_settle
                                                         : options_.store.session_timeout;
  const bool settled = now - leading_since_ >= settle;
  for (const auto& [id, address] : config.ltcs) {
    if (live.ltcs.count(id) > 0) continue;
    const MonoTime since = ltc_missing_since_.emplace(id, now).first->second;
    const bool owns = !config.RangesOf(id).empty();
    if (owns && reported_lost_.insert({id, config.epoch}).second) {
      LOG(WARNING) << "LTC " << id << " owns ranges [" << JoinIds(config.RangesOf(id))
                   << "] but is not registered; "
                   << (settled ? "failing them over" : "failing them over unless it registers")
                   << " after " << options_.ltc_failover_delay.count() << " ms"
                   << (settled ? "" : " and this leader's settling time");
    }
    if (!settled) continue;
    if (owns && now - since >= options_.ltc_failover_delay) ao->failed.insert(id);
    if (now - since >= options_.ltc_grace) ao->removed.insert(id);
  }
}

}  // namespace nova::coordinator
