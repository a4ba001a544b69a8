#include "common/daemon/transport_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/metrics.h"
#include "common/transport/transport_metrics.h"

DECLARE_string(cluster_secret_file);
DECLARE_string(transport);
DECLARE_int32(xchg_threads);

namespace nova {
namespace {

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(TransportFlagsTest, SecretFileIsRequiredAndNonEmpty) {
  EXPECT_EQ(ReadClusterSecret("").status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(ReadClusterSecret("/nonexistent/secret").status().IsNotFound());
  EXPECT_EQ(ReadClusterSecret(WriteFile("empty", "\n")).status().code(),
            Status::Code::kInvalidArgument);
  auto s = ReadClusterSecret(WriteFile("ok", "s3cret\n"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(), "s3cret");
}

TEST(TransportFlagsTest, OptionsFromFlags) {
  FLAGS_cluster_secret_file = WriteFile("secret", "abc");
  FLAGS_transport = "tcp";
  FLAGS_xchg_threads = 3;
  auto o = TransportOptionsFromFlags("stoc-1");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "stoc-1");
  EXPECT_EQ(o->cluster_secret, "abc");
  EXPECT_EQ(o->xchg_threads, 3);
  EXPECT_EQ(o->backend, transport::Backend::kTcp);

  FLAGS_transport = "carrier-pigeon";
  EXPECT_EQ(TransportOptionsFromFlags("x").status().code(), Status::Code::kInvalidArgument);
  FLAGS_transport = "tcp";
  FLAGS_xchg_threads = 0;
  EXPECT_EQ(TransportOptionsFromFlags("x").status().code(), Status::Code::kInvalidArgument);
  FLAGS_xchg_threads = 2;
}

class NullHandler : public transport::TransportHandler {
 public:
  void OnMessage(transport::PeerId, std::string&) override {}
};

TEST(TransportMetricsTest, StatsAppearInMetrics) {
  NullHandler h;
  transport::TransportOptions o;
  o.cluster_secret = "x";
  auto t = transport::NewTransport(o, &h);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t.value()->Init().ok());
  ASSERT_TRUE(t.value()->Start().ok());
  MetricsRegistry registry;
  transport::RegisterTransportMetrics(&registry, t.value().get());
  const std::string text = registry.DumpPrometheus();
  EXPECT_NE(text.find("xchg_peers_up 0"), std::string::npos) << text;
  EXPECT_NE(text.find("xchg_rejected_remote_ops_total"), std::string::npos);
  transport::UnregisterTransportMetrics(&registry);
  EXPECT_EQ(registry.DumpPrometheus().find("xchg_peers_up"), std::string::npos);
}

}  // namespace
}  // namespace nova
