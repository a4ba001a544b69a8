// Flags shared by every daemon and tool that joins a cluster through ZooKeeper:
//   --zk=host:port[,host:port]   ZooKeeper servers
//   --cluster=NAME               cluster name (the node /nova/NAME)
//   --zk_session_timeout_ms      session timeout (ephemeral nodes vanish this long after a crash)
//   --zk_op_timeout_ms           deadline of one ZooKeeper call
//   --zk_auth_file=FILE          ZooKeeper digest credential user:password (docs/security.md)
// Only daemons link this (nova_zk_flags); libraries take ConfigStoreOptions (STYLE.md).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/config_store.h"

namespace nova::coordinator {

// The ConfigStoreOptions the flags describe. Returns InvalidArgument naming the flag if
// --zk or --cluster is empty or malformed, or a timeout is not positive; the error of
// ReadZkAuthFile for a --zk_auth_file that cannot be read or holds no user:password.
// REQUIRES: gflags were parsed (InitDaemon()).
Result<ConfigStoreOptions> ConfigStoreOptionsFromFlags();

// For a component daemon once it serves: with --zk, connects to ZooKeeper and registers it
// as member `id` of `kind`, reachable at `address` (its "client" address) and, if not
// empty, `metrics_address`. A failed registration is logged and retried in the background
// (the store keeps trying). Returns null without --zk, InvalidArgument for bad flags.
Result<std::unique_ptr<ConfigStore>> RegisterDaemonFromFlags(MemberKind kind, const std::string& id,
                                                             const std::string& address,
                                                             const std::string& metrics_address);

}  // namespace nova::coordinator
