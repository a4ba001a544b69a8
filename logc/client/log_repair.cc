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

// ---- Re-replication ---------------------------------------------------------------

void LogClient::MaybeRereplicate(const std::shared_ptr<Log>& log, int max_attempts) {
  std::vector<std::string> current;
  std::vector<std::shared_ptr<Replica>> reaped;
  {
    std::lock_guard lock(log->mu);
    ReapFailedLocked(log.get(), &reaped);
    for (auto& r : log->replicas) current.push_back(r->logc_id);
  }
  Forget(reaped, true);
  if (current.empty() || static_cast<int>(current.size()) >= replicas_.load()) return;
  {
    std::lock_guard lock(log->mu);
    if (log->capacity.empty()) return;  // nothing opened yet
  }
  int live = static_cast<int>(current.size());
  std::vector<std::string> tried = current;
  for (int attempt = 0; live < replicas_.load() && attempt < max_attempts; ++attempt) {
    auto chosen = ReserveLogc(&tried);
    if (!chosen) break;
    const std::string& id = *chosen;
    Status s = CopyTo(log, id);
    if (!s.ok()) ReleaseLogc(id);
    if (s.ok()) {
      ++live;
      m_.rereplications->Increment();
      LOG(INFO) << LogName(log->range, log->memtable) << " re-replicated to LogC " << id;
    } else if (s.code() == Status::Code::kAborted) {
      break;  // the log was deleted meanwhile
    } else {
      m_.errors->Increment();
      MarkFailed(id);
      LOG_EVERY_N(WARNING, 50) << LogName(log->range, log->memtable)
                               << ": re-replication to LogC " << id
                               << " failed: " << s.ToString();
    }
  }
}

Status LogClient::EnsureInsync(const std::shared_ptr<Log>& log) {
  const MonoTime deadline = MonoNow() + options_.timeout;
  const int target = InsyncTarget();
  auto live_replicas = [&]() -> Result<int> {
    std::lock_guard lock(log->mu);
    if (!log->dead.ok()) return log->dead;
    return log->LiveLocked();
  };
  // Enough already: the write path copies nothing (the repairer brings the log back to R).
  auto before = live_replicas();
  if (!before.ok()) return before.status();
  if (before.value() >= target) return Status::OK();
  while (true) {
    MaybeRereplicate(log);
    auto now = live_replicas();
    if (!now.ok()) return now.status();
    const int live = now.value();
    if (live >= target) return Status::OK();
    if (live == 0) return Status::Unavailable("every replica of the log failed");
    if (MonoNow() >= deadline) {
      return Status::Unavailable(
          std::to_string(live) + " of " + std::to_string(replicas_.load()) +
          " replicas live and no other LogC took a copy within the timeout; " +
          std::to_string(target) + " must hold a write before it is acknowledged "
          "(--log_min_insync_replicas)");
    }
    std::this_thread::sleep_for(options_.retry_interval);
  }
}

void LogClient::NoteIncarnation(const std::string& logc_id, uint64_t incarnation) {
  if (incarnation == 0) return;  // not a LogC's (they are never 0)
  std::vector<std::shared_ptr<Log>> logs;
  {
    MutexLock lock(&mu_);
    auto it = logcs_.find(logc_id);
    if (it == logcs_.end() || it->second.incarnation == incarnation) return;
    LOG_IF(WARNING, it->second.incarnation != 0)
        << "LogC " << logc_id << " restarted: its earlier log copies and in-sync marks no "
        << "longer count";
    it->second.incarnation = incarnation;
    it->second.in_sync.clear();
    for (auto& [key, log] : logs_) logs.push_back(log);
  }
  for (auto& log : logs) {
    std::lock_guard lock(log->mu);
    bool changed = false;
    for (auto& rep : log->replicas) {
      if (rep->logc_id == logc_id && rep->incarnation != 0 && rep->incarnation != incarnation &&
          !rep->failed) {
        rep->failed = true;
        rep->why = Status::NetworkError("LogC " + logc_id + " restarted (copy lost)");
        changed = true;
      }
    }
    if (changed) log->cv.notify_all();
  }
  repair_cv_.NotifyAll();
}

bool LogClient::RangeFullyReplicated(uint32_t range) {
  std::vector<std::shared_ptr<Log>> logs;
  {
    MutexLock lock(&mu_);
    for (auto it = logs_.lower_bound({range, 0}); it != logs_.end() && it->first.first == range;
         ++it) {
      logs.push_back(it->second);
    }
  }
  // M, not R: every acknowledged write was on M replicas, and recovery counts against M.
  const int target = InsyncTarget();
  for (auto& log : logs) {
    std::lock_guard lock(log->mu);
    if (log->durable_end == 0 && !log->recovered) continue;  // nothing acknowledged
    if (log->LiveLocked() < target) return false;
  }
  return true;
}

bool LogClient::RangeMarkedAt(uint32_t range, const std::vector<std::string>& logcs) {
  MutexLock lock(&mu_);
  for (const std::string& id : logcs) {
    auto it = logcs_.find(id);
    if (it == logcs_.end() || it->second.in_sync.count(range) == 0) return false;
  }
  return true;
}

void LogClient::MarkRange(uint32_t range, const std::vector<std::string>& only) {
  std::vector<std::string> ids;
  {
    MutexLock lock(&mu_);
    if (ranges_.count(range) == 0) return;  // not open here (or its recovery was refused)
    const MonoTime now = MonoNow();
    for (auto& [id, st] : logcs_) {
      if (st.address.empty() || st.in_sync.count(range) != 0) continue;
      if (!only.empty() && std::find(only.begin(), only.end(), id) == only.end()) continue;
      if (st.failed_until > now) continue;
      ids.push_back(id);
    }
  }
  for (const std::string& id : ids) {
    // Its incarnation first (a restart since this client last saw it drops the replicas it
    // held), then whether the range is fully replicated: in that order, a mark never
    // covers copies a restart lost.
    transport::PeerId peer;
    auto listed = ListAt(id, range, &peer);
    if (!listed.ok()) {
      MarkFailed(id);  // a hung LogC must not stall every pass
      continue;
    }
    const ListLogsResponse& list = listed.value();
    if (!list.in_sync) {
      if (!RangeFullyReplicated(range)) return;
      MarkInSyncRequest req{range, list.incarnation, Persists(mode_.load())};
      auto marked = endpoint_->CallSync(peer, kMarkInSync, Encode(req), options_.timeout);
      if (!marked.ok()) {
        LOG_EVERY_N(WARNING, 20) << "marking range " << range << " in sync at LogC " << id
                                 << ": " << marked.status().ToString();
        MarkFailed(id);
        continue;
      }
    }
    NoteInSync(id, list.incarnation, range);
  }
}

Result<ListLogsResponse> LogClient::ListAt(const std::string& logc_id, uint32_t range,
                                           transport::PeerId* peer) {
  auto connected = PeerFor(logc_id);
  if (!connected.ok()) return connected.status();
  *peer = connected.value();
  auto reply = endpoint_->CallSync(*peer, kListLogs, Encode(ListLogsRequest{range}),
                                   options_.timeout);
  if (!reply.ok()) return reply.status();
  ListLogsResponse list;
  NOVA_RETURN_NOT_OK(Decode(reply.value(), &list));
  NoteIncarnation(logc_id, list.incarnation);
  return list;
}

void LogClient::NoteInSync(const std::string& logc_id, uint64_t incarnation, uint32_t range) {
  MutexLock lock(&mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.incarnation == incarnation) {
    it->second.in_sync.insert(range);
  }
}

void LogClient::RepairLoop() {
  MutexLock lock(&repair_mu_);
  while (!stopping_) {
    repair_cv_.WaitFor(&lock, options_.repair_interval);
    if (stopping_) break;
    lock.Unlock();
    RepairPass();
    lock.Lock();
  }
}

void LogClient::RepairPass() {
  if (mode_.load() == LogMode::kNone) return;
  std::vector<std::shared_ptr<Log>> logs;
  std::set<uint32_t> ranges;
  {
    MutexLock lock(&mu_);
    for (auto& [key, log] : logs_) logs.push_back(log);
    ranges = ranges_;
  }
  const int r = replicas_.load();
  uint64_t under = 0;
  for (auto& log : logs) {
    {
      std::unique_lock lock(log->mu);
      if (log->capacity.empty() || (log->durable_end == 0 && !log->recovered)) continue;
      if (log->LiveLocked() >= r) continue;
      // A log being written is between turns often: wait for one (appenders copy only
      // while fewer than M replicas are live, so with M < R this is what restores R).
      if (!log->cv.wait_for(lock, options_.repair_interval,
                            [&] { return !log->turn || log->deleted; }) ||
          log->deleted) {
        ++under;
        continue;
      }
      log->turn = true;
    }
    // One copy attempt per pass: an appender waiting for the turn waits for one attempt
    // at most, not for a walk over every LogC.
    MaybeRereplicate(log, /*max_attempts=*/1);
    std::lock_guard lock(log->mu);
    log->turn = false;
    if (log->LiveLocked() < r) ++under;
    log->cv.notify_all();
  }
  repair_gauges_.underreplicated = under;
  for (uint32_t range : ranges) MarkRange(range);
  uint64_t unsynced = 0;
  {
    MutexLock lock(&mu_);
    for (auto& [id, st] : logcs_) {
      if (st.address.empty()) continue;
      for (uint32_t range : ranges) {
        if (st.in_sync.count(range) == 0) {
          ++unsynced;
          break;
        }
      }
    }
  }
  repair_gauges_.unsynced_logcs = unsynced;
  repair_gauges_.passes.fetch_add(1);
}

Status LogClient::WaitOp(const std::shared_ptr<Staging>& staging,
                         const std::function<Status(transport::Completion)>& post) {
  auto done = std::make_shared<std::promise<Status>>();
  auto future = done->get_future();
  staging->inflight.fetch_add(1);
  Status s = post([done, staging](const Status& result) {
    staging->inflight.fetch_sub(1);
    done->set_value(result);
  });
  if (!s.ok()) {
    staging->inflight.fetch_sub(1);
    return s;
  }
  if (future.wait_for(options_.timeout) != std::future_status::ready) {
    return Status::TimedOut("one-sided op not done within the timeout");
  }
  return future.get();
}

Status LogClient::CopyTo(const std::shared_ptr<Log>& log, const std::string& logc_id) {
  auto peer = PeerFor(logc_id);
  if (!peer.ok()) return peer.status();
  const bool persist = Persists(mode_.load());
  auto rep = std::make_shared<Replica>();
  rep->logc_id = logc_id;
  rep->peer = peer.value();
  std::vector<uint64_t> capacity;
  uint64_t written;
  std::vector<std::shared_ptr<Replica>> sources;
  {
    std::lock_guard lock(log->mu);
    capacity = log->capacity;
    written = log->written;
    for (auto& r : log->replicas) {
      if (!r->failed) sources.push_back(r);
    }
  }
  Status result;
  for (size_t k = 0; k < capacity.size() && result.ok(); ++k) {
    const uint64_t length = k + 1 == capacity.size() ? written : capacity[k];
    result = OpenAt(log, rep, static_cast<uint32_t>(k), capacity[k]);
    if (!result.ok()) break;
    uint64_t from;
    transport::RemoteAddr dst;
    uint32_t handle;
    {
      std::lock_guard lock(log->mu);
      // A persisted file already holding a prefix (a LogC that kept it) continues after it.
      from = persist ? rep->segments[k].persisted : 0;
      dst = rep->segments[k].addr;
      handle = rep->segments[k].handle;
    }
    if (from > length) {
      result = Status::IllegalState("LogC " + logc_id + " holds more of segment " +
                                    std::to_string(k) + " than the log");
      break;
    }
    if (from == length) continue;
    const uint64_t n = length - from;
    Status error;
    auto st = NewStaging(n, &error);
    if (st == nullptr) {
      result = error;
      break;
    }
    // READ from a surviving replica (the next one if it fails)...
    Status read = Status::Unavailable("no surviving replica to copy from");
    for (auto& src : sources) {
      transport::RemoteAddr from_addr;
      {
        std::lock_guard lock(log->mu);
        if (src->failed || src->segments.size() <= k) continue;
        from_addr = src->segments[k].addr;
      }
      from_addr.addr += from;
      read = WaitOp(st, [&](transport::Completion done) {
        return endpoint_->transport()->Read(src->peer, from_addr, n, st->mr, 0, std::move(done));
      });
      if (read.ok()) break;
      LOG(WARNING) << "reading " << LogName(log->range, log->memtable) << " from LogC "
                   << src->logc_id << ": " << read.ToString();
    }
    if (!read.ok()) {
      result = read;
      break;
    }
    // ...and WRITE it to the new one.
    dst.addr += from;
    result = WaitOp(st, [&](transport::Completion done) {
      return endpoint_->transport()->Write(rep->peer, st->mr, 0, n, dst,
                                           persist ? std::optional<uint32_t>(handle) : std::nullopt,
                                           std::move(done));
    });
    if (!result.ok()) break;
    if (persist) {
      std::unique_lock lock(log->mu);
      const bool acked = log->cv.wait_for(lock, options_.timeout, [&] {
        return rep->segments[k].persisted >= length || !rep->segments[k].ack_error.ok();
      });
      if (!rep->segments[k].ack_error.ok()) {
        result = rep->segments[k].ack_error;
      } else if (!acked) {
        result = Status::TimedOut("persist acknowledgment of the copy");
      }
    }
  }
  if (result.ok()) {
    std::lock_guard lock(log->mu);
    if (log->deleted) {
      result = Status::Aborted(LogName(log->range, log->memtable) + " was deleted");
    } else {
      log->replicas.push_back(rep);
      return Status::OK();
    }
  }
  DropAckRoutes(*rep);
  return result;
}

}  // namespace nova::logc
