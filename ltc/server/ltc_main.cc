// nova_ltc: the LSM-tree component daemon. See docs/ltc_server.md and docs/protocol.md.
//
// --listen_port is the port clients connect to (the daemon protocol of
// tests/util/external_daemon.h); the exchange transport to StoCs listens on
// --ltc_transport_port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/clock.h"
#include "common/daemon/daemon_init.h"
#include "common/daemon/transport_flags.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/secret_file.h"
#include "coordinator/config_store.h"
#include "coordinator/ltc_status.h"
#include "coordinator/zk_flags.h"
#include "logc/client/log_mode.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/server/ltc_assignment.h"
#include "ltc/server/ltc_server.h"
#include "ltc/server/range_backend.h"
#include "ltc/server/range_migrator.h"
#include "ltc/server/zk_assignment_source.h"
#include "stoc/client/stoc_table_store.h"

DECLARE_string(listen_host);
DECLARE_int32(listen_port);
DECLARE_string(zk);
DECLARE_string(cluster);

DEFINE_uint32(ltc_id, 0, "This LTC's id in the cluster (its node name is ltc-<id>)");
DEFINE_string(ltc_dir, "", "Data directory: each range's MANIFEST pointer (which MANIFEST "
              "on the StoCs is current); --engine=leveldb keeps its ranges here");
DEFINE_string(engine, "nova", "Engine serving each range: nova (RangeEngine over StoCs) or "
              "leveldb (a stock LevelDB per range on local disk, for comparisons)");
DEFINE_int32(ranges, 1, "omega: the key space is split into this many equal ranges by first "
             "byte (ignored when --range_bounds is set)");
DEFINE_string(range_bounds, "", "Comma-separated hex split points, e.g. 40,80,c0 (4 ranges)");
DEFINE_string(ltc_ranges, "all", "Ids of the ranges this LTC owns (comma-separated, or all)");
DEFINE_uint64(ltc_epoch, 1, "Configuration epoch of the static assignment");
DEFINE_uint64(ltc_owner_epoch, 0,
              "Owner epoch of every range of the static assignment (owner fencing, "
              "docs/coordinator.md): StoCs and LogCs refuse writes from an LTC that opened the "
              "range at an older one. 0: not fenced. With --zk the configuration sets it");
DEFINE_string(stoc, "", "StoCs: id@host:port,... (required with --engine=nova, unless --zk)");
DEFINE_int32(ltc_transport_port, 0, "Port of the exchange transport to StoCs (0: any)");
DEFINE_int32(ltc_client_threads, 4,
             "Workers serving the client requests not served on their connection's reader");
DEFINE_int32(ltc_reader_spin_us, 50,
             "A synchronous client connection's reader polls for the next request this many "
             "microseconds before sleeping, while that pays (a wake-up costs tens of us on "
             "idle or virtual CPUs); 0: it sleeps at once");
DEFINE_bool(ltc_serve_inline, true,
            "Serve a client request on its connection's reader thread when the connection "
            "has no other request in flight (saves waking a worker); false: every request "
            "goes through the --ltc_client_threads workers");
DEFINE_int32(ltc_max_connections, 256, "Client connections accepted at once");
DEFINE_string(ltc_client_secret_file, "",
              "File holding the client secret (mode 0600): clients must prove it on connect "
              "(HMAC-SHA256 challenge; their --client_secret_file) before any request is "
              "served. Empty: clients are not authenticated (a WARNING when --listen_host is "
              "not a loopback address)");
DEFINE_int32(ltc_compact_threads, 1,
             "Threads running clients' CompactRange requests (apart from the client workers); "
             "further requests wait for one");
// Size limits (docs/ltc_server.md "Limits" says why these defaults): LevelDB's practical
// ones, each kept only where a bound protects memory.
DEFINE_uint32(ltc_max_key_bytes, 64 << 10, "Largest key accepted, bytes");
DEFINE_uint32(ltc_max_value_bytes, 64 << 20, "Largest value accepted, bytes");
DEFINE_uint32(ltc_max_batch_ops, 1 << 20,
              "Most operations in one range's part of a Write batch (bounds the per-operation "
              "bookkeeping, about 250 bytes each, of a batch of tiny operations)");
DEFINE_uint64(ltc_max_request_mb, 256,
              "Largest client request (a range's part of a Write batch is one), MiB");
DEFINE_uint32(ltc_max_scan_count, 100000, "Most pairs one Scan request may ask for");

// Engine (RangeEngine) flags; the paper's symbols in the help text.
DEFINE_uint64(ltc_memtable_size_mb, 4, "tau: a memtable becomes immutable at this size, MiB");
DEFINE_int32(ltc_memtables_per_range, 16, "delta: memtables per range (active + immutable)");
DEFINE_uint64(ltc_block_cache_mb, 8, "Block cache of each range, MiB (LevelDB's block cache "
              "with --engine=leveldb); unused with --ltc_shared_block_cache_mb");
DEFINE_uint64(ltc_shared_block_cache_mb, 0,
              "One block cache for all ranges of this LTC, MiB (a hot range gets more of the "
              "budget than --ltc_block_cache_mb per range gives it); 0: each range has its own "
              "of --ltc_block_cache_mb");
DEFINE_int32(ltc_active_memtables_per_range, 0,
             "alpha: active memtables per range. The engine keeps one active memtable per "
             "Drange, so alpha = theta: 0 follows --ltc_dranges_per_range; another value "
             "sets theta when that flag is left at 0, and must equal it otherwise");
DEFINE_int32(ltc_dranges_per_range, 0, "theta: Dranges per range (0: alpha, or 1)");
DEFINE_int32(ltc_tranges_per_drange, 8, "gamma: Tranges per Drange");
DEFINE_double(ltc_drange_imbalance_threshold, 0.5,
              "A Drange whose write share exceeds 1/theta by this fraction triggers a "
              "reorganization");
DEFINE_uint64(ltc_drange_merge_threshold_keys, 100,
              "An immutable memtable with fewer unique keys is merged, not flushed (0 off)");
DEFINE_uint32(ltc_scatter_width, 1, "rho: StoCs a table's data fragments are scattered across");
DEFINE_string(ltc_placement, "power-of-d", "StoC placement of fragments: random|power-of-d");
DEFINE_uint64(ltc_sstable_size_mb, 2, "Target SSTable size, MiB");
DEFINE_int32(ltc_compaction_threads, 2, "Background flush and compaction threads per range");
DEFINE_bool(ltc_table_moves, true,
            "A compaction of one table that overlaps nothing a level down moves the table by "
            "a MANIFEST edit instead of rewriting it (LevelDB's trivial move); false rewrites "
            "it (for comparison)");
DEFINE_int32(ltc_read_threads, 0,
             "Threads (shared by the ranges) that fan reads out: a scan seeks its memtables, "
             "Level 0 and each level concurrently, and a Get searches the levels below Level 0 "
             "concurrently; 0 (default) reads them one after another. Pays where blocks are "
             "StoC round trips and cores are free (docs/benchmarks.md \"Parallel reads\"); "
             "Nova engine only, 0 to 64");
DEFINE_bool(ltc_local_reads, true,
            "Read the tables of StoCs on this host from their files with pread, without a "
            "request per block (docs/stoc.md \"Local reads\"); reads of other StoCs, and "
            "every read this cannot serve, are requests");
DEFINE_bool(ltc_local_reads_mmap, true,
            "With --ltc_local_reads: map those files into memory and use their blocks in "
            "place, as LevelDB reads its own tables (no system call, copy or block-cache "
            "entry per block read); false reads them with pread (docs/stoc.md \"Local "
            "reads\")");
DEFINE_string(ltc_compaction_offload, "none",
              "Where compactions run: none (here), round-robin or least-loaded (StoCs)");
DEFINE_uint64(ltc_l0_stop_write_mb, 256, "Level-0 size at which writes stop, MiB "
              "(writes slow down from 3/4 of it)");
DEFINE_int32(ltc_manifest_replicas, 2,
             "Replicas of each range's MANIFEST on StoCs (at most the StoCs there are)");
DEFINE_string(ltc_table_availability, "hybrid",
              "How tables survive the loss of StoCs (docs/stoc.md): none (one copy of each "
              "fragment), replicas (--ltc_fragment_replicas copies), parity (one copy plus "
              "--ltc_parity_fragments Reed-Solomon parity fragments over data and index), hybrid "
              "(parity over the data, the index and filter replicated m + 1 times). The "
              "configuration's table_availability setting overrides it");
DEFINE_int32(ltc_fragment_replicas, 2,
             "R: copies of each table fragment with --ltc_table_availability=replicas "
             "(setting fragment_replicas)");
DEFINE_int32(ltc_parity_fragments, 1,
             "m: parity fragments per table with parity or hybrid, 1 to 4 (setting "
             "parity_fragments); a table then survives the loss of any m StoCs");
DEFINE_bool(ltc_lookup_index, true, "Lookup index (key -> memtable or L0 table)");
DEFINE_bool(ltc_range_index, true, "Range index (partitions -> memtables and L0 tables)");

// Logging and recovery (docs/durability.md).
DEFINE_string(log_mode, "none",
              "How writes are logged before they are acknowledged: none (memtables die with "
              "the LTC), memory (in the memory of --log_replicas LogCs), disk (fdatasync'd "
              "at every replica) or memory+disk. With --zk the cluster's log_mode setting, "
              "if any, takes precedence (read when the first range opens)");
DEFINE_int32(log_replicas, 2, "LogCs each memtable's log is replicated on (with --zk the "
             "cluster's log_replicas setting takes precedence)");
DEFINE_int32(log_min_insync_replicas, 0,
             "A write is acknowledged only once this many log replicas hold it (Kafka's "
             "min.insync.replicas); 0 means --log_replicas. With fewer LogCs reachable, "
             "writes wait up to --log_timeout_ms and fail with Unavailable. Lower it to keep "
             "writing with fewer copies, knowing that fewer LogC failures then lose writes. "
             "With --zk the cluster's log_min_insync_replicas setting takes precedence");
DEFINE_string(ltc_force_recovery_ranges, "",
              "DANGER, operators only: range ids (comma-separated) whose recovery goes on "
              "even when a log that may hold acknowledged writes, or the newest MANIFEST, "
              "cannot be read (every copy of it lost for good). What is lost is logged. "
              "Restart the LTC without this flag afterwards");
DEFINE_string(logc, "", "LogCs: id@host:port,... (static mode; with --zk they come from the "
              "cluster configuration)");
DEFINE_int32(log_timeout_ms, 5000, "A log replica that does not acknowledge a write within "
             "this long is failed over");
DEFINE_int32(ltc_recovery_threads, 2,
             "Threads rebuilding a range's memtables from its logs when the range opens");
DEFINE_int32(ltc_recovery_wait_ms, 100,
             "A request for a range still being recovered waits this long before it is "
             "answered Unavailable (the client retries)");

namespace {

constexpr uint64_t kMiB = 1ull << 20;
// A log record holds a range's part of a batch and is at most 1 GiB (ltc/engine/
// log_record.h), so a request stays below that.
constexpr uint64_t kMaxRequestMb = 1000;
// Room for the framing around one entry in a kMigrateFetch response (headers, lengths).
constexpr uint64_t kMigrationEntrySlackBytes = 4096;
// Exit status after SIGTERM when a range's closing flush failed (docs/ltc_server.md): its
// unflushed writes are only in its logs. Not 1 (a failed start) nor 2 (bad flags).
constexpr int kExitCloseFailed = 3;

// Whether clients can reach `host` from this machine only: a loopback address or
// "localhost". Anything else (a name, 0.0.0.0, an interface's address) may be reachable
// from the network.
bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == IN_LOOPBACKNET;
  }
  in6_addr v6;
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

int BadFlags(const std::string& why) {
  std::fprintf(stderr, "nova_ltc: %s\n", why.c_str());
  return nova::kBadFlagsExitCode;
}

// alpha and theta (see the flags' help). Returns false if they contradict.
bool DrangesFromFlags(int* theta) {
  const int alpha = FLAGS_ltc_active_memtables_per_range;
  const int t = FLAGS_ltc_dranges_per_range;
  if (alpha != 0 && t != 0 && alpha != t) return false;
  *theta = t != 0 ? t : (alpha != 0 ? alpha : 1);
  return true;
}

}  // namespace

// How long startup waits for a first configuration from ZooKeeper.
constexpr auto kFirstConfigWait = std::chrono::seconds(10);

int main(int argc, char** argv) {
  nova::InitDaemon(&argc, &argv,
                   "nova_ltc --cluster_secret_file=FILE --stoc=ID@HOST:PORT,... [flags]\n"
                   "The Nova-LSM LSM-tree component: serves Get/Put/Delete/Write/Scan for "
                   "its ranges to clients over TCP.");
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // With --zk the assignment comes from the cluster configuration in ZooKeeper (the
  // coordinator assigns this LTC ranges once it registers); else from the static flags.
  const bool zk = !FLAGS_zk.empty();
  std::unique_ptr<nova::coordinator::ConfigStore> config_store;
  if (zk) {
    auto zo = nova::coordinator::ConfigStoreOptionsFromFlags();
    if (!zo.ok()) return BadFlags(zo.status().ToString());
    config_store = std::make_unique<nova::coordinator::ConfigStore>(zo.value());
    nova::Status s = config_store->Init();
    if (!s.ok()) return BadFlags("ZooKeeper: " + s.ToString());
  }
  nova::ltc::LtcAssignment a;
  a.epoch = FLAGS_ltc_epoch;
  a.ltc_id = FLAGS_ltc_id;
  auto all = FLAGS_range_bounds.empty() ? nova::ltc::EqualRanges(FLAGS_ranges)
                                        : nova::ltc::RangesFromBounds(FLAGS_range_bounds);
  if (!all.ok()) return BadFlags(all.status().ToString());
  auto mine = nova::ltc::SelectRanges(all.value(), FLAGS_ltc_ranges);
  if (!mine.ok()) return BadFlags("--ltc_ranges: " + mine.status().ToString());
  a.ranges = mine.value();
  if (FLAGS_ltc_owner_epoch != 0) {
    for (const nova::ltc::RangeInfo& r : a.ranges) a.owner_epochs[r.id] = FLAGS_ltc_owner_epoch;
  }
  auto stocs = nova::ltc::ParseStocList(FLAGS_stoc);
  if (!stocs.ok()) return BadFlags(stocs.status().ToString());
  a.stocs = stocs.value();
  auto logcs = nova::ltc::ParseMemberList(FLAGS_logc);
  if (!logcs.ok()) return BadFlags("--logc: " + logcs.status().ToString());
  a.logcs = logcs.value();
  // The log mode and replication: these flags, unless the cluster configuration (--zk) has
  // log_mode / log_replicas settings, which win when the first range opens.
  const std::string log_mode = FLAGS_log_mode;
  const int log_replicas = FLAGS_log_replicas;
  nova::logc::LogMode mode;
  if (nova::Status ms = nova::logc::ParseLogMode(log_mode, &mode); !ms.ok()) {
    return BadFlags("log mode: " + ms.ToString());
  }
  if (log_replicas < 1 || log_replicas > 16) return BadFlags("--log_replicas must be 1..16");
  if (FLAGS_log_min_insync_replicas < 0 || FLAGS_log_min_insync_replicas > log_replicas) {
    return BadFlags("--log_min_insync_replicas must be 0 (= --log_replicas) to --log_replicas");
  }
  auto force_ranges = nova::ltc::ParseRangeIds(FLAGS_ltc_force_recovery_ranges);
  if (!force_ranges.ok()) {
    return BadFlags("--ltc_force_recovery_ranges: " + force_ranges.status().ToString());
  }
  if (mode != nova::logc::LogMode::kNone && a.logcs.empty() && !zk) {
    return BadFlags("--log_mode=" + log_mode + " needs --logc=id@host:port,...");
  }
  if (FLAGS_ltc_recovery_threads < 1) return BadFlags("--ltc_recovery_threads must be >= 1");
  if (FLAGS_log_timeout_ms < 1) return BadFlags("--log_timeout_ms must be positive");

  nova::ltc::LtcServerOptions so;
  so.host = FLAGS_listen_host;
  if (FLAGS_listen_port < 0 || FLAGS_listen_port > 65535) return BadFlags("bad --listen_port");
  so.port = static_cast<uint16_t>(FLAGS_listen_port);
  so.client_threads = FLAGS_ltc_client_threads;
  so.serve_inline = FLAGS_ltc_serve_inline;
  so.reader_spin = std::chrono::microseconds(std::max(0, FLAGS_ltc_reader_spin_us));
  so.compact_threads = FLAGS_ltc_compact_threads;
  so.recovery_wait = std::chrono::milliseconds(std::max(0, FLAGS_ltc_recovery_wait_ms));
  so.max_connections = FLAGS_ltc_max_connections;
  so.limits.max_key_bytes = FLAGS_ltc_max_key_bytes;
  so.limits.max_value_bytes = FLAGS_ltc_max_value_bytes;
  so.limits.max_batch_ops = FLAGS_ltc_max_batch_ops;
  so.limits.max_request_bytes = FLAGS_ltc_max_request_mb * kMiB;
  so.limits.max_scan_count = FLAGS_ltc_max_scan_count;
  if (FLAGS_ltc_max_request_mb < 1 || FLAGS_ltc_max_request_mb > kMaxRequestMb) {
    return BadFlags("--ltc_max_request_mb must be in [1, " + std::to_string(kMaxRequestMb) + "]");
  }
  if (so.client_threads < 1 || so.max_connections < 1 || so.compact_threads < 1) {
    return BadFlags(
        "--ltc_client_threads, --ltc_max_connections and --ltc_compact_threads must be "
        "positive");
  }
  if (!FLAGS_ltc_client_secret_file.empty()) {
    auto secret = nova::ReadSecretFile(FLAGS_ltc_client_secret_file, "--ltc_client_secret_file");
    if (!secret.ok()) return BadFlags(secret.status().ToString());
    so.client_secret = secret.value();
  } else if (!IsLoopbackHost(so.host)) {
    LOG(WARNING) << "clients connecting to " << so.host
                 << " are not authenticated: anyone who reaches this port can read and write "
                    "every range; set --ltc_client_secret_file (docs/security.md)";
  }

  nova::MetricsRegistry metrics;
  // This process's incarnation (docs/coordinator.md, "Owner fencing"): ranges are served
  // only once the configuration names it, with owner epochs newer than any earlier
  // process with this id used.
  const std::string incarnation = [] {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%08x%08x-%d", rd(), rd(), static_cast<int>(::getpid()));
    return std::string(buf);
  }();
  // Live migration (docs/coordinator.md): with --zk and the Nova engine, this LTC serves
  // its ranges' memtables to LTCs taking them over, and takes ranges over itself.
  std::unique_ptr<nova::ltc::RangeMigrator> migrator;
  std::unique_ptr<nova::ThreadPool> migration_pool;
  std::unique_ptr<nova::ThreadPool> read_pool;  // --ltc_read_threads; outlives the ranges
  std::unique_ptr<nova::ltc::NovaBackends> nova_backends;
  nova::ltc::BackendFactory factory;
  // --ltc_shared_block_cache_mb: one block cache for every range of this LTC.
  std::shared_ptr<leveldb::Cache> shared_cache;
  if (FLAGS_ltc_shared_block_cache_mb > 0) {
    shared_cache.reset(leveldb::NewLRUCache(FLAGS_ltc_shared_block_cache_mb * kMiB));
  }
  if (FLAGS_engine == "leveldb") {
    if (FLAGS_ltc_dir.empty()) return BadFlags("--engine=leveldb needs --ltc_dir");
    nova::ltc::LevelDbBackendOptions lo;
    lo.dir = FLAGS_ltc_dir;
    lo.write_buffer_bytes = FLAGS_ltc_memtable_size_mb * kMiB;
    lo.block_cache_bytes = FLAGS_ltc_block_cache_mb * kMiB;
    lo.shared_block_cache = shared_cache;
    factory = nova::ltc::LevelDbBackendFactory(lo);
  } else if (FLAGS_engine == "nova") {
    if (a.stocs.empty() && !zk) return BadFlags("--engine=nova needs --stoc=id@host:port,...");
    nova::ltc::NovaBackendOptions no;
    nova::ltc::EngineOptions& e = no.engine;
    e.memtable_bytes = FLAGS_ltc_memtable_size_mb * kMiB;
    e.memtables = FLAGS_ltc_memtables_per_range;
    e.block_cache_bytes = FLAGS_ltc_block_cache_mb * kMiB;
    e.shared_block_cache = shared_cache;
    if (!DrangesFromFlags(&e.dranges)) {
      return BadFlags("--ltc_active_memtables_per_range (alpha) must equal "
                      "--ltc_dranges_per_range (theta): one active memtable per Drange");
    }
    e.tranges_per_drange = FLAGS_ltc_tranges_per_drange;
    e.drange_imbalance_threshold = FLAGS_ltc_drange_imbalance_threshold;
    e.drange_merge_threshold_keys = FLAGS_ltc_drange_merge_threshold_keys;
    e.scatter_width = FLAGS_ltc_scatter_width;
    e.sstable_bytes = FLAGS_ltc_sstable_size_mb * kMiB;
    e.compaction_threads = FLAGS_ltc_compaction_threads;
    e.table_moves = FLAGS_ltc_table_moves;
    if (FLAGS_ltc_read_threads < 0 || FLAGS_ltc_read_threads > 64) {
      return BadFlags("--ltc_read_threads must be 0 to 64");
    }
    if (FLAGS_ltc_read_threads > 0) {
      read_pool = std::make_unique<nova::ThreadPool>(
          "ltc-read", static_cast<size_t>(FLAGS_ltc_read_threads), 4096);
      e.read_pool = read_pool.get();
    }
    e.l0_stop_writes_bytes = FLAGS_ltc_l0_stop_write_mb * kMiB;
    e.l0_slowdown_writes_bytes = e.l0_stop_writes_bytes / 4 * 3;
    e.lookup_index = FLAGS_ltc_lookup_index;
    e.range_index = FLAGS_ltc_range_index;
    if (e.memtables < e.dranges) {
      return BadFlags("--ltc_memtables_per_range (delta) must be >= theta");
    }
    nova::Status s = nova::lsm::ParsePlacementPolicy(FLAGS_ltc_placement, &no.placement);
    if (!s.ok()) return BadFlags("--ltc_placement: " + s.ToString());
    nova::ltc::OffloadPolicy policy;
    s = nova::ltc::ParseOffloadPolicy(FLAGS_ltc_compaction_offload, &policy);
    if (!s.ok()) return BadFlags("--ltc_compaction_offload: " + s.ToString());
    no.offload_policy = FLAGS_ltc_compaction_offload;
    no.local_reads = FLAGS_ltc_local_reads;
    no.map_local_files = FLAGS_ltc_local_reads_mmap;
    s = nova::lsm::ParseTableAvailability(FLAGS_ltc_table_availability, &no.availability);
    if (!s.ok()) return BadFlags("--ltc_table_availability: " + s.ToString());
    if (FLAGS_ltc_fragment_replicas < 1 || FLAGS_ltc_fragment_replicas > 16) {
      return BadFlags("--ltc_fragment_replicas must be from 1 to 16");
    }
    if (FLAGS_ltc_parity_fragments < 1 ||
        FLAGS_ltc_parity_fragments > nova::stoc::kMaxParityFragments) {
      return BadFlags("--ltc_parity_fragments must be from 1 to " +
                      std::to_string(nova::stoc::kMaxParityFragments));
    }
    if (FLAGS_ltc_manifest_replicas < 1 || FLAGS_ltc_manifest_replicas > 16) {
      return BadFlags("--ltc_manifest_replicas must be from 1 to 16");
    }
    no.fragment_replicas = FLAGS_ltc_fragment_replicas;
    no.parity_fragments = FLAGS_ltc_parity_fragments;
    no.log.mode = mode;
    no.log.replicas = log_replicas;
    no.log.min_insync_replicas = FLAGS_log_min_insync_replicas;
    no.log.force_recovery_ranges = force_ranges.value();
    no.force_recovery_ranges = force_ranges.value();
    no.dir = FLAGS_ltc_dir;
    LOG_IF(WARNING, FLAGS_ltc_dir.empty())
        << "no --ltc_dir: no MANIFEST pointers are kept, so a MANIFEST left on a StoC that "
           "was down during a roll-over cannot be told from the current one (docs/durability.md)";
    no.log.timeout = std::chrono::milliseconds(FLAGS_log_timeout_ms);
    // A memtable's log holds a little more than the memtable's payload (record headers).
    no.log.segment_bytes = e.memtable_bytes + e.memtable_bytes / 4 + (64 << 10);
    no.recovery_threads = FLAGS_ltc_recovery_threads;
    no.manifest_replicas = FLAGS_ltc_manifest_replicas;
    auto to = nova::TransportOptionsFromFlags("ltc-" + std::to_string(FLAGS_ltc_id));
    if (!to.ok()) return BadFlags(to.status().ToString());
    no.transport = to.value();
    no.transport.listen_port = static_cast<uint16_t>(FLAGS_ltc_transport_port);
    // A live migration copies each memtable entry in one transport message.
    const uint64_t largest_entry = uint64_t{FLAGS_ltc_max_key_bytes} + FLAGS_ltc_max_value_bytes +
                                   kMigrationEntrySlackBytes;
    LOG_IF(WARNING, zk && no.transport.max_message_bytes < largest_entry)
        << "--transport_max_message_mb (" << (no.transport.max_message_bytes >> 20)
        << ") is below --ltc_max_key_bytes + --ltc_max_value_bytes: a live migration of a "
           "range holding an entry that large fails (raise --transport_max_message_mb)";
    if (zk) {
      nova::ltc::RangeMigratorOptions mo;
      mo.ltc_id = std::to_string(FLAGS_ltc_id);
      mo.incarnation = incarnation;
      migrator = std::make_unique<nova::ltc::RangeMigrator>(mo, config_store.get());
      migration_pool = std::make_unique<nova::ThreadPool>("ltc-migrate", 2, 1024);
      no.migration_service = migrator.get();
      no.migration_pool = migration_pool.get();
      no.take_migrated = [m = migrator.get()](uint32_t range, uint64_t owner_epoch) {
        return m->TakeStaged(range, owner_epoch);
      };
      no.migrated_opened = [m = migrator.get()](uint32_t range, uint64_t owner_epoch) {
        m->Opened(range, owner_epoch);
      };
    }
    nova_backends = std::make_unique<nova::ltc::NovaBackends>(no, &metrics);
    s = nova_backends->Init();
    if (!s.ok()) {
      std::fprintf(stderr, "nova_ltc: %s\n", s.ToString().c_str());
      return 1;
    }
    factory = nova_backends->factory();
  } else {
    return BadFlags("--engine must be nova or leveldb, got '" + FLAGS_engine + "'");
  }

  nova::ltc::StaticAssignmentSource static_source(a);
  std::unique_ptr<nova::ltc::ZkAssignmentSource> zk_source;
  nova::ltc::AssignmentSource* source = &static_source;
  if (zk) {
    zk_source = std::make_unique<nova::ltc::ZkAssignmentSource>(
        config_store.get(), FLAGS_ltc_id, kFirstConfigWait, incarnation);
    source = zk_source.get();
  }
  if (nova_backends) {
    so.on_assignment = [b = nova_backends.get()](const nova::ltc::LtcAssignment& next) {
      b->ApplyStocs(next);
    };
  }
  nova::ltc::LtcServer server(so, source, factory, &metrics);
  nova::Status s = server.Init();
  if (s.ok()) s = server.Start();
  if (!s.ok()) {
    LOG(ERROR) << "nova_ltc failed to start: " << s.ToString();
    std::fprintf(stderr, "nova_ltc: %s\n", s.ToString().c_str());
    return 1;
  }
  auto http = nova::StartMetricsServer(&metrics);
  if (!http.ok()) {
    LOG(ERROR) << http.status().ToString();
    return 1;
  }
  if (migrator) {
    migrator->Start(nova_backends->endpoint(), nova_backends->transport(), server.range_table());
  }
  if (zk) {
    // Registered once it serves: the coordinator then assigns it ranges.
    nova::coordinator::MemberInfo info;
    info.addresses["client"] = server.address();
    info.addresses["incarnation"] = incarnation;
    if (nova_backends) info.addresses["xchg"] = nova_backends->transport()->listen_address();
    if (http.value()) info.addresses["metrics"] = nova::MetricsAddress(http.value().get());
    // Taking the node over from a previous process with this id is safe: the new
    // incarnation makes the coordinator bump this LTC's owner epochs, which fences it.
    s = config_store->Register(nova::coordinator::MemberKind::kLtc, std::to_string(FLAGS_ltc_id),
                               info, /*take_over=*/true);
    LOG_IF(WARNING, !s.ok()) << "registering in ZooKeeper (retried in the background): "
                             << s.ToString();
  }
  std::printf("LISTEN %s\n", server.address().c_str());
  std::fflush(stdout);
  if (zk) {
    LOG(INFO) << "nova_ltc " << FLAGS_ltc_id << " (" << FLAGS_engine << ") serving on "
              << server.address() << "; ranges come from cluster " << FLAGS_cluster
              << " in ZooKeeper";
  } else {
    LOG(INFO) << "nova_ltc " << FLAGS_ltc_id << " (" << FLAGS_engine << ") serving "
              << a.ranges.size() << " ranges at epoch " << a.epoch << " on " << server.address();
  }

  // The status document nova_admin reads (drain-stoc, remove-stoc, status): what this
  // LTC's ranges still have on StoCs they must leave. Published when it changes.
  std::atomic<bool> stop_status{false};
  nova::Mutex status_mu;
  nova::CondVar status_cv;
  std::thread status_publisher;
  if (zk && nova_backends) {
    status_publisher = std::thread([&] {
      std::string last;
      nova::MutexLock l(&status_mu);
      while (!stop_status.load()) {
        l.Unlock();
        const nova::ltc::NovaBackends::StocStatus st = nova_backends->GetStocStatus();
        nova::coordinator::LtcStatus doc;
        // The epoch the figures were computed at (not the server's, which may be newer).
        doc.config_epoch = st.config_epoch;
        for (const auto& [stoc, n] : st.copies_to_move) doc.copies_to_move[std::to_string(stoc)] = n;
        doc.copies_at_risk = st.copies_at_risk;
        doc.tables_relocated = st.tables_relocated;
        doc.bytes_relocated = st.bytes_relocated;
        doc.relocation_failures = st.relocation_failures;
        const std::string json = doc.ToJson();
        if (json != last) {
          nova::Status ps = config_store->PublishStatus(nova::coordinator::MemberKind::kLtc,
                                                        std::to_string(FLAGS_ltc_id), json);
          if (ps.ok()) {
            last = json;
          } else {
            LOG(WARNING) << "publishing this LTC's status: " << ps.ToString();
          }
        }
        l.Lock();
        status_cv.WaitUntil(&l, nova::MonoNow() + std::chrono::seconds(1),
                            [&] { return stop_status.load(); });
      }
    });
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (status_publisher.joinable()) {
    {
      nova::MutexLock l(&status_mu);
      stop_status = true;
      status_cv.NotifyAll();
    }
    status_publisher.join();
  }
  LOG(INFO) << "nova_ltc: signal " << sig << ", shutting down";
  if (http.value()) http.value()->Shutdown();
  if (migrator) migrator->Shutdown();
  // Its handlers use the server's ranges and the transport's endpoint: done before either.
  if (migration_pool) migration_pool->Shutdown();
  const uint64_t failed_before = nova_backends ? nova_backends->failed_closes() : 0;
  server.Shutdown();  // closes the ranges (flushing their memtables)
  const uint64_t failed_closes =
      nova_backends ? nova_backends->failed_closes() - failed_before : 0;
  if (nova_backends) nova_backends->Shutdown();
  if (config_store) config_store->Shutdown();
  if (failed_closes > 0) {
    // Not a clean stop: what those ranges had not flushed is only in their logs (lost with
    // log_mode none). Whoever stopped this must not stop the LogCs as if nothing happened.
    LOG(ERROR) << "nova_ltc: " << failed_closes << " range(s) could not flush while closing "
               << "(see 'closing a range: flush failed' above); exit status "
               << kExitCloseFailed;
    return kExitCloseFailed;
  }
  return 0;
}
