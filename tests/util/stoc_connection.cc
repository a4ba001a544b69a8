#include "tests/util/stoc_connection.h"

namespace nova::test {

StocConnection::~StocConnection() { Shutdown(); }

void StocConnection::Shutdown() {
  if (transport_) transport_->Shutdown();
}

Status StocConnection::Init(const StocConnectionOptions& options,
                            const std::map<uint32_t, std::string>& stocs) {
  transport::TransportOptions to;
  to.node_name = options.node_name;
  to.cluster_secret = options.cluster_secret;
  to.xchg_threads = options.xchg_threads;
  if (options.reconnect_initial_backoff_ms > 0) {
    to.reconnect_initial_backoff_ms = options.reconnect_initial_backoff_ms;
  }
  if (options.reconnect_max_backoff_ms > 0) {
    to.reconnect_max_backoff_ms = options.reconnect_max_backoff_ms;
  }
  auto t = transport::NewTransport(to, &endpoint_);
  if (!t.ok()) return t.status();
  transport_ = std::move(t.value());
  endpoint_.Attach(transport_.get());
  // Before the transport starts: the client registers its handlers on the endpoint.
  client_ = std::make_unique<stoc::StocClient>(&endpoint_,
                                               stoc::StocClientOptions{options.stoc_timeout});
  NOVA_RETURN_NOT_OK(transport_->Init());
  NOVA_RETURN_NOT_OK(transport_->Start());
  for (const auto& [id, address] : stocs) NOVA_RETURN_NOT_OK(client_->AddStoc(id, address));
  return Status::OK();
}

}  // namespace nova::test
