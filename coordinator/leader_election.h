// LeaderElection: ZooKeeper's ephemeral-sequential leader recipe among coordinators.
//
// Each candidate creates <election_path>/n_<sequence> (ephemeral, sequential) holding its
// id; the candidate owning the lowest sequence leads. When the leader's session ends (it
// crashed, was partitioned longer than the session timeout, or resigned) its node goes
// and the next candidate leads. Candidates re-check on every change of the list (watch).
//
// A leader can only learn that it lost its session after the fact, so leadership is not a
// licence to write blindly: every configuration change is a compare-and-set on the config
// node's version (ConfigStore::UpdateConfig), and a deposed leader's write fails.
//
// Thread safety: not thread-safe; one thread (the coordinator's) drives it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "coordinator/zk_client.h"

namespace nova::coordinator {

class LeaderElection {
 public:
  // `zk` must outlive this object.
  LeaderElection(ZkClient* zk, std::string election_path, std::string candidate_id);

  // Makes sure this candidate has a node in the current session (a new one after a session
  // expiry dropped the old), then reads who leads. Returns true if this candidate leads,
  // false if another does; *leader_id receives the leader's candidate id. `watch` (a
  // ZkClient watch token or kNoWatch) is armed on the candidate list. Returns ZkClient's
  // errors (Unavailable, TimedOut, ...) when ZooKeeper cannot answer: then nobody can be
  // sure to lead, and the caller must not act as leader.
  Result<bool> Check(uint64_t watch, std::string* leader_id);

  // Withdraws (deletes this candidate's node) so that another takes over at once.
  Status Resign();

 private:
  ZkClient* const zk_;  // not owned
  const std::string path_;
  const std::string id_;
  std::string node_;          // name of our node under path_, "" if none
  int64_t node_session_ = 0;  // session that created node_
};

}  // namespace nova::coordinator
