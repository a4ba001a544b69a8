#include "ltc/server/range_migrator.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "common/fault_point.h"

namespace nova::ltc {

namespace {

using coordinator::ClusterConfig;
using coordinator::MemberKind;
using coordinator::RangeMigration;

// The comparator of copied memtables: the engine's user keys are bytewise (EngineOptions).
// Never destroyed, so adopted memtables may outlive anything.
const lsm::InternalKeyComparator* CopiedMemtableComparator() {
  static const auto* icmp = new lsm::InternalKeyComparator(leveldb::BytewiseComparator());
  return icmp;
}

uint64_t Millis(MonoTime since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - since).count());
}

std::string Describe(const RangeMigration& m) {
  return "migration of range " + std::to_string(m.range) + " from LTC " + m.from;
}

// The entry of `m`'s range in `c`, if it is still `m` (the same source, destination and
// owner epoch).
const RangeMigration* SameEntry(const ClusterConfig& c, const RangeMigration& m) {
  // started_ms tells this run from a later one of the same move (queued again after this
  // one was dropped).
  const RangeMigration* e = c.MigrationOf(m.range);
  if (e == nullptr || e->from != m.from || e->to != m.to || e->from_epoch != m.from_epoch ||
      !e->running || e->started_ms != m.started_ms) {
    return nullptr;
  }
  return e;
}

}  // namespace

RangeMigrator::RangeMigrator(RangeMigratorOptions options, coordinator::ConfigStore* store)
    : options_(std::move(options)), store_(store) {}

RangeMigrator::~RangeMigrator() { Shutdown(); }

void RangeMigrator::Start(rpc::RpcEndpoint* endpoint, transport::Transport* transport,
                          RangeTable* table) {
  endpoint_ = endpoint;
  transport_ = transport;
  table_ = table;
  started_ = true;
  reaper_ = std::thread([this] { ReapLoop(); });
  store_->WatchConfig([this](const ClusterConfig& c) { OnConfig(c); });
}

void RangeMigrator::Shutdown() {
  std::list<Worker> workers;
  {
    MutexLock l(&mu_);
    if (stopping_.exchange(true)) return;
    stop_cv_.NotifyAll();
    workers.swap(workers_);
  }
  for (Worker& w : workers) w.thread.join();
  if (reaper_.joinable()) reaper_.join();
}

std::shared_ptr<const MigratedState> RangeMigrator::TakeStaged(uint32_t range,
                                                               uint64_t owner_epoch) {
  MutexLock l(&mu_);
  auto it = staged_.find(MigrationKey{range, owner_epoch});
  if (it == staged_.end()) return nullptr;
  // Kept until the open succeeds: an open that fails is retried, and without logs nothing
  // else has these memtables.
  return it->second.state;
}

void RangeMigrator::Opened(uint32_t range, uint64_t owner_epoch) {
  MutexLock l(&mu_);
  auto it = staged_.find(MigrationKey{range, owner_epoch});
  if (it == staged_.end()) return;
  LOG(INFO) << "range " << range << ": served here " << Millis(it->second.handoff_started)
            << " ms after the hand-off began";
  staged_.erase(it);
}

// ---- Source side ---------------------------------------------------------------------

void RangeMigrator::HandleRequest(rpc::PeerId peer, uint16_t type, std::string payload,
                                  rpc::Responder responder) {
  (void)peer;
  if (!started_ || stopping()) {
    return responder.ReplyError(Status::Unavailable("the LTC is starting or stopping"));
  }
  Result<std::string> out = Status::NotSupported("unknown LTC message type " +
                                                 std::to_string(type));
  switch (type) {
    case kMigrateBegin: {
      MigrationKey k;
      Status s = DecodeBeginRequest(payload, &k);
      out = s.ok() ? Begin(k) : Result<std::string>(s);
      break;
    }
    case kMigrateFetch: {
      FetchRequest q;
      Status s = DecodeFetchRequest(payload, &q);
      out = s.ok() ? Fetch(q) : Result<std::string>(s);
      break;
    }
    case kMigrateHandoff: {
      MigrationKey k;
      Status s = DecodeHandoffRequest(payload, &k);
      out = s.ok() ? Handoff(k) : Result<std::string>(s);
      break;
    }
    case kMigrateEnd: {
      MigrationKey k;
      MigrationOutcome outcome;
      Status s = DecodeEndRequest(payload, &k, &outcome);
      if (s.ok()) s = End(k, outcome);
      out = s.ok() ? Result<std::string>(std::string()) : Result<std::string>(s);
      break;
    }
    default:
      break;
  }
  if (!out.ok()) return responder.ReplyError(out.status());
  responder.Reply(out.value());
}

Result<RangeMigrator::Hosted> RangeMigrator::Find(const MigrationKey& k) const {
  std::shared_ptr<const HostedRanges> t = table_->Current();
  for (const HostedRange& h : t->ranges) {
    if (h.info.id != k.range || h.owner_epoch != k.owner_epoch) continue;
    std::shared_ptr<RangeBackend> b = h.slot->TryGet();
    if (b == nullptr || h.slot->fenced()) break;
    return Hosted{h.slot, std::move(b)};
  }
  return Status::WrongRange("range " + std::to_string(k.range) + " is not served here at owner epoch " +
                            std::to_string(k.owner_epoch));
}

Result<std::string> RangeMigrator::Begin(const MigrationKey& k) {
  MutexLock ops(&ops_mu_);
  Result<Hosted> found = Find(k);
  NOVA_RETURN_NOT_OK(found.status());
  Hosted h = std::move(found.value());
  NOVA_RETURN_NOT_OK(h.backend->BeginMigrationOut());
  std::vector<MigratedMemtable> imms;
  NOVA_RETURN_NOT_OK(h.backend->ExportImmutables(&imms));
  std::vector<uint64_t> ids;
  MutexLock l(&mu_);
  // A migration of this range at an older epoch is over (the range was reopened since).
  std::erase_if(outgoing_, [&](const auto& e) {
    return e.first.range == k.range && e.first.owner_epoch != k.owner_epoch;
  });
  Outgoing& o = outgoing_[k];
  o.last_call = MonoNow();
  for (const MigratedMemtable& m : imms) {
    o.memtables[m.mem->id()] = m.mem;
    ids.push_back(m.mem->id());
  }
  LOG(INFO) << "range " << k.range << ": migration out started, " << ids.size()
            << " memtables to copy";
  return EncodeBeginResponse(ids, h.backend->MemtablesLogged());
}

Result<std::string> RangeMigrator::Fetch(const FetchRequest& q) {
  // The backend pinned for the call keeps the engine (and the memtable's comparator) alive.
  Result<Hosted> found = Find(q.key);
  NOVA_RETURN_NOT_OK(found.status());
  Hosted h = std::move(found.value());
  std::shared_ptr<MemTable> mem;
  {
    MutexLock l(&mu_);
    auto o = outgoing_.find(q.key);
    if (o != outgoing_.end()) {
      o->second.last_call = MonoNow();
      auto m = o->second.memtables.find(q.memtable);
      if (m != o->second.memtables.end()) mem = m->second;
    }
  }
  if (mem == nullptr) {
    return Status::NotFound("range " + std::to_string(q.key.range) + ": memtable " +
                            std::to_string(q.memtable) + " is not being migrated");
  }
  FetchResponse r;
  const size_t max_bytes = std::clamp<size_t>(q.max_bytes, 4096, 8u << 20);
  EncodeMemtableChunk(*mem, q.after, max_bytes, &r.chunk, &r.last_key, &r.done);
  return EncodeFetchResponse(r);
}

Result<std::string> RangeMigrator::Handoff(const MigrationKey& k) {
  NOVA_RETURN_NOT_OK(MAYBE_FAULT("ltc.migrate.source_handoff"));
  MutexLock ops(&ops_mu_);
  {
    MutexLock l(&mu_);
    if (outgoing_.count(k) == 0) {
      return Status::Aborted("range " + std::to_string(k.range) +
                             ": no migration out was begun, or it was given up");
    }
  }
  Result<Hosted> found = Find(k);
  NOVA_RETURN_NOT_OK(found.status());
  Hosted h = std::move(found.value());
  // Requests are refused from here on; the engine waits for the writes in flight.
  h.slot->SetHandedOff(true);
  MigratedState state;
  Status s = h.backend->Handoff(&state);
  if (!s.ok()) {
    h.slot->SetHandedOff(false);
    return s.Prepend("handing range " + std::to_string(k.range) + " off");
  }
  MutexLock l(&mu_);
  Outgoing& o = outgoing_[k];
  o.last_call = MonoNow();
  o.handed_off = true;
  for (const MigratedMemtable& m : state.memtables) o.memtables[m.mem->id()] = m.mem;
  LOG(INFO) << "range " << k.range << ": handed off (" << state.memtables.size()
            << " memtables, last sequence " << state.last_sequence << ")";
  return EncodeHandoffResponse(EncodeMigratedMeta(state));
}

Status RangeMigrator::End(const MigrationKey& k, MigrationOutcome outcome) {
  if (outcome == MigrationOutcome::kAbandoned) {
    LOG(INFO) << "range " << k.range << ": the destination gave the migration up";
    return Resolve(k);
  }
  MAYBE_FAULT_VOID("ltc.migrate.source_end");  // tests: the source dies after the hand-off
  MutexLock l(&mu_);
  auto o = outgoing_.find(k);
  if (o != outgoing_.end()) {
    // The copies are done; the entry stays (handed off) until the configuration moves the
    // range, or the destination gives up after all (its commit failed).
    o->second.memtables.clear();
    o->second.last_call = MonoNow();
  }
  return Status::OK();
}

Status RangeMigrator::Resolve(const MigrationKey& k, bool only_if_dropped) {
  MutexLock ops(&ops_mu_);
  return ResolveLocked(k, only_if_dropped);
}

Status RangeMigrator::ResolveLocked(const MigrationKey& k, bool only_if_dropped) {
  bool handed_off = false;
  {
    MutexLock l(&mu_);
    auto o = outgoing_.find(k);
    if (o == outgoing_.end()) return Status::OK();
    handed_off = o->second.handed_off;
  }
  if (only_if_dropped && !handed_off) return Status::OK();
  Result<Hosted> h = Find(k);
  if (!handed_off) {
    if (h.ok()) h->backend->EndMigrationOut();
    MutexLock l(&mu_);
    outgoing_.erase(k);
    return Status::OK();
  }
  // Handed off: serve again only while the configuration names this LTC at the same
  // epoch, and only once no migration entry of the range is left for a late commit.
  for (int attempt = 0; attempt < 20; ++attempt) {
    int32_t version = 0;
    Result<ClusterConfig> c = store_->ReadConfig(&version);
    if (!c.ok()) return c.status().Prepend("resolving the migration of range " +
                                           std::to_string(k.range));
    const coordinator::RangeAssignment* r = c->Range(k.range);
    if (r == nullptr || r->ltc != options_.ltc_id || r->owner_epoch != k.owner_epoch) {
      LOG(INFO) << "range " << k.range << ": handed off and now owned by LTC "
                << (r == nullptr ? "?" : r->ltc) << "; dropping it here";
      MutexLock l(&mu_);
      outgoing_.erase(k);
      return Status::OK();
    }
    if (c->MigrationOf(k.range) != nullptr) {
      if (only_if_dropped) return Status::OK();
      ClusterConfig next = c.value();
      std::erase_if(next.migrations,
                    [&](const RangeMigration& m) { return m.range == k.range; });
      next.epoch++;
      Status s = store_->UpdateConfig(next, version);
      if (s.code() == Status::Code::kAborted) continue;  // changed meanwhile: look again
      NOVA_RETURN_NOT_OK_PREPEND(s, "removing the migration of range " + std::to_string(k.range));
    }
    if (h.ok()) {
      h->backend->EndMigrationOut();
      h->slot->SetHandedOff(false);
    }
    LOG(WARNING) << "range " << k.range
                 << ": the migration was not completed; serving the range again";
    MutexLock l(&mu_);
    outgoing_.erase(k);
    return Status::OK();
  }
  return Status::Unavailable("the configuration kept changing while resolving the migration "
                             "of range " + std::to_string(k.range));
}

void RangeMigrator::ReapLoop() {
  MutexLock l(&mu_);
  while (!stopping()) {
    stop_cv_.WaitUntil(&l, MonoNow() + std::chrono::milliseconds(500),
                       [this]() REQUIRES(mu_) { return stopping(); });
    if (stopping()) break;
    std::vector<MigrationKey> idle, dropped;
    for (const auto& [k, o] : outgoing_) {
      if (MonoNow() - o.last_call >= options_.source_idle) {
        idle.push_back(k);
      } else if (o.handed_off) {
        dropped.push_back(k);  // checked below: serve again at once if the leader dropped it
      }
    }
    // A staged state goes once its range is no longer this LTC's at its owner epoch (the
    // commit failed, or the range moved on) and it has waited long enough for an open.
    l.Unlock();  // mu_ is a leaf: the store is asked without it
    const std::optional<ClusterConfig> config = store_->GetLastConfig();
    l.Lock();
    for (auto it = staged_.begin(); it != staged_.end();) {
      const coordinator::RangeAssignment* r =
          config.has_value() ? config->Range(it->first.range) : nullptr;
      const bool ours = r != nullptr && r->ltc == options_.ltc_id &&
                        r->owner_epoch == it->first.owner_epoch;
      const bool old = MonoNow() - it->second.since >= options_.staged_ttl;
      it = old && !ours ? staged_.erase(it) : std::next(it);
    }
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    l.Unlock();
    // Migrations for this LTC that a finished worker kept from starting (a later run of the
    // same range) start now.
    if (config.has_value()) OnConfig(*config);
    for (const MigrationKey& k : dropped) {
      // The last configuration seen has no migration of the range (its destination died and
      // the leader dropped it): confirmed against ZooKeeper before anything is undone.
      if (config.has_value() && config->MigrationOf(k.range) == nullptr) {
        Status s = Resolve(k, /*only_if_dropped=*/true);
        LOG_IF(WARNING, !s.ok()) << s.ToString() << " (retried)";
      }
    }
    for (const MigrationKey& k : idle) {
      Status s = Resolve(k);
      LOG_IF(WARNING, !s.ok()) << s.ToString() << " (retried)";
      if (!s.ok()) {
        MutexLock again(&mu_);
        auto o = outgoing_.find(k);
        if (o != outgoing_.end()) o->second.last_call = MonoNow() - options_.source_idle / 2;
      }
    }
    l.Lock();
  }
}

// ---- Destination side ----------------------------------------------------------------

void RangeMigrator::OnConfig(const ClusterConfig& config) {
  if (!started_ || stopping()) return;
  MutexLock l(&mu_);
  if (stopping()) return;
  for (const RangeMigration& m : config.migrations) {
    if (!m.running || m.to != options_.ltc_id || incoming_.count(m.range) > 0) continue;
    incoming_.insert(m.range);
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([this, m, done] {
                                RunMigration(m);
                                done->store(true);
                              }),
                              done});
  }
}

Status RangeMigrator::CopyMemtable(rpc::PeerId peer, const MigrationKey& k, uint64_t id,
                                   std::shared_ptr<MemTable>* out, uint64_t* bytes) {
  auto mem = std::make_shared<MemTable>(CopiedMemtableComparator(), id);
  FetchRequest q;
  q.key = k;
  q.memtable = id;
  q.max_bytes = options_.chunk_bytes;
  while (true) {
    if (stopping()) return Status::Aborted("the LTC is stopping");
    Result<std::string> r = endpoint_->CallSync(peer, kMigrateFetch, EncodeFetchRequest(q),
                                                options_.call_timeout);
    if (!r.ok()) return r.status().Prepend("copying memtable " + std::to_string(id));
    FetchResponse p;
    NOVA_RETURN_NOT_OK(DecodeFetchResponse(r.value(), &p));
    uint64_t entries = 0;
    NOVA_RETURN_NOT_OK(DecodeMemtableChunk(p.chunk, mem.get(), &entries));
    *bytes += p.chunk.size();
    if (p.done) break;
    q.after = std::move(p.last_key);
  }
  *out = std::move(mem);
  return Status::OK();
}

Status RangeMigrator::Commit(const RangeMigration& m) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    int32_t version = 0;
    Result<ClusterConfig> c = store_->ReadConfig(&version);
    NOVA_RETURN_NOT_OK(c.status());
    const coordinator::RangeAssignment* r = c->Range(m.range);
    if (r != nullptr && r->ltc == options_.ltc_id && r->owner_epoch == m.from_epoch + 1 &&
        c->MigrationOf(m.range) == nullptr) {
      return Status::OK();  // an earlier attempt did it (its answer was lost)
    }
    auto incarnation = c->ltc_incarnations.find(options_.ltc_id);
    if (!options_.incarnation.empty() && incarnation != c->ltc_incarnations.end() &&
        incarnation->second != options_.incarnation) {
      return Status::Aborted("the configuration names another incarnation of this LTC");
    }
    if (SameEntry(c.value(), m) == nullptr || r == nullptr || r->ltc != m.from ||
        r->owner_epoch != m.from_epoch || c->ltcs.count(options_.ltc_id) == 0) {
      return Status::Aborted("the configuration no longer has this migration (it was "
                             "dropped, or the range moved meanwhile)");
    }
    ClusterConfig next = c.value();
    next.Range(m.range)->SetOwner(options_.ltc_id);
    std::erase_if(next.migrations, [&](const RangeMigration& e) { return e.range == m.range; });
    next.epoch++;
    Status s = store_->UpdateConfig(next, version);
    // Aborted: changed meanwhile; any other error may still have been applied: look again.
    if (!s.ok()) {
      LOG_IF(WARNING, s.code() != Status::Code::kAborted)
          << Describe(m) << ": committing: " << s.ToString() << "; checking the configuration";
      continue;
    }
    return s;
  }
  return Status::Unavailable("the configuration kept changing, or ZooKeeper is unreachable");
}

void RangeMigrator::DropEntry(const RangeMigration& m) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    int32_t version = 0;
    Result<ClusterConfig> c = store_->ReadConfig(&version);
    if (!c.ok() || SameEntry(c.value(), m) == nullptr) return;
    ClusterConfig next = c.value();
    std::erase_if(next.migrations, [&](const RangeMigration& e) { return e.range == m.range; });
    next.epoch++;
    Status s = store_->UpdateConfig(next, version);
    if (s.code() != Status::Code::kAborted) return;
  }
}

void RangeMigrator::RunMigration(const RangeMigration& m) {
  const MonoTime start = MonoNow();
  const MigrationKey k{m.range, m.from_epoch};
  rpc::PeerId peer = transport::kInvalidPeer;
  auto state = std::make_shared<MigratedState>();
  std::map<uint64_t, std::shared_ptr<MemTable>> copied;
  uint64_t precopy_bytes = 0, handoff_bytes = 0, precopy_ms = 0, handoff_ms = 0;
  bool unlogged = true;
  // Gives the migration up: the source serves on (it resolves the migration itself if
  // this never reaches it).
  auto abandon = [&](const Status& why) {
    LOG(WARNING) << Describe(m) << " given up: " << why.ToString();
    if (peer != transport::kInvalidPeer) {
      (void)endpoint_->CallSync(peer, kMigrateEnd,
                                EncodeEndRequest(k, MigrationOutcome::kAbandoned),
                                options_.call_timeout);
    }
    DropEntry(m);
  };
  Status s = [&]() -> Status {
    auto members = store_->ListMembers(MemberKind::kLtc);
    NOVA_RETURN_NOT_OK(members.status());
    auto source = members->find(m.from);
    if (source == members->end()) return Status::Unavailable("LTC " + m.from + " is not live");
    auto xchg = source->second.addresses.find("xchg");
    if (xchg == source->second.addresses.end()) {
      return Status::NotSupported("LTC " + m.from + " publishes no exchange address");
    }
    Result<rpc::PeerId> connected = transport_->Connect(xchg->second);
    NOVA_RETURN_NOT_OK(connected.status());
    peer = connected.value();
    Result<std::string> begin = endpoint_->CallSync(peer, kMigrateBegin, EncodeBeginRequest(k),
                                                    options_.call_timeout);
    NOVA_RETURN_NOT_OK(begin.status());
    NOVA_RETURN_NOT_OK(MAYBE_FAULT("ltc.migrate.after_begin"));
    std::vector<uint64_t> ids;
    bool logged = false;
    NOVA_RETURN_NOT_OK(DecodeBeginResponse(begin.value(), &ids, &logged));
    unlogged = !logged;
    for (uint64_t id : ids) {
      NOVA_RETURN_NOT_OK(CopyMemtable(peer, k, id, &copied[id], &precopy_bytes));
    }
    precopy_ms = Millis(start);
    NOVA_RETURN_NOT_OK(MAYBE_FAULT("ltc.migrate.after_precopy"));
    return Status::OK();
  }();
  if (!s.ok()) {
    abandon(s);
    MutexLock l(&mu_);
    incoming_.erase(m.range);
    return;
  }

  // The hand-off: the range is blocked from here until the new owner serves it.
  const MonoTime handoff_start = MonoNow();
  s = [&]() -> Status {
    Result<std::string> resp = endpoint_->CallSync(
        peer, kMigrateHandoff, EncodeHandoffRequest(k), options_.call_timeout);
    NOVA_RETURN_NOT_OK(resp.status());
    std::string meta;
    NOVA_RETURN_NOT_OK(DecodeHandoffResponse(resp.value(), &meta));
    std::vector<uint64_t> ids;
    NOVA_RETURN_NOT_OK(DecodeMigratedMeta(meta, state.get(), &ids));
    NOVA_RETURN_NOT_OK(MAYBE_FAULT("ltc.migrate.after_handoff"));
    for (uint64_t id : ids) {
      if (copied.count(id) == 0) {
        NOVA_RETURN_NOT_OK(CopyMemtable(peer, k, id, &copied[id], &handoff_bytes));
      }
    }
    // Memtables copied earlier but gone from the source meanwhile were flushed or merged:
    // the MANIFEST or another memtable has them.
    for (uint64_t id : ids) state->memtables.push_back(MigratedMemtable{copied[id]});
    state->complete = true;
    return Status::OK();
  }();
  handoff_ms = Millis(handoff_start);
  if (!s.ok()) {
    if (unlogged || stopping()) {
      abandon(s.Prepend(stopping() ? "this LTC is stopping"
                                   : "the hand-off failed and without logs nothing else has the "
                                     "source's memtables"));
      MutexLock l(&mu_);
      incoming_.erase(m.range);
      return;
    }
    // Logged: take the range over with the pre-copied memtables (each complete); the
    // other memtables' logs are replayed.
    LOG(WARNING) << Describe(m) << ": hand-off failed (" << s.ToString()
                 << "); taking the range over with the " << copied.size()
                 << " pre-copied memtables and the logs";
    *state = MigratedState();
    for (auto& [id, mem] : copied) {
      if (mem != nullptr) state->memtables.push_back(MigratedMemtable{mem});
    }
    state->complete = false;
  } else {
    (void)endpoint_->CallSync(peer, kMigrateEnd, EncodeEndRequest(k, MigrationOutcome::kCopied),
                              options_.call_timeout);
  }

  {
    MutexLock l(&mu_);
    staged_[MigrationKey{m.range, m.from_epoch + 1}] = Staged{state, MonoNow(), handoff_start};
  }
  s = MAYBE_FAULT("ltc.migrate.before_commit");
  // A stopping LTC takes no range over (the source serves on; with the staged state gone
  // when this process ends, a commit now would only leave the range to failover).
  if (s.ok() && stopping()) s = Status::Aborted("this LTC is stopping");
  const MonoTime commit_start = MonoNow();
  if (s.ok()) s = Commit(m);
  if (!s.ok()) {
    {
      MutexLock l(&mu_);
      staged_.erase(MigrationKey{m.range, m.from_epoch + 1});
    }
    abandon(s.Prepend("committing"));
    MutexLock l(&mu_);
    incoming_.erase(m.range);
    return;
  }
  MAYBE_FAULT_VOID("ltc.migrate.after_commit");
  LOG(INFO) << Describe(m) << " committed (owner epoch " << m.from_epoch + 1 << "): pre-copy "
            << precopy_bytes << " bytes in " << precopy_ms << " ms, hand-off "
            << handoff_bytes << " bytes in " << handoff_ms << " ms, commit "
            << Millis(commit_start) << " ms" << (state->complete ? "" : " (logs replayed)");
  MutexLock l(&mu_);
  incoming_.erase(m.range);
}

}  // namespace nova::ltc
