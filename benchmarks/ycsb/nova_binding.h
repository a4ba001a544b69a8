// -db nova: the Nova-LSM cluster, through the cluster client library (client/).
//
// One NovaClient per process, shared by every client thread (NovaClient is thread-safe and
// pipelines concurrent calls over its connections); each thread gets a NovaDB that maps
// YCSB's operations onto it with the embedded bindings' record encoding (record_codec.h).
//
// Where the cluster is: either a static list of LTCs (nova.ltc) or ZooKeeper (nova.zk +
// nova.cluster), whose routing comes from coordinator/ through
// client::NewZooKeeperRoutingSource (client/cluster_uri.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/properties.h"

namespace nova::ycsb {

inline constexpr const char* kNovaBindingHelp =
    "Nova-LSM cluster: -p nova.ltc=HOST:PORT[,...] (LTCs, static routing), or "
    "-p nova.zk=HOST:PORT[,...] -p nova.cluster=NAME (ZooKeeper); "
    "nova.timeout_ms (10000: per operation, retries included), nova.connections_per_ltc (2), "
    "nova.direct_calls (true: each thread's calls on a connection of its own whose answers it "
    "reads itself; false: all threads' calls pipelined on the shared connections), "
    "nova.spin_us (50: a direct call polls for its answer this long before sleeping, while "
    "that pays; 0: never), "
    "nova.client_secret_file (the LTCs' client secret, when they require one), "
    "nova.zk_auth_file (ZooKeeper digest credential user:password; reading needs none)";

// An LTC accepts --ltc_max_connections (256 by default) clients' connections; a benchmark
// process should not take a large share of them.
inline constexpr int64_t kMaxConnectionsPerLtc = 64;

// What the nova binding reads from the properties.
struct NovaBindingOptions {
  std::vector<std::string> ltcs;  // nova.ltc: static list of LTC client addresses
  std::string zk;                 // nova.zk: ZooKeeper connect string
  std::string cluster;            // nova.cluster: the cluster's name (its ZooKeeper root)
  std::chrono::milliseconds timeout{10000};  // nova.timeout_ms
  int connections_per_ltc = 2;               // nova.connections_per_ltc
  bool direct_calls = true;                  // nova.direct_calls (ClientOptions::direct_calls)
  int64_t spin_us = 50;                      // nova.spin_us (ClientOptions::spin)
  // nova.client_secret_file: the client secret LTCs started with --ltc_client_secret_file
  // require (ClientOptions::client_secret); empty: none.
  std::string client_secret_file;
  // nova.zk_auth_file: the ZooKeeper digest credential (ClientOptions::zk_auth); empty: none.
  std::string zk_auth_file;
  // The workload's fieldcount: an update carrying this many fields overwrites blindly.
  int64_t fieldcount = 10;
};
// InvalidArgument naming the property: neither nova.ltc nor nova.zk, both, nova.zk without
// nova.cluster, a malformed address list or number.
Result<NovaBindingOptions> ParseNovaBindingOptions(const Properties& props);

// Connects to the cluster (fetching its routing). NotFound / InvalidArgument naming the
// property for a secret file that cannot be read; the client's error on failure, e.g.
// NetworkError when no LTC answers, PermissionDenied when the LTCs refuse the client secret; Unavailable (naming ZooKeeper) when nova.zk gives no
// configuration within nova.timeout_ms.
Result<std::unique_ptr<Binding>> OpenNovaBinding(const Properties& props);

}  // namespace nova::ycsb
