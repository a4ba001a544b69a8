// Options of one range's LSM-tree engine (RangeEngine). The LTC daemon fills them from its
// --ltc_* flags; the paper's symbols are noted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <leveldb/cache.h>
#include <leveldb/comparator.h>

namespace nova {
class ThreadPool;
}  // namespace nova

namespace nova::ltc {

class CompactionOffloader;
class MemtableLog;
struct MigratedState;

struct EngineOptions {
  uint32_t range_id = 0;
  // Orders user keys. Must outlive the engine.
  const leveldb::Comparator* comparator = leveldb::BytewiseComparator();

  // tau: a memtable becomes immutable once it holds this much.
  uint64_t memtable_bytes = 4ull << 20;
  // delta: memtables per range (active + immutable). Each Drange gets delta / theta; a write
  // that finds its Drange without a free memtable stalls until a flush frees one.
  int memtables = 16;
  // theta: Dranges per range; gamma: Tranges per Drange.
  int dranges = 1;
  int tranges_per_drange = 8;
  // Writes sampled before the first major reorganization builds theta Dranges, and between
  // load checks afterwards.
  uint64_t reorganize_every_writes = 100000;
  // A Drange whose share of writes exceeds 1/theta by this fraction triggers a minor
  // reorganization; if that cannot fix it, a major one.
  double drange_imbalance_threshold = 0.5;

  // Tables: target size, block size, rho (data fragments per table), bloom bits per key.
  uint64_t sstable_bytes = 2ull << 20;
  uint32_t block_bytes = 4096;
  uint32_t scatter_width = 1;
  int bloom_bits_per_key = 10;
  uint64_t block_cache_bytes = 8ull << 20;
  // Set: the range's tables use this block cache, shared with the LTC's other ranges (one
  // budget: a hot range gets more of it), and block_cache_bytes is not used. Null: the
  // range has a cache of its own of block_cache_bytes.
  std::shared_ptr<leveldb::Cache> shared_block_cache = nullptr;
  // Set: reads fan out over this pool (shared by the LTC's ranges, must outlive the
  // engine): a scan's Seek positions its sources (memtables and Level 0, each level)
  // concurrently, and a Get searches the levels below Level 0 that may hold its key
  // concurrently. Null: one after another. Worth it where the sources' blocks are StoC
  // round trips; on a host whose cores are all busy it only adds wake-ups
  // (docs/benchmarks.md, "Parallel reads").
  ThreadPool* read_pool = nullptr;

  // A compaction of one table with nothing below it moves the table down instead of
  // rewriting it (RangeEngine::MoveTableDown). False rewrites it, as before 2026-11-27 (for
  // comparison).
  bool table_moves = true;
  // Compaction: Level-0 tables that trigger one; bytes of Level 1 (each further level
  // holds 10x more); Level-0 bytes at which writes stop until compaction catches up.
  int l0_compaction_trigger = 4;
  uint64_t level1_bytes = 10ull << 20;
  uint64_t l0_stop_writes_bytes = 256ull << 20;
  // Past this many Level-0 bytes each write is delayed once, by a share of
  // l0_slowdown_micros growing linearly to all of it at l0_stop_writes_bytes, so
  // compaction gains ground before the stop. 0 micros: no slow-down.
  uint64_t l0_slowdown_writes_bytes = 192ull << 20;
  uint32_t l0_slowdown_micros = 1000;
  // Background threads for flushes and compactions.
  int compaction_threads = 2;
  // Where compaction jobs run (--ltc_compaction_offload): null runs them here; otherwise
  // each job is offered to the offloader first and run here only if that fails
  // (ltc/engine/compaction_offloader.h). Must outlive the engine.
  CompactionOffloader* compaction_offloader = nullptr;

  // Owner fencing (docs/coordinator.md, "Owner fencing"): called once when a StoC or LogC
  // answers Fenced (a newer owner of the range took it over). Writes have stopped by then
  // (they fail with the Fenced status) and nothing more is written, deleted or flushed.
  // Called on an engine thread, possibly under the engine's locks: it must not block or
  // call into the engine (the LTC server hands it to another thread). Null: none.
  std::function<void()> on_fenced;
  // The owner epoch the range was opened at: stamped into offloaded compaction jobs, so
  // StoCs refuse the outputs and deletes of a fenced owner's jobs. 0: not fenced.
  uint64_t owner_epoch = 0;

  // The lookup index (paper 4.4.1.1): key -> where its newest version is, so a Get reads one
  // memtable or Level-0 table instead of all of them. Off: Gets search every memtable and
  // overlapping Level-0 table (benchmarks compare the two).
  bool lookup_index = true;
  // The range index (paper 4.4.1.2): partitions of the key space -> the memtables and
  // Level-0 tables that may hold keys in them, so scans merge only the current partition's
  // (plus Levels 1..6) and a Get that misses the lookup index searches only the partition
  // holding its key. Off: every memtable and Level-0 table (benchmarks compare the two).
  bool range_index = true;
  // The small-memtable rule (paper 4.4.2): an immutable memtable with fewer unique keys
  // than this is merged into its Drange's active memtable instead of being flushed as a
  // table. 0 turns the rule off.
  uint64_t drange_merge_threshold_keys = 100;

  // A MANIFEST that grows past this many bytes is rolled over: a new one starts with a
  // snapshot of the whole state (tests set it small to exercise the roll-over).
  uint64_t manifest_roll_bytes = 4ull << 20;

  // Relocation (RangeEngine::SetEvacuatedStocs, range_engine_relocation.cc): the bytes per
  // second relocations may copy, averaged over whole tables (a token bucket holding up to
  // one second's worth); 0: unlimited.
  uint64_t relocation_bytes_per_sec = 64ull << 20;
  // Sweeps of garbage table files (RangeEngine::RequestSweep) run this often; zero: only on
  // request.
  std::chrono::milliseconds sweep_interval{60'000};

  // Where writes are logged before they are acknowledged (ltc/engine/memtable_log.h); null: no
  // log (log_mode=none: memtable contents die with the process). Must outlive the engine.
  MemtableLog* log = nullptr;
  // Threads that rebuild memtables from their logs at Open (--ltc_recovery_threads).
  int recovery_threads = 2;
  // Live migration, destination side (range_migration.h): the memtables copied from the
  // source LTC. Open adopts those the MANIFEST does not mark obsolete in place of replaying
  // their logs (which it lists without reading: they stay the range's logs until flushed),
  // and replays the other live logs as at recovery, minus their entries of copied memtables.
  // Without a log it only adopts. The memtables' comparators must outlive the engine. Null:
  // an ordinary Open.
  std::shared_ptr<const MigratedState> migrated;
};

}  // namespace nova::ltc
