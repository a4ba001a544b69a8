// Flags shared by every daemon and tool that joins a cluster through ZooKeeper:
//   --zk=host:port[,host:port]   ZooKeeper servers
//   --cluster=NAME               cluster name (the node /nova/NAME)
//   --zk_session_timeout_ms      session timeout (ephemeral nodes vanish this long after a crash)
//   --zk_op_timeout_ms           deadline of one ZooKeeper call
// Only daemons link this (nova_zk_flags); libraries take ConfigStoreOptions (STYLE.md).
#pragma once

#include "common/status.h"
#include "coordinator/config_store.h"

namespace nova::coordinator {

// The ConfigStoreOptions the flags describe. Returns InvalidArgument naming the flag if
// --zk or --cluster is empty or malformed, or a timeout is not positive.
// REQUIRES: gflags were parsed (InitDaemon()).
Result<ConfigStoreOptions> ConfigStoreOptionsFromFlags();

}  // namespace nova::coordinator
