#include "client/cluster_uri.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/transport/tcp_socket.h"
#include "tests/util/test_util.h"
#include "tests/util/zk_server.h"

namespace nova::client {
namespace {

using namespace std::chrono_literals;

// How much later than ClientOptions::zk_open_timeout a failing connect may return: the
// ZooKeeper handle's teardown, on a loaded machine.
constexpr auto kTeardownGrace = 1s;

// Connects to `uri` with the default zk_open_timeout and a long client timeout (so that
// only the open timeout can explain a quick failure); returns the status and the time
// taken.
std::pair<Status, std::chrono::milliseconds> TimedConnect(const std::string& uri) {
  auto where = ParseClusterUri(uri);
  EXPECT_TRUE(where.ok()) << where.status().ToString();
  if (!where.ok()) return {where.status(), 0ms};
  ClientOptions o;
  o.timeout = 10s;
  const MonoTime start = MonoNow();
  auto c = ConnectToCluster(where.value(), o);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start);
  return {c.ok() ? Status::OK() : c.status(), took};
}

TEST(ClusterUriTest, StaticLtcList) {
  auto w = ParseClusterUri("nova://ltc=127.0.0.1:7100,localhost:7101");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(w.value().zookeeper());
  EXPECT_EQ(w.value().ltcs, (std::vector<std::string>{"127.0.0.1:7100", "localhost:7101"}));
}

TEST(ClusterUriTest, ZooKeeper) {
  auto w = ParseClusterUri("nova://zk1:2181,zk2:2181/prod");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w.value().zookeeper());
  EXPECT_EQ(w.value().zk, "zk1:2181,zk2:2181");
  EXPECT_EQ(w.value().cluster, "prod");
}

TEST(ClusterUriTest, Malformed) {
  for (const char* uri :
       {"", "ltc=1.2.3.4:5", "nova://", "nova://ltc=", "nova://ltc=host", "nova://ltc=host:port",
        "nova://zk:2181", "nova://zk:2181/", "nova://zk:2181/a/b", "nova://zk/name"}) {
    auto w = ParseClusterUri(uri);
    ASSERT_FALSE(w.ok()) << uri;
    EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument) << uri;
    EXPECT_NE(w.status().message().find("nova://ltc=host:port"), std::string::npos)
        << w.status().ToString();
  }
}

// Nothing listens on port 1: the connection is refused, again and again.
TEST(ClusterUriTest, UnreachableZooKeeperFailsWithinTheOpenTimeout) {
  auto [s, took] = TimedConnect("nova://127.0.0.1:1/c");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("cannot reach ZooKeeper at 127.0.0.1:1"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("zk_open_timeout"), std::string::npos) << s.ToString();
  EXPECT_LT(took, kDefaultZkOpenTimeout + kTeardownGrace) << s.ToString();
}

// A server that accepts TCP connections but never answers (a hung or overloaded
// ZooKeeper, or something else on its port): no session, so the same quick failure.
TEST(ClusterUriTest, ZooKeeperThatNeverAnswersFailsWithinTheOpenTimeout) {
  uint16_t port = 0;
  auto fd = transport::ListenTcp("127.0.0.1", 0, &port);  // never accepted: the kernel
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();         // completes the handshakes
  auto [s, took] = TimedConnect("nova://127.0.0.1:" + std::to_string(port) + "/c");
  ::close(fd.value());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot reach ZooKeeper"), std::string::npos) << s.ToString();
  EXPECT_LT(took, kDefaultZkOpenTimeout + kTeardownGrace) << s.ToString();
}

// A live ZooKeeper without the cluster: one read tells, long before the open timeout.
TEST(ClusterUriTest, MissingClusterFailsAtOnce) {
  std::string why;
  if (!test::ZkServer::Available(&why)) GTEST_SKIP() << "no ZooKeeper server: " << why;
  test::ZkServerOptions zo;
  zo.data_dir = test::TestTempDir("cluster_uri_test") + "/zk";
  test::ZkServer zk(zo);
  Status started = zk.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto [s, took] = TimedConnect("nova://" + zk.address() + "/no-such-cluster");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("cluster 'no-such-cluster' does not exist"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("nova_admin create-cluster"), std::string::npos) << s.ToString();
  EXPECT_LT(took, kDefaultZkOpenTimeout) << s.ToString();
}

TEST(ClusterUriTest, StaticConnectFailsWithoutLtcs) {
  ClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(500);
  ClusterLocator w;
  w.ltcs = {"127.0.0.1:1"};  // nothing listens on port 1
  auto c = ConnectToCluster(w, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("127.0.0.1:1"), std::string::npos) << c.status().ToString();
}

}  // namespace
}  // namespace nova::client
