#include "logc/client/logc_replica_set.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

namespace nova::logc {

LogcReplicaSet::Links LogcReplicaSet::TransportLinks(transport::Transport* transport) {
  Links links;
  links.is_up = [transport](transport::PeerId peer) { return transport->IsUp(peer); };
  links.connect = [transport](const std::string& address) { return transport->Connect(address); };
  links.now = [] { return MonoNow(); };
  return links;
}

LogcReplicaSet::LogcReplicaSet(Links links, std::chrono::milliseconds retry_interval)
    : links_(std::move(links)), retry_interval_(retry_interval) {}

void LogcReplicaSet::SetLogcs(std::map<std::string, std::string> logcs) {
  MutexLock lock(&mu_);
  for (auto it = logcs_.begin(); it != logcs_.end();) {
    if (logcs.count(it->first) == 0 && it->second.open_logs == 0) {
      it = logcs_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [id, address] : logcs) {
    LogcState& s = logcs_[id];
    if (s.address != address) {
      s.address = address;
      s.peer = transport::kInvalidPeer;
    }
  }
}

std::vector<std::string> LogcReplicaSet::ConfiguredIds() const {
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (auto& [id, s] : logcs_) {
    if (!s.address.empty()) ids.push_back(id);
  }
  return ids;
}

std::vector<std::string> LogcReplicaSet::KnownIds() const {
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (auto& [id, s] : logcs_) ids.push_back(id);
  return ids;
}

Result<transport::PeerId> LogcReplicaSet::PeerFor(const std::string& logc_id) {
  std::string address;
  auto connected = [&]() EXCLUDES(mu_) -> Result<transport::PeerId> {
    MutexLock lock(&mu_);
    auto it = logcs_.find(logc_id);
    if (it == logcs_.end()) return Status::NotFound("unknown LogC " + logc_id);
    if (it->second.peer != transport::kInvalidPeer && links_.is_up(it->second.peer)) {
      return it->second.peer;
    }
    address = it->second.address;
    return Status::Unavailable("not connected");
  };
  auto known = connected();
  if (known.ok() || known.status().IsNotFound()) return known;
  // Concurrent connects to one address would replace each other's connection: one at a
  // time, and the second finds the first's.
  MutexLock connect_lock(&connect_mu_);
  known = connected();
  if (known.ok() || known.status().IsNotFound()) return known;
  auto peer = links_.connect(address);
  if (!peer.ok()) return peer.status().Prepend("connecting to LogC " + logc_id);
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.address == address) {
    it->second.peer = peer.value();
    it->second.unreachable = false;
  }
  return peer.value();
}

void LogcReplicaSet::MarkFailed(const std::string& logc_id) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) {
    it->second.failed_until = links_.now() + retry_interval_;
    it->second.unreachable = true;
  }
}

void LogcReplicaSet::MarkPeerDown(transport::PeerId peer) {
  MutexLock lock(&mu_);
  for (auto& [id, s] : logcs_) {
    if (s.peer == peer) {
      s.failed_until = links_.now() + retry_interval_;
      s.unreachable = true;
    }
  }
}

std::optional<std::string> LogcReplicaSet::ReserveLogc(std::vector<std::string>* exclude) {
  MutexLock lock(&mu_);
  const MonoTime now = links_.now();
  LogcState* best = nullptr;
  const std::string* best_id = nullptr;
  bool best_down = false;
  for (auto& [id, s] : logcs_) {
    if (s.failed_until > now || s.address.empty()) continue;
    if (std::find(exclude->begin(), exclude->end(), id) != exclude->end()) continue;
    // A LogC that is unreachable is tried only when no other is left: it may be gone for
    // good (still in the configuration), and each try costs a connect attempt, which would
    // hold up a copy to a healthy spare for as long as the dead one wins the ties. One the
    // transport has reconnected to (it redials peers) counts as reachable again.
    const bool down =
        s.unreachable && !(s.peer != transport::kInvalidPeer && links_.is_up(s.peer));
    if (best == nullptr || (!down && best_down) ||
        (down == best_down && s.open_logs < best->open_logs)) {  // ties: the first id
      best = &s;
      best_id = &id;
      best_down = down;
    }
  }
  if (best == nullptr) return std::nullopt;
  ++best->open_logs;  // counted now, so concurrent choices spread
  exclude->push_back(*best_id);
  return *best_id;
}

void LogcReplicaSet::ReleaseLogc(const std::string& logc_id) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) --it->second.open_logs;
}

void LogcReplicaSet::ReleaseReplicas(const std::vector<std::string>& logc_ids, bool failed) {
  MutexLock lock(&mu_);
  for (const std::string& id : logc_ids) {
    auto it = logcs_.find(id);
    if (it == logcs_.end()) continue;
    --it->second.open_logs;
    if (failed) it->second.failed_until = links_.now() + retry_interval_;
  }
}

void LogcReplicaSet::AddOpenLogs(const std::vector<std::string>& logc_ids, int delta) {
  MutexLock lock(&mu_);
  for (const std::string& id : logc_ids) {
    auto it = logcs_.find(id);
    if (it != logcs_.end()) it->second.open_logs += delta;
  }
}

int LogcReplicaSet::open_logs(const std::string& logc_id) const {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  return it == logcs_.end() ? 0 : it->second.open_logs;
}

bool LogcReplicaSet::NoteIncarnation(const std::string& logc_id, uint64_t incarnation) {
  if (incarnation == 0) return false;  // not a LogC's (they are never 0)
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it == logcs_.end() || it->second.incarnation == incarnation) return false;
  LOG_IF(WARNING, it->second.incarnation != 0)
      << "LogC " << logc_id << " restarted: its earlier log copies and in-sync marks no "
      << "longer count";
  it->second.incarnation = incarnation;
  it->second.in_sync.clear();
  return true;
}

void LogcReplicaSet::NoteInSync(const std::string& logc_id, uint64_t incarnation,
                                uint32_t range) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.incarnation == incarnation) {
    it->second.in_sync.insert(range);
  }
}

bool LogcReplicaSet::MarkedAt(uint32_t range, const std::vector<std::string>& logc_ids) const {
  MutexLock lock(&mu_);
  for (const std::string& id : logc_ids) {
    auto it = logcs_.find(id);
    if (it == logcs_.end() || it->second.in_sync.count(range) == 0) return false;
  }
  return true;
}

std::vector<std::string> LogcReplicaSet::Unmarked(uint32_t range,
                                                  const std::vector<std::string>& only) const {
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  const MonoTime now = links_.now();
  for (auto& [id, st] : logcs_) {
    if (st.address.empty() || st.in_sync.count(range) != 0) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), id) == only.end()) continue;
    if (st.failed_until > now) continue;
    ids.push_back(id);
  }
  return ids;
}

uint64_t LogcReplicaSet::CountUnsynced(const std::set<uint32_t>& ranges) const {
  MutexLock lock(&mu_);
  uint64_t unsynced = 0;
  for (auto& [id, st] : logcs_) {
    if (st.address.empty()) continue;
    for (uint32_t range : ranges) {
      if (st.in_sync.count(range) == 0) {
        ++unsynced;
        break;
      }
    }
  }
  return unsynced;
}

}  // namespace nova::logc
