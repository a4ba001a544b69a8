#include "logc/client/log_client_internal.h"

#include <future>

namespace nova::logc::internal {

std::shared_ptr<Staging> NewStaging(transport::Transport* transport, uint64_t bytes,
                                    Status* error) {
  auto st = std::make_shared<Staging>();
  st->mem.reset(new char[bytes]);
  auto mr = transport->RegisterMemory(st->mem.get(), bytes, transport::kLocalOnly);
  if (!mr.ok()) {
    *error = mr.status().Prepend("registering a log staging buffer");
    return nullptr;
  }
  st->transport = transport;
  st->mr = mr.value();
  st->size = bytes;
  return st;
}

Status WaitOp(const std::shared_ptr<Staging>& staging,
              const std::function<Status(transport::Completion)>& post,
              std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<Status>>();
  auto future = done->get_future();
  staging->inflight.fetch_add(1);
  Status s = post([done, staging](const Status& result) {
    staging->inflight.fetch_sub(1);
    done->set_value(result);
  });
  if (!s.ok()) {
    staging->inflight.fetch_sub(1);
    return s;
  }
  if (future.wait_for(timeout) != std::future_status::ready) {
    return Status::TimedOut("one-sided op not done within the timeout");
  }
  return future.get();
}

}  // namespace nova::logc::internal
