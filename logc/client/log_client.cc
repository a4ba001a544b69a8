#include "logc/client/log_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <glog/logging.h>

#include "logc/client/log_client_internal.h"

namespace nova::logc {

LogClient::LogClient(LogClientOptions options, rpc::RpcEndpoint* endpoint,
                     MetricsRegistry* metrics)
    : options_(std::move(options)),
      mode_(options_.mode),
      replicas_(options_.replicas),
      min_insync_(options_.min_insync_replicas),
      endpoint_(endpoint),
      delete_pool_("log-delete", 1, kMaxQueuedDeletes) {
  if (metrics == nullptr) {
    own_metrics_ = std::make_unique<MetricsRegistry>();
    metrics = own_metrics_.get();
  }
  metrics_ = metrics;
  m_.appends = metrics->GetCounter("log_client_appends_total", "Log appends");
  m_.writes = metrics->GetCounter("log_client_writes_total",
                                "Group-commit rounds (one WRITE per replica each)");
  m_.bytes = metrics->GetCounter("log_client_bytes_total", "Bytes appended to logs");
  m_.replica_failures = metrics->GetCounter("log_client_replica_failures_total",
                                          "Log replicas dropped after an error or timeout");
  m_.rereplications = metrics->GetCounter("log_client_rereplications_total",
                                        "Log replicas re-created on a spare LogC");
  m_.errors = metrics->GetCounter("log_client_errors_total",
                                "Failed opens, re-replications and deletes");
  m_.recovery_refusals = metrics->GetCounter(
      "log_client_recovery_refusals_total",
      "Recoveries refused because a log with acknowledged writes might be missed");
  m_.append_latency_us = metrics->GetHistogram("log_client_append_latency_us",
                                             "Append latency (until the mode's guarantee holds)");
  metrics->RegisterCallbackGauge(
      "log_client_underreplicated_logs",
      "Logs holding data with fewer than log_replicas live replicas (last repair pass)",
      [this] { return static_cast<double>(repair_gauges_.underreplicated.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_unsynced_logcs",
      "LogCs not yet marked in sync for every range of this LTC (last repair pass)",
      [this] { return static_cast<double>(repair_gauges_.unsynced_logcs.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_recovery_blocked_ranges",
      "Ranges whose recovery waits for a LogC that may hold a log no other has", [this] {
        MutexLock lock(&mu_);
        return static_cast<double>(blocked_ranges_.size());
      });
  endpoint_->RegisterService(wire::TypeRange{kLogPersisted, kLogPersisted}, this, nullptr);
  endpoint_->AddObserver(this);
  repairer_ = std::thread([this] { RepairLoop(); });
}

LogClient::~LogClient() {
  {
    MutexLock lock(&repair_mu_);
    stopping_ = true;
  }
  repair_cv_.NotifyAll();
  repairer_.join();
  for (const char* gauge : {"log_client_underreplicated_logs", "log_client_unsynced_logcs",
                            "log_client_recovery_blocked_ranges"}) {
    metrics_->UnregisterCallbackGauge(gauge);
  }
  delete_pool_.Shutdown();
}

int LogClient::InsyncTarget() const {
  const int r = replicas_.load();
  const int m = min_insync_.load();
  return m <= 0 ? r : std::min(m, r);
}

void LogClient::SetLogcs(std::map<std::string, std::string> logcs) {
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

void LogClient::ForgetRange(uint32_t range) {
  MutexLock lock(&mu_);
  ranges_.erase(range);
}

LogClient::Stats LogClient::GetStats() const {
  Stats s;
  s.appends = m_.appends->value();
  s.writes = m_.writes->value();
  s.bytes = m_.bytes->value();
  s.replica_failures = m_.replica_failures->value();
  s.rereplications = m_.rereplications->value();
  s.underreplicated = repair_gauges_.underreplicated.load();
  s.unsynced_logcs = repair_gauges_.unsynced_logcs.load();
  s.recovery_refusals = m_.recovery_refusals->value();
  s.repair_passes = repair_gauges_.passes.load();
  return s;
}

// ---- LogCs ------------------------------------------------------------------------

Result<transport::PeerId> LogClient::PeerFor(const std::string& logc_id) {
  std::string address;
  auto connected = [&]() -> Result<transport::PeerId> {
    MutexLock lock(&mu_);
    auto it = logcs_.find(logc_id);
    if (it == logcs_.end()) return Status::NotFound("unknown LogC " + logc_id);
    if (it->second.peer != transport::kInvalidPeer &&
        endpoint_->transport()->IsUp(it->second.peer)) {
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
  auto peer = endpoint_->transport()->Connect(address);
  if (!peer.ok()) return peer.status().Prepend("connecting to LogC " + logc_id);
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.address == address) {
    it->second.peer = peer.value();
    it->second.unreachable = false;
  }
  return peer.value();
}

void LogClient::MarkFailed(const std::string& logc_id) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) {
    it->second.failed_until = MonoNow() + options_.retry_interval;
    it->second.unreachable = true;
  }
}

std::optional<std::string> LogClient::ReserveLogc(std::vector<std::string>* exclude) {
  MutexLock lock(&mu_);
  const MonoTime now = MonoNow();
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
    const bool down = s.unreachable && !(s.peer != transport::kInvalidPeer &&
                                         endpoint_->transport()->IsUp(s.peer));
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

void LogClient::ReleaseLogc(const std::string& logc_id) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) --it->second.open_logs;
}

void LogClient::OnPeerDown(transport::PeerId peer, const Status& why) {
  std::vector<std::shared_ptr<Log>> logs;
  {
    MutexLock lock(&mu_);
    for (auto& [id, s] : logcs_) {
      if (s.peer == peer) {
        s.failed_until = MonoNow() + options_.retry_interval;
        s.unreachable = true;
      }
    }
    for (auto& [key, log] : logs_) logs.push_back(log);
  }
  for (auto& log : logs) {
    std::lock_guard lock(log->mu);
    bool changed = false;
    for (auto& rep : log->replicas) {
      if (rep->peer == peer && !rep->failed) {
        rep->failed = true;
        rep->why = Status::NetworkError("LogC down: " + why.ToString());
        changed = true;
      }
    }
    if (changed) log->cv.notify_all();
  }
  repair_cv_.NotifyAll();  // re-replicate at once where a spare is up
}

void LogClient::HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                              rpc::Responder responder) {
  (void)responder;  // a notification: nothing to answer
  if (type != kLogPersisted) return;
  LogPersisted m;
  Status s = Decode(payload, &m);
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 100) << "malformed kLogPersisted from peer " << peer << ": "
                              << s.ToString();
    return;
  }
  AckRoute route;
  {
    MutexLock lock(&acks_mu_);
    auto it = acks_.find({peer, m.handle});
    if (it == acks_.end()) return;  // a deleted or dropped replica
    route = it->second;
  }
  auto log = route.log.lock();
  if (log == nullptr) return;
  std::lock_guard lock(log->mu);
  if (route.segment >= route.replica->segments.size()) return;
  Replica::Segment& seg = route.replica->segments[route.segment];
  if (!m.status.ok()) {
    seg.ack_error = m.status;
  } else {
    seg.persisted = std::max(seg.persisted, m.persisted_length);
  }
  log->cv.notify_all();
}

// ---- Delete -----------------------------------------------------------------------

void LogClient::Delete(uint32_t range, std::vector<uint64_t> memtables) {
  std::vector<std::shared_ptr<Log>> logs;
  std::vector<std::string> logc_ids;
  {
    MutexLock lock(&mu_);
    for (uint64_t m : memtables) {
      auto it = logs_.find({range, m});
      if (it == logs_.end()) continue;
      logs.push_back(it->second);
      logs_.erase(it);
    }
    for (auto& [id, s] : logcs_) logc_ids.push_back(id);
  }
  for (auto& log : logs) {
    std::vector<std::shared_ptr<Replica>> dropped;
    {
      std::lock_guard lock(log->mu);
      if (log->dead.ok())
        log->dead = Status::Aborted(LogName(range, log->memtable) + " was deleted");
      dropped = log->replicas;
      log->replicas.clear();
      log->deleted = true;
      log->cv.notify_all();
    }
    Forget(dropped, false);
  }
  auto task = [this, range, memtables = std::move(memtables), logc_ids] {
    DeleteLogsRequest req{range, memtables};
    const std::string payload = Encode(req);
    for (const std::string& id : logc_ids) {
      auto peer = PeerFor(id);
      Status s = peer.status();
      if (s.ok())
        s = endpoint_->CallSync(peer.value(), kDeleteLogs, payload, options_.timeout).status();
      if (!s.ok()) {
        m_.errors->Increment();
        LOG(WARNING) << "deleting logs of range " << range << " at LogC " << id << ": "
                     << s.ToString();
      }
    }
  };
  // Never inline: callers may hold locks (the engine drops logs under its mutex). A delete
  // that cannot be queued leaves the files behind; the LTC's MANIFEST marks them obsolete,
  // so they are never replayed and the next recovery deletes them.
  Status queued = delete_pool_.Submit(task);
  if (!queued.ok()) {
    m_.errors->Increment();
    LOG(WARNING) << "deleting logs of range " << range << " not queued (" << queued.ToString()
                 << "); recovery collects them";
  }
}

}  // namespace nova::logc
