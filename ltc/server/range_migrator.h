// RangeMigrator: live migration of ranges between LTCs, both sides (docs/coordinator.md,
// "Live migration"; paper 4.9). One per nova_ltc started with --zk.
//
// A migration is an entry of the cluster configuration (ClusterConfig::migrations) that
// nova_admin queues and the leading coordinator starts. The destination LTC sees it running
// with itself as `to` and, on its own thread (RunMigration):
//   1. pre-copy: asks the source (kMigrateBegin, migration_protocol.h) to make its active
//      memtables immutable and list them, and copies each one (kMigrateFetch) while the
//      source keeps serving;
//   2. hand-off: asks the source to stop the range (kMigrateHandoff): the source refuses
//      the range's requests from then on, waits for the writes in flight and answers with
//      its memtable ids and bookkeeping; the destination copies the memtables it lacks (the
//      writes of the pre-copy's time) and tells the source it is done (kMigrateEnd);
//   3. commit: in one compare-and-set of the configuration, makes itself the range's owner
//      (owner epoch + 1) and removes the entry, with the copied state staged for the open
//      (TakeStaged, called by the backend factory); its assignment then opens the range,
//      which fences the StoCs and LogCs and adopts the memtables instead of replaying logs.
// The range is blocked from step 2 to the open. Clients get WrongRange from the source and
// retry at the new owner.
//
// Failures (none loses an acknowledged write; docs/coordinator.md lists them):
//  - Before the hand-off answers: the destination gives up (kMigrateEnd kAbandoned, and
//    removes the entry); the source serves on.
//  - The hand-off or its copies fail: with logged memtables the destination commits anyway
//    with only the pre-copied memtables (each complete) and replays the other logs; with
//    log_mode=none it gives up as above.
//  - The commit fails (the entry or the owner changed meanwhile): it gives up as above.
//  - The destination dies or goes silent: the source, idle for source_idle, resolves the
//    migration from the configuration: if it still owns the range at the same owner
//    epoch, it removes the entry (compare-and-set, so a late commit cannot also succeed)
//    and serves again; otherwise the range has moved and its next assignment drops it.
//  - The source dies: the destination's calls fail (as above); the coordinator fails the
//    source over.
// Fault points (tests): ltc.migrate.after_begin, .after_precopy, .after_handoff,
// .before_commit, .after_commit (destination), ltc.migrate.source_handoff and .source_end
// (source: when the hand-off, and the destination's end after its copies, reach it).
//
// Thread safety: thread-safe. Handlers run on the migration pool; each incoming migration
// on its own thread; the reaper thread resolves idle outgoing ones. mu_ is a leaf: no call
// into a backend, the store or the transport is made holding it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "ltc/engine/range_migration.h"
#include "ltc/server/migration_protocol.h"
#include "ltc/server/range_table.h"

namespace nova::ltc {

struct RangeMigratorOptions {
  std::string ltc_id;  // this LTC's id in the configuration
  // This process's incarnation (as registered): a commit is refused once the configuration
  // names another (a newer process of this LTC runs; this one is a paused leftover).
  std::string incarnation;
  // Bytes of memtable entries per kMigrateFetch response.
  uint32_t chunk_bytes = 4u << 20;
  // Each call to the other LTC gives up after this long.
  std::chrono::milliseconds call_timeout{10000};
  // An outgoing migration with no call from its destination for this long is resolved from
  // the configuration (see above).
  std::chrono::milliseconds source_idle{10000};
  // A staged state is dropped once the configuration no longer gives its range to this LTC
  // at its owner epoch and it has been staged this long (the open may still be retried).
  std::chrono::milliseconds staged_ttl{60000};
};

class RangeMigrator final : public rpc::RpcService {
 public:
  // `store` must be Init()ed and outlive this (until its Shutdown, after ours).
  RangeMigrator(RangeMigratorOptions options, coordinator::ConfigStore* store);
  ~RangeMigrator() override;  // Shutdown()
  RangeMigrator(const RangeMigrator&) = delete;
  RangeMigrator& operator=(const RangeMigrator&) = delete;

  // Starts both sides: `endpoint` and `transport` reach other LTCs, `table` holds the ranges
  // this LTC serves (the source side finds their backends there). All must outlive this.
  void Start(rpc::RpcEndpoint* endpoint, transport::Transport* transport, RangeTable* table)
      EXCLUDES(mu_);
  // Stops: incoming migrations give up at their next step and are joined; outgoing ones
  // that were handed off stay so (this LTC is stopping: its ranges close unflushed and the
  // destination or the next owner recovers them). Idempotent.
  void Shutdown() EXCLUDES(mu_);

  // The state copied for `range` to be opened at `owner_epoch`, or null. It stays staged
  // (an open that fails is retried with it) until Opened, or until the range is no longer
  // this LTC's at that owner epoch (after staged_ttl).
  std::shared_ptr<const MigratedState> TakeStaged(uint32_t range, uint64_t owner_epoch)
      EXCLUDES(mu_);
  // The range opened with TakeStaged's state serves: drops the state and logs how long it was blocked ("range R: served
  // here N ms after the hand-off began", the figure benchmarks/migration_bench.sh reports).
  void Opened(uint32_t range, uint64_t owner_epoch) EXCLUDES(mu_);

  // rpc::RpcService: the source side (kMigrateBegin .. kMigrateEnd).
  void HandleRequest(rpc::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) override EXCLUDES(mu_);

 private:
  // A migration out of this LTC, by (range, owner epoch at this LTC).
  struct Outgoing {
    // The memtables listed to the destination, kept until it is done with them.
    std::map<uint64_t, std::shared_ptr<MemTable>> memtables;
    bool handed_off = false;
    MonoTime last_call;
  };
  struct Staged {
    std::shared_ptr<const MigratedState> state;
    MonoTime since;
    MonoTime handoff_started;  // when the hand-off was asked for (the range blocked)
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // What a backend lookup pins: the slot and its open backend.
  struct Hosted {
    std::shared_ptr<RangeSlot> slot;
    std::shared_ptr<RangeBackend> backend;
  };

  // Source side.
  Result<std::string> Begin(const MigrationKey& k) EXCLUDES(ops_mu_, mu_);
  Result<std::string> Fetch(const FetchRequest& q) EXCLUDES(mu_);
  Result<std::string> Handoff(const MigrationKey& k) EXCLUDES(ops_mu_, mu_);
  Status End(const MigrationKey& k, MigrationOutcome outcome) EXCLUDES(ops_mu_, mu_);
  // The range hosted at owner epoch k.owner_epoch with its backend open, else WrongRange.
  Result<Hosted> Find(const MigrationKey& k) const;
  // Gives an outgoing migration up (see the class comment): undoes it if it was not handed
  // off; else serves again only if the configuration still names this LTC owner at the same
  // epoch, after removing any migration entry of the range. Unavailable while ZooKeeper
  // cannot tell (the reaper tries again).
  // `only_if_dropped`: do nothing while the configuration still has a migration of the
  // range (the reaper's early check of a hand-off whose migration the leader dropped).
  Status Resolve(const MigrationKey& k, bool only_if_dropped = false) EXCLUDES(ops_mu_, mu_);
  Status ResolveLocked(const MigrationKey& k, bool only_if_dropped) REQUIRES(ops_mu_)
      EXCLUDES(mu_);
  void ReapLoop() EXCLUDES(mu_);

  // Destination side.
  void OnConfig(const coordinator::ClusterConfig& config) EXCLUDES(mu_);
  void RunMigration(const coordinator::RangeMigration& m) EXCLUDES(mu_);
  // Copies memtable `id` of the source (all of it) into *out.
  Status CopyMemtable(rpc::PeerId peer, const MigrationKey& k, uint64_t id,
                      std::shared_ptr<MemTable>* out, uint64_t* bytes);
  // Makes this LTC the owner and removes the entry (compare-and-set, retried on races; OK
  // if an earlier attempt whose answer was lost did it). Aborted if the configuration no
  // longer has the migration as it was, or names another incarnation of this LTC.
  Status Commit(const coordinator::RangeMigration& m);
  // Removes the entry of `m` if it is still there as it was (best effort).
  void DropEntry(const coordinator::RangeMigration& m);
  bool stopping() const { return stopping_.load(); }

  // Constant after construction.
  const RangeMigratorOptions options_;
  coordinator::ConfigStore* const store_;  // must outlive this
  // Set by Start, then constant.
  rpc::RpcEndpoint* endpoint_ = nullptr;
  transport::Transport* transport_ = nullptr;
  RangeTable* table_ = nullptr;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};

  // Serializes the source side's state changes of a migration (Begin, Handoff, Resolve),
  // which call into the backend and ZooKeeper: a late hand-off never interleaves with the
  // migration's undoing. Taken before mu_.
  Mutex ops_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  CondVar stop_cv_;  // signalled by Shutdown
  std::map<MigrationKey, Outgoing> outgoing_ GUARDED_BY(mu_);
  std::set<uint32_t> incoming_ GUARDED_BY(mu_);  // ranges being migrated in
  std::map<MigrationKey, Staged> staged_ GUARDED_BY(mu_);
  std::list<Worker> workers_ GUARDED_BY(mu_);
  std::thread reaper_;  // started by Start, joined by Shutdown
};

}  // namespace nova::ltc
