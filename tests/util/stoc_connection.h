// StocConnection: a StocClient of its own over its own exchange transport, connected to
// given StoCs: what integration tests and benchmarks that talk to real nova_stoc processes
// need on their side.
//
//   test::StocConnection conn;
//   test::StocConnectionOptions o;
//   o.node_name = "ltc-itest";
//   o.cluster_secret = ReadWholeFile(secret_file);
//   ASSERT_TRUE(conn.Init(o, {{1, stoc1->address()}, {2, stoc2->address()}}).ok());
//   stoc::StocTableStore store(conn.client(), ...);
//
// Thread safety: Init once; then client() and transport() as thread-safe as they are.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_client.h"

namespace nova::test {

struct StocConnectionOptions {
  std::string node_name;       // this side's name in the transport's handshake
  std::string cluster_secret;  // the StoCs' cluster secret (the file's bytes)
  int xchg_threads = 2;
  // Per-request timeout of the StocClient.
  std::chrono::milliseconds stoc_timeout{30000};
  // Reconnect backoff of the transport (0: the transport's default). Tests that kill and
  // restart StoCs want short ones.
  int reconnect_initial_backoff_ms = 0;
  int reconnect_max_backoff_ms = 0;
};

class StocConnection {
 public:
  StocConnection() = default;
  ~StocConnection();  // Shutdown()
  StocConnection(const StocConnection&) = delete;
  StocConnection& operator=(const StocConnection&) = delete;

  // Starts the transport and adds every StoC (id -> address). OK, or the first failure.
  Status Init(const StocConnectionOptions& options, const std::map<uint32_t, std::string>& stocs);

  // Shuts the transport down: no completion runs after it. Idempotent.
  void Shutdown();

  // REQUIRES: Init() succeeded.
  stoc::StocClient* client() { return client_.get(); }
  transport::Transport* transport() { return transport_.get(); }

 private:
  rpc::RpcEndpoint endpoint_;  // outlives transport_ and client_
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<stoc::StocClient> client_;
};

}  // namespace nova::test
