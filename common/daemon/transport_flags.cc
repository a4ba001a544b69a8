#include "common/daemon/transport_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/secret_file.h"

DEFINE_string(transport, "tcp",
              "Exchange transport backend: tcp (works everywhere) or verbs (RDMA via rdma-core; "
              "needs an RDMA NIC)");
DEFINE_int32(xchg_threads, 2,
             "Exchange threads (lanes per peer). Every process of a cluster must use the same "
             "number; few is better (the paper's chapter 3: more QPs cost NIC cache)");
DEFINE_string(cluster_secret_file, "",
              "File holding the cluster secret that components prove to each other on connect "
              "(HMAC-SHA256 challenge). Required");
DEFINE_string(listen_host, "127.0.0.1", "Address the exchange transport listens on");
DEFINE_int32(listen_port, 0, "Port the exchange transport listens on (0 = any free port)");
DEFINE_int32(transport_max_message_mb, static_cast<int>(nova::transport::kDefaultMaxMessageBytes >> 20),
             "Largest two-sided message accepted, in MiB (a bound, never preallocated; a live "
             "migration sends a memtable entry, key and value, in one message)");

namespace nova {

namespace {
constexpr int kMaxPort = 65535;
constexpr int kMaxMessageMb = 1024;
}  // namespace

Result<std::string> ReadClusterSecret(const std::string& path) {
  if (path.empty()) {
    return Status::InvalidArgument("--cluster_secret_file is required (a file with a secret "
                                   "shared by all components of the cluster)");
  }
  return ReadSecretFile(path, "cluster secret file");
}

Result<transport::TransportOptions> TransportOptionsFromFlags(const std::string& node_name) {
  transport::TransportOptions o;
  NOVA_RETURN_NOT_OK_PREPEND(transport::ParseBackend(FLAGS_transport, &o.backend), "--transport");
  if (FLAGS_xchg_threads < 1) return Status::InvalidArgument("--xchg_threads must be >= 1");
  o.xchg_threads = FLAGS_xchg_threads;
  auto secret = ReadClusterSecret(FLAGS_cluster_secret_file);
  if (!secret.ok()) return secret.status();
  o.cluster_secret = secret.value();
  o.node_name = node_name;
  o.listen_host = FLAGS_listen_host;
  if (FLAGS_listen_port < 0 || FLAGS_listen_port > kMaxPort) {
    return Status::InvalidArgument("--listen_port must be in [0, 65535]");
  }
  o.listen_port = static_cast<uint16_t>(FLAGS_listen_port);
  if (FLAGS_transport_max_message_mb < 1 || FLAGS_transport_max_message_mb > kMaxMessageMb) {
    return Status::InvalidArgument("--transport_max_message_mb must be in [1, 1024]");
  }
  o.max_message_bytes = static_cast<uint64_t>(FLAGS_transport_max_message_mb) << 20;
  return o;
}

}  // namespace nova
