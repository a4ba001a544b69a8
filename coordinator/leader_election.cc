#include "coordinator/leader_election.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace nova::coordinator {

namespace {
// Prefix of candidate nodes; ZooKeeper appends a 10-digit sequence, so names sort in
// creation order. DO NOT CHANGE: persisted.
constexpr char kCandidatePrefix[] = "n_";
}  // namespace

LeaderElection::LeaderElection(ZkClient* zk, std::string election_path, std::string candidate_id)
    : zk_(zk), path_(std::move(election_path)), id_(std::move(candidate_id)) {}

Result<bool> LeaderElection::Check(uint64_t watch, std::string* leader_id) {
  const int64_t session = zk_->session_id();
  if (session == 0) return Status::Unavailable("no ZooKeeper session yet");
  if (node_.empty() || node_session_ != session) {
    NOVA_RETURN_NOT_OK(zk_->EnsurePath(path_));
    std::string created;
    NOVA_RETURN_NOT_OK(zk_->Create(path_ + "/" + kCandidatePrefix, id_,
                                   ZkCreateMode::kEphemeralSequential, &created));
    node_ = created.substr(created.rfind('/') + 1);
    node_session_ = session;
    LOG(INFO) << "coordinator " << id_ << " is a leader candidate as " << created;
  }
  std::vector<std::string> children;
  NOVA_RETURN_NOT_OK(zk_->GetChildren(path_, &children, watch));  // sorted
  if (std::find(children.begin(), children.end(), node_) == children.end()) {
    node_.clear();  // someone deleted it; the next check stands again
    return Status::Unavailable("candidate node vanished from " + path_ + "; standing again");
  }
  std::string data;
  ZkStat stat;
  Status s = zk_->Get(path_ + "/" + children.front(), &data, &stat);
  if (s.IsNotFound()) return Status::Unavailable("the leader left while being read; retry");
  NOVA_RETURN_NOT_OK(s);
  *leader_id = data;
  // Compare owners rather than names: a create whose answer was lost to a connection drop
  // still made a node of our session, which may be the lowest.
  return stat.ephemeral_owner == session;
}

Status LeaderElection::Resign() {
  if (node_.empty()) return Status::OK();
  Status s = zk_->Delete(path_ + "/" + node_);
  node_.clear();
  return s.IsNotFound() ? Status::OK() : s;
}

}  // namespace nova::coordinator
