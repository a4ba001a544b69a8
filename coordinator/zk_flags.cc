#include "coordinator/zk_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

DEFINE_string(zk, "",
              "ZooKeeper servers, host:port[,host:port...]. Required by nova_coordinator and "
              "nova_admin; for other components it switches from static flags to the "
              "cluster configuration in ZooKeeper");
DEFINE_string(cluster, "",
              "Cluster name: its state lives under /nova/<cluster> in ZooKeeper. "
              "1-64 characters of [A-Za-z0-9._-]. Required with --zk");
DEFINE_int32(zk_session_timeout_ms, 10000,
             "ZooKeeper session timeout, ms: how long after this process dies or is cut off "
             "its membership node stays (the server clamps it to 2..20 ticks)");
DEFINE_int32(zk_op_timeout_ms, 5000,
             "Deadline of one ZooKeeper call, ms, including the wait for a connection");
DEFINE_string(zk_auth_file, "",
              "File holding the ZooKeeper digest credential user:password (mode 0600): the "
              "session authenticates with it and the nodes it creates are writable by that "
              "credential only, readable by all. Give every process that writes to ZooKeeper "
              "(daemons, coordinators, nova_admin) the same file. Empty: nodes open to all");

namespace nova::coordinator {

Result<ConfigStoreOptions> ConfigStoreOptionsFromFlags() {
  if (FLAGS_zk.empty()) return Status::InvalidArgument("--zk is required (host:port[,...])");
  if (FLAGS_zk.find(':') == std::string::npos) {
    return Status::InvalidArgument("--zk=" + FLAGS_zk + ": want host:port[,host:port...]");
  }
  if (FLAGS_cluster.empty()) return Status::InvalidArgument("--cluster is required");
  NOVA_RETURN_NOT_OK_PREPEND(ValidateMemberId(FLAGS_cluster), "--cluster");
  if (FLAGS_zk_session_timeout_ms <= 0 || FLAGS_zk_op_timeout_ms <= 0) {
    return Status::InvalidArgument("--zk_session_timeout_ms and --zk_op_timeout_ms must be > 0");
  }
  ConfigStoreOptions o;
  o.zk_servers = FLAGS_zk;
  o.cluster = FLAGS_cluster;
  o.session_timeout = std::chrono::milliseconds(FLAGS_zk_session_timeout_ms);
  o.op_timeout = std::chrono::milliseconds(FLAGS_zk_op_timeout_ms);
  if (!FLAGS_zk_auth_file.empty()) {
    auto auth = ReadZkAuthFile(FLAGS_zk_auth_file, "--zk_auth_file");
    if (!auth.ok()) return auth.status();
    o.zk_auth = auth.value();
  }
  return o;
}

Result<std::unique_ptr<ConfigStore>> RegisterDaemonFromFlags(MemberKind kind, const std::string& id,
                                                             const std::string& address,
                                                             const std::string& metrics_address) {
  if (FLAGS_zk.empty()) return std::unique_ptr<ConfigStore>();
  auto zo = ConfigStoreOptionsFromFlags();
  if (!zo.ok()) return zo.status();
  auto store = std::make_unique<ConfigStore>(zo.value());
  Status s = store->Init();
  MemberInfo info;
  info.addresses["client"] = address;
  if (!metrics_address.empty()) info.addresses["metrics"] = metrics_address;
  if (s.ok()) s = store->Register(kind, id, info);
  LOG_IF(WARNING, !s.ok()) << "registering in ZooKeeper (retried in the background): "
                           << s.ToString();
  return store;
}

}  // namespace nova::coordinator
