#include "ltc/server/range_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include <glog/logging.h>
#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "ltc/engine/manifest.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/engine/engine_metrics.h"
#include "ltc/engine/logc_memtable_log.h"
#include "ltc/engine/range_engine.h"
#include "stoc/client/stoc_client.h"
#include "stoc/client/stoc_table_store.h"

namespace nova::ltc {
namespace {

Status FromLevelDb(const leveldb::Status& s) {
  if (s.ok()) return Status::OK();
  if (s.IsNotFound()) return Status::NotFound("key not found");
  if (s.IsCorruption()) return Status::Corruption(s.ToString());
  if (s.IsInvalidArgument()) return Status::InvalidArgument(s.ToString());
  return Status::IOError(s.ToString());
}

class LevelDbBackend final : public RangeBackend {
 public:
  // LevelDB's levels (its config::kNumLevels, which its public headers do not export).
  static constexpr int kLevelDbLevels = 7;

  // `cache` and `filter` (either may be null) are the ones `db` was opened with.
  LevelDbBackend(std::shared_ptr<leveldb::Cache> cache,
                 std::unique_ptr<const leveldb::FilterPolicy> filter,
                 std::unique_ptr<leveldb::DB> db)
      : cache_(std::move(cache)), filter_(std::move(filter)), db_(std::move(db)) {}

  Status Put(const leveldb::Slice& key, const leveldb::Slice& value) override {
    return FromLevelDb(db_->Put(leveldb::WriteOptions(), key, value));
  }
  Status Delete(const leveldb::Slice& key) override {
    return FromLevelDb(db_->Delete(leveldb::WriteOptions(), key));
  }
  Status Write(const std::vector<BatchEntry>& entries) override {
    leveldb::WriteBatch batch;
    for (const BatchEntry& e : entries) {
      if (e.op == BatchOp::kPut) {
        batch.Put(e.key, e.value);
      } else {
        batch.Delete(e.key);
      }
    }
    return FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch));
  }
  Status Get(const leveldb::Slice& key, std::string* value, Snapshot snapshot) override {
    return FromLevelDb(db_->Get(Read(snapshot), key, value));
  }
  leveldb::Iterator* NewIterator(Snapshot snapshot) override {
    return db_->NewIterator(Read(snapshot));
  }
  Snapshot GetSnapshot() override { return db_->GetSnapshot(); }
  void ReleaseSnapshot(Snapshot snapshot) override {
    db_->ReleaseSnapshot(static_cast<const leveldb::Snapshot*>(snapshot));
  }
  std::string StatsText() override {
    std::string s;
    if (!db_->GetProperty("leveldb.stats", &s)) s = "(no stats)";
    return "engine=leveldb\n" + s;
  }
  Result<uint64_t> ApproximateSize(const KeyRange& span) override {
    std::string limit;
    if (span.end) {
      limit = *span.end;
    } else {
      // LevelDB's ranges are bounded: just past the last key.
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
      it->SeekToLast();
      if (!it->Valid()) return uint64_t{0};
      limit = it->key().ToString() + '\0';
    }
    const leveldb::Range r(span.start, limit);
    uint64_t size = 0;
    db_->GetApproximateSizes(&r, 1, &size);
    return size;
  }
  Status CompactRange(const KeyRange& span, const std::atomic<bool>*) override {
    // (LevelDB compacts [begin, end] inclusively: the key equal to the span's end, outside
    // the span, may be compacted too; harmless.)
    const leveldb::Slice begin(span.start);
    const std::string end_key = span.end.value_or("");  // outlives the Slice over it
    const leveldb::Slice end(end_key);
    db_->CompactRange(&begin, span.end ? &end : nullptr);
    return Status::OK();
  }
  void GetFigures(bool, RangeFigures* out) override {
    // LevelDB's own properties; it lists no tables here (its table list is text).
    std::string v;
    if (db_->GetProperty("leveldb.approximate-memory-usage", &v)) {
      out->memtable_bytes = std::strtoull(v.c_str(), nullptr, 10);
    }
    out->levels.assign(kLevelDbLevels, LevelFigures{});
    for (int l = 0; l < kLevelDbLevels; ++l) {
      if (db_->GetProperty("leveldb.num-files-at-level" + std::to_string(l), &v)) {
        out->levels[l].files = std::strtoull(v.c_str(), nullptr, 10);
      }
    }
    // Its stats table: "<level> <files> <size MB> <time s> <read MB> <write MB>" rows.
    if (!db_->GetProperty("leveldb.stats", &v)) return;
    std::istringstream in(v);
    std::string line;
    while (std::getline(in, line)) {
      int level = 0;
      unsigned long long files = 0;
      double mb = 0, secs = 0, read_mb = 0, write_mb = 0;
      if (std::sscanf(line.c_str(), "%d %llu %lf %lf %lf %lf", &level, &files, &mb, &secs,
                      &read_mb, &write_mb) != 6 ||
          level < 0 || level >= kLevelDbLevels) {
        continue;
      }
      constexpr double kMiB = 1048576.0;
      LevelFigures& f = out->levels[level];
      f.bytes = static_cast<uint64_t>(mb * kMiB);
      f.compaction_micros = static_cast<uint64_t>(secs * 1e6);
      f.read_bytes = static_cast<uint64_t>(read_mb * kMiB);
      f.write_bytes = static_cast<uint64_t>(write_mb * kMiB);
    }
  }

 private:
  static leveldb::ReadOptions Read(Snapshot snapshot) {
    leveldb::ReadOptions ro;
    ro.snapshot = static_cast<const leveldb::Snapshot*>(snapshot);
    return ro;
  }
  // Declared before db_, so destroyed after it: the database uses them until it closes.
  std::shared_ptr<leveldb::Cache> cache_;  // maybe shared with other ranges
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;
};

// Carries a range's "fenced by a newer owner" from the engine (EngineOptions::on_fenced) to
// the listener the range table sets after the open, whichever comes first.
class FenceNotice {
 public:
  void Fire() EXCLUDES(mu_) {
    std::function<void()> listener;
    {
      MutexLock l(&mu_);
      if (fired_) return;
      fired_ = true;
      listener = listener_;
    }
    if (listener) listener();
  }
  void SetListener(std::function<void()> listener) EXCLUDES(mu_) {
    bool fired;
    {
      MutexLock l(&mu_);
      listener_ = listener;
      fired = fired_;
    }
    if (fired && listener) listener();
  }
  bool fired() const EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return fired_;
  }

 private:
  mutable Mutex mu_;
  bool fired_ GUARDED_BY(mu_) = false;
  std::function<void()> listener_ GUARDED_BY(mu_);
};

// One range of the Nova engine: its table store, engine and metrics. Members are destroyed
// in reverse order: metrics before the engine, the engine before its store.
class NovaBackend final : public RangeBackend {
 public:
  NovaBackend() = default;
  ~NovaBackend() override {
    if (unregister_) unregister_();  // NovaBackends stops applying StoC changes to it
    { MutexLock wait_for_evacuation(&evacuation_mu_); }  // a running one finishes first
    metrics_.reset();
    if (engine_ != nullptr && fence_->fired()) {
      // A newer owner has the range: nothing more is written (its memtables are in the
      // logs the new owner recovered, or, with log_mode=none, lost: docs/coordinator.md).
      LOG(WARNING) << "closing a fenced range without flushing it";
    } else if (engine_ != nullptr && engine_->handed_off() && log_ != nullptr) {
      // Live migration: the destination took the memtables, or recovers them from the logs
      // if the migration did not complete; a flush here would only race its fence.
      LOG(INFO) << "closing a range handed off to another LTC without flushing it";
    } else if (engine_ != nullptr) {
      // Handed off without logs: the migration may still fail (this LTC is stopping), and
      // then nothing else has the memtables. A flush is safe either way: the destination
      // fences the StoCs before it reads the MANIFEST, so it sees the flush (and drops its
      // copies of the flushed memtables) or the flush is refused.
      if (engine_->handed_off()) engine_->EndMigrationOut();
      // Flush the memtables: without logs they live only here, and with logs the range's
      // next owner (or this LTC after a restart) then has nothing to replay, which the
      // MANIFEST records, so that it needs no LogC to vouch for its logs either.
      Status s = engine_->CloseCleanly();
      if (!s.ok()) {
        LOG(WARNING) << "closing a range: flush failed: " << s.ToString();
        if (failed_closes_ != nullptr) failed_closes_->fetch_add(1);
      }
    }
    engine_.reset();
    log_.reset();
    store_.reset();
  }

  Status Put(const leveldb::Slice& key, const leveldb::Slice& value) override {
    return engine_->Put(key, value);
  }
  Status Delete(const leveldb::Slice& key) override { return engine_->Delete(key); }
  Status Write(const std::vector<BatchEntry>& entries) override {
    std::vector<WriteOp> ops;
    ops.reserve(entries.size());
    for (const BatchEntry& e : entries) {
      ops.push_back(e.op == BatchOp::kPut ? WriteOp{lsm::kTypeValue, e.key, e.value}
                                          : WriteOp{lsm::kTypeDeletion, e.key, {}});
    }
    return engine_->Write(ops);
  }
  Status Get(const leveldb::Slice& key, std::string* value, Snapshot snapshot) override {
    return engine_->Get(key, value, static_cast<const EngineSnapshot*>(snapshot));
  }
  leveldb::Iterator* NewIterator(Snapshot snapshot) override {
    return engine_->NewIterator(static_cast<const EngineSnapshot*>(snapshot));
  }
  Snapshot GetSnapshot() override { return engine_->GetSnapshot(); }
  void ReleaseSnapshot(Snapshot snapshot) override {
    engine_->ReleaseSnapshot(static_cast<const EngineSnapshot*>(snapshot));
  }
  void SetFenceListener(std::function<void()> listener) override {
    fence_->SetListener(std::move(listener));
  }
  Status BeginMigrationOut() override { return engine_->BeginMigrationOut(); }
  Status ExportImmutables(std::vector<MigratedMemtable>* out) override {
    return engine_->ExportImmutables(out);
  }
  Status Handoff(MigratedState* out) override { return engine_->Handoff(out); }
  void EndMigrationOut() override { engine_->EndMigrationOut(); }
  bool MemtablesLogged() const override { return log_ != nullptr; }
  Result<uint64_t> ApproximateSize(const KeyRange& span) override {
    return engine_->ApproximateSize(span);
  }
  Status CompactRange(const KeyRange& span, const std::atomic<bool>* cancel) override {
    return engine_->CompactRange(span, cancel);
  }
  void GetFigures(bool with_tables, RangeFigures* out) override {
    FillEngineFigures(engine_.get(), with_tables, out);
  }
  std::string StatsText() override { return EngineStatsText(engine_.get()); }

  // Shared with the engine's on_fenced callback.
  std::shared_ptr<FenceNotice> fence_ = std::make_shared<FenceNotice>();
  std::function<void()> unregister_;  // set by NovaBackends::Impl::Open
  // NovaBackends::Impl's count of failed closing flushes (set by Open; it outlives this).
  std::atomic<uint64_t>* failed_closes_ = nullptr;
  // Held while NovaBackends moves this range's MANIFEST (EvacuateManifest), which it starts
  // only while the backend is registered: the destructor waits for it after unregistering.
  Mutex evacuation_mu_;
  std::unique_ptr<stoc::StocTableStore> store_;
  std::unique_ptr<LogcMemtableLog> log_;  // null with log mode none
  std::unique_ptr<RangeEngine> engine_;
  std::unique_ptr<EngineMetrics> metrics_;
};

// Each level's tables and what writing it cost, from the engine's stats.
std::vector<LevelFigures> LevelFiguresOf(const EngineStats& st) {
  std::vector<LevelFigures> levels(lsm::kNumLevels);
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    levels[l] = LevelFigures{st.level_tables[l], st.level_bytes[l],
                             st.level_compaction_micros[l], st.level_read_bytes[l],
                             st.level_write_bytes[l]};
  }
  return levels;
}

}  // namespace

void FillEngineFigures(RangeEngine* engine, bool with_tables, RangeFigures* out) {
  const EngineStats st = engine->GetStats();
  out->memtable_bytes = st.memtable_bytes;
  out->memtables = static_cast<uint32_t>(st.memtables);
  out->block_cache_bytes = st.block_cache_bytes;
  out->levels = LevelFiguresOf(st);
  if (!with_tables) return;
  const EngineShape shape = engine->GetShape();
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    for (const lsm::TableMeta& m : shape.levels[l]) {
      out->tables.push_back(TableFigures{static_cast<uint32_t>(l), m.number, m.layout.file_size,
                                         m.smallest, m.largest});
    }
  }
}

std::string EngineStatsText(RangeEngine* engine) {
  const EngineStats st = engine->GetStats();
  std::ostringstream out;
  out << "engine=nova puts=" << st.puts << " deletes=" << st.deletes << " gets=" << st.gets
      << " flushes=" << st.flushes << " compactions=" << st.compactions
      << " table_moves=" << st.table_moves
      << " stalls=" << st.stalls << " stall_micros=" << st.stall_micros
      << " dranges=" << st.dranges << " drange_imbalance=" << st.drange_imbalance
      << " last_sequence=" << st.last_sequence << "\n  levels:";
  for (int l = 0; l < lsm::kNumLevels; ++l) out << " L" << l << "=" << st.level_tables[l];
  out << "\n" << LevelStatsTable(LevelFiguresOf(st));
  return out.str();
}

BackendFactory LevelDbBackendFactory(LevelDbBackendOptions options) {
  return [options](const RangeInfo& range,
                   const LtcAssignment&) -> Result<std::unique_ptr<RangeBackend>> {
    const std::string path = options.dir + "/range-" + std::to_string(range.id);
    std::error_code ec;
    std::filesystem::create_directories(options.dir, ec);
    if (ec) return Status::IOError("cannot create " + options.dir + ": " + ec.message());
    std::shared_ptr<leveldb::Cache> cache =
        options.shared_block_cache != nullptr
            ? options.shared_block_cache
            : std::shared_ptr<leveldb::Cache>(leveldb::NewLRUCache(options.block_cache_bytes));
    std::unique_ptr<const leveldb::FilterPolicy> filter;
    if (options.bloom_bits_per_key > 0) {
      filter.reset(leveldb::NewBloomFilterPolicy(options.bloom_bits_per_key));
    }
    leveldb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = options.write_buffer_bytes;
    o.block_cache = cache.get();
    o.filter_policy = filter.get();
    o.compression =
        options.snappy_compression ? leveldb::kSnappyCompression : leveldb::kNoCompression;
    leveldb::DB* db = nullptr;
    Status s = FromLevelDb(leveldb::DB::Open(o, path, &db));
    if (!s.ok()) return s.Prepend("opening LevelDB at " + path);
    std::unique_ptr<RangeBackend> b = std::make_unique<LevelDbBackend>(
        std::move(cache), std::move(filter), std::unique_ptr<leveldb::DB>(db));
    return b;
  };
}

// The StoCs whose copies a range must move: those that left the configuration (not in
// `ids`) and those being drained. Both ascending.
bool MustMove(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& draining,
              uint32_t stoc) {
  return !std::binary_search(ids.begin(), ids.end(), stoc) ||
         std::binary_search(draining.begin(), draining.end(), stoc);
}

// How a range's tables are kept (NovaBackendOptions: the flags, overridden by the
// configuration's settings, reduced to what `usable` StoCs allow).
struct Availability {
  lsm::TableAvailability mode = lsm::TableAvailability::kReplicas;
  int replicas = 1;
  int parity = 1;
  int manifest_replicas = 1;
};

// Reads the cluster setting `key`, if present, into *out: a whole number from lo to hi
// (`hi_name`, if not null, names where hi comes from in the error). InvalidArgument else.
Status ParseSmallInt(const std::map<std::string, std::string>& settings, const char* key,
                     int lo, int hi, int* out, const char* hi_name = nullptr) {
  auto it = settings.find(key);
  if (it == settings.end()) return Status::OK();
  char* end = nullptr;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end != '\0' || v < lo || v > hi) {
    const std::string upper = hi_name == nullptr
                                  ? std::to_string(hi)
                                  : std::string(hi_name) + " (" + std::to_string(hi) + ")";
    return Status::InvalidArgument(std::string("the cluster's ") + key + " setting '" +
                                   it->second + "' is not a number from " + std::to_string(lo) +
                                   " to " + upper);
  }
  *out = static_cast<int>(v);
  return Status::OK();
}

Result<Availability> ResolveAvailability(const NovaBackendOptions& o, const LtcAssignment& a,
                                         size_t usable, uint32_t range) {
  Availability v;
  v.mode = o.availability;
  v.replicas = o.fragment_replicas;
  v.parity = o.parity_fragments;
  v.manifest_replicas = o.manifest_replicas;
  if (auto it = a.settings.find("table_availability"); it != a.settings.end()) {
    NOVA_RETURN_NOT_OK_PREPEND(lsm::ParseTableAvailability(it->second, &v.mode),
                               "the cluster's table_availability setting");
  }
  NOVA_RETURN_NOT_OK(ParseSmallInt(a.settings, "fragment_replicas", 1, 16, &v.replicas));
  NOVA_RETURN_NOT_OK(
      ParseSmallInt(a.settings, "parity_fragments", 1, stoc::kMaxParityFragments, &v.parity));
  const int n = static_cast<int>(std::max<size_t>(usable, 1));
  const int rho = static_cast<int>(std::max<uint32_t>(o.engine.scatter_width, 1));
  const char* before = lsm::TableAvailabilityName(v.mode);
  std::string why;
  if (v.mode == lsm::TableAvailability::kParity && n < rho + 1 + v.parity) {
    why = "a parity stripe needs " + std::to_string(rho + 1 + v.parity) + " StoCs";
  } else if (v.mode == lsm::TableAvailability::kHybrid && n < std::max(rho, 1) + v.parity) {
    why = "a hybrid stripe needs " + std::to_string(rho + v.parity) + " StoCs";
  }
  if (!why.empty()) {
    v.replicas = std::min(v.parity + 1, n);
    v.mode = lsm::TableAvailability::kReplicas;
  }
  if (v.mode == lsm::TableAvailability::kNone) v.replicas = 1;
  if (v.mode == lsm::TableAvailability::kReplicas && v.replicas > n) {
    why = "only " + std::to_string(n) + " StoCs take data";
    v.replicas = n;
  }
  v.manifest_replicas = std::min(v.manifest_replicas, n);
  if (!why.empty()) {
    LOG(WARNING) << "range " << range << ": table availability " << before << " falls back to "
                 << v.replicas << " cop" << (v.replicas == 1 ? "y" : "ies")
                 << " of each fragment: " << why;
  }
  return v;
}

struct NovaBackends::Impl {
  Impl(NovaBackendOptions o, MetricsRegistry* m) : options(std::move(o)), metrics(m) {}
  const NovaBackendOptions options;
  MetricsRegistry* const metrics;  // must outlive this
  // Declared in construction order; destroyed in reverse (the client before the endpoint).
  rpc::RpcEndpoint endpoint;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<stoc::StocClient> client;
  std::unique_ptr<logc::LogClient> log_client;
  OffloadPolicy policy = OffloadPolicy::kNone;

  Mutex mu;
  bool log_configured GUARDED_BY(mu) = false;  // the mode is fixed
  // StoCs added to the client, and the offloader (made when StoCs are first known; it
  // keeps that StoC set).
  std::map<uint32_t, std::string> stocs GUARDED_BY(mu);
  std::unique_ptr<StocCompactionOffloader> offloader GUARDED_BY(mu);
  // The cluster's StoCs as the newest assignment has them (ApplyStocs, or the first Open):
  // ids ascending, and of them the draining ones.
  uint64_t stocs_epoch GUARDED_BY(mu) = 0;
  uint64_t status_calls GUARDED_BY(mu) = 0;  // GetStocStatus calls (retry cadence)
  std::vector<uint32_t> stoc_ids GUARDED_BY(mu);
  std::vector<uint32_t> draining GUARDED_BY(mu);
  // The open ranges (range -> backend), to apply StoC changes to; how many callers use each
  // outside mu (a closing backend waits for 0); the ranges of the newest assignment.
  std::map<uint32_t, NovaBackend*> open GUARDED_BY(mu);
  std::map<NovaBackend*, int> pins GUARDED_BY(mu);
  CondVar pins_cv;
  std::set<uint32_t> assigned GUARDED_BY(mu);
  // Moves MANIFESTs off StoCs that are draining or gone (StocTableStore::EvacuateManifest).
  ThreadPool evacuate_pool{"ltc-evacuate", 1, 1024};
  // Backends whose closing flush failed (NovaBackend's destructor; failed_closes()).
  std::atomic<uint64_t> failed_closes{0};

  // Gives StoC `id` at `addr` to the client and records it. A StoC that cannot be reached
  // (dead, or removed and stopped but still listed) is recorded all the same: opening a
  // range must not need it (its copies are read from the others, or rebuilt from parity;
  // it is one of the StoCs the fence may miss), and the client connects when it is back
  // (StocClient::AddStoc). REQUIRES: mu held (connecting may take the connect timeout).
  void AddStocLocked(uint32_t id, const std::string& addr) REQUIRES(mu) {
    Status s = client->AddStoc(id, addr);
    LOG_IF(WARNING, !s.ok()) << "connecting to StoC " << id << " at " << addr << ": "
                             << s.ToString() << " (connected again when a request needs it)";
    stocs[id] = addr;
  }
  // Records the StoCs of `a` if it is newer than what is recorded. REQUIRES: mu held.
  void NoteStocsLocked(const LtcAssignment& a) REQUIRES(mu) {
    if (a.epoch < stocs_epoch || (a.epoch == stocs_epoch && !stoc_ids.empty())) return;
    stocs_epoch = a.epoch;
    stoc_ids.clear();
    draining.clear();
    assigned.clear();
    for (const RangeInfo& r : a.ranges) assigned.insert(r.id);
    // Only StoCs the client knows (AddStocLocked: all of them).
    for (const auto& [id, addr] : a.stocs) {
      if (stocs.count(id) != 0) stoc_ids.push_back(id);
    }
    for (uint32_t id : a.draining_stocs) {
      if (a.stocs.count(id) != 0) draining.push_back(id);
    }
  }
  // The usable StoCs (id -> address): recorded, not draining. REQUIRES: mu held.
  std::map<uint32_t, std::string> UsableLocked() const REQUIRES(mu) {
    std::map<uint32_t, std::string> out;
    for (uint32_t id : stoc_ids) {
      auto it = stocs.find(id);
      if (it != stocs.end() && !std::binary_search(draining.begin(), draining.end(), id)) {
        out.insert(*it);
      }
    }
    return out;
  }
  std::map<uint32_t, std::string> CurrentLocked() const REQUIRES(mu) {
    std::map<uint32_t, std::string> out;
    for (uint32_t id : stoc_ids) {
      auto it = stocs.find(id);
      if (it != stocs.end()) out.insert(*it);
    }
    return out;
  }
  // Tells backend `b` the recorded StoCs: placement, and which StoCs its tables must leave
  // (those its tables use that are draining or gone; recomputed by GetStocStatus, as an
  // offloaded compaction may still land on a StoC just removed). REQUIRES: b pinned, mu
  // not held (the engine's lock may wait for StoC I/O).
  void ApplyTo(NovaBackend* b) EXCLUDES(mu) {
    std::vector<uint32_t> ids, dr;
    {
      MutexLock l(&mu);
      ids = stoc_ids;
      dr = draining;
    }
    b->store_->SetStocs(ids, dr);
    std::set<uint32_t> evacuate(dr.begin(), dr.end());
    for (const auto& [stoc, n] : b->engine_->CopiesPerStoc()) {
      if (MustMove(ids, dr, stoc)) evacuate.insert(stoc);
    }
    b->engine_->SetEvacuatedStocs(std::move(evacuate));
  }
  // Pins every open backend (it is not destroyed until unpinned). REQUIRES: mu held.
  std::vector<std::pair<uint32_t, NovaBackend*>> PinAllLocked() REQUIRES(mu) {
    std::vector<std::pair<uint32_t, NovaBackend*>> out(open.begin(), open.end());
    for (const auto& [range, b] : out) pins[b]++;
    return out;
  }
  void Unpin(const std::vector<std::pair<uint32_t, NovaBackend*>>& pinned) EXCLUDES(mu) {
    MutexLock l(&mu);
    for (const auto& [range, b] : pinned) {
      if (--pins[b] == 0) pins.erase(b);
    }
    pins_cv.NotifyAll();
  }
  // Queues a move of range `range`'s MANIFEST off StoCs it must leave (if any).
  void QueueManifestEvacuation(uint32_t range) {
    Status s = evacuate_pool.Submit([this, range] {
      NovaBackend* b = nullptr;
      std::function<bool(uint32_t)> must_move;
      std::unique_ptr<MutexLock> hold;  // b->evacuation_mu_: b is not destroyed meanwhile
      {
        MutexLock l(&mu);
        auto it = open.find(range);
        if (it == open.end()) return;
        b = it->second;
        hold = std::make_unique<MutexLock>(&b->evacuation_mu_);
        must_move = [ids = stoc_ids, dr = draining](uint32_t id) { return MustMove(ids, dr, id); };
      }
      // Not under mu: a StoC that does not answer must not hold up opens and assignments.
      Status e = b->store_->EvacuateManifest(must_move);
      LOG_IF(WARNING, !e.ok() && !e.IsFenced()) << e.ToString() << " (retried later)";
    });
    LOG_IF(WARNING, !s.ok()) << "range " << range << ": MANIFEST evacuation not queued: "
                             << s.ToString();
  }

  Result<std::unique_ptr<RangeBackend>> Open(const RangeInfo& range, const LtcAssignment& a)
      EXCLUDES(mu) {
    if (a.stocs.empty()) {
      return Status::InvalidArgument("--engine=nova needs StoCs (--stoc=id@host:port,...)");
    }
    CompactionOffloader* offloader_ptr = nullptr;
    size_t usable = 0;
    {
      MutexLock l(&mu);
      for (const auto& [id, addr] : a.stocs) {
        if (stocs.count(id) > 0) continue;
        AddStocLocked(id, addr);
      }
      NoteStocsLocked(a);
      usable = UsableLocked().size();
    }
    auto avail = ResolveAvailability(options, a, usable, range.id);
    NOVA_RETURN_NOT_OK_PREPEND(avail.status(), "range " + std::to_string(range.id));
    {
      MutexLock l(&mu);
      if (policy != OffloadPolicy::kNone && offloader == nullptr) {
        StocCompactionOffloaderOptions oo;
        oo.policy = policy;
        oo.stocs = UsableLocked();
        oo.storage_stocs = CurrentLocked();
        oo.fragment_replicas = static_cast<uint32_t>(avail->replicas);
        oo.availability = avail->mode;
        oo.parity_fragments = static_cast<uint32_t>(avail->parity);
        oo.placement = options.placement;
        auto off = std::make_unique<StocCompactionOffloader>(client.get(), oo);
        NOVA_RETURN_NOT_OK(off->Init());
        offloader = std::move(off);
      }
      offloader_ptr = offloader.get();
    }
    // The log mode is cluster-wide: the configuration's log_mode and log_replicas settings
    // (else the LTC's flags) fix it with the first range opened; a later configuration
    // naming another mode is refused, never silently weakened.
    logc::LogMode mode = options.log.mode;
    int replicas = options.log.replicas;
    if (auto it = a.settings.find("log_mode"); it != a.settings.end()) {
      NOVA_RETURN_NOT_OK_PREPEND(logc::ParseLogMode(it->second, &mode),
                                 "the cluster's log_mode setting");
    }
    NOVA_RETURN_NOT_OK(ParseSmallInt(a.settings, "log_replicas", 1, 16, &replicas));
    int min_insync = options.log.min_insync_replicas;
    NOVA_RETURN_NOT_OK(ParseSmallInt(a.settings, "log_min_insync_replicas", 0, replicas,
                                     &min_insync, "log_replicas"));
    if (min_insync > replicas) min_insync = replicas;  // the flag's default with fewer replicas
    {
      MutexLock l(&mu);
      if (!log_configured) {
        NOVA_RETURN_NOT_OK(log_client->Configure(mode, replicas, min_insync));
        log_configured = true;
        LOG(INFO) << "log mode " << logc::LogModeName(mode) << ", " << replicas
                  << " replicas, acknowledged on "
                  << (min_insync == 0 ? replicas : min_insync);
      } else if (mode != log_client->mode()) {
        return Status::InvalidArgument(
            std::string("the cluster's log_mode is ") + logc::LogModeName(mode) +
            " but this LTC runs with " + logc::LogModeName(log_client->mode()) +
            " (fixed when its first range opened): restart it");
      }
    }
    const bool logged = mode != logc::LogMode::kNone;
    if (logged) {
      if (a.logcs.empty()) {
        return Status::InvalidArgument(std::string("log_mode=") + logc::LogModeName(mode) +
                                       " needs LogCs (--logc=id@host:port,... or LogCs "
                                       "registered in the cluster)");
      }
      log_client->SetLogcs(a.logcs);
    }
    auto b = std::make_unique<NovaBackend>();
    b->failed_closes_ = &failed_closes;
    stoc::StocTableStoreOptions so;
    so.range_id = range.id;
    {
      MutexLock l(&mu);
      so.stocs = stoc_ids;
      so.no_new_data = draining;
    }
    so.availability = avail->mode;
    so.fragment_replicas = avail->replicas;
    so.parity_fragments = avail->parity;
    so.manifest_replicas = avail->manifest_replicas;
    if (!options.dir.empty()) {
      so.manifest_pointer_path =
          options.dir + "/manifests/r" + std::to_string(range.id) + ".pointer";
    }
    so.force_recovery = std::find(options.force_recovery_ranges.begin(),
                                  options.force_recovery_ranges.end(),
                                  range.id) != options.force_recovery_ranges.end();
    so.placement = options.placement;
    so.validate_manifest = ValidateManifest;
    const uint64_t owner_epoch = a.OwnerEpochOf(range.id);
    so.owner_epoch = owner_epoch;
    b->store_ = std::make_unique<stoc::StocTableStore>(client.get(), so);
    NOVA_RETURN_NOT_OK_PREPEND(b->store_->Init(), "range " + std::to_string(range.id));
    EngineOptions eo = options.engine;
    eo.range_id = range.id;
    eo.on_fenced = [fence = b->fence_] { fence->Fire(); };
    eo.owner_epoch = owner_epoch;
    eo.compaction_offloader = offloader_ptr;
    if (logged) {
      b->log_ = std::make_unique<LogcMemtableLog>(log_client.get(), range.id, owner_epoch);
      eo.log = b->log_.get();
      eo.recovery_threads = options.recovery_threads;
    }
    if (options.take_migrated) eo.migrated = options.take_migrated(range.id, owner_epoch);
    b->engine_ = std::make_unique<RangeEngine>(eo, b->store_.get());
    NOVA_RETURN_NOT_OK_PREPEND(b->engine_->Open(), "opening range " + std::to_string(range.id));
    if (eo.migrated != nullptr && options.migrated_opened) {
      options.migrated_opened(range.id, owner_epoch);
    }
    b->metrics_ = std::make_unique<EngineMetrics>(metrics, b->engine_.get(), range.id);
    {
      // From now on StoC changes reach it.
      MutexLock l(&mu);
      open[range.id] = b.get();
      b->unregister_ = [this, id = range.id, ptr = b.get()] {
        MutexLock l2(&mu);
        auto it = open.find(id);
        if (it != open.end() && it->second == ptr) open.erase(it);
        pins_cv.Wait(&l2, [&]() REQUIRES(mu) { return pins.count(ptr) == 0; });
      };
    }
    ApplyTo(b.get());  // the newest StoCs apply at once (no one else can close it yet)
    QueueManifestEvacuation(range.id);
    std::unique_ptr<RangeBackend> out = std::move(b);
    return out;
  }
};

NovaBackends::NovaBackends(NovaBackendOptions options, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {}

NovaBackends::~NovaBackends() { Shutdown(); }

Status NovaBackends::Init() {
  NOVA_RETURN_NOT_OK(ParseOffloadPolicy(impl_->options.offload_policy, &impl_->policy));
  auto t = transport::NewTransport(impl_->options.transport, &impl_->endpoint);
  if (!t.ok()) return t.status();
  impl_->transport = std::move(t.value());
  impl_->endpoint.Attach(impl_->transport.get());
  stoc::StocClientOptions stoc_options;
  stoc_options.timeout = impl_->options.stoc_timeout;
  // Over tcp a block in the response is one round trip; RDMA WRITEs it without copies.
  stoc_options.inline_reads = impl_->options.transport.backend != transport::Backend::kVerbs;
  stoc_options.local_reads = impl_->options.local_reads;
  stoc_options.map_local_files = impl_->options.map_local_files;
  stoc_options.metrics = impl_->metrics;  // stoc_client_reads_total, stoc_client_read_us_total
  impl_->client = std::make_unique<stoc::StocClient>(&impl_->endpoint, stoc_options);
  // Before the transport starts: it registers for the LogCs' persist acknowledgments. (Made
  // whatever the mode: the configuration may ask for logs.)
  impl_->log_client =
      std::make_unique<logc::LogClient>(impl_->options.log, &impl_->endpoint, impl_->metrics);
  if (impl_->options.migration_service != nullptr) {
    impl_->endpoint.RegisterService(wire::kLtcTypes, impl_->options.migration_service,
                                    impl_->options.migration_pool);
  }
  NOVA_RETURN_NOT_OK(impl_->transport->Init());
  return impl_->transport->Start();
}

BackendFactory NovaBackends::factory() {
  Impl* impl = impl_.get();
  return [impl](const RangeInfo& range, const LtcAssignment& a) { return impl->Open(range, a); };
}

void NovaBackends::ApplyStocs(const LtcAssignment& a) {
  Impl* impl = impl_.get();
  std::vector<std::pair<uint32_t, NovaBackend*>> pinned;
  bool joined = false;
  {
    MutexLock l(&impl->mu);
    if (a.epoch <= impl->stocs_epoch || impl->client == nullptr) return;
    for (const auto& [id, addr] : a.stocs) {
      if (impl->stocs.count(id) > 0) continue;
      impl->AddStocLocked(id, addr);
    }
    const std::vector<uint32_t> old_ids = impl->stoc_ids, old_draining = impl->draining;
    impl->NoteStocsLocked(a);
    if (impl->stoc_ids == old_ids && impl->draining == old_draining) return;
    LOG(INFO) << "configuration epoch " << a.epoch << ": " << impl->stoc_ids.size() << " StoCs, "
              << impl->draining.size() << " of them draining";
    if (impl->offloader != nullptr) {
      impl->offloader->SetStocs(impl->UsableLocked(), impl->CurrentLocked(), impl->draining);
    }
    // A StoC that (re)joined may hold copies its ranges no longer use: sweep soon.
    for (uint32_t id : impl->stoc_ids) {
      joined = joined || !std::binary_search(old_ids.begin(), old_ids.end(), id);
    }
    pinned = impl->PinAllLocked();
  }
  // The engines' locks may wait for StoC I/O: not under mu.
  for (const auto& [range, b] : pinned) {
    impl->ApplyTo(b);
    if (joined) b->engine_->RequestSweep();
    impl->QueueManifestEvacuation(range);
  }
  impl->Unpin(pinned);
}

NovaBackends::StocStatus NovaBackends::GetStocStatus() {
  Impl* impl = impl_.get();
  StocStatus st;
  std::vector<std::pair<uint32_t, NovaBackend*>> pinned;
  std::vector<uint32_t> ids, draining;
  bool all_open = true;
  uint64_t calls = 0;
  {
    MutexLock l(&impl->mu);
    st.config_epoch = impl->stocs_epoch;
    ids = impl->stoc_ids;
    draining = impl->draining;
    for (uint32_t range : impl->assigned) all_open = all_open && impl->open.count(range) != 0;
    calls = impl->status_calls++;
    pinned = impl->PinAllLocked();
  }
  const auto must_move = [&ids, &draining](uint32_t id) { return MustMove(ids, draining, id); };
  bool writes_from_before = false;
  for (uint32_t id : draining) st.copies_to_move[id] = 0;
  for (const auto& [range, b] : pinned) {
    impl->ApplyTo(b);
    const RelocationProgress p = b->engine_->GetRelocationProgress();
    st.tables_relocated += p.tables_relocated;
    st.bytes_relocated += p.bytes_relocated;
    st.relocation_failures += p.failures;
    writes_from_before = writes_from_before || p.writes_from_before;
    std::map<uint32_t, uint64_t> copies = b->engine_->CopiesPerStoc();
    bool evacuating = !draining.empty();
    for (uint32_t stoc : b->store_->ManifestStocs()) copies[stoc]++;  // a MANIFEST replica
    for (const auto& [stoc, n] : copies) evacuating = evacuating || must_move(stoc);
    // Moving the MANIFEST (queued with every StoC change) is retried every few seconds
    // while the range has anything to move; it does nothing when the MANIFEST is elsewhere.
    if (evacuating && calls % 5 == 0) impl->QueueManifestEvacuation(range);
    for (const auto& [stoc, n] : copies) {
      if (!must_move(stoc)) continue;
      st.copies_to_move[stoc] += n;
      // At risk: copies on a StoC that left the configuration (a draining one still serves).
      if (!std::binary_search(draining.begin(), draining.end(), stoc)) st.copies_at_risk += n;
    }
  }
  impl->Unpin(pinned);
  // Not yet a statement about this epoch: a range assigned here is not open (its copies
  // are not counted), or a write that may still place a copy on a draining StoC runs.
  if (!all_open || writes_from_before) {
    st.config_epoch = st.config_epoch == 0 ? 0 : st.config_epoch - 1;
  }
  return st;
}

uint64_t NovaBackends::failed_closes() const { return impl_->failed_closes.load(); }

rpc::RpcEndpoint* NovaBackends::endpoint() { return &impl_->endpoint; }

transport::Transport* NovaBackends::transport() { return impl_->transport.get(); }

void NovaBackends::Shutdown() {
  if (impl_->transport) impl_->transport->Shutdown();
}

}  // namespace nova::ltc
