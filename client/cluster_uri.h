// Where a Nova-LSM cluster is, and a connected client for it: the one place that turns a
// user's cluster address (a URI, YCSB's nova.* properties) into a NovaClient, shared by
// the leveldb::DB adapter (nova_db.h) and nova_ycsb's nova binding.
//
// Two modes:
//   static     "nova://ltc=host:port[,host:port...]": a fixed list of LTCs, each asked to
//              Describe its ranges (StaticRoutingSource);
//   ZooKeeper  "nova://zkhost:port[,zkhost:port...]/cluster": routes by the cluster's
//              configuration in ZooKeeper (client/zk_routing_source.h), following it as
//              the coordinator changes it.
//
// Thread safety: the functions are pure (Connect does network I/O); ClusterConnection is
// as thread-safe as NovaClient (fully).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/nova_client.h"
#include "common/status.h"

namespace nova::client {

inline constexpr std::string_view kUriScheme = "nova://";

struct ClusterLocator {
  std::vector<std::string> ltcs;  // static mode: "host:port" of each LTC
  std::string zk;                 // ZooKeeper mode: connect string "h:p[,h:p]"
  std::string cluster;            // ZooKeeper mode: the cluster's name (its znode root)
  bool zookeeper() const { return !zk.empty(); }
};

// Parses a cluster URI (forms above). InvalidArgument, naming the URI, for anything else:
// a missing scheme, an empty LTC list or host:port without a port, a ZooKeeper URI without
// a cluster name.
Result<ClusterLocator> ParseClusterUri(std::string_view uri);

// Splits "h:p,h:p" into addresses; InvalidArgument for an empty list or an entry that is
// not host:port with a numeric port. `what` names the setting in the message.
Result<std::vector<std::string>> ParseAddressList(std::string_view list, std::string_view what);

// The routing source of a ZooKeeper-managed cluster: a ZooKeeper session of its own and
// the cluster's configuration as it changes. Fails when no ZooKeeper session is
// established within `open_timeout` (Unavailable, "cannot reach ZooKeeper") or when the
// cluster does not exist in ZooKeeper (NotFound, naming nova_admin create-cluster: one
// read, once the session exists, waited for up to min(5 s, first_config_wait)). Its Fetch
// waits up to `first_config_wait` for the first configuration (Unavailable after that,
// naming ZooKeeper). `zk_auth`: the session's digest credential, as
// ClientOptions::zk_auth (reading needs none).
Result<std::unique_ptr<RoutingSource>> NewZooKeeperRoutingSource(
    const std::string& zk, const std::string& cluster,
    std::chrono::milliseconds first_config_wait = std::chrono::seconds(10),
    std::chrono::milliseconds open_timeout = kDefaultZkOpenTimeout,
    const std::string& zk_auth = "");

// A client and the routing source it reads (if the mode needs one of its own).
struct ClusterConnection {
  // Declared first so that it is destroyed after `client`, which uses it.
  std::unique_ptr<RoutingSource> routing;  // null in static mode (the client owns its own)
  std::unique_ptr<NovaClient> client;
};

// A client for `where`, Init()ed (its routing fetched). `options` supplies timeouts, pool
// sizes and the client secret (and, in ZooKeeper mode, zk_open_timeout and zk_auth); its ltcs/routing_source are
// replaced by `where`'s. Returns the error of the routing source (Unavailable naming
// ZooKeeper within zk_open_timeout when it cannot be reached, NotFound when the cluster
// does not exist in it) or of Init (e.g. NetworkError when no LTC answers), prefixed with
// where it was connecting to.
Result<std::unique_ptr<ClusterConnection>> ConnectToCluster(const ClusterLocator& where,
                                                            ClientOptions options);

}  // namespace nova::client
