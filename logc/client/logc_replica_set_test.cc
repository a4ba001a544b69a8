// LogcReplicaSet alone, over fake links (a settable clock, peers up or down, connects that
// succeed or fail): the rules by which it chooses a LogC for a new replica, suspect expiry,
// reachability, incarnations and in-sync marks.
#include "logc/client/logc_replica_set.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace nova::logc {
namespace {

constexpr std::chrono::milliseconds kRetry{100};

class LogcReplicaSetTest : public ::testing::Test {
 protected:
  LogcReplicaSetTest() : set_(Links(), kRetry) {}

  LogcReplicaSet::Links Links() {
    LogcReplicaSet::Links links;
    links.is_up = [this](transport::PeerId peer) { return up_.count(peer) != 0; };
    links.connect = [this](const std::string& address) -> Result<transport::PeerId> {
      auto it = peers_.find(address);
      if (it == peers_.end()) return Status::NetworkError("refused");
      up_.insert(it->second);
      return it->second;
    };
    links.now = [this] { return now_; };
    return links;
  }

  // Reserves with a fresh exclude list; "" when none is left.
  std::string Reserve(std::vector<std::string> exclude = {}) {
    auto chosen = set_.ReserveLogc(&exclude);
    return chosen ? *chosen : "";
  }

  MonoTime now_ = MonoNow();
  std::set<transport::PeerId> up_;
  std::map<std::string, transport::PeerId> peers_;  // address -> peer a connect gets
  LogcReplicaSet set_;
};

TEST_F(LogcReplicaSetTest, FewestOpenLogsWinsAndTiesGoToTheLowestId) {
  set_.SetLogcs({{"c", "c:1"}, {"a", "a:1"}, {"b", "b:1"}});
  std::vector<std::string> exclude;
  auto first = set_.ReserveLogc(&exclude);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, "a");  // all at 0: the lowest id
  EXPECT_EQ(exclude, std::vector<std::string>{"a"});
  auto second = set_.ReserveLogc(&exclude);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, "b");  // a is excluded
  EXPECT_EQ(Reserve(), "c");  // the only one at 0
  EXPECT_EQ(Reserve(), "a");  // all at 1 again
  EXPECT_EQ(set_.open_logs("a"), 2);
  set_.ReleaseLogc("a");
  set_.ReleaseLogc("a");
  EXPECT_EQ(Reserve(), "a");  // back to 0
}

TEST_F(LogcReplicaSetTest, ExcludedAndAddresslessLogcsAreNeverChosen) {
  set_.SetLogcs({{"a", "a:1"}, {"b", ""}});
  EXPECT_EQ(Reserve({"a"}), "");
  EXPECT_EQ(Reserve(), "a");
}

TEST_F(LogcReplicaSetTest, AnUnreachableLogcIsChosenOnlyWhenNoOtherIsLeft) {
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  EXPECT_EQ(Reserve({"a"}), "b");
  EXPECT_EQ(Reserve({"a"}), "b");  // b: 2 open logs, a: 0
  set_.MarkFailed("a");
  now_ += kRetry;  // no longer suspect, still unreachable
  EXPECT_EQ(Reserve(), "b");  // more open logs, but reachable
  EXPECT_EQ(Reserve({"b"}), "a");  // the only one left
}

TEST_F(LogcReplicaSetTest, ALogcTheTransportReconnectedCountsAsReachable) {
  peers_["a:1"] = 7;
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  auto peer = set_.PeerFor("a");
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_EQ(peer.value(), 7u);
  EXPECT_EQ(Reserve({"a"}), "b");  // b: 1 open log
  up_.erase(7);
  set_.MarkPeerDown(7);
  EXPECT_EQ(Reserve(), "b");  // a is suspect
  now_ += kRetry;
  EXPECT_EQ(Reserve(), "b");  // a is unreachable: b wins with more open logs
  up_.insert(7);  // the transport redialled it
  EXPECT_EQ(Reserve(), "a");
}

TEST_F(LogcReplicaSetTest, ASuccessfulConnectClearsUnreachable) {
  peers_["a:1"] = 3;
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  EXPECT_EQ(Reserve({"a"}), "b");
  set_.MarkFailed("a");
  now_ += kRetry;
  EXPECT_EQ(Reserve(), "b");
  ASSERT_TRUE(set_.PeerFor("a").ok());
  EXPECT_EQ(Reserve(), "a");
}

TEST_F(LogcReplicaSetTest, ASuspectLogcIsSkippedForTheRetryInterval) {
  set_.SetLogcs({{"a", "a:1"}});
  set_.MarkFailed("a");
  EXPECT_EQ(Reserve(), "");
  now_ += kRetry - std::chrono::milliseconds(1);
  EXPECT_EQ(Reserve(), "");
  now_ += std::chrono::milliseconds(1);
  EXPECT_EQ(Reserve(), "a");  // unreachable, but the only one
}

TEST_F(LogcReplicaSetTest, FailedReplicasMakeTheirLogcSuspectButNotUnreachable) {
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  EXPECT_EQ(Reserve(), "a");
  EXPECT_EQ(Reserve(), "b");
  EXPECT_EQ(Reserve(), "a");  // a: 2, b: 1
  set_.ReleaseReplicas({"a", "a"}, /*failed=*/true);
  EXPECT_EQ(set_.open_logs("a"), 0);
  EXPECT_EQ(Reserve(), "b");  // a is suspect
  now_ += kRetry;
  EXPECT_EQ(Reserve(), "a");  // a: 0, b: 2; not unreachable
  set_.ReleaseReplicas({"b", "b"}, /*failed=*/false);  // left their logs, not failed
  EXPECT_EQ(Reserve(), "b");  // b: 0, not suspect; a: 1
}

TEST_F(LogcReplicaSetTest, PeerForReportsUnknownLogcsAndFailedConnects) {
  set_.SetLogcs({{"a", "a:1"}});
  EXPECT_TRUE(set_.PeerFor("x").status().IsNotFound());
  auto failed = set_.PeerFor("a");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().ToString().find("connecting to LogC a"), std::string::npos)
      << failed.status().ToString();
}

TEST_F(LogcReplicaSetTest, MarksFollowTheIncarnation) {
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  EXPECT_FALSE(set_.NoteIncarnation("a", 0));  // not a LogC's answer
  EXPECT_FALSE(set_.NoteIncarnation("x", 5));  // unknown LogC
  EXPECT_TRUE(set_.NoteIncarnation("a", 5));
  EXPECT_FALSE(set_.NoteIncarnation("a", 5));
  set_.NoteInSync("a", 5, 1);
  set_.NoteInSync("a", 4, 2);  // a stale incarnation's mark
  EXPECT_TRUE(set_.MarkedAt(1, {"a"}));
  EXPECT_FALSE(set_.MarkedAt(2, {"a"}));
  EXPECT_FALSE(set_.MarkedAt(1, {"a", "b"}));
  EXPECT_EQ(set_.Unmarked(1, {}), std::vector<std::string>{"b"});
  EXPECT_EQ(set_.CountUnsynced({1}), 1u);
  EXPECT_TRUE(set_.NoteIncarnation("a", 6));  // restarted: its marks are gone
  EXPECT_FALSE(set_.MarkedAt(1, {"a"}));
  EXPECT_EQ(set_.CountUnsynced({1}), 2u);
  EXPECT_EQ(set_.Unmarked(1, {"a"}), std::vector<std::string>{"a"});
  set_.MarkFailed("a");
  EXPECT_TRUE(set_.Unmarked(1, {"a"}).empty());  // suspect LogCs are not marked
}

TEST_F(LogcReplicaSetTest, ALogcThatLeftStaysWhileItHoldsLogs) {
  set_.SetLogcs({{"a", "a:1"}, {"b", "b:1"}});
  EXPECT_EQ(Reserve(), "a");
  set_.SetLogcs({{"c", "c:1"}});
  EXPECT_EQ(set_.KnownIds(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(set_.ConfiguredIds(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(Reserve(), "c");  // a keeps its address, with 1 open log
}

}  // namespace
}  // namespace nova::logc
