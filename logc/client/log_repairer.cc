#include "logc/client/log_repairer.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <glog/logging.h>

#include "logc/client/log_client.h"

namespace nova::logc {

using internal::LogName;
using internal::NewStaging;
using internal::Replica;
using internal::WaitOp;

LogRepairer::LogRepairer(const internal::LogParts& parts) : parts_(parts) {}

LogRepairer::~LogRepairer() { CHECK(!thread_.joinable()) << "LogRepairer: Stop() not called"; }

void LogRepairer::Start() {
  thread_ = std::thread([this] { RepairLoop(); });
}

void LogRepairer::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void LogRepairer::Wake() { cv_.NotifyAll(); }

// ---- Re-replication ---------------------------------------------------------------

void LogRepairer::MaybeRereplicate(const std::shared_ptr<Log>& log, int max_attempts) {
  std::vector<std::string> current;
  std::vector<std::shared_ptr<Replica>> reaped;
  {
    MutexLock lock(&log->mu);
    LogRegistry::ReapFailedLocked(log.get(), &reaped);
    for (auto& r : log->replicas) current.push_back(r->logc_id);
  }
  parts_.registry->Forget(reaped, true);
  if (parts_.registry->IsFenced(log->range)) return;  // a newer owner has it: no copies
  if (current.empty() || static_cast<int>(current.size()) >= parts_.settings->replicas.load())
    return;
  {
    MutexLock lock(&log->mu);
    if (log->capacity.empty()) return;  // nothing opened yet
  }
  int live = static_cast<int>(current.size());
  std::vector<std::string> tried = current;
  for (int attempt = 0; live < parts_.settings->replicas.load() && attempt < max_attempts;
       ++attempt) {
    auto chosen = parts_.logcs->ReserveLogc(&tried);
    if (!chosen) break;
    const std::string& id = *chosen;
    Status s = CopyTo(log, id);
    if (!s.ok()) parts_.logcs->ReleaseLogc(id);
    if (s.ok()) {
      ++live;
      parts_.m->rereplications->Increment();
      LOG(INFO) << LogName(log->range, log->memtable) << " re-replicated to LogC " << id;
    } else if (s.code() == Status::Code::kAborted) {
      break;  // the log was deleted meanwhile
    } else if (parts_.registry->IsFenced(log->range)) {
      break;  // the LogC said a newer owner has the range: no other is tried
    } else {
      parts_.m->errors->Increment();
      parts_.logcs->MarkFailed(id);
      LOG_EVERY_N(WARNING, 50) << LogName(log->range, log->memtable)
                               << ": re-replication to LogC " << id
                               << " failed: " << s.ToString();
    }
  }
}

Status LogRepairer::EnsureInsync(const std::shared_ptr<Log>& log) {
  const MonoTime deadline = MonoNow() + parts_.options->timeout;
  const int target = parts_.settings->InsyncTarget();
  auto live_replicas = [&]() -> Result<int> {
    if (parts_.registry->IsFenced(log->range)) return parts_.registry->FencedError(log->range);
    MutexLock lock(&log->mu);
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
          std::to_string(live) + " of " + std::to_string(parts_.settings->replicas.load()) +
          " replicas live and no other LogC took a copy within the timeout; " +
          std::to_string(target) +
          " must hold a write before it is acknowledged "
          "(--log_min_insync_replicas)");
    }
    std::this_thread::sleep_for(parts_.options->retry_interval);
  }
}

bool LogRepairer::RangeFullyReplicated(uint32_t range) {
  // Logs listed but not read are not tracked here: the range waits for their deletion.
  if (parts_.registry->HasUnread(range)) return false;
  std::vector<std::shared_ptr<Log>> logs = parts_.registry->LogsOf(range);
  // M, not R: every acknowledged write was on M replicas, and recovery counts against M.
  const int target = parts_.settings->InsyncTarget();
  for (auto& log : logs) {
    MutexLock lock(&log->mu);
    if (log->durable_end == 0 && !log->recovered) continue;  // nothing acknowledged
    if (log->LiveLocked() < target) return false;
  }
  return true;
}

bool LogRepairer::RangeMarkedAt(uint32_t range, const std::vector<std::string>& logcs) const {
  return parts_.logcs->MarkedAt(range, logcs);
}

void LogRepairer::MarkRange(uint32_t range, const std::vector<std::string>& only) {
  if (!parts_.registry->Serves(range)) return;  // not open here (or its recovery was refused)
  if (parts_.registry->IsFenced(range)) return;  // a newer owner has it
  const std::vector<std::string> ids = parts_.logcs->Unmarked(range, only);
  for (const std::string& id : ids) {
    // Its incarnation first (a restart since this client last saw it drops the replicas it
    // held), then whether the range is fully replicated: in that order, a mark never
    // covers copies a restart lost.
    transport::PeerId peer;
    auto listed = parts_.registry->ListAt(id, range, &peer);
    if (!listed.ok()) {
      parts_.logcs->MarkFailed(id);  // a hung LogC must not stall every pass
      continue;
    }
    const ListLogsResponse& list = listed.value();
    if (!list.in_sync) {
      if (!RangeFullyReplicated(range)) return;
      MarkInSyncRequest req{range, list.incarnation, Persists(parts_.settings->mode.load()),
                            parts_.registry->EpochOf(range)};
      auto marked =
          parts_.endpoint->CallSync(peer, kMarkInSync, Encode(req), parts_.options->timeout);
      if (!marked.ok() && marked.status().IsFenced()) {
        parts_.registry->MarkFenced(range, marked.status());
        return;
      }
      if (!marked.ok()) {
        LOG_EVERY_N(WARNING, 20) << "marking range " << range << " in sync at LogC " << id
                                 << ": " << marked.status().ToString();
        parts_.logcs->MarkFailed(id);
        continue;
      }
    }
    parts_.logcs->NoteInSync(id, list.incarnation, range);
  }
}

void LogRepairer::RepairLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    cv_.WaitFor(&lock, parts_.options->repair_interval);
    if (stopping_) break;
    lock.Unlock();
    RepairPass();
    lock.Lock();
  }
}

void LogRepairer::RepairPass() {
  if (parts_.settings->mode.load() == LogMode::kNone) return;
  std::vector<std::shared_ptr<Log>> logs;
  std::set<uint32_t> ranges;
  logs = parts_.registry->All();
  for (uint32_t range : parts_.registry->Ranges()) {
    if (!parts_.registry->IsFenced(range)) ranges.insert(range);
  }
  const int r = parts_.settings->replicas.load();
  uint64_t under = 0;
  for (auto& log : logs) {
    if (parts_.registry->IsFenced(log->range)) continue;  // abandoned: a newer owner has it
    {
      MutexLock lock(&log->mu);
      if (log->capacity.empty() || (log->durable_end == 0 && !log->recovered)) continue;
      if (log->LiveLocked() >= r) continue;
      // A log being written is between turns often: wait for one (appenders copy only
      // while fewer than M replicas are live, so with M < R this is what restores R).
      if (!log->cv.WaitUntil(&lock, MonoNow() + parts_.options->repair_interval,
                             [&]() REQUIRES(log->mu) { return !log->turn || log->deleted; }) ||
          log->deleted) {
        ++under;
        continue;
      }
      log->turn = true;
    }
    // One copy attempt per pass: an appender waiting for the turn waits for one attempt
    // at most, not for a walk over every LogC.
    MaybeRereplicate(log, /*max_attempts=*/1);
    MutexLock lock(&log->mu);
    log->turn = false;
    if (log->LiveLocked() < r) ++under;
    log->cv.NotifyAll();
  }
  parts_.m->underreplicated = under;
  for (uint32_t range : ranges) MarkRange(range);  // skips fenced ranges
  const uint64_t unsynced = parts_.logcs->CountUnsynced(ranges);
  parts_.m->unsynced_logcs = unsynced;
  parts_.m->repair_passes.fetch_add(1);
}

Status LogRepairer::CopyTo(const std::shared_ptr<Log>& log, const std::string& logc_id) {
  auto peer = parts_.logcs->PeerFor(logc_id);
  if (!peer.ok()) return peer.status();
  const bool persist = Persists(parts_.settings->mode.load());
  auto rep = std::make_shared<Replica>();
  rep->logc_id = logc_id;
  rep->peer = peer.value();
  std::vector<uint64_t> capacity;
  uint64_t written;
  std::vector<std::shared_ptr<Replica>> sources;
  {
    MutexLock lock(&log->mu);
    capacity = log->capacity;
    written = log->written;
    for (auto& r : log->replicas) {
      if (!r->failed) sources.push_back(r);
    }
  }
  Status result;
  for (size_t k = 0; k < capacity.size() && result.ok(); ++k) {
    const uint64_t length = k + 1 == capacity.size() ? written : capacity[k];
    result = parts_.registry->OpenAt(log, rep, static_cast<uint32_t>(k), capacity[k]);
    if (!result.ok()) break;
    uint64_t from;
    transport::RemoteAddr dst;
    uint32_t handle;
    {
      MutexLock lock(&log->mu);
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
    auto st = NewStaging(parts_.endpoint->transport(), n, &error);
    if (st == nullptr) {
      result = error;
      break;
    }
    // READ from a surviving replica (the next one if it fails)...
    Status read = Status::Unavailable("no surviving replica to copy from");
    for (auto& src : sources) {
      transport::RemoteAddr from_addr;
      {
        MutexLock lock(&log->mu);
        if (src->failed || src->segments.size() <= k) continue;
        from_addr = src->segments[k].addr;
      }
      from_addr.addr += from;
      read = WaitOp(
          st,
          [&](transport::Completion done) {
            return parts_.endpoint->transport()->Read(src->peer, from_addr, n, st->mr, 0,
                                                      std::move(done));
          },
          parts_.options->timeout);
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
    result = WaitOp(
        st,
        [&](transport::Completion done) {
          return parts_.endpoint->transport()->Write(
              rep->peer, st->mr, 0, n, dst,
              persist ? std::optional<uint32_t>(handle) : std::nullopt, std::move(done));
        },
        parts_.options->timeout);
    if (!result.ok()) break;
    if (persist) {
      MutexLock lock(&log->mu);
      const bool acked =
          log->cv.WaitUntil(&lock, MonoNow() + parts_.options->timeout, [&]() REQUIRES(log->mu) {
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
    MutexLock lock(&log->mu);
    if (log->deleted) {
      result = Status::Aborted(LogName(log->range, log->memtable) + " was deleted");
    } else {
      log->replicas.push_back(rep);
      return Status::OK();
    }
  }
  parts_.registry->DropAckRoutes(*rep);
  return result;
}

}  // namespace nova::logc
