#include "common/rpc/rpc_endpoint.h"

#include <future>

#include <glog/logging.h>

namespace nova::rpc {

// ---- Responder ---------------------------------------------------------------------

Responder::Responder(Responder&& o) noexcept
    : endpoint_(o.endpoint_), peer_(o.peer_), type_(o.type_), request_id_(o.request_id_),
      done_(o.done_) {
  o.done_ = true;
}

Responder::~Responder() {
  if (!done_) ReplyError(Status::Aborted("request dropped without a reply"));
}

void Responder::Reply(std::string_view payload) {
  if (done_) return;
  done_ = true;
  endpoint_->SendResponse(peer_, type_, request_id_, Status::OK(), payload);
}

void Responder::ReplyError(const Status& error) {
  if (done_) return;
  done_ = true;
  endpoint_->SendResponse(peer_, type_, request_id_,
                          error.ok() ? Status::IllegalState("error reply with OK") : error, {});
}

// ---- RpcEndpoint -------------------------------------------------------------------

RpcEndpoint::RpcEndpoint(const RpcEndpointOptions& options) : options_(options) {
  timeout_thread_ = std::thread([this] { TimeoutLoop(); });
}

RpcEndpoint::~RpcEndpoint() {
  std::unordered_map<uint64_t, Pending> pending;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    pending.swap(pending_);
    deadlines_.clear();
    cv_.NotifyAll();
  }
  timeout_thread_.join();
  for (auto& [id, p] : pending) p.done(Status::Aborted("rpc endpoint destroyed"), {});
}

void RpcEndpoint::RegisterService(wire::TypeRange range, RpcService* service, ThreadPool* pool) {
  for (const Route& r : routes_) {
    CHECK(range.last < r.range.first || range.first > r.range.last)
        << "overlapping rpc service ranges";
  }
  routes_.push_back(Route{range, service, pool});
}

void RpcEndpoint::AddObserver(EndpointObserver* observer) { observers_.push_back(observer); }

uint64_t RpcEndpoint::pending_calls() const {
  MutexLock lock(&mu_);
  return pending_.size();
}

void RpcEndpoint::Call(PeerId peer, uint16_t type, std::string_view payload, Deadline deadline,
                       ResponseCallback done, int lane) {
  if (payload.size() > options_.max_payload_bytes) {
    return done(Status::InvalidArgument("request payload of " + std::to_string(payload.size()) +
                                        " bytes exceeds the limit"),
                {});
  }
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (stopping_) return done(Status::Aborted("rpc endpoint stopping"), {});
    id = next_request_id_++;
    Pending& p = pending_[id];
    p.peer = peer;
    p.done = std::move(done);
    if (deadline.when() != MonoTime::max()) {
      p.deadline = deadlines_.emplace(deadline.when(), id);
      // The timeout thread wakes by itself by then, or earlier: no wake-up per call.
      if (deadline.when() < timeout_wakes_at_) {
        timeout_wakes_at_ = deadline.when();
        cv_.NotifyAll();
      }
    }
  }
  std::string msg = wire::EncodeMessage(type, id, payload);
  Status s = transport_->Send(peer, msg, [this, id](const Status& sent) {
    // A failed send means no response will come.
    if (sent.ok()) return;
    Pending p;
    if (TakePending(id, &p)) p.done(sent, {});
  }, lane);
  if (!s.ok()) {
    Pending p;
    if (TakePending(id, &p)) p.done(s, {});
  }
}

Status RpcEndpoint::Notify(PeerId peer, uint16_t type, std::string_view payload, int lane) {
  if (payload.size() > options_.max_payload_bytes) {
    return Status::InvalidArgument("notification payload exceeds the limit");
  }
  std::string msg = wire::EncodeMessage(type, Responder::kNotificationId, payload);
  return transport_->Send(peer, msg, [](const Status&) {}, lane);
}

Result<std::string> RpcEndpoint::CallSync(PeerId peer, uint16_t type, std::string_view payload,
                                          std::chrono::milliseconds timeout, int lane) {
  auto promise = std::make_shared<std::promise<std::pair<Status, std::string>>>();
  auto future = promise->get_future();
  Call(peer, type, payload, Deadline::After(timeout),
       [promise](const Status& s, std::string p) { promise->set_value({s, std::move(p)}); }, lane);
  auto [status, response] = future.get();
  if (!status.ok()) return status;
  return std::move(response);
}

RpcEndpoint::Pending RpcEndpoint::ErasePendingLocked(
    std::unordered_map<uint64_t, Pending>::iterator it) {
  Pending p = std::move(it->second);
  pending_.erase(it);
  if (p.deadline) deadlines_.erase(*p.deadline);
  return p;
}

bool RpcEndpoint::TakePending(uint64_t request_id, Pending* out) {
  MutexLock lock(&mu_);
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return false;
  *out = ErasePendingLocked(it);
  return true;
}

void RpcEndpoint::TimeoutLoop() {
  // Sleeps at most this long, so a call whose deadline is later need not wake it.
  constexpr auto kCheckInterval = std::chrono::milliseconds(100);
  MutexLock lock(&mu_);
  while (!stopping_) {
    // Copy the time: the entry may be erased while we wait.
    const MonoTime now = MonoNow();
    const MonoTime first = deadlines_.empty() ? MonoTime::max() : deadlines_.begin()->first;
    if (first > now) {
      timeout_wakes_at_ = std::min(first, now + kCheckInterval);
      cv_.WaitUntil(&lock, timeout_wakes_at_);
      continue;
    }
    auto it = pending_.find(deadlines_.begin()->second);
    Pending p = ErasePendingLocked(it);  // every deadline entry has its pending call
    lock.Unlock();
    p.done(Status::TimedOut("no response before the deadline"), {});
    lock.Lock();
  }
}

void RpcEndpoint::SendResponse(PeerId peer, uint16_t type, uint64_t request_id,
                               const Status& error, std::string_view payload) {
  std::string msg = error.ok()
                        ? wire::EncodeMessage(type, request_id, payload, wire::kFlagResponse)
                        : wire::EncodeErrorResponse(type, request_id, error);
  Status s = transport_->Send(peer, msg, [](const Status&) {});
  // The peer is gone: its calls fail on its side through peer-down.
  LOG_IF(INFO, !s.ok()) << "could not answer request " << request_id << ": " << s.ToString();
}

void RpcEndpoint::OnPeerUp(const transport::PeerInfo& peer) {
  for (auto* o : observers_) o->OnPeerUp(peer);
}

void RpcEndpoint::OnPeerDown(PeerId peer, const Status& why) {
  std::vector<Pending> failed;
  {
    MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->second.peer == peer) failed.push_back(ErasePendingLocked(it));
      it = next;
    }
  }
  const Status s = Status::NetworkError("peer down: " + why.ToString());
  for (auto& p : failed) p.done(s, {});
  for (auto* o : observers_) o->OnPeerDown(peer, why);
}

void RpcEndpoint::OnMessage(PeerId peer, std::string& message) {
  wire::MessageHeader h;
  std::string_view payload;
  Status s = wire::DecodeMessage(message, &h, &payload, options_.max_payload_bytes);
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 100) << "dropping malformed message from peer " << peer << ": "
                              << s.ToString();
    return;
  }
  if (h.is_response()) {
    Pending p;
    if (!TakePending(h.request_id, &p)) return;  // timed out or unknown: drop
    if (h.is_error()) {
      Status remote = wire::DecodeErrorPayload(payload);
      if (remote.ok()) remote = Status::Corruption("malformed error response");
      return p.done(remote, {});
    }
    return p.done(Status::OK(), std::string(payload));
  }
  for (const Route& r : routes_) {
    if (!r.range.Contains(h.type)) continue;
    Responder responder(this, peer, h.type, h.request_id);
    if (r.pool == nullptr) {
      return r.service->HandleRequest(peer, h.type, std::string(payload), std::move(responder));
    }
    // The task owns the responder; if the pool refuses the task, the responder is still here.
    auto shared = std::make_shared<Responder>(std::move(responder));
    RpcService* service = r.service;
    const uint16_t type = h.type;
    Status queued = r.pool->Submit(
        [service, peer, type, shared, body = std::string(payload)]() mutable {
          service->HandleRequest(peer, type, std::move(body), std::move(*shared));
        });
    if (!queued.ok()) shared->ReplyError(queued.Prepend("server busy"));
    return;
  }
  if (h.request_id == Responder::kNotificationId) {
    LOG_EVERY_N(WARNING, 100) << "dropping notification of unknown type " << h.type;
    return;
  }
  SendResponse(peer, h.type, h.request_id,
               Status::NotSupported("unknown message type " + std::to_string(h.type)), {});
}

void RpcEndpoint::OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) {
  for (auto* o : observers_) {
    if (o->OnWriteWithImm(peer, imm, length)) return;
  }
  LOG_EVERY_N(WARNING, 100) << "unclaimed write-with-immediate " << imm << " from peer " << peer;
}

}  // namespace nova::rpc
