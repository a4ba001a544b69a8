// -db nova: the Nova-LSM cluster, through the cluster client library.
//
// The client library is being written; until it is linked in, OpenNovaBinding validates
// its properties and fails with "nova binding not built yet". Wiring the client in is
// local to nova_binding.cc (see the comment there and docs/ycsb.md).
#pragma once

#include <memory>
#include <string>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/properties.h"

namespace nova::ycsb {

inline constexpr const char* kNovaBindingHelp =
    "Nova-LSM cluster: -p nova.zk=HOST:PORT[,...] (ZooKeeper ensemble) "
    "-p nova.cluster=NAME (cluster name in ZooKeeper). NOT BUILT YET.";

// What the nova binding reads from the properties.
struct NovaBindingOptions {
  std::string zk;       // nova.zk: ZooKeeper connect string
  std::string cluster;  // nova.cluster: the cluster's name (its ZooKeeper root)
};
// InvalidArgument if nova.zk or nova.cluster is missing.
Result<NovaBindingOptions> ParseNovaBindingOptions(const Properties& props);

Result<std::unique_ptr<Binding>> OpenNovaBinding(const Properties& props);

}  // namespace nova::ycsb
