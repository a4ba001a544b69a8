#include "client/cluster_uri.h"

#include <gtest/gtest.h>

namespace nova::client {
namespace {

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

TEST(ClusterUriTest, UnreachableZooKeeperFailsClearlyWithinTheTimeout) {
  auto w = ParseClusterUri("nova://127.0.0.1:1/c");
  ASSERT_TRUE(w.ok());
  ClientOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  auto c = ConnectToCluster(w.value(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("ZooKeeper"), std::string::npos) << c.status().ToString();
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
