#include "logc/client/log_registry.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "common/fault_point.h"

namespace nova::logc {

using internal::LogName;

LogRegistry::LogRegistry(const internal::LogSettings* settings, std::chrono::milliseconds timeout,
                         rpc::RpcEndpoint* endpoint, LogcReplicaSet* logcs,
                         internal::LogClientMetrics* m, std::function<void()> on_replica_lost)
    : settings_(settings),
      timeout_(timeout),
      endpoint_(endpoint),
      logcs_(logcs),
      m_(m),
      on_replica_lost_(std::move(on_replica_lost)) {}

// ---- The logs and ranges ------------------------------------------------------------

std::shared_ptr<LogRegistry::Log> LogRegistry::GetOrCreate(uint32_t range, uint64_t memtable) {
  MutexLock lock(&mu_);
  ranges_.insert(range);
  auto& log = logs_[{range, memtable}];
  if (log == nullptr) {
    log = std::make_shared<Log>();
    log->range = range;
    log->memtable = memtable;
  }
  return log;
}

std::vector<std::shared_ptr<LogRegistry::Log>> LogRegistry::All() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Log>> logs;
  for (auto& [key, log] : logs_) logs.push_back(log);
  return logs;
}

std::vector<std::shared_ptr<LogRegistry::Log>> LogRegistry::LogsOf(uint32_t range) const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Log>> logs;
  for (auto it = logs_.lower_bound({range, 0}); it != logs_.end() && it->first.first == range;
       ++it) {
    logs.push_back(it->second);
  }
  return logs;
}

std::vector<std::shared_ptr<LogRegistry::Log>> LogRegistry::Remove(
    uint32_t range, const std::vector<uint64_t>& memtables) {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Log>> logs;
  for (uint64_t m : memtables) {
    auto it = logs_.find({range, m});
    if (it == logs_.end()) continue;
    logs.push_back(it->second);
    logs_.erase(it);
  }
  return logs;
}

std::set<uint64_t> LogRegistry::WrittenMemtables(uint32_t range) const {
  MutexLock lock(&mu_);
  std::set<uint64_t> written;
  for (auto& [key, log] : logs_) {
    if (key.first != range) continue;
    MutexLock log_lock(&log->mu);  // order: mu_, then a log's mu
    if (log->durable_end > 0 && !log->recovered) written.insert(key.second);
  }
  return written;
}

void LogRegistry::Adopt(std::shared_ptr<Log> log) {
  std::vector<std::string> holders;
  {
    MutexLock log_lock(&log->mu);  // not shared yet
    for (auto& rep : log->replicas) holders.push_back(rep->logc_id);
  }
  MutexLock lock(&mu_);
  auto& slot = logs_[{log->range, log->memtable}];
  if (slot != nullptr) {
    // A log this client writes (an engine reopened in the same process) stays as it is.
    MutexLock log_lock(&slot->mu);  // order: mu_, then a log's mu
    if (!slot->recovered) return;
    std::vector<std::string> earlier;
    for (auto& rep : slot->replicas) earlier.push_back(rep->logc_id);
    logcs_->AddOpenLogs(earlier, -1);  // the replica set's lock is a leaf
  }
  logcs_->AddOpenLogs(holders, +1);
  slot = std::move(log);
}

Status LogRegistry::WhileNoLogs(const std::function<Status()>& change) {
  MutexLock lock(&mu_);
  if (!logs_.empty()) return Status::IllegalState("the log client already has open logs");
  return change();
}

std::set<uint32_t> LogRegistry::Ranges() const {
  MutexLock lock(&mu_);
  return ranges_;
}

bool LogRegistry::Serves(uint32_t range) const {
  MutexLock lock(&mu_);
  return ranges_.count(range) != 0;
}

void LogRegistry::ForgetRange(uint32_t range) {
  MutexLock lock(&mu_);
  ranges_.erase(range);
  unread_.erase(range);
}

std::vector<std::shared_ptr<LogRegistry::Log>> LogRegistry::RemoveRange(uint32_t range) {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Log>> logs;
  for (auto it = logs_.lower_bound({range, 0}); it != logs_.end() && it->first.first == range;) {
    logs.push_back(it->second);
    it = logs_.erase(it);
  }
  ranges_.erase(range);
  unread_.erase(range);
  return logs;
}

void LogRegistry::NoteUnread(uint32_t range, const std::vector<uint64_t>& memtables) {
  if (memtables.empty()) return;
  MutexLock lock(&mu_);
  unread_[range].insert(memtables.begin(), memtables.end());
}

void LogRegistry::ForgetUnread(uint32_t range, const std::vector<uint64_t>& memtables) {
  MutexLock lock(&mu_);
  auto it = unread_.find(range);
  if (it == unread_.end()) return;
  for (uint64_t m : memtables) it->second.erase(m);
  if (it->second.empty()) unread_.erase(it);
}

bool LogRegistry::HasUnread(uint32_t range) const {
  MutexLock lock(&mu_);
  return unread_.count(range) != 0;
}

void LogRegistry::Block(uint32_t range) {
  MutexLock lock(&mu_);
  blocked_ranges_.insert(range);
}

void LogRegistry::Unblock(uint32_t range) {
  MutexLock lock(&mu_);
  blocked_ranges_.erase(range);
  ranges_.insert(range);
}

size_t LogRegistry::BlockedCount() const {
  MutexLock lock(&mu_);
  return blocked_ranges_.size();
}

// ---- Owner epochs and fences ---------------------------------------------------------

void LogRegistry::SetEpoch(uint32_t range, uint64_t epoch) {
  MutexLock lock(&epochs_mu_);
  RangeEpoch& e = epochs_[range];
  if (epoch > e.epoch) {
    e = RangeEpoch{epoch, false, Status::OK()};
  } else {
    e.epoch = epoch;  // an older one: the LogCs judge it (Fenced if they saw a newer)
  }
}

uint64_t LogRegistry::EpochOf(uint32_t range) const {
  MutexLock lock(&epochs_mu_);
  auto it = epochs_.find(range);
  return it == epochs_.end() ? 0 : it->second.epoch;
}

void LogRegistry::MarkFenced(uint32_t range, const Status& why) {
  MutexLock lock(&epochs_mu_);
  RangeEpoch& e = epochs_[range];
  if (e.fenced) return;
  e.fenced = true;
  e.why = why;
  LOG(WARNING) << "range " << range << " (owner epoch " << e.epoch
               << ") was fenced by a newer owner: no more appends, repairs or deletes of it here ("
               << why.ToString() << ")";
}

bool LogRegistry::IsFenced(uint32_t range) const {
  MutexLock lock(&epochs_mu_);
  auto it = epochs_.find(range);
  return it != epochs_.end() && it->second.fenced;
}

Status LogRegistry::FencedError(uint32_t range) const {
  MutexLock lock(&epochs_mu_);
  auto it = epochs_.find(range);
  const uint64_t epoch = it == epochs_.end() ? 0 : it->second.epoch;
  const std::string why = it == epochs_.end() ? std::string() : it->second.why.message();
  return Status::Fenced("range " + std::to_string(range) + " at owner epoch " +
                        std::to_string(epoch) + " was fenced by a newer owner: " + why);
}

OpenLogRequest LogRegistry::OpenRequestFor(const Log& log, uint32_t segment,
                                           uint64_t capacity) const {
  OpenLogRequest req;
  req.range = log.range;
  req.memtable = log.memtable;
  req.segment = segment;
  req.capacity = capacity;
  req.persist = Persists(settings_->mode.load());
  req.owner_epoch = EpochOf(log.range);
  return req;
}

Status LogRegistry::Probe(const std::shared_ptr<Log>& log, const Replica& rep, uint32_t segment,
                          uint64_t capacity) {
  auto reply = endpoint_->CallSync(rep.peer, kOpenLog,
                                   Encode(OpenRequestFor(*log, segment, capacity)), timeout_);
  if (reply.ok()) return Status::OK();
  if (reply.status().IsFenced()) MarkFenced(log->range, reply.status());
  return reply.status().Prepend("probing LogC " + rep.logc_id);
}

// ---- Replicas -------------------------------------------------------------------------

Status LogRegistry::OpenAt(const std::shared_ptr<Log>& log, const std::shared_ptr<Replica>& rep,
                           uint32_t segment, uint64_t capacity) {
  const OpenLogRequest req = OpenRequestFor(*log, segment, capacity);
  auto reply = endpoint_->CallSync(rep->peer, kOpenLog, Encode(req), timeout_);
  if (!reply.ok()) {
    if (reply.status().IsFenced()) MarkFenced(log->range, reply.status());
    return reply.status().Prepend("opening at LogC " + rep->logc_id);
  }
  OpenLogResponse resp;
  NOVA_RETURN_NOT_OK(Decode(reply.value(), &resp));
  NoteIncarnation(rep->logc_id, resp.incarnation);
  if (resp.capacity != capacity) {
    return Status::IllegalState(
        "LogC " + rep->logc_id + " holds segment " + std::to_string(segment) + " with capacity " +
        std::to_string(resp.capacity) + ", not " + std::to_string(capacity));
  }
  Replica::Segment seg;
  seg.handle = resp.handle;
  seg.addr = resp.addr;
  seg.persisted = resp.persisted_length;
  {
    MutexLock lock(&log->mu);
    if (rep->segments.size() != segment) return Status::IllegalState("segment opened out of order");
    if (rep->incarnation == 0) {
      rep->incarnation = resp.incarnation;
    } else if (rep->incarnation != resp.incarnation) {
      // The LogC restarted since this replica's earlier segments were opened there.
      return Status::Aborted("LogC " + rep->logc_id + " restarted");
    }
    rep->segments.push_back(seg);
  }
  if (req.persist) {
    MutexLock lock(&acks_mu_);
    acks_[{rep->peer, resp.handle}] = AckRoute{log, rep, segment};
  }
  // Persisted files tell how much they hold; a copy continues after it. New segments of a
  // log being written must be empty (memory files cannot tell: they are overwritten).
  if (req.persist && resp.length != resp.persisted_length) {
    return Status::IllegalState("LogC " + rep->logc_id + " is still persisting segment " +
                                std::to_string(segment));
  }
  return Status::OK();
}

void LogRegistry::ReapFailedLocked(Log* log, std::vector<std::shared_ptr<Replica>>* reaped) {
  auto& reps = log->replicas;
  for (auto it = reps.begin(); it != reps.end();) {
    if ((*it)->failed) {
      LOG(WARNING) << LogName(log->range, log->memtable) << ": dropping replica at LogC "
                   << (*it)->logc_id << ": " << (*it)->why.ToString();
      reaped->push_back(*it);
      it = reps.erase(it);
    } else {
      ++it;
    }
  }
}

void LogRegistry::Forget(const std::vector<std::shared_ptr<Replica>>& reaped, bool failed) {
  if (reaped.empty()) return;
  std::vector<std::string> ids;
  for (auto& rep : reaped) ids.push_back(rep->logc_id);
  logcs_->ReleaseReplicas(ids, failed);
  for (auto& rep : reaped) DropAckRoutes(*rep);
  if (failed) m_->replica_failures->Increment(reaped.size());
}

void LogRegistry::DropAckRoutes(const Replica& rep) {
  // By scanning the routes rather than rep.segments, which a turn may still be extending.
  MutexLock lock(&acks_mu_);
  for (auto it = acks_.begin(); it != acks_.end();) {
    if (it->second.replica.get() == &rep) {
      it = acks_.erase(it);
    } else {
      ++it;
    }
  }
}

void LogRegistry::HandlePersisted(transport::PeerId peer, const LogPersisted& m) {
  AckRoute route;
  {
    MutexLock lock(&acks_mu_);
    auto it = acks_.find({peer, m.handle});
    if (it == acks_.end()) return;  // a deleted or dropped replica
    route = it->second;
  }
  auto log = route.log.lock();
  if (log == nullptr) return;
  MutexLock lock(&log->mu);
  if (route.segment >= route.replica->segments.size()) return;
  Replica::Segment& seg = route.replica->segments[route.segment];
  if (!m.status.ok()) {
    seg.ack_error = m.status;
    if (m.status.IsFenced()) MarkFenced(log->range, m.status);  // epochs_mu_ is a leaf
  } else {
    seg.persisted = std::max(seg.persisted, m.persisted_length);
  }
  log->cv.NotifyAll();
}

void LogRegistry::FailReplicasAt(transport::PeerId peer, const Status& why) {
  for (auto& log : All()) {
    MutexLock lock(&log->mu);
    bool changed = false;
    for (auto& rep : log->replicas) {
      if (rep->peer == peer && !rep->failed) {
        rep->failed = true;
        rep->why = Status::NetworkError("LogC down: " + why.ToString());
        changed = true;
      }
    }
    if (changed) log->cv.NotifyAll();
  }
}

void LogRegistry::NoteIncarnation(const std::string& logc_id, uint64_t incarnation) {
  {
    // Both steps under incarnation_mu_: a thread that finds the incarnation already known
    // (it waits here) finds the replicas of the older one failed too. Without it the
    // repairer could list the LogC between the steps, see the range fully replicated
    // (counting the lost copy) and mark it in sync there; recovery would then trust that
    // LogC's listing for logs it no longer holds.
    MutexLock note(&incarnation_mu_);
    if (!logcs_->NoteIncarnation(logc_id, incarnation)) return;
    MAYBE_FAULT_VOID("logc_client.between_incarnation_steps");  // tests widen the window
    FailReplicasOfOlderIncarnations(logc_id, incarnation);
  }
  on_replica_lost_();
}

void LogRegistry::FailReplicasOfOlderIncarnations(const std::string& logc_id,
                                                  uint64_t incarnation) {
  // Every log registered when the new incarnation was noted is looked at (and possibly
  // more): no replica of the older incarnation is missed.
  for (auto& log : All()) {
    MutexLock lock(&log->mu);
    bool changed = false;
    for (auto& rep : log->replicas) {
      if (rep->logc_id == logc_id && rep->incarnation != 0 && rep->incarnation != incarnation &&
          !rep->failed) {
        rep->failed = true;
        rep->why = Status::NetworkError("LogC " + logc_id + " restarted (copy lost)");
        changed = true;
      }
    }
    if (changed) log->cv.NotifyAll();
  }
}

Result<ListLogsResponse> LogRegistry::ListAt(const std::string& logc_id, uint32_t range,
                                             transport::PeerId* peer) {
  auto connected = logcs_->PeerFor(logc_id);
  if (!connected.ok()) return connected.status();
  *peer = connected.value();
  auto reply = endpoint_->CallSync(*peer, kListLogs, Encode(ListLogsRequest{range}), timeout_);
  if (!reply.ok()) return reply.status();
  ListLogsResponse list;
  NOVA_RETURN_NOT_OK(Decode(reply.value(), &list));
  NoteIncarnation(logc_id, list.incarnation);
  return list;
}

}  // namespace nova::logc
