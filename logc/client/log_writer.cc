#include "logc/client/log_writer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>

#include "logc/client/log_client.h"

namespace nova::logc {

using internal::kKeptStagingBytes;
using internal::kMaxSegmentBytes;
using internal::LogName;
using internal::NewStaging;
using internal::Replica;
using internal::Staging;

LogWriter::LogWriter(const internal::LogParts& parts) : parts_(parts) {}

// ---- Appends ----------------------------------------------------------------------

Status LogWriter::Append(uint32_t range, uint64_t memtable, std::string_view bytes,
                         bool* reached) {
  bool ignored;
  if (reached == nullptr) reached = &ignored;
  *reached = false;
  if (parts_.settings->mode.load() == LogMode::kNone) {
    return Status::InvalidArgument("log mode none: nothing is logged");
  }
  // A fenced range takes nothing more (not even into a log of its own that a newer owner
  // never saw): the caller stops serving it.
  if (parts_.registry->IsFenced(range)) return parts_.registry->FencedError(range);
  if (bytes.empty()) return Status::OK();
  const MonoTime start = MonoNow();
  std::shared_ptr<Log> log = parts_.registry->GetOrCreate(range, memtable);
  MutexLock lock(&log->mu);
  if (log->recovered && log->dead.ok()) {
    log->dead = Status::IllegalState(LogName(range, memtable) + " was recovered: no appends");
  }
  if (!log->dead.ok()) return log->dead;
  log->pending.append(bytes.data(), bytes.size());
  const uint64_t my_start = log->queued_end;
  log->queued_end += bytes.size();
  const uint64_t my_end = log->queued_end;
  while (log->durable_end < my_end && log->dead.ok()) {
    if (log->turn) {
      log->cv.Wait(&lock);
      continue;
    }
    // This thread takes the turn and writes everything queued so far.
    log->turn = true;
    std::string batch;
    batch.swap(log->pending);
    const uint64_t batch_end = log->queued_end;
    lock.Unlock();
    Status s = RunTurn(log, batch, batch_end - batch.size());
    lock.Lock();
    log->turn = false;
    if (s.ok()) {
      log->durable_end = batch_end;
    } else if (log->dead.ok()) {
      // However the failure surfaced (a WRITE, an open, a copy refused): if a LogC said the
      // range is fenced, the batch is not acknowledged and the log dies Fenced.
      log->dead = parts_.registry->IsFenced(range) ? parts_.registry->FencedError(range)
                                                   : s.Prepend(LogName(range, memtable));
      LOG(ERROR) << log->dead.ToString();
    }
    if (log->staging && log->staging->size > kKeptStagingBytes) log->staging.reset();
    log->cv.NotifyAll();
  }
  *reached = my_start < log->sent_end;
  if (!log->dead.ok()) return log->dead;
  lock.Unlock();
  parts_.m->appends->Increment();
  parts_.m->bytes->Increment(bytes.size());
  parts_.m->append_latency_us->Record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()));
  return Status::OK();
}

Status LogWriter::RunTurn(const std::shared_ptr<Log>& log, std::string_view batch,
                         uint64_t batch_start) {
  bool first, opened;
  {
    MutexLock lock(&log->mu);
    first = log->durable_end == 0;
    opened = !log->capacity.empty();
  }
  // Replicas lost while the log was idle: none of this batch is written while fewer than
  // min_insync_replicas replicas would get it.
  if (opened) NOVA_RETURN_NOT_OK(parts_.repairer->EnsureInsync(log));
  uint64_t done = 0;
  while (done < batch.size()) {
    const uint64_t remaining = batch.size() - done;
    bool need_segment;
    {
      MutexLock lock(&log->mu);
      if (!log->dead.ok()) return log->dead;
      need_segment = log->capacity.empty() || log->written == log->capacity.back();
    }
    if (need_segment) {
      // A segment of its own size for a batch that would not fit an ordinary one.
      const uint64_t capacity =
          std::min(std::max(parts_.options->segment_bytes, remaining), kMaxSegmentBytes);
      NOVA_RETURN_NOT_OK(OpenSegment(log, capacity));
      NOVA_RETURN_NOT_OK(parts_.repairer->EnsureInsync(log));
    }
    size_t segment;
    uint64_t offset, n;
    {
      MutexLock lock(&log->mu);
      segment = log->capacity.size() - 1;
      offset = log->written;
      n = std::min(remaining, log->capacity.back() - offset);
      log->sent_end = batch_start + done + n;
    }
    NOVA_RETURN_NOT_OK(WritePiece(log, segment, offset, batch.data() + done, n));
    {
      MutexLock lock(&log->mu);
      log->written += n;
    }
    done += n;
    // Replicas lost during the WRITE: the piece is copied to others (or the append waits
    // for them) before it counts as held by min_insync_replicas.
    NOVA_RETURN_NOT_OK(parts_.repairer->EnsureInsync(log));
  }
  if (first) {
    // Before the log's first acknowledgment, its LogCs are marked in sync for the range
    // (when it is fully replicated): a later recovery must be able to trust their listing.
    std::vector<std::string> holders;
    {
      MutexLock lock(&log->mu);
      for (auto& r : log->replicas) holders.push_back(r->logc_id);
    }
    if (!parts_.repairer->RangeMarkedAt(log->range, holders))
      parts_.repairer->MarkRange(log->range, holders);
  }
  return Status::OK();
}

Status LogWriter::OpenSegment(const std::shared_ptr<Log>& log, uint64_t capacity) {
  std::vector<std::shared_ptr<Replica>> replicas;
  uint32_t segment;
  {
    MutexLock lock(&log->mu);
    segment = static_cast<uint32_t>(log->capacity.size());
    for (auto& r : log->replicas) {
      if (!r->failed) replicas.push_back(r);
    }
  }
  auto open_one = [&](const std::shared_ptr<Replica>& rep) -> Status {
    Status s = parts_.registry->OpenAt(log, rep, segment, capacity);
    if (s.ok()) {
      MutexLock lock(&log->mu);
      if (rep->segments.back().persisted != 0) {
        s = Status::IllegalState("LogC " + rep->logc_id + " already holds bytes of new segment " +
                                 std::to_string(segment));
      }
    }
    return s;
  };
  std::vector<std::shared_ptr<Replica>> opened;
  if (segment == 0 && replicas.empty()) {
    // A new log: choose its replicas. With none reachable, try again until the timeout
    // (RunTurn then waits for min_insync_replicas of them).
    const MonoTime deadline = MonoNow() + parts_.options->timeout;
    while (true) {
      std::vector<std::string> tried;
      while (static_cast<int>(opened.size()) < parts_.settings->replicas.load()) {
        auto chosen = parts_.logcs->ReserveLogc(&tried);
        if (!chosen) break;
        const std::string& id = *chosen;
        auto peer = parts_.logcs->PeerFor(id);
        Status s = peer.status();
        auto rep = std::make_shared<Replica>();
        rep->logc_id = id;
        if (s.ok()) {
          rep->peer = peer.value();
          s = open_one(rep);
        }
        if (!s.ok()) {
          parts_.m->errors->Increment();
          parts_.logcs->ReleaseLogc(id);
          parts_.registry->DropAckRoutes(*rep);
          // Fenced: a newer owner has the range; no other LogC is tried.
          if (parts_.registry->IsFenced(log->range)) {
            for (auto& done : opened) parts_.logcs->ReleaseLogc(done->logc_id);
            for (auto& done : opened) parts_.registry->DropAckRoutes(*done);
            return parts_.registry->FencedError(log->range);
          }
          parts_.logcs->MarkFailed(id);
          LOG_EVERY_N(WARNING, 20) << LogName(log->range, log->memtable) << ": " << s.ToString();
          continue;
        }
        opened.push_back(rep);
      }
      if (!opened.empty() || MonoNow() >= deadline) break;
      std::this_thread::sleep_for(parts_.options->retry_interval);
    }
    if (opened.empty()) {
      return Status::Unavailable("no LogC could open " + LogName(log->range, log->memtable));
    }
    MutexLock lock(&log->mu);
    log->replicas = opened;
    log->capacity.push_back(capacity);
    log->written = 0;
    LOG_IF(WARNING, static_cast<int>(opened.size()) < parts_.settings->replicas.load())
        << LogName(log->range, log->memtable) << " opened at " << opened.size() << " of "
        << parts_.settings->replicas.load() << " replicas";
    return Status::OK();
  }
  // The next segment, at the log's replicas.
  bool any = false;
  for (auto& rep : replicas) {
    Status s = open_one(rep);
    MutexLock lock(&log->mu);
    if (s.ok()) {
      any = true;
    } else if (!rep->failed) {
      rep->failed = true;
      rep->why = s;
    }
  }
  std::vector<std::shared_ptr<Replica>> reaped;
  {
    MutexLock lock(&log->mu);
    LogRegistry::ReapFailedLocked(log.get(), &reaped);
    if (any) {
      log->capacity.push_back(capacity);
      log->written = 0;
    }
  }
  parts_.registry->Forget(reaped, true);
  if (parts_.registry->IsFenced(log->range)) return parts_.registry->FencedError(log->range);
  if (!any) {
    return Status::Unavailable("no replica could open segment " + std::to_string(segment) +
                               " of " + LogName(log->range, log->memtable));
  }
  return Status::OK();
}

Status LogWriter::WritePiece(const std::shared_ptr<Log>& log, size_t segment, uint64_t offset,
                             const char* data, uint64_t n) {
  const bool persist = Persists(parts_.settings->mode.load());
  // The staging buffer is reused unless a timed-out op may still read it.
  std::shared_ptr<Staging> st = log->staging;
  if (st == nullptr || st->inflight.load() != 0 || st->size < n) {
    Status error;
    st = NewStaging(parts_.endpoint->transport(), std::max(n, uint64_t{4096}), &error);
    if (st == nullptr) return error;
    log->staging = st;
  }
  std::memcpy(st->mem.get(), data, n);

  struct Target {
    std::shared_ptr<Replica> rep;
    uint64_t seq;
    transport::RemoteAddr addr;
    uint32_t handle;
  };
  std::vector<Target> targets;
  uint64_t capacity;
  {
    MutexLock lock(&log->mu);
    capacity = log->capacity[segment];
    for (auto& rep : log->replicas) {
      if (rep->failed || rep->segments.size() <= segment) continue;
      rep->op_seq++;
      rep->op_done = false;
      rep->op_status = Status::OK();
      const auto& seg = rep->segments[segment];
      targets.push_back(Target{rep, rep->op_seq,
                               transport::RemoteAddr{seg.addr.addr + offset, seg.addr.rkey},
                               seg.handle});
    }
  }
  for (auto& t : targets) {
    st->inflight.fetch_add(1);
    std::weak_ptr<Log> weak = log;
    Status s = parts_.endpoint->transport()->Write(
        t.rep->peer, st->mr, 0, n, t.addr,
        persist ? std::optional<uint32_t>(t.handle) : std::nullopt,
        [weak, rep = t.rep, seq = t.seq, st](const Status& done) {
          st->inflight.fetch_sub(1);
          auto log = weak.lock();
          if (log == nullptr) return;
          MutexLock lock(&log->mu);
          if (rep->op_seq != seq) return;
          rep->op_done = true;
          rep->op_status = done;
          log->cv.NotifyAll();
        });
    if (!s.ok()) {
      st->inflight.fetch_sub(1);
      MutexLock lock(&log->mu);
      t.rep->op_done = true;
      t.rep->op_status = s;
    }
  }
  const uint64_t end = offset + n;
  // A replica holds the piece when its WRITE completed and (persisted modes) the LogC
  // reported it durable; it has failed when anything went wrong.
  auto held = [&](const Replica& r) {
    return !r.failed && r.op_done && r.op_status.ok() &&
           (!persist || r.segments[segment].persisted >= end);
  };
  auto settled = [&](const Replica& r) {
    return r.failed || (r.op_done && !r.op_status.ok()) || held(r) ||
           !r.segments[segment].ack_error.ok();
  };
  std::vector<std::shared_ptr<Replica>> reaped;
  bool any = false;
  {
    MutexLock lock(&log->mu);
    const MonoTime deadline = MonoNow() + parts_.options->timeout;
    log->cv.WaitUntil(&lock, deadline, [&] {
      return std::all_of(targets.begin(), targets.end(),
                         [&](const Target& t) { return settled(*t.rep); });
    });
    for (auto& t : targets) {
      Replica& r = *t.rep;
      if (held(r)) {
        any = true;
        continue;
      }
      if (r.failed) continue;
      r.failed = true;
      if (r.op_done && !r.op_status.ok()) {
        r.why = r.op_status;
      } else if (!r.segments[segment].ack_error.ok()) {
        r.why = r.segments[segment].ack_error;
      } else {
        r.why = Status::TimedOut(std::string(r.op_done ? "persist acknowledgment" : "WRITE") +
                                 " not done within the timeout");
      }
    }
    LogRegistry::ReapFailedLocked(log.get(), &reaped);
  }
  parts_.registry->Forget(reaped, true);
  parts_.m->writes->Increment();
  // A WRITE refused by a LogC may mean a newer owner fenced the range there (tcp: an
  // unknown rkey; verbs: the lane resets). The idempotent open, with this range's epoch,
  // tells: Fenced marks the range, and the turn stops here, neither acknowledged nor
  // copied elsewhere. A persist acknowledgment reporting Fenced marked it already. Legacy
  // ranges (epoch 0) are not probed: an owner of an epoch fences them only in a cluster
  // still being upgraded, and their next open or copy is refused Fenced anyway.
  const bool probe = parts_.registry->EpochOf(log->range) != 0;
  for (const auto& rep : reaped) {
    if (!probe) break;
    if (parts_.registry->IsFenced(log->range)) break;
    if (rep->why.IsFenced() || rep->why.IsTimedOut()) continue;  // a hung LogC: no probe
    Status probe = parts_.registry->Probe(log, *rep, static_cast<uint32_t>(segment), capacity);
    LOG_IF(INFO, !probe.ok() && !probe.IsFenced())
        << LogName(log->range, log->memtable) << ": " << probe.ToString();
  }
  if (parts_.registry->IsFenced(log->range)) return parts_.registry->FencedError(log->range);
  if (!any) {
    return Status::Unavailable(
        "every replica failed" +
        (reaped.empty() ? std::string() : ": " + reaped.back()->why.ToString()));
  }
  return Status::OK();
}

}  // namespace nova::logc
