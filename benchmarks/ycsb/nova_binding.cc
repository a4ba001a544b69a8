#include "benchmarks/ycsb/nova_binding.h"

namespace nova::ycsb {

Result<NovaBindingOptions> ParseNovaBindingOptions(const Properties& props) {
  NovaBindingOptions o;
  o.zk = props.Get("nova.zk");
  o.cluster = props.Get("nova.cluster");
  if (o.zk.empty()) {
    return Status::InvalidArgument("-db nova needs -p nova.zk=HOST:PORT (ZooKeeper)");
  }
  if (o.cluster.empty()) {
    return Status::InvalidArgument("-db nova needs -p nova.cluster=NAME");
  }
  return o;
}

// To wire the cluster client in:
//   1. class NovaBinding : public Binding owns the client (connected to options.zk /
//      options.cluster in OpenNovaBinding, which returns its Status on failure);
//   2. class NovaDB : public DB per thread maps Read/Update/Insert/Delete to the client's
//      get/put/delete of the key, the value being the record encoded by record_codec.h
//      (Update reads, merges and writes back unless all fields are given, as
//      EmbeddedUpdate in leveldb_binding.cc does), and Scan to the client's range scan;
//      NotFound -> ReturnCode::kNotFound, any other error -> kError;
//   3. link the client library into nova_ycsb_lib in benchmarks/ycsb/CMakeLists.txt.
Result<std::unique_ptr<Binding>> OpenNovaBinding(const Properties& props) {
  Result<NovaBindingOptions> options = ParseNovaBindingOptions(props);
  if (!options.ok()) return options.status();
  return Status::NotSupported(
      "nova binding not built yet: the Nova-LSM cluster client library is not linked into "
      "nova_ycsb (see docs/ycsb.md, 'The nova binding'); use -db leveldb or -db rocksdb");
}

}  // namespace nova::ycsb
