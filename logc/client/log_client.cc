#include "logc/client/log_client.h"

#include <utility>

#include <glog/logging.h>

#include "logc/client/log_client_internal.h"
#include "logc/client/log_fencer.h"
#include "logc/client/log_recovery_reader.h"
#include "logc/client/log_registry.h"
#include "logc/client/log_repairer.h"
#include "logc/client/log_writer.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

using internal::kMaxQueuedDeletes;
using internal::Log;
using internal::LogName;
using internal::Replica;

namespace {
// LogClient::ThreadAppendNanos: written and read by its own thread only.
thread_local uint64_t thread_append_nanos = 0;
}  // namespace

LogClient::LogClient(LogClientOptions options, rpc::RpcEndpoint* endpoint,
                     MetricsRegistry* metrics)
    : options_(std::move(options)),
      endpoint_(endpoint),
      settings_(std::make_unique<internal::LogSettings>()),
      m_(std::make_unique<internal::LogClientMetrics>()),
      delete_pool_("log-delete", 1, kMaxQueuedDeletes) {
  settings_->mode = options_.mode;
  settings_->replicas = options_.replicas;
  settings_->min_insync = options_.min_insync_replicas;
  if (metrics == nullptr) {
    own_metrics_ = std::make_unique<MetricsRegistry>();
    metrics = own_metrics_.get();
  }
  metrics_ = metrics;
  m_->appends = metrics->GetCounter("log_client_appends_total", "Log appends");
  m_->writes = metrics->GetCounter("log_client_writes_total",
                                   "Group-commit rounds (one WRITE per replica each)");
  m_->bytes = metrics->GetCounter("log_client_bytes_total", "Bytes appended to logs");
  m_->replica_failures = metrics->GetCounter("log_client_replica_failures_total",
                                             "Log replicas dropped after an error or timeout");
  m_->rereplications = metrics->GetCounter("log_client_rereplications_total",
                                           "Log replicas re-created on a spare LogC");
  m_->errors = metrics->GetCounter("log_client_errors_total",
                                   "Failed opens, re-replications and deletes");
  m_->recovery_refusals = metrics->GetCounter(
      "log_client_recovery_refusals_total",
      "Recoveries refused because a log with acknowledged writes might be missed");
  append_us_ = metrics->GetCounter(
      "log_client_append_us_total",
      "Microseconds spent in Append calls, all threads (failed ones included)");
  m_->append_latency_us = metrics->GetHistogram(
      "log_client_append_latency_us", "Append latency (until the mode's guarantee holds)");

  logcs_ = std::make_unique<LogcReplicaSet>(
      LogcReplicaSet::TransportLinks(endpoint_->transport()), options_.retry_interval);
  // A LogC that went down or restarted: re-replicate at once where a spare is up. The
  // repairer exists before any request can note an incarnation.
  registry_ = std::make_unique<LogRegistry>(settings_.get(), options_.timeout, endpoint_,
                                            logcs_.get(), m_.get(),
                                            [this] { repairer_->Wake(); });
  internal::LogParts parts{&options_,       settings_.get(),      endpoint_, logcs_.get(),
                           registry_.get(), /*repairer=*/nullptr, m_.get()};
  repairer_ = std::make_unique<LogRepairer>(parts);
  parts.repairer = repairer_.get();
  writer_ = std::make_unique<LogWriter>(parts);
  fencer_ = std::make_unique<LogFencer>(parts);
  reader_ = std::make_unique<LogRecoveryReader>(parts);

  metrics->RegisterCallbackGauge(
      "log_client_underreplicated_logs",
      "Logs holding data with fewer than log_replicas live replicas (last repair pass)",
      [this] { return static_cast<double>(m_->underreplicated.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_unsynced_logcs",
      "LogCs not yet marked in sync for every range of this LTC (last repair pass)",
      [this] { return static_cast<double>(m_->unsynced_logcs.load()); });
  metrics->RegisterCallbackGauge(
      "log_client_recovery_blocked_ranges",
      "Ranges whose recovery waits for a LogC that may hold a log no other has",
      [this] { return static_cast<double>(registry_->BlockedCount()); });
  endpoint_->RegisterService(wire::TypeRange{kLogPersisted, kLogPersisted}, this, nullptr);
  endpoint_->AddObserver(this);
  repairer_->Start();
}

LogClient::~LogClient() {
  repairer_->Stop();
  for (const char* gauge : {"log_client_underreplicated_logs", "log_client_unsynced_logcs",
                            "log_client_recovery_blocked_ranges"}) {
    metrics_->UnregisterCallbackGauge(gauge);
  }
  delete_pool_.Shutdown();
}

LogMode LogClient::mode() const { return settings_->mode.load(); }

Status LogClient::Configure(LogMode mode, int replicas, int min_insync) {
  if (replicas < 1) return Status::InvalidArgument("log replicas must be at least 1");
  if (min_insync < 0 || min_insync > replicas) {
    return Status::InvalidArgument("log_min_insync_replicas must be 0 (= log_replicas) to " +
                                   std::to_string(replicas) + ", not " +
                                   std::to_string(min_insync));
  }
  if (mode == settings_->mode.load() && replicas == settings_->replicas.load() &&
      min_insync == settings_->min_insync.load()) {
    return Status::OK();  // no change: allowed with open logs
  }
  return registry_->WhileNoLogs([&] {
    settings_->mode = mode;
    settings_->replicas = replicas;
    settings_->min_insync = min_insync;
    return Status::OK();
  });
}

void LogClient::SetLogcs(std::map<std::string, std::string> logcs) {
  logcs_->SetLogcs(std::move(logcs));
}

void LogClient::ForgetRange(uint32_t range) {
  if (!registry_->IsFenced(range)) {
    registry_->ForgetRange(range);
    return;
  }
  // Abandoned: the newer owner holds these logs now (it read them, and deletes them once
  // flushed); this client only lets go of them.
  AbandonLogs(range, registry_->FencedError(range));
}

void LogClient::AbandonLogs(uint32_t range, const Status& why) {
  for (auto& log : registry_->RemoveRange(range)) {
    std::vector<std::shared_ptr<Replica>> dropped;
    {
      MutexLock lock(&log->mu);
      if (log->dead.ok()) log->dead = why;
      dropped = log->replicas;
      log->replicas.clear();
      log->deleted = true;
      log->cv.NotifyAll();
    }
    registry_->Forget(dropped, false);
  }
}

Status LogClient::FenceRange(uint32_t range, uint64_t owner_epoch) {
  if (owner_epoch > registry_->EpochOf(range)) {
    // Logs this client still holds of the range were written under an older epoch (its own
    // earlier tenure): the fence makes their regions read-only, so they are let go here and
    // read back by ReadAll like any other owner's.
    AbandonLogs(range, Status::Aborted("range " + std::to_string(range) +
                                       " changed owner epoch to " + std::to_string(owner_epoch)));
  }
  return fencer_->FenceRange(range, owner_epoch);
}

bool LogClient::IsFenced(uint32_t range) const { return registry_->IsFenced(range); }

uint64_t LogClient::ThreadAppendNanos() { return thread_append_nanos; }

Status LogClient::Append(uint32_t range, uint64_t memtable, std::string_view bytes,
                         bool* reached) {
  // Two steady-clock readings (vDSO, no system call): cheap next to a replicated WRITE.
  const uint64_t start = MonoNanos();
  Status s = writer_->Append(range, memtable, bytes, reached);
  const uint64_t ns = MonoNanos() - start;
  thread_append_nanos += ns;
  append_us_->Increment((ns + 500) / 1000);  // rounded: no bias over many appends
  return s;
}

Status LogClient::ReadAll(uint32_t range, int threads, bool new_range, const ReadFilter& read,
                          std::vector<RecoveredLog>* logs, std::vector<uint64_t>* missing) {
  if (registry_->IsFenced(range)) {
    logs->clear();
    missing->clear();
    return registry_->FencedError(range);
  }
  return reader_->ReadAll(range, threads, new_range, read, logs, missing);
}

LogClient::Stats LogClient::GetStats() const {
  Stats s;
  s.appends = m_->appends->value();
  s.writes = m_->writes->value();
  s.bytes = m_->bytes->value();
  s.replica_failures = m_->replica_failures->value();
  s.rereplications = m_->rereplications->value();
  s.underreplicated = m_->underreplicated.load();
  s.unsynced_logcs = m_->unsynced_logcs.load();
  s.recovery_refusals = m_->recovery_refusals->value();
  s.repair_passes = m_->repair_passes.load();
  return s;
}

void LogClient::OnPeerDown(transport::PeerId peer, const Status& why) {
  logcs_->MarkPeerDown(peer);
  registry_->FailReplicasAt(peer, why);
  repairer_->Wake();  // re-replicate at once where a spare is up
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
  registry_->HandlePersisted(peer, m);
}

// ---- Delete -----------------------------------------------------------------------

bool LogClient::HasUnreadLogs(uint32_t range) const { return registry_->HasUnread(range); }

void LogClient::Delete(uint32_t range, std::vector<uint64_t> memtables) {
  const bool fenced = registry_->IsFenced(range);
  registry_->ForgetUnread(range, memtables);
  std::vector<std::shared_ptr<Log>> logs = registry_->Remove(range, memtables);
  std::vector<std::string> logc_ids = logcs_->KnownIds();
  for (auto& log : logs) {
    std::vector<std::shared_ptr<Replica>> dropped;
    {
      MutexLock lock(&log->mu);
      if (log->dead.ok())
        log->dead = Status::Aborted(LogName(range, log->memtable) + " was deleted");
      dropped = log->replicas;
      log->replicas.clear();
      log->deleted = true;
      log->cv.NotifyAll();
    }
    registry_->Forget(dropped, false);
  }
  if (fenced) {
    LOG(INFO) << "range " << range << " is fenced: its logs are not deleted (the newer owner's)";
    return;
  }
  auto task = [this, range, memtables = std::move(memtables), logc_ids] {
    DeleteLogsRequest req{range, memtables, registry_->EpochOf(range)};
    const std::string payload = Encode(req);
    for (const std::string& id : logc_ids) {
      if (registry_->IsFenced(range)) return;  // a LogC said so meanwhile: delete no more
      auto peer = logcs_->PeerFor(id);
      Status s = peer.status();
      if (s.ok())
        s = endpoint_->CallSync(peer.value(), kDeleteLogs, payload, options_.timeout).status();
      if (s.IsFenced()) registry_->MarkFenced(range, s);
      if (!s.ok()) {
        m_->errors->Increment();
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
    m_->errors->Increment();
    LOG(WARNING) << "deleting logs of range " << range << " not queued (" << queued.ToString()
                 << "); recovery collects them";
  }
}

}  // namespace nova::logc
