// Coordinator: the library behind nova_coordinator (DESIGN.md section 8).
//
// Every coordinator registers under members/coordinator/<id> and stands in the leader
// election. The leader keeps the published configuration in step with the members that
// registered (policy in range_assigner.h): it adds new LTCs/LogCs/StoCs to the member
// sets and assigns unassigned ranges, publishing each change as epoch + 1 with a
// compare-and-set. Followers only watch, ready to take over. The leader also tracks how
// long each LTC and StoC of the configuration has been unregistered (failover, grace
// removal: range_assigner.h rules 3, 4 and 7).
//
// Failure handling is deliberately narrow in this version: an LTC that disappears keeps
// its ranges (the leader logs it; see OnLtcLost(), the failover hook), because
// reassigning needs the new owner to recover the range from MANIFEST + logs, which
// the failover issue adds.
//
// Lifecycle (Kudu style): the constructor cannot fail; Init() validates and connects
// (without waiting for ZooKeeper); Start() runs the coordinator thread; Shutdown() resigns
// and stops.
//
// Thread safety: all public methods are thread-safe. One lock, mu_, innermost: it is taken
// by Wake() from ZooKeeper watches (on ZooKeeper's event thread, under ZkClient's
// dispatch_mu_) and from ConfigStore callbacks (under its callback_mu_), so nothing is
// called while holding it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/config_store.h"
#include "coordinator/leader_election.h"
#include "coordinator/range_assigner.h"

namespace nova::coordinator {

struct CoordinatorOptions {
  ConfigStoreOptions store;
  // This coordinator's id (member and candidate name). Required; see ValidateMemberId().
  std::string id;
  // Published under members/coordinator/<id> (e.g. "metrics" -> host:port).
  MemberInfo info;
  // See AssignmentOptions::min_ltcs.
  size_t min_ltcs = 1;
  // The coordinator re-checks this often even without a ZooKeeper event (safety net).
  std::chrono::milliseconds recheck_interval{2000};
  // Wait after a failed step (ZooKeeper unreachable, ...), doubling up to the max.
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  // Failover (docs/coordinator.md): an LTC that owns ranges and whose ZooKeeper node has
  // been gone this long (on top of the session timeout that removed the node) loses its
  // ranges to the live LTCs (--coordinator_ltc_failover_delay_ms).
  std::chrono::milliseconds ltc_failover_delay{0};
  // An LTC gone this long leaves the configuration (--coordinator_ltc_grace_ms).
  std::chrono::milliseconds ltc_grace{60000};
  // A StoC gone this long leaves the configuration, while a majority of the StoCs is live
  // and never the last one (range_assigner.h rule 7; --coordinator_stoc_grace_ms). Zero:
  // never.
  std::chrono::milliseconds stoc_grace{60000};
  // A coordinator that has just become the leader fails over no LTC before this long: after
  // a whole-cluster restart, or a leader change, LTCs may still be re-registering. Zero: the
  // coordinator's ZooKeeper session timeout (run LTCs with one no longer than it).
  std::chrono::milliseconds leader_settle{0};
  // Live migrations (docs/coordinator.md, "Live migration"): at most this many run at once
  // (--coordinator_max_concurrent_migrations); a running one is dropped (rolled back) after
  // migration_timeout (--coordinator_migration_timeout_ms).
  size_t max_concurrent_migrations = 4;
  std::chrono::milliseconds migration_timeout{60000};
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();  // Shutdown()
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Validates the options, starts the ZooKeeper session and registers this coordinator
  // (retried in the background while ZooKeeper is unreachable). InvalidArgument for bad
  // options. REQUIRES: called once.
  Status Init() EXCLUDES(mu_);
  // Starts the coordinator thread. REQUIRES: Init() succeeded; called once.
  Status Start() EXCLUDES(mu_);
  // Stops the thread, resigns leadership and closes the session. Idempotent.
  void Shutdown() EXCLUDES(mu_);

  // Whether this coordinator led at its last check.
  bool is_leader() const EXCLUDES(mu_);
  // Candidate id of the leader at the last check ("" if unknown).
  std::string leader_id() const EXCLUDES(mu_);
  // Epoch of the last configuration this coordinator published (0 if none).
  uint64_t published_epoch() const EXCLUDES(mu_);
  // Whether the ZooKeeper session is connected now. REQUIRES: Init() succeeded.
  bool zk_connected() const { return store_->connected(); }

 private:
  void Run() EXCLUDES(mu_);
  // One round: election, then (as leader) reconciliation.
  Status Step() EXCLUDES(mu_);
  Status Lead() EXCLUDES(mu_);
  // Called by the leader for every LTC that owns ranges but is not registered: notes since
  // when, and whether its ranges move now (AssignmentOptions::failed) and whether it leaves
  // the configuration (removed), per the failover delay and grace period.
  void TrackLostLtcs(const ClusterConfig& config, const LiveMembers& live,
                     AssignmentOptions* options);
  // Called by the leader for every StoC of the configuration that is not registered: notes
  // since when, and names those gone longer than the StoC grace in options->removed_stocs
  // (rule 7 may still hold them back: logged once per reason).
  void TrackLostStocs(const ClusterConfig& config, const LiveMembers& live,
                      AssignmentOptions* options);
  void Wake() EXCLUDES(mu_);

  // Constant after construction.
  const CoordinatorOptions options_;

  // Set by Init(); used by the coordinator thread (store_ is thread-safe).
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<LeaderElection> election_;  // coordinator thread only
  uint64_t election_watch_ = ZkClient::kNoWatch;

  // Coordinator thread only.
  std::set<std::pair<std::string, uint64_t>> reported_lost_;  // (ltc, epoch)
  std::map<std::string, MonoTime> ltc_missing_since_;  // config LTCs not registered
  std::map<std::string, MonoTime> stoc_missing_since_;  // config StoCs not registered
  std::string stoc_hold_reported_;  // last reason logged for keeping dead StoCs
  MonoTime leading_since_{};                            // when this one became the leader
  bool leading_ = false;  // the election said so at the last check (errors do not clear it)
  bool reported_no_config_ = false;
  std::string last_error_;

  mutable Mutex mu_;
  CondVar cv_;  // wake_ or shutdown_ set
  bool wake_ GUARDED_BY(mu_) = false;
  bool shutdown_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  bool is_leader_ GUARDED_BY(mu_) = false;
  std::string leader_id_ GUARDED_BY(mu_);
  uint64_t published_epoch_ GUARDED_BY(mu_) = 0;

  std::thread thread_;
};

}  // namespace nova::coordinator
