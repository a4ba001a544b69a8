// RangeBackend: the storage engine behind one range the LTC server hosts, so the server
// is the same for --engine=nova (RangeEngine over StoCs) and --engine=leveldb (a stock
// LevelDB instance on local disk, the baseline of the paper's comparisons).
//
// BackendFactory opens a backend for a range; the daemon picks the factory from --engine.
// NovaBackendFactory owns what every Nova range shares: the exchange transport, its RPC
// endpoint, the StoC client and the compaction offloader.
//
// Thread safety: every RangeBackend method is thread-safe. Factories are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <leveldb/cache.h>
#include <leveldb/iterator.h>
#include <leveldb/slice.h>

#include "common/metrics.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "common/transport/transport.h"
#include "logc/client/log_client.h"
#include "ltc/engine/engine_options.h"
#include "ltc/engine/range_migration.h"
#include "ltc/protocol/client_protocol.h"
#include "ltc/server/ltc_assignment.h"
#include "stoc/client/placement.h"

namespace nova::ltc {

class RangeBackend {
 public:
  // An opaque snapshot handle; null means "latest".
  using Snapshot = const void*;

  // Closing a backend makes its data durable where it can (the Nova engine flushes its
  // memtables to StoCs, so a clean restart replays no log) and waits for background work.
  virtual ~RangeBackend() = default;
  virtual Status Put(const leveldb::Slice& key, const leveldb::Slice& value) = 0;
  virtual Status Delete(const leveldb::Slice& key) = 0;
  // Applies the entries atomically, in order: readers see all of them or none.
  virtual Status Write(const std::vector<BatchEntry>& entries) = 0;
  // NotFound if the key has no value at `snapshot`.
  virtual Status Get(const leveldb::Slice& key, std::string* value, Snapshot snapshot) = 0;
  // The user view at `snapshot`; caller deletes it before releasing the snapshot or
  // destroying the backend.
  virtual leveldb::Iterator* NewIterator(Snapshot snapshot) = 0;
  // Never null. Release exactly once.
  virtual Snapshot GetSnapshot() = 0;
  virtual void ReleaseSnapshot(Snapshot snapshot) = 0;
  // One or more lines for `nova_cli stats`.
  virtual std::string StatsText() = 0;
  // Owner fencing: `listener` runs once, on any thread, when a StoC or LogC tells this
  // backend that a newer owner has the range (at once if that happened already). It must
  // not block or call into the backend. Backends that are never fenced ignore it.
  virtual void SetFenceListener(std::function<void()> listener) { (void)listener; }

  // Live migration, source side (ltc/engine/range_migration.h, range_migrator.h): the
  // engine's BeginMigrationOut, ExportImmutables, Handoff and EndMigrationOut. Backends
  // that cannot move their memtables (LevelDB) answer NotSupported.
  virtual Status BeginMigrationOut() { return NotMovable(); }
  virtual Status ExportImmutables(std::vector<MigratedMemtable>* out) {
    (void)out;
    return NotMovable();
  }
  virtual Status Handoff(MigratedState* out) {
    (void)out;
    return NotMovable();
  }
  virtual void EndMigrationOut() {}
  // Whether the range's writes are logged (at LogCs) before they are acknowledged: if not, a
  // migration that cannot finish its hand-off must not fall back to the logs.
  virtual bool MemtablesLogged() const { return false; }

  // Administration for the leveldb::DB adapter (issue 19; docs/protocol.md). `span` lies
  // within the range. Backends without them answer NotSupported.
  // Approximately the bytes the span's keys take, in tables and memtables.
  virtual Result<uint64_t> ApproximateSize(const KeyRange& span) {
    (void)span;
    return Status::NotSupported("this backend has no approximate sizes");
  }
  // Flushes the memtables, then compacts the span's tables down until they lie in one
  // level; returns when done, or with Aborted once `cancel` (not null) becomes true.
  virtual Status CompactRange(const KeyRange& span, const std::atomic<bool>* cancel) {
    (void)span;
    (void)cancel;
    return Status::NotSupported("this backend cannot compact a key range");
  }
  // Fills the figures of *out other than `range` and `open` (the caller's): memtables,
  // block cache, levels, and the table list if `with_tables`.
  virtual void GetFigures(bool with_tables, RangeFigures* out) {
    (void)with_tables;
    (void)out;
  }

 private:
  static Status NotMovable() {
    return Status::NotSupported("this engine cannot migrate a range live (--engine=leveldb)");
  }
};

class RangeEngine;
// RangeStats figures of a Nova engine (RangeBackend::GetFigures of its backends).
void FillEngineFigures(RangeEngine* engine, bool with_tables, RangeFigures* out);
// A Nova engine's `nova_cli stats` text (RangeBackend::StatsText): a line of counters, the
// tables per level, then LevelStatsTable (ltc/protocol/client_protocol.h) of its levels:
// what writing each cost (flushes into Level 0, compactions into the others), the table an
// --engine=leveldb range prints, so the two engines' write amplification read side by side.
std::string EngineStatsText(RangeEngine* engine);

// Opens the backend of `range` (recovering what it held). `assignment` is the one that
// gave the range (its StoC set).
using BackendFactory = std::function<Result<std::unique_ptr<RangeBackend>>(
    const RangeInfo& range, const LtcAssignment& assignment)>;

// --engine=leveldb: each range is a LevelDB database in <dir>/range-<id>.
struct LevelDbBackendOptions {
  std::string dir;
  // LevelDB's write buffer: its memtable, of which it keeps at most two (one active, one
  // being flushed).
  uint64_t write_buffer_bytes = 4ull << 20;
  // Each range's own LRU block cache (LevelDB's default size) ...
  uint64_t block_cache_bytes = 8ull << 20;
  // ... or, when set, this one, shared by every range of the LTC (one budget).
  std::shared_ptr<leveldb::Cache> shared_block_cache = nullptr;
  // Table settings. The defaults are the Nova engine's (EngineOptions: 10-bit bloom
  // filters, uncompressed blocks), so the two engines compare on design, not on these.
  int bloom_bits_per_key = 10;  // 0: no filter
  bool snappy_compression = false;
};
BackendFactory LevelDbBackendFactory(LevelDbBackendOptions options);

struct NovaBackendOptions {
  // Engine options of every range (range_id and the offloader are filled per range).
  EngineOptions engine;
  transport::TransportOptions transport;
  // How tables survive StoC losses (docs/stoc.md, "Table availability"): the mode, R (mode
  // replicas) and m (parity, hybrid). The configuration's table_availability,
  // fragment_replicas and parity_fragments settings override them. A range opened with
  // fewer StoCs than its mode needs falls back (logged): parity or hybrid to replicas, R to
  // the StoCs there are (none with one StoC).
  lsm::TableAvailability availability = lsm::TableAvailability::kReplicas;
  int fragment_replicas = 1;  // R
  int parity_fragments = 1;   // m
  int manifest_replicas = 1;  // at most the StoCs there are
  lsm::PlacementPolicy placement = lsm::PlacementPolicy::kPowerOfD;
  std::string offload_policy = "none";  // --ltc_compaction_offload
  std::chrono::milliseconds stoc_timeout{30000};
  // Tables of StoCs on this host are read with pread (StocClientOptions::local_reads).
  bool local_reads = true;
  // With local_reads, and used in place from a mapping of the file
  // (StocClientOptions::map_local_files).
  bool map_local_files = true;
  // Logging (docs/durability.md): the default mode and replicas; the first assignment's
  // log_mode and log_replicas settings override them, and fix the mode for good (a later
  // assignment naming another mode is refused: restart the LTC).
  logc::LogClientOptions log = [] {
    logc::LogClientOptions o;
    o.mode = logc::LogMode::kNone;
    return o;
  }();
  // Threads rebuilding a range's memtables from its logs when it opens.
  int recovery_threads = 2;
  // The LTC's data directory (--ltc_dir): it keeps each range's MANIFEST pointer
  // (stoc/client/manifest_pointer.h) in <dir>/manifests/. Empty: none is kept.
  std::string dir;
  // Ranges opened even when their newest MANIFEST or a log that may hold acknowledged
  // writes cannot be read (--ltc_force_recovery_ranges; docs/durability.md).
  std::vector<uint32_t> force_recovery_ranges;
  // Live migration: the LTC-to-LTC service (RangeMigrator, message types 0x03xx) the
  // exchange transport routes to, on `migration_pool`; null: none. Both must outlive this.
  rpc::RpcService* migration_service = nullptr;
  ThreadPool* migration_pool = nullptr;
  // The memtables copied for range `range` opened at `owner_epoch`, if a live migration
  // staged them (RangeMigrator::TakeStaged); null or returning null: an ordinary open.
  std::function<std::shared_ptr<const MigratedState>(uint32_t range, uint64_t owner_epoch)>
      take_migrated;
  // Called once a range opened with a staged state (take_migrated returned one) serves.
  std::function<void(uint32_t range, uint64_t owner_epoch)> migrated_opened;
};

// --engine=nova. Thread-safe.
class NovaBackends {
 public:
  // `metrics` must outlive this; each range registers its EngineMetrics there.
  NovaBackends(NovaBackendOptions options, MetricsRegistry* metrics);
  ~NovaBackends();  // REQUIRES: every backend it made is destroyed first
  NovaBackends(const NovaBackends&) = delete;
  NovaBackends& operator=(const NovaBackends&) = delete;

  // Starts the transport (to reach StoCs). InvalidArgument for a bad offload policy.
  Status Init();
  // The factory; this must outlive every backend it opens. Connects to StoCs it has not
  // seen yet (AddStoc), then opens the range's engine over them. A StoC of the
  // configuration that cannot be reached (dead, or removed and stopped) does not stop the
  // open: it is used once it answers again (StocClient::AddStoc).
  BackendFactory factory();
  // A newer assignment: its StoCs become the open ranges' StoCs at once (new tables,
  // MANIFESTs and offloaded compactions are placed on them; draining ones get nothing
  // new), and every copy on a StoC that left the configuration or is draining is moved
  // off it in the background (RangeEngine relocation; the MANIFEST too). Connects to new
  // StoCs (one not reachable yet is connected when it is). Older or equal epochs are ignored. Thread-safe; does not block on I/O.
  void ApplyStocs(const LtcAssignment& a);
  // What this LTC's ranges still have on StoCs they must leave, for its status document
  // (coordinator/config_store.h, PublishStatus).
  struct StocStatus {
    uint64_t config_epoch = 0;  // of the StoC set the figures are for
    std::map<uint32_t, uint64_t> copies_to_move;  // per StoC that is draining or gone
    uint64_t copies_at_risk = 0;
    uint64_t tables_relocated = 0;
    uint64_t bytes_relocated = 0;
    uint64_t relocation_failures = 0;
  };
  StocStatus GetStocStatus();
  // How many of its backends' closing flushes failed so far (logged "closing a range: flush
  // failed"): their unflushed writes are then only in the range's logs, or lost with log
  // mode none. nova_ltc compares it across its shutdown for its exit status.
  uint64_t failed_closes() const;
  void Shutdown();
  // The exchange transport and its endpoint (valid after Init): the migrator calls other
  // LTCs through them, and the LTC publishes the transport's listen address ("xchg").
  rpc::RpcEndpoint* endpoint();
  transport::Transport* transport();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nova::ltc
