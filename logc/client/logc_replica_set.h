// LogcReplicaSet: the LogCs a LogClient may place log replicas on (docs/logc.md "Client
// structure"). It knows, per LogC: its address and connection, whether it is suspect
// (failed recently: skipped for retry_interval) or unreachable (its connection went down,
// or a connect or request to it failed, since the last successful connect), how many of
// this client's logs have a replica there, its incarnation (the LogC process last seen)
// and the ranges marked in sync there in that incarnation.
//
// It chooses the LogC for a new replica (ReserveLogc), by these rules:
//  1. a suspect LogC (failed less than retry_interval ago), one without an address, or
//     one in the caller's exclude list is never chosen;
//  2. an unreachable LogC is chosen only when no other is left (it may be gone for good,
//     and each try costs a connect attempt); one whose connection is up again (the
//     transport redials) counts as reachable;
//  3. among the rest, the one with the fewest open logs of this client; ties go to the
//     lowest id.
// A choice is counted at once (open_logs), so concurrent choices spread; ReleaseLogc
// undoes it when the replica is not made.
//
// Thread safety: all methods are thread-safe. Locks: connect_mu_ (held while connecting,
// so that concurrent connects to one address do not replace each other's connection),
// then mu_. mu_ is a leaf: a caller may hold its own locks (LogRegistry's mu_) when calling
// in, and no callback runs under it but `Links::is_up` and `Links::now`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/transport/transport.h"

namespace nova::logc {

class LogcReplicaSet {
 public:
  // How the set reaches LogCs and reads the time: the transport's in a LogClient, fakes in
  // tests.
  struct Links {
    // is_up and now run under mu_: they must not call back into the set.
    std::function<bool(transport::PeerId)> is_up;
    std::function<MonoTime()> now;
    std::function<Result<transport::PeerId>(const std::string& address)> connect;
  };
  // Links over `transport` (must outlive the set) and the monotonic clock.
  static Links TransportLinks(transport::Transport* transport);

  // `retry_interval`: how long a LogC that failed is skipped.
  LogcReplicaSet(Links links, std::chrono::milliseconds retry_interval);
  LogcReplicaSet(const LogcReplicaSet&) = delete;
  LogcReplicaSet& operator=(const LogcReplicaSet&) = delete;

  // Replaces the set: id -> address. A LogC that left keeps its state while logs of this
  // client have replicas there; a changed address drops its connection.
  void SetLogcs(std::map<std::string, std::string> logcs) EXCLUDES(mu_);
  // Ids of the LogCs with an address (the configured ones), in id order.
  std::vector<std::string> ConfiguredIds() const EXCLUDES(mu_);
  // Ids of every LogC the set still knows (those that left with open logs included).
  std::vector<std::string> KnownIds() const EXCLUDES(mu_);

  // The connection to the LogC, connecting first if it is not up. NotFound for an unknown
  // id; the connect's error (prefixed) when it fails. A successful connect clears the
  // LogC's unreachable mark.
  Result<transport::PeerId> PeerFor(const std::string& logc_id) EXCLUDES(connect_mu_, mu_);
  // A connect or request to the LogC failed: suspect for retry_interval, and unreachable.
  void MarkFailed(const std::string& logc_id) EXCLUDES(mu_);
  // The connection `peer` went down: its LogC is suspect and unreachable.
  void MarkPeerDown(transport::PeerId peer) EXCLUDES(mu_);

  // Chooses the LogC for a new replica by the rules above, among those not in *exclude;
  // counts the log there at once and adds the id to *exclude. nullopt when none is left.
  std::optional<std::string> ReserveLogc(std::vector<std::string>* exclude) EXCLUDES(mu_);
  // Undoes a ReserveLogc whose replica was not made.
  void ReleaseLogc(const std::string& logc_id) EXCLUDES(mu_);
  // Replicas at these LogCs left their logs: their open-log counts drop. `failed`: they
  // failed, and the LogCs are suspect for retry_interval (not marked unreachable).
  void ReleaseReplicas(const std::vector<std::string>& logc_ids, bool failed) EXCLUDES(mu_);
  // Adds `delta` to the open-log counts of these LogCs (recovered logs adopted or
  // replaced).
  void AddOpenLogs(const std::vector<std::string>& logc_ids, int delta) EXCLUDES(mu_);
  // Open logs of this client at the LogC (0 if unknown).
  int open_logs(const std::string& logc_id) const EXCLUDES(mu_);

  // The LogC answered with `incarnation` (0: not a LogC's answer, ignored). True when it
  // is a new one for a known LogC: the LogC restarted (or is seen for the first time), and
  // its in-sync marks are forgotten; the caller then fails the replicas it held earlier.
  bool NoteIncarnation(const std::string& logc_id, uint64_t incarnation) EXCLUDES(mu_);
  // The LogC holds `range`'s in-sync mark in `incarnation`: remembered while that is the
  // incarnation the set knows.
  void NoteInSync(const std::string& logc_id, uint64_t incarnation, uint32_t range)
      EXCLUDES(mu_);
  // True when every one of `logc_ids` is known and marked in sync for `range`.
  bool MarkedAt(uint32_t range, const std::vector<std::string>& logc_ids) const EXCLUDES(mu_);
  // The configured LogCs not marked in sync for `range` and not suspect; `only` (if not
  // empty) limits them to these ids.
  std::vector<std::string> Unmarked(uint32_t range, const std::vector<std::string>& only) const
      EXCLUDES(mu_);
  // How many configured LogCs miss the mark of at least one of `ranges`.
  uint64_t CountUnsynced(const std::set<uint32_t>& ranges) const EXCLUDES(mu_);

 private:
  struct LogcState {
    std::string address;
    transport::PeerId peer = transport::kInvalidPeer;
    MonoTime failed_until{};  // suspect until then
    // Its connection went down, or a connect or request to it failed, since the last
    // successful connect: chosen for new replicas only when no other LogC is left.
    bool unreachable = false;
    int open_logs = 0;         // logs of this client with a replica here
    uint64_t incarnation = 0;  // the LogC process last seen (0: none yet)
    std::set<uint32_t> in_sync;  // ranges marked in sync in that incarnation
  };

  // Constant after construction.
  const Links links_;
  const std::chrono::milliseconds retry_interval_;

  Mutex connect_mu_ ACQUIRED_BEFORE(mu_);  // held while connecting
  mutable Mutex mu_;
  std::map<std::string, LogcState> logcs_ GUARDED_BY(mu_);
};

}  // namespace nova::logc
