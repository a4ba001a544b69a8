#include "client/cluster_uri.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "client/zk_routing_source.h"
#include "coordinator/config_store.h"

namespace nova::client {
namespace {

constexpr std::string_view kLtcPrefix = "ltc=";

bool IsHostPort(std::string_view a) {
  const size_t colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size()) return false;
  const std::string_view port = a.substr(colon + 1);
  return port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) != 0;
         });
}

}  // namespace

Result<std::vector<std::string>> ParseAddressList(std::string_view list, std::string_view what) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view a = list.substr(pos, comma - pos);
    if (!a.empty()) {
      if (!IsHostPort(a)) {
        return Status::InvalidArgument(std::string(what) + ": '" + std::string(a) +
                                       "' is not host:port");
      }
      out.emplace_back(a);
    }
    pos = comma + 1;
  }
  if (out.empty()) return Status::InvalidArgument(std::string(what) + ": no host:port given");
  return out;
}

Result<ClusterLocator> ParseClusterUri(std::string_view uri) {
  const auto bad = [uri](const std::string& why) {
    return Status::InvalidArgument("cluster URI '" + std::string(uri) + "': " + why +
                                   " (expected nova://ltc=host:port[,host:port] or "
                                   "nova://zkhost:port[,zkhost:port]/cluster)");
  };
  if (uri.substr(0, kUriScheme.size()) != kUriScheme) return bad("no nova:// scheme");
  const std::string_view rest = uri.substr(kUriScheme.size());
  ClusterLocator where;
  if (rest.substr(0, kLtcPrefix.size()) == kLtcPrefix) {
    auto ltcs = ParseAddressList(rest.substr(kLtcPrefix.size()), "ltc");
    if (!ltcs.ok()) return bad(ltcs.status().message());
    where.ltcs = std::move(ltcs.value());
    return where;
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return bad("a ZooKeeper URI needs a cluster name after '/'");
  }
  auto zk = ParseAddressList(rest.substr(0, slash), "ZooKeeper");
  if (!zk.ok()) return bad(zk.status().message());
  where.zk = std::string(rest.substr(0, slash));
  where.cluster = std::string(rest.substr(slash + 1));
  if (where.cluster.find('/') != std::string::npos) return bad("the cluster name has a '/'");
  return where;
}

namespace {

// A ZooKeeper session and the routing source over it, owned together.
class OwningZkRoutingSource final : public RoutingSource {
 public:
  OwningZkRoutingSource(coordinator::ConfigStoreOptions o, std::chrono::milliseconds wait)
      : store_(std::move(o)), source_(&store_, wait) {}
  ~OwningZkRoutingSource() override { store_.Shutdown(); }

  // Starts the session and fails fast on what no wait would cure: Unavailable when no
  // session is established within `open_timeout` (ZooKeeper unreachable, or too slow to
  // be of use), NotFound when the cluster's configuration node does not exist (one read;
  // it waits up to the store's op_timeout, as a ZooKeeper that gave a session is
  // reachable, if slow).
  Status Init(std::chrono::milliseconds open_timeout) {
    NOVA_RETURN_NOT_OK(store_.Init());
    const coordinator::ConfigStoreOptions& o = store_.options();
    if (!store_.WaitConnected(open_timeout)) {
      return Status::Unavailable("cannot reach ZooKeeper at " + o.zk_servers +
                                 ": no session within " + std::to_string(open_timeout.count()) +
                                 " ms (ClientOptions::zk_open_timeout)");
    }
    Result<coordinator::ClusterConfig> config = store_.ReadConfig();
    if (config.status().IsNotFound()) {
      return Status::NotFound("cluster '" + o.cluster + "' does not exist in ZooKeeper at " +
                              o.zk_servers + " (no " + store_.ConfigPath() +
                              "; create it with nova_admin create-cluster)");
    }
    if (!config.ok()) return config.status().Prepend("reading the cluster configuration");
    return Status::OK();
  }

  Result<RoutingTable> Fetch() override { return source_.Fetch(); }

 private:
  coordinator::ConfigStore store_;
  ZkRoutingSource source_;
};

}  // namespace

Result<std::unique_ptr<RoutingSource>> NewZooKeeperRoutingSource(
    const std::string& zk, const std::string& cluster,
    std::chrono::milliseconds first_config_wait, std::chrono::milliseconds open_timeout,
    const std::string& zk_auth) {
  coordinator::ConfigStoreOptions o;
  o.zk_servers = zk;
  o.cluster = cluster;
  o.zk_auth = zk_auth;
  o.op_timeout = std::min<std::chrono::milliseconds>(o.op_timeout, first_config_wait);
  auto source = std::make_unique<OwningZkRoutingSource>(std::move(o), first_config_wait);
  NOVA_RETURN_NOT_OK_PREPEND(source->Init(open_timeout),
                             "ZooKeeper " + zk + ", cluster " + cluster);
  return std::unique_ptr<RoutingSource>(std::move(source));
}

Result<std::unique_ptr<ClusterConnection>> ConnectToCluster(const ClusterLocator& where,
                                                            ClientOptions options) {
  auto conn = std::make_unique<ClusterConnection>();
  std::string target;
  if (where.zookeeper()) {
    auto source = NewZooKeeperRoutingSource(where.zk, where.cluster, options.timeout,
                                            options.zk_open_timeout, options.zk_auth);
    if (!source.ok()) return source.status();
    conn->routing = std::move(source.value());
    options.ltcs.clear();
    options.routing_source = conn->routing.get();
    target = "cluster " + where.cluster + " at ZooKeeper " + where.zk;
  } else {
    options.ltcs = where.ltcs;
    options.routing_source = nullptr;
    target = "LTCs";
    for (const std::string& a : where.ltcs) target += " " + a;
  }
  conn->client = std::make_unique<NovaClient>(std::move(options));
  Status s = conn->client->Init();
  if (!s.ok()) return s.Prepend("connecting to " + target);
  return conn;
}

}  // namespace nova::client
