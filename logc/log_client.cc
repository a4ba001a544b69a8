#include "logc/log_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <glog/logging.h>

namespace nova::logc {

namespace {

// Largest segment the client asks for (a LogC's default --logc max): bigger batches are
// split over several segments.
constexpr uint64_t kMaxSegmentBytes = 1ull << 30;
// Staging buffers at least this big are kept between turns; bigger ones are freed when a
// turn ends, so an idle log holds little memory.
constexpr uint64_t kKeptStagingBytes = 1ull << 20;
// Background deletes queued at most (beyond that Delete runs them inline).
constexpr size_t kMaxQueuedDeletes = 1024;

std::string LogName(uint32_t range, uint64_t memtable) {
  return "log r" + std::to_string(range) + " m" + std::to_string(memtable);
}

// How much of a log segment a copy holds, as listed: fdatasync'd bytes in mode disk (they
// are read from the disk), received bytes of a persisted file read one-sidedly in mode
// memory+disk; memory files do not know it (0).
uint64_t HeldBytes(LogMode mode, const LogFileInfo& f) {
  return f.persisted && mode != LogMode::kDisk ? f.length : f.persisted_length;
}

}  // namespace

// A registered local buffer that the transport reads from (WRITE) or writes into (READ).
// Shared with the completions of the ops using it, so a late completion (after a timeout)
// never finds it freed.
struct LogClient::Staging {
  transport::Transport* transport = nullptr;
  std::unique_ptr<char[]> mem;
  transport::MemoryRegion mr;
  uint64_t size = 0;
  std::atomic<int> inflight{0};  // ops posted whose completion has not run
  ~Staging() {
    if (transport != nullptr) transport->DeregisterMemory(mr).IgnoreError();
  }
};

// One LogC holding a copy of a log. Fields are protected by the log's mu.
struct LogClient::Replica {
  struct Segment {
    uint32_t handle = 0;
    transport::RemoteAddr addr;
    uint64_t persisted = 0;  // acknowledged by kLogPersisted
    Status ack_error;        // a kLogPersisted that reported a failure
  };
  std::string logc_id;
  transport::PeerId peer = transport::kInvalidPeer;
  uint64_t incarnation = 0;       // of the LogC process holding it (0: not known yet)
  std::vector<Segment> segments;  // parallel to Log::capacity
  bool failed = false;
  Status why;  // when failed
  // The WRITE of the current piece.
  uint64_t op_seq = 0;
  bool op_done = true;
  Status op_status;
};

struct LogClient::Log {
  // Constant after creation.
  uint32_t range = 0;
  uint64_t memtable = 0;

  std::mutex mu;
  std::condition_variable cv;  // turn ended, op completed, ack arrived, replica failed
  // Protected by mu:
  std::string pending;        // appended, not yet taken by a turn
  uint64_t queued_end = 0;    // logical end of every byte appended
  uint64_t durable_end = 0;   // bytes [0, durable_end) hold the mode's guarantee
  uint64_t sent_end = 0;      // bytes [0, sent_end) may have reached a replica
  bool turn = false;          // a thread is writing a batch
  Status dead;                // set once an append failed (no more appends), or deleted
  bool recovered = false;     // read back by ReadAll: kept and re-replicated, not appended
  bool deleted = false;       // Delete ran: no replica may be added any more
  std::vector<uint64_t> capacity;  // per segment
  uint64_t written = 0;            // bytes in the last segment
  std::vector<std::shared_ptr<Replica>> replicas;
  // Owned by the thread holding the turn.
  std::shared_ptr<Staging> staging;

  // Replicas not failed. REQUIRES: mu held.
  int LiveLocked() const {
    int live = 0;
    for (const auto& r : replicas) live += r->failed ? 0 : 1;
    return live;
  }
};

// One segment of a recovered log and where it can be read.
struct LogClient::SegmentToRead {
  struct Source {
    std::string logc_id;
    transport::PeerId peer;
    LogFileInfo info;
    uint64_t incarnation = 0;  // of the LogC, from its listing
  };
  uint32_t range = 0;
  uint64_t memtable = 0;
  uint32_t segment = 0;
  std::vector<Source> sources;  // best first
};

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
  appends_ = metrics->GetCounter("log_client_appends_total", "Log appends");
  writes_ = metrics->GetCounter("log_client_writes_total",
                                "Group-commit rounds (one WRITE per replica each)");
  bytes_ = metrics->GetCounter("log_client_bytes_total", "Bytes appended to logs");
  replica_failures_ = metrics->GetCounter("log_client_replica_failures_total",
                                          "Log replicas dropped after an error or timeout");
  rereplications_ = metrics->GetCounter("log_client_rereplications_total",
                                        "Log replicas re-created on a spare LogC");
  errors_ = metrics->GetCounter("log_client_errors_total",
                                "Failed opens, re-replications and deletes");
  recovery_refusals_ = metrics->GetCounter(
      "log_client_recovery_refusals_total",
      "Recoveries refused because a log with acknowledged writes might be missed");
  append_latency_us_ = metrics->GetHistogram("log_client_append_latency_us",
                                             "Append latency (until the mode's guarantee holds)");
  metrics->RegisterCallbackGauge(
      "log_client_underreplicated_logs",
      "Logs holding data with fewer than log_replicas live replicas (last repair pass)",
      [this] { return static_cast<double>(underreplicated_.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_unsynced_logcs",
      "LogCs not yet marked in sync for every range of this LTC (last repair pass)",
      [this] { return static_cast<double>(unsynced_logcs_.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_recovery_blocked_ranges",
      "Ranges whose recovery waits for a LogC that may hold a log no other has", [this] {
        std::lock_guard lock(mu_);
        return static_cast<double>(blocked_ranges_.size());
      });
  endpoint_->RegisterService(wire::TypeRange{kLogPersisted, kLogPersisted}, this, nullptr);
  endpoint_->AddObserver(this);
  repairer_ = std::thread([this] { RepairLoop(); });
}

LogClient::~LogClient() {
  {
    std::lock_guard lock(repair_mu_);
    stopping_ = true;
  }
  repair_cv_.notify_all();
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
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  ranges_.erase(range);
}

LogClient::Stats LogClient::GetStats() const {
  Stats s;
  s.appends = appends_->value();
  s.writes = writes_->value();
  s.bytes = bytes_->value();
  s.replica_failures = replica_failures_->value();
  s.rereplications = rereplications_->value();
  s.underreplicated = underreplicated_.load();
  s.unsynced_logcs = unsynced_logcs_.load();
  s.recovery_refusals = recovery_refusals_->value();
  return s;
}

// ---- LogCs ------------------------------------------------------------------------

Result<transport::PeerId> LogClient::PeerFor(const std::string& logc_id) {
  std::string address;
  auto connected = [&]() -> Result<transport::PeerId> {
    std::lock_guard lock(mu_);
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
  std::lock_guard connect_lock(connect_mu_);
  known = connected();
  if (known.ok() || known.status().IsNotFound()) return known;
  auto peer = endpoint_->transport()->Connect(address);
  if (!peer.ok()) return peer.status().Prepend("connecting to LogC " + logc_id);
  std::lock_guard lock(mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.address == address) it->second.peer = peer.value();
  return peer.value();
}

void LogClient::MarkFailed(const std::string& logc_id) {
  std::lock_guard lock(mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) it->second.failed_until = MonoNow() + options_.retry_interval;
}

std::optional<std::string> LogClient::ReserveLogc(std::vector<std::string>* exclude) {
  std::lock_guard lock(mu_);
  const MonoTime now = MonoNow();
  LogcState* best = nullptr;
  const std::string* best_id = nullptr;
  for (auto& [id, s] : logcs_) {
    if (s.failed_until > now || s.address.empty()) continue;
    if (std::find(exclude->begin(), exclude->end(), id) != exclude->end()) continue;
    if (best == nullptr || s.open_logs < best->open_logs) {  // ties: the first id
      best = &s;
      best_id = &id;
    }
  }
  if (best == nullptr) return std::nullopt;
  ++best->open_logs;  // counted now, so concurrent choices spread
  exclude->push_back(*best_id);
  return *best_id;
}

void LogClient::ReleaseLogc(const std::string& logc_id) {
  std::lock_guard lock(mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end()) --it->second.open_logs;
}

void LogClient::OnPeerDown(transport::PeerId peer, const Status& why) {
  std::vector<std::shared_ptr<Log>> logs;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : logcs_) {
      if (s.peer == peer) s.failed_until = MonoNow() + options_.retry_interval;
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
  repair_cv_.notify_all();  // re-replicate at once where a spare is up
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
    std::lock_guard lock(acks_mu_);
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

// ---- Appends ----------------------------------------------------------------------

std::shared_ptr<LogClient::Log> LogClient::GetLog(uint32_t range, uint64_t memtable, bool create) {
  std::lock_guard lock(mu_);
  if (create) ranges_.insert(range);
  auto& log = logs_[{range, memtable}];
  if (log == nullptr) {
    if (!create) {
      logs_.erase({range, memtable});
      return nullptr;
    }
    log = std::make_shared<Log>();
    log->range = range;
    log->memtable = memtable;
  }
  return log;
}

Status LogClient::Configure(LogMode mode, int replicas, int min_insync) {
  if (replicas < 1) return Status::InvalidArgument("log replicas must be at least 1");
  if (min_insync < 0 || min_insync > replicas) {
    return Status::InvalidArgument("log_min_insync_replicas must be 0 (= log_replicas) to " +
                                   std::to_string(replicas) + ", not " +
                                   std::to_string(min_insync));
  }
  std::lock_guard lock(mu_);
  if (!logs_.empty() && (mode != mode_.load() || replicas != replicas_.load() ||
                         min_insync != min_insync_.load())) {
    return Status::IllegalState("the log client already has open logs");
  }
  mode_ = mode;
  replicas_ = replicas;
  min_insync_ = min_insync;
  return Status::OK();
}

Status LogClient::Append(uint32_t range, uint64_t memtable, std::string_view bytes,
                         bool* reached) {
  bool ignored;
  if (reached == nullptr) reached = &ignored;
  *reached = false;
  if (mode_.load() == LogMode::kNone) {
    return Status::InvalidArgument("log mode none: nothing is logged");
  }
  if (bytes.empty()) return Status::OK();
  const MonoTime start = MonoNow();
  std::shared_ptr<Log> log = GetLog(range, memtable, true);
  std::unique_lock lock(log->mu);
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
      log->cv.wait(lock);
      continue;
    }
    // This thread takes the turn and writes everything queued so far.
    log->turn = true;
    std::string batch;
    batch.swap(log->pending);
    const uint64_t batch_end = log->queued_end;
    lock.unlock();
    Status s = RunTurn(log, batch, batch_end - batch.size());
    lock.lock();
    log->turn = false;
    if (s.ok()) {
      log->durable_end = batch_end;
    } else if (log->dead.ok()) {
      log->dead = s.Prepend(LogName(range, memtable));
      LOG(ERROR) << log->dead.ToString();
    }
    if (log->staging && log->staging->size > kKeptStagingBytes) log->staging.reset();
    log->cv.notify_all();
  }
  *reached = my_start < log->sent_end;
  if (!log->dead.ok()) return log->dead;
  lock.unlock();
  appends_->Increment();
  bytes_->Increment(bytes.size());
  append_latency_us_->Record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()));
  return Status::OK();
}

Status LogClient::RunTurn(const std::shared_ptr<Log>& log, std::string_view batch,
                         uint64_t batch_start) {
  bool first, opened;
  {
    std::lock_guard lock(log->mu);
    first = log->durable_end == 0;
    opened = !log->capacity.empty();
  }
  // Replicas lost while the log was idle: none of this batch is written while fewer than
  // min_insync_replicas replicas would get it.
  if (opened) NOVA_RETURN_NOT_OK(EnsureInsync(log));
  uint64_t done = 0;
  while (done < batch.size()) {
    const uint64_t remaining = batch.size() - done;
    bool need_segment;
    {
      std::lock_guard lock(log->mu);
      if (!log->dead.ok()) return log->dead;
      need_segment = log->capacity.empty() || log->written == log->capacity.back();
    }
    if (need_segment) {
      // A segment of its own size for a batch that would not fit an ordinary one.
      const uint64_t capacity =
          std::min(std::max(options_.segment_bytes, remaining), kMaxSegmentBytes);
      NOVA_RETURN_NOT_OK(OpenSegment(log, capacity));
      NOVA_RETURN_NOT_OK(EnsureInsync(log));
    }
    size_t segment;
    uint64_t offset, n;
    {
      std::lock_guard lock(log->mu);
      segment = log->capacity.size() - 1;
      offset = log->written;
      n = std::min(remaining, log->capacity.back() - offset);
      log->sent_end = batch_start + done + n;
    }
    NOVA_RETURN_NOT_OK(WritePiece(log, segment, offset, batch.data() + done, n));
    {
      std::lock_guard lock(log->mu);
      log->written += n;
    }
    done += n;
    // Replicas lost during the WRITE: the piece is copied to others (or the append waits
    // for them) before it counts as held by min_insync_replicas.
    NOVA_RETURN_NOT_OK(EnsureInsync(log));
  }
  if (first) {
    // Before the log's first acknowledgment, its LogCs are marked in sync for the range
    // (when it is fully replicated): a later recovery must be able to trust their listing.
    std::vector<std::string> holders;
    {
      std::lock_guard lock(log->mu);
      for (auto& r : log->replicas) holders.push_back(r->logc_id);
    }
    if (!RangeMarkedAt(log->range, holders)) MarkRange(log->range, holders);
  }
  return Status::OK();
}

Status LogClient::OpenAt(const std::shared_ptr<Log>& log, const std::shared_ptr<Replica>& rep,
                         uint32_t segment, uint64_t capacity) {
  OpenLogRequest req;
  req.range = log->range;
  req.memtable = log->memtable;
  req.segment = segment;
  req.capacity = capacity;
  req.persist = Persists(mode_.load());
  auto reply = endpoint_->CallSync(rep->peer, kOpenLog, Encode(req), options_.timeout);
  if (!reply.ok()) return reply.status().Prepend("opening at LogC " + rep->logc_id);
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
    std::lock_guard lock(log->mu);
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
    std::lock_guard lock(acks_mu_);
    acks_[{rep->peer, resp.handle}] = AckRoute{log, rep, segment};
  }
  // Persisted files tell how much they hold; CopyTo continues after it. New segments of a
  // log being written must be empty (memory files cannot tell: they are overwritten).
  if (req.persist && resp.length != resp.persisted_length) {
    return Status::IllegalState("LogC " + rep->logc_id + " is still persisting segment " +
                                std::to_string(segment));
  }
  return Status::OK();
}

Status LogClient::OpenSegment(const std::shared_ptr<Log>& log, uint64_t capacity) {
  std::vector<std::shared_ptr<Replica>> replicas;
  uint32_t segment;
  {
    std::lock_guard lock(log->mu);
    segment = static_cast<uint32_t>(log->capacity.size());
    for (auto& r : log->replicas) {
      if (!r->failed) replicas.push_back(r);
    }
  }
  auto open_one = [&](const std::shared_ptr<Replica>& rep) -> Status {
    Status s = OpenAt(log, rep, segment, capacity);
    if (s.ok()) {
      std::lock_guard lock(log->mu);
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
    const MonoTime deadline = MonoNow() + options_.timeout;
    while (true) {
      std::vector<std::string> tried;
      while (static_cast<int>(opened.size()) < replicas_.load()) {
        auto chosen = ReserveLogc(&tried);
        if (!chosen) break;
        const std::string& id = *chosen;
        auto peer = PeerFor(id);
        Status s = peer.status();
        auto rep = std::make_shared<Replica>();
        rep->logc_id = id;
        if (s.ok()) {
          rep->peer = peer.value();
          s = open_one(rep);
        }
        if (!s.ok()) {
          errors_->Increment();
          ReleaseLogc(id);
          DropAckRoutes(*rep);
          MarkFailed(id);
          LOG_EVERY_N(WARNING, 20) << LogName(log->range, log->memtable) << ": " << s.ToString();
          continue;
        }
        opened.push_back(rep);
      }
      if (!opened.empty() || MonoNow() >= deadline) break;
      std::this_thread::sleep_for(options_.retry_interval);
    }
    if (opened.empty()) {
      return Status::Unavailable("no LogC could open " + LogName(log->range, log->memtable));
    }
    std::lock_guard lock(log->mu);
    log->replicas = opened;
    log->capacity.push_back(capacity);
    log->written = 0;
    LOG_IF(WARNING, static_cast<int>(opened.size()) < replicas_.load())
        << LogName(log->range, log->memtable) << " opened at " << opened.size() << " of "
        << replicas_.load() << " replicas";
    return Status::OK();
  }
  // The next segment, at the log's replicas.
  bool any = false;
  for (auto& rep : replicas) {
    Status s = open_one(rep);
    std::lock_guard lock(log->mu);
    if (s.ok()) {
      any = true;
    } else if (!rep->failed) {
      rep->failed = true;
      rep->why = s;
    }
  }
  std::vector<std::shared_ptr<Replica>> reaped;
  {
    std::lock_guard lock(log->mu);
    ReapFailedLocked(log.get(), &reaped);
    if (any) {
      log->capacity.push_back(capacity);
      log->written = 0;
    }
  }
  Forget(reaped, true);
  if (!any) {
    return Status::Unavailable("no replica could open segment " + std::to_string(segment) +
                               " of " + LogName(log->range, log->memtable));
  }
  return Status::OK();
}

std::shared_ptr<LogClient::Staging> LogClient::NewStaging(uint64_t bytes, Status* error) {
  auto st = std::make_shared<Staging>();
  st->mem.reset(new char[bytes]);
  auto mr = endpoint_->transport()->RegisterMemory(st->mem.get(), bytes, transport::kLocalOnly);
  if (!mr.ok()) {
    *error = mr.status().Prepend("registering a log staging buffer");
    return nullptr;
  }
  st->transport = endpoint_->transport();
  st->mr = mr.value();
  st->size = bytes;
  return st;
}

Status LogClient::WritePiece(const std::shared_ptr<Log>& log, size_t segment, uint64_t offset,
                             const char* data, uint64_t n) {
  const bool persist = Persists(mode_.load());
  // The staging buffer is reused unless a timed-out op may still read it.
  std::shared_ptr<Staging> st = log->staging;
  if (st == nullptr || st->inflight.load() != 0 || st->size < n) {
    Status error;
    st = NewStaging(std::max(n, uint64_t{4096}), &error);
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
  {
    std::lock_guard lock(log->mu);
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
    Status s = endpoint_->transport()->Write(
        t.rep->peer, st->mr, 0, n, t.addr,
        persist ? std::optional<uint32_t>(t.handle) : std::nullopt,
        [weak, rep = t.rep, seq = t.seq, st](const Status& done) {
          st->inflight.fetch_sub(1);
          auto log = weak.lock();
          if (log == nullptr) return;
          std::lock_guard lock(log->mu);
          if (rep->op_seq != seq) return;
          rep->op_done = true;
          rep->op_status = done;
          log->cv.notify_all();
        });
    if (!s.ok()) {
      st->inflight.fetch_sub(1);
      std::lock_guard lock(log->mu);
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
    std::unique_lock lock(log->mu);
    const MonoTime deadline = MonoNow() + options_.timeout;
    log->cv.wait_until(lock, deadline, [&] {
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
    ReapFailedLocked(log.get(), &reaped);
  }
  Forget(reaped, true);
  writes_->Increment();
  if (!any) {
    return Status::Unavailable(
        "every replica failed" +
        (reaped.empty() ? std::string() : ": " + reaped.back()->why.ToString()));
  }
  return Status::OK();
}

void LogClient::ReapFailedLocked(Log* log, std::vector<std::shared_ptr<Replica>>* reaped) {
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

void LogClient::Forget(const std::vector<std::shared_ptr<Replica>>& reaped, bool failed) {
  if (reaped.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (auto& rep : reaped) {
      auto it = logcs_.find(rep->logc_id);
      if (it == logcs_.end()) continue;
      --it->second.open_logs;
      if (failed) it->second.failed_until = MonoNow() + options_.retry_interval;
    }
  }
  for (auto& rep : reaped) DropAckRoutes(*rep);
  if (failed) replica_failures_->Increment(reaped.size());
}

void LogClient::DropAckRoutes(const Replica& rep) {
  // By scanning the routes rather than rep.segments, which a turn may still be extending.
  std::lock_guard lock(acks_mu_);
  for (auto it = acks_.begin(); it != acks_.end();) {
    if (it->second.replica.get() == &rep) {
      it = acks_.erase(it);
    } else {
      ++it;
    }
  }
}

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
      rereplications_->Increment();
      LOG(INFO) << LogName(log->range, log->memtable) << " re-replicated to LogC " << id;
    } else if (s.code() == Status::Code::kAborted) {
      break;  // the log was deleted meanwhile
    } else {
      errors_->Increment();
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
    std::lock_guard lock(mu_);
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
  repair_cv_.notify_all();
}

bool LogClient::RangeFullyReplicated(uint32_t range) {
  std::vector<std::shared_ptr<Log>> logs;
  {
    std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  for (const std::string& id : logcs) {
    auto it = logcs_.find(id);
    if (it == logcs_.end() || it->second.in_sync.count(range) == 0) return false;
  }
  return true;
}

void LogClient::MarkRange(uint32_t range, const std::vector<std::string>& only) {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  auto it = logcs_.find(logc_id);
  if (it != logcs_.end() && it->second.incarnation == incarnation) {
    it->second.in_sync.insert(range);
  }
}

void LogClient::RepairLoop() {
  std::unique_lock lock(repair_mu_);
  while (!stopping_) {
    repair_cv_.wait_for(lock, options_.repair_interval);
    if (stopping_) break;
    lock.unlock();
    RepairPass();
    lock.lock();
  }
}

void LogClient::RepairPass() {
  if (mode_.load() == LogMode::kNone) return;
  std::vector<std::shared_ptr<Log>> logs;
  std::set<uint32_t> ranges;
  {
    std::lock_guard lock(mu_);
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
  underreplicated_ = under;
  for (uint32_t range : ranges) MarkRange(range);
  uint64_t unsynced = 0;
  {
    std::lock_guard lock(mu_);
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
  unsynced_logcs_ = unsynced;
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

// ---- Delete -----------------------------------------------------------------------

void LogClient::Delete(uint32_t range, std::vector<uint64_t> memtables) {
  std::vector<std::shared_ptr<Log>> logs;
  std::vector<std::string> logc_ids;
  {
    std::lock_guard lock(mu_);
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
        errors_->Increment();
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
    errors_->Increment();
    LOG(WARNING) << "deleting logs of range " << range << " not queued (" << queued.ToString()
                 << "); recovery collects them";
  }
}

// ---- Recovery ---------------------------------------------------------------------

Status LogClient::ReadSegment(const SegmentToRead& seg, std::string* out,
                              std::vector<size_t>* holders, uint64_t* length) {
  holders->clear();
  *length = 0;
  const LogMode mode = mode_.load();
  const bool memory = mode == LogMode::kMemory;
  Status last = Status::Unavailable("no replica");
  std::string candidate;
  int64_t best = -1;  // memory: index of the last non-zero byte of the best copy read
  for (size_t k = 0; k < seg.sources.size(); ++k) {
    const auto& src = seg.sources[k];
    candidate.clear();
    const LogFileInfo& f = src.info;
    if (mode == LogMode::kDisk && f.persisted) {
      // From the LogC's disk, page by page.
      ReadLogRequest req{seg.range, seg.memtable, seg.segment, 0, f.persisted_length};
      last = Status::OK();
      while (true) {
        req.offset = candidate.size();
        req.length = UINT64_MAX;
        auto reply = endpoint_->CallSync(src.peer, kReadLog, Encode(req), options_.timeout);
        if (!reply.ok()) {
          last = reply.status();
          break;
        }
        ReadLogResponse resp;
        last = Decode(reply.value(), &resp);
        if (!last.ok()) break;
        candidate.append(resp.data);
        if (resp.data.empty() || candidate.size() >= resp.persisted_length) break;
      }
    } else {
      // One one-sided READ: what the LogC received of a persisted file, a memory file whole.
      const uint64_t n = f.persisted ? f.length : f.capacity;
      Status error;
      auto st = n == 0 ? nullptr : NewStaging(n, &error);
      if (n != 0 && st == nullptr) return error;
      last = n == 0 ? Status::OK() : WaitOp(st, [&](transport::Completion done) {
        return endpoint_->transport()->Read(src.peer, f.addr, n, st->mr, 0, std::move(done));
      });
      if (last.ok() && n != 0) candidate.assign(st->mem.get(), n);
    }
    if (!last.ok()) {
      LOG(WARNING) << "reading " << LogName(seg.range, seg.memtable) << " segment "
                   << seg.segment << " from LogC " << src.logc_id << ": " << last.ToString();
      // A copy that cannot be read may be the only one holding every acknowledged byte:
      // in memory mode any copy may be the longest; otherwise another source listed with
      // as much is as good, and a shorter one never is. The open is retried (a LogC that
      // died is then unlisted, and counts against M).
      if (memory) return last.Prepend("a copy could not be read");
      const uint64_t longest = HeldBytes(mode, seg.sources.front().info);
      if (k + 1 >= seg.sources.size() || HeldBytes(mode, seg.sources[k + 1].info) < longest) {
        return last.Prepend("no copy holding all of it could be read");
      }
      continue;
    }
    if (!memory) {
      // Sources are sorted by length: the first read is the longest; the others that hold
      // as much hold the same bytes (every copy is a prefix of one stream).
      out->swap(candidate);
      const uint64_t have = HeldBytes(mode, f);
      *length = out->size();
      for (size_t j = 0; j < seg.sources.size(); ++j) {
        if (j == k || HeldBytes(mode, seg.sources[j].info) >= have) holders->push_back(j);
      }
      return Status::OK();
    }
    // A memory file does not know its length, and a copy that was dropped, or being
    // re-replicated, holds only a prefix: every copy is read and the one reaching furthest
    // wins (ties hold the same bytes: a longer copy adds a record header, never only zeros).
    int64_t last_nonzero = static_cast<int64_t>(candidate.size()) - 1;
    while (last_nonzero >= 0 && candidate[static_cast<size_t>(last_nonzero)] == 0) --last_nonzero;
    if (last_nonzero > best) {
      best = last_nonzero;
      out->swap(candidate);
      holders->clear();
    }
    if (last_nonzero == best) holders->push_back(k);
  }
  if (holders->empty()) return last;
  *length = static_cast<uint64_t>(best + 1);
  return Status::OK();
}

void LogClient::AdoptRecovered(const SegmentToRead* const* segments, size_t n,
                               const std::vector<std::string>& holders,
                               const std::vector<uint64_t>& lengths) {
  if (n == 0) return;
  auto log = std::make_shared<Log>();
  log->range = segments[0]->range;
  log->memtable = segments[0]->memtable;
  log->recovered = true;
  for (size_t k = 0; k < n; ++k) {
    const auto& src = segments[k]->sources.front();
    log->capacity.push_back(src.info.capacity);
  }
  log->written = lengths.back();
  for (const std::string& id : holders) {
    auto rep = std::make_shared<Replica>();
    rep->logc_id = id;
    for (size_t k = 0; k < n; ++k) {
      for (const auto& src : segments[k]->sources) {
        if (src.logc_id != id) continue;
        rep->peer = src.peer;
        rep->incarnation = src.incarnation;
        Replica::Segment seg;
        seg.handle = src.info.handle;
        seg.addr = src.info.addr;
        seg.persisted = src.info.persisted_length;
        rep->segments.push_back(seg);
      }
    }
    if (rep->segments.size() == n) log->replicas.push_back(rep);
  }
  std::lock_guard lock(mu_);
  auto& slot = logs_[{log->range, log->memtable}];
  if (slot != nullptr) {
    // A log this client writes (an engine reopened in the same process) stays as it is.
    std::lock_guard log_lock(slot->mu);  // order: mu_, then a log's mu
    if (!slot->recovered) return;
    for (auto& rep : slot->replicas) {
      auto it = logcs_.find(rep->logc_id);
      if (it != logcs_.end()) --it->second.open_logs;
    }
  }
  for (auto& rep : log->replicas) {
    auto it = logcs_.find(rep->logc_id);
    if (it != logcs_.end()) ++it->second.open_logs;
  }
  slot = log;
}

Status LogClient::ReadAll(uint32_t range, int threads, bool new_range,
                          std::vector<RecoveredLog>* logs, std::vector<uint64_t>* missing) {
  logs->clear();
  missing->clear();
  if (mode_.load() == LogMode::kNone) {
    return Status::InvalidArgument("log mode none: there are no logs to read");
  }
  std::vector<std::string> ids;
  std::set<uint64_t> expected;  // memtables this client wrote
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : logcs_) {
      if (!s.address.empty()) ids.push_back(id);
    }
    for (auto& [key, log] : logs_) {
      if (key.first != range) continue;
      std::lock_guard log_lock(log->mu);  // order: mu_, then a log's mu
      if (log->durable_end > 0 && !log->recovered) expected.insert(key.second);
    }
  }
  // memtable -> segment -> sources
  std::map<uint64_t, std::map<uint32_t, SegmentToRead>> found;
  std::vector<std::string> unlisted;  // LogCs whose logs we could not list
  std::vector<std::string> unsynced;  // listed, but not in sync for the range
  for (const std::string& id : ids) {
    transport::PeerId peer = transport::kInvalidPeer;
    auto listed = ListAt(id, range, &peer);
    if (!listed.ok()) {
      LOG(WARNING) << "listing logs of range " << range << " at LogC " << id << ": "
                   << listed.status().ToString();
      unlisted.push_back(id + " (" + listed.status().ToString() + ")");
      continue;
    }
    const ListLogsResponse& list = listed.value();
    if (list.in_sync) {
      NoteInSync(id, list.incarnation, range);
    } else {
      unsynced.push_back(id);
    }
    for (const LogFileInfo& f : list.files) {
      SegmentToRead& seg = found[f.memtable][f.segment];
      seg.range = range;
      seg.memtable = f.memtable;
      seg.segment = f.segment;
      seg.sources.push_back(SegmentToRead::Source{id, peer, f, list.incarnation});
    }
  }
  // Every acknowledged write was on min_insync_replicas LogCs when it was acknowledged. A
  // LogC that cannot be listed, or that is not in sync for the range (it restarted and lost
  // its memory copies, or a new disk; it was never marked), may be the only one left of
  // those: with that many such LogCs, a log may be on none of the others, and recovering
  // without it would lose acknowledged writes. The caller retries (the range waits).
  const bool forced = std::find(options_.force_recovery_ranges.begin(),
                                options_.force_recovery_ranges.end(),
                                range) != options_.force_recovery_ranges.end();
  const size_t suspects = unlisted.size() + unsynced.size();
  if (!new_range && static_cast<int>(suspects) >= InsyncTarget()) {
    std::string who;
    for (const auto& u : unlisted) who += (who.empty() ? "" : ", ") + u;
    for (const auto& u : unsynced) {
      who += (who.empty() ? "" : ", ") + u + " (not in sync: restarted without its copies, or new)";
    }
    const std::string why =
        "range " + std::to_string(range) + ": " + std::to_string(suspects) +
        " LogC(s) cannot vouch for their logs (" + who + "), and a write is acknowledged on " +
        std::to_string(InsyncTarget()) + " of them: a log with acknowledged writes may be on " +
        "those only";
    if (!forced) {
      recovery_refusals_->Increment();
      {
        std::lock_guard lock(mu_);
        blocked_ranges_.insert(range);
      }
      LOG_EVERY_N(WARNING, 10) << "recovery waits: " << why;
      return Status::Unavailable(why + "; waiting for them");
    }
    LOG(ERROR) << "recovery forced by --ltc_force_recovery_ranges although " << why
               << ": writes acknowledged only in logs there are lost";
  }
  {
    // The range's recovery goes on: from now on the repairer may mark it in sync (never
    // before: a refused range has logs this client does not know of, and marking a LogC
    // that lost them would make the next attempt go on without them).
    std::lock_guard lock(mu_);
    blocked_ranges_.erase(range);
    ranges_.insert(range);
  }
  // Best source first: the one that received (or persisted) the most.
  std::vector<SegmentToRead*> work;
  for (auto& [memtable, segments] : found) {
    for (auto& [number, seg] : segments) {
      const LogMode mode = mode_.load();
      std::stable_sort(seg.sources.begin(), seg.sources.end(), [&](const auto& a, const auto& b) {
        return HeldBytes(mode, a.info) > HeldBytes(mode, b.info);
      });
      work.push_back(&seg);
    }
  }
  std::vector<std::string> bytes(work.size());
  std::vector<Status> status(work.size());
  std::vector<std::vector<size_t>> holders(work.size());
  std::vector<uint64_t> lengths(work.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++)
      status[i] = ReadSegment(*work[i], &bytes[i], &holders[i], &lengths[i]);
  };
  std::vector<std::thread> pool;
  const size_t n_threads = std::min<size_t>(std::max(1, threads), work.size());
  for (size_t t = 0; t < n_threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  size_t i = 0;
  std::vector<uint64_t> lost;
  uint64_t lost_bytes = 0;  // as listed: what the lost logs held at most
  for (auto& [memtable, segments] : found) {
    RecoveredLog log;
    log.memtable = memtable;
    bool complete = true;
    uint32_t expect_segment = 0;
    const size_t first = i;
    std::map<std::string, size_t> held;  // LogC -> segments it holds all of
    for (auto& [number, seg] : segments) {
      if (number != expect_segment++) complete = false;  // a segment no replica lists
      if (!status[i].ok()) complete = false;
      log.bytes += bytes[i];
      for (size_t h : holders[i]) ++held[seg.sources[h].logc_id];
      ++i;
    }
    expected.erase(memtable);
    if (!complete) {
      (forced ? lost : *missing).push_back(memtable);
      for (auto& [number, seg] : segments) {
        uint64_t most = 0;
        for (const auto& src : seg.sources) {
          const LogFileInfo& f = src.info;
          most = std::max(most, f.persisted ? std::max(f.length, f.persisted_length) : f.capacity);
        }
        lost_bytes += most;
      }
      continue;
    }
    for (auto& [id, count] : held) {
      if (count == segments.size()) log.replicas.push_back(id);
    }
    std::vector<uint64_t> segment_lengths(lengths.begin() + static_cast<ptrdiff_t>(first),
                                          lengths.begin() + static_cast<ptrdiff_t>(i));
    AdoptRecovered(work.data() + first, segments.size(), log.replicas, segment_lengths);
    logs->push_back(std::move(log));
  }
  for (uint64_t m : expected) (forced ? lost : *missing).push_back(m);
  std::sort(missing->begin(), missing->end());
  if (!lost.empty()) {
    std::string list;
    for (uint64_t m : lost) list += (list.empty() ? "" : ",") + std::to_string(m);
    LOG(ERROR) << "range " << range << ": forced recovery goes on without the logs of "
               << lost.size() << " memtable(s) (" << list << "; up to " << lost_bytes
               << " log bytes as listed, memory logs counted at their capacity): the writes "
               << "acknowledged in them since the range's last flush are lost";
  }
  if (forced && !unlisted.empty()) {
    LOG(ERROR) << "range " << range << ": forced recovery goes on without " << unlisted.size()
               << " LogC(s) it could not list: the logs only they held (any number, of up to "
               << "a memtable each) are lost";
  }
  repair_cv_.notify_all();  // re-replicate what was read at fewer than R replicas
  return Status::OK();
}

}  // namespace nova::logc
